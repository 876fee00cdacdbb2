"""Stdio upstreams tried as a hostile user and a careless operator would (issue 23).

One scriptable stdio program (written into the test's temporary folder at test
time, Python standard library only) speaks 2025-11-25 (or 2026-07-28 with
REVIEW_GEN=stateless) and misbehaves on request: the tool called says how. It
records every line it reads, with its pid, to the file named by REVIEW_RECORD, so
each test can assert exactly what the program received.

What is covered here (the rest of issue 23 is in test_stdio_hostile.py and
test_stdio_servers.py):

1. the gateway's own request headers (`portcullis-stdio-owner`, `-roots`,
   `-unanswered`) sent by a client change nothing; two principals stay apart;
2. a 2025-11-25 program's sessions: concurrent requests, `notifications/cancelled`
   (in flight and still queued), DELETE during a call, a caller who hoards
   sessions, a session whose program died;
3. a program that answers late, twice, answers together with what it pushes,
   pushes requests with colliding ids, sends progress of other tokens, floods
   notifications, or floods `ping` / `roots/list` requests without reading;
4. `roots/list` and `ping` pushed by the program (answered by the gateway: exactly
   what the program receives), `sampling/createMessage` to a client that did not
   declare sampling;
5. config edge cases through `portcullis check` and `run`;
6. a reload (SIGHUP) that changes the program's command while a call is in flight.

Run: `PORTCULLIS_BIN=/work/bin/portcullis-stdio /work/main/.venv/bin/python -m pytest
tests/python/test_stdio_review.py`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import _binary, _stop, bound_addresses, metric, wait_ready

PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
KEYS_ENV = "PORTCULLIS_REVIEW_KEYS"
KEYS = {"alice": "review-alice-key", "bob": "review-bob-key"}
FORM = {"mode": "form", "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}

# ------------------------------------------------------------------ the program

PROGRAM = r'''
import json, os, sys, threading, time

OUT = sys.stdout.buffer
LOCK = threading.Lock()
RECORD = os.environ.get("REVIEW_RECORD")
GEN = os.environ.get("REVIEW_GEN", "sessions")
COND = threading.Condition()
ANSWERS = []  # responses to the program's own requests, in order of arrival
HELD = []


def write(data):
    with LOCK:
        OUT.write(data)
        OUT.flush()


def line(msg):
    return json.dumps(msg, separators=(",", ":")).encode() + b"\n"


def send(msg):
    write(line(msg))


def record(entry):
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as f:
            f.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")


def text(value):
    result = {"content": [{"type": "text", "text": json.dumps(value, sort_keys=True)}]}
    if GEN == "stateless":
        result["resultType"] = "complete"
    return result


def answer(rid, value):
    send({"jsonrpc": "2.0", "id": rid, "result": text(value)})


def wait_answers(ids, seconds):
    """The responses to `ids` (in order of arrival), once there is one per id."""
    deadline = time.monotonic() + seconds
    with COND:
        while True:
            got = [a for a in ANSWERS if a.get("id") in ids]
            if len(got) >= len(ids) or time.monotonic() > deadline:
                for a in got:
                    ANSWERS.remove(a)
                return got
            COND.wait(0.05)


def tool(rid, name, args, meta):
    me = {"pid": os.getpid(), "id": rid, "argv": sys.argv[1:]}
    if name == "echo":
        answer(rid, {**me, "args": args, "meta": meta})
    elif name == "env":
        answer(rid, {**me, "env": dict(os.environ), "cwd": os.getcwd()})
    elif name == "slow":
        time.sleep(args.get("ms", 1000) / 1000)
        answer(rid, {**me, "args": args})
    elif name == "push":
        # Push every request, then answer with the responses they got.
        for r in args["requests"]:
            send({"jsonrpc": "2.0", **r})
        got = wait_answers([r["id"] for r in args["requests"]], args.get("wait", 5))
        answer(rid, {**me, "answers": got})
    elif name == "burst":
        # The messages and the answer in one write; then record what the pushes got.
        data = b"".join(line({"jsonrpc": "2.0", **m}) for m in args["messages"])
        data += line({"jsonrpc": "2.0", "id": rid, "result": text({**me, "burst": len(args["messages"])})})
        write(data)
        ids = [m["id"] for m in args["messages"] if "id" in m]
        if ids:
            got = wait_answers(ids, args.get("wait", 2))
            record({"burst": args.get("tag"), "push_answers": got})
    elif name == "later":
        # Answer now; notify and push once the call is over, and record what the pushes got.
        answer(rid, {**me, "later": True})
        time.sleep(args.get("after", 0.3))
        for m in args["messages"]:
            send({"jsonrpc": "2.0", **m})
        ids = [m["id"] for m in args["messages"] if "id" in m]
        record({"later": args.get("tag"), "push_answers": wait_answers(ids, args.get("wait", 2))})
    elif name == "hold":
        HELD.append(rid)
    elif name == "release":
        for h in list(HELD):
            answer(h, {"late": True, "id": h})
            HELD.remove(h)
        answer(rid, {**me, "released": True})
    elif name == "twice":
        answer(rid, {**me, "n": 1})
        answer(rid, {**me, "n": 2})
    elif name == "notify":
        for n in args["notifications"]:
            send({"jsonrpc": "2.0", **n})
        time.sleep(args.get("pause", 0))
        answer(rid, {**me, "sent": len(args["notifications"])})
    elif name == "flood":
        for i in range(args["count"]):
            send({"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": f"n{i}"}})
        answer(rid, {**me, "sent": args["count"]})
    elif name == "die":
        answer(rid, me)
        time.sleep(0.1)
        os._exit(0)
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {name}"}})


TOOLS = ["echo", "env", "slow", "push", "burst", "later", "hold", "release", "twice", "notify", "flood", "die",
         "pingflood"]


def pingflood(rid, args):
    """Run on the reading thread: stdin is not read until every request is out;
    then the answers are read (and checked) here."""
    n, kind = args["count"], args.get("method", "ping")
    for i in range(n):
        send({"jsonrpc": "2.0", "id": f"p{i}", "method": kind})
    seen, odd, last = 0, [], None
    while seen < n:
        got = sys.stdin.buffer.readline()
        if not got:
            break
        m = json.loads(got)
        if m.get("id") == f"p{seen}" and set(m) == {"jsonrpc", "id", "result"}:
            seen += 1
            last = m["result"]
        else:
            odd.append(m)
            if len(odd) > 5:
                break
    answer(rid, {"pid": os.getpid(), "sent": n, "answered": seen, "last": last, "odd": odd[:5]})


def main():
    for raw in sys.stdin.buffer:
        text_line = raw.decode("utf-8", "replace").rstrip("\n")
        record({"line": text_line})
        try:
            msg = json.loads(text_line)
        except ValueError:
            continue
        method, rid = msg.get("method"), msg.get("id")
        if method is None:
            with COND:
                ANSWERS.append(msg)
                COND.notify_all()
            continue
        if rid is None:
            continue
        params = msg.get("params") or {}
        if method == "server/discover":
            if GEN == "stateless":
                send({"jsonrpc": "2.0", "id": rid, "result": {"supportedVersions": ["2026-07-28"],
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "review", "version": "1"}}})
            else:
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
        elif method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-11-25",
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "review", "version": "1"}}})
        elif method == "tools/list":
            result = {"tools": [{"name": t, "inputSchema": {"type": "object", "additionalProperties": True}} for t in TOOLS]}
            if GEN == "stateless":
                result["resultType"] = "complete"
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/call" and params.get("name") == "pingflood":
            pingflood(rid, params.get("arguments") or {})
        elif method == "tools/call":
            threading.Thread(target=tool, daemon=True, args=(
                rid, params.get("name"), params.get("arguments") or {}, params.get("_meta"))).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


main()
'''


def write_program(folder: Path, name: str = "review_stdio.py") -> Path:
    path = folder / name
    path.write_text("#!/usr/bin/python3\n" + PROGRAM)
    path.chmod(0o755)
    return path


# ------------------------------------------------------------------ the gateway

def key_hash(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def owner_digest(method: str, name: str) -> str:
    """What the gateway stamps as `portcullis-stdio-owner` (mod.rs `stamp`)."""
    return hashlib.sha256(f"{method}\0{name}".encode()).hexdigest()[:32]


def upstream_toml(uid: str, program: Path, tmp: Path, extra: str = "", env: str = "") -> str:
    return (f'[[upstream]]\nid = "{uid}"\nname = "Review {uid}"\n'
            f'command = ["{PYTHON}", "{program}"]\n'
            f'env = {{ REVIEW_RECORD = "{tmp / (uid + ".jsonl")}"{env} }}\n'
            'stop_timeout = "1s"\n' + extra)


def route_toml(path: str, uid: str, extra: str = "") -> str:
    return f'[[route]]\npath = "{path}"\nupstream = "{uid}"\n{extra}'


def module_config(tmp: Path, program: Path) -> str:
    auth = '[[auth]]\nname = "keys"\ntype = "api_key"\n' + "".join(
        f'[[auth.key]]\nprincipal = "{who}"\nhash = "{key_hash(k)}"\n' for who, k in KEYS.items())
    quick = 'response_timeout = "3s"\nconnect_timeout = "3s"\n'
    ups = [
        upstream_toml("main", program, tmp, quick + "max_processes = 16\n"),
        upstream_toml("modern", program, tmp, quick, ', REVIEW_GEN = "stateless"'),
        upstream_toml("evict", program, tmp, 'response_timeout = "6s"\nconnect_timeout = "4s"\nmax_processes = 2\n'),
        upstream_toml("evict2", program, tmp, 'response_timeout = "6s"\nconnect_timeout = "4s"\nmax_processes = 2\n'),
        upstream_toml("twice", program, tmp, quick),
        upstream_toml("mortal", program, tmp, quick),
        upstream_toml("flood", program, tmp, 'response_timeout = "2s"\nconnect_timeout = "3s"\nmax_processes = 4\n'),
    ]
    routes = [
        route_toml("/keyed", "main", 'auth = ["keys"]\nroots = ["/srv/review/keyed"]\n'),
        route_toml("/anon", "main", 'roots = ["/srv/with space", "file:///srv/%C3%BC/x"]\n'),
        route_toml("/bare", "main"),
        route_toml("/modern", "modern", 'roots = ["/srv/review/modern"]\n'),
        route_toml("/modern-keyed", "modern", 'auth = ["keys"]\nroots = ["/srv/review/modern"]\n'),
        route_toml("/evict", "evict", 'auth = ["keys"]\n'),
        route_toml("/evict2", "evict2", 'auth = ["keys"]\n'),
        route_toml("/twice", "twice"),
        route_toml("/mortal", "mortal"),
        route_toml("/flood", "flood"),
    ]
    return ('[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n'
            f'[audit]\nsink = "off"\n[state]\nkeys_env = "{KEYS_ENV}"\n' + auth
            + "".join(ups) + "".join(routes))


def keygen() -> str:
    out = subprocess.run([str(_binary()), "keygen"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


@dataclass
class Gateway:
    host: str
    port: int
    admin: str
    log_path: Path
    proc: subprocess.Popen
    tmp: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.admin}/metrics", timeout=5) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        return metric(self.metrics(), name, **labels)

    def record(self, upstream: str) -> list[dict]:
        path = self.tmp / f"{upstream}.jsonl"
        if not path.exists():
            return []
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def received(self, upstream: str, pid: int | None = None) -> list[dict]:
        """The messages the program(s) of `upstream` read (of `pid` only, if given)."""
        out = []
        for r in self.record(upstream):
            if "line" in r and (pid is None or r["pid"] == pid):
                try:
                    out.append(json.loads(r["line"]))
                except ValueError:
                    pass
        return out


@contextmanager
def running(config: Path, tmp: Path, env: dict | None = None, admin: bool = True, name: str = "gateway"):
    log_path = tmp / f"{name}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([str(_binary()), "run", "--config", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, cwd=tmp, env=env or dict(os.environ))
        try:
            want = ("listener", "admin") if admin else ("listener",)
            bound = bound_addresses(log_path, proc, want)
            admin_url = f"http://{bound['admin']}" if admin else ""
            if admin:
                wait_ready(f"{admin_url}/readyz", proc, log_path)
            host, port = bound["listener"].rsplit(":", 1)
            yield Gateway(host, int(port), admin_url, log_path, proc, tmp)
        finally:
            _stop(proc)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("stdio-review")
    program = write_program(tmp)
    config = tmp / "gateway.toml"
    config.write_text(module_config(tmp, program))
    with running(config, tmp, env={**os.environ, KEYS_ENV: keygen()}) as gateway:
        yield gateway
        assert gateway.proc.poll() is None, "the gateway died during the module"
        assert "panicked" not in gateway.log(), gateway.log()[-4000:]


# ------------------------------------------------------------------ the clients

def parse(ctype: str, text: str) -> list[dict]:
    if ctype.startswith("text/event-stream"):
        out = []
        for block in re.split(r"\r?\n\r?\n", text):
            data = [x[5:].removeprefix(" ") for x in re.split(r"\r?\n", block) if x.startswith("data:")]
            if data:
                out.append(json.loads("\n".join(data)))
        return out
    return [json.loads(text)] if text.strip() else []


@dataclass
class Reply:
    status: int
    headers: dict
    messages: list
    raw: str
    elapsed: float = 0.0

    @property
    def one(self) -> dict:
        assert len(self.messages) == 1, f"HTTP {self.status}: {self.raw[:800]}"
        return self.messages[0]

    @property
    def reason(self) -> str | None:
        return ((self.one.get("error") or {}).get("data") or {}).get("reason")

    @property
    def value(self) -> dict:
        """The tool's answer (the JSON of its text content), of the one response."""
        responses = [m for m in self.messages if "result" in m or "error" in m]
        assert len(responses) == 1, f"HTTP {self.status}: {self.raw[:800]}"
        result = responses[0].get("result")
        assert result and not result.get("isError"), f"not a tool answer: {self.raw[:800]}"
        return json.loads(result["content"][0]["text"])


