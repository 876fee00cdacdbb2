"""The real gateway binary, run with a generated config on 127.0.0.1.

`Gateway` writes a config (listener and admin on port 0, the audit trail to a
file), starts `portcullis run`, reads the ports it bound from its log, waits
for `/readyz`, and afterwards gives the audit events, the metrics and the log.
`check_config` runs `portcullis check` on a config, and `start_only` tries a
`portcullis run` that is expected to refuse its config.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A loaded 2-core machine can take long to start a debug build.
READY_TIMEOUT_S = float(os.environ.get("PORTCULLIS_BENCH_START_TIMEOUT", "180"))
STOP_TIMEOUT_S = 10.0

_ADMIN = re.compile(r"\badmin listening\b.*?\baddr=(\S+)")
_LISTENER = re.compile(r"\blistening\b.*?\baddr=(\S+)")
_RELOADED = re.compile(r"config reloaded|config reload (refused|failed)")


class GatewayError(RuntimeError):
    """The gateway did not start as asked (its log's end is in the message)."""


@dataclass
class UpstreamConf:
    id: str
    name: str
    url: str
    policy: str = "untrusted"
    prefix: str | None = None
    ca_file: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RouteConf:
    path: str
    upstreams: list[str]  # one: a plain route; several: a federated one
    name: str | None = None


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is a JSON string for what we write
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {type(v).__name__}")


def config_text(upstreams: list[UpstreamConf], routes: list[RouteConf], audit_path: Path | None,
                extra: str = "") -> str:
    lines = [
        "[[listener]]",
        'address = "127.0.0.1:0"',
        "",
        "[admin]",
        'address = "127.0.0.1:0"',
        "",
        "[log]",
        'level = "info"',
        "",
    ]
    if audit_path is not None:
        lines += ["[audit]", 'sink = "file"', f"path = {toml_value(str(audit_path))}", ""]
    else:
        lines += ["[audit]", 'sink = "off"', ""]
    for u in upstreams:
        lines += ["[[upstream]]", f"id = {toml_value(u.id)}", f"name = {toml_value(u.name)}",
                  f"url = {toml_value(u.url)}", f"policy = {toml_value(u.policy)}"]
        if u.prefix is not None:
            lines.append(f"prefix = {toml_value(u.prefix)}")
        if u.ca_file is not None:
            lines.append(f"ca_file = {toml_value(u.ca_file)}")
        for k, v in u.extra.items():
            lines.append(f"{k} = {toml_value(v)}")
        lines.append("")
    for r in routes:
        lines += ["[[route]]", f"path = {toml_value(r.path)}"]
        if len(r.upstreams) == 1 and r.name is None:
            lines.append(f"upstream = {toml_value(r.upstreams[0])}")
        else:
            lines.append(f"upstreams = {toml_value(r.upstreams)}")
            if r.name is not None:
                lines.append(f"name = {toml_value(r.name)}")
        lines.append("")
    return "\n".join(lines) + extra


def binary() -> Path:
    path = Path(os.environ.get("PORTCULLIS_BIN") or "target/release/portcullis").resolve()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise GatewayError(f"no portcullis binary at {path}: build it (cargo build --release) or set PORTCULLIS_BIN")
    return path


class Gateway:
    def __init__(self, upstreams: list[UpstreamConf], routes: list[RouteConf], extra_config: str = "",
                 workdir: Path | None = None):
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="portcullis-bench-")
        self.dir = Path(workdir or self._tmp.name)  # type: ignore[union-attr]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.audit_path = self.dir / "audit.jsonl"
        self.config_path = self.dir / "gateway.toml"
        self.upstreams, self.routes, self.extra_config = upstreams, routes, extra_config
        self.config_path.write_text(config_text(upstreams, routes, self.audit_path, extra_config))
        self.log_path = self.dir / "gateway.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(binary()), "run", "--config", str(self.config_path), "--log-format", "text"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.dir,
            env={**os.environ, "NO_COLOR": "1"},
        )
        try:
            bound = self._bound()
            self.listener = bound["listener"]
            self.admin = bound["admin"]
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def url(self, path: str) -> str:
        return f"http://{self.listener}{path}"

    @property
    def port(self) -> int:
        return int(self.listener.rsplit(":", 1)[1])

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _bound(self) -> dict[str, str]:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            found: dict[str, str] = {}
            for line in self.log_text().splitlines():
                if m := _ADMIN.search(line):
                    found["admin"] = m.group(1)
                elif m := _LISTENER.search(line):
                    found.setdefault("listener", m.group(1))
            if "admin" in found and "listener" in found:
                return found
            if self.proc.poll() is not None:
                raise GatewayError(f"portcullis run exited ({self.proc.returncode}):\n{self.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise GatewayError(f"portcullis run did not listen in {READY_TIMEOUT_S:.0f}s:\n{self.log_text()[-3000:]}")
            time.sleep(0.02)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise GatewayError(f"portcullis run exited ({self.proc.returncode}):\n{self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://{self.admin}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.02)
        raise GatewayError(f"portcullis run not ready in {READY_TIMEOUT_S:.0f}s:\n{self.log_text()[-3000:]}")

    def reload(self, upstreams: list[UpstreamConf], routes: list[RouteConf], extra_config: str) -> str:
        """Rewrite the config file and reload it as an operator does (SIGHUP);
        the log lines the reload wrote, up to its outcome (`config reloaded`,
        `config reload refused`, `config reload failed`)."""
        self.upstreams, self.routes, self.extra_config = upstreams, routes, extra_config
        self.config_path.write_text(config_text(upstreams, routes, self.audit_path, extra_config))
        start = len(self.log_text())
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            written = self.log_text()[start:]
            if _RELOADED.search(written):
                return written
            if self.proc.poll() is not None:
                raise GatewayError(f"portcullis run exited ({self.proc.returncode}):\n{self.log_text()[-3000:]}")
            time.sleep(0.02)
        raise GatewayError(f"no reload outcome in the log in {READY_TIMEOUT_S:.0f}s:\n{self.log_text()[-3000:]}")

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of the admin listener's Prometheus text, by name and labels."""
        with urllib.request.urlopen(f"http://{self.admin}/metrics", timeout=5) as r:
            text = r.read().decode()
        return parse_metrics(text)

    def audit_events(self, settle_s: float = 0.05) -> list[dict[str, Any]]:
        """The audit trail so far. Lines are written off the request path, so the
        file is read until it stops growing."""
        last = -1
        size = 0
        for _ in range(40):
            try:
                size = self.audit_path.stat().st_size
            except OSError:
                size = 0
            if size == last:
                break
            last = size
            time.sleep(settle_s)
        events = []
        try:
            text = self.audit_path.read_text(errors="replace")
        except OSError:
            return []
        for line in text.splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT_S)
        self._log.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def parse_metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)", line)
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            continue
    return out


@dataclass
class ConfigVerdict:
    """What the binary says of a config: `portcullis check` and a start-up."""

    check_status: int
    check_output: str
    starts: bool
    start_output: str


def judge_config(upstreams: list[UpstreamConf], routes: list[RouteConf], extra_config: str = "") -> ConfigVerdict:
    """`portcullis check` on the config, then `portcullis run` on it for at most
    a few seconds: whether it starts serving, and what it said while starting."""
    with tempfile.TemporaryDirectory(prefix="portcullis-bench-") as d:
        path = Path(d) / "gateway.toml"
        path.write_text(config_text(upstreams, routes, None, extra_config))
        check = subprocess.run([str(binary()), "check", "--config", str(path)], capture_output=True, text=True,
                               timeout=60, env={**os.environ, "NO_COLOR": "1"})
        try:
            gw = Gateway(upstreams, routes, extra_config, workdir=Path(d) / "run")
        except GatewayError as e:
            return ConfigVerdict(check.returncode, check.stdout + check.stderr, False, str(e))
        except FileNotFoundError:
            raise
        log = gw.log_text()
        gw.stop()
        return ConfigVerdict(check.returncode, check.stdout + check.stderr, True, log)
