"""The approval page across replicas (`approver = "approvers"`, issue 38): two gateway
processes sharing one real Redis (`[state] single_use_backend = "redis"`) and one set of
state keys. The caller's call waits on replica A; the approver uses replica B's page —
the approval is listed and shown there (its facts kept in Redis by A), and the decision
taken there is handed to A through the relay, where the call waits and goes on. The
caller is the official MCP Python SDK (mcp 2.3.0) in both generations.

A 2026-07-28 caller's retry may reach B (round robin): B waits for the decision on A
through the relay, then forwards the call itself. When A dies while the call waits, the
retry reaching B is refused `call_holder_gone` at once; B's page still shows the approval
until it expires, but a decision is refused at once (410: the gateway holding the call is
gone), and the approval is no longer listed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from cluster import Replica, redis_server, replica, replica_config
from interop_peers import demo_server, keygen

pytestmark = pytest.mark.anyio

ALICE = "pcl_alice-replicas-page-0123456789abcdef"
BOB = "pcl_bob-replicas-page-0123456789abcdef"
CANCEL = {"room_id": "nook", "day": "2026-09-17", "hour": 9}
KEY = "dev.portcullis/approval"
MODERN = "2026-07-28"
PROMPTLY_S = 5.0


def hashed(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def routes(demo: str) -> str:
    return f"""
[[auth]]
name = "keys"
type = "api_key"
[[auth.key]]
principal = "alice"
hash = "{hashed(ALICE)}"
[[auth.key]]
principal = "bob"
hash = "{hashed(BOB)}"

[[upstream]]
id = "rooms"
name = "Replicated rooms"
url = "{demo}"

[[route]]
path = "/second"
upstream = "rooms"
auth = ["keys"]

[[route.approval]]
name = "second-pair"
tools = ["cancel_booking"]
approver = "approvers"
approvers = ["bob"]
timeout = "60s"
"""


def without_rate_limits(config: str) -> str:
    """The cluster's replica config, its rate limits left out (every call here is one
    caller's, more than their burst)."""
    return re.sub(r"\[rate_limits\]\n(?:[^\[\n][^\n]*\n)*", "", config)


@dataclass
class Pair:
    a: Replica
    b: Replica
    body: str
    keys: str


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with demo_server() as demo, redis_server() as redis:
        body, keys = without_rate_limits(replica_config(redis, routes(demo), "127.0.0.1")), keygen("pages")
        with replica(body, keys) as a, replica(body, keys) as b:
            yield Pair(a, b, body, keys)


BOB_AUTH = {"authorization": f"Bearer {BOB}"}


def on(replica: Replica, link: str) -> str:
    """The link, on `replica`'s admin listener."""
    return replica.admin + re.sub(r"^https?://[^/]+", "", link)


async def listed(http: httpx2.AsyncClient, replica: Replica) -> list[str]:
    page = await http.get(replica.admin + "/approvals", headers=BOB_AUTH)
    assert page.status_code == 200, page.text
    return re.findall(r'href="/approvals/([^"]+)"', page.text)


async def decide(http: httpx2.AsyncClient, url: str, decision: str, csrf: str | None = None) -> httpx2.Response:
    if csrf is None:
        page = await http.get(url, headers=BOB_AUTH)
        assert page.status_code == 200, page.text
        assert "alice" in page.text and "cancel_booking" in page.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return await http.post(url, headers=BOB_AUTH, data={"csrf": csrf, "decision": decision})


class OtherReplica:
    """The approver, on replica B's page: the approval is listed there, a token not the
    page's own is refused (checked by A), then `decision` is taken."""

    def __init__(self, pair: Pair, decision: str) -> None:
        self.pair, self.decision = pair, decision
        self.links: list[str] = []
        self.decided = False

    async def __call__(self, context, params):
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.links.append(params.url)
        await self.on_page(params)
        self.decided = True
        return types.ElicitResult(action="accept")

    async def on_page(self, params: types.ElicitRequestURLParams) -> None:
        assert params.url.startswith(self.pair.a.admin), "the link names the replica that asked"
        here = on(self.pair.b, params.url)
        async with httpx2.AsyncClient(timeout=10) as http:
            assert here.rsplit("/", 1)[1] in await listed(http, self.pair.b)
            forged = await decide(http, here, self.decision, csrf="not-the-pages-token")
            assert forged.status_code == 403, forged.text
            decided = await decide(http, here, self.decision)
            assert decided.status_code == 200, decided.text
            assert await listed(http, self.pair.b) == [], "decided: listed nowhere"
            assert await listed(http, self.pair.a) == []


