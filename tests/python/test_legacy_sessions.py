"""2025-11-25 sessions with the Python SDK client (mcp 2.3.0, mode="legacy": initialize,
Mcp-Session-Id, elicitation pushed by the server and answered with a POST) against the
Python SDK server of tests/interop/servers/py_server.py, which serves both generations on
one URL. Directly, and through the gateway.

Through the gateway every flow is policed: a pushed form that asks for a secret never
reaches the person, its text is made safe, and the session id the client holds is the
gateway's own sealed value that a second gateway sharing the keys accepts.
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

from interop_peers import gateway, keygen, mcp_server

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
Answer = Callable[[types.ElicitRequestParams], types.ElicitResult]


@pytest.fixture(scope="module")
def py_server() -> str:
    with mcp_server("py_server.py") as url:
        yield url


@pytest.fixture(scope="module")
def gateways(py_server: str):
    """Two gateway processes sharing one set of [state] keys, in front of the Python server."""
    keys = keygen()
    with gateway({"python": py_server}, keys) as a, gateway({"python": py_server}, keys) as b:
        yield a, b


@pytest.fixture(params=["direct", "gateway"])
def urls(request, py_server: str) -> tuple[str, str]:
    """(URL the session starts at, URL it goes on at): the server twice, or two gateways."""
    if request.param == "direct":
        return py_server, py_server
    a, b = request.getfixturevalue("gateways")
    return a.url("python"), b.url("python")


@pytest.fixture
def via_gateway(urls, py_server) -> bool:
    return urls[0] != py_server


def accept_all(**values: Any) -> Answer:
    def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        content = {
            field: values.get(
                field, schema["enum"][0] if "enum" in schema else True if schema.get("type") == "boolean" else "x"
            )
            for field, schema in params.requested_schema["properties"].items()
        }
        return types.ElicitResult(action="accept", content=content)

    return answer


class Session:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.asked: list[types.ElicitRequestParams] = []
        self.sent: list[tuple[str, str, dict[str, Any] | None]] = []  # (method, url, body)
        self.session_ids: set[str] = set()

    async def flow(self, tool: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        return await self.client.call_tool(tool, arguments or {})


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    return json.loads(next(c.text for c in result.content if isinstance(c, types.TextContent)))


@asynccontextmanager
async def connect(start: str, answer: Answer, go_on_at: str | None = None):
    """A legacy session opened at `start`; every request after `initialize` goes to `go_on_at`."""
    holder: list[Session] = []

    async def on_elicit(context, params):
        holder[0].asked.append(params)
        return answer(params)

    async def route(request: httpx2.Request) -> None:
        s = holder[0]
        if go_on_at and any(body and body.get("method") == "initialize" for _, _, body in s.sent):
            request.url = httpx2.URL(go_on_at)
            request.headers["host"] = request.url.netloc.decode()
        s.sent.append((request.method, str(request.url), json.loads(request.content) if request.content else None))

    async def on_response(response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            holder[0].session_ids.add(sid)

    http = create_mcp_http_client()
    http.event_hooks["request"].append(route)
    http.event_hooks["response"].append(on_response)
    async with http:
        client = Client(streamable_http_client(start, http_client=http), mode="legacy", elicitation_callback=on_elicit)
        holder.append(Session(client))
        async with client:
            assert client.protocol_version == LEGACY
            yield holder[0]


async def test_initialize_opens_a_session(urls):
    async with connect(urls[0], accept_all()) as s:
        listing = await s.client.list_tools()
    assert "book" in {t.name for t in listing.tools}
    assert s.sent[0][2]["method"] == "initialize"
    assert len(s.session_ids) == 1


async def test_pushed_form_accepted(urls):
    async with connect(urls[0], accept_all(room_id="nook")) as s:
        result = await s.flow("book", {"hint": "the big room"})
    assert outcome(result) == {"tool": "book", "answers": {"room": {"room_id": "nook"}}}
    [params] = s.asked
    assert "the big room" in params.message
    answers = [body for _, _, body in s.sent if body and "result" in body]
    assert answers and answers[0]["result"] == {"action": "accept", "content": {"room_id": "nook"}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_pushed_form_declined_or_cancelled(urls, action):
    async with connect(urls[0], lambda params: types.ElicitResult(action=action)) as s:
        result = await s.flow("book", {"hint": "x"})
    assert outcome(result) == {"tool": "book", "stopped": {"key": "room", "action": action}}
    assert len(s.asked) == 1


async def test_pushed_password_form(urls, via_gateway):
    async with connect(urls[0], accept_all(password="hunter2")) as s:
        if not via_gateway:
            result = await s.flow("vault")
            assert list(s.asked[0].requested_schema["properties"]) == ["password"]
            assert outcome(result) == {"tool": "vault", "answers": {"unlock": {"password": "hunter2"}}}
            return
        # The gateway answered the upstream's elicitation itself with a JSON-RPC
        # error naming the reason; the upstream's tool call fails with it.
        with pytest.raises(MCPError) as failed:
            await s.flow("vault")
    assert s.asked == [], "the person was shown a form asking for a password"
    assert "password" in str(failed.value) and "URL mode" in str(failed.value), failed.value


async def test_pushed_message_markup(urls, via_gateway):
    async with connect(urls[0], accept_all()) as s:
        result = await s.flow("styled")
    assert outcome(result) == {"tool": "styled", "answers": {"ok": {"fine": True}}}
    [params] = s.asked
    if via_gateway:
        assert not any(ch in params.message for ch in "<>\x1b"), repr(params.message)
        assert "Pick one colour" in params.message
    else:
        assert "<b>one</b> \x1b[31mcolour" in params.message


async def test_delete_ends_the_session(urls, via_gateway):
    async with connect(urls[0], accept_all()) as s:
        await s.client.list_tools()
    [sid] = s.session_ids
    assert s.sent[-1][0] == "DELETE", "the SDK did not end its session with DELETE"
    async with httpx2.AsyncClient(timeout=10) as http:
        after = await http.post(
            urls[0],
            json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-session-id": sid,
                "mcp-protocol-version": LEGACY,
            },
        )
    assert after.status_code == 404, after.text
    if via_gateway:
        # The gateway's own session ended with the upstream's: it refuses the
        # id itself rather than passing the upstream's 404 on.
        assert after.json()["error"]["data"]["reason"] == "session_expired", after.text


async def test_session_goes_on_at_a_second_gateway(urls):
    start, go_on_at = urls
    async with connect(start, accept_all(room_id="atrium"), go_on_at=go_on_at) as s:
        result = await s.flow("book", {"hint": "two"})
    assert outcome(result) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert len(s.asked) == 1
    assert s.sent[0][1] == start
    assert all(url == go_on_at for method, url, body in s.sent if body and body.get("method") == "tools/call")
