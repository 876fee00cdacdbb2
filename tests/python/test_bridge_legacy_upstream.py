"""The bridge, direction B (issue 22): the Python SDK client (mcp 2.3.0) in its default
mode, which speaks 2026-07-28 (stateless requests, questions answered through
`input_required` and a retry), in front of servers that speak ONLY 2025-11-25:

- tests/interop/servers/ts_v1_server.mjs, the TypeScript SDK 1.x server: `book` pushes
  one `elicitation/create` during the call, `echo`;
- tests/interop/servers/ts_v1_flows_server.mjs, the same SDK with every flow of
  flows.json as pushed questions (one at a time), and it says what it received
  (`/received`: each HTTP request; `/calls`: how each push was answered; never a value).

Directly, the 2026-07-28 client cannot use either server (pinned to 2026-07-28 each
request is refused, "Server not initialized"; in `auto` mode it falls back to the old
generation). Through the gateway it gets 2026-07-28 throughout: the gateway opens the
upstream session itself, sends each request in it, and turns each pushed question into
an `input_required` answer whose sealed `requestState` names the waiting push; the
client's retry delivers the answer to the upstream call the gateway held open.

Callers the gateway cannot tell apart (anonymous: no `auth` on the route) never share an
upstream session: each call gets its own (initialize, notifications/initialized, the call,
DELETE once the call ends). Identified callers (API keys, on /mcp/v1-keyed) keep one
upstream session per caller and declared capabilities, reused.
"""

from __future__ import annotations

import json
import subprocess
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
from interop_peers import GATEWAY_MAX_ROUNDS, Gateway, _ready, _spawn, _wait, gateway, keygen, mcp_server

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
STRICT_MAX_ROUNDS = 2  # `[state] max_rounds` of the strict gateway
STRICT_PUSH_TIMEOUT_S = 2  # `[state] push_timeout` of the strict gateway
ACCEPT = "application/json, text/event-stream"
ELICIT = {"elicitation": {"form": {}, "url": {}}}  # what the SDK client declares with a callback
INSTRUCTIONS = "Test server: the question flows of flows.json, asked as pushed requests."
FLOWS = {"book", "wizard", "profile", "signin", "vault", "styled", "endless", "echo"}
API_KEY = "bridge-test-key-alice"  # the identified caller's API key (made up)
BEARER = {"authorization": f"Bearer {API_KEY}"}
KEYED = "v1-keyed"  # the route to the flows server for identified callers (the bridges' gateways)

Answer = Callable[[str, types.ElicitRequestParams], Any]


# --- the servers -----------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    url: str  # its MCP endpoint

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url.removesuffix("/mcp") + path, timeout=5) as resp:
            return json.loads(resp.read())

    def received(self) -> list[dict[str, Any]]:
        """Every HTTP request at its endpoint: {http, method, session, version, name, caps, protocolVersion}."""
        return self._get("/received")

    def calls(self) -> list[dict[str, Any]]:
        """Every tools/call of a flow: {tool, session, replies: [{key, action, fields}|{key, error, reason}], end}."""
        return self._get("/calls")

    def deleted(self) -> set[str]:
        """The session ids that got a DELETE."""
        return {r["sid"] for r in self.received() if r["http"] == "DELETE"}

    @contextmanager
    def watch(self) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
        """(requests received, flow calls made) inside the block, filled in on exit."""
        marks = len(self.received()), len(self.calls())
        seen: list[dict[str, Any]] = []
        made: list[dict[str, Any]] = []
        try:
            yield seen, made
        finally:
            seen.extend(self.received()[marks[0] :])
            made.extend(self.calls()[marks[1] :])

    def call_now(self, index: int) -> dict[str, Any]:
        return self.calls()[index]

    def forget(self) -> int:
        """Ends every session at the server, as a restart would; how many there were."""
        req = urllib.request.Request(self.url.removesuffix("/mcp") + "/forget", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())["ended"]


@pytest.fixture(scope="module")
def v1() -> Upstream:
    with mcp_server("ts_v1_flows_server.mjs") as url:
        yield Upstream(url)


@pytest.fixture(scope="module")
def v1_plain() -> str:
    """The TypeScript SDK 1.x server as it is (book, echo)."""
    with mcp_server("ts_v1_server.mjs") as url:
        yield url


def api_keys() -> str:
    """An `[[auth]]` of type api_key named "keys" that knows API_KEY (hashed by the gateway
    binary itself, `portcullis hash-key`)."""
    out = subprocess.run([str(_binary()), "hash-key"], input=API_KEY, check=True, capture_output=True, text=True)
    digest = out.stdout.strip()
    return "\n".join(['[[auth]]', 'name = "keys"', 'type = "api_key"', '[[auth.key]]', 'principal = "alice"', f'hash = "{digest}"']) + "\n"


@pytest.fixture(scope="module")
def bridges(v1: Upstream, v1_plain: str) -> tuple[Gateway, Gateway]:
    """Two gateway instances sharing [state] keys, each routing /mcp/v1 (the flows server)
    and /mcp/plain (ts_v1_server.mjs) for anonymous callers, and /mcp/v1-keyed (the flows
    server) for callers with an API key; none is told which generation they speak."""
    keys = keygen()
    upstreams = {"v1": v1.url, "plain": v1_plain}
    extra = api_keys() + "\n".join(['[[route]]', f'path = "/mcp/{KEYED}"', 'upstream = "v1"', 'auth = ["keys"]']) + "\n"
    with gateway(upstreams, keys, extra) as a, gateway(upstreams, keys, extra) as b:
        yield a, b


@pytest.fixture(scope="module")
def bridge(bridges) -> Gateway:
    return bridges[0]


