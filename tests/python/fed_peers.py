"""The peers of the federation tests (issue 21): one gateway process whose routes
federate several real upstreams, and tiny upstreams of our own on the hostile
upstream's HTTP server (tests/python/hostile_upstream.py) for what the SDK servers
do not do: list in pages of two, answer slowly.

Routes of the gateway (`federation()`), each a `[[route]]` with `upstreams = [...]`:

- TEAM over the Python SDK server (prefix `py`), the TypeScript SDK v2 server
  (prefix: its id, `ts-v2`) and the demo server (`rooms`), named `team-tools`;
- PAGES over three pagers `pa`, `pb`, `pc` (5, 3 and 4 tools, two a page; every
  pager lists tools `t1`, `t2`, …, so the same name comes from three upstreams);
- FAULTS over the demo server, `dead` (a port nothing listens on) and `slow` (a
  pager that waits SLOW_S before every answer), `fanout_timeout = "1s"`.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from hostile_upstream import HostileUpstream, Request, Sleep, Step, json_body, result
from interop_peers import Gateway, demo_server, gateway, mcp_server

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TEAM, PAGES, FAULTS = "/fed/team", "/fed/pages", "/fed/faults"
TEAM_NAME = "team-tools"
# (upstream id, prefix) in config order, for TEAM.
TEAM_MEMBERS = [("python", "py"), ("ts-v2", "ts-v2"), ("rooms", "rooms")]
PAGERS = {"pa": 5, "pb": 3, "pc": 4}  # tools per pager
PAGE_SIZE = 2
FANOUT_TIMEOUT_S = 1.0
SLOW_S = 3.0  # longer than the fan-out timeout and than the slow upstream's response_timeout
PROVENANCE = "dev.portcullis/upstream"
FEDERATION = "dev.portcullis/federation"


def name_of(uid: str) -> str:
    """The configured display name of an upstream (what refusals and `_meta` name)."""
    return Gateway.upstream_name(uid)


class Pager:
    """A 2026-07-28 upstream of our own: `count` tools `t1…tN`, listed two a page with
    cursors only it issues; a call answers `<id>:<tool>`. Every cursor it handed out
    is kept, so a test can tell that what came back to it was its own, byte for byte."""

    def __init__(self, uid: str, count: int, delay: float = 0.0) -> None:
        self.uid, self.count, self.delay = uid, count, delay
        self.issued: set[str] = set()

    def cursor(self, start: int) -> str:
        return f"{self.uid}~from~{start}"

    def tools(self) -> list[str]:
        return [f"t{i + 1}" for i in range(self.count)]

    def __call__(self, req: Request) -> list[Step]:
        method = req.message.get("method") if isinstance(req.message, dict) else None
        steps: list[Step] = [Sleep(self.delay)] if self.delay else []
        return steps + json_body(result(req, json.dumps(self.answer(method, req.params))))

    def answer(self, method: str | None, params: dict) -> dict:
        if method == "server/discover":
            return {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": f"pager-{self.uid}", "version": "1"}},
                "ttlMs": 0,
                "cacheScope": "public",
            }
        if method == "tools/list":
            cursor = params.get("cursor")
            start = 0 if cursor is None else int(cursor.rsplit("~", 1)[1])
            names = self.tools()[start : start + PAGE_SIZE]
            page = {
                "resultType": "complete",
                "tools": [
                    {
                        "name": n,
                        "description": f"Tool {n} of pager {self.uid}.",
                        "inputSchema": {"type": "object", "properties": {}},
                    }
                    for n in names
                ],
                "ttlMs": 0,
                "cacheScope": "public",
            }
            if start + PAGE_SIZE < self.count:
                page["nextCursor"] = self.cursor(start + PAGE_SIZE)
                self.issued.add(page["nextCursor"])
            return page
        if method == "tools/call":
            text = f"{self.uid}:{params.get('name')}"
            return {"resultType": "complete", "content": [{"type": "text", "text": text}]}
        return {"resultType": "complete"}


def unused_port() -> int:
    """A loopback port nothing listens on (bound by the OS, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Federation:
    gateway: Gateway
    direct: dict[str, str]  # upstream id -> its own URL (TEAM's members)
    pagers: dict[str, Pager]  # pa, pb, pc, slow
    tiny: HostileUpstream

    def url(self, route: str) -> str:
        return self.gateway.at(route)


def _upstream(uid: str, url: str, **extra: str) -> str:
    lines = ["[[upstream]]", f'id = "{uid}"', f'name = "{name_of(uid)}"', f'url = "{url}"']
    lines += [f'{k} = "{v}"' for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def _route(path: str, members: list[str], **extra: str) -> str:
    lines = ["[[route]]", f'path = "{path}"', "upstreams = [" + ", ".join(f'"{m}"' for m in members) + "]"]
    lines += [f'{k} = "{v}"' for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def federation_config(direct: dict[str, str], tiny: HostileUpstream, dead_port: int) -> str:
    prefixes = dict(TEAM_MEMBERS)
    parts = [
        _upstream(uid, direct[uid], **({"prefix": prefixes[uid]} if prefixes[uid] != uid else {}))
        for uid, _ in TEAM_MEMBERS
    ]
    parts += [_upstream(uid, tiny.url(uid)) for uid in PAGERS]
    parts.append(_upstream("dead", f"http://127.0.0.1:{dead_port}/mcp", connect_timeout="1s"))
    parts.append(_upstream("slow", tiny.url("slow"), response_timeout="1s"))
    parts.append(_route(TEAM, [uid for uid, _ in TEAM_MEMBERS], name=TEAM_NAME))
    parts.append(_route(PAGES, list(PAGERS)))
    parts.append(_route(FAULTS, ["rooms", "dead", "slow"], fanout_timeout=f"{FANOUT_TIMEOUT_S:g}s"))
    return "\n".join(parts)


@contextmanager
def federation() -> Iterator[Federation]:
    """The three real servers, the tiny upstreams and one gateway with the three routes."""
    pagers = {uid: Pager(uid, n) for uid, n in PAGERS.items()}
    pagers["slow"] = Pager("slow", 2, delay=SLOW_S)
    tiny = HostileUpstream(dict(pagers)).start_in_thread()
    with ExitStack() as stack:
        direct = {
            "python": stack.enter_context(mcp_server("py_server.py")),
            "ts-v2": stack.enter_context(mcp_server("ts_v2_server.mjs")),
            "rooms": stack.enter_context(demo_server()),
        }
        gw = stack.enter_context(gateway({}, extra=federation_config(direct, tiny, unused_port())))
        yield Federation(gw, direct, pagers, tiny)
