"""A hostile MCP upstream of our own: a real HTTP/1.1 server on 127.0.0.1 that
answers each request with a script of raw bytes, pauses and closes, so that it
can do what a well-behaved server library never would (duplicate members, a
batch, half a body, a silent stream, a server-to-client request on a stream).

Each case of `hostile_cases.py` is served on its own path, `/case/<name>`; the
script gets the parsed request and returns the steps to play. What every case
received is recorded, so a checker can tell whether an answer reached the
upstream.

Run it alone to poke at it by hand:

    .venv/bin/python tests/python/hostile_upstream.py --listen 127.0.0.1:9200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Union

MAX_HEAD = 64 * 1024


@dataclass(frozen=True)
class Write:
    data: bytes


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Close:
    """Close the connection now (whatever was promised)."""


Step = Union[Write, Sleep, Close]


@dataclass
class Request:
    """One request as the upstream received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    message: Any = None  # the JSON body, when it parsed

    @property
    def id_json(self) -> str:
        """The request's id as JSON text (for an answer to this request)."""
        if isinstance(self.message, dict) and "id" in self.message:
            return json.dumps(self.message["id"])
        return "null"

    @property
    def params(self) -> dict:
        if isinstance(self.message, dict) and isinstance(self.message.get("params"), dict):
            return self.message["params"]
        return {}


Script = Callable[[Request], list[Step]]


# ---------------------------------------------------------------- step makers

def response(status: str, content_type: str | None, body: bytes | str, extra: str = "") -> list[Step]:
    body = body.encode() if isinstance(body, str) else body
    ctype = f"content-type: {content_type}\r\n" if content_type else ""
    head = f"HTTP/1.1 {status}\r\n{ctype}content-length: {len(body)}\r\n{extra}\r\n"
    return [Write(head.encode() + body)]


def json_body(message: str, status: str = "200 OK") -> list[Step]:
    return response(status, "application/json", message)


def sse_head() -> Step:
    return Write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                 b"transfer-encoding: chunked\r\n\r\n")


def chunk(data: bytes | str) -> Step:
    data = data.encode() if isinstance(data, str) else data
    return Write(f"{len(data):x}\r\n".encode() + data + b"\r\n")


def event(message: str) -> Step:
    return chunk(f"event: message\ndata: {message}\n\n")


def sse_end() -> Step:
    return Write(b"0\r\n\r\n")


def sse(*messages: str) -> list[Step]:
    """A whole event stream: one event per message, then the end."""
    return [sse_head(), *(event(m) for m in messages), sse_end()]


def result(req: Request, result_json: str) -> str:
    return f'{{"jsonrpc":"2.0","id":{req.id_json},"result":{result_json}}}'


BENIGN_TOOLS = ('{"resultType":"complete","ttlMs":60000,"cacheScope":"public","tools":[{"name":"hostile_tool","description":"Looks harmless",'
                '"inputSchema":{"type":"object","properties":{"hint":{"type":"string"}}}}]}')


def benign(req: Request) -> list[Step]:
    """What the upstream answers to the requests a case is not about (an SDK
    client lists the tools before it calls one)."""
    if isinstance(req.message, dict) and req.message.get("method") == "tools/list":
        return json_body(result(req, BENIGN_TOOLS))
    if isinstance(req.message, dict) and req.message.get("method") == "tools/call" and declares_tasks(req):
        return json_body(result(req, BENIGN_TASK))
    return json_body(result(req, '{"resultType":"complete"}'))


# A task a client that declared the Tasks extension is given for its
# tools/call (a case about tasks/* polls it afterwards).
BENIGN_TASK = ('{"resultType":"task","taskId":"786512e2-9e0d-44bd-8f29-789f320fe840","status":"working",'
               '"createdAt":"2026-11-25T10:30:00Z","lastUpdatedAt":"2026-11-25T10:30:00Z","ttlSeconds":600,'
               '"requestState":"up-0"}')


def declares_tasks(req: Request) -> bool:
    caps = req.params.get("_meta", {}).get("io.modelcontextprotocol/clientCapabilities", {})
    return isinstance(caps, dict) and "io.modelcontextprotocol/tasks" in (caps.get("extensions") or {})


def only_for(method: str, script: Script) -> Script:
    """`script` for requests of `method`, the benign answer for the rest."""

    def run(req: Request) -> list[Step]:
        asked = req.message.get("method") if isinstance(req.message, dict) else None
        return script(req) if asked == method else benign(req)

    return run


# --------------------------------------------------------------------- server

@dataclass
class HostileUpstream:
    """The server: `scripts` maps a case name to its script."""

    scripts: dict[str, Script]
    received: dict[str, list[Request]] = field(default_factory=lambda: defaultdict(list))
    host: str = "127.0.0.1"
    port: int = 0

    def url(self, case: str) -> str:
        return f"http://{self.host}:{self.port}/case/{case}"

    async def serve(self, ready: threading.Event | None = None) -> None:
        server = await asyncio.start_server(self._connection, self.host, self.port)
        self.port = server.sockets[0].getsockname()[1]
        if ready:
            ready.set()
        async with server:
            await server.serve_forever()

    def start_in_thread(self) -> "HostileUpstream":
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=lambda: loop.run_until_complete(self.serve(ready)), daemon=True)
        thread.start()
        if not ready.wait(10):
            raise RuntimeError("the hostile upstream did not start")
        return self

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    return
                case = req.path.removeprefix("/case/").split("?")[0]
                self.received[case].append(req)
                script = self.scripts.get(case)
                steps = script(req) if script else response("404 Not Found", "text/plain", "no such case")
                if not await _play(writer, steps) or req.headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        return None
    if len(head) > MAX_HEAD:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += data[:-2]
    try:
        message = json.loads(body) if body else None
    except ValueError:
        message = None
    return Request(method, path, headers, body, message)


async def _play(writer: asyncio.StreamWriter, steps: list[Step]) -> bool:
    """Play the steps; False when the connection is to be (or was) closed."""
    for step in steps:
        if isinstance(step, Write):
            writer.write(step.data)
            try:
                await writer.drain()
            except ConnectionError:
                return False
        elif isinstance(step, Sleep):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, Close):
            return False
    return True


def main() -> None:
    import hostile_cases

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0")
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    up = HostileUpstream(hostile_cases.scripts(), host=host, port=int(port))

    async def run() -> None:
        task = asyncio.create_task(up.serve())
        await asyncio.sleep(0.2)
        for c in hostile_cases.CASES:
            print(f"{up.url(c.name):60} {c.reason}: {c.attack}")
        await task

    asyncio.run(run())


if __name__ == "__main__":
    main()