def config(upstream_url: str, *, generations: list[str] | None = None, state: str = "", keyed: bool = False) -> str:
    """One upstream (id v1) at /mcp/v1; `keyed`: for callers with API_KEY only."""
    lines = ['[[listener]]', 'address = "127.0.0.1:0"', '[admin]', 'address = "127.0.0.1:0"', '[state]']
    lines.append(state or f"max_rounds = {GATEWAY_MAX_ROUNDS}")
    lines += ['[[upstream]]', 'id = "v1"', f'name = "{Gateway.upstream_name("v1")}"', f'url = "{upstream_url}"']
    if generations is not None:
        lines.append("generations = " + json.dumps(generations))
    lines += ['[[route]]', 'path = "/mcp/v1"', 'upstream = "v1"']
    if keyed:
        lines.append('auth = ["keys"]')
    return "\n".join(lines) + "\n" + (api_keys() if keyed else "")


@contextmanager
def own_gateway(text: str) -> Iterator[Gateway]:
    with _spawn([str(_binary()), "run", "--config", "gateway.toml"], files={"gateway.toml": text}) as process:
        bound = bound_addresses(process.log_path, process.proc, ("listener", "admin"))
        _wait(process, lambda: _ready(f"http://{bound['admin']}/readyz"), "200 from /readyz")
        yield Gateway(f"http://{bound['listener']}", f"http://{bound['admin']}", process.log_path)


@pytest.fixture(scope="module")
def strict(v1: Upstream) -> Gateway:
    """A small round limit and push timeout; the upstream is configured as 2025-11-25 only."""
    state = f'max_rounds = {STRICT_MAX_ROUNDS}\npush_timeout = "{STRICT_PUSH_TIMEOUT_S}s"'
    with own_gateway(config(v1.url, generations=[LEGACY], state=state)) as gw:
        yield gw


# --- the 2026-07-28 SDK client ---------------------------------------------------------


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
    def answer(key: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=filled(params, **values))

    return answer


@dataclass
class Modern:
    client: Client
    asked: list[tuple[str, types.ElicitRequestParams]] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)  # the JSON-RPC bodies it sent

    def calls(self, tool: str) -> list[dict[str, Any]]:
        return [b for b in self.wire if b.get("method") == "tools/call" and b["params"]["name"] == tool]


@asynccontextmanager
async def modern(
    url: str, answer: Answer | None = None, mode: str = "auto", expect: str | None = MODERN, key: str | None = None
) -> AsyncIterator[Modern]:
    """The SDK client at `url` in `mode` ("auto": its default); `answer` is the person
    (None: the client declares no elicitation capability); `key`: its API key (None:
    anonymous). `expect`: the protocol version
    it must have agreed on (through the gateway, 2026-07-28: the gateway answered its
    `server/discover`, so it never fell back to `initialize`)."""
    holder: list[Modern] = []

    async def on_elicit(context, params):
        holder[0].asked.append((context.request_id, params))
        out = answer(context.request_id, params)
        return await out if hasattr(out, "__await__") else out

    async def record(request: httpx2.Request) -> None:
        if request.content:
            holder[0].wire.append(json.loads(request.content))

    http = create_mcp_http_client(headers={"authorization": f"Bearer {key}"} if key else None)
    http.event_hooks["request"].append(record)
    async with http:
        kwargs = {"elicitation_callback": on_elicit} if answer else {}
        client = Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs)
        holder.append(Modern(client))
        async with client:
            if expect is not None:
                assert client.protocol_version == expect
                assert not [b for b in holder[0].wire if b.get("method") == "initialize"], holder[0].wire
            yield holder[0]


def text_of(result: types.CallToolResult) -> str:
    return next(c.text for c in result.content if isinstance(c, types.TextContent))


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    return json.loads(text_of(result))


def flow_calls(made: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [c for c in made if c["tool"] == tool]


def tool_calls(seen: list[dict[str, Any]], tool: str | None = None) -> list[dict[str, Any]]:
    return [r for r in seen if r["method"] == "tools/call" and (tool is None or r["name"] == tool)]


def innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def session_of(seen: list[dict[str, Any]], method: str = "tools/call") -> str:
    """The session id of the single `method` request in `seen`."""
    [sent] = [r for r in seen if r["method"] == method]
    assert sent["sid"], sent
    return sent["sid"]


def own_session(seen: list[dict[str, Any]], sid: str) -> list[tuple[str, Any, Any]]:
    """What `seen` shows in the session `sid`, in order, as (http, method, version); a
    session the gateway opened starts with its notifications/initialized."""
    return [(r["http"], r["method"], r["version"]) for r in seen if r["sid"] == sid]


async def eventually(check: Callable[[], Any], within: float) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await anyio.to_thread.run_sync(check)
        if found or time.monotonic() >= deadline:
            return found
        await anyio.sleep(0.1)


# --- raw 2026-07-28 requests, where the test needs the wire itself ---------------------


def request(rid: Any, method: str, params: dict[str, Any] | None = None, caps: dict[str, Any] = ELICIT) -> dict[str, Any]:
    params = dict(params or {})
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": caps}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def call(rid: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": tool, "arguments": arguments})


def retry(rid: Any, first: dict[str, Any], state: str, responses: dict[str, Any]) -> dict[str, Any]:
    body = json.loads(json.dumps(first))
    body["id"] = rid
    body["params"]["inputResponses"] = responses
    body["params"]["requestState"] = state
    return body


def headers_of(body: dict[str, Any]) -> dict[str, str]:
    h = {"accept": ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": body["method"]}
    params = body.get("params", {})
    if body["method"] in ("tools/call", "prompts/get"):
        h["mcp-name"] = params["name"]
    return h


async def post(http: httpx2.AsyncClient, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """HTTP status and the JSON-RPC response to `body` (a JSON body, or an event stream's
    message with its id)."""
    resp = await http.post(url, headers=headers_of(body), json=body)
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:].strip()) for line in resp.text.splitlines() if line.startswith("data:")]
        answers = [e for e in events if e.get("id") == body["id"]]
        assert answers, events
        return resp.status_code, answers[-1]
    return resp.status_code, resp.json()


