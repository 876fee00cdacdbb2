"""Three gateway replicas behind nginx (round robin, deploy/nginx/replicas.conf) sharing
one Redis and one set of state keys, driven by the official Python SDK client (mcp
2.3.0) in both generations. Every exchange works whichever replica each request reaches:

- MRTR rounds: each round of a 2026-07-28 call lands on the next replica; a retry
  redeemed on one is refused as a replay on every other;
- 2025-11-25 sessions: `initialize`, the call whose stream carries the pushed question,
  and the POST that answers it reach different replicas; a session ended with DELETE is
  ended on all;
- bridged calls, both ways: a 2025-11-25 client of a 2026-07-28-only server (the answer
  to a pushed question reaches another replica than the waiting call, which gets it
  through the relay) and a 2026-07-28 client of a 2025-11-25-only server (the retry
  reaches another replica than the held upstream call, which resumes it and answers
  back through the relay);
- rug pulls: a changed definition seen by one replica is held on all three, and an
  operator's acceptance on one releases it on all;
- rate limits: one bucket for the cluster (three replicas with local buckets would let
  three times as many calls through);
- a replica killed with SIGKILL mid-exchange: what the book's "Several replicas" page
  promises survives it (the test names each promise).

- approval by the person (issue 38): the gateway's own question asked by one replica
  and answered through another (2026-07-28); a 2025-11-25 session's pushed approval
  waits on the replica that asked, and an answer reaching another is handed to it.

An answer or retry for a call that waits on another replica crosses through Redis (the
relay); when that replica was killed, it is refused `call_holder_gone` at once.

Each test is its own caller (an API key of its own), so one test's calls never use up
another's rate-limit bucket.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from cluster import Cluster, cluster
from conftest import _binary
from interop_peers import keygen, mcp_server

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
# One caller per test: its API key (made up) and principal.
CALLERS = ("mrtr", "replay", "sessions", "ended", "bridged", "carried", "pins", "limited", "killed", "killed_session",
           "approver", "approver_session")
RATE_BURST = 6  # per_principal_tool in cluster.replica_config


def key_of(principal: str) -> str:
    return f"replicas-test-key-{principal}"


def routes(upstreams: dict[str, str], extra: str = "") -> str:
    lines = ["[[auth]]", 'name = "keys"', 'type = "api_key"']
    for principal in CALLERS:
        digest = hashlib.sha256(key_of(principal).encode()).hexdigest()
        lines += ["[[auth.key]]", f'principal = "{principal}"', f'hash = "sha256:{digest}"']
    for uid, (url, generations) in upstreams.items():
        lines += ["[[upstream]]", f'id = "{uid}"', f'name = "Replicated {uid}"', f'url = "{url}"']
        if generations:
            lines.append(f"generations = {json.dumps(generations)}")
        lines += ["[[route]]", f'path = "/mcp/{uid}"', f'upstream = "{uid}"', 'auth = ["keys"]']
    return "\n".join(lines) + "\n" + extra


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def replicas():
    with (
        mcp_server("py_changing_server.py") as python,
        mcp_server("py_mrtr_only.py") as modern,
        mcp_server("ts_v1_flows_server.mjs") as v1,
    ):
        upstreams = {
            # Both generations: MRTR for 2026-07-28 clients, native sessions for 2025-11-25.
            "python": (python, None),
            # The same server under another id, whose pins the rug-pull test changes.
            "pins": (python, None),
            # 2026-07-28 only: a 2025-11-25 client's session is bridged.
            "modern": (modern, ["2026-07-28"]),
            # 2025-11-25 only: a 2026-07-28 client's calls are carried in a session.
            "v1": (v1, ["2025-11-25"]),
            # The same server again, last: its route's approval rule asks before `book`.
            "approved": (python, None),
        }
        approval = '[[route.approval]]\nname = "book-needs-a-yes"\ntools = ["book"]\n'
        with cluster(routes(upstreams, approval), keygen("replicas")) as c:
            c.servers = {"python": python, "modern": modern, "v1": v1}
            yield c


class Wire:
    """Each HTTP request a client sent and the replica that answered it."""

    def __init__(self, c: Cluster) -> None:
        self.cluster = c
        self.sent: list[tuple[str, dict[str, Any] | None]] = []  # (HTTP method, JSON body)
        self.served: list[tuple[dict[str, Any] | None, int]] = []  # (JSON body, replica index)
        self.pending: dict[int, dict[str, Any] | None] = {}

    async def on_request(self, request: httpx2.Request) -> None:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.method, body))
        self.pending[id(request)] = body

    async def on_response(self, response: httpx2.Response) -> None:
        body = self.pending.pop(id(response.request), None)
        if addr := response.headers.get("x-replica"):
            self.served.append((body, self.cluster.index(addr)))

    def replicas_of(self, pick: Callable[[dict[str, Any]], bool]) -> list[int]:
        return [i for body, i in self.served if body is not None and pick(body)]


def http_client(c: Cluster, principal: str) -> tuple[httpx2.AsyncClient, Wire]:
    wire = Wire(c)
    http = create_mcp_http_client(headers={"authorization": f"Bearer {key_of(principal)}"})
    http.event_hooks["request"].append(wire.on_request)
    http.event_hooks["response"].append(wire.on_response)
    return http, wire


@asynccontextmanager
async def sdk(c: Cluster, route: str, principal: str, mode: str = "auto", answer=None):
    """An SDK client through the balancer; `answer(params)` answers each question."""
    http, wire = http_client(c, principal)
    asked: list[types.ElicitRequestParams] = []

    async def on_elicit(context, params):
        asked.append(params)
        return answer(params)

    async with http:
        client = Client(
            streamable_http_client(c.url(route), http_client=http),
            mode=mode,
            elicitation_callback=on_elicit if answer else None,
        )
        async with client:
            assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
            yield client, wire, asked


def filled(requested: dict[str, Any]) -> dict[str, Any]:
    """A form's content: the first choice, yes, 12 or "x" for each field."""
    content = {}
    for name, schema in requested["properties"].items():
        if "enum" in schema:
            content[name] = schema["enum"][0]
        elif schema.get("type") == "boolean":
            content[name] = True
        elif schema.get("type") in ("integer", "number"):
            content[name] = 12
        else:
            content[name] = "x"
    return content


