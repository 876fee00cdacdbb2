"""An MCP server on the official Python SDK (mcp 2.3.0) that speaks ONLY protocol
2026-07-28: the flows of flows.json (the tools of py_server.py, asked through
`input_required`), and no 2025-11-25 at all.

The SDK serves both generations on one URL; this server keeps only the newer one:
a request that is not a 2026-07-28 request (an `initialize`, a POST without or with
another `MCP-Protocol-Version`) is refused with the SDK's own -32022 "Unsupported
protocol version" (HTTP 400), and GET and DELETE get 405, so a 2025-11-25 client
cannot use it at all. Its `server/discover` lists only 2026-07-28.

One more tool, `linger(ask=True, seconds=60)`: asks one question ("Carry on?")
unless `ask` is false, then works `seconds` before it answers, so a test can cancel
the call while the server still works and see whether that work was cancelled.

For the tests it also says what it received (never the values typed into a form):
    GET /received   [{method, name, version, caps, answers: {key: action}, state}]
    GET /stats      {"linger": {"started": n, "cancelled": n, "finished": n}}

    python py_mrtr_only.py      listens on 127.0.0.1, a port the OS picks

prints "listening http://127.0.0.1:PORT/mcp" once it accepts connections.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context
from mcp.shared.inbound import unsupported_protocol_version_rejection

sys.path.insert(0, str(Path(__file__).resolve().parent))
from py_server import MODERN, build, decode_state, encode_state, outcome  # noqa: E402

MCP_PATH = "/mcp"
LINGER_SECONDS = 60.0

received: list[dict[str, Any]] = []
linger_runs = {"started": 0, "cancelled": 0, "finished": 0}


def summary(body: Any, headers: dict[str, str]) -> dict[str, Any]:
    """What a test may know of a request: its shape, never a typed value."""
    params = body.get("params") if isinstance(body, dict) else None
    params = params if isinstance(params, dict) else {}
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    responses = params.get("inputResponses")
    answers = None
    if isinstance(responses, dict):
        answers = {k: (v.get("action") if isinstance(v, dict) else None) for k, v in responses.items()}
    return {
        "method": body.get("method") if isinstance(body, dict) else None,
        "name": params.get("name"),
        "version": headers.get("mcp-protocol-version"),
        "caps": meta.get("io.modelcontextprotocol/clientCapabilities"),
        "answers": answers,
        "state": "requestState" in params,
    }


def add_linger(server) -> None:
    @server.tool(description="Asks whether to carry on (unless ask is false), then works `seconds` before it answers.")
    async def linger(
        ctx: Context, ask: bool = True, seconds: float = LINGER_SECONDS
    ) -> types.CallToolResult | types.InputRequiredResult:
        progress = decode_state(ctx.request_state)
        if ask and progress["round"] == 0:
            question = types.ElicitRequestFormParams(
                message="Carry on with the long job?",
                requested_schema={"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]},
            )
            return types.InputRequiredResult(
                input_requests={"go": types.ElicitRequest(params=question)},
                request_state=encode_state({"answers": {}, "round": 1}),
            )
        linger_runs["started"] += 1
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            linger_runs["cancelled"] += 1
            raise
        linger_runs["finished"] += 1
        return outcome("linger", {"done": True})


async def send_json(send, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(payload).encode() if payload is not None else b""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def only_modern(inner):
    """The SDK's app behind a gate that lets through 2026-07-28 requests only."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        path = scope["path"]
        if path == "/received" and scope["method"] == "GET":
            await send_json(send, 200, received)
            return
        if path == "/stats" and scope["method"] == "GET":
            await send_json(send, 200, {"linger": linger_runs})
            return
        if path != MCP_PATH:
            await inner(scope, receive, send)
            return
        if scope["method"] != "POST":
            await send_json(send, 405, None, [(b"allow", b"POST")])
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        received.append(summary(body, headers))
        version = headers.get("mcp-protocol-version")
        if version != MODERN or (isinstance(body, dict) and body.get("method") == "initialize"):
            requested = version
            if isinstance(body, dict) and isinstance(body.get("params"), dict):
                requested = body["params"].get("protocolVersion", requested)
            rejection = unsupported_protocol_version_rejection(str(requested))
            error = {"code": rejection.code, "message": rejection.message, "data": rejection.data}
            rid = body.get("id") if isinstance(body, dict) else None
            await send_json(send, 400, {"jsonrpc": "2.0", "id": rid, "error": error})
            return

        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await inner(scope, replay, send)

    return app


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server_ = build()
    add_linger(server_)
    app = only_modern(server_.streamable_http_app())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.02)
        print(f"listening http://127.0.0.1:{port}{MCP_PATH}", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