def the_question(result: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    """The single question of an `input_required` result: (key, request, requestState)."""
    assert result["resultType"] == "input_required", result
    [(key, asked)] = result["inputRequests"].items()
    state = result["requestState"]
    assert isinstance(state, str) and state, result
    return key, asked, state


# === directly: the 2026-07-28 client cannot use a 2025-11-25-only server ================


@pytest.mark.parametrize("server", ["v1", "v1_plain"])
async def test_directly_a_2026_client_is_refused(server, request):
    target = request.getfixturevalue(server)
    url = target if isinstance(target, str) else target.url
    # Pinned to 2026-07-28, every request is refused: the server wants a session.
    with pytest.raises(BaseException) as failed:
        async with modern(url, accept_all(), mode=MODERN, expect=None) as s:
            await s.client.call_tool("book", {"hint": "the big room"})
    error = innermost(failed.value)
    assert isinstance(error, MCPError), repr(error)
    assert error.error.message == "Bad Request: Server not initialized", error.error
    # In its default mode the client falls back to the old generation.
    async with modern(url, accept_all(), expect=None) as s:
        assert s.client.protocol_version == LEGACY
    assert s.wire[0]["method"] == "server/discover" and s.wire[1]["method"] == "initialize"


# === the gateway finds out, or is told =================================================


async def test_discovered_on_the_first_request(v1):
    """No `generations`: the client's server/discover goes upstream as it came, is refused
    (HTTP 4xx); the gateway asks `server/discover` itself, which fails too, then its own
    initialize works, and the request is bridged. The next client of the same caller
    (an API key) costs the upstream nothing but its request (remembered, and the
    session reused)."""
    with own_gateway(config(v1.url, keyed=True)) as gw:
        with v1.watch() as (seen, _):
            async with modern(gw.url("v1"), accept_all(), key=API_KEY) as s:
                assert s.client.protocol_version == MODERN
                info = s.client.server_info
                listing = await s.client.list_tools()
        with v1.watch() as (again, _):
            async with modern(gw.url("v1"), accept_all(), key=API_KEY) as s2:
                assert s2.client.protocol_version == MODERN
                listing2 = await s2.client.list_tools()
    assert FLOWS <= {t.name for t in listing.tools} and FLOWS <= {t.name for t in listing2.tools}
    assert info is not None and info.name == Gateway.upstream_name("v1")
    # The client's own discover was forwarded once, as a 2026-07-28 request without a
    # session; then the gateway's own discovery (server/discover, refused), then initialize.
    assert [r["method"] for r in seen] == [
        "server/discover", "server/discover", "initialize", "notifications/initialized", "tools/list"
    ], seen
    probes = seen[:2]
    assert all(p["version"] == MODERN and not p["session"] for p in probes), seen
    # The initialize that found out is the session: one, with the client's capabilities.
    init = seen[2]
    assert init["protocolVersion"] == LEGACY and init["caps"] == ELICIT, init
    # Everything after the probes is a 2025-11-25 request in a session.
    sid = session_of(seen, "tools/list")
    assert all(r["sid"] == sid and r["version"] == LEGACY for r in seen[3:]), seen
    assert [r for r in seen if r["version"] == MODERN] == probes, seen
    # The second client: no probe, no new session, just its list, in the same session.
    assert [(r["method"], r["sid"], r["version"]) for r in again] == [("tools/list", sid, LEGACY)], again
    assert sid not in v1.deleted(), "the identified caller's session was ended"


async def test_discovered_on_a_call_of_an_anonymous_caller(v1):
    """No `generations`, an anonymous caller: the first request upstream is the list the
    gateway fetches itself to check the call's arguments (`[arguments] schema`, on in
    `untrusted`); it goes as it came, is refused; the gateway asks `server/discover`, then
    `initialize`; the list, then the call, are carried, the call in a session of its own,
    ended (DELETE) once the call ends."""
    with own_gateway(config(v1.url)) as gw:
        async with httpx2.AsyncClient(timeout=10) as http:
            with v1.watch() as (seen, _):
                status, answer = await post(http, gw.url("v1"), call(1, "echo", {"text": "found out"}))
    assert status == 200 and answer["result"]["content"] == [{"type": "text", "text": "found out"}], answer
    assert [(r["method"], r["version"], r["session"]) for r in seen[:3]] == [
        ("tools/list", MODERN, False), ("server/discover", MODERN, False), ("initialize", LEGACY, False)
    ], seen
    # Sent again once, in a 2025-11-25 session that was opened for it.
    sid = session_of(seen[1:])
    assert own_session(seen, sid)[:2] == [("POST", "notifications/initialized", LEGACY), ("POST", "tools/call", LEGACY)], seen
    # Every session opened is ended: the call's (and the one discovery opened, if another).
    opened = {r["sid"] for r in seen if r["method"] == "notifications/initialized"}
    assert sid in opened and len([r for r in seen if r["method"] == "initialize"]) == len(opened), seen
    assert await eventually(lambda: opened <= v1.deleted(), 5), (opened, seen)


async def test_configured_never_probes(v1):
    with own_gateway(config(v1.url, generations=[LEGACY])) as gw:
        with v1.watch() as (seen, _):
            async with modern(gw.url("v1"), accept_all()) as s:
                assert s.client.protocol_version == MODERN
                result = await s.client.call_tool("echo", {"text": "configured"})
    assert text_of(result) == "configured"
    assert seen and seen[0]["method"] == "initialize", seen
    assert not [r for r in seen if r["version"] == MODERN or r["method"] == "server/discover"], seen
    [sent] = tool_calls(seen, "echo")
    assert sent["session"] and sent["version"] == LEGACY


async def test_one_session_per_declared_capabilities(bridge, v1):
    """The upstream session of an identified caller is opened for the capabilities the
    client declares: the same caller without elicitation gets a session of its own, where
    the server cannot ask; with elicitation again, the first session is reused."""
    async with modern(bridge.url(KEYED), accept_all(), key=API_KEY) as s:
        await s.client.call_tool("echo", {"text": "warm"})
    with v1.watch() as (warm, _):
        async with modern(bridge.url(KEYED), accept_all(), key=API_KEY) as s:
            await s.client.call_tool("echo", {"text": "warm again"})
    with v1.watch() as (seen, made):
        async with modern(bridge.url(KEYED), None, key=API_KEY) as s:
            assert s.client.protocol_version == MODERN
            try:
                result = await s.client.call_tool("book", {"hint": "the big room"})
            except MCPError as e:
                result = e
    # The same caller and capabilities again: its session reused, nothing opened.
    assert warm and not [r for r in warm if r["method"] == "initialize"], warm
    assert len({r["sid"] for r in warm}) == 1 and session_of(warm), warm
    assert s.asked == []
    inits = [r for r in seen if r["method"] == "initialize"]
    assert [r["caps"] for r in inits] == [{}], seen
    assert session_of(seen) != session_of(warm), "the caller without elicitation was carried in the session with it"
    # The server's tool could not ask in a session without elicitation.
    assert isinstance(result, MCPError) or result.is_error, result
    [book] = flow_calls(made, "book")
    assert book["replies"] == [{"key": "room", "error": "not sent", "reason": None}], book


# === server/discover, lists, plain calls: 2026-07-28 shapes =============================


async def test_server_discover_is_answered_by_the_gateway(bridge, v1):
    url = bridge.url("v1")
    async with httpx2.AsyncClient(timeout=10) as http:
        await post(http, url, request(0, "tools/list"))  # discovery done, if not yet
        with v1.watch() as (seen, _):
            status, answer = await post(http, url, request(1, "server/discover"))
    assert status == 200, answer
    result = answer["result"]
    assert result["supportedVersions"] == [MODERN], result
    assert "tools" in result["capabilities"], result
    assert result["instructions"] == INSTRUCTIONS
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == Gateway.upstream_name("v1")
    assert not [r for r in seen if r["method"] == "server/discover"], seen


@pytest.mark.parametrize("route", ["v1", KEYED])
async def test_list_tools_in_2026_shape(bridge, v1, route):
    headers = BEARER if route == KEYED else {}
    async with httpx2.AsyncClient(timeout=10, headers=headers) as http:
        await post(http, bridge.url(route), request(1, "tools/list"))  # the keyed caller's session is open
        with v1.watch() as (seen, _):
            status, answer = await post(http, bridge.url(route), request(2, "tools/list"))
    assert status == 200, answer
    result = answer["result"]
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, result
    assert result["cacheScope"] in ("private", "public"), result
    assert FLOWS <= {t["name"] for t in result["tools"]}
    # An earlier anonymous call's session may be ended (DELETE) while this one runs.
    posted = [r for r in seen if r["http"] != "DELETE"]
    if route == KEYED:
        # The identified caller's session is reused: one request upstream.
        assert [(r["method"], r["session"], r["version"]) for r in posted] == [("tools/list", True, LEGACY)], seen
    else:
        # An anonymous caller's request in a session of its own, ended after it.
        assert [(r["method"], r["session"], r["version"]) for r in posted[:3]] == [
            ("initialize", False, LEGACY), ("notifications/initialized", True, LEGACY), ("tools/list", True, LEGACY)
        ], seen
        sid = session_of(seen, "tools/list")
        assert await eventually(lambda: sid in v1.deleted(), 5), "the anonymous caller's session was not ended"


async def test_anonymous_callers_get_a_session_each(bridge, v1):
    """Callers the gateway cannot tell apart never share an upstream session: each call,
    with the same capabilities, opens its own (initialize, notifications/initialized, the
    call) and ends it (DELETE) once the call ends; a call held at a question keeps its
    session until the retry ends the call."""
    url = bridge.url("v1")
    async with httpx2.AsyncClient(timeout=10) as http:
        with v1.watch() as (seen, made):
            echoes = [await post(http, url, call(f"a-{i}", "echo", {"text": f"anon {i}"})) for i in (1, 2)]
            first = call("a-3", "book", {"hint": "the anonymous room"})
            _, answer = await post(http, url, first)
            key, _, state = the_question(answer["result"])
            await anyio.sleep(0.5)
            held = v1.calls()[-1]
            ended_while_held = held["session"] in v1.deleted()
            _, done = await post(http, url, retry("a-4", first, state, {key: {"action": "accept", "content": {"room_id": "nook"}}}))
    assert [a["result"]["content"][0]["text"] for _, a in echoes] == ["anon 1", "anon 2"], echoes
    assert json.loads(done["result"]["content"][0]["text"]) == {"tool": "book", "answers": {"room": {"room_id": "nook"}}}, done
    calls = tool_calls(seen)
    sids = [r["sid"] for r in calls]
    assert [r["name"] for r in calls] == ["echo", "echo", "book"] and all(sids), calls
    assert len(set(sids)) == 3, "anonymous callers shared an upstream session"
    # The gateway's own list for the caller (to check arguments against) is carried in a
    # session of its own too; discovery opened one more.
    lists = {r["sid"] for r in seen if r["method"] == "tools/list"}
    assert all(lists) and not lists & set(sids), seen
    opened = {r["sid"] for r in seen if r["method"] == "notifications/initialized"}
    assert len([r for r in seen if r["method"] == "initialize"]) == len(opened), seen
    assert [c["session"] for c in flow_calls(made, "book")] == [sids[2]] and held["session"] == sids[2], made
    for sid in sids:
        assert own_session(seen, sid)[:2] == [("POST", "notifications/initialized", LEGACY), ("POST", "tools/call", LEGACY)], seen
    assert not ended_while_held, "the session of a call held at a question was ended"
    assert await eventually(lambda: set(sids) <= v1.deleted(), 5), (sids, v1.deleted())


async def test_a_plain_call(bridge, v1):
    async with httpx2.AsyncClient(timeout=10) as http:
        with v1.watch() as (seen, _):
            status, answer = await post(http, bridge.url("v1"), call(3, "echo", {"text": "hello, bridge"}))
    assert status == 200, answer
    assert answer["result"]["resultType"] == "complete"
    assert answer["result"]["content"] == [{"type": "text", "text": "hello, bridge"}]
    [sent] = tool_calls(seen)
    assert sent["name"] == "echo" and sent["session"] and sent["version"] == LEGACY
    async with modern(bridge.url("v1"), accept_all()) as s:
        result = await s.client.call_tool("echo", {"text": "and through the SDK"})
    assert text_of(result) == "and through the SDK" and s.asked == []


# === questions, round after round =======================================================


@pytest.mark.parametrize("route", ["v1", "plain"])
async def test_one_round_accepted(bridge, v1, route):
    with v1.watch() as (seen, made):
        async with modern(bridge.url(route), accept_all(room_id="studio-b")) as s:
            assert s.client.protocol_version == MODERN
            result = await s.client.call_tool("book", {"hint": "the big room"})
    assert outcome(result) == {"tool": "book", "answers": {"room": {"room_id": "studio-b"}}}
    [(key, asked)] = s.asked
    assert asked.message == "Which room do you mean by the big room?"
    assert asked.requested_schema["properties"]["room_id"]["enum"] == ["atrium", "studio-b", "nook"]
    first, second = s.calls("book")
    assert "inputResponses" not in first["params"]
    assert second["params"]["inputResponses"] == {key: {"action": "accept", "content": {"room_id": "studio-b"}}}
    if route == "v1":
        # One upstream call, held open while the client answered: not called again.
        assert len(tool_calls(seen, "book")) == 1, seen
        [held] = flow_calls(made, "book")
        assert held["replies"] == [{"key": "room", "action": "accept", "fields": ["room_id"]}] and held["end"] == "result", held
        assert all(r["version"] == LEGACY for r in seen if r["http"] == "POST"), seen


async def test_one_round_on_the_wire(bridge, v1):
    url = bridge.url("v1")
    first = call("b-1", "book", {"hint": "the quiet room"})
    async with httpx2.AsyncClient(timeout=10) as http:
        with v1.watch() as (seen, made):
            status, answer = await post(http, url, first)
            assert status == 200, answer
            key, asked, state = the_question(answer["result"])
            status2, final = await post(http, url, retry("b-2", first, state, {key: {"action": "accept", "content": {"room_id": "nook"}}}))
    assert key == "answer", answer["result"]["inputRequests"]
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["message"] == "Which room do you mean by the quiet room?"
    assert asked["params"]["requestedSchema"]["required"] == ["room_id"]
    # The same provenance block as a question of a 2026-07-28 upstream.
    provenance = asked["params"]["_meta"]["dev.portcullis/provenance"]
    assert provenance["upstream"]["name"] == Gateway.upstream_name("v1") and provenance["mode"] == "enforce"
    assert "upstream" not in state and "mcp-session" not in state.lower()
    assert status2 == 200, final
    assert final["id"] == "b-2"
    assert final["result"]["resultType"] == "complete", final
    assert json.loads(final["result"]["content"][0]["text"]) == {"tool": "book", "answers": {"room": {"room_id": "nook"}}}
    assert len(tool_calls(seen, "book")) == 1
    assert flow_calls(made, "book")[0]["replies"] == [{"key": "room", "action": "accept", "fields": ["room_id"]}]


async def test_three_rounds(bridge, v1):
    with v1.watch() as (seen, made):
        async with modern(bridge.url("v1"), accept_all(title="Quarterly review", people=12)) as s:
            result = await s.client.call_tool("wizard", {})
    assert outcome(result) == {
        "tool": "wizard",
        "answers": {"name": {"title": "Quarterly review"}, "size": {"people": 12}, "confirm": {"go": True}},
    }
    assert [p.message for _, p in s.asked] == ["What is the event called?", "How many people come?", "Book it?"]
    sent = s.calls("wizard")
    assert len(sent) == 4
    # One question a round: each retry answers exactly one key, with a state of its own.
    assert [len(b["params"].get("inputResponses", {})) for b in sent] == [0, 1, 1, 1]
    states = [b["params"]["requestState"] for b in sent[1:]]
    assert len(set(states)) == 3
    assert len(tool_calls(seen, "wizard")) == 1, seen
    [held] = flow_calls(made, "wizard")
    assert held["replies"] == [{"key": k, "action": "accept", "fields": [f]} for k, f in (("name", "title"), ("size", "people"), ("confirm", "go"))], held


async def test_two_questions_of_one_call_are_two_rounds(bridge, v1):
    """The 1.x server pushes profile's two questions one after the other."""
    with v1.watch() as (_, made):
        async with modern(bridge.url("v1"), accept_all(side="aisle")) as s:
            result = await s.client.call_tool("profile", {})
    assert outcome(result) == {"tool": "profile", "answers": {"contact": {"email": "guest@example.org"}, "seat": {"side": "aisle"}}}
    assert [p.message for _, p in s.asked] == ["Where do we send the confirmation?", "Window or aisle?"]
    assert len(s.calls("profile")) == 3
    assert [r["action"] for r in flow_calls(made, "profile")[0]["replies"]] == ["accept", "accept"]


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_upstream(bridge, v1, action):
    with v1.watch() as (seen, made):
        async with modern(bridge.url("v1"), lambda key, params: types.ElicitResult(action=action)) as s:
            result = await s.client.call_tool("wizard", {})
    # The server's own words for the action it received.
    assert outcome(result) == {"tool": "wizard", "stopped": {"key": "name", "action": action}}
    assert len(s.asked) == 1
    [held] = flow_calls(made, "wizard")
    assert held["replies"] == [{"key": "name", "action": action, "fields": []}] and held["end"] == "result", held
    assert len(tool_calls(seen, "wizard")) == 1


async def test_url_mode_question(bridge, v1):
    with v1.watch() as (_, made):
        async with modern(bridge.url("v1"), accept_all()) as s:
            result = await s.client.call_tool("signin", {})
    [(_, asked)] = s.asked
    assert isinstance(asked, types.ElicitRequestURLParams), asked
    assert asked.url == "https://auth.example.com/authorize?client=rooms"
    assert outcome(result) == {"tool": "signin", "answers": {"login": None}}
    assert flow_calls(made, "signin")[0]["replies"] == [{"key": "login", "action": "accept", "fields": []}]


async def test_markup_is_stripped_from_a_pushed_question(bridge):
    async with modern(bridge.url("v1"), accept_all()) as s:
        result = await s.client.call_tool("styled", {})
    assert outcome(result) == {"tool": "styled", "answers": {"ok": {"fine": True}}}
    [(_, asked)] = s.asked
    assert not any(ch in asked.message for ch in "<>\x1b"), repr(asked.message)
    assert "alert" not in asked.message and "Pick one colour" in asked.message


# === what the policy refuses ============================================================


async def test_a_secret_form_is_refused(bridge, v1):
    """The policy refuses the upstream's password form: the person never sees it, and
    the upstream's push is answered with the refusal (its tool then ends the call, here
    with an error result), or the client's call ends with the refusal itself."""
    with v1.watch() as (seen, _):
        async with modern(bridge.url("v1"), accept_all(password="not-a-real-one")) as s:
            try:
                result = await s.client.call_tool("vault", {})
            except MCPError as e:
                result = e
            index = len(v1.calls()) - 1
    assert s.asked == [], "the person was shown a form asking for a password"
    assert len(s.calls("vault")) == 1, "the client was given something to retry"
    assert len(tool_calls(seen, "vault")) == 1
    # The upstream's push is answered with the refusal, promptly (not left to its timeout).
    vault = await eventually(lambda: v1.call_now(index)["end"] and v1.call_now(index), 5)
    assert vault and vault["tool"] == "vault", v1.calls()[-1]
    if isinstance(result, MCPError):
        data = result.error.data
        assert data["reason"] == "secret_field_requested" and data["field"] == "password", result.error
        assert data["upstream"] == Gateway.upstream_name("v1")
        assert all("action" not in r for r in vault["replies"]), vault
    else:
        assert result.is_error, result
        assert "URL mode" in text_of(result) and "password" in text_of(result), text_of(result)
        assert vault["replies"] == [{"key": "unlock", "error": -32010, "reason": "secret_field_requested"}], vault


async def test_an_answer_outside_the_schema_is_refused(bridge, v1):
    with v1.watch() as (_, made):
        async with modern(bridge.url("v1"), accept_all(room_id="penthouse")) as s:
            with pytest.raises(MCPError) as refused:
                await s.client.call_tool("book", {"hint": "the top floor"})
    assert refused.value.error.data["reason"] == "invalid_answer", refused.value.error
    assert refused.value.error.data["field"] == "room_id"
    assert all(r.get("action") != "accept" for c in made for r in c["replies"]), made


async def test_a_secret_typed_into_a_form_is_refused(bridge, v1):
    token = "ghp_" + ("a1B2c3D4e5" * 4)[:36]  # the shape of a GitHub token, not a real one
    with v1.watch() as (_, made):
        async with modern(bridge.url("v1"), accept_all(title=token)) as s:
            with pytest.raises(MCPError) as refused:
                await s.client.call_tool("wizard", {})
    error = refused.value.error
    assert error.data["reason"] == "secret_in_answer", error
    assert error.data["field"] == "title"
    assert token not in json.dumps(error.model_dump(mode="json"))
    assert all(r.get("action") != "accept" for c in made for r in c["replies"]), made


async def test_the_round_limit(strict, v1):
    url = strict.url("v1")
    async with modern(url, accept_all()) as s:
        result = await s.client.call_tool("endless", {"rounds": STRICT_MAX_ROUNDS})
    assert len(outcome(result)["answers"]) == STRICT_MAX_ROUNDS
    with v1.watch() as (seen, _):
        async with modern(url, accept_all()) as s:
            try:
                result = await s.client.call_tool("endless", {"rounds": STRICT_MAX_ROUNDS + 1})
            except MCPError as e:
                result = e
            index = len(v1.calls()) - 1
    assert len(s.asked) == STRICT_MAX_ROUNDS
    assert len(tool_calls(seen, "endless")) == 1
    # The push past the limit never reached the client; the upstream got the refusal for it.
    endless = await eventually(lambda: v1.call_now(index)["end"] and v1.call_now(index), 5)
    assert endless and endless["tool"] == "endless", v1.calls()[-1]
    replies = endless["replies"]
    assert [r.get("action") for r in replies[:STRICT_MAX_ROUNDS]] == ["accept"] * STRICT_MAX_ROUNDS, replies
    assert len(replies) == STRICT_MAX_ROUNDS + 1 and "action" not in replies[-1], replies
    if isinstance(result, MCPError):
        assert result.error.data["reason"] == "round_limit_exceeded", result.error
        assert result.error.data["limit"] == STRICT_MAX_ROUNDS
    else:
        assert result.is_error and f"{STRICT_MAX_ROUNDS} rounds" in text_of(result), result
        assert replies[-1] == {"key": f"again-{STRICT_MAX_ROUNDS + 1}", "error": -32011, "reason": "round_limit_exceeded"}


# === the instance that holds the call ===================================================


async def test_a_retry_at_another_instance_is_409(bridges, v1):
    a, b = bridges
    first = call("i-1", "book", {"hint": "the corner"})
    async with httpx2.AsyncClient(timeout=10) as http:
        await post(http, b.url("v1"), request(0, "tools/list"))  # b knows the upstream too
        with v1.watch() as (seen, made):
            status, answer = await post(http, a.url("v1"), first)
            assert status == 200, answer
            key, _, state = the_question(answer["result"])
            responses = {key: {"action": "accept", "content": {"room_id": "atrium"}}}
            elsewhere = await http.post(b.url("v1"), headers=headers_of(first), json=retry("i-2", first, state, responses))
            status_here, here = await post(http, a.url("v1"), retry("i-3", first, state, responses))
    assert elsewhere.status_code == 409, elsewhere.text
    assert elsewhere.json()["error"]["data"]["reason"] == "call_not_waiting", elsewhere.text
    assert elsewhere.json()["id"] == "i-2"
    # The refusal did not use the answer up: the instance holding the call takes it.
    assert status_here == 200, here
    assert here["result"]["resultType"] == "complete", here
    assert json.loads(here["result"]["content"][0]["text"]) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert len(tool_calls(seen, "book")) == 1
    assert flow_calls(made, "book")[0]["replies"] == [{"key": "room", "action": "accept", "fields": ["room_id"]}]


async def test_a_retry_is_taken_once(bridge, v1):
    url = bridge.url("v1")
    first = call("o-1", "wizard", {})
    async with httpx2.AsyncClient(timeout=10) as http:
        with v1.watch() as (_, made):
            _, answer = await post(http, url, first)
            key, _, state = the_question(answer["result"])
            responses = {key: {"action": "accept", "content": {"title": "Offsite"}}}
            status1, once = await post(http, url, retry("o-2", first, state, responses))
            status2, again = await post(http, url, retry("o-3", first, state, responses))
            key2, _, state2 = the_question(once["result"])
            await post(http, url, retry("o-4", first, state2, {key2: {"action": "cancel"}}))
    assert status1 == 200 and once["result"]["inputRequests"][key2]["params"]["message"] == "How many people come?"
    assert "error" in again, again
    assert again["error"]["data"]["reason"] in ("call_not_waiting", "state_replayed"), again
    assert [r["action"] for r in flow_calls(made, "wizard")[0]["replies"]] == ["accept", "cancel"]


async def test_a_retry_after_the_hold_expired(strict, v1):
    url = strict.url("v1")
    first = call("e-1", "book", {"hint": "later"})
    async with httpx2.AsyncClient(timeout=10) as http:
        with v1.watch() as (_, made):
            status, answer = await post(http, url, first)
            assert status == 200, answer
            index = len(v1.calls()) - 1
            key, _, state = the_question(answer["result"])
            await anyio.sleep(STRICT_PUSH_TIMEOUT_S + 1.0)
            late = await http.post(url, headers=headers_of(first), json=retry("e-2", first, state, {key: {"action": "accept", "content": {"room_id": "nook"}}}))
    body = late.json()
    assert "error" in body and "result" not in body, late.text
    assert body["error"]["data"]["reason"] in ("call_not_waiting", "state_expired"), late.text
    # The upstream's push got no accept: it was answered with an error when the hold ended.
    book = await eventually(lambda: v1.call_now(index)["end"] and v1.call_now(index), 5)
    assert book and book["tool"] == "book", v1.calls()[-1]
    assert [r.get("action") for r in book["replies"]] == [None] and book["end"] == "error", book
    assert all(r.get("action") != "accept" for c in made for r in c["replies"]), made
    # The anonymous caller's upstream session ended with the hold.
    assert await eventually(lambda: book["session"] in v1.deleted(), 5), "the expired call's session was not ended"


async def test_concurrent_calls_share_the_upstream_session(bridge, v1):
    """Three clients of one identified caller (one API key) with the same capabilities,
    each in a call waiting at a pushed question of the same upstream session: each retry
    reaches its own call, and each client gets its own call's result. (Each SDK client
    numbers its requests from the same start, so their calls carry the same JSON-RPC id.)"""
    async with modern(bridge.url(KEYED), accept_all(), key=API_KEY) as s:
        await s.client.call_tool("echo", {"text": "warm"})  # the session is open
    results: dict[str, Any] = {}
    with v1.watch() as (seen, made):

        async def run(tool: str, args: dict[str, Any], values: dict[str, Any]) -> None:
            async with modern(bridge.url(KEYED), accept_all(**values), key=API_KEY) as s:
                try:
                    with anyio.fail_after(20):
                        results[tool] = outcome(await s.client.call_tool(tool, args))
                except TimeoutError:
                    results[tool] = "no answer within 20 s"

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "wizard", {}, {"title": "Launch", "people": 40})
            tg.start_soon(run, "book", {"hint": "any"}, {"room_id": "nook"})
            tg.start_soon(run, "endless", {"rounds": 2}, {})
    assert results == {
        "wizard": {"tool": "wizard", "answers": {"name": {"title": "Launch"}, "size": {"people": 40}, "confirm": {"go": True}}},
        "book": {"tool": "book", "answers": {"room": {"room_id": "nook"}}},
        "endless": {"tool": "endless", "answers": {"again-1": {"more": True}, "again-2": {"more": True}}},
    }
    assert not [r for r in seen if r["method"] == "initialize"], "a new upstream session for the same capabilities"
    assert len({c["session"] for c in made}) == 1, made
    assert not [r for r in seen if r["http"] == "DELETE"], "the identified caller's session was ended"


