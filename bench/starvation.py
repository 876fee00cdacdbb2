#!/usr/bin/env python3
"""Starvation benchmark: does one upstream's worst-cost answer stall the
clients of another upstream on the same gateway?

One gateway, two upstreams on 127.0.0.1:
  benign   a small static MCP answer (tools/call -> a short `complete` result)
  hostile  a static worst-cost answer: a tools/list result of SIZE bytes made
           of as many cheap-to-send, costly-to-read things as fit (empty
           strings, empty items), just under max_response_body_bytes
Both are tiny Python HTTP/1.1 servers, each its own process (stdlib only).

For each binary (BIN, and BASELINE_BIN when given), one after the other:
  alone    a benign client sends RATE req/s over CLIENTS connections for
           DURATION s and reports p50 / p99 / max latency counted from when
           each request was due (open loop: a stall delays the requests
           behind it, and that shows), and the service time (from send)
  attack   the same, while ATTACKERS connections fetch the hostile answer in a
           loop; also the attackers' req/s and what they got, and the CPU the
           gateway used (cores = its user+system time / wall time)

SHAPE picks the hostile answer: `items` (default; `{}` items, the costliest
per byte for the gateway before issue 18) or `empty` (items whose every
string is empty). Knobs: BIN, BASELINE_BIN, DURATION (15), RATE (50),
CLIENTS (4), ATTACKERS (4), SIZE (8 MiB - 4 KiB), SHAPE, PROXY_THREADS
(TOKIO_WORKER_THREADS of the gateway; default: its own), GATEWAY_EXTRA (TOML
appended to its config), MAX_PHASE (4: a phase sends nothing after
MAX_PHASE × DURATION; requests left count as due until then and show as
unsent).

Only loopback; every process started here is stopped (by its pid) at the
end; each phase is bounded by MAX_PHASE × DURATION plus one request timeout.
See bench/README.md.

    cargo build --release --bin portcullis
    python3 bench/starvation.py                                   # this tree's release binary
    BASELINE_BIN=/tmp/portcullis-before python3 bench/starvation.py   # before/after
    SHAPE=items SIZE=4000000 DURATION=10 python3 bench/starvation.py
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = "2026-07-28"


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


BIN = env("BIN", str(ROOT / "target" / "release" / "portcullis"))
BASELINE_BIN = env("BASELINE_BIN", "")
DURATION = float(env("DURATION", "15"))
RATE = float(env("RATE", "50"))
CLIENTS = int(env("CLIENTS", "4"))
ATTACKERS = int(env("ATTACKERS", "4"))
SIZE = int(env("SIZE", str(8_388_608 - 4096)))  # just under the default max_response_body_bytes
SHAPE = env("SHAPE", "items")
WORKERS = env("PROXY_THREADS", "")  # TOKIO_WORKER_THREADS for the gateway ("" = its default)
EXTRA = env("GATEWAY_EXTRA", "")  # TOML appended to the gateway's config (e.g. [limits] settings)
MAX_PHASE = float(env("MAX_PHASE", "4"))  # a phase sends nothing after MAX_PHASE × DURATION
REQUEST_TIMEOUT = 30.0


# --------------------------------------------------------------- the answers

def hostile_result(shape: str, size: int) -> bytes:
    """A tools/list response of about `size` bytes, worst cost per byte."""
    items = {
        # Every string empty: nothing for a byte-counting budget to count.
        "empty": '{"name":"","title":"","description":"","annotations":{"title":""},"inputSchema":{"type":"object","description":"","title":""}}',
        # Items with nothing in them.
        "items": "{}",
    }[shape]
    head = '{"jsonrpc":"2.0","id":1,"result":{"tools":['
    tail = "]}}"
    n = max(1, (size - len(head) - len(tail)) // (len(items) + 1))
    return (head + ",".join([items] * n) + tail).encode()


BENIGN = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
    "content": [{"type": "text", "text": "Room atrium is free at 10:00."}], "resultType": "complete"}},
    separators=(",", ":")).encode()


def call_body(method: str, name: str | None) -> bytes:
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION,
                        "io.modelcontextprotocol/clientCapabilities": {}}}
    if name:
        params.update(name=name, arguments={"room_id": "atrium"})
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()


def call_headers(method: str, name: str | None) -> dict:
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream",
         "mcp-protocol-version": VERSION, "mcp-method": method}
    if name:
        h["mcp-name"] = name
    return h


# --------------------------------------------------------------- the upstreams

def serve(path: str, port_file: str) -> None:
    """`starvation.py --serve FILE PORTFILE`: answer every POST with FILE."""
    body = Path(path).read_bytes()
    # Head and body in one write, no Nagle: a split small answer would wait
    # for the peer's delayed ACK (40 ms) and measure that instead.
    answer = (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
              f"content-length: {len(body)}\r\n\r\n").encode() + body

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


class Procs:
    """Every process started here, stopped (by its own pid) on exit."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, args: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, **kw)
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            self.stop(p)