async def call_on_a(pair: Pair, mode: str, approver: OtherReplica) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    async with http:
        transport = streamable_http_client(pair.a.base + "/second", http_client=http)
        async with Client(transport, mode=mode, elicitation_callback=approver) as c:
            try:
                with anyio.fail_after(30):
                    return await c.call_tool("cancel_booking", CANCEL)
            except MCPError as refused:
                return refused


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_approved_on_another_replicas_page(pair, mode):
    approver = OtherReplica(pair, "approve")
    result = await call_on_a(pair, mode, approver)
    assert isinstance(result, types.CallToolResult), result
    assert not result.is_error, result
    assert "Cancelled the booking of nook" in result.content[0].text
    assert len(approver.links) == 1 and approver.decided


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_declined_on_another_replicas_page(pair, mode):
    approver = OtherReplica(pair, "decline")
    refused = await call_on_a(pair, mode, approver)
    assert approver.decided, "declined on B's page (not by the caller's client)"
    assert isinstance(refused, MCPError), refused
    assert refused.error.data["reason"] == "approval_declined", refused.error
    assert refused.error.data["rule"] == "second-pair"


HEADERS = {
    "authorization": f"Bearer {ALICE}",
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "cancel_booking",
}
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
}


def tools_call(**extra) -> dict:
    params = {"name": "cancel_booking", "arguments": CANCEL, "_meta": META, **extra}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


@pytest.mark.parametrize("decision, outcome", [("approve", "result"), ("decline", "approval_declined")])
async def test_a_retry_reaching_another_replica_waits_for_the_decision_there(pair, decision, outcome):
    """Round robin: the call asked on A, the caller's retry on B while nobody has decided
    yet; the approver decides on A's page; B, waiting on A through the relay, goes on."""
    async with httpx2.AsyncClient(timeout=30) as http:
        asked = (await http.post(pair.a.base + "/second", headers=HEADERS, json=tools_call())).json()["result"]
        link = asked["inputRequests"][KEY]["params"]["url"]
        retry = tools_call(requestState=asked["requestState"], inputResponses={KEY: {"action": "accept"}})
        answers: list[httpx2.Response] = []

        async def retry_on_b() -> None:
            answers.append(await http.post(pair.b.base + "/second", headers=HEADERS, json=retry))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(retry_on_b)
                await anyio.sleep(0.5)
                assert answers == [], "the retry waits for the decision"
                decided = await decide(http, on(pair.a, link), decision)
                assert decided.status_code == 200, decided.text
    [answer] = answers
    body = answer.json()
    if outcome == "result":
        assert "Cancelled the booking of nook" in body["result"]["content"][0]["text"], body
    else:
        assert body["error"]["data"]["reason"] == outcome, body


async def test_a_decision_for_a_dead_replicas_call_is_refused_at_once(pair):
    """Last: it kills replica A."""
    async with httpx2.AsyncClient(timeout=10) as http:
        asked = (await http.post(pair.a.base + "/second", headers=HEADERS, json=tools_call())).json()["result"]
        link = asked["inputRequests"][KEY]["params"]["url"]
        here = on(pair.b, link)
        shown = await http.get(here, headers=BOB_AUTH)
        assert shown.status_code == 200, shown.text
        pair.a.kill()
        retry = tools_call(requestState=asked["requestState"], inputResponses={KEY: {"action": "accept"}})
        with anyio.fail_after(PROMPTLY_S):
            lost = await http.post(pair.b.base + "/second", headers=HEADERS, json=retry)
        assert lost.json()["error"]["data"]["reason"] == "call_holder_gone", lost.text
        with anyio.fail_after(PROMPTLY_S):
            refused = await decide(http, here, "approve")
        assert refused.status_code == 410, refused.text
        assert "gone" in refused.text
        assert await listed(http, pair.b) == [], "a lost call is no longer listed"
