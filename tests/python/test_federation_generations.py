"""A federated route over a server of each generation (issue 39), with the official Python
SDK client (mcp 2.3.0) in each of its generations: the demo server (`portcullis
demo-upstream`, rmcp, 2026-07-28 only) and the TypeScript SDK 1.x server
(tests/interop/servers/ts_v1_server.mjs, 2025-11-25 only) behind one route. The route
bridges whichever member does not speak the client's generation, so each client sees every
member's tools under their prefixes and each member's question reaches it in its own
generation: an `input_required` round for the 2026-07-28 client, a pushed
`elicitation/create` in the session for the 2025-11-25 one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from fed_peers import PROVENANCE, _route, _upstream, name_of
from interop_peers import demo_server, gateway, mcp_server
from test_federation import BOOKING, connect, unavailable

pytestmark = pytest.mark.anyio

MIXED = "/fed/mixed"
# (upstream id, prefix) in config order.
MEMBERS = [("rooms", "new"), ("v1", "old")]
PREFIX = dict(MEMBERS)


@pytest.fixture(scope="module")
def mixed() -> Iterator[str]:
    with ExitStack() as stack:
        urls = {"rooms": stack.enter_context(demo_server()), "v1": stack.enter_context(mcp_server("ts_v1_server.mjs"))}
        config = "\n".join([_upstream(uid, urls[uid], prefix=prefix) for uid, prefix in MEMBERS])
        config += "\n" + _route(MIXED, [uid for uid, _ in MEMBERS], name="mixed-tools")
        gw = stack.enter_context(gateway({}, extra=config))
        yield gw.at(MIXED)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_member_listed_and_called_in_either_generation(mixed, mode):
    # `connect` checks the client speaks the generation `mode` asks for.
    async with connect(mixed, mode=mode) as s:
        listing = await s.client.list_tools()
        echoed = await s.client.call_tool("old_echo", {"text": "across"})
    names = [t.name for t in listing.tools]
    assert {"new_book_room", "new_get_room", "old_book", "old_echo"} <= set(names), names
    assert unavailable(listing.meta) == {}, listing.meta
    for tool in listing.tools:
        uid = "rooms" if tool.name.startswith("new_") else "v1"
        assert tool.meta[PROVENANCE] == {"id": uid, "name": name_of(uid)}, tool
    assert [c.text for c in echoed.content] == ["across"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_each_members_question_reaches_the_client_in_its_generation(mixed, mode):
    async with connect(mixed, mode=mode) as s:
        old = await s.client.call_tool("old_book", {"hint": "the big room"})
        new = await s.client.call_tool("new_book_room", BOOKING)
    assert not old.is_error and not new.is_error, (old, new)
    assert len(s.asked) == 2, s.asked
    assert json.loads(old.content[0].text)["tool"] == "book", old
    assert new.structured_content["booked"] is True, new
    asked_by_push = [b for _, b in s.wire if "result" in b and "id" in b]
    retried = [b for _, b in s.wire if b.get("params", {}).get("inputResponses")]
    if mode == "legacy":
        # Answers to pushed requests, in the session; never a retry.
        assert len(asked_by_push) == 2 and not retried, s.wire
    else:
        # Retries carrying the answers; nothing pushed.
        assert len(retried) == 2 and not asked_by_push, s.wire
