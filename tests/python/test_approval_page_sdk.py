"""An approver other than the caller (`approver = "approvers"`, issue 38), with the
official MCP Python SDK (mcp 2.3.0) as the caller's 2026-07-28 client: a call to the
demo server's `cancel_booking` is answered by the gateway with a URL-mode question,
which the SDK hands to the client's elicitation callback; the link leads to the
gateway's approval page on its admin listener, where a second HTTP client — the
approver, with an API key the rule names — reads the call and decides. The caller's
retry waits for that decision: approved, the call reaches the server; declined, the
gateway refuses it with `approval_declined` and the server never sees it.
"""

from __future__ import annotations

import hashlib
import json
import re
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
ALICE = "pcl_alice-interop-key-0123456789abcdef"
BOB = "pcl_bob-interop-key-0123456789abcdef"


def hashed(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


EXTRA = f"""
[[auth]]
name = "keys"
type = "api_key"
[[auth.key]]
principal = "alice"
hash = "{hashed(ALICE)}"
[[auth.key]]
principal = "bob"
hash = "{hashed(BOB)}"

[[route]]
path = "/second"
upstream = "rooms"
auth = ["keys"]

[[route.approval]]
name = "second-pair"
tools = ["cancel_booking"]
approver = "approvers"
approvers = ["bob"]
timeout = "30s"
"""


@pytest.fixture(scope="module")
def paged():
    with demo_server() as demo, gateway({"rooms": demo}, extra=EXTRA) as gw:
        yield gw


class Approver:
    """The second person: reads the page the link leads to, and decides."""

    def __init__(self, decision: str) -> None:
        self.decision = decision
        self.pages: list[str] = []
        self.links: list[types.ElicitRequestURLParams] = []

    async def __call__(self, context, params):
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.links.append(params)
        async with httpx2.AsyncClient() as http:
            # The caller is not an approver of this rule.
            mine = await http.get(params.url, headers={"Authorization": f"Bearer {ALICE}"})
            assert mine.status_code == 403, mine.text
            page = await http.get(params.url, headers={"Authorization": f"Bearer {BOB}"})
            assert page.status_code == 200, page.text
            self.pages.append(page.text)
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
            decided = await http.post(
                params.url,
                headers={"Authorization": f"Bearer {BOB}"},
                data={"csrf": csrf, "decision": self.decision},
            )
            assert decided.status_code == 200, decided.text
        # The caller opened the link: the retry waits for (or finds) the decision.
        return types.ElicitResult(action="accept")


class Wire:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def on_request(self, request: httpx2.Request) -> None:
        self.bodies.append(json.loads(request.content))

    def calls(self) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b.get("method") == "tools/call"]


async def call(gw, approver: Approver) -> tuple[Any, Wire]:
    wire = Wire()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    http.event_hooks["request"].append(wire.on_request)
    async with http:
        async with Client(streamable_http_client(gw.at("/second"), http_client=http), elicitation_callback=approver) as c:
            try:
                return await c.call_tool("cancel_booking", CANCEL), wire
            except MCPError as refused:
                return refused, wire


async def test_the_approver_approves_on_the_page_and_the_call_goes_through(paged):
    approver = Approver("approve")
    result, wire = await call(paged, approver)
    assert isinstance(result, types.CallToolResult), result
    assert not result.is_error, result
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    assert "Cancelled the booking of nook" in text
    [link] = approver.links
    assert link.url.startswith(paged.admin + "/approvals/"), link.url
    assert '"cancel_booking"' in link.message and "nook" not in link.message
    [page] = approver.pages
    assert "cancel_booking" in page and "nook" in page and "alice" in page
    first, retry = wire.calls()
    assert retry["params"]["inputResponses"][KEY] == {"action": "accept"}
    assert retry["params"]["arguments"] == first["params"]["arguments"] == CANCEL


async def test_the_approver_declines_and_the_call_is_refused(paged):
    approver = Approver("decline")
    refused, wire = await call(paged, approver)
    assert isinstance(refused, MCPError), refused
    assert refused.error.data["reason"] == "approval_declined", refused.error
    assert refused.error.data["rule"] == "second-pair"
    assert len(wire.calls()) == 2, "asked once, retried once, nothing more"
