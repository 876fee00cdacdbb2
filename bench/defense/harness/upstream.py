"""A scripted MCP server (2026-07-28, stateless Streamable HTTP) on 127.0.0.1.

It stands for the servers a benchmark describes: each server is served on its
own path (`/s/<name>`), lists the tools it is given, answers `server/discover`
with the identity it is given and each `tools/call` with the result the
benchmark names (or a neutral one), and records every message that arrived, so
a harness can tell what the gateway forwarded and how. It can serve over TLS
and be replaced by another server on the same port (a server swapped under its
address: new certificate, new identity), closing every connection the old one
had, as a real replacement would.

Standard library only; one thread per connection.
"""

from __future__ import annotations

import copy
import json
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

PROTOCOL_VERSION = "2026-07-28"
NEUTRAL_RESULT = {"content": [{"type": "text", "text": "done"}]}
# A header a harness may put on a request to find it again among what arrived
# (the gateway forwards end-to-end headers).
TAG_HEADER = "x-bench-call"

Result = dict[str, Any]
ResultFor = Callable[[str, dict[str, Any]], Result]


@dataclass
class Received:
    """One JSON-RPC message as the server received it (after the gateway)."""

    method: str
    params: dict[str, Any]
    headers: dict[str, str]


@dataclass
class ServerScript:
    """What one scripted server says. Mutable: a harness may change its tools
    between two listings (a definition that changes after it was trusted)."""

    name: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, Result] = field(default_factory=dict)  # by tool name
    result_for: ResultFor | None = None  # overrides `results` when set
    server_info: dict[str, Any] = field(default_factory=lambda: {"name": "scripted", "version": "1.0.0"})
    instructions: str | None = None
    # A call of one of these tools is answered with this HTTP status and these
    # headers (a 403 with a `WWW-Authenticate` challenge) and a JSON-RPC error.
    http_refusals: dict[str, tuple[int, dict[str, str]]] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)  # each result as sent, by arrival
    tagged: dict[str, Received] = field(default_factory=dict)  # by the client's x-bench-call header
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.method == "tools/call"]

    def answer(self, method: str, params: dict[str, Any]) -> Result | None:
        """The result for one request, or None for a method this server lacks."""
        if method == "tools/list":
            return {"resultType": "complete", "tools": copy.deepcopy(self.tools)}
        if method == "tools/call":
            name = params.get("name")
            args = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
            if self.result_for is not None:
                result = self.result_for(str(name), args)
            else:
                result = self.results.get(str(name), NEUTRAL_RESULT)
            result = copy.deepcopy(result)
            result.setdefault("resultType", "complete")
            return result
        if method == "server/discover":
            result: Result = {
                "resultType": "complete",
                "supportedVersions": [PROTOCOL_VERSION],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": copy.deepcopy(self.server_info)},
            }
            if self.instructions is not None:
                result["instructions"] = self.instructions
            return result
        if method in ("prompts/list",):
            return {"resultType": "complete", "prompts": []}
        if method in ("resources/list",):
            return {"resultType": "complete", "resources": []}
        if method in ("resources/templates/list",):
            return {"resultType": "complete", "resourceTemplates": []}
        if method == "ping":
            return {"resultType": "complete"}
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def do_GET(self) -> None:  # noqa: N802
        self._plain(405, b"")

    def do_DELETE(self) -> None:  # noqa: N802
        self._plain(405, b"")

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        script = self.server.owner.script_for(self.path)
        if script is None:
            self._plain(404, b"")
            return
        try:
            message = json.loads(body)
        except ValueError:
            self._json(400, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            self._plain(202, b"")  # a response or something else: nothing to answer
            return
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        received = Received(message["method"], params, {k.lower(): v for k, v in self.headers.items()})
        with script.lock:
            script.received.append(received)
            if tag := received.headers.get(TAG_HEADER):
                script.tagged[tag] = received
        if "id" not in message:
            self._plain(202, b"")
            return
        refusal = script.http_refusals.get(str(params.get("name"))) if message["method"] == "tools/call" else None
        if refusal is not None:
            status, headers = refusal
            error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32001, "message": "refused"}}
            self._json(status, error, headers)
            return
        result = script.answer(message["method"], params)
        if result is None:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}}
        else:
            with script.lock:
                script.sent.append(copy.deepcopy(result))
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self._json(200, reply)

    def _json(self, status: int, message: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(message, ensure_ascii=False).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _plain(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], owner: "Upstream", tls: ssl.SSLContext | None):
        self.owner = owner
        self.tls = tls
        self.open: set[socket.socket] = set()
        self.open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        with self.open_lock:
            self.open.add(sock)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a TLS handshake the gateway gave up on, a closed connection: not the harness's business

    def shutdown_request(self, request: socket.socket) -> None:
        with self.open_lock:
            self.open.discard(request)
        super().shutdown_request(request)

    def close_all(self) -> None:
        with self.open_lock:
            socks = list(self.open)
            self.open.clear()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass


class Upstream:
    """Scripted servers behind one port. `url(name)` is a server's MCP endpoint."""

    def __init__(self, tls: tuple[str, str] | None = None, host: str = "127.0.0.1"):
        self.scripts: dict[str, ServerScript] = {}
        self.host = host
        self._server = _Server((host, 0), self, _tls_context(tls))
        self.port = self._server.server_address[1]
        self.scheme = "https" if tls else "http"
        self._thread = self._serve()

    def _serve(self) -> threading.Thread:
        t = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        t.start()
        return t

    def add(self, script: ServerScript) -> ServerScript:
        self.scripts[script.name] = script
        return script

    def script_for(self, path: str) -> ServerScript | None:
        prefix = "/s/"
        if not path.startswith(prefix):
            return None
        return self.scripts.get(path[len(prefix):].split("?", 1)[0])

    def url(self, name: str, authority: str | None = None) -> str:
        return f"{self.scheme}://{authority or f'{self.host}:{self.port}'}/s/{name}"

    def replace(self, tls: tuple[str, str] | None = None) -> None:
        """Another server on the same port: the old one stops, every connection it
        had is closed, and the new one (with `tls`, when given) serves the same
        scripts from now on."""
        self._server.shutdown()
        self._server.close_all()
        self._server.server_close()
        self._server = _Server((self.host, self.port), self, _tls_context(tls))
        self._thread = self._serve()

    def close(self) -> None:
        self._server.shutdown()
        self._server.close_all()
        self._server.server_close()


def _tls_context(tls: tuple[str, str] | None) -> ssl.SSLContext | None:
    if tls is None:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls[0], tls[1])
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx
