"""Fixtures: a real `portcullis demo` process (gateway + built-in example MCP server).

The binary is taken from $PORTCULLIS_BIN, or <repo>/target/debug/portcullis (run
`cargo build` first). Every process listens on port 0 of 127.0.0.1 and the tests
read the port the OS picked from its log (`bound_addresses`), so no port can be
taken between choosing it and binding it; the gateway gets a config file written to
a temporary directory.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Gateway:
    url: str  # the MCP endpoint through the gateway: http://127.0.0.1:GW/mcp/rooms
    admin_url: str  # http://127.0.0.1:ADMIN
    upstream_url: str  # the demo MCP server itself, behind the gateway
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# What the processes log once they listen: the gateway's `listening … addr=`
# (one per listener) and `admin listening addr=`, the demo server's URL.
_ADMIN = re.compile(r"\badmin listening\b.*?\baddr=(\S+)")
_LISTENER = re.compile(r"\blistening\b.*?\baddr=(\S+)")
_DEMO = re.compile(r"demo MCP server on http://([^/\s]+)")


def bound_addresses(log_path: Path, proc: subprocess.Popen, want: tuple[str, ...]) -> dict[str, str]:
    """Where a process started on port 0 listens, as `host:port` by kind
    ("listener", "admin", "demo"), once its log names every kind in `want`."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        found: dict[str, str] = {}
        for line in text.splitlines():
            if m := _ADMIN.search(line):
                found["admin"] = m.group(1)
            elif m := _LISTENER.search(line):
                found.setdefault("listener", m.group(1))
            elif m := _DEMO.search(line):
                found.setdefault("demo", m.group(1))
        if all(k in found for k in want):
            return found
        if proc.poll() is not None:
            pytest.fail(f"exited ({proc.returncode}) before it listened:\n{text[-4000:]}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"no {want} in the log after {READY_TIMEOUT_S:.0f}s:\n{text[-4000:]}", pytrace=False)
        time.sleep(0.05)


def _binary() -> Path:
    path = Path(os.environ.get("PORTCULLIS_BIN") or REPO / "target" / "debug" / "portcullis")
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(
            f"portcullis binary not found at {path}: run `cargo build` in {REPO} "
            "or set PORTCULLIS_BIN to the binary to test",
            pytrace=False,
        )
    return path


class SharedTmp:
    """Folders for sandboxed stdio programs: when the tests run as root, such a program
    runs as an unprivileged user (`[upstream.sandbox] user`, nobody by default), and
    pytest's own temporary folders (mode 0700, root's) are closed to it. These are
    under one folder every user may enter, each writable by every user."""

    def __init__(self) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="portcullis-tests-"))
        self.root.chmod(0o755)
        self.made = 0

    def mktemp(self, name: str) -> Path:
        self.made += 1
        path = self.root / f"{name}{self.made}"
        path.mkdir()
        path.chmod(0o777)
        return path


@pytest.fixture(scope="session")
def shared_tmp_factory():
    import shutil

    shared = SharedTmp()
    yield shared
    shutil.rmtree(shared.root, ignore_errors=True)


@pytest.fixture
def shared_tmp(shared_tmp_factory: SharedTmp) -> Path:
    return shared_tmp_factory.mktemp("t")


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory):
    binary = _binary()
    workdir = tmp_path_factory.mktemp("portcullis")
    upstream_log = (workdir / "demo-upstream.log").open("wb")
    upstream_proc = subprocess.Popen(
        [str(binary), "demo-upstream", "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=upstream_log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    upstream = bound_addresses(workdir / "demo-upstream.log", upstream_proc, ("demo",))["demo"]
    config = workdir / "gateway.toml"
    config.write_text(
        f"""\
[[listener]]
address = "127.0.0.1:0"

[admin]
address = "127.0.0.1:0"

[[upstream]]
id = "rooms"
name = "Room booking (demo)"
url = "http://{upstream}/mcp"

[[route]]
path = "/mcp/rooms"
upstream = "rooms"
"""
    )
    log_path = workdir / "portcullis.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(binary), "run", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    bound = bound_addresses(log_path, proc, ("listener", "admin"))
    gw = Gateway(
        url=f"http://{bound['listener']}/mcp/rooms",
        admin_url=f"http://{bound['admin']}",
        upstream_url=f"http://{upstream}/mcp",
        log_path=log_path,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"portcullis run exited with status {proc.returncode} before it was ready:\n{gw.log_tail()}",
                    pytrace=False,
                )
            if _http_status(f"{gw.admin_url}/readyz") == 200:
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"portcullis run not ready after {READY_TIMEOUT_S:.0f}s "
                    f"({gw.admin_url}/readyz never answered 200):\n{gw.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.1)
        yield gw
    finally:
        _stop(proc)
        _stop(upstream_proc)
        log.close()
        upstream_log.close()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of a Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        m = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if not m:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1)))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(2))
    return 0.0


def wait_ready(readyz: str, proc: subprocess.Popen, log: Path) -> None:
    """Until the gateway's `/readyz` (the URL) answers 200; fails with its log's end
    if it exits first or is not ready within 15 s."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the gateway exited ({proc.returncode}):\n{log.read_text(errors='replace')[-4000:]}",
                        pytrace=False)
        try:
            with urllib.request.urlopen(readyz, timeout=1) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    pytest.fail(f"the gateway was not ready:\n{log.read_text(errors='replace')[-4000:]}", pytrace=False)