def request(gw: Gateway, path: str, body, headers: dict, method: str = "POST", timeout: float = 20) -> Reply:
    conn = http.client.HTTPConnection(gw.host, gw.port, timeout=timeout)
    h = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    started = time.monotonic()
    conn.request(method, path, body=None if body is None else json.dumps(body).encode(), headers=h)
    resp = conn.getresponse()
    text = resp.read().decode()
    elapsed = time.monotonic() - started
    head = {k.lower(): v for k, v in resp.getheaders()}
    conn.close()
    try:
        messages = parse(head.get("content-type", ""), text)
    except ValueError:
        pytest.fail(f"{path}: HTTP {resp.status}, not JSON-RPC: {text[:800]!r}", pytrace=False)
    return Reply(resp.status, head, messages, text, elapsed)


class Session:
    """A 2025-11-25 client's session through the gateway."""

    def __init__(self, gw: Gateway, path: str, who: str | None = None, caps: dict | None = None,
                 extra: dict | None = None):
        self.gw, self.path = gw, path
        self.h = {"mcp-protocol-version": LEGACY, **(extra or {})}
        if who:
            self.h["authorization"] = f"Bearer {KEYS[who]}"
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": caps if caps is not None else {},
            "clientInfo": {"name": "stdio-review", "version": "1"}}}
        reply = request(gw, path, init, self.h)
        self.init = reply
        assert reply.status == 200, f"initialize: HTTP {reply.status}: {reply.raw[:800]}"
        self.id = reply.headers["mcp-session-id"]
        self.h["mcp-session-id"] = self.id
        done = request(gw, path, {"jsonrpc": "2.0", "method": "notifications/initialized"}, self.h)
        assert done.status == 202, done.raw

    def post(self, body, extra: dict | None = None, method: str = "POST") -> Reply:
        return request(self.gw, self.path, body, {**self.h, **(extra or {})}, method=method)

    def call(self, tool: str, args: dict | None = None, rid=1, extra: dict | None = None,
             meta: dict | None = None) -> Reply:
        params = {"name": tool, "arguments": args or {}}
        if meta:
            params["_meta"] = meta
        return self.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}, extra)

    def cancel(self, rid) -> Reply:
        return self.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": rid, "reason": "the user pressed stop"}})

    def answer(self, push_id, result: dict) -> Reply:
        return self.post({"jsonrpc": "2.0", "id": push_id, "result": result})

    def delete(self) -> Reply:
        return self.post(None, method="DELETE")

    def streamed_call(self, tool: str, args: dict, rid, on_push, timeout: float = 20) -> tuple[int, list]:
        """A tools/call whose event stream is read as it comes: each pushed request is
        handed to `on_push` (which may answer it) before the stream is read on."""
        conn = http.client.HTTPConnection(self.gw.host, self.gw.port, timeout=timeout)
        body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}
        conn.request("POST", self.path, body=json.dumps(body).encode(),
                     headers={"content-type": "application/json",
                              "accept": "application/json, text/event-stream", **self.h})
        resp = conn.getresponse()
        ctype = resp.getheader("content-type", "")
        if not ctype.startswith("text/event-stream"):
            text = resp.read().decode()
            conn.close()
            return resp.status, parse(ctype, text)
        messages, data = [], []
        while True:
            raw = resp.fp.readline()
            if not raw:
                break
            text = raw.decode().rstrip("\r\n")
            if text.startswith("data:"):
                data.append(text[5:].removeprefix(" "))
            elif text == "" and data:
                m = json.loads("\n".join(data))
                data = []
                messages.append(m)
                if "method" in m and "id" in m:
                    on_push(m)
                if m.get("id") == rid and ("result" in m or "error" in m):
                    break
        conn.close()
        return resp.status, messages


