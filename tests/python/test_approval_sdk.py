"""The gateway asks the person itself (`[[approval]]`, issue 38), driven by the
official MCP Python SDK (mcp 2.3.0) as a 2026-07-28 client: a call to the demo
server's `cancel_booking` (listed as destructive) is answered by the gateway with
its own `input_required`, which the SDK hands to the client's elicitation callback
like any question; the SDK's retry carries the person's answer. Approved: the call
reaches the server; declined or cancelled: the gateway refuses it with
`approval_declined`, and the server never sees it. A read-only tool is not asked
about.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from interop_peers import demo_server, gateway

pytestmark = pytest.mark.anyio

KEY = "dev.portcullis/approval"
CANCEL = {"room_id": "nook", "day": "2026-09-17", "hour": 9}
RULE = """
[[route.approval]]
name = "destructive"
annotations = ["destructiveHint"]
reason = "Cancelling a booking cannot be undone."
"""


@pytest.fixture(scope="module")
def approving():
    with demo_server() as demo, gateway({"rooms": demo}, extra=RULE) as gw:
        yield gw


class Person:
    """The person at the client: answers every question with `action`, and
    records what they were shown."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action, self.content = action, content
        self.asked: list[tuple[Any, types.ElicitRequestParams]] = []

    async def __call__(self, context, params):
        self.asked.append((context.request_id, params))
        return types.ElicitResult(action=self.action, content=self.content)


class Wire:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def on_request(self, request: httpx2.Request) -> None:
        self.bodies.append(json.loads(request.content))

    def calls(self, tool: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b.get("method") == "tools/call" and b["params"].get("name") == tool]


@asynccontextmanager
async def client(gw, person: Person) -> AsyncIterator[tuple[Client, Wire]]:
    wire = Wire()
    http = create_mcp_http_client()
    http.event_hooks["request"].append(wire.on_request)
    async with http:
        async with Client(streamable_http_client(gw.url("rooms"), http_client=http), elicitation_callback=person) as c:
            yield c, wire


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_an_approved_cancellation_goes_through(approving):
    person = Person("accept", {"approve": True})
    async with client(approving, person) as (c, wire):
        result = await c.call_tool("cancel_booking", CANCEL)
    assert not result.is_error, text_of(result)
    assert "Cancelled the booking of nook" in text_of(result)
    [(key, params)] = person.asked
    assert key == KEY
    assert isinstance(params, types.ElicitRequestFormParams), params
    assert '"cancel_booking" of Interop rooms' in params.message
    assert "cannot be undone" in params.message
    assert "delete or overwrite" in params.message, "the listed hint, in the gateway's words"
    assert params.requested_schema["required"] == ["approve"]
    # The SDK asked once and retried once, with the gateway's state and the answer.
    first, retry = wire.calls("cancel_booking")
    assert retry["params"]["requestState"].startswith("pcs1.")
    assert retry["params"]["inputResponses"][KEY]["action"] == "accept"
    assert retry["params"]["arguments"] == first["params"]["arguments"] == CANCEL


@pytest.mark.parametrize("action, content", [("decline", None), ("cancel", None), ("accept", {"approve": False})])
async def test_a_cancellation_not_approved_is_refused(approving, action, content):
    person = Person(action, content)
    async with client(approving, person) as (c, wire):
        with pytest.raises(MCPError) as refused:
            await c.call_tool("cancel_booking", CANCEL)
    assert len(person.asked) == 1
    # Asked once, answered once, and nothing more was tried.
    assert len(wire.calls("cancel_booking")) == 2
    data = refused.value.error.data
    assert data["reason"] == "approval_declined", refused.value.error
    assert data["rule"] == "destructive"


async def test_a_read_only_tool_is_not_asked_about(approving):
    person = Person("decline")
    async with client(approving, person) as (c, _):
        result = await c.call_tool("get_room", {"room_id": "atrium"})
    assert not result.is_error, text_of(result)
    assert person.asked == []


# === a 2025-11-25 client, carried to the 2026-07-28-only demo server by the bridge ===


async def test_a_session_client_is_asked_through_the_bridge(approving):
    from test_bridge import legacy

    def approve(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with legacy(approving.url("rooms"), approve) as s:
        result = await s.client.call_tool("cancel_booking", CANCEL)
    assert not result.is_error, text_of(result)
    assert "Cancelled the booking of nook" in text_of(result)
    [asked] = s.asked
    assert '"cancel_booking" of Interop rooms' in asked.message


async def test_a_session_client_that_declines_is_refused_through_the_bridge(approving):
    from test_bridge import legacy

    def decline(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with legacy(approving.url("rooms"), decline) as s:
        with pytest.raises(MCPError) as refused:
            await s.client.call_tool("cancel_booking", CANCEL)
    assert len(s.asked) == 1
    assert refused.value.error.data["reason"] == "approval_declined", refused.value.error


# === a 2025-11-25 session of the Python SDK server, served natively (no bridge) ========

SESSION_RULE = """
[[route.approval]]
name = "ask-first"
tools = ["echo", "book"]
"""


@pytest.fixture(scope="module")
def sessions():
    from interop_peers import mcp_server

    with mcp_server("py_server.py") as py, gateway({"py": py}, extra=SESSION_RULE) as gw:
        yield gw


async def test_a_session_call_is_asked_on_its_stream_then_goes_through(sessions):
    from test_bridge import legacy

    def approve(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    async with legacy(sessions.url("py"), approve) as s:
        result = await s.client.call_tool("echo", {"text": "hello"})
        [sid] = s.session_ids
    assert not result.is_error, text_of(result)
    assert text_of(result) == "hello"
    [asked] = s.asked
    assert '"echo" of Interop py' in asked.message
    assert sid.startswith("pss1."), "a session of the gateway's own, in front of the server's"


async def test_the_servers_own_pushed_question_follows_an_approval(sessions):
    from test_bridge import legacy

    def person(params: types.ElicitRequestParams) -> types.ElicitResult:
        if "approve" in params.requested_schema["properties"]:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept", content={"room_id": "nook"})

    async with legacy(sessions.url("py"), person) as s:
        result = await s.client.call_tool("book", {"hint": "the quiet one"})
    assert not result.is_error, text_of(result)
    assert "nook" in text_of(result)
    assert [("approve" in p.requested_schema["properties"]) for p in s.asked] == [True, False]


async def test_a_declined_session_call_is_refused(sessions):
    from test_bridge import legacy

    def decline(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with legacy(sessions.url("py"), decline) as s:
        with pytest.raises(MCPError) as refused:
            await s.client.call_tool("echo", {"text": "hello"})
    assert len(s.asked) == 1
    assert refused.value.error.data["reason"] == "approval_declined", refused.value.error