@pytest.mark.parametrize("route", ["v1", KEYED])
async def test_two_calls_with_the_same_id_at_once(bridge, v1, route):
    """Two 2026-07-28 requests are independent, whatever their ids: two calls with the
    same JSON-RPC id, both waiting at a question, each get their own result (anonymous:
    in two upstream sessions; one identified caller: in the one session it shares)."""
    url = bridge.url(route)
    outcomes: dict[str, Any] = {}

    async def run(http: httpx2.AsyncClient, tool: str, args: dict[str, Any], content: dict[str, Any]) -> None:
        first = call(7, tool, args)
        _, answer = await post(http, url, first)
        rounds = 0
        try:
            with anyio.fail_after(15):
                while answer.get("result", {}).get("resultType") == "input_required":
                    key, _, state = the_question(answer["result"])
                    rounds += 1
                    _, answer = await post(http, url, retry(8, first, state, {key: {"action": "accept", "content": content}}))
            outcomes[tool] = json.loads(answer["result"]["content"][0]["text"])
        except (TimeoutError, httpx2.TimeoutException):
            outcomes[tool] = f"no answer after round {rounds}"

    async with httpx2.AsyncClient(timeout=30, headers=BEARER if route == KEYED else {}) as http:
        await post(http, url, call(1, "echo", {"text": "warm"}))
        with v1.watch() as (_, made):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, http, "book", {"hint": "any"}, {"room_id": "nook"})
                tg.start_soon(run, http, "endless", {"rounds": 2}, {"more": True})
    assert len({c["session"] for c in made}) == (1 if route == KEYED else 2), made
    assert outcomes == {
        "book": {"tool": "book", "answers": {"room": {"room_id": "nook"}}},
        "endless": {"tool": "endless", "answers": {"again-1": {"more": True}, "again-2": {"more": True}}},
    }


