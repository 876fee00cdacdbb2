"""Several gateway replicas behind a real load balancer, sharing a real Redis.

- `redis_server()`: a `redis-server` (Debian's) on a loopback port, no persistence.
- `replica()`: one `portcullis run` with the cluster's config: shared `[state]` keys,
  the single-use store and the rate limits in that Redis.
- `balancer()`: nginx (Debian's) in front of the replicas, configured by
  deploy/nginx/replicas.conf as the book prints it: only the replicas' addresses and the
  listening port are replaced, and each response gets an `X-Replica` header (nginx's
  `$upstream_addr`) so a test can see which replica answered. nginx is handed its
  listening socket already bound (nginx's `NGINX` inherited-sockets variable), so no
  port can be taken between choosing and binding it.

Without redis-server or nginx the tests are skipped, unless PORTCULLIS_REQUIRE_PEERS=1
(the test command), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO, _binary, _stop, bound_addresses
from interop_peers import Process, _ready, _spawn, _wait

NGINX_CONF = REPO / "deploy" / "nginx" / "replicas.conf"
READY_TIMEOUT_S = 20.0
WORKER_STARTED = b"start worker process"


def require(program: str) -> str:
    path = shutil.which(program) or next(
        (p for p in (f"/usr/sbin/{program}", f"/usr/bin/{program}") if os.access(p, os.X_OK)), None
    )
    if path:
        return path
    message = f"{program} is not installed (Debian: apt-get install {program})"
    if os.environ.get("PORTCULLIS_REQUIRE_PEERS") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server on 127.0.0.1; yields its host:port. (redis-server cannot take a
    bound socket, so a free port is chosen first; a lost race is tried again.)"""
    program = require("redis-server")
    for _ in range(3):
        port = _free_port()
        with _spawn(
            [program, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        ) as process:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while process.proc.poll() is None and not _answers_ping(port) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _answers_ping(port):
                yield f"127.0.0.1:{port}"
                return
            if "Address already in use" not in process.tail():
                pytest.fail(f"redis-server did not come up:\n{process.tail()}", pytrace=False)
    pytest.fail("redis-server found no free port in three tries", pytrace=False)


@dataclass
class Replica:
    process: Process
    base: str  # http://127.0.0.1:PORT
    admin: str  # http://127.0.0.1:ADMIN
    addr: str = field(init=False)  # 127.0.0.1:PORT, as nginx's $upstream_addr names it

    def __post_init__(self) -> None:
        self.addr = self.base.removeprefix("http://")

    def kill(self) -> None:
        """SIGKILL: no drain, nothing flushed, every connection cut."""
        self.process.proc.send_signal(signal.SIGKILL)
        self.process.proc.wait(timeout=10)

    def log(self) -> str:
        return self.process.log_path.read_text(errors="replace")


def replica_config(redis: str, routes: str, lb_host: str) -> str:
    """A replica's gateway.toml: the cluster's shared state, its `routes` (upstreams,
    routes, auth), the balancer's host among its server names."""
    return f"""\
[[listener]]
address = "127.0.0.1:0"
server_names = ["{lb_host}"]

[admin]
address = "127.0.0.1:0"

[state]
keys_env = "PORTCULLIS_STATE_KEYS"
single_use_backend = "redis"
redis_url = "redis://{redis}/0"
max_rounds = 3
push_timeout = "30s"

[rate_limits]
backend = "redis"
redis_url = "redis://{redis}/1"
redis_failure = "refuse"
per_principal_tool = {{ rate = "6/h", burst = 6 }}

{routes}"""


@contextmanager
def replica(config: str, state_keys: str) -> Iterator[Replica]:
    with _spawn(
        [str(_binary()), "run", "--config", "gateway.toml"],
        {"PORTCULLIS_STATE_KEYS": state_keys},
        {"gateway.toml": config},
    ) as process:
        bound = bound_addresses(process.log_path, process.proc, ("listener", "admin"))
        _wait(process, lambda: _ready(f"http://{bound['admin']}/readyz"), "200 from /readyz")
        yield Replica(process, f"http://{bound['listener']}", f"http://{bound['admin']}")


def balancer_config(addrs: list[str], port: int, workdir: Path) -> str:
    """deploy/nginx/replicas.conf with `addrs` as its servers and `port` to listen on,
    inside a minimal nginx.conf that keeps every file in `workdir`."""
    documented = NGINX_CONF.read_text()
    servers = "".join(f"    server {a} max_fails=1 fail_timeout=10s;\n" for a in addrs)
    documented, n = re.subn(r"(?m)^    server \S+ max_fails=1 fail_timeout=10s;\n(    server .*\n)*", servers, documented)
    assert n == 1, "deploy/nginx/replicas.conf: no block of `server` lines to replace"
    documented, n = re.subn(r"(?m)^    listen 8080;$", f"    listen 127.0.0.1:{port};", documented)
    assert n == 1, "deploy/nginx/replicas.conf: no `listen 8080;` to replace"
    documented, n = re.subn(
        r"(?m)^(        proxy_pass http://portcullis;)$", r"\1\n        add_header X-Replica $upstream_addr always;", documented
    )
    assert n == 1
    temp = "\n".join(f"    {kind}_temp_path {workdir / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""\
daemon off;
worker_processes 1;
pid {workdir / "nginx.pid"};
error_log stderr notice;
worker_shutdown_timeout 5s;
events {{ worker_connections 256; }}
http {{
    access_log {workdir / "access.log"};
{temp}
{documented}
}}
"""


@dataclass
class Balancer:
    base: str  # http://127.0.0.1:PORT
    process: subprocess.Popen
    workdir: Path

    def reconfigure(self, addrs: list[str]) -> None:
        """The same listening port in front of other replicas (nginx's reload, SIGHUP)."""
        port = int(self.base.rsplit(":", 1)[1])
        (self.workdir / "nginx.conf").write_text(balancer_config(addrs, port, self.workdir))
        log = self.workdir / "nginx.log"
        old_workers = self.workers()
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + READY_TIMEOUT_S
        # Until an old worker has exited it may still accept a connection and send it to the
        # replicas it knew (the placeholder on the first reload): wait for it to be gone and
        # a new one to be there (`worker_shutdown_timeout` bounds what it still serves).
        while (workers := self.workers()) & old_workers or not workers:
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"nginx did not reload:\n{log.read_text(errors='replace')}", pytrace=False)
            time.sleep(0.05)

    def workers(self) -> set[int]:
        """The master's worker processes now (a reaped worker is no longer listed)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return {int(pid) for pid in children.read_text().split()}
        except FileNotFoundError:
            return set()


@contextmanager
def balancer(addrs: list[str]) -> Iterator[Balancer]:
    program = require("nginx")
    with tempfile.TemporaryDirectory(prefix="portcullis-nginx-") as tmp, socket.socket() as sock:
        workdir = Path(tmp)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.set_inheritable(True)
        port = sock.getsockname()[1]
        (workdir / "nginx.conf").write_text(balancer_config(addrs, port, workdir))
        log_path = workdir / "nginx.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [program, "-p", str(workdir), "-c", str(workdir / "nginx.conf"), "-e", "stderr"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[sock.fileno()],
                env={**os.environ, "NGINX": f"{sock.fileno()};"},
            )
            try:
                deadline = time.monotonic() + READY_TIMEOUT_S
                while WORKER_STARTED not in log_path.read_bytes():
                    if proc.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"nginx did not start:\n{log_path.read_text(errors='replace')}", pytrace=False)
                    time.sleep(0.05)
                yield Balancer(f"http://127.0.0.1:{port}", proc, workdir)
            finally:
                _stop(proc)


@dataclass
class Cluster:
    lb: Balancer
    replicas: list[Replica]
    redis: str  # host:port
    state_keys: str
    config: str
    stack: ExitStack

    def url(self, route: str) -> str:
        return f"{self.lb.base}/mcp/{route}"

    def index(self, upstream_addr: str) -> int:
        """Which replica nginx's `$upstream_addr` names (the last one tried)."""
        last = upstream_addr.split(",")[-1].strip()
        return next(i for i, r in enumerate(self.replicas) if r.addr == last)

    def replace(self, i: int) -> Replica:
        """A new replica in place of replica `i` (killed), and the balancer told."""
        new = self.stack.enter_context(replica(self.config, self.state_keys))
        self.replicas[i] = new
        self.lb.reconfigure([r.addr for r in self.replicas])
        return new


@contextmanager
def cluster(routes: str, state_keys: str, size: int = 3) -> Iterator[Cluster]:
    """`size` replicas with `routes`, one Redis, nginx in front (round robin)."""
    with ExitStack() as stack:
        redis = stack.enter_context(redis_server())
        # nginx's port is needed in the replicas' server_names before nginx starts:
        # hand the balancer a placeholder list first, then point it at the replicas.
        lb = stack.enter_context(balancer(["127.0.0.1:9"]))
        config = replica_config(redis, routes, lb.base.removeprefix("http://"))
        replicas = [stack.enter_context(replica(config, state_keys)) for _ in range(size)]
        lb.reconfigure([r.addr for r in replicas])
        yield Cluster(lb, replicas, redis, state_keys, config, stack)
