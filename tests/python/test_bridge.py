"""The bridge, direction A (issue 22): the Python SDK client (mcp 2.3.0) in legacy mode
(2025-11-25: initialize, Mcp-Session-Id, questions pushed as `elicitation/create` and
answered with a POST) in front of servers that speak ONLY 2026-07-28:

- the gateway's demo server (`portcullis demo-upstream`, rmcp): `book_room` asks one
  question when the hint names more than one room;
- tests/interop/servers/py_mrtr_only.py (the Python SDK server with its 2025-11-25 side
  shut): the flows of flows.json through `input_required`, plus `linger`; it says what
  it received (method, version, the actions of the answers; never a typed value).

Directly, the legacy client cannot use either server at all ("Unsupported protocol
version"). Through the gateway it gets a session the gateway answers itself, each request
goes upstream as a 2026-07-28 request, and each MRTR question reaches the client as a
pushed request on the call's stream, round after round, under the gateway's policy.
"""

from __future__ import annotations

import inspect
import json
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from conftest import _binary, bound_addresses
from interop_peers import Gateway, _ready, _spawn, _wait, demo_server, gateway, keygen, mcp_server

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
STRICT_MAX_ROUNDS = 2  # `[state] max_rounds` of the strict gateway
STRICT_PUSH_TIMEOUT_S = 2  # `[state] push_timeout` of the strict gateway
LINGER_S = 6.0  # how long `linger` works before it answers, in the cancellation tests
PROMPTLY_S = 3.0  # how soon a cancellation must reach the upstream / end the stream
DAY = "2026-09-17"
ACCEPT = "application/json, text/event-stream"

Answer = Callable[[types.ElicitRequestParams], Any]


# --- the servers -----------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    url: str  # its MCP endpoint

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.removesuffix("/mcp") + path, timeout=5) as resp:
            return json.loads(resp.read())

    def received(self) -> list[dict[str, Any]]:
        """Every request it received: {method, name, version, caps, answers, state}."""
        return self._get("/received")

    def linger(self) -> dict[str, int]:
        return self._get("/stats")["linger"]

    @contextmanager
    def watch(self) -> Iterator[list[dict[str, Any]]]:
        """The requests it receives inside the block (filled in on exit)."""
        mark = len(self.received())
        seen: list[dict[str, Any]] = []
        try:
            yield seen
        finally:
            seen.extend(self.received()[mark:])


@pytest.fixture(scope="module")
def demo() -> str:
    with demo_server() as url:
        yield url


@pytest.fixture(scope="module")
def py() -> Upstream:
    with mcp_server("py_mrtr_only.py") as url:
        yield Upstream(url)


@pytest.fixture(scope="module")
def bridges(demo: str, py: Upstream) -> tuple[Gateway, Gateway]:
    """Two gateway instances sharing [state] keys, each routing /mcp/rooms (the demo)
    and /mcp/py (py_mrtr_only); neither is told which generation its upstreams speak."""
    keys = keygen()
    upstreams = {"rooms": demo, "py": py.url}
    with gateway(upstreams, keys) as a, gateway(upstreams, keys) as b:
        yield a, b


@pytest.fixture(scope="module")
def bridge(bridges) -> Gateway:
    return bridges[0]


@pytest.fixture(scope="module")
def strict(py: Upstream) -> Gateway:
    """A gateway with a small round limit and push timeout; its upstream is configured
    as speaking only 2026-07-28."""
    config = f"""\
[[listener]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[state]
max_rounds = {STRICT_MAX_ROUNDS}
push_timeout = "{STRICT_PUSH_TIMEOUT_S}s"
[[upstream]]
id = "py"
name = "{Gateway.upstream_name("py")}"
url = "{py.url}"
generations = ["{MODERN}"]
[[route]]
path = "/mcp/py"
upstream = "py"
"""
    files = {"gateway.toml": config}
    with _spawn([str(_binary()), "run", "--config", "gateway.toml"], files=files) as process:
        bound = bound_addresses(process.log_path, process.proc, ("listener", "admin"))
        _wait(process, lambda: _ready(f"http://{bound['admin']}/readyz"), "200 from /readyz")
        yield Gateway(f"http://{bound['listener']}", f"http://{bound['admin']}", process.log_path)