@pytest.mark.parametrize(
    "change, reason",
    [
        ("arguments", "state_arguments_mismatch"),
        ("tool", "state_target_mismatch"),
        ("route", "state_upstream_mismatch"),
        ("altered", "state_invalid"),
    ],
)
async def test_a_retry_that_does_not_fit_its_state_is_refused(bridge, v1, change, reason):
    """The sealed state is checked before the answer goes to the held call; a refused
    retry does not end the call: the right one still completes it."""
    url = bridge.url("v1")
    first = call(f"m-{change}", "book", {"hint": "the garden room"})
    async with httpx2.AsyncClient(timeout=10) as http:
        with v1.watch() as (_, made):
            _, answer = await post(http, url, first)
            key, _, state = the_question(answer["result"])
            responses = {key: {"action": "accept", "content": {"room_id": "atrium"}}}
            wrong = retry("m-wrong", first, state, responses)
            target = url
            if change == "arguments":
                wrong["params"]["arguments"]["hint"] = "somewhere else"
            elif change == "tool":
                wrong["params"]["name"] = "echo"
                wrong["params"]["arguments"] = {"text": "x"}
            elif change == "route":
                target = bridge.url("plain")
            else:
                cut = len(state) // 2
                wrong["params"]["requestState"] = state[:cut] + ("A" if state[cut] != "A" else "B") + state[cut + 1 :]
            status, refused = await post(http, target, wrong)
            status_ok, done = await post(http, url, retry("m-right", first, state, responses))
    assert status == 400 and refused["error"]["data"]["reason"] == reason, refused
    assert status_ok == 200 and json.loads(done["result"]["content"][0]["text"])["answers"] == {"room": {"room_id": "atrium"}}, done
    [book] = flow_calls(made, "book")
    assert book["replies"] == [{"key": "room", "action": "accept", "fields": ["room_id"]}], book


