"""The official MCP Python SDK (mcp 2.3.0) as a client of the gateway, end to end.

The SDK speaks 2026-07-28 over Streamable HTTP on its own: `Client(url)` probes
`server/discover` (mode="auto"), then stamps every request with
`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` (tools/call, prompts/get,
resources/read) and the `_meta` envelope (protocolVersion, clientInfo,
clientCapabilities). A `tools/call` answered with `input_required` is driven by the
SDK itself: each `inputRequests` entry goes to the client's `elicitation_callback`
(its `context.request_id` is the request KEY), and the call is retried with a new
id, the same params, `inputResponses` and the echoed `requestState`. The raw round
is available through `client.session.call_tool(..., allow_input_required=True)`.
Progress comes through `call_tool(progress_callback=...)`, which puts a
`progressToken` (the request id) in `_meta`.

Raw-HTTP checks use httpx2, the HTTP client the SDK itself depends on (mcp 2.x
moved from httpx to httpx2).
"""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

PROTOCOL = "2026-07-28"
ROOM_IDS = {"atrium", "studio-b", "nook"}
AMBIGUOUS_HINT = "the big room"
# The seed scenario's arguments: a day, an hour and a hint naming two rooms.
BOOKING = {"day": "2026-09-17", "hour": 9, "room_hint": AMBIGUOUS_HINT}


class Wire:
    """What the SDK put on the wire: each POST's headers and parsed JSON body."""

    def __init__(self) -> None:
        self.requests: list[tuple[httpx2.Headers, dict[str, Any]]] = []

    async def on_request(self, request: httpx2.Request) -> None:
        self.requests.append((request.headers, json.loads(request.content)))

    def calls(self, tool: str) -> list[tuple[httpx2.Headers, dict[str, Any]]]:
        return [
            (h, b)
            for h, b in self.requests
            if b.get("method") == "tools/call" and b.get("params", {}).get("name") == tool
        ]


@asynccontextmanager
async def sdk_client(gateway, **client_kwargs: Any):
    """An SDK `Client` connected through the gateway, plus a record of its requests."""
    wire = Wire()
    http = create_mcp_http_client()
    http.event_hooks["request"].append(wire.on_request)
    async with http:
        async with Client(streamable_http_client(gateway.url, http_client=http), **client_kwargs) as client:
            # mode="auto" fell back to the legacy initialize handshake if server/discover
            # did not make it through the gateway; the demo server has no initialize.
            assert client.protocol_version == PROTOCOL
            yield client, wire


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def offered_room_ids(params: types.ElicitRequestParams) -> set[str]:
    assert isinstance(params, types.ElicitRequestFormParams), f"expected a form elicitation, got {params!r}"
    schema = params.requested_schema
    prop = schema["properties"]["room_id"]
    options = prop.get("oneOf") or prop.get("anyOf") or [{"const": v} for v in prop.get("enum", [])]
    return {opt["const"] for opt in options}


# 1 ---------------------------------------------------------------------------


async def test_sdk_lists_the_four_tools(gateway):
    async with sdk_client(gateway) as (client, wire):
        listing = await client.list_tools()
    assert sorted(t.name for t in listing.tools) == ["book_room", "cancel_booking", "get_room", "room_report"]
    # The SDK sent the 2026-07-28 routing headers, and the gateway accepted them.
    headers, body = next((h, b) for h, b in wire.requests if b["method"] == "tools/list")
    assert headers["mcp-protocol-version"] == PROTOCOL
    assert headers["mcp-method"] == "tools/list"
    assert body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == PROTOCOL


async def test_sdk_get_room_immediate_result(gateway):
    async with sdk_client(gateway) as (client, _):
        result = await client.call_tool("get_room", {"room_id": "nook"})
    assert not result.is_error, text_of(result)
    assert "nook" in text_of(result)
    assert result.structured_content == {"room_id": "nook", "seats": 4}


# 2 ---------------------------------------------------------------------------


