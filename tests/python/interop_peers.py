"""Real peers for the cross-SDK tests: the test MCP servers of tests/interop/servers
(TypeScript SDK v2 on the Node.js that `npm ci` put in tests/interop/node_modules, and
the Python SDK server on this venv's Python) and gateway processes in front of them.

Without Node.js and the npm packages the tests that need them are skipped, unless
PORTCULLIS_REQUIRE_PEERS=1 (the README's test command sets it), where they fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, _binary, _stop, bound_addresses

INTEROP = REPO / "tests" / "interop"
NODE = INTEROP / "node_modules" / ".bin" / "node"
READY_TIMEOUT_S = 20.0
GATEWAY_MAX_ROUNDS = 3  # `[state] max_rounds` of every test gateway
LISTENING = re.compile(rb"listening (http://127\.0\.0\.1:\d+/mcp)")


def require_node() -> Path:
    if NODE.exists() and (INTEROP / "node_modules" / "@modelcontextprotocol" / "server").is_dir():
        return NODE
    message = f"Node.js 22 and the TypeScript SDKs are not installed: run `npm ci` in {INTEROP}"
    if os.environ.get("PORTCULLIS_REQUIRE_PEERS") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@dataclass
class Process:
    proc: subprocess.Popen
    log_path: Path

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def _wait(process: Process, ready, what: str):
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        found = ready()
        if found:
            return found
        if process.proc.poll() is not None:
            pytest.fail(f"exited with {process.proc.returncode} before {what}:\n{process.tail()}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {READY_TIMEOUT_S:.0f}s:\n{process.tail()}", pytrace=False)
        time.sleep(0.05)


@contextmanager
def _spawn(args: list[str], env: dict[str, str] | None = None, files: dict[str, str] | None = None) -> Iterator[Process]:
    """Runs `args` in a fresh temporary directory that holds `files` ({name: text}) and its log."""
    with tempfile.TemporaryDirectory(prefix="portcullis-interop-") as tmp:
        workdir = Path(tmp)
        for name, body in (files or {}).items():
            (workdir / name).write_text(body)
        log_path = workdir / "output.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env={**os.environ, **(env or {})},
            )
            try:
                yield Process(proc, log_path)
            finally:
                _stop(proc)


@contextmanager
def mcp_server(script: str) -> Iterator[str]:
    """One of tests/interop/servers/* running; yields its MCP URL."""
    runtime = str(require_node()) if script.endswith(".mjs") else sys.executable
    with _spawn([runtime, str(INTEROP / "servers" / script)]) as process:

        def listening() -> str | None:
            match = LISTENING.search(process.log_path.read_bytes())
            return match.group(1).decode() if match else None

        yield _wait(process, listening, "listening line")


@contextmanager
def demo_server() -> Iterator[str]:
    """The gateway binary's own demo MCP server (`portcullis demo-upstream`, rmcp,
    2026-07-28 only: `book_room`, `get_room`, `room_report`); yields its MCP URL."""
    with _spawn([str(_binary()), "demo-upstream", "--listen", "127.0.0.1:0"]) as process:
        yield "http://" + bound_addresses(process.log_path, process.proc, ("demo",))["demo"] + "/mcp"


def keygen(kid: str = "interop") -> str:
    out = subprocess.run([str(_binary()), "keygen", "--id", kid], check=True, capture_output=True, text=True)
    return out.stdout.strip()


@dataclass(frozen=True)
class Gateway:
    base: str
    admin: str = ""  # http://127.0.0.1:ADMIN (/metrics, /readyz)
    log_path: Path | None = None  # the process's output, while it runs

    def url(self, upstream: str) -> str:
        return f"{self.base}/mcp/{upstream}"

    def at(self, path: str) -> str:
        """The URL of a route configured by path (`extra` TOML)."""
        return f"{self.base}{path}"

    @staticmethod
    def upstream_name(upstream: str) -> str:
        return f"Interop {upstream}"


@contextmanager
def gateway(upstreams: dict[str, str], state_keys: str | None = None, extra: str = "") -> Iterator[Gateway]:
    """A `portcullis run` in front of `upstreams` ({id: url}), each routed at /mcp/<id>;
    `extra` is appended to the config (more upstreams, routes over several of them)."""
    lines = [
        "[[listener]]",
        'address = "127.0.0.1:0"',
        "[admin]",
        'address = "127.0.0.1:0"',
        "[state]",
        f"max_rounds = {GATEWAY_MAX_ROUNDS}",
    ]
    if state_keys:
        lines.append('keys_env = "PORTCULLIS_STATE_KEYS"')
    for uid, url in upstreams.items():
        lines += ["[[upstream]]", f'id = "{uid}"', f'name = "{Gateway.upstream_name(uid)}"', f'url = "{url}"']
        lines += ["[[route]]", f'path = "/mcp/{uid}"', f'upstream = "{uid}"']
    env = {"PORTCULLIS_STATE_KEYS": state_keys} if state_keys else {}
    files = {"gateway.toml": "\n".join(lines) + "\n" + extra}
    with _spawn([str(_binary()), "run", "--config", "gateway.toml"], env, files) as process:
        bound = bound_addresses(process.log_path, process.proc, ("listener", "admin"))
        _wait(process, lambda: _ready(f"http://{bound['admin']}/readyz"), "200 from /readyz")
        yield Gateway(f"http://{bound['listener']}", f"http://{bound['admin']}", process.log_path)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False