class Listener:
    """The session's own event stream (GET), read in a thread; each pushed request
    is handed to `on_push`."""

    def __init__(self, session: Session, on_push):
        self.messages: list[dict] = []
        self.conn = http.client.HTTPConnection(session.gw.host, session.gw.port, timeout=10)
        self.conn.request("GET", session.path, headers={"accept": "text/event-stream", **session.h})
        self.sock = self.conn.sock
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.thread = threading.Thread(target=self._read, args=(on_push,), daemon=True)
        self.thread.start()

    def _read(self, on_push):
        data: list[str] = []
        try:
            while True:
                raw = self.resp.fp.readline()
                if not raw:
                    return
                text = raw.decode().rstrip("\r\n")
                if text.startswith("data:"):
                    data.append(text[5:].removeprefix(" "))
                elif text == "" and data:
                    m = json.loads("\n".join(data))
                    data = []
                    self.messages.append(m)
                    if "method" in m and "id" in m:
                        on_push(m)
        except (OSError, ValueError):
            return

    def close(self):
        # Not resp.close(): it would wait for the reading thread's readline.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(2)
        self.conn.close()


def modern_call(gw: Gateway, path: str, tool: str, args: dict | None = None, rid=1, who: str | None = None,
                extra: dict | None = None, caps: dict | None = None) -> Reply:
    """One tools/call of a 2026-07-28 client."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": tool, "arguments": args or {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": caps or {}}}}
    h = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool, **(extra or {})}
    if who:
        h["authorization"] = f"Bearer {KEYS[who]}"
    return request(gw, path, body, h)


def caps_for(test: str, **more) -> dict:
    """Capabilities that give a test processes of its own (an owner is principal,
    capabilities and roots)."""
    return {"experimental": {"review": {"test": test}}, **more}


def wait_until(check, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def calls_named(messages: list[dict], tool: str) -> list[dict]:
    return [m for m in messages if m.get("method") == "tools/call" and (m.get("params") or {}).get("name") == tool]


def cancels_of(messages: list[dict], rid) -> list[dict]:
    return [m for m in messages if m.get("method") == "notifications/cancelled"
            and (m.get("params") or {}).get("requestId") == rid]


def rss_kib(pid: int) -> int:
    for x in Path(f"/proc/{pid}/status").read_text().splitlines():
        if x.startswith("VmRSS:"):
            return int(x.split()[1])
    raise AssertionError("no VmRSS")


SPOOF = {"portcullis-stdio-owner": owner_digest("api_key", "alice"),
         "portcullis-stdio-roots": '["file:///etc", "file:///root"]',
         "portcullis-stdio-unanswered": "exited"}


# ==================================================================== 1. header spoofing

def test_spoofed_gateway_headers_do_not_change_roots_or_owner(gw):
    """bob sends alice's owner digest, roots pointing at /etc and an `unanswered`
    header on every request: his process is his own, its roots the route's, and his
    calls are answered normally. alice's idle process is never given to him."""
    caps = caps_for("spoof")
    alice = Session(gw, "/keyed", "alice", caps)
    alice_pid = alice.call("echo", rid=1).value["pid"]
    assert alice.delete().status == 200  # alice's process is idle now, kept for her next session
    bob = Session(gw, "/keyed", "bob", caps, extra=SPOOF)
    reply = bob.call("push", {"requests": [{"id": "r", "method": "roots/list"}]}, rid=2, extra=SPOOF)
    assert reply.status == 200, reply.raw
    got = reply.value
    assert got["pid"] != alice_pid, "bob was given alice's process"
    assert got["answers"] == [{"jsonrpc": "2.0", "id": "r",
                               "result": {"roots": [{"uri": "file:///srv/review/keyed"}]}}]
    # A 2026-07-28 call of bob's through the bridge, spoofed alike.
    bridged = modern_call(gw, "/keyed", "echo", who="bob", extra=SPOOF, rid=3, caps=caps)
    assert bridged.status == 200 and bridged.value["pid"] != alice_pid, bridged.raw
    # alice's next session gets her own process back.
    again = Session(gw, "/keyed", "alice", caps)
    assert again.call("echo", rid=4).value["pid"] == alice_pid
    for s in (bob, again):
        s.delete()