async def test_mrtr_book_room_accept_driven_by_the_sdk(gateway):
    """The SDK drives the MRTR round itself through its elicitation callback."""
    asked: list[tuple[types.ClientRequestContext, types.ElicitRequestParams]] = []

    async def on_elicit(context, params):
        asked.append((context, params))
        return types.ElicitResult(action="accept", content={"room_id": "studio-b"})

    async with sdk_client(gateway, elicitation_callback=on_elicit) as (client, wire):
        result = await client.call_tool("book_room", BOOKING)

    assert len(asked) == 1, "the elicitation callback should be asked exactly once"
    context, params = asked[0]
    assert context.request_id == "room"  # the inputRequests KEY survived the gateway
    assert isinstance(params, types.ElicitRequestFormParams)
    assert AMBIGUOUS_HINT in params.message
    assert "which" in params.message.lower()
    assert offered_room_ids(params) == ROOM_IDS

    assert not result.is_error, text_of(result)
    assert result.result_type == "complete"
    assert "Booked studio-b" in text_of(result)
    assert result.structured_content == {"booked": True, "room_id": "studio-b", "day": "2026-09-17", "hour": 9}

    # Two rounds on the wire: the first without, the retry with, inputResponses and requestState.
    calls = wire.calls("book_room")
    assert len(calls) == 2
    (_, first), (retry_headers, retry) = calls
    assert "requestState" not in first["params"] and "inputResponses" not in first["params"]
    assert retry["id"] != first["id"]
    assert retry["params"]["arguments"] == first["params"]["arguments"]
    assert retry["params"]["inputResponses"]["room"]["action"] == "accept"
    assert retry["params"]["inputResponses"]["room"]["content"] == {"room_id": "studio-b"}
    assert isinstance(retry["params"]["requestState"], str) and retry["params"]["requestState"]
    assert retry_headers["mcp-name"] == "book_room"


