#!/usr/bin/env python3
"""Idle keep-alive connections and the memory they cost (bench/memory.sh).

Opens N connections to http://127.0.0.1:PORT/PATH, sends one MCP tools/call
(get_room) on each and reads its answer, then leaves them all open and idle;
prints the RSS of the given processes before, with the connections idle, and at
intervals after they are all closed. Loopback only.

usage: idle_conns.py PORT N PID[,PID...] [PATH]
"""

import resource
import socket
import sys
import time

BODY = (
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":'
    b'{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{}},'
    b'"name":"get_room","arguments":{"room_id":"atrium"}}}'
)
AFTER_CLOSE = [1, 5, 10, 20, 30, 60]


def request(port, path):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
        f"Mcp-Name: get_room\r\nContent-Length: {len(BODY)}\r\n\r\n"
    )
    return head.encode() + BODY


def read_answer(sock):
    """Reads one HTTP/1.1 response (Content-Length or chunked); returns its status."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the response head")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    if "content-length" in fields:
        need = int(fields["content-length"])
        while len(rest) < need:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the middle of the body")
            rest += chunk
    elif fields.get("transfer-encoding", "").lower() == "chunked":
        while not rest.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed in the middle of the body")
            rest += chunk
    return status


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    port, n = int(sys.argv[1]), int(sys.argv[2])
    pids = [int(p) for p in sys.argv[3].split(",") if p]
    path = sys.argv[4] if len(sys.argv) > 4 else "/mcp"
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    req = request(port, path)
    before = rss_kib(pids)
    socks, bad = [], 0
    start = time.monotonic()
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(req)
        if read_answer(s) != 200:
            bad += 1
        socks.append(s)
    opened = time.monotonic() - start
    time.sleep(3)
    idle = rss_kib(pids)
    # Still idle 15 s later: what the connections themselves keep, once an
    # allocator that returns memory has given back what their requests freed.
    time.sleep(12)
    settled = rss_kib(pids)
    print(f"RESULT before_kib={before} idle_kib={idle} per_conn_b={(idle - before) * 1024 // max(n, 1)} "
          f"idle_15s_kib={settled} settled_per_conn_b={(settled - before) * 1024 // max(n, 1)} "
          f"open_s={opened:.1f} non200={bad}", flush=True)
    for s in socks:
        s.close()
    closed_at = time.monotonic()
    samples = []
    for t in AFTER_CLOSE:
        time.sleep(max(0.0, closed_at + t - time.monotonic()))
        samples.append(f"after_{t}s_kib={rss_kib(pids)}")
    print("RESULT " + " ".join(samples), flush=True)


if __name__ == "__main__":
    main()