# --- the legacy SDK client ------------------------------------------------------------


def filled(params: types.ElicitRequestParams, **values: Any) -> dict[str, Any]:
    """A form's content: `values[field]`, or a value made from the field's schema."""
    content: dict[str, Any] = {}
    for name, schema in params.requested_schema["properties"].items():
        if name in values:
            content[name] = values[name]
        elif "enum" in schema:
            content[name] = schema["enum"][0]
        elif schema.get("type") == "boolean":
            content[name] = True
        elif schema.get("type") in ("integer", "number"):
            content[name] = schema.get("minimum", 2)
        elif schema.get("format") == "email":
            content[name] = "guest@example.org"
        else:
            content[name] = "Team offsite"
    return content


def accept_all(**values: Any) -> Answer:
    def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=filled(params, **values))

    return answer


@dataclass
class Legacy:
    client: Client
    asked: list[types.ElicitRequestParams] = field(default_factory=list)
    pushed_ids: list[Any] = field(default_factory=list)  # the JSON-RPC ids of the pushed requests
    sent: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)  # (HTTP method, body)
    answered: list[tuple[str, str]] = field(default_factory=list)  # (request's JSON-RPC method, content type)
    session_ids: set[str] = field(default_factory=set)

    def answers_sent(self) -> list[dict[str, Any]]:
        """The client's JSON-RPC responses to the pushed requests."""
        return [body for _, body in self.sent if body and "method" not in body and "id" in body]

    def content_type_of(self, method: str) -> list[str]:
        return [ct for m, ct in self.answered if m == method]


@asynccontextmanager
async def legacy(url: str, answer: Answer | None = None) -> AsyncIterator[Legacy]:
    """A 2025-11-25 session of the SDK client at `url`; `answer` is the person (None: the
    client declares no elicitation capability)."""
    holder: list[Legacy] = []

    async def on_elicit(context, params):
        holder[0].asked.append(params)
        holder[0].pushed_ids.append(context.request_id)
        out = answer(params)
        return await out if inspect.isawaitable(out) else out

    async def on_request(request: httpx2.Request) -> None:
        body = json.loads(request.content) if request.content else None
        holder[0].sent.append((request.method, body))

    async def on_response(response: httpx2.Response) -> None:
        s = holder[0]
        if sid := response.headers.get("mcp-session-id"):
            s.session_ids.add(sid)
        content = response.request.content
        method = json.loads(content).get("method", "(response)") if content else response.request.method
        s.answered.append((method, response.headers.get("content-type", "").split(";")[0]))

    http = create_mcp_http_client()
    http.event_hooks["request"].append(on_request)
    http.event_hooks["response"].append(on_response)
    async with http:
        kwargs = {"elicitation_callback": on_elicit} if answer else {}
        client = Client(streamable_http_client(url, http_client=http), mode="legacy", **kwargs)
        holder.append(Legacy(client))
        async with client:
            assert client.protocol_version == LEGACY
            yield holder[0]


def text_of(result: types.CallToolResult) -> str:
    return next(c.text for c in result.content if isinstance(c, types.TextContent))


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    return json.loads(text_of(result))


