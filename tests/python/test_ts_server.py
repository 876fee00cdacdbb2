"""Cross pair: the Python SDK client (mcp 2.3.0, mode="auto", so 2026-07-28 MRTR) against
the TypeScript SDK v2 server of tests/interop/servers/ts_v2_server.mjs, directly and
through the gateway: every flow of tests/interop/servers/flows.json.

The SDK drives the rounds itself: each `inputRequests` entry goes to the elicitation
callback (`context.request_id` is its key) and the call is retried with the answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from interop_peers import GATEWAY_MAX_ROUNDS, Gateway, gateway, mcp_server

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
Answer = Callable[[str, types.ElicitRequestParams], types.ElicitResult]


@pytest.fixture(scope="module")
def ts_server() -> str:
    with mcp_server("ts_v2_server.mjs") as url:
        yield url


@pytest.fixture(scope="module")
def ts_gateway(ts_server: str) -> Gateway:
    with gateway({"ts-v2": ts_server}) as gw:
        yield gw


@pytest.fixture(params=["direct", "gateway"])
def path(request) -> str:
    return request.param


@pytest.fixture
def url(path: str, ts_server: str, request) -> str:
    return ts_server if path == "direct" else request.getfixturevalue("ts_gateway").url("ts-v2")


def accept_all(**values: Any) -> Answer:
    """The person: accepts every question with `values[field]` or a value made from the schema."""

    def answer(key: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        content: dict[str, Any] = {}
        for field, schema in params.requested_schema["properties"].items():
            if field in values:
                content[field] = values[field]
            elif "enum" in schema:
                content[field] = schema["enum"][0]
            elif schema.get("type") == "boolean":
                content[field] = True
            elif schema.get("type") in ("integer", "number"):
                content[field] = 2
            else:
                content[field] = "Team offsite"
        return types.ElicitResult(action="accept", content=content)

    return answer


class Session:
    def __init__(self, client: Client, asked: list[tuple[str, types.ElicitRequestParams]], wire: list[dict[str, Any]]):
        self.client, self.asked, self.wire = client, asked, wire

    async def flow(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments or {})
        assert not result.is_error, result
        return json.loads(next(c.text for c in result.content if isinstance(c, types.TextContent)))

    def calls(self, tool: str) -> list[dict[str, Any]]:
        return [b for b in self.wire if b.get("method") == "tools/call" and b["params"]["name"] == tool]


@asynccontextmanager
async def connect(url: str, answer: Answer):
    asked: list[tuple[str, types.ElicitRequestParams]] = []
    wire: list[dict[str, Any]] = []

    async def on_elicit(context, params):
        asked.append((context.request_id, params))
        return answer(context.request_id, params)

    async def record(request: httpx2.Request) -> None:
        if request.content:
            wire.append(json.loads(request.content))

    http = create_mcp_http_client()
    http.event_hooks["request"].append(record)
    async with http:
        async with Client(streamable_http_client(url, http_client=http), elicitation_callback=on_elicit) as client:
            assert client.protocol_version == MODERN
            yield Session(client, asked, wire)


async def test_discover_then_stamped_requests(url):
    async with connect(url, accept_all()) as s:
        listing = await s.client.list_tools()
    assert {"book", "wizard", "profile", "signin", "vault", "styled", "endless"} <= {t.name for t in listing.tools}
    assert s.wire[0]["method"] == "server/discover"
    assert all(
        b["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN for b in s.wire if "method" in b
    )


async def test_form_accepted(url, path):
    async with connect(url, accept_all(room_id="studio-b")) as s:
        outcome = await s.flow("book", {"hint": "the big room"})
    assert outcome == {"tool": "book", "answers": {"room": {"room_id": "studio-b"}}}
    [(key, params)] = s.asked
    assert key == "room"
    assert "the big room" in params.message
    first, retry = s.calls("book")
    assert "inputResponses" not in first["params"]
    assert retry["params"]["inputResponses"]["room"] == {"action": "accept", "content": {"room_id": "studio-b"}}
    assert retry["params"]["requestState"].startswith("pcs1.") == (path == "gateway")


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_form_declined_or_cancelled(url, action):
    async with connect(url, lambda key, params: types.ElicitResult(action=action)) as s:
        outcome = await s.flow("book", {"hint": "x"})
    assert outcome == {"tool": "book", "stopped": {"key": "room", "action": action}}
    assert len(s.asked) == 1


async def test_several_rounds(url):
    async with connect(url, accept_all(title="Offsite")) as s:
        outcome = await s.flow("wizard")
    assert outcome == {
        "tool": "wizard",
        "answers": {"name": {"title": "Offsite"}, "size": {"people": 2}, "confirm": {"go": True}},
    }
    assert [key for key, _ in s.asked] == ["name", "size", "confirm"]
    assert len(s.calls("wizard")) == 4


async def test_several_questions_in_one_round(url):
    async with connect(url, accept_all(email="ada@example.com", side="window")) as s:
        outcome = await s.flow("profile")
    assert outcome == {
        "tool": "profile",
        "answers": {"contact": {"email": "ada@example.com"}, "seat": {"side": "window"}},
    }
    assert sorted(key for key, _ in s.asked) == ["contact", "seat"]
    assert len(s.calls("profile")) == 2


async def test_url_mode(url):
    async with connect(url, accept_all()) as s:
        outcome = await s.flow("signin")
    [(key, params)] = s.asked
    assert key == "login"
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.url == "https://auth.example.com/authorize?client=rooms"
    assert outcome["tool"] == "signin" and "login" in outcome["answers"]


async def test_markup_and_escapes(url, path):
    async with connect(url, accept_all()) as s:
        outcome = await s.flow("styled")
    assert outcome == {"tool": "styled", "answers": {"ok": {"fine": True}}}
    [(_, params)] = s.asked
    if path == "gateway":
        assert not any(ch in params.message for ch in "<>\x1b"), repr(params.message)
        assert "alert" not in params.message and "Pick one colour" in params.message
    else:
        assert "<b>one</b> \x1b[31mcolour" in params.message


async def test_password_form(url, path):
    async with connect(url, accept_all(password="hunter2")) as s:
        if path == "direct":
            outcome = await s.flow("vault")
            assert outcome == {"tool": "vault", "answers": {"unlock": {"password": "hunter2"}}}
            return
        with pytest.raises(MCPError) as raised:
            await s.client.call_tool("vault", {})
    assert s.asked == [], "the person was shown a form asking for a password"
    assert raised.value.code == -32010
    assert raised.value.data["reason"] == "secret_field_requested"
    assert (raised.value.data["key"], raised.value.data["field"]) == ("unlock", "password")
    assert raised.value.data["upstream"] == Gateway.upstream_name("ts-v2")


async def test_rounds_up_to_the_limit_complete(url):
    async with connect(url, accept_all()) as s:
        outcome = await s.flow("endless", {"rounds": GATEWAY_MAX_ROUNDS})
    assert len(outcome["answers"]) == GATEWAY_MAX_ROUNDS


async def test_one_round_past_the_limit(url, path):
    async with connect(url, accept_all()) as s:
        if path == "direct":
            outcome = await s.flow("endless", {"rounds": GATEWAY_MAX_ROUNDS + 1})
            assert len(outcome["answers"]) == GATEWAY_MAX_ROUNDS + 1
            return
        with pytest.raises(MCPError) as raised:
            await s.client.call_tool("endless", {"rounds": GATEWAY_MAX_ROUNDS + 1})
    assert len(s.asked) == GATEWAY_MAX_ROUNDS
    assert raised.value.code == -32011
    assert raised.value.data["reason"] == "round_limit_exceeded"
    assert raised.value.data["limit"] == GATEWAY_MAX_ROUNDS