def test_spoofed_roots_do_not_reach_a_stateless_program(gw):
    """A 2026-07-28 program (pooled for all callers of a route's roots)."""
    for rid, path, who in [(1, "/modern", None), (2, "/modern-keyed", "bob")]:
        reply = modern_call(gw, path, "push", {"requests": [{"id": "r", "method": "roots/list", "params": {}}]},
                            rid=rid, who=who, extra=SPOOF)
        assert reply.status == 200, reply.raw
        assert reply.value["answers"] == [{"jsonrpc": "2.0", "id": "r",
                                           "result": {"roots": [{"uri": "file:///srv/review/modern"}]}}]


def test_a_session_id_of_another_principal_is_refused(gw):
    caps = caps_for("steal")
    alice = Session(gw, "/keyed", "alice", caps)
    pid = alice.call("echo", rid=1).value["pid"]
    stolen = request(gw, "/keyed", {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                    "params": {"name": "echo", "arguments": {"by": "bob"}}},
                     {"mcp-protocol-version": LEGACY, "mcp-session-id": alice.id,
                      "authorization": f"Bearer {KEYS['bob']}"})
    assert stolen.status == 404 and stolen.reason == "session_invalid", stolen.raw
    assert not [m for m in calls_named(gw.received("main", pid), "echo")
                if m["params"]["arguments"].get("by") == "bob"]
    alice.delete()


# ==================================================================== 4. what the program's own requests get

@pytest.mark.parametrize("path,who,roots", [
    ("/keyed", "alice", [{"uri": "file:///srv/review/keyed"}]),
    ("/anon", None, [{"uri": "file:///srv/with%20space"}, {"uri": "file:///srv/%C3%BC/x"}]),
    ("/bare", None, []),
])
def test_roots_list_and_ping_from_the_program_are_answered_by_the_gateway(gw, path, who, roots):
    """The client declares roots (and sampling): it is never asked. The program's
    initialize names roots only when the route has some; its roots/list and ping get
    exactly these answers, under the ids it used."""
    caps = caps_for("roots" + path, roots={"listChanged": True})
    s = Session(gw, path, who, caps)
    requests = [{"id": "r1", "method": "roots/list"}, {"id": 0, "method": "ping"},
                {"id": 2 ** 53, "method": "roots/list", "params": {"_meta": {"progressToken": 5}}},
                {"id": "p-1", "method": "ping", "params": {}}]
    pushed: list[dict] = []
    status, messages = s.streamed_call("push", {"requests": requests, "wait": 3}, 5, pushed.append)
    assert status == 200 and pushed == [], f"the client was asked: {pushed}"
    assert [m.get("id") for m in messages] == [5], messages
    got = json.loads(messages[-1]["result"]["content"][0]["text"])
    assert got["answers"] == [
        {"jsonrpc": "2.0", "id": "r1", "result": {"roots": roots}},
        {"jsonrpc": "2.0", "id": 0, "result": {}},
        {"jsonrpc": "2.0", "id": 2 ** 53, "result": {"roots": roots}},
        {"jsonrpc": "2.0", "id": "p-1", "result": {}},
    ]
    [init] = [m for m in gw.received("main", got["pid"]) if m.get("method") == "initialize"]
    expected_caps = {"experimental": {"review": {"test": "roots" + path}}}
    if roots:
        expected_caps["roots"] = {"listChanged": False}
    assert init["params"]["capabilities"] == expected_caps, init
    s.delete()


def test_sampling_pushed_to_a_client_without_sampling_is_refused_to_the_program(gw):
    s = Session(gw, "/bare", None, caps_for("sampling", elicitation={}))
    pushed: list[dict] = []
    status, messages = s.streamed_call(
        "push", {"requests": [{"id": "s1", "method": "sampling/createMessage", "params": SAMPLING}], "wait": 3},
        7, pushed.append)
    assert status == 200 and pushed == [], pushed
    assert [m.get("id") for m in messages] == [7]
    [answer] = json.loads(messages[0]["result"]["content"][0]["text"])["answers"]
    assert answer["id"] == "s1" and "result" not in answer, answer
    assert answer["error"]["code"] == -32021, answer
    assert answer["error"]["data"]["reason"] == "missing_client_capability", answer
    s.delete()


PASSWORD = {"mode": "form", "message": "Sign in again", "requestedSchema": {
    "type": "object", "properties": {"password": {"type": "string", "format": "password"}}}}


def test_what_the_program_pushes_between_calls(gw):
    """Outside a call its requests go to the session's GET stream, through the push
    policy; with no stream open the program is told nobody is there."""
    s = Session(gw, "/bare", None, caps_for("between", elicitation={}))
    note = {"method": "notifications/message", "params": {"level": "info", "data": "in the background"}}
    messages = [note, {"id": "L1", "method": "elicitation/create", "params": {**FORM, "message": "later?"}},
                {"id": "L2", "method": "elicitation/create", "params": PASSWORD}]
    def recorded():
        return {r["later"]: r["push_answers"] for r in gw.record("main") if "later" in r}

    assert s.call("later", {"messages": messages, "tag": "alone", "wait": 1}, rid=1).status == 200
    assert wait_until(lambda: "alone" in recorded(), 3), gw.record("main")[-5:]
    listener = Listener(s, lambda m: s.answer(m["id"], {"action": "accept", "content": {"name": "bg"}}))
    assert listener.status == 200
    time.sleep(0.2)
    assert s.call("later", {"messages": messages, "tag": "heard", "wait": 1.5}, rid=2).status == 200
    assert wait_until(lambda: len(recorded()) == 2, 4), gw.record("main")[-5:]
    listener.close()
    got = recorded()
    nobody = {"code": -32603, "message": "no client is waiting to answer this request"}
    # Answers to two requests may come in either order (JSON-RPC matches them by id).
    assert sorted(got["alone"], key=lambda a: a["id"]) == [{"jsonrpc": "2.0", "id": "L1", "error": nobody},
                                                           {"jsonrpc": "2.0", "id": "L2", "error": nobody}]
    heard = {a["id"]: a for a in got["heard"]}
    assert heard["L1"] == {"jsonrpc": "2.0", "id": "L1", "result": {"action": "accept", "content": {"name": "bg"}}}
    assert heard["L2"]["error"]["data"]["reason"] == "schema_not_allowed", heard
    shown = [(m.get("method"), m.get("params", {}).get("message")) for m in listener.messages]
    assert shown == [("notifications/message", None), ("elicitation/create", "later?")], listener.messages
    s.delete()


@pytest.mark.parametrize("bad_id", [None, {"a": 1}, [1], True])
def test_a_pushed_request_with_a_malformed_id_never_reaches_the_client(gw, bad_id):
    s = Session(gw, "/bare", None, caps_for("badid", elicitation={}))
    reply = s.call("push", {"requests": [{"id": bad_id, "method": "elicitation/create", "params": PASSWORD}],
                            "wait": 0.5}, rid=3)
    assert reply.status == 200 and [m.get("id") for m in reply.messages] == [3], reply.raw
    assert reply.reason == "upstream_bad_response" and "Sign in" not in reply.raw, reply.raw
    time.sleep(0.6)
    assert s.call("echo", rid=4).status == 200
    s.delete()