async def test_mrtr_book_room_raw_round(gateway):
    """The same flow one round at a time, with the SDK's low-level session API."""

    async def unused(context, params):  # declares the elicitation capability; never called here
        raise AssertionError("the raw round must not go through the callback")

    async with sdk_client(gateway, elicitation_callback=unused) as (client, _):
        first = await client.session.call_tool(
            "book_room", BOOKING, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult), f"expected input_required, got {first!r}"
        assert first.result_type == "input_required"
        assert isinstance(first.request_state, str) and first.request_state, "requestState must be present"
        assert first.input_requests is not None and set(first.input_requests) == {"room"}
        request = first.input_requests["room"]
        assert isinstance(request, types.ElicitRequest)
        assert offered_room_ids(request.params) == ROOM_IDS

        final = await client.session.call_tool(
            "book_room",
            BOOKING,
            input_responses={"room": types.ElicitResult(action="accept", content={"room_id": "atrium"})},
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert isinstance(final, types.CallToolResult), f"expected the final result, got {final!r}"
    assert not final.is_error, text_of(final)
    assert "Booked atrium" in text_of(final)


# 3 ---------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_mrtr_book_room_declined(gateway, action):
    asked = []

    async def on_elicit(context, params):
        asked.append(params)
        return types.ElicitResult(action=action)

    async with sdk_client(gateway, elicitation_callback=on_elicit) as (client, wire):
        result = await client.call_tool("book_room", BOOKING)

    assert len(asked) == 1
    assert not result.is_error, text_of(result)
    assert "Booking cancelled" in text_of(result)
    assert "Booked" not in text_of(result)
    assert result.structured_content == {"booked": False}
    (_, retry) = wire.calls("book_room")[-1]
    assert retry["params"]["inputResponses"]["room"]["action"] == action
    assert "content" not in retry["params"]["inputResponses"]["room"]


async def test_book_room_without_elicitation_capability_is_refused(gateway):
    """No elicitation callback → the SDK declares no elicitation capability → -32021."""
    async with sdk_client(gateway) as (client, wire):
        with pytest.raises(MCPError) as raised:
            await client.call_tool("book_room", BOOKING)
    assert raised.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021
    (_, sent) = wire.calls("book_room")[0]
    assert "elicitation" not in sent["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]


# 4 ---------------------------------------------------------------------------


async def test_room_report_progress_reaches_the_sdk_before_the_result(gateway):
    steps, delay_ms = 3, 200
    progress: list[tuple[float, float | None, str | None, float]] = []

    async def on_progress(value, total, message):
        progress.append((value, total, message, time.monotonic()))

    async with sdk_client(gateway) as (client, wire):
        started = time.monotonic()
        result = await client.call_tool(
            "room_report", {"steps": steps, "delay_ms": delay_ms}, progress_callback=on_progress
        )
        returned = time.monotonic()

    # All three notifications were delivered by the time call_tool returned.
    assert [(p[0], p[1]) for p in progress] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    assert all(p[2] for p in progress), "each progress event carries a message"
    assert not result.is_error, text_of(result)
    assert "checked 3 rooms" in text_of(result)
    # Streamed, not buffered: the events arrived spread out over the report's run,
    # the first one well before the result.
    assert progress[-1][3] - progress[0][3] >= (steps - 1) * delay_ms / 1000 * 0.5
    assert returned - progress[0][3] >= (steps - 1) * delay_ms / 1000 * 0.5
    assert returned - started >= steps * delay_ms / 1000 * 0.9
    (_, sent) = wire.calls("room_report")[0]
    assert "progressToken" in sent["params"]["_meta"]


def _mcp_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def _meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        **extra,
    }


async def test_room_report_event_stream_order_on_the_wire(gateway):
    """Raw httpx2: the gateway streams each progress event before the final response."""
    body = {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "tools/call",
        "params": {
            "_meta": _meta(progressToken="p-41"),
            "name": "room_report",
            "arguments": {"steps": 3, "delay_ms": 150},
        },
    }
    events: list[tuple[float, dict[str, Any]]] = []
    async with httpx2.AsyncClient(timeout=20) as http:
        async with http.stream(
            "POST", gateway.url, json=body, headers=_mcp_headers("tools/call", "room_report")
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for sse in httpx2.EventSource(response):
                if sse.data:
                    events.append((time.monotonic(), json.loads(sse.data)))
    messages = [e[1] for e in events]
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 3 + [None]
    assert [m["params"]["progress"] for m in messages[:3]] == [1, 2, 3]
    assert all(m["params"]["progressToken"] == "p-41" for m in messages[:3])
    final = messages[3]
    assert final["id"] == 41
    assert final["result"]["resultType"] == "complete"
    # Not buffered until the end: the first event came out well before the last.
    assert events[-1][0] - events[0][0] >= 0.15


@pytest.mark.parametrize("method", ["server/discover", "tools/list"])
async def test_cacheable_results_carry_ttl_and_scope(gateway, method):
    """Raw httpx2: 2026-07-28 makes `ttlMs` and `cacheScope` required on these results.

    The SDK validates them (a tools/list without them raises, and so does every
    call_tool, which re-lists to check output schemas), so this pinpoints the cause
    when the SDK tests above fail with "validation errors for ListToolsResult".
    """
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"_meta": _meta()}}
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(gateway.url, json=body, headers=_mcp_headers(method))
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert isinstance(result.get("ttlMs"), int) and result["ttlMs"] >= 0, f"{method}: ttlMs missing: {result}"
    assert result.get("cacheScope") in ("public", "private"), f"{method}: cacheScope missing: {result}"


# 5 ---------------------------------------------------------------------------


async def test_mcp_name_header_mismatch_is_refused(gateway):
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {
            "_meta": _meta({"elicitation": {"form": {}}}),
            "name": "book_room",
            "arguments": {**BOOKING, "room_hint": "nook"},
        },
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(gateway.url, json=body, headers=_mcp_headers("tools/call", name="get_room"))
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    reply = response.json()
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == 5
    assert "result" not in reply
    assert reply["error"]["code"] == -32020
    assert reply["error"]["data"]["reason"] == "header_mismatch"
    assert reply["error"]["data"]["upstream"] == "Room booking (demo)"


async def test_matching_headers_pass_through(gateway):
    """Control for the mismatch test: the same request with a matching Mcp-Name is booked."""
    body = {
        "jsonrpc": "2.0",
        "id": 6,
        "method": "tools/call",
        "params": {
            "_meta": _meta({"elicitation": {"form": {}}}),
            "name": "book_room",
            "arguments": {**BOOKING, "room_hint": "nook"},
        },
    }
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(gateway.url, json=body, headers=_mcp_headers("tools/call", name="book_room"))
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["id"] == 6
    assert "Booked nook" in reply["result"]["content"][0]["text"]