def accept_all(params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content=filled(params.requested_schema))


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result
    return json.loads(next(c.text for c in result.content if isinstance(c, types.TextContent)))


def is_call(tool: str) -> Callable[[dict[str, Any]], bool]:
    return lambda b: b.get("method") == "tools/call" and b.get("params", {}).get("name") == tool


WIZARD = {"name": {"title": "x"}, "size": {"people": 12}, "confirm": {"go": True}}


# --- MRTR ---------------------------------------------------------------------------


async def test_mrtr_rounds_reach_every_replica(replicas: Cluster):
    async with sdk(replicas, "python", "mrtr", answer=accept_all) as (client, wire, asked):
        result = await client.call_tool("wizard", {})
    assert outcome(result) == {"tool": "wizard", "answers": WIZARD}
    assert len(asked) == 3
    rounds = wire.replicas_of(is_call("wizard"))
    assert len(rounds) == 4, wire.served
    # Round robin: no two consecutive rounds on one replica, and all three used.
    assert all(a != b for a, b in zip(rounds, rounds[1:])), rounds
    assert set(rounds) == {0, 1, 2}, rounds


async def test_a_retry_redeemed_on_one_replica_is_a_replay_on_every_other(replicas: Cluster):
    http, wire = http_client(replicas, "replay")
    headers = {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "book",
    }
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    params = {"name": "book", "arguments": {"hint": "the big room"}, "_meta": meta}
    async with http:
        first = await http.post(replicas.url("python"), headers=headers,
                                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        question = first.json()["result"]
        assert question["resultType"] == "input_required"
        retry = {**params, "inputResponses": {"room": {"action": "accept", "content": {"room_id": "nook"}}},
                 "requestState": question["requestState"]}
        answers = []
        for n in range(4):
            r = await http.post(replicas.url("python"), headers=headers,
                                json={"jsonrpc": "2.0", "id": 2 + n, "method": "tools/call", "params": retry})
            answers.append(r.json())
    served = [i for _, i in wire.served]
    assert len(set(served[1:])) == 3, served
    assert answers[0]["result"]["resultType"] == "complete", answers[0]
    for again in answers[1:]:
        assert again["error"]["data"]["reason"] == "state_replayed", again


# --- 2025-11-25 sessions ----------------------------------------------------------------


async def test_a_session_and_its_pushed_questions_work_on_any_replica(replicas: Cluster):
    async with sdk(replicas, "python", "sessions", mode="legacy", answer=accept_all) as (client, wire, asked):
        tools = await client.list_tools()
        book = await client.call_tool("book", {"hint": "the big room"})
        wizard = await client.call_tool("wizard", {})
    assert "forecast" in {t.name for t in tools.tools}
    assert outcome(book) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert outcome(wizard) == {"tool": "wizard", "answers": WIZARD}
    assert len(asked) == 4
    # The answers to pushed questions (JSON-RPC responses the client POSTs) did not all
    # reach the replica whose stream carried the call.
    calls = wire.replicas_of(is_call("wizard"))
    answered = wire.replicas_of(lambda b: "result" in b and "method" not in b)
    assert len(calls) == 1 and len(answered) == 4, wire.served
    assert set(answered) - set(calls), (calls, answered)
    assert {i for _, i in wire.served} == {0, 1, 2}


async def test_a_session_ended_on_one_replica_is_ended_on_all(replicas: Cluster):
    http, wire = http_client(replicas, "ended")
    sessions: set[str] = set()

    async def session_of(response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            sessions.add(sid)

    http.event_hooks["response"].append(session_of)
    async with http:
        async with Client(streamable_http_client(replicas.url("python"), http_client=http), mode="legacy") as client:
            await client.list_tools()
        # The SDK ends its session with DELETE when it closes.
        assert [m for m, _ in wire.sent if m == "DELETE"], wire.sent
        [session] = sessions
        headers = {"accept": ACCEPT, "content-type": "application/json",
                   "mcp-protocol-version": LEGACY, "mcp-session-id": session}
        refused = []
        for n in range(3):
            r = await http.post(replicas.url("python"), headers=headers,
                                json={"jsonrpc": "2.0", "id": 10 + n, "method": "tools/list"})
            refused.append((r.status_code, r.json()["error"]["data"]["reason"]))
    assert refused == [(404, "session_expired")] * 3
    assert {i for _, i in wire.served[-3:]} == {0, 1, 2}


# --- bridged calls --------------------------------------------------------------------
# An answer or retry reaching a replica other than the one where its call waits is
# handed to that one through Redis (the relay: one channel per replica); each hand-off
# is counted by the replica that received it.


async def handoffs(c: Cluster, kind: str, outcome: str) -> int:
    """`portcullis_relay_handoffs_total{kind, outcome}`, summed over the replicas."""
    line = re.compile(rf'^portcullis_relay_handoffs_total{{kind="{kind}",outcome="{outcome}"}} (\d+)$', re.M)
    total = 0
    async with httpx2.AsyncClient() as plain:
        for r in c.replicas:
            text = (await plain.get(f"{r.admin}/metrics")).text
            total += sum(int(n) for n in line.findall(text))
    return total


def crossed(calls: list[int], answered: list[int]) -> int:
    """How many answers reached another replica than the one their call waits on."""
    [call] = calls
    return sum(1 for i in answered if i != call)


async def test_a_bridged_session_answers_on_any_replica(replicas: Cluster):
    """A 2025-11-25 client of a 2026-07-28-only server: each question is pushed on the
    call's stream by one replica; the client's answer reaches another."""
    before = await handoffs(replicas, "answer", "delivered")
    with anyio.fail_after(40):
        async with sdk(replicas, "modern", "bridged", mode="legacy", answer=accept_all) as (client, wire, asked):
            wizard = await client.call_tool("wizard", {})
    assert outcome(wizard) == {"tool": "wizard", "answers": WIZARD}
    calls = wire.replicas_of(is_call("wizard"))
    answered = wire.replicas_of(lambda b: "result" in b and "method" not in b)
    assert len(answered) == 3 and set(answered) - set(calls), (calls, answered)
    # Each answer that reached another replica was handed to the waiting call's.
    assert await handoffs(replicas, "answer", "delivered") - before == crossed(calls, answered)


async def test_a_carried_call_resumes_on_any_replica(replicas: Cluster):
    """A 2026-07-28 client of a 2025-11-25-only server: the upstream call is held open on
    the replica it pushed to; the client's retry reaches another."""
    before = await handoffs(replicas, "retry", "answered")
    with anyio.fail_after(40):
        async with sdk(replicas, "v1", "carried", answer=accept_all) as (client, wire, asked):
            wizard = await client.call_tool("wizard", {})
    assert outcome(wizard) == {"tool": "wizard", "answers": WIZARD}
    rounds = wire.replicas_of(is_call("wizard"))
    assert len(rounds) == 4 and len(set(rounds)) == 3, rounds
    # The upstream call stays on the replica of the first round: each retry that
    # reached another was handed to it, and its answer (the next question, then the
    # result) handed back.
    assert await handoffs(replicas, "retry", "answered") - before == crossed(rounds[:1], rounds[1:])


async def open_bridged_session(http: httpx2.AsyncClient, c: Cluster) -> dict[str, str]:
    """A raw 2025-11-25 session on the bridged route: its request headers."""
    base = {"accept": ACCEPT, "content-type": "application/json"}
    init = await http.post(c.url("modern"), headers=base, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}}},
                   "clientInfo": {"name": "replicas-test", "version": "1"}}})
    headers = {**base, "mcp-protocol-version": LEGACY, "mcp-session-id": init.headers["mcp-session-id"]}
    await http.post(c.url("modern"), headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


@pytest.mark.parametrize("end", ["DELETE", "cancelled"])
async def test_a_bridged_call_ended_through_another_replica_ends_where_it_waits(replicas: Cluster, end: str):
    """The session ended with DELETE, or the call cancelled (`notifications/cancelled`),
    through another replica than the one whose stream carries the waiting call: that
    replica is told, and the call's stream ends at once, without a result."""
    http, wire = http_client(replicas, "bridged")
    async with http:
        headers = await open_bridged_session(http, replicas)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "wizard", "arguments": {}}}
        with anyio.fail_after(20):
            async with http.stream("POST", replicas.url("modern"), headers=headers, json=call) as stream:
                holder = replicas.index(stream.headers["x-replica"])
                lines = stream.aiter_lines()
                async for line in lines:
                    if line.startswith("data:") and '"elicitation/create"' in line:
                        break
                # Straight to another replica (the balancer's name in Host, as nginx sends it).
                other = replicas.replicas[(holder + 1) % 3]
                direct = {**headers, "host": replicas.lb.base.removeprefix("http://")}
                url = f"{other.base}/mcp/modern"
                if end == "DELETE":
                    told = await http.delete(url, headers=direct)
                else:
                    told = await http.post(url, headers=direct, json={
                        "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
                assert told.status_code in (200, 202), told.text
                rest = []
                with anyio.fail_after(5):
                    rest = [line async for line in lines]
    assert not any('"result"' in line for line in rest), rest


# --- rug pulls ---------------------------------------------------------------------------


def listed(result: types.ListToolsResult) -> set[str]:
    return {t.name for t in result.tools}


async def test_a_changed_definition_is_held_on_every_replica(replicas: Cluster):
    async with sdk(replicas, "pins", "pins") as (client, wire, _):
        before = [listed(await client.list_tools()) for _ in range(3)]
        assert all("forecast" in names for names in before), before
        assert (await client.call_tool("forecast", {"city": "Oslo"})).is_error is False
        async with httpx2.AsyncClient() as plain:
            (await plain.post(replicas.servers["python"].removesuffix("/mcp") + "/change")).raise_for_status()
        # One replica sees the change and holds it; the other two never listed the
        # new definition before, and must hold it too.
        after = [await client.list_tools() for _ in range(3)]
        refusals = []
        for _ in range(3):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("forecast", {"city": "Oslo"})
            refusals.append(refused.value.error.data["reason"])
    assert {i for _, i in wire.served[-6:]} == {0, 1, 2}
    for result in after:
        assert "forecast" not in listed(result), listed(result)
        removed = (result.meta or {}).get("dev.portcullis/removed")
        assert {"kind": "tool", "name": "forecast", "reason": "listing_changed"} in removed, result.meta
    assert refusals == ["listing_changed"] * 3

    # Accepted through one replica's admin listener (the operator's command): delivered
    # by all.
    admin = replicas.replicas[1].admin.removeprefix("http://")
    # The admin listener takes only requests signed with the cluster's [state] keys:
    # the command reads them through the replicas' own config.
    with tempfile.TemporaryDirectory() as d:
        config = Path(d) / "gateway.toml"
        config.write_text(replicas.config)
        accepted = subprocess.run(
            [str(_binary()), "listings", "accept", "--config", str(config), "--admin", admin,
             "--upstream", "pins", "--all"],
            capture_output=True, text=True, timeout=30,
            env={**os.environ, "PORTCULLIS_STATE_KEYS": replicas.state_keys},
        )
    assert accepted.returncode == 0, accepted.stderr
    async with sdk(replicas, "pins", "pins") as (client, wire, _):
        again = [listed(await client.list_tools()) for _ in range(3)]
        called = [await client.call_tool("forecast", {"city": "Oslo"}) for _ in range(3)]
    assert all("forecast" in names for names in again), again
    assert all(not r.is_error for r in called)


# --- rate limits ---------------------------------------------------------------------------


async def test_a_rate_limit_is_one_bucket_for_the_cluster(replicas: Cluster):
    async with sdk(replicas, "python", "limited") as (client, wire, _):
        outcomes = []
        for n in range(RATE_BURST + 3):
            try:
                result = await client.call_tool("echo", {"text": f"call {n}"})
                outcomes.append("ok" if not result.is_error else "error")
            except MCPError as refused:
                outcomes.append(refused.error.data["reason"])
    calls = wire.replicas_of(is_call("echo"))
    assert set(calls) == {0, 1, 2}, calls
    # Local buckets would have let RATE_BURST calls through on each replica.
    assert outcomes == ["ok"] * RATE_BURST + ["rate_limited"] * 3, outcomes


# --- approval (issue 38) --------------------------------------------------------------------


def is_gateways(params: types.ElicitRequestParams) -> bool:
    meta = params.meta if isinstance(params.meta, dict) else {}
    return (meta.get("dev.portcullis/provenance") or {}).get("asker") == "gateway"


async def test_an_approval_asked_by_one_replica_is_answered_through_another(replicas: Cluster):
    """The gateway's question (its sealed state, single use in Redis) on one replica, the
    retry with the approval on the next, the server's own question after it on a third."""
    async with sdk(replicas, "approved", "approver", answer=accept_all) as (client, wire, asked):
        result = await client.call_tool("book", {"hint": "the big room"})
    assert outcome(result) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert [is_gateways(q) for q in asked] == [True, False], asked
    rounds = wire.replicas_of(is_call("book"))
    assert len(rounds) == 3 and len(set(rounds)) == 3, rounds


async def test_a_sessions_pushed_approval_is_answered_on_any_replica(replicas: Cluster):
    """A 2025-11-25 session's call waits for the gateway's pushed approval on the replica
    that asked; the answer reaching another is handed to it."""
    before = await handoffs(replicas, "answer", "delivered")
    with anyio.fail_after(40):
        async with sdk(replicas, "approved", "approver_session", mode="legacy", answer=accept_all) as (
            client, wire, asked,
        ):
            result = await client.call_tool("book", {"hint": "the big room"})
    assert outcome(result) == {"tool": "book", "answers": {"room": {"room_id": "atrium"}}}
    assert is_gateways(asked[0]), asked
    answered = wire.replicas_of(lambda b: "result" in b and "method" not in b)
    calls = wire.replicas_of(is_call("book"))
    assert set(answered) - set(calls), (calls, answered)
    # The approval (the first answer) crossed when it reached another replica; the
    # server's own question after it is a native push, answered to the server.
    relayed = await handoffs(replicas, "answer", "delivered") - before
    assert relayed == (answered[0] != calls[0]), (calls, answered)


# --- a replica killed while a call waits on it ------------------------------------------


def accepted(requested: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": filled(requested)}


async def test_a_retry_for_a_killed_replicas_call_is_refused_at_once(replicas: Cluster):
    """The replica holding a carried call is killed: the retry that reaches another is
    refused `call_holder_gone` (nobody listens on the holder's channel), without a wait."""
    http, wire = http_client(replicas, "killed")
    headers = {"accept": ACCEPT, "content-type": "application/json", "mcp-protocol-version": MODERN,
               "mcp-method": "tools/call", "mcp-name": "wizard"}
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
    params = {"name": "wizard", "arguments": {}, "_meta": meta}
    async with http:
        first = await http.post(replicas.url("v1"), headers=headers,
                                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        question = first.json()["result"]
        assert question["resultType"] == "input_required", question
        [(key, asked)] = question["inputRequests"].items()
        holder = wire.served[-1][1]
        replicas.replicas[holder].kill()
        replicas.replace(holder)
        retry = {**params, "requestState": question["requestState"],
                 "inputResponses": {key: accepted(asked["params"]["requestedSchema"])}}
        with anyio.fail_after(5):
            refused = await http.post(replicas.url("v1"), headers=headers,
                                      json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": retry})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["data"]["reason"] == "call_holder_gone", refused.text


async def test_an_answer_for_a_killed_replicas_call_is_refused_at_once(replicas: Cluster):
    """The replica whose stream carries a bridged session's call is killed: the answer
    to the question it pushed, reaching another replica, is refused `call_holder_gone`."""
    http, wire = http_client(replicas, "killed_session")
    base = {"accept": ACCEPT, "content-type": "application/json"}
    async with http:
        init = await http.post(replicas.url("modern"), headers=base, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}}},
                       "clientInfo": {"name": "replicas-test", "version": "1"}}})
        session = init.headers["mcp-session-id"]
        headers = {**base, "mcp-protocol-version": LEGACY, "mcp-session-id": session}
        await http.post(replicas.url("modern"), headers=headers,
                        json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wizard", "arguments": {}}}
        with anyio.fail_after(20):
            async with http.stream("POST", replicas.url("modern"), headers=headers, json=call) as stream:
                holder = replicas.index(stream.headers["x-replica"])
                pushed = None
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and '"elicitation/create"' in line:
                        pushed = json.loads(line.removeprefix("data:"))
                        break
                assert pushed, "no question pushed"
                replicas.replicas[holder].kill()
        replicas.replace(holder)
        answer = {"jsonrpc": "2.0", "id": pushed["id"],
                  "result": accepted(pushed["params"]["requestedSchema"])}
        with anyio.fail_after(5):
            refused = await http.post(replicas.url("modern"), headers=headers, json=answer)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["data"]["reason"] == "call_holder_gone", refused.text