def test_one_principal_cannot_cancel_another_principals_call(gw):
    caps = caps_for("cross-cancel")
    alice = Session(gw, "/keyed", "alice", caps)
    bob = Session(gw, "/keyed", "bob", caps)
    box: dict = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", bob.call("slow", {"ms": 700}, rid=5)))
    worker.start()
    time.sleep(0.3)
    assert alice.cancel(5).status == 202
    worker.join(5)
    assert box["r"].status == 200 and box["r"].value["args"] == {"ms": 700}, box["r"].raw
    for s in (alice, bob):
        s.delete()


# ==================================================================== 2. sessions

def test_concurrent_requests_in_sessions_each_get_their_own_answer(gw):
    """Two sessions of one caller, six calls each at once: every answer under its own
    id, with its own arguments, from its own session's program; none lost."""
    caps = caps_for("concurrent")
    sessions = [Session(gw, "/keyed", "alice", caps) for _ in range(2)]
    pids = [s.call("echo", rid="first").value["pid"] for s in sessions]
    assert pids[0] != pids[1]
    with ThreadPoolExecutor(12) as pool:
        futures = {(i, rid): pool.submit(s.call, "slow", {"ms": 60, "n": f"{i}-{rid}"}, rid)
                   for i, s in enumerate(sessions) for rid in [10, "10", 11, "eleven", 12.5, -1]}
        replies = {k: f.result() for k, f in futures.items()}
    for (i, rid), reply in replies.items():
        assert reply.status == 200, reply.raw
        [message] = reply.messages
        assert message["id"] == rid and type(message["id"]) is type(rid), (rid, message)
        value = reply.value
        assert value["args"]["n"] == f"{i}-{rid}" and value["pid"] == pids[i], (i, rid, value)
    for i, pid in enumerate(pids):
        assert len(calls_named(gw.received("main", pid), "slow")) == 6
    for s in sessions:
        s.delete()


@pytest.mark.xfail(reason="open: a cancelled call still gets a JSON-RPC error body (issue 23 note)", strict=True)
def test_a_cancelled_call_gets_nothing_more_and_the_program_is_told_its_own_id(gw):
    """The call has said nothing yet (the face would answer it as JSON)."""
    s = Session(gw, "/bare", None, caps_for("cancel-json"))
    pid = s.call("echo", rid=1).value["pid"]
    box: dict = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", s.call("hold", rid=11)))
    worker.start()
    assert wait_until(lambda: calls_named(gw.received("main", pid), "hold"), 3)
    assert s.cancel(11).status == 202
    worker.join(5)
    reply: Reply = box["r"]
    [sent] = calls_named(gw.received("main", pid), "hold")
    assert wait_until(lambda: cancels_of(gw.received("main", pid), sent["id"]), 2), gw.received("main", pid)
    # After a cancellation nothing more is sent for the request: its POST ends with
    # no JSON-RPC message (as the bridge does for a cancelled call), and above all no
    # error saying the program exited (it did not: it answers the next call).
    assert reply.elapsed < 2, reply.elapsed
    assert reply.status in (200, 202) and reply.messages == [], \
        f"the cancelled request got HTTP {reply.status}: {reply.raw[:600]}"
    assert s.call("echo", rid=12).value["pid"] == pid
    s.delete()


def test_a_cancelled_call_that_had_spoken_ends_its_stream_without_an_answer(gw):
    s = Session(gw, "/bare", None, caps_for("cancel-sse"))
    pid = s.call("echo", rid=1).value["pid"]
    note = {"method": "notifications/message", "params": {"level": "info", "data": "working"}}
    box: dict = {}
    worker = threading.Thread(target=lambda: box.setdefault(
        "r", s.call("notify", {"notifications": [note], "pause": 2.5}, rid=21)))
    worker.start()
    time.sleep(0.6)
    assert s.cancel(21).status == 202
    worker.join(5)
    reply: Reply = box["r"]
    assert reply.elapsed < 1.5, reply.elapsed
    assert reply.status == 200 and reply.messages == [{"jsonrpc": "2.0", **note}], reply.raw
    [sent] = calls_named(gw.received("main", pid), "notify")
    assert cancels_of(gw.received("main", pid), sent["id"])
    # Its late answer (2.5 s in) is dropped quietly: the program stays in step.
    time.sleep(2.2)
    assert s.call("echo", rid=22).value["pid"] == pid
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="main", kind="unknown_id") == 0
    s.delete()


@pytest.mark.xfail(reason="open: a request cancelled while queued for the session's turn is still sent (issue 23 note)", strict=True)
def test_a_request_cancelled_while_queued_never_reaches_the_program(gw):
    """Requests of a session go to its program one at a time; one cancelled while it
    waits for its turn must not be sent afterwards (its tool would run for nobody)."""
    s = Session(gw, "/bare", None, caps_for("cancel-queued"))
    pid = s.call("echo", rid=1).value["pid"]
    box: dict = {}
    first = threading.Thread(target=lambda: box.setdefault("a", s.call("slow", {"ms": 1200}, rid=31)))
    first.start()
    assert wait_until(lambda: calls_named(gw.received("main", pid), "slow"), 3)
    second = threading.Thread(target=lambda: box.setdefault("b", s.call("echo", {"queued": True}, rid=32)))
    second.start()
    time.sleep(0.3)
    assert s.cancel(32).status == 202
    first.join(5)
    second.join(5)
    assert box["a"].status == 200 and box["a"].value["args"] == {"ms": 1200}
    time.sleep(0.2)
    queued = [m for m in calls_named(gw.received("main", pid), "echo") if m["params"]["arguments"].get("queued")]
    assert queued == [], f"the cancelled request was sent to the program afterwards: {queued}"
    assert not [m for m in box["b"].messages if "result" in m], f"answered after cancel: {box['b'].raw[:500]}"
    s.delete()


@pytest.mark.xfail(reason="open: a call ended by DELETE gets an error body (issue 23 note)", strict=True)
def test_delete_during_a_call_cancels_it_and_gives_the_process_back(gw):
    caps = caps_for("delete")
    s = Session(gw, "/keyed", "alice", caps)
    pid = s.call("echo", rid=1).value["pid"]
    box: dict = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", s.call("hold", rid=41)))
    worker.start()
    assert wait_until(lambda: calls_named(gw.received("main", pid), "hold"), 3)
    deleted = s.delete()
    assert deleted.status == 200, deleted.raw
    worker.join(5)
    [sent] = calls_named(gw.received("main", pid), "hold")
    assert wait_until(lambda: cancels_of(gw.received("main", pid), sent["id"]), 2)
    after = s.call("echo", rid=42)
    assert after.status == 404 and after.reason == "session_expired", after.raw
    again = Session(gw, "/keyed", "alice", caps)
    assert again.call("echo", rid=43).value["pid"] == pid
    again.delete()
    # The call the client's own DELETE ended: nothing more for it, and never a
    # claim that the program exited (it did not: it serves the next session).
    reply: Reply = box["r"]
    assert reply.elapsed < 2
    assert reply.status in (200, 202) and reply.messages == [], \
        f"the call ended by DELETE got HTTP {reply.status}: {reply.raw[:600]}"


