"""The approval page (`approver = "approvers"`, issue 38) on the paths beside a plain
route, with the official MCP Python SDK (mcp 2.3.0) as the caller's client in each
generation it can use there:

- bridged: a 2025-11-25 session of the 2026-07-28-only demo server (`cancel_booking`),
  and a 2026-07-28 client of the TypeScript SDK 1.x server, which speaks only 2025-11-25
  (`echo`; it says what it received, so a refused call is seen never to reach it);
- federated: one route over the Python SDK server (prefix `py`) and the demo server,
  the rule naming the member's own tool (`echo`), the client calling `py_echo`;
- stdio: the Python SDK server run by the gateway as a program (`echo`).

The caller's client is given the page's link as a URL-mode question. Either the
approver (a second HTTP client with an API key the rule names) decides on the page and
the caller opens the link, or the caller declines or cancels the question itself and
nobody is asked. Approved, the call reaches its server under its own name; declined by
either, the gateway refuses it with `approval_declined` and the server never sees it.

The same paths (bridged to the 1.x-only server, federated, stdio) also carry the rule
that asks the caller itself: the client gets the gateway's form question in its own
generation and approves (the call goes on), or declines, cancels or leaves `approve`
unticked (refused `approval_declined`).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import urllib.request
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from interop_peers import INTEROP, Gateway, demo_server, gateway, mcp_server

pytestmark = pytest.mark.anyio

ALICE = "pcl_alice-paths-key-0123456789abcdef"
BOB = "pcl_bob-paths-key-0123456789abcdef"
CANCEL = {"room_id": "nook", "day": "2026-09-17", "hour": 9}
ECHO = {"text": "hello, approver"}
MODERN = "2026-07-28"


def hashed(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def rule(name: str, tool: str) -> str:
    return f"""
[[route.approval]]
name = "{name}"
tools = ["{tool}"]
approver = "approvers"
approvers = ["bob"]
timeout = "30s"
"""


def config(py: str, v1: str) -> str:
    stdio = [sys.executable, str(INTEROP / "servers" / "py_stdio_server.py")]
    command = "[" + ", ".join(f'"{part}"' for part in stdio) + "]"
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
id = "py"
name = "Interop py"
url = "{py}"

[[upstream]]
id = "v1"
name = "Interop v1"
url = "{v1}"

[[upstream]]
id = "local"
name = "Local py"
command = {command}

[[route]]
path = "/bridged"
upstream = "rooms"
auth = ["keys"]
{rule("bridged-pair", "cancel_booking")}
[[route]]
path = "/v1only"
upstream = "v1"
auth = ["keys"]
{rule("v1-pair", "echo")}
[[route]]
path = "/team"
upstreams = ["py", "rooms"]
auth = ["keys"]
{rule("team-pair", "echo")}
[[route]]
path = "/stdio"
upstream = "local"
auth = ["keys"]
{rule("stdio-pair", "echo")}
[[route]]
path = "/v1only-asks"
upstream = "v1"
auth = ["keys"]
{asks("v1-asks", "echo")}
[[route]]
path = "/team-asks"
upstreams = ["py", "rooms"]
auth = ["keys"]
{asks("team-asks", "echo")}
[[route]]
path = "/stdio-asks"
upstream = "local"
auth = ["keys"]
{asks("stdio-asks", "echo")}
"""


def asks(name: str, tool: str) -> str:
    """A rule under which the gateway asks the caller itself (a form question)."""
    return f"""
[[route.approval]]
name = "{name}"
tools = ["{tool}"]
timeout = "30s"
"""


@pytest.fixture(scope="module")
def paths():
    with (
        mcp_server("py_server.py") as py,
        mcp_server("ts_v1_flows_server.mjs") as v1,
        demo_server() as demo,
        gateway({"rooms": demo}, extra=config(py, v1)) as gw,
    ):
        yield Paths(gw, v1)


@dataclass
class Paths:
    gateway: Gateway
    v1: str  # the TypeScript SDK 1.x server's MCP URL

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gateway, name)

    def v1_calls(self) -> list[str]:
        """The tools the 1.x server was called for."""
        with urllib.request.urlopen(self.v1.removesuffix("/mcp") + "/received", timeout=5) as resp:
            return [r["name"] for r in json.loads(resp.read()) if r["method"] == "tools/call"]


# (route, tool the client calls, its arguments, the rule, what the server answers, eras)
PATHS = {
    "bridged": ("/bridged", "cancel_booking", CANCEL, "bridged-pair", "Cancelled the booking of nook", ["legacy"]),
    "v1only": ("/v1only", "echo", ECHO, "v1-pair", ECHO["text"], [MODERN, "legacy"]),
    "federated": ("/team", "py_echo", ECHO, "team-pair", ECHO["text"], [MODERN, "legacy"]),
    "stdio": ("/stdio", "echo", ECHO, "stdio-pair", ECHO["text"], [MODERN, "legacy"]),
}
CASES = [(path, era) for path, spec in PATHS.items() for era in spec[5]]


class Caller:
    """The person at the caller's client. `decision`: what the approver decides on
    the page the link leads to ("approve", "decline"), after which the caller opens
    the link; or what the caller answers the question itself ("decline", "cancel"),
    the page left alone."""

    def __init__(self, on_page: str | None, answer: str = "accept") -> None:
        self.on_page, self.answer = on_page, answer
        self.links: list[types.ElicitRequestURLParams] = []
        self.pages: list[str] = []

    async def __call__(self, context, params):
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.links.append(params)
        if self.on_page:
            await self.decide(params.url)
        return types.ElicitResult(action=self.answer)

    async def decide(self, url: str) -> None:
        async with httpx2.AsyncClient() as http:
            page = await http.get(url, headers={"Authorization": f"Bearer {BOB}"})
            assert page.status_code == 200, page.text
            self.pages.append(page.text)
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            decided = await http.post(
                url,
                headers={"Authorization": f"Bearer {BOB}"},
                data={"csrf": csrf, "decision": self.on_page},
            )
            assert decided.status_code == 200, decided.text


