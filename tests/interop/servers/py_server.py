"""An MCP server on the official Python SDK (mcp 2.3.0) that serves both protocol
generations on one URL: every flow of flows.json as a tool.

- A 2026-07-28 request is asked through `input_required` (MRTR): the round's
  questions go into `inputRequests`, the answers so far into `requestState`.
- A 2025-11-25 session (initialize, Mcp-Session-Id) is asked the old way: each
  question is pushed as an `elicitation/create` request on the call's stream and
  the client POSTs its answer back.

Both end with the same JSON text (see servers/flows.mjs), so one test can compare
the generations.

    python py_server.py        listens on 127.0.0.1, a port the OS picks

prints "listening http://127.0.0.1:PORT/mcp" once it accepts connections.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

MODERN = "2026-07-28"
FLOWS: dict[str, Any] = {
    name: flow
    for name, flow in json.loads((Path(__file__).parent / "flows.json").read_text()).items()
    if not name.startswith("_")
}


def rounds_of(name: str, args: dict[str, Any]) -> list[dict[str, dict[str, Any]]]:
    """The flow's rounds with placeholders filled in: [{key: question}], one entry a round."""
    flow = FLOWS[name]

    def expand(round_: dict[str, Any], index: int, suffix: str) -> dict[str, dict[str, Any]]:
        filled = {}
        for key, question in round_.items():
            message = (
                question["message"].replace("{hint}", str(args.get("hint", ""))).replace("{round}", str(index + 1))
            )
            filled[f"{key}{suffix}"] = {**question, "message": message}
        return filled

    if "repeat_arg" in flow:
        times = int(args.get(flow["repeat_arg"], 1))
        return [expand(flow["rounds"][0], i, f"-{i + 1}") for i in range(times)]
    return [expand(r, i, "") for i, r in enumerate(flow["rounds"])]


def outcome(tool: str, result: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps({"tool": tool, **result}))])


def encode_state(progress: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(progress).encode()).decode().rstrip("=")


def decode_state(text: str | None) -> dict[str, Any]:
    if text is None:
        return {"answers": {}, "round": 0}
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def as_input_request(question: dict[str, Any]) -> types.ElicitRequest:
    if "url" in question:
        params: types.ElicitRequestParams = types.ElicitRequestURLParams(
            message=question["message"], url=question["url"], elicitation_id=uuid.uuid4().hex
        )
    else:
        params = types.ElicitRequestFormParams(message=question["message"], requested_schema=question["schema"])
    return types.ElicitRequest(params=params)


def modern_step(
    name: str, rounds: list[dict[str, Any]], ctx: Context
) -> types.CallToolResult | types.InputRequiredResult:
    """One MRTR round: check the answers to the last round asked, then ask the next one."""
    progress = decode_state(ctx.request_state)
    answers = dict(progress["answers"])
    responses = ctx.input_responses or {}
    if progress["round"] > 0:
        for key in rounds[progress["round"] - 1]:
            response = responses.get(key)
            if not isinstance(response, types.ElicitResult):
                return outcome(name, {"error": f"no answer for {key}"})
            if response.action != "accept":
                return outcome(name, {"stopped": {"key": key, "action": response.action}})
            answers[key] = response.content
    if progress["round"] >= len(rounds):
        return outcome(name, {"answers": answers})
    ask = rounds[progress["round"]]
    return types.InputRequiredResult(
        input_requests={key: as_input_request(q) for key, q in ask.items()},
        request_state=encode_state({"answers": answers, "round": progress["round"] + 1}),
    )


async def pushed_flow(name: str, rounds: list[dict[str, Any]], ctx: Context) -> types.CallToolResult:
    """The 2025-11-25 way: each question pushed as its own elicitation/create request."""
    session = ctx.request_context.session
    answers: dict[str, Any] = {}
    for round_ in rounds:
        for key, question in round_.items():
            if "url" in question:
                reply = await session.elicit_url(
                    question["message"], question["url"], uuid.uuid4().hex, related_request_id=ctx.request_id
                )
            else:
                reply = await session.elicit_form(
                    question["message"], question["schema"], related_request_id=ctx.request_id
                )
            if reply.action != "accept":
                return outcome(name, {"stopped": {"key": key, "action": reply.action}})
            answers[key] = reply.content
    return outcome(name, {"answers": answers})


async def run_flow(name: str, args: dict[str, Any], ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    rounds = rounds_of(name, args)
    if ctx.protocol_version == MODERN:
        # With a progress token, a notification before the result makes the answer an event stream.
        await ctx.report_progress(decode_state(ctx.request_state)["round"] + 1, message="thinking")
        return modern_step(name, rounds, ctx)
    return await pushed_flow(name, rounds, ctx)


def argumentless_flow(name: str):
    async def flow(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        return await run_flow(name, {}, ctx)

    return flow


def build() -> MCPServer:
    server = MCPServer("portcullis-interop-python")

    @server.tool(description=FLOWS["book"]["description"])
    async def book(hint: str, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        return await run_flow("book", {"hint": hint}, ctx)

    @server.tool(description=FLOWS["endless"]["description"])
    async def endless(rounds: int, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        return await run_flow("endless", {"rounds": rounds}, ctx)

    for name in FLOWS:
        if name not in ("book", "endless"):
            server.tool(name=name, description=FLOWS[name]["description"])(argumentless_flow(name))

    @server.tool(description="Answers with its text.")
    async def echo(text: str) -> str:
        return text

    return server


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = build().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))

    async def announce() -> None:
        while not server.started:
            await anyio.sleep(0.02)
        print(f"listening http://127.0.0.1:{port}/mcp", flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(0)