def test_a_session_whose_program_died_is_gone_and_a_new_one_works(gw):
    s = Session(gw, "/mortal", None, caps_for("mortal"))
    first = s.call("die", rid=1)
    assert first.status == 200
    pid = first.value["pid"]
    assert wait_until(lambda: not alive(pid), 3)
    # The gateway learns of the death from the program's pipes, a moment
    # after the process is gone: a call in between may still meet the dead
    # program (502). The session must then be gone within a moment.
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    assert wait_until(lambda: s.post(ping).status == 404, 3), "the session outlived its program"
    for body in [{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}}},
                 {"jsonrpc": "2.0", "id": 3, "method": "ping"}]:
        reply = s.post(body)
        assert reply.status == 404, reply.raw
        assert "no such session" in reply.one["error"]["message"], reply.raw
    # It ended within 10 s of its start: the next start waits 1 s (the book's stdio page, "Lifecycle").
    too_soon = request(gw, "/mortal", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": caps_for("mortal"), "clientInfo": {"name": "r", "version": "1"}}},
        {"mcp-protocol-version": LEGACY})
    assert too_soon.status == 502 and too_soon.reason == "upstream_unreachable", too_soon.raw
    assert "keeps exiting" in too_soon.one["error"]["message"], too_soon.raw
    time.sleep(1.1)
    fresh = Session(gw, "/mortal", None, caps_for("mortal"))
    again = fresh.call("echo", rid=4)
    assert again.status == 200 and again.value["pid"] != pid, again.raw
    fresh.delete()


@pytest.mark.xfail(reason="open: a waiter is not woken when a session becomes evictable (issue 23 note)", strict=True)
def test_a_caller_holding_every_process_does_not_lock_out_another(gw):
    """max_processes = 2, connect_timeout = 4 s. alice opens two sessions and walks
    away; bob arrives at once. A session idle for 2 s may be ended to make room, so
    bob must be served as soon as one of alice's is 2 s idle, not refused after
    connect_timeout."""
    caps = caps_for("hog")
    hogs = [Session(gw, "/evict", "alice", caps) for _ in range(2)]
    for i, h in enumerate(hogs):
        assert h.call("echo", rid=i).status == 200
    started = time.monotonic()
    reply = modern_call(gw, "/evict", "echo", {"who": "bob"}, rid=1, who="bob", caps=caps)
    waited = time.monotonic() - started
    assert reply.status == 200, f"bob after {waited:.1f}s: {reply.raw[:600]}"
    assert waited < 3.5, waited
    for h in hogs:
        h.delete()


def test_sessions_idle_for_two_seconds_make_room_for_another_principal(gw):
    caps = caps_for("hog2")
    hogs = [Session(gw, "/evict2", "alice", caps) for _ in range(2)]
    pids = [h.call("echo", rid=i).value["pid"] for i, h in enumerate(hogs)]
    time.sleep(2.2)
    started = time.monotonic()
    bob = Session(gw, "/evict2", "bob", caps)
    assert time.monotonic() - started < 1
    got = bob.call("echo", rid=9)
    assert got.status == 200 and got.value["pid"] not in pids, got.raw
    # The session unused longest was ended for him: its client starts over.
    evicted = hogs[0].call("echo", rid=10)
    assert evicted.status == 404 and "no such session" in evicted.one["error"]["message"], evicted.raw
    kept = hogs[1].call("echo", rid=11)
    assert kept.status == 200 and kept.value["pid"] == pids[1], kept.raw
    for s in (bob, hogs[1]):
        s.delete()


# ==================================================================== 3. programs that answer oddly

def test_a_late_answer_to_an_abandoned_request_is_dropped_quietly(gw):
    s = Session(gw, "/bare", None, caps_for("late"))
    pid = s.call("echo", rid=1).value["pid"]
    box: dict = {}
    worker = threading.Thread(target=lambda: box.setdefault("r", s.call("hold", rid=51)))
    worker.start()
    assert wait_until(lambda: calls_named(gw.received("main", pid), "hold"), 3)
    s.cancel(51)
    worker.join(5)
    before = gw.metric("portcullis_stdio_stdout_rejected_total", upstream="main", kind="unknown_id")
    # `release` answers the held request first (late), then itself.
    reply = s.call("release", rid=52)
    assert reply.status == 200 and reply.value == {"pid": pid, "id": reply.value["id"], "argv": [],
                                                   "released": True}, reply.raw
    assert [m["id"] for m in reply.messages] == [52]
    assert s.call("echo", rid=53).value["pid"] == pid
    assert gw.metric("portcullis_stdio_stdout_rejected_total", upstream="main", kind="unknown_id") == before
    s.delete()


def test_a_second_answer_to_one_request_is_dropped_quietly(gw):
    """The first answer reaches the client; the program repeated an id the gateway did
    send (not one it "never sent"), so the duplicate is dropped and the session goes on."""
    s = Session(gw, "/twice", None, caps_for("twice"))
    pid = s.call("echo", rid=1).value["pid"]
    reply = s.call("twice", rid=61)
    assert reply.status == 200 and [m["id"] for m in reply.messages] == [61]
    assert reply.value["n"] == 1 and reply.value["pid"] == pid
    time.sleep(0.3)
    after = s.call("echo", rid=62)
    assert after.status == 200 and after.value["pid"] == pid, \
        f"after a duplicate answer: HTTP {after.status} {after.raw[:400]}; log: " \
        + "\n".join(x for x in gw.log().splitlines() if "upstream=twice" in x or 'upstream="twice"' in x)[-1500:]
    assert alive(pid)
    s.delete()


def test_what_the_program_writes_with_its_answer_is_not_lost(gw):
    """A notification, or a pushed request, written in the same write as the answer
    (before it): the client gets it before the answer; a pushed request the client
    never saw must at least be answered to the program (it would wait forever)."""
    s = Session(gw, "/bare", None, caps_for("burst", elicitation={}))
    note = {"method": "notifications/message", "params": {"level": "info", "data": "done soon"}}
    lost_notes = []
    for rid in range(70, 75):
        reply = s.call("burst", {"messages": [note]}, rid=rid)
        assert reply.status == 200 and reply.messages[-1]["id"] == rid, reply.raw
        if reply.messages[:-1] != [{"jsonrpc": "2.0", **note}]:
            lost_notes.append(rid)
    seen: list[str] = []

    def accept(m):
        seen.append(m["params"]["message"])
        s.answer(m["id"], {"action": "accept", "content": {"name": m["params"]["message"]}})

    for i in range(5):
        status, messages = s.streamed_call(
            "burst", {"messages": [{"id": f"e{i}", "method": "elicitation/create",
                                    "params": {**FORM, "message": f"q{i}"}}], "tag": f"t{i}", "wait": 1.5},
            80 + i, accept)
        assert status == 200 and messages[-1]["id"] == 80 + i, messages
    time.sleep(1.8)
    answers = {r["burst"]: r["push_answers"] for r in gw.record("main") if "burst" in r}
    unanswered = [t for t in (f"t{i}" for i in range(5)) if answers.get(t) == []]
    assert (lost_notes, unanswered) == ([], []), (
        f"notifications written with the answer were lost for calls {lost_notes}; pushes written with the "
        f"answer that the client never saw ({5 - len(seen)} of 5) and the program never got an answer to: "
        f"{unanswered}")


