"""Federated routes (issue 21) with the official Python SDK client (mcp 2.3.0), both
protocol generations, against ONE route over three real servers: the Python SDK server,
the TypeScript SDK v2 server and the demo server (`portcullis demo-upstream`, rmcp).
The peers, routes and tiny upstreams are described in fed_peers.py.

2026-07-28 (mode="auto"): one server to the client (the route's name, the members'
instructions under headings); every member's tools listed under its prefix with its
provenance in `_meta`, in config order, as each lists them directly; a call and a
multi-round MRTR exchange reaching each member; pagination across three upstreams two
items a page behind a sealed cursor; a dead and a slow member left out and named; the
same tool name from several upstreams, each reachable; a state replayed at another member.

2025-11-25 (mode="legacy"): one session over the members that speak it (the demo server
speaks only 2026-07-28), pushed questions answered back to their member, DELETE.

Every expectation about the gateway is the contract in /work/notes/fed-contract.md
(README "Federated routes" once documented).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from fed_peers import (
    FANOUT_TIMEOUT_S,
    FAULTS,
    FEDERATION,
    LEGACY,
    MODERN,
    PAGERS,
    PAGES,
    PROVENANCE,
    SLOW_S,
    TEAM,
    TEAM_MEMBERS,
    TEAM_NAME,
    Federation,
    federation,
    name_of,
)
from test_hostile import metric

pytestmark = pytest.mark.anyio

PREFIX = dict(TEAM_MEMBERS)
FORM_AND_URL = {"elicitation": {"form": {}, "url": {}}}
BOOKING = {"day": "2026-09-17", "hour": 9, "room_hint": "a room"}  # names no room: the demo asks which
# The multi-round tool of each TEAM member, with its arguments and the questions it asks.
MRTR_TOOLS = {
    "python": ("wizard", {}, ["name", "size", "confirm"]),
    "ts-v2": ("wizard", {}, ["name", "size", "confirm"]),
    "rooms": ("book_room", BOOKING, ["room"]),
}


@pytest.fixture(scope="module")
def fed() -> Federation:
    with federation() as f:
        yield f


@pytest.fixture(scope="module")
def direct_tools(fed: Federation) -> dict[str, list[types.Tool]]:
    """Each TEAM member's tools as it lists them itself (no gateway)."""

    async def listing() -> dict[str, list[types.Tool]]:
        out = {}
        for uid, url in fed.direct.items():
            async with Client(url) as client:
                out[uid] = (await client.list_tools()).tools
        return out

    return anyio.run(listing)


# ------------------------------------------------------------------ the client


def accept_all(key: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """The person: accepts each form with a value made from its schema."""
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content=filled(params.requested_schema))


def filled(requested_schema: dict[str, Any]) -> dict[str, Any]:
    """A value for every field of a form: the last option of a choice, else one made from the type."""
    content: dict[str, Any] = {}
    for field, schema in requested_schema["properties"].items():
        options = schema.get("enum") or [o["const"] for o in schema.get("oneOf", [])]
        if options:
            content[field] = options[-1]
        elif schema.get("type") == "boolean":
            content[field] = True
        elif schema.get("type") in ("integer", "number"):
            content[field] = 2
        else:
            content[field] = "Offsite"
    return content


class Session:
    def __init__(self, client: Client, asked: list, wire: list[tuple[httpx2.Headers, dict[str, Any]]]):
        self.client, self.asked, self.wire = client, asked, wire

    def calls(self, tool: str) -> list[tuple[httpx2.Headers, dict[str, Any]]]:
        return [(h, b) for h, b in self.wire if b.get("method") == "tools/call" and b["params"]["name"] == tool]


@asynccontextmanager
async def connect(url: str, mode: str = "auto", answer: Callable = accept_all):
    asked: list[tuple[str, types.ElicitRequestParams]] = []
    wire: list[tuple[httpx2.Headers, dict[str, Any]]] = []

    async def on_elicit(context, params):
        asked.append((context.request_id, params))
        return answer(context.request_id, params)

    async def record(request: httpx2.Request) -> None:
        if request.content:
            wire.append((request.headers, json.loads(request.content)))

    http = create_mcp_http_client()
    http.event_hooks["request"].append(record)
    async with http:
        client = Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=on_elicit)
        async with client:
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            yield Session(client, asked, wire)


async def all_tools(client: Client) -> tuple[list[types.Tool], list[types.ListToolsResult]]:
    """Every page of tools/list, following nextCursor."""
    pages = [await client.list_tools()]
    while pages[-1].next_cursor is not None:
        assert len(pages) < 20, "the cursor never ends"
        pages.append(await client.list_tools(cursor=pages[-1].next_cursor))
    return [t for p in pages for t in p.tools], pages


