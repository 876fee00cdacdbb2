"""One gateway in front of scripted servers, and a client that talks through it.

A `Session` starts the scripted servers and a gateway whose one route `/mcp`
leads to them (a plain route for one server, a federated one for several),
and records what each request did: refused by the gateway, delivered
otherwise than the server sent it, forwarded with other arguments than the
client sent. `finish()` adds what the gateway recorded (audit trail, metrics)
and stops everything.
"""

from __future__ import annotations

import re
from typing import Any

from .client import Client, Reply
from .gateway import Gateway, RouteConf, UpstreamConf
from .observe import Outcome, audit_signals, differences, metric_signals, normalize, provenance_verdicts
from .upstream import ServerScript, Upstream

ROUTE = "/mcp"


class HarnessError(RuntimeError):
    """The scripted side failed (never scored as something the gateway did)."""


def slug(name: str, taken: set[str]) -> str:
    """An upstream id and federated prefix for a server name: a-z first, then up
    to 31 of a-z 0-9 -."""
    s = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "server"
    if not s[0].isalpha():
        s = "s" + s
    s = s[:32].rstrip("-")
    base, n = s, 2
    while s in taken:
        s = f"{base[:29]}-{n}"
        n += 1
    taken.add(s)
    return s


# `upstream_*` reasons that are the gateway's decision about the server (its
# identity), not a failure to reach it.
UPSTREAM_VERDICTS = {"upstream_identity_mismatch"}


class Session:
    def __init__(self, servers: list[ServerScript], policy: str = "untrusted", federated: bool | None = None,
                 tls: tuple[str, str] | None = None, ca_file: str | None = None, extra_config: str = "",
                 client_headers: dict[str, str] | None = None, upstream_extra: dict[str, Any] | None = None):
        self.up = Upstream(tls=tls)
        self.outcome = Outcome()
        self.federated = len(servers) > 1 if federated is None else federated
        taken: set[str] = set()
        self.ids: dict[str, str] = {}
        confs = []
        for script in servers:
            self.up.add(script)
            uid = slug(script.name, taken)
            self.ids[script.name] = uid
            authority = f"localhost:{self.up.port}" if tls else None
            confs.append(UpstreamConf(id=uid, name=script.name, url=self.up.url(script.name, authority),
                                      policy=policy, ca_file=ca_file, extra=dict(upstream_extra or {})))
        self.scripts = {s.name: s for s in servers}
        route = RouteConf(ROUTE, [c.id for c in confs], name="bench" if self.federated else None)
        try:
            self.gw = Gateway(confs, [route], extra_config)
        except BaseException:
            self.up.close()
            raise
        self.client = Client(self.gw.url(ROUTE), headers=client_headers)
        self.request_ids: list[str] = []

    # --- names on a federated route ---------------------------------------------------

    def exposed(self, server: str, tool: str) -> str:
        return f"{self.ids[server]}_{tool}" if self.federated else tool

    # --- requests -------------------------------------------------------------------------

    def send(self, method: str, params: dict[str, Any] | None = None) -> Reply:
        reply = self.client.request(method, params)
        if rid := reply.headers.get("x-request-id"):
            self.request_ids.append(rid)
        if reply.reason and reply.reason.startswith("upstream_") and reply.reason not in UPSTREAM_VERDICTS:
            # the gateway could not talk to the scripted server: the harness failed, not a policy
            raise HarnessError(f"{method}: {reply.reason}: {reply.error}\n{self.gw.log_text()[-2000:]}")
        if reply.reason:
            self.outcome.refused.append(f"{method}:{reply.reason}")
        elif reply.status >= 400 and reply.error is None:
            self.outcome.refused.append(f"{method}:http {reply.status}")
        self.outcome.recorded += provenance_verdicts(reply.message)
        return reply

    def list_tools(self) -> Reply:
        """`tools/list` through the gateway, compared item by item with what each
        server listed (on a federated route, under its exposed name)."""
        marks = {name: len(s.sent) for name, s in self.scripts.items()}
        reply = self.send("tools/list")
        if reply.result is None:
            return reply
        expected: dict[str, Any] = {}
        for name, script in self.scripts.items():
            listed = [r for r in script.sent[marks[name]:] if "tools" in r]
            for tool in (listed[-1]["tools"] if listed else []):
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    expected[self.exposed(name, tool["name"])] = {**tool, "name": self.exposed(name, tool["name"])}
        delivered = {t.get("name"): t for t in reply.result.get("tools") or [] if isinstance(t, dict)}
        for name, tool in expected.items():
            if name not in delivered:
                self.outcome.changed.append(f"tools/list:{name} removed")
                continue
            diffs = differences(normalize(tool), normalize(delivered[name]), f"tools[{name}]", limit=3)
            if diffs:
                self.outcome.changed.append("tools/list:" + "; ".join(diffs))
        for name in delivered:
            if name not in expected:
                self.outcome.changed.append(f"tools/list:{name} added")
        return reply

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Reply:
        """`tools/call` through the gateway: refused, forwarded otherwise than
        sent, or its result delivered otherwise than the server sent it."""
        script = self.scripts[server]
        calls_before = len(script.calls())
        sent_before = len(script.sent)
        reply = self.send("tools/call", {"name": self.exposed(server, tool), "arguments": arguments})
        arrived = script.calls()[calls_before:]
        if arrived:
            got = arrived[0].params
            if got.get("name") != tool:
                self.outcome.changed.append(f"tools/call:name {tool!r} -> {got.get('name')!r}")
            diffs = differences(arguments, got.get("arguments"), "arguments", limit=4)
            if diffs:
                self.outcome.changed.append("tools/call:" + "; ".join(diffs))
        elif not reply.reason:
            self.outcome.notes.append(f"{tool}: not forwarded (status {reply.status})")
        results = script.sent[sent_before:]
        if results and reply.result is not None:
            diffs = differences(normalize(results[0]), normalize(reply.result), "result", limit=4)
            if diffs:
                self.outcome.changed.append("tools/call:" + "; ".join(diffs))
        return reply

    def discover(self, server: str) -> Reply:
        script = self.scripts[server]
        sent_before = len(script.sent)
        reply = self.send("server/discover")
        results = script.sent[sent_before:]
        if results and reply.result is not None and not self.federated:
            diffs = differences(normalize(results[0]), normalize(reply.result), "discover", limit=4)
            if diffs:
                self.outcome.changed.append("server/discover:" + "; ".join(diffs))
        return reply

    # --- the end ----------------------------------------------------------------------------

    def finish(self) -> Outcome:
        try:
            self.outcome.recorded += audit_signals(self.gw.audit_events())
            self.outcome.recorded += metric_signals(self.gw.metrics())
        finally:
            self.close()
        return self.outcome

    def close(self) -> None:
        self.client.close()
        self.gw.stop()
        self.up.close()


def result_text(reply: Reply) -> str:
    """The text a model reads of a delivered tool result ("" for a refusal)."""
    result = reply.result or {}
    parts = []
    for block in result.get("content") or []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)