async def call(gw, path: str, era: str, caller: Caller) -> Any:
    route, tool, arguments, *_ = PATHS[path]
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    async with http:
        transport = streamable_http_client(gw.at(route), http_client=http)
        async with Client(transport, mode=era, elicitation_callback=caller) as c:
            assert c.protocol_version == (MODERN if era == MODERN else "2025-11-25")
            try:
                return await c.call_tool(tool, arguments)
            except MCPError as refused:
                return refused


async def waiting(gw) -> list[str]:
    """The approvals the page lists as waiting (their links)."""
    async with httpx2.AsyncClient() as http:
        page = await http.get(gw.admin + "/approvals", headers={"Authorization": f"Bearer {BOB}"})
    assert page.status_code == 200, page.text
    return re.findall(r'href="(/approvals/[^"]+)"', page.text)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("path, era", CASES)
async def test_approved_on_the_page_the_call_reaches_its_server(paths, path, era):
    caller = Caller("approve")
    result = await call(paths, path, era, caller)
    assert isinstance(result, types.CallToolResult), result
    assert not result.is_error, text_of(result)
    assert PATHS[path][4] in text_of(result)
    if path == "v1only":
        assert paths.v1_calls()[-1] == "echo", "the call reached the server under its own name"
    [link] = caller.links
    assert link.url.startswith(paths.admin + "/approvals/"), link.url
    [page] = caller.pages
    assert "alice" in page


@pytest.mark.parametrize("path, era", CASES)
async def test_declined_on_the_page_the_call_is_refused(paths, path, era):
    caller = Caller("decline")
    before = paths.v1_calls()
    refused = await call(paths, path, era, caller)
    assert paths.v1_calls() == before, "the server never saw the call"
    assert isinstance(refused, MCPError), refused
    assert refused.error.data["reason"] == "approval_declined", refused.error
    assert refused.error.data["rule"] == PATHS[path][3]
    assert len(caller.links) == 1


@pytest.mark.parametrize("answer", ["decline", "cancel"])
@pytest.mark.parametrize("path, era", CASES)
async def test_the_caller_declining_the_link_is_refused_and_nothing_waits(paths, path, era, answer):
    caller = Caller(None, answer)
    before = paths.v1_calls()
    refused = await call(paths, path, era, caller)
    assert paths.v1_calls() == before, "the server never saw the call"
    assert isinstance(refused, MCPError), refused
    assert refused.error.data["reason"] == "approval_declined", refused.error
    assert refused.error.data["rule"] == PATHS[path][3]
    assert len(caller.links) == 1
    assert await waiting(paths) == [], "the approval went with the call"


# The same paths with the gateway asking the caller itself (a form question, no page).
ASKS = {
    "v1only": ("/v1only-asks", "echo", ECHO, "v1-asks", ECHO["text"], [MODERN, "legacy"]),
    "federated": ("/team-asks", "py_echo", ECHO, "team-asks", ECHO["text"], [MODERN, "legacy"]),
    "stdio": ("/stdio-asks", "echo", ECHO, "stdio-asks", ECHO["text"], [MODERN, "legacy"]),
}
ASK_CASES = [(path, era) for path, spec in ASKS.items() for era in spec[5]]


class Answering:
    """The caller answering the gateway's own form question: `action`, and when it
    accepts, whether it ticks `approve`."""

    def __init__(self, action: str, approve: bool = True) -> None:
        self.action, self.approve = action, approve
        self.questions: list[types.ElicitRequestFormParams] = []

    async def __call__(self, context, params):
        assert isinstance(params, types.ElicitRequestFormParams), params
        self.questions.append(params)
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)


async def call_asking(gw, path: str, era: str, caller: Answering) -> Any:
    route, tool, arguments, *_ = ASKS[path]
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    async with http:
        transport = streamable_http_client(gw.at(route), http_client=http)
        async with Client(transport, mode=era, elicitation_callback=caller) as c:
            try:
                return await c.call_tool(tool, arguments)
            except MCPError as refused:
                return refused


@pytest.mark.parametrize("path, era", ASK_CASES)
async def test_the_caller_approves_the_gateways_own_question_on_every_path(paths, path, era):
    caller = Answering("accept")
    result = await call_asking(paths, path, era, caller)
    assert isinstance(result, types.CallToolResult), result
    assert not result.is_error, text_of(result)
    assert ASKS[path][4] in text_of(result)
    if path == "v1only":
        assert paths.v1_calls()[-1] == "echo", "the call reached the server under its own name"
    [question] = caller.questions
    assert question.requested_schema["required"] == ["approve"], question


@pytest.mark.parametrize("action, approve", [("accept", False), ("decline", True), ("cancel", True)])
@pytest.mark.parametrize("path, era", ASK_CASES)
async def test_the_caller_not_approving_on_every_path_is_refused(paths, path, era, action, approve):
    before = paths.v1_calls()
    refused = await call_asking(paths, path, era, Answering(action, approve))
    assert paths.v1_calls() == before, "the server never saw the call"
    assert isinstance(refused, MCPError), refused
    assert refused.error.data["reason"] == "approval_declined", refused.error
    assert refused.error.data["rule"] == ASKS[path][3]
