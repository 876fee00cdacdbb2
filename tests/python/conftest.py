"""Fixtures: a real `portcullis demo` process (gateway + built-in example MCP server).

The binary is taken from $PORTCULLIS_BIN, or <repo>/target/debug/portcullis (run
`cargo build` first). Every port is picked free on 127.0.0.1 and the gateway gets a
config file written to a temporary directory.
"""

from __future__ import annotations

import os
import signal
import socket
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


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _binary() -> Path:
    path = Path(os.environ.get("PORTCULLIS_BIN") or REPO / "target" / "debug" / "portcullis")
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(
            f"portcullis binary not found at {path}: run `cargo build` in {REPO} "
            "or set PORTCULLIS_BIN to the binary to test",
            pytrace=False,
        )
    return path


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
    gw_port, admin_port, upstream_port = _free_ports(3)
    workdir = tmp_path_factory.mktemp("portcullis")
    config = workdir / "gateway.toml"
    config.write_text(
        f"""\
[[listener]]
address = "127.0.0.1:{gw_port}"

[admin]
address = "127.0.0.1:{admin_port}"

[[upstream]]
id = "rooms"
name = "Room booking (demo)"
url = "http://127.0.0.1:{upstream_port}/mcp"

[[route]]
path = "/mcp/rooms"
upstream = "rooms"
"""
    )
    log_path = workdir / "portcullis.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(binary), "demo", "--config", str(config), "--upstream", f"127.0.0.1:{upstream_port}"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    gw = Gateway(
        url=f"http://127.0.0.1:{gw_port}/mcp/rooms",
        admin_url=f"http://127.0.0.1:{admin_port}",
        upstream_url=f"http://127.0.0.1:{upstream_port}/mcp",
        log_path=log_path,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"portcullis demo exited with status {proc.returncode} before it was ready:\n{gw.log_tail()}",
                    pytrace=False,
                )
            if _http_status(f"{gw.admin_url}/readyz") == 200:
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"portcullis demo not ready after {READY_TIMEOUT_S:.0f}s "
                    f"({gw.admin_url}/readyz never answered 200):\n{gw.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.1)
        yield gw
    finally:
        _stop(proc)
        log.close()