def unavailable(meta: dict[str, Any] | None) -> dict[str, str]:
    """The members a merged answer left out, {upstream id: reason}, checked against the contract's shape."""
    notes = ((meta or {}).get(FEDERATION) or {}).get("unavailable", [])
    for note in notes:
        assert set(note) == {"upstream", "name", "reason"}, note
        assert note["name"] == name_of(note["upstream"]), note
    return {note["upstream"]: note["reason"] for note in notes}


def answer_of(result: types.CallToolResult) -> dict[str, Any]:
    """What a tool answered, without the `_meta` a server or the gateway adds."""
    return result.model_dump(by_alias=True, exclude_none=True, exclude={"meta"})


# ------------------------------------------------- raw 2026-07-28 requests (httpx2)


async def post(url: str, method: str, params: dict[str, Any], rid: int = 1) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 request with correct headers and `_meta`; (HTTP status, the JSON-RPC answer)."""
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": FORM_AND_URL,
        },
    }
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": MODERN, "mcp-method": method}
    if method == "tools/call":
        headers["mcp-name"] = params["name"]
    async with httpx2.AsyncClient(timeout=15) as http:
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        resp = await http.post(url, json=body, headers=headers)
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        answers = [json.loads(d) for d in re.findall(r"^data: ?(.*)$", resp.text, re.M) if d.strip()]
        return resp.status_code, next(a for a in answers if a.get("id") == rid)
    return resp.status_code, resp.json()


def answers_to(question: dict[str, Any]) -> dict[str, Any]:
    """inputResponses accepting every form of an input_required result."""
    return {
        key: {"action": "accept", "content": filled(q["params"]["requestedSchema"])}
        for key, q in question["inputRequests"].items()
    }


# ------------------------------------------------------------ 2026-07-28, one server


async def test_discover_answers_as_one_server(fed):
    async with connect(fed.url(TEAM)) as s:
        info, instructions, caps = s.client.server_info, s.client.instructions, s.client.server_capabilities
    assert s.wire[0][1]["method"] == "server/discover"
    assert caps.tools is not None
    # Only the demo server has instructions; they come under its configured name.
    assert instructions is not None
    assert instructions.count(f"## {name_of('rooms')}") == 1, instructions
    assert "Demo room-booking server" in instructions
    assert "portcullis-demo-rooms" not in instructions  # never the server's self-description
    # 2026-07-28 carries the server's name in the result's `_meta` (io.modelcontextprotocol/serverInfo).
    assert info is not None and info.name == TEAM_NAME


async def test_tools_listed_under_prefixes_with_provenance(fed, direct_tools):
    async with connect(fed.url(TEAM)) as s:
        tools, pages = await all_tools(s.client)
    assert len(pages) == 1, "none of the three servers pages"
    assert unavailable(pages[0].meta) == {}
    expected = [(uid, f"{PREFIX[uid]}_{t.name}", t) for uid, _ in TEAM_MEMBERS for t in direct_tools[uid]]
    assert [t.name for t in tools] == [name for _, name, _ in expected]  # config order, each member's own order
    for tool, (uid, _, original) in zip(tools, expected):
        assert tool.meta[PROVENANCE] == {"id": uid, "name": name_of(uid)}, tool.name
        # Everything but the name is as the server listed it.
        assert tool.description == original.description, tool.name
        assert tool.input_schema == original.input_schema, tool.name


@pytest.mark.parametrize(
    "uid, tool, arguments",
    [
        ("python", "echo", {"text": "federated"}),
        ("ts-v2", "echo", {"text": "federated"}),
        ("rooms", "get_room", {"room_id": "nook"}),
    ],
)
async def test_a_call_reaches_its_member(fed, uid, tool, arguments):
    async with Client(fed.direct[uid]) as client:
        expected = answer_of(await client.call_tool(tool, arguments))
    async with connect(fed.url(TEAM)) as s:
        result = await s.client.call_tool(f"{PREFIX[uid]}_{tool}", arguments)
    assert answer_of(result) == expected
    [(headers, body)] = s.calls(f"{PREFIX[uid]}_{tool}")
    assert headers["mcp-name"] == body["params"]["name"] == f"{PREFIX[uid]}_{tool}"


async def test_the_same_tool_name_from_two_servers_both_reachable(fed):
    """`echo` is a tool of both SDK servers; each answers as it does directly (the
    Python SDK adds structuredContent, the TypeScript SDK does not)."""
    direct = {}
    for uid in ("python", "ts-v2"):
        async with Client(fed.direct[uid]) as client:
            direct[uid] = answer_of(await client.call_tool("echo", {"text": "twice"}))
    assert direct["python"] != direct["ts-v2"], "the two servers answer alike: this test could not tell them apart"
    async with connect(fed.url(TEAM)) as s:
        via = {uid: answer_of(await s.client.call_tool(f"{PREFIX[uid]}_echo", {"text": "twice"})) for uid in direct}
    assert via == direct


async def test_the_same_tool_name_from_three_pagers_each_reaches_its_own(fed):
    for pager in PAGERS:
        fed.tiny.received[pager].clear()
    async with connect(fed.url(PAGES)) as s:
        results = {p: await s.client.call_tool(f"{p}_t1", {}) for p in PAGERS}
    for pager, result in results.items():
        assert [c.text for c in result.content] == [f"{pager}:t1"]
        calls = [r.params for r in fed.tiny.received[pager] if r.message.get("method") == "tools/call"]
        assert [c["name"] for c in calls] == ["t1"], "the upstream got the name with the prefix removed"


@pytest.mark.parametrize("name", ["echo", "python_echo", "nope_echo", "py-echo", "PY_echo", "_echo"])
async def test_a_name_without_a_configured_prefix_is_refused_naming_the_prefixes(fed, name):
    async with connect(fed.url(TEAM)) as s:
        with pytest.raises(MCPError) as raised:
            await s.client.call_tool(name, {"text": "x"})
    assert raised.value.code == -32602
    assert raised.value.data["reason"] == "unknown_name"
    for _, prefix in TEAM_MEMBERS:
        assert f'"{prefix}"' in raised.value.message, raised.value.message


@pytest.mark.parametrize("uid", list(MRTR_TOOLS))
async def test_multi_round_mrtr_with_each_member(fed, uid):
    tool, arguments, keys = MRTR_TOOLS[uid]
    exposed = f"{PREFIX[uid]}_{tool}"
    async with connect(fed.url(TEAM)) as s:
        result = await s.client.call_tool(exposed, arguments)
    assert not result.is_error, result
    assert [key for key, _ in s.asked] == keys
    calls = s.calls(exposed)
    assert len(calls) == len(keys) + 1
    for headers, retry in calls[1:]:
        assert headers["mcp-name"] == exposed
        assert retry["params"]["requestState"].startswith("pcs1."), "the client holds the gateway's sealed state"
    if uid == "rooms":
        assert result.structured_content == {"booked": True, "room_id": "nook", "day": "2026-09-17", "hour": 9}
    else:
        outcome = json.loads(result.content[0].text)
        assert outcome == {
            "tool": "wizard",
            "answers": {"name": {"title": "Offsite"}, "size": {"people": 2}, "confirm": {"go": True}},
        }


# The demo server asks again only when an accepted answer names no room, which the
# gateway's answer check refuses (the enum): through a gateway its exchange is one round.


@pytest.mark.parametrize("origin, target", list(itertools.permutations(MRTR_TOOLS, 2)))
async def test_a_state_replayed_at_another_member_is_refused(fed, origin, target):
    url = fed.url(TEAM)
    tool, arguments, _ = MRTR_TOOLS[origin]
    status, first = await post(url, "tools/call", {"name": f"{PREFIX[origin]}_{tool}", "arguments": arguments})
    assert status == 200 and first["result"]["resultType"] == "input_required", first
    question = first["result"]
    state = question["requestState"]
    target_tool, target_arguments, _ = MRTR_TOOLS[target]
    retry = {"inputResponses": answers_to(question), "requestState": state}
    status, refused = await post(
        url, "tools/call", {"name": f"{PREFIX[target]}_{target_tool}", "arguments": target_arguments, **retry}, rid=2
    )
    assert status == 400, refused
    assert refused["error"]["code"] == -32602
    assert refused["error"]["data"]["reason"] == "state_upstream_mismatch", refused
    # The state itself was good: at its own member the retry goes on.
    again = {"name": f"{PREFIX[origin]}_{tool}", "arguments": arguments, **retry}
    status, goes_on = await post(url, "tools/call", again, rid=3)
    assert status == 200 and "result" in goes_on, goes_on


# ------------------------------------------------------------ pagination over three


async def test_pages_across_three_upstreams(fed):
    for pager in PAGERS:
        fed.tiny.received[pager].clear()
    async with connect(fed.url(PAGES)) as s:
        tools, pages = await all_tools(s.client)
    names = [t.name for t in tools]
    expected = {f"{p}_t{i + 1}" for p, n in PAGERS.items() for i in range(n)}
    assert sorted(names) == sorted(expected), "every tool of every pager exactly once"
    assert len(pages) >= max(PAGERS.values()) // 2 + 1, "the gateway did not follow the members' pages"
    for page in pages[:-1]:
        assert page.next_cursor.startswith("pfc1."), page.next_cursor
        assert not any(p.issued & {page.next_cursor} for p in fed.pagers.values()), "a member's own cursor leaked"
    for pager in PAGERS:
        mine = [n for n in names if n.startswith(f"{pager}_")]
        assert mine == [f"{pager}_t{i + 1}" for i in range(PAGERS[pager])], "a member's order changed"
        for tool in tools:
            if tool.name.startswith(f"{pager}_"):
                assert tool.meta[PROVENANCE] == {"id": pager, "name": name_of(pager)}
        cursors = [r.params.get("cursor") for r in fed.tiny.received[pager] if r.message.get("method") == "tools/list"]
        assert set(cursors) - {None} <= fed.pagers[pager].issued, "a member got a cursor it never issued"
        assert set(cursors) - {None} == fed.pagers[pager].issued, "a member's page was never asked for"
    # Within a page the members come in config order.
    order = list(PAGERS)
    for page in pages:
        members = [order.index(t.name.split("_", 1)[0]) for t in page.tools]
        assert members == sorted(members), [t.name for t in page.tools]


def _forgeries(real: str) -> dict[str, str]:
    middle = len(real) // 2
    flipped = real[:middle] + ("A" if real[middle] != "A" else "B") + real[middle + 1 :]
    return {
        "one character changed": flipped,
        "truncated": real[:-3],
        "extended": real + "AAAA",
        "a member's own cursor": "pa~from~2",
        "the prefix alone": "pfc1.",
        "the prefix and garbage": "pfc1.eyJwYSI6InBhfmZyb21-MiJ9",
        "empty": "",
    }


async def test_a_forged_cursor_is_refused(fed):
    status, first = await post(fed.url(PAGES), "tools/list", {})
    assert status == 200, first
    real = first["result"]["nextCursor"]
    for what, cursor in _forgeries(real).items():
        before = {p: len(fed.tiny.received[p]) for p in PAGERS}
        status, refused = await post(fed.url(PAGES), "tools/list", {"cursor": cursor}, rid=7)
        assert "error" in refused, f"{what}: {refused}"
        assert refused["error"]["code"] == -32602, what
        assert refused["error"]["data"]["reason"] == "cursor_invalid", (what, refused)
        assert {p: len(fed.tiny.received[p]) for p in PAGERS} == before, f"{what}: reached an upstream"
    status, ok = await post(fed.url(PAGES), "tools/list", {"cursor": real}, rid=8)
    assert status == 200 and ok["result"]["tools"], "the genuine cursor still works"


# ------------------------------------------------------------ a dead and a slow member


async def test_a_dead_and_a_slow_member_are_left_out_and_named(fed, direct_tools):
    async with connect(fed.url(FAULTS)) as s:
        started = time.monotonic()
        listing = await s.client.list_tools()
        took = time.monotonic() - started
    assert took < FANOUT_TIMEOUT_S + 1.5 < SLOW_S, f"the list waited for the slow member ({took:.1f}s)"
    assert [t.name for t in listing.tools] == [f"rooms_{t.name}" for t in direct_tools["rooms"]]
    assert unavailable(listing.meta) == {"dead": "upstream_unreachable", "slow": "upstream_timeout"}
    async with httpx2.AsyncClient(timeout=5) as http:
        text = (await http.get(f"{fed.gateway.admin}/metrics")).text
    for uid, reason in (("dead", "upstream_unreachable"), ("slow", "upstream_timeout")):
        counted = metric(text, "portcullis_federation_left_out_total", upstream=uid, method="tools/list", reason=reason)
        assert counted >= 1, f"{uid} not counted as left out"
    log = fed.gateway.log_path.read_text(errors="replace")
    for uid in ("dead", "slow"):
        assert any("WARN" in line and uid in line for line in log.splitlines()), f"no warn line names {uid}"


async def test_discover_names_the_members_left_out(fed):
    status, found = await post(fed.url(FAULTS), "server/discover", {})
    assert status == 200, found
    assert unavailable(found["result"].get("_meta")) == {"dead": "upstream_unreachable", "slow": "upstream_timeout"}


@pytest.mark.parametrize("uid, reason", [("dead", "upstream_unreachable"), ("slow", "upstream_timeout")])
async def test_a_call_to_a_failed_member_gets_the_usual_upstream_error(fed, uid, reason):
    async with connect(fed.url(FAULTS)) as s:
        with pytest.raises(MCPError) as raised:
            await s.client.call_tool(f"{uid}_t1", {})
    assert raised.value.code == -32001
    assert raised.value.data["reason"] == reason
    assert raised.value.data["upstream"] == name_of(uid)


async def test_the_others_are_served_while_one_member_is_slow(fed):
    async with connect(fed.url(FAULTS)) as s:
        # The SDK lists the tools at its first call (for their output schemas); a list waits
        # up to the fan-out timeout for the slow member, so it is done (and kept) first.
        await s.client.list_tools()
        done: dict[str, float] = {}

        async def slow() -> None:
            with pytest.raises(MCPError):
                await s.client.call_tool("slow_t1", {})
            done["slow"] = time.monotonic()

        async def fast() -> None:
            await anyio.sleep(0.2)  # the slow call is on its way first
            result = await s.client.call_tool("rooms_get_room", {"room_id": "atrium"})
            assert not result.is_error
            done["rooms"] = time.monotonic()

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            tg.start_soon(fast)
    assert done["rooms"] < done["slow"], "the fast member's call waited for the slow one"


# ------------------------------------------------------------------------ 2025-11-25


async def test_legacy_session_over_the_members(fed, direct_tools):
    async with connect(fed.url(TEAM), mode="legacy") as s:
        info = s.client.server_info
        listing = await s.client.list_tools()
        echoes = {uid: await s.client.call_tool(f"{PREFIX[uid]}_echo", {"text": "old"}) for uid in ("python", "ts-v2")}
    assert s.wire[0][1]["method"] == "initialize"
    assert info is not None and info.name == TEAM_NAME
    sessions = {h.get("mcp-session-id") for h, b in s.wire[1:]}
    assert len(sessions) == 1 and next(iter(sessions)).startswith("pss1."), sessions
    names = [t.name for t in listing.tools]
    # The demo server speaks only 2026-07-28, the TypeScript SDK v2 server keeps no
    # 2025-11-25 session: the gateway carries both across (bridged) in the route's session.
    for uid in ("python", "ts-v2", "rooms"):
        assert [n for n in names if n.startswith(f"{PREFIX[uid]}_")] == [
            f"{PREFIX[uid]}_{t.name}" for t in direct_tools[uid]
        ]
    for tool in listing.tools:
        uid = next(u for u, p in TEAM_MEMBERS if tool.name.startswith(f"{p}_"))
        assert tool.meta[PROVENANCE] == {"id": uid, "name": name_of(uid)}
    assert "rooms" not in unavailable(listing.meta)
    for uid, result in echoes.items():
        assert [c.text for c in result.content] == ["old"], uid


@pytest.mark.parametrize("uid", ["python", "ts-v2"])
async def test_legacy_pushed_questions_go_back_to_their_member(fed, uid):
    """Each member that speaks 2025-11-25 keeps its own session under the joint one,
    so it can push its questions (the TypeScript SDK v2 server too)."""
    async with connect(fed.url(TEAM), mode="legacy") as s:
        result = await s.client.call_tool(f"{PREFIX[uid]}_wizard", {})
    assert [p.message for _, p in s.asked] == ["What is the event called?", "How many people come?", "Book it?"]
    assert json.loads(result.content[0].text) == {
        "tool": "wizard",
        "answers": {"name": {"title": "Offsite"}, "size": {"people": 2}, "confirm": {"go": True}},
    }
    answers = [b for _, b in s.wire if "result" in b]
    assert len(answers) == 3 and all(str(b["id"]).startswith("psr1.") for b in answers), answers


async def test_legacy_a_bridged_member_asks_its_question(fed):
    """The demo server (2026-07-28 only) asks which room through the route's session."""
    tool, arguments, _ = MRTR_TOOLS["rooms"]
    async with connect(fed.url(TEAM), mode="legacy") as s:
        result = await s.client.call_tool(f"{PREFIX['rooms']}_{tool}", arguments)
    [(_, asked)] = s.asked
    assert asked.requested_schema["properties"]["room_id"]["enum"] == ["atrium", "studio-b", "nook"], asked
    assert not result.is_error, result


async def test_legacy_delete_ends_the_session_on_every_member(fed):
    async with connect(fed.url(TEAM), mode="legacy") as s:
        await s.client.list_tools()
    [sid] = {h["mcp-session-id"] for h, _ in s.wire[1:]}
    async with httpx2.AsyncClient(timeout=10) as http:
        after = await http.post(
            fed.url(TEAM),
            json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-session-id": sid,
                "mcp-protocol-version": LEGACY,
            },
        )
    assert after.status_code == 404, after.text
    assert after.json()["error"]["data"]["reason"] == "session_expired"