def test_pushed_requests_with_one_id_each_reach_the_client_and_their_own_answer(gw):
    """Two pushes with the same id: two questions with distinct sealed ids; each answer
    reaches the program once, in order; a replayed answer and another principal's
    answer are refused."""
    caps = caps_for("collide", elicitation={})
    alice = Session(gw, "/keyed", "alice", caps)
    bob = Session(gw, "/keyed", "bob", caps)
    refused: list[Reply] = []

    def on_push(m):
        refused.append(bob.answer(m["id"], {"action": "accept", "content": {"name": "bob-was-here"}}))
        assert alice.answer(m["id"], {"action": "accept", "content": {"name": m["params"]["message"]}}).status == 202
        refused.append(alice.answer(m["id"], {"action": "accept", "content": {"name": "again"}}))

    requests = [{"id": 7, "method": "elicitation/create", "params": {**FORM, "message": "first"}},
                {"id": 7, "method": "elicitation/create", "params": {**FORM, "message": "second"}}]
    status, messages = alice.streamed_call("push", {"requests": requests, "wait": 3}, 91, on_push)
    assert status == 200
    pushes = [m for m in messages if m.get("method") == "elicitation/create"]
    assert len(pushes) == 2 and pushes[0]["id"] != pushes[1]["id"], pushes
    assert all(p["id"].startswith("psr1.") for p in pushes)
    got = json.loads(messages[-1]["result"]["content"][0]["text"])
    assert got["answers"] == [
        {"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {"name": "first"}}},
        {"jsonrpc": "2.0", "id": 7, "result": {"action": "accept", "content": {"name": "second"}}}]
    assert [(r.status, r.reason) for r in refused] == [
        (400, "answer_not_requested"), (400, "state_replayed"),
        (400, "answer_not_requested"), (400, "state_replayed")]
    for s in (alice, bob):
        s.delete()


def test_progress_of_other_tokens_and_a_notification_flood(gw):
    s = Session(gw, "/bare", None, caps_for("progress"))
    notes = [{"method": "notifications/progress", "params": {"progressToken": "mine", "progress": 1}},
             {"method": "notifications/progress", "params": {"progressToken": "theirs", "progress": 2}},
             {"method": "notifications/progress", "params": {"progressToken": 1, "progress": 3}}]
    reply = s.call("notify", {"notifications": notes}, rid=101, meta={"progressToken": "mine"})
    assert reply.status == 200
    assert reply.messages[0] == {"jsonrpc": "2.0", **notes[0]}, reply.raw
    assert [m.get("id") for m in reply.messages if "result" in m or "error" in m] == [101]
    assert reply.messages[-1]["id"] == 101 and reply.value["sent"] == 3
    # Thousands of notifications during one call: the answer arrives, what the client
    # did not take in time is dropped, nothing grows.
    rss = rss_kib(gw.proc.pid)
    flood = s.call("flood", {"count": 20000}, rid=102)
    assert flood.status == 200 and flood.messages[-1]["id"] == 102, flood.raw[-500:]
    assert flood.value["sent"] == 20000
    data = [m["params"]["data"] for m in flood.messages[:-1]]
    assert all(m.get("method") == "notifications/message" for m in flood.messages[:-1])
    assert len(data) == len(set(data)) <= 20000
    assert data == sorted(data, key=lambda d: int(d[1:])), "notifications reordered"
    assert rss_kib(gw.proc.pid) - rss < 64 * 1024
    assert s.call("echo", rid=103).status == 200
    s.delete()


@pytest.mark.parametrize("kind,result", [("ping", {}), ("roots/list", {"roots": []})])
def test_a_program_flooding_requests_the_gateway_answers_is_not_deadlocked(gw, kind, result):
    """5000 `ping` (or `roots/list`) requests written before the program reads its stdin:
    the gateway answers each (in order, exactly), keeps reading, and the call ends."""
    s = Session(gw, "/flood", None, caps_for("pingflood-" + kind))
    rss = rss_kib(gw.proc.pid)
    reply = s.call("pingflood", {"count": 5000, "method": kind}, rid=111)
    assert reply.status == 200, f"{reply.raw[:300]} after {reply.elapsed:.1f}s"
    assert reply.value == {"pid": reply.value["pid"], "sent": 5000, "answered": 5000, "last": result, "odd": []}
    assert rss_kib(gw.proc.pid) - rss < 64 * 1024
    assert s.call("echo", rid=112).status == 200
    s.delete()


# ==================================================================== 5. config edge cases

def check(config: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(_binary()), "check", "--config", str(config)], capture_output=True, text=True,
                          timeout=20, env=env or dict(os.environ))


def single(tmp: Path, upstream: str, name: str = "gateway.toml") -> Path:
    config = tmp / name
    config.write_text('[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n'
                      '[audit]\nsink = "off"\n' + upstream)
    return config


def test_odd_but_valid_commands_env_and_cwd_work(tmp_path):
    folder = tmp_path / "my progs ü"
    folder.mkdir()
    program = write_program(folder, "prög ram.py")
    (tmp_path / "sub dir").mkdir()
    ups = [
        f'[[upstream]]\nid = "uni"\nname = "Unicode"\ncommand = ["{program}", "ärg with space", ""]\n'
        'env = { A = "line1\\nline2", B = "tab\\there", C = "" }\n',
        f'[[upstream]]\nid = "rel"\nname = "Relative cwd"\ncommand = ["{PYTHON}", "{program}"]\n'
        'cwd = "sub dir"\n',
    ]
    routes = "".join(route_toml(f"/{u}", u) for u in ("uni", "rel"))
    config = single(tmp_path, "".join(ups) + routes)
    out = check(config)
    assert out.returncode == 0, out.stdout + out.stderr
    with running(config, tmp_path) as gw:
        uni = modern_call(gw, "/uni", "env")
        assert uni.status == 200, uni.raw
        value = uni.value
        assert value["argv"] == ["ärg with space", ""]
        assert {k: value["env"][k] for k in "ABC"} == {"A": "line1\nline2", "B": "tab\there", "C": ""}
        rel = modern_call(gw, "/rel", "env").value
        assert rel["cwd"] == str(tmp_path / "sub dir")


@pytest.mark.parametrize("upstream,env,says", [
    pytest.param('command = []\n', {}, "the program and its arguments", id="empty-command"),
    pytest.param(f'command = ["{PYTHON}", "-c", "0"]\nenv_from = ["REVIEW_NOT_UTF8"]\n',
                 {"REVIEW_NOT_UTF8": b"caf\xe9"}, "REVIEW_NOT_UTF8 is not valid UTF-8", id="env_from-not-utf8"),
    pytest.param(f'command = ["{PYTHON}", "-c", "0"]\ncwd = "nowhere"\n', {}, "is not a folder", id="missing-cwd"),
])
def test_bad_stdio_settings_are_config_errors(tmp_path, upstream, env, says):
    config = single(tmp_path, f'[[upstream]]\nid = "bad"\nname = "Bad"\n{upstream}' + route_toml("/bad", "bad"))
    environ = os.environb.copy()
    for k, v in env.items():
        environ[k.encode()] = v if isinstance(v, bytes) else v.encode()
    checked = subprocess.run([str(_binary()), "check", "--config", str(config)], capture_output=True,
                             timeout=20, env=environ)
    said = (checked.stdout + checked.stderr).decode(errors="replace")
    assert checked.returncode == 2 and says in said and "upstream[0]" in said, said
    ran = subprocess.run([str(_binary()), "run", "--config", str(config)], capture_output=True, timeout=20,
                         env=environ, stdin=subprocess.DEVNULL)
    said = (ran.stdout + ran.stderr).decode(errors="replace")
    assert ran.returncode != 0 and says in said and "listening" not in said, said
    assert "panicked" not in said