def wait_file(path: Path, proc: subprocess.Popen, what: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        if proc.poll() is not None:
            sys.exit(f"{what} exited ({proc.returncode})")
        time.sleep(0.05)
    sys.exit(f"{what} did not start")


def start_upstream(procs: Procs, tmp: Path, name: str, answer: bytes) -> int:
    body, port_file = tmp / f"{name}.json", tmp / f"{name}.port"
    body.write_bytes(answer)
    p = procs.start([sys.executable, __file__, "--serve", str(body), str(port_file)])
    return int(wait_file(port_file, p, f"the {name} upstream"))


# --------------------------------------------------------------- the gateway

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gateway(procs: Procs, tmp: Path, binary: str, benign: int, hostile: int):
    port, admin = free_port(), free_port()
    config = tmp / "gateway.toml"
    config.write_text(f"""
[[listener]]
address = "127.0.0.1:{port}"
[admin]
address = "127.0.0.1:{admin}"
[audit]
sink = "off"
[log]
level = "warn"
[[upstream]]
id = "benign"
name = "Benign"
url = "http://127.0.0.1:{benign}/mcp"
response_timeout = "60s"
[[upstream]]
id = "hostile"
name = "Hostile"
url = "http://127.0.0.1:{hostile}/mcp"
response_timeout = "60s"
[[route]]
path = "/mcp/benign"
upstream = "benign"
[[route]]
path = "/mcp/hostile"
upstream = "hostile"
{EXTRA}
""")
    environment = dict(os.environ)
    if WORKERS:
        environment["TOKIO_WORKER_THREADS"] = WORKERS
    log = (tmp / "gateway.log").open("wb")
    p = procs.start([binary, "run", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT,
                    env=environment)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if p.poll() is not None:
            sys.exit(f"{binary} exited:\n{(tmp / 'gateway.log').read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1) as r:
                if r.status == 200:
                    return p, port
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(f"{binary} was not ready")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------- the clients

def post(conn: http.client.HTTPConnection, path: str, headers: dict, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", path, body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def benign_client(port: int, duration: float) -> dict:
    """RATE req/s over CLIENTS connections. Each request's latency counts
    from when it was due (a stall delays the requests behind it too), and
    its service time from when it was sent. No request is sent after
    MAX_PHASE × `duration`; those left count as due until then (a lower
    bound) and are reported as unsent."""
    headers, body = call_headers("tools/call", "get_room"), call_body("tools/call", "get_room")
    total = int(duration * RATE)
    start = time.monotonic() + 0.2
    cut = start + MAX_PHASE * duration
    lock = threading.Lock()
    next_i = [0]
    latencies: list[float] = []
    service: list[float] = []
    errors = [0]
    unsent = [0]

    def run():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= total:
                break
            due = start + i / RATE
            time.sleep(max(0.0, due - time.monotonic()))
            sent = time.monotonic()
            if sent > cut:
                with lock:
                    latencies.append(cut - due)
                    unsent[0] += 1
                continue
            try:
                status, data = post(conn, "/mcp/benign", headers, body)
                ok = status == 200 and b'"result"' in data
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
            done = time.monotonic()
            with lock:
                latencies.append(done - due)
                service.append(done - sent)
                errors[0] += 0 if ok else 1
        conn.close()

    threads = [threading.Thread(target=run) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()
    service.sort()

    def pct(xs: list[float], p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000 if xs else float("nan")

    return {"n": len(service), "errors": errors[0], "unsent": unsent[0], "p50": pct(latencies, 0.50),
            "p99": pct(latencies, 0.99), "max": pct(latencies, 1.0), "s50": pct(service, 0.50),
            "s99": pct(service, 0.99)}


def attackers(port: int, stop: threading.Event, tally: dict) -> list[threading.Thread]:
    headers, body = call_headers("tools/list", None), call_body("tools/list", None)
    lock = threading.Lock()

    def run():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
        while not stop.is_set():
            try:
                status, data = post(conn, "/mcp/hostile", headers, body)
                reason = "list delivered" if b'"tools"' in data[:64] else "?"
                if b'"reason"' in data:
                    reason = json.loads(data)["error"]["data"]["reason"]
                what = f"{status} {reason}"
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                what = "error"
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
            with lock:
                tally[what] = tally.get(what, 0) + 1
        conn.close()

    threads = [threading.Thread(target=run) for _ in range(ATTACKERS)]
    for t in threads:
        t.start()
    return threads


# --------------------------------------------------------------- one binary

def measure(binary: str, label: str, benign_port: int, hostile_port: int, procs: Procs, tmp: Path) -> list[dict]:
    gw, port = start_gateway(procs, tmp, binary, benign_port, hostile_port)
    rows = []
    try:
        benign_client(port, 1.0)  # warm: connections, first requests
        cpu0, t0 = cpu_seconds(gw.pid), time.monotonic()
        alone = benign_client(port, DURATION)
        cores = (cpu_seconds(gw.pid) - cpu0) / (time.monotonic() - t0)
        rows.append({"binary": label, "phase": "alone", "cores": cores, **alone, "attack": ""})
        stop, tally = threading.Event(), {}
        threads = attackers(port, stop, tally)
        time.sleep(1.0)
        cpu0, t0 = cpu_seconds(gw.pid), time.monotonic()
        before = sum(tally.values())
        attacked = benign_client(port, DURATION)
        wall = time.monotonic() - t0
        cores = (cpu_seconds(gw.pid) - cpu0) / wall
        rate = (sum(tally.values()) - before) / wall
        stop.set()
        for t in threads:
            t.join(REQUEST_TIMEOUT + 5)
        got = ", ".join(f"{k} ×{v}" for k, v in sorted(tally.items()))
        rows.append({"binary": label, "phase": f"attack×{ATTACKERS}", "cores": cores, **attacked,
                     "attack": f"{rate:.1f} req/s ({got})"})
    finally:
        procs.stop(gw)
    return rows


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3])
        return
    binaries = [(BIN, "this tree")]
    if BASELINE_BIN:
        binaries.insert(0, (BASELINE_BIN, "baseline"))
    for b, _ in binaries:
        if not os.access(b, os.X_OK):
            sys.exit(f"{b} is not an executable (cargo build --release --bin portcullis)")
    answer = hostile_result(SHAPE, SIZE)
    print(f"# hostile answer: tools/list, shape {SHAPE}, {len(answer):,} bytes; benign: tools/call at "
          f"{RATE:g} req/s over {CLIENTS} connections, {DURATION:g} s per phase; {ATTACKERS} attacking "
          f"connections; gateway workers: {WORKERS or 'default'}", flush=True)
    procs = Procs()
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="portcullis-starvation.") as t:
            tmp = Path(t)
            benign_port = start_upstream(procs, tmp, "benign", BENIGN)
            hostile_port = start_upstream(procs, tmp, "hostile", answer)
            for binary, label in binaries:
                rows += measure(binary, label, benign_port, hostile_port, procs, tmp)
    finally:
        procs.stop_all()
    print("| binary | phase | benign p50 ms | p99 ms | max ms | service p50 ms | service p99 ms | sent (errors, unsent) | gateway cores | attackers |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['binary']} | {r['phase']} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | "
              f"{r['s50']:.1f} | {r['s99']:.1f} | {r['n']} ({r['errors']}, {r['unsent']}) | {r['cores']:.2f} | "
              f"{r['attack']} |")


if __name__ == "__main__":
    main()