def calls_of(seen: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [r for r in seen if r["method"] == "tools/call" and r["name"] == tool]


async def eventually(check: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await anyio.to_thread.run_sync(check):
            return True
        await anyio.sleep(0.05)
    return await anyio.to_thread.run_sync(check)


# --- raw HTTP, where the test needs the wire itself ----------------------------------


async def raw_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """initialize + initialized by hand; the headers of the session's later requests."""
    init = await http.post(
        url,
        headers={"accept": ACCEPT},
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "bridge-test", "version": "1"},
            },
        },
    )
    assert init.status_code == 200, init.text
    headers = {"accept": ACCEPT, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
    done = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    return headers


def call(rid: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def reply(push: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": push["id"], "result": result}


def cancelled(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "user"}}


async def messages(resp: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of a response: its JSON body, or each SSE event's data."""
    if resp.headers.get("content-type", "").startswith("application/json"):
        yield json.loads(await resp.aread())
        return
    data: list[str] = []
    async for line in resp.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


# === directly: the legacy client cannot use a 2026-07-28-only server ===================


@pytest.mark.parametrize("server", ["demo", "py"])
async def test_directly_the_legacy_client_is_refused(server, request):
    target = request.getfixturevalue(server)
    url = target if server == "demo" else target.url
    with pytest.raises(BaseException) as failed:
        async with legacy(url, accept_all()):
            pass
    errors = failed.value.exceptions if isinstance(failed.value, BaseExceptionGroup) else (failed.value,)
    while errors and isinstance(errors[0], BaseExceptionGroup):
        errors = errors[0].exceptions
    [error] = errors
    assert isinstance(error, MCPError), repr(error)
    assert error.error.code == -32022 and error.error.message == "Unsupported protocol version", error.error
    assert error.error.data["supported"] == [MODERN]


# === through the gateway: the session ===================================================


@pytest.mark.parametrize(
    "upstream, tools", [("rooms", {"book_room", "get_room", "room_report"}), ("py", {"book", "wizard", "linger"})]
)
async def test_initialize_is_answered_by_the_gateway(bridge, py, upstream, tools):
    with py.watch() as seen:
        async with legacy(bridge.url(upstream), accept_all()) as s:
            listing = await s.client.list_tools()
            info, caps = s.client.server_info, s.client.server_capabilities
    assert tools <= {t.name for t in listing.tools}
    # The route's configured name, not the server's own.
    assert info.name == Gateway.upstream_name(upstream)
    assert caps.tools is not None and not caps.tools.list_changed
    [sid] = s.session_ids
    assert sid.startswith("pss1."), "the session id is not the gateway's sealed one"
    if upstream == "py":
        methods = [r["method"] for r in seen]
        # The first session of a gateway tries the server's own initialize (it
        # refuses it: 2026-07-28 only); the gateway remembers that for the next.
        tried = 1 if methods[:1] == ["initialize"] else 0
        assert "initialize" not in methods[tried:], seen
        assert methods[tried : tried + 2] == ["server/discover", "tools/list"], seen
        listed = seen[tried + 1]
        assert listed["version"] == MODERN
        # The session's capabilities travel in every request's _meta.
        assert listed["caps"] == {"elicitation": {"form": {}, "url": {}}}, listed


@pytest.mark.parametrize("upstream", ["rooms", "py"])
async def test_a_plain_call(bridge, py, upstream):
    tool, args, expected = {
        "rooms": ("get_room", {"room_id": "nook"}, "The Nook (nook) has 4 seats."),
        "py": ("echo", {"text": "hello through the bridge"}, "hello through the bridge"),
    }[upstream]
    with py.watch() as seen:
        async with legacy(bridge.url(upstream), accept_all()) as s:
            result = await s.client.call_tool(tool, args)
    assert text_of(result) == expected and not result.is_error
    assert s.asked == []
    # No question: one JSON body, no stream.
    assert s.content_type_of("tools/call") == ["application/json"]
    if upstream == "py":
        [sent] = calls_of(seen, "echo")
        assert sent["version"] == MODERN and sent["answers"] is None


async def test_the_session_on_the_wire(py):
    # A gateway of its own, which has never seen the upstream (the module's gateways
    # learn what it speaks from whichever test reaches it first).
    with gateway({"py": py.url}) as fresh, py.watch() as seen:
        url = fresh.url("py")
        async with httpx2.AsyncClient(timeout=10) as http:
            s = await raw_session(http, url)
            listed = await http.post(url, headers=s, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            ping = await http.post(url, headers=s, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
            listen = await http.get(url, headers={k: v for k, v in s.items() if k != "accept"} | {"accept": "text/event-stream"})
            end = await http.delete(url, headers=s)
            after = await http.post(url, headers=s, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
            again = await raw_session(http, url)
            relisted = await http.post(url, headers=again, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
    assert listed.status_code == 200, listed.text
    result = listed.json()["result"]
    assert not {"resultType", "ttlMs", "cacheScope"} & result.keys(), result.keys()
    assert "echo" in {t["name"] for t in result["tools"]}
    assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert listen.status_code == 405 and listen.json()["error"]["data"]["reason"] == "method_not_allowed", listen.text
    assert end.status_code == 200
    assert after.status_code == 404 and after.json()["error"]["data"]["reason"] == "session_expired", after.text
    assert relisted.status_code == 200, relisted.text
    methods = [r["method"] for r in seen]
    # ping and DELETE are the gateway's own. The first session of a never-seen upstream
    # tries the server's own initialize (refused: 2026-07-28 only), then asks its
    # server/discover, and the list goes up as a 2026-07-28 request; the gateway
    # remembers what the upstream speaks, so the next session costs one discover.
    assert methods == ["initialize", "server/discover", "tools/list", "server/discover", "tools/list"], seen
    assert all(r["version"] == MODERN for r in seen if r["method"] == "tools/list"), seen


# === through the gateway: questions, round after round =================================


async def test_one_round_book_room(bridge):
    async with legacy(bridge.url("rooms"), accept_all(room_id="studio-b")) as s:
        result = await s.client.call_tool("book_room", {"day": DAY, "hour": 9, "room_hint": "the big room"})
    assert text_of(result) == f"Booked studio-b (Studio B) on {DAY} at 09:00."
    assert result.structured_content == {"booked": True, "room_id": "studio-b", "day": DAY, "hour": 9}
    [asked] = s.asked
    assert asked.message == "'the big room' matches more than one room. Which did you mean?"
    assert asked.requested_schema["properties"]["room_id"]["enum"] == ["atrium", "studio-b", "nook"]
    [sent] = s.answers_sent()
    assert sent["id"].startswith("psr1."), "the pushed request's id is not the gateway's sealed one"
    assert sent["result"] == {"action": "accept", "content": {"room_id": "studio-b"}}
    assert s.content_type_of("tools/call") == ["text/event-stream"]


@pytest.mark.parametrize(
    "action, text",
    [("decline", "Booking cancelled: you declined to pick a room."), ("cancel", "Booking cancelled.")],
)
async def test_book_room_declined_or_cancelled(bridge, action, text):
    async with legacy(bridge.url("rooms"), lambda p: types.ElicitResult(action=action)) as s:
        result = await s.client.call_tool("book_room", {"day": DAY, "hour": 10, "room_hint": "the big room"})
    # The demo's own words for each action: the upstream got the action as given.
    assert text_of(result) == text
    assert result.structured_content == {"booked": False}
    assert len(s.asked) == 1


async def test_three_rounds(bridge, py):
    with py.watch() as seen:
        async with legacy(bridge.url("py"), accept_all(title="Quarterly review", people=12)) as s:
            result = await s.client.call_tool("wizard", {})
    assert outcome(result) == {
        "tool": "wizard",
        "answers": {"name": {"title": "Quarterly review"}, "size": {"people": 12}, "confirm": {"go": True}},
    }
    assert [p.message for p in s.asked] == ["What is the event called?", "How many people come?", "Book it?"]
    sent = calls_of(seen, "wizard")
    assert [r["answers"] for r in sent] == [None, {"name": "accept"}, {"size": "accept"}, {"confirm": "accept"}]
    assert [r["state"] for r in sent] == [False, True, True, True]
    assert all(r["version"] == MODERN for r in sent)
    assert len({a["id"] for a in s.answers_sent()}) == 3


async def test_two_questions_in_one_round(bridge, py):
    with py.watch() as seen:
        async with legacy(bridge.url("py"), accept_all(side="aisle")) as s:
            result = await s.client.call_tool("profile", {})
    assert outcome(result) == {
        "tool": "profile",
        "answers": {"contact": {"email": "guest@example.org"}, "seat": {"side": "aisle"}},
    }
    assert sorted(p.message for p in s.asked) == ["Where do we send the confirmation?", "Window or aisle?"]
    # One retry carries both answers.
    assert [r["answers"] for r in calls_of(seen, "profile")] == [None, {"contact": "accept", "seat": "accept"}]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_upstream(bridge, py, action):
    with py.watch() as seen:
        async with legacy(bridge.url("py"), lambda p: types.ElicitResult(action=action)) as s:
            result = await s.client.call_tool("wizard", {})
    assert outcome(result) == {"tool": "wizard", "stopped": {"key": "name", "action": action}}
    assert len(s.asked) == 1
    assert [r["answers"] for r in calls_of(seen, "wizard")] == [None, {"name": action}]


async def test_a_client_error_answer_is_a_cancel(bridge, py):
    def broken(params):
        raise RuntimeError("this host cannot show forms right now")

    with py.watch() as seen:
        async with legacy(bridge.url("py"), broken) as s:
            result = await s.client.call_tool("book", {"hint": "the loud room"})
    [sent] = s.answers_sent()
    assert "error" in sent and "result" not in sent, sent
    assert outcome(result) == {"tool": "book", "stopped": {"key": "room", "action": "cancel"}}
    assert [r["answers"] for r in calls_of(seen, "book")] == [None, {"room": "cancel"}]


async def test_url_mode_question(bridge, py):
    async with legacy(bridge.url("py"), accept_all()) as s:
        result = await s.client.call_tool("signin", {})
    [asked] = s.asked
    assert isinstance(asked, types.ElicitRequestURLParams), asked
    assert asked.url == "https://auth.example.com/authorize?client=rooms"
    assert asked.elicitation_id, "a 2025-11-25 URL-mode request needs an elicitationId"
    assert outcome(result) == {"tool": "signin", "answers": {"login": None}}


async def test_progress_reaches_the_client_on_every_round(bridge):
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    async with legacy(bridge.url("py"), accept_all()) as s:
        result = await s.client.call_tool("wizard", {}, progress_callback=on_progress)
    assert set(outcome(result)["answers"]) == {"name", "size", "confirm"}
    # py_mrtr_only reports progress once per request: the first and three retries.
    assert progress == [(1.0, "thinking"), (2.0, "thinking"), (3.0, "thinking"), (4.0, "thinking")]


async def test_progress_without_a_question(bridge):
    progress: list[float] = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with legacy(bridge.url("rooms"), accept_all()) as s:
        result = await s.client.call_tool("room_report", {"steps": 2, "delay_ms": 50}, progress_callback=on_progress)
    assert text_of(result) == "Room report: checked 2 rooms, all available."
    assert progress == [1.0, 2.0]
    assert s.asked == []


async def test_concurrent_calls_in_one_session(bridge):
    results: dict[str, dict[str, Any]] = {}
    async with legacy(bridge.url("py"), accept_all()) as s:

        async def run(tool: str, args: dict[str, Any]) -> None:
            results[tool] = outcome(await s.client.call_tool(tool, args))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "wizard", {})
            tg.start_soon(run, "profile", {})
            tg.start_soon(run, "endless", {"rounds": 2})
    assert results == {
        "wizard": {"tool": "wizard", "answers": {"name": {"title": "Team offsite"}, "size": {"people": 1}, "confirm": {"go": True}}},
        "profile": {"tool": "profile", "answers": {"contact": {"email": "guest@example.org"}, "seat": {"side": "window"}}},
        "endless": {"tool": "endless", "answers": {"again-1": {"more": True}, "again-2": {"more": True}}},
    }
    assert len(s.asked) == 3 + 2 + 2


# === through the gateway: what the policy refuses ======================================


async def test_a_secret_form_is_refused(bridge, py):
    with py.watch() as seen:
        async with legacy(bridge.url("py"), accept_all(password="not-a-real-one")) as s:
            with pytest.raises(MCPError) as refused:
                await s.client.call_tool("vault", {})
    assert s.asked == [], "the person was shown a form asking for a password"
    data = refused.value.error.data
    assert data["reason"] == "secret_field_requested", refused.value.error
    assert data["field"] == "password" and data["key"] == "unlock"
    assert data["upstream"] == Gateway.upstream_name("py")
    assert "URL mode" in refused.value.error.message
    assert s.answers_sent() == []
    # The upstream asked once and was never retried.
    assert [r["answers"] for r in calls_of(seen, "vault")] == [None]


async def test_an_answer_outside_the_schema_is_refused(bridge, py):
    with py.watch() as seen:
        async with legacy(bridge.url("py"), accept_all(room_id="penthouse")) as s:
            with pytest.raises(MCPError) as refused:
                await s.client.call_tool("book", {"hint": "the top floor"})
    assert refused.value.error.data["reason"] == "invalid_answer", refused.value.error
    assert refused.value.error.data["field"] == "room_id"
    assert [r["answers"] for r in calls_of(seen, "book")] == [None]


async def test_a_client_without_elicitation_is_not_asked(bridge, py):
    async with legacy(bridge.url("py"), None) as s:
        with pytest.raises(MCPError) as refused:
            await s.client.call_tool("book", {"hint": "somewhere"})
    assert refused.value.error.code == -32021
    assert refused.value.error.data["reason"] == "missing_client_capability", refused.value.error
    assert refused.value.error.data["requiredCapabilities"] == {"elicitation": {"form": {}}}


async def test_the_round_limit(strict, py):
    url = strict.url("py")
    async with legacy(url, accept_all()) as s:
        result = await s.client.call_tool("endless", {"rounds": STRICT_MAX_ROUNDS})
    assert len(outcome(result)["answers"]) == STRICT_MAX_ROUNDS
    with py.watch() as seen:
        async with legacy(url, accept_all()) as s:
            with pytest.raises(MCPError) as refused:
                await s.client.call_tool("endless", {"rounds": STRICT_MAX_ROUNDS + 1})
    assert refused.value.error.data["reason"] == "round_limit_exceeded", refused.value.error
    assert refused.value.error.data["limit"] == STRICT_MAX_ROUNDS
    assert len(s.asked) == STRICT_MAX_ROUNDS
    # The upstream's question of the round past the limit never reached the client.
    assert len(calls_of(seen, "endless")) == STRICT_MAX_ROUNDS + 1


async def test_the_push_timeout(strict, py):
    withdrawn = anyio.Event()

    async def never(params):
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            withdrawn.set()  # the gateway's notifications/cancelled for the push
            raise

    with py.watch() as seen:
        async with legacy(strict.url("py"), never) as s:
            started = time.monotonic()
            with pytest.raises(MCPError) as expired:
                await s.client.call_tool("book", {"hint": "later"})
            took = time.monotonic() - started
            with anyio.fail_after(5):
                await withdrawn.wait()
            after = await s.client.call_tool("echo", {"text": "still serving"})
    assert expired.value.error.data["reason"] == "operation_expired", expired.value.error
    assert expired.value.error.code == -32011
    assert STRICT_PUSH_TIMEOUT_S - 0.2 <= took < STRICT_PUSH_TIMEOUT_S + 8, took
    assert text_of(after) == "still serving"
    assert [r["answers"] for r in calls_of(seen, "book")] == [None]


# === through the gateway: the client gives up ==========================================


async def test_sdk_cancels_while_the_question_is_open(bridge, py):
    open_question = anyio.Event()

    async def wait(params):
        open_question.set()
        await anyio.sleep(60)

    with py.watch() as seen:
        async with legacy(bridge.url("py"), wait) as s:
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.client.call_tool, "book", {"hint": "anywhere"})
                with anyio.fail_after(10):
                    await open_question.wait()
                tg.cancel_scope.cancel()
            await anyio.sleep(0.5)
            after = await s.client.call_tool("echo", {"text": "next"})
            [push_id] = s.pushed_ids
            [sid] = s.session_ids
            headers = {"accept": ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": LEGACY}
            async with httpx2.AsyncClient(timeout=10) as http:
                late = await http.post(
                    bridge.url("py"), headers=headers, json=reply({"id": push_id}, {"action": "accept", "content": {"room_id": "nook"}})
                )
    # The gateway ended the call on the client's notifications/cancelled.
    assert late.status_code == 409 and late.json()["error"]["data"]["reason"] == "call_not_waiting", late.text
    [book] = [b for _, b in s.sent if b and b.get("method") == "tools/call" and b["params"]["name"] == "book"]
    notes = [b for _, b in s.sent if b and b.get("method") == "notifications/cancelled"]
    assert [n["params"]["requestId"] for n in notes] == [book["id"]], s.sent
    assert text_of(after) == "next"
    assert [r["answers"] for r in calls_of(seen, "book")] == [None], "the cancelled call was retried upstream"


@pytest.mark.parametrize("how", ["closed stream", "notifications/cancelled"])
async def test_the_client_gives_up_while_the_question_is_open(bridge, py, how):
    url = bridge.url("py")
    with py.watch() as seen:
        async with httpx2.AsyncClient(timeout=10) as http:
            s = await raw_session(http, url)
            after_push: list[dict[str, Any]] = []
            async with http.stream("POST", url, headers=s, json=call("c-1", "book", {"hint": "h"})) as resp:
                assert resp.headers["content-type"].startswith("text/event-stream")
                stream = messages(resp)
                push = await anext(stream)
                assert push["method"] == "elicitation/create" and push["id"].startswith("psr1.")
                if how == "notifications/cancelled":
                    note = await http.post(url, headers=s, json=cancelled("c-1"))
                    assert note.status_code == 202
                    with anyio.fail_after(PROMPTLY_S):
                        after_push = [m async for m in stream]
            await anyio.sleep(0.3)
            late = await http.post(url, headers=s, json=reply(push, {"action": "accept", "content": {"room_id": "nook"}}))
            follow = await http.post(url, headers=s, json=call(5, "echo", {"text": "next"}))
    if how == "notifications/cancelled":
        # Nothing for the call itself; the open question is withdrawn.
        assert not any(m.get("id") == "c-1" for m in after_push), after_push
        assert [m["method"] for m in after_push] == ["notifications/cancelled"]
        assert after_push[0]["params"]["requestId"] == push["id"]
    assert late.status_code == 409 and late.json()["error"]["data"]["reason"] == "call_not_waiting", late.text
    assert follow.json()["result"]["content"][0]["text"] == "next", follow.text
    assert [r["answers"] for r in calls_of(seen, "book")] == [None]


async def test_a_closed_stream_cancels_the_upstream_work(bridge, py):
    url = bridge.url("py")
    before = py.linger()
    async with httpx2.AsyncClient(timeout=10) as http:
        s = await raw_session(http, url)
        async with http.stream("POST", url, headers=s, json=call(7, "linger", {"seconds": LINGER_S})) as resp:
            stream = messages(resp)
            push = await anext(stream)
            answered = await http.post(url, headers=s, json=reply(push, {"action": "accept", "content": {"go": True}}))
            assert answered.status_code == 202
            assert await eventually(lambda: py.linger()["started"] > before["started"], 10)
        # The stream is closed: the gateway drops the retry it has upstream.
        assert await eventually(lambda: py.linger()["cancelled"] > before["cancelled"], PROMPTLY_S), py.linger()
    assert py.linger()["finished"] == before["finished"]


@pytest.mark.parametrize("stage", ["first request", "retry"])
async def test_notifications_cancelled_cancels_the_upstream_work(bridge, py, stage):
    """The client cancels its call while the upstream works on it (no question open):
    the call ends, nothing more is sent for it, and the upstream's request is dropped."""
    url = bridge.url("py")
    before = py.linger()
    seen: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(timeout=30) as http:
        s = await raw_session(http, url)

        async def run() -> None:
            args = {"ask": stage == "retry", "seconds": LINGER_S}
            try:
                async with http.stream("POST", url, headers=s, json=call(7, "linger", args)) as resp:
                    async for m in messages(resp):
                        seen.append(m)
                        if m.get("method") == "elicitation/create":
                            await http.post(url, headers=s, json=reply(m, {"action": "accept", "content": {"go": True}}))
            except httpx2.HTTPError:
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            assert await eventually(lambda: py.linger()["started"] > before["started"], 10)
            note = await http.post(url, headers=s, json=cancelled(7))
            assert note.status_code == 202
            cancelled_upstream = await eventually(lambda: py.linger()["cancelled"] > before["cancelled"], PROMPTLY_S)
            # Let a late result arrive, if the gateway sends one.
            await anyio.sleep(1.0 if cancelled_upstream else LINGER_S + 2)
            tg.cancel_scope.cancel()
    assert not any(m.get("id") == 7 for m in seen), f"the cancelled call was answered: {seen}"
    assert cancelled_upstream, f"the upstream still worked on the cancelled call: {py.linger()} (before {before})"


async def test_sdk_cancels_while_the_upstream_works(bridge, py):
    before = py.linger()
    async with legacy(bridge.url("py"), accept_all()) as s:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.client.call_tool, "linger", {"seconds": LINGER_S})
            assert await eventually(lambda: py.linger()["started"] > before["started"], 10)
            tg.cancel_scope.cancel()
        gone = await eventually(lambda: py.linger()["cancelled"] > before["cancelled"], PROMPTLY_S)
        after = await s.client.call_tool("echo", {"text": "next"})
    assert text_of(after) == "next"
    assert any(body and body.get("method") == "notifications/cancelled" for _, body in s.sent), s.sent
    assert gone, f"the upstream still worked on the call the client cancelled: {py.linger()} (before {before})"


async def test_delete_while_the_question_is_open(bridge, py):
    """DELETE ends the session: its call waiting for an answer (which can no longer be
    given) ends with it, rather than holding the stream until push_timeout."""
    url = bridge.url("py")
    async with httpx2.AsyncClient(timeout=10) as http:
        s = await raw_session(http, url)
        async with http.stream("POST", url, headers=s, json=call("c-9", "book", {"hint": "h"})) as resp:
            stream = messages(resp)
            push = await anext(stream)
            end = await http.delete(url, headers=s)
            assert end.status_code == 200
            late = await http.post(url, headers=s, json=reply(push, {"action": "accept", "content": {"room_id": "nook"}}))
            assert late.status_code == 404 and late.json()["error"]["data"]["reason"] == "session_expired", late.text
            ended = False
            with anyio.move_on_after(PROMPTLY_S):
                rest = [m async for m in stream]
                ended = True
    assert ended, "the call of a deleted session still holds its stream open"
    assert not any("result" in m for m in rest), rest


# === the instance that holds the call ==================================================


async def test_an_answer_at_another_instance_is_409(bridges, py):
    a, b = bridges
    with py.watch() as seen:
        async with httpx2.AsyncClient(timeout=10) as http:
            s = await raw_session(http, a.url("py"))
            other = await raw_session(http, a.url("py"))
            async with http.stream("POST", a.url("py"), headers=s, json=call(1, "book", {"hint": "h"})) as resp:
                stream = messages(resp)
                push = await anext(stream)
                answer = reply(push, {"action": "accept", "content": {"room_id": "atrium"}})
                elsewhere = await http.post(b.url("py"), headers=s, json=answer)
                wrong_session = await http.post(a.url("py"), headers=other, json=answer)
                here = await http.post(a.url("py"), headers=s, json=answer)
                with anyio.fail_after(10):
                    rest = [m async for m in stream]
    assert elsewhere.status_code == 409, elsewhere.text
    assert elsewhere.json()["error"]["data"]["reason"] == "call_not_waiting"
    assert wrong_session.status_code == 400, wrong_session.text
    assert wrong_session.json()["error"]["data"]["reason"] == "answer_not_requested"
    assert here.status_code == 202, here.text
    [final] = rest
    assert final["id"] == 1
    assert json.loads(final["result"]["content"][0]["text"]) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert [r["answers"] for r in calls_of(seen, "book")] == [None, {"room": "accept"}]


async def test_an_answer_is_taken_once(bridge, py):
    url = bridge.url("py")
    with py.watch() as seen:
        async with httpx2.AsyncClient(timeout=10) as http:
            s = await raw_session(http, url)
            async with http.stream("POST", url, headers=s, json=call(1, "profile", {})) as resp:
                stream = messages(resp)
                pushes = [await anext(stream), await anext(stream)]
                by_message = {p["params"]["message"]: p for p in pushes}
                contact = by_message["Where do we send the confirmation?"]
                seat = by_message["Window or aisle?"]
                first = reply(contact, {"action": "accept", "content": {"email": "guest@example.org"}})
                once = await http.post(url, headers=s, json=first)
                again = await http.post(url, headers=s, json=first)
                last = await http.post(url, headers=s, json=reply(seat, {"action": "decline"}))
                with anyio.fail_after(10):
                    rest = [m async for m in stream]
    assert once.status_code == 202 and last.status_code == 202
    assert again.status_code == 400 and again.json()["error"]["data"]["reason"] == "state_replayed", again.text
    [final] = rest
    assert json.loads(final["result"]["content"][0]["text"]) == {"tool": "profile", "stopped": {"key": "seat", "action": "decline"}}
    assert [r["answers"] for r in calls_of(seen, "profile")] == [None, {"contact": "accept", "seat": "decline"}]