async def test_the_upstream_forgets_its_sessions(v1):
    """The upstream restarts: the session the gateway opened for an identified caller
    answers 404; the gateway opens a new one rather than failing every later request
    (and reuses that one)."""
    with own_gateway(config(v1.url, generations=[LEGACY], keyed=True)) as gw:
        async with modern(gw.url("v1"), accept_all(), key=API_KEY) as s:
            assert text_of(await s.client.call_tool("echo", {"text": "before"})) == "before"
            assert v1.forget() >= 1
            with v1.watch() as (seen, made):
                try:
                    first = text_of(await s.client.call_tool("echo", {"text": "after"}))
                except MCPError as e:
                    first = e
                second = outcome(await s.client.call_tool("book", {"hint": "after the restart"}))
    assert first == "after", f"the first request after the restart failed: {first!r}"
    assert second == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert [r["method"] for r in seen if r["method"] == "initialize"] == ["initialize"], seen
    assert len({r["sid"] for r in tool_calls(seen) if r["sid"] in {c["session"] for c in made}}) == 1, seen


async def test_the_audit_trail_of_a_bridged_call(v1):
    """The same provenance events as a question of a 2026-07-28 upstream: asked, delivered,
    answered (under the key the client saw, for the call it belongs to), ended; never a
    typed value."""
    with own_gateway(config(v1.url, generations=[LEGACY])) as gw:
        async with modern(gw.url("v1"), accept_all(room_id="studio-b")) as s:
            assert outcome(await s.client.call_tool("book", {"hint": "the audit room"}))["answers"]
        [(key, _)] = s.asked

        def events() -> list[dict[str, Any]]:
            lines = gw.log_path.read_text().splitlines()
            return [json.loads(line) for line in lines if line.startswith("{") and '"event"' in line]

        await eventually(lambda: any(e["event"] == "operation_end" for e in events()), 3)
        log = events()
        assert "studio-b" not in gw.log_path.read_text(), "a typed value in the log"
    ops = [e for e in log if e.get("operation")]
    assert len({e["operation"] for e in ops}) == 1, ops
    kinds = [e["event"] for e in ops]
    first = {k: next(e for e in ops if e["event"] == k) for k in kinds}
    problems = [f"no {k} event" for k in ("input_required_received", "delivered", "retry_received", "operation_end") if k not in first]
    if (asked := first.get("input_required_received")) and asked["requests"] != [{"key": key, "kind": "form", "fields": ["room_id"]}]:
        problems.append(f"question recorded as {asked['requests']}, the client was asked under key {key!r}")
    if answered := first.get("retry_received"):
        # The answer is recorded as a 2025-11-25 session records the answer to
        # any pushed request: under the answer message (method "other"), not
        # the call it belongs to (the operation id ties the two together).
        if [(a["key"], a["action"]) for a in answered["answers"]] != [(key, "accept")]:
            problems.append(f"answers recorded as {answered['answers']}, the client answered key {key!r}")
    if (end := first.get("operation_end")) and end["outcome"] != "complete":
        problems.append(f"operation_end outcome {end['outcome']!r}")
    assert not problems, problems