@pytest.mark.xfail(reason="open: a relative command is checked and started from different folders (issue 23 note)", strict=True)
def test_a_relative_program_path_is_checked_where_it_runs(tmp_path):
    """`command = ["./server.py"]` with `cwd = "sub dir"`: the program lies next to the
    config (where the gateway was started), not in `cwd`. `check` must not depend on
    the folder it is run from, and what it passes must start."""
    write_program(tmp_path, "server.py")
    (tmp_path / "sub dir").mkdir()
    config = single(tmp_path, '[[upstream]]\nid = "rel"\nname = "Rel"\ncommand = ["./server.py"]\n'
                              'cwd = "sub dir"\n' + route_toml("/rel", "rel"))
    verdicts = {}
    for where in (tmp_path, Path("/")):
        out = subprocess.run([str(_binary()), "check", "--config", str(config)], capture_output=True, text=True,
                             timeout=20, cwd=where)
        verdicts[str(where)] = (out.returncode, (out.stdout + out.stderr).strip()[-300:])
    codes = {code for code, _ in verdicts.values()}
    assert len(codes) == 1, f"check's verdict depends on the folder it runs in: {verdicts}"
    if codes == {2}:
        assert all("command" in said for _, said in verdicts.values()), verdicts
        return
    with running(config, tmp_path) as gw:
        reply = modern_call(gw, "/rel", "echo")
        assert reply.status == 200, f"check said ok ({verdicts}), the call got: {reply.raw[:400]}"


def test_a_sandbox_writable_root_works_or_is_refused_clearly(shared_tmp):
    """`writable = ["/"]` undoes the whole file-system confinement. Either `check`
    refuses it naming the key, or the program runs (and then it can read what the
    operator thought hidden: the gateway's own folder)."""
    if not os.access("/usr/bin/bwrap", os.X_OK):
        pytest.fail("bubblewrap is not installed (/usr/bin/bwrap)", pytrace=False)
    tmp_path = shared_tmp
    program = write_program(tmp_path)
    config = single(tmp_path, f'[[upstream]]\nid = "root"\nname = "Root"\ncommand = ["{PYTHON}", "{program}"]\n'
                              '[upstream.sandbox]\nwritable = ["/"]\n' + route_toml("/root", "root"))
    out = check(config)
    if out.returncode != 0:
        assert out.returncode == 2 and "sandbox.writable" in out.stdout + out.stderr, out.stdout + out.stderr
        return
    with running(config, tmp_path) as gw:
        reply = modern_call(gw, "/root", "env")
        assert reply.status == 200, reply.raw
        assert reply.value["pid"] == 2, "not in the sandbox's PID namespace"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    """max_memory_bytes = 1024: no interpreter starts (`check` cannot know)."""
    tmp = tmp_path_factory.mktemp("stdio-tiny")
    program = write_program(tmp)
    config = single(tmp, f'[[upstream]]\nid = "tiny"\nname = "Tiny"\ncommand = ["{PYTHON}", "{program}"]\n'
                         'max_memory_bytes = 1024\nconnect_timeout = "3s"\n' + route_toml("/tiny", "tiny"))
    assert check(config).returncode == 0
    with running(config, tmp) as gw:
        first = modern_call(gw, "/tiny", "echo")
        second = modern_call(gw, "/tiny", "echo", rid=2)
        yield gw, first, second
        assert gw.proc.poll() is None and "panicked" not in gw.log()


def test_a_program_that_cannot_start_is_unreachable_at_once(tiny):
    gw, first, second = tiny
    assert first.status == 502 and first.reason == "upstream_unreachable", first.raw
    assert first.elapsed < 3, first.elapsed
    message = first.one["error"]["message"]
    assert "did not start" in message or "could not be started" in message, message
    assert gw.metric("portcullis_stdio_exits_total", upstream="tiny", how="signalled") >= 1
    assert second.status == 502 and second.reason == "upstream_unreachable" and second.elapsed < 1, second.raw


@pytest.mark.xfail(reason="open: how a program that cannot start ended is not said (issue 23 note)", strict=True)
def test_a_program_that_cannot_start_is_named_with_how_it_ended(tiny):
    """The operator can tell why: the refusal or the log says it was killed by
    SIGSEGV (a raw `unix_wait_status(11)` is not words an operator reads)."""
    gw, first, _ = tiny
    message = first.one["error"]["message"]
    ended = [x for x in gw.log().splitlines() if "stdio program ended" in x and "upstream=tiny" in x]
    assert ended, gw.log()[-2000:]
    assert any(re.search(r"signal\W+(11|SIGSEGV)|SIGSEGV", x) for x in ended + [message]), \
        f"neither the refusal nor the log says the program was killed by SIGSEGV: {message!r} / {ended}"


# ==================================================================== 6. reload

def test_a_reload_that_changes_the_command_lets_the_call_in_flight_finish(tmp_path):
    program = write_program(tmp_path)

    def conf(version: str) -> str:
        return ('[[listener]]\naddress = "127.0.0.1:0"\n[admin]\naddress = "127.0.0.1:0"\n[audit]\nsink = "off"\n'
                f'[[upstream]]\nid = "u"\nname = "U"\ncommand = ["{PYTHON}", "{program}", "{version}"]\n'
                'stop_timeout = "1s"\nresponse_timeout = "5s"\n' + route_toml("/u", "u"))

    config = tmp_path / "gateway.toml"
    config.write_text(conf("v1"))
    with running(config, tmp_path) as gw:
        session = Session(gw, "/u", None, caps_for("reload"))
        old_session_pid = session.call("echo", rid=1).value["pid"]
        idle = modern_call(gw, "/u", "echo", rid=2)
        assert idle.value["argv"] == ["v1"]
        idle_pid = idle.value["pid"]
        box: dict = {}
        worker = threading.Thread(target=lambda: box.setdefault("r", session.call("slow", {"ms": 1500}, rid=3)))
        worker.start()
        time.sleep(0.4)
        config.write_text(conf("v2"))
        gw.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: "config reloaded" in gw.log(), 3), gw.log()[-2000:]
        new = modern_call(gw, "/u", "echo", rid=4)
        assert new.status == 200 and new.value["argv"] == ["v2"], new.raw
        worker.join(5)
        inflight: Reply = box["r"]
        assert inflight.status == 200, inflight.raw
        assert inflight.value["argv"] == ["v1"] and inflight.value["pid"] == old_session_pid
        # Both old processes stop once the call is done (stop_timeout = 1 s).
        assert wait_until(lambda: not alive(old_session_pid) and not alive(idle_pid), 3), \
            (alive(old_session_pid), alive(idle_pid))
        assert alive(new.value["pid"])
        # The old session's program is gone: its client starts over.
        gone = session.call("echo", rid=5)
        assert gone.status == 404, gone.raw
        fresh = Session(gw, "/u", None, caps_for("reload"))
        assert fresh.call("echo", rid=6).value["argv"] == ["v2"]
        assert gw.proc.poll() is None and "panicked" not in gw.log()
