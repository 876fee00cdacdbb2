"""A call waiting on the approval page (`approver = "approvers"`, issue 38) when its
gateway process ends. The pending approval lives in the process that asked: it dies with
it. What the caller's client gets must be a clear answer at once, never a wait for a
decision nobody can give:

- 2026-07-28: the caller's retry (its sealed `requestState` still opens: the restarted
  gateway has the same `[state]` keys) is refused `approval_expired`, its message saying
  the gateway that asked was restarted, and the page on the new process knows no such
  approval (404);
- 2025-11-25: the call's stream ends with the process; the official Python SDK's
  `call_tool` fails instead of waiting.
"""

from __future__ import annotations

import hashlib
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import _binary, bound_addresses
from interop_peers import Gateway, Process, _ready, _spawn, _wait, demo_server, keygen

pytestmark = pytest.mark.anyio

ALICE = "pcl_alice-restart-key-0123456789abcdef"
BOB = "pcl_bob-restart-key-0123456789abcdef"
CANCEL = {"room_id": "nook", "day": "2026-09-17", "hour": 9}
KEY = "dev.portcullis/approval"
MODERN = "2026-07-28"
PROMPTLY_S = 5.0


def hashed(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def config(demo: str) -> str:
    return f"""
[[listener]]
address = "127.0.0.1:0"
[admin]
address = "127.0.0.1:0"
[state]
keys_env = "PORTCULLIS_STATE_KEYS"

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
name = "Interop rooms"
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


@contextmanager
def running(body: str, keys: str) -> Iterator[tuple[Gateway, Process]]:
    """A gateway process (not a fixture: the tests end it themselves)."""
    args = [str(_binary()), "run", "--config", "gateway.toml"]
    with _spawn(args, {"PORTCULLIS_STATE_KEYS": keys}, {"gateway.toml": body}) as process:
        bound = bound_addresses(process.log_path, process.proc, ("listener", "admin"))
        _wait(process, lambda: _ready(f"http://{bound['admin']}/readyz"), "200 from /readyz")
        yield Gateway(f"http://{bound['listener']}", f"http://{bound['admin']}", process.log_path), process


@pytest.fixture(scope="module")
def upstream():
    with demo_server() as demo:
        yield config(demo), keygen("restart")


def call(arguments: dict, **extra) -> dict:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
    }
    params = {"name": "cancel_booking", "arguments": arguments, "_meta": meta, **extra}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


HEADERS = {
    "authorization": f"Bearer {ALICE}",
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "cancel_booking",
}


async def test_a_retry_after_a_restart_is_refused_at_once(upstream):
    body, keys = upstream
    async with httpx2.AsyncClient(timeout=30) as http:
        with running(body, keys) as (first, _):
            asked = (await http.post(first.at("/second"), headers=HEADERS, json=call(CANCEL))).json()["result"]
            assert asked["resultType"] == "input_required", asked
            link = asked["inputRequests"][KEY]["params"]["url"]
            path = re.sub(r"^https?://[^/]+", "", link)
        with running(body, keys) as (second, _):
            retry = call(CANCEL, requestState=asked["requestState"], inputResponses={KEY: {"action": "accept"}})
            with anyio.fail_after(PROMPTLY_S):
                refused = await http.post(second.at("/second"), headers=HEADERS, json=retry)
            page = await http.get(second.admin + path, headers={"authorization": f"Bearer {BOB}"})
    error = refused.json()["error"]
    assert error["data"]["reason"] == "approval_expired", error
    assert error["data"]["rule"] == "second-pair", error
    assert "restarted" in error["message"], error
    assert page.status_code == 404, page.text


async def test_a_session_call_ends_with_its_process(upstream):
    body, keys = upstream
    shown: list[types.ElicitRequestURLParams] = []
    with running(body, keys) as (gw, process):

        async def elicit(context, params):
            shown.append(params)
            # The gateway stops while the call waits for an approver.
            process.proc.send_signal(signal.SIGKILL)
            process.proc.wait(timeout=PROMPTLY_S)
            return types.ElicitResult(action="accept")

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
        async with http:
            with anyio.fail_after(PROMPTLY_S * 3), pytest.raises(Exception) as ended:
                async with Client(streamable_http_client(gw.at("/second"), http_client=http),
                                  mode="legacy", elicitation_callback=elicit) as c:
                    await c.call_tool("cancel_booking", CANCEL)
    assert len(shown) == 1 and isinstance(shown[0], types.ElicitRequestURLParams), shown
    # The SDK says the call's stream ended without its result.
    assert any("stream ended" in str(e) for e in leaves(ended.value)), repr(ended.value)


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in leaves(e)]
    return [error]
