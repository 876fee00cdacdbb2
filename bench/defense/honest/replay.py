"""Replay honest tool calls through the real gateway and count what it did to them.

Cases (sources.py) are packed into scripted servers — a server lists the tools
of the cases it holds, never two different definitions under one name, at
most MAX_TOOLS tools (a real-world recording is one server, as recorded) —
each behind its own route of one gateway with the policy under test. Per
server the client lists the tools once, then makes every call, each tagged
with a header so the harness finds what reached the server. A call is

- `refused`: the gateway answered with its own refusal (`data.reason`), or
  did not forward it;
- `changed`: it reached the server with other arguments or another name;
- `result changed`: the server's (neutral) result reached the client altered;
- `flagged`: delivered as sent, but the gateway recorded a verdict about it
  (audit trail, provenance);
- `ok` otherwise.

A call whose arguments do not fit the benchmark's own schema (checked with the
`jsonschema` package) is not sent: the gateway would be right to refuse it.
What a listing did to a tool (removed from the list the model sees) is counted
apart, with the verdict that removed it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import json
import queue
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.client import Client, Reply  # noqa: E402
from harness.gateway import Gateway, RouteConf, UpstreamConf  # noqa: E402
from harness.observe import audit_signals, differences, normalize, provenance_verdicts  # noqa: E402
from harness.upstream import NEUTRAL_RESULT, TAG_HEADER, ServerScript, Upstream  # noqa: E402

from sources import Call, Case  # noqa: E402

MAX_TOOLS = 64
WORKERS = 4

try:
    import jsonschema  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - the script says how to get it
    jsonschema = None


@dataclass
class Server:
    source: str
    group: str
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    def fits(self, case: Case) -> bool:
        new = [t for t in case.tools if t["name"] not in self.tools]
        if len(self.tools) + len(new) > MAX_TOOLS and self.tools:
            return False
        return all(self.tools.get(t["name"], t) == t for t in case.tools)

    def add(self, case: Case) -> None:
        for t in case.tools:
            self.tools.setdefault(t["name"], t)
        self.calls += case.calls


def pack(cases: Iterable[Case], one_server_per_case: bool = False) -> list[Server]:
    servers: list[Server] = []
    open_by_group: dict[tuple[str, str], list[Server]] = collections.defaultdict(list)
    for case in cases:
        case.tools = [t for t in case.tools if isinstance(t.get("name"), str)]
        if one_server_per_case:
            s = Server(case.source, case.group)
            s.add(case)
            servers.append(s)
            continue
        bucket = open_by_group[(case.source, case.group)]
        target = next((s for s in bucket if s.fits(case)), None)
        if target is None:
            target = Server(case.source, case.group)
            bucket.append(target)
            servers.append(target)
        target.add(case)
    return servers


def check_call(call: Call, tools: dict[str, dict[str, Any]]) -> str | None:
    """Why a call is not an honest call of this listing (None: it is)."""
    tool = tools.get(call.tool)
    if tool is None:
        return "calls a tool the case does not list"
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return "the tool has no inputSchema"
    if jsonschema is None:
        raise RuntimeError("the jsonschema package is needed (.venv/bin/python has it)")
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        errors = list(itertools.islice(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(call.arguments), 1))
    except (jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError, TypeError, ValueError) as e:
        return f"its schema cannot be used: {type(e).__name__}"
    except Exception as e:  # noqa: BLE001 - a schema the validator chokes on is the source's, not ours
        return f"its schema cannot be used: {type(e).__name__}"
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
        return f"does not fit its own schema at {where} ({errors[0].validator})"
    return None


@dataclass
class CallResult:
    source: str
    group: str
    tool: str
    origin: str
    outcome: str  # ok | refused | changed | result_changed | flagged | skipped
    detail: str = ""
    request_id: str | None = None


@dataclass
class ListingResult:
    source: str
    group: str
    listed: int
    removed: list[str]
    verdicts: list[str]
    refused: str | None = None


def replay(servers: list[Server], policy: str, workers: int = WORKERS) -> tuple[list[CallResult], list[ListingResult]]:
    up = Upstream()
    scripts: list[ServerScript] = []
    confs, routes = [], []
    for i, s in enumerate(servers):
        sid = f"h{i}"
        script = up.add(ServerScript(sid, tools=list(s.tools.values()), results={}))
        scripts.append(script)
        confs.append(UpstreamConf(id=sid, name=f"{s.source} {s.group} #{i}", url=up.url(sid), policy=policy))
        routes.append(RouteConf(f"/u/{sid}", [sid]))
    # Real servers' lists can be large: the body limit is not what is measured here.
    extra = "\n[limits]\nmax_response_body_bytes = 67108864\nmax_request_body_bytes = 8388608\n"
    calls: list[CallResult] = []
    listings: list[ListingResult] = []
    try:
        gw = Gateway(confs, routes, extra)
    except BaseException:
        up.close()
        raise
    try:
        jobs = []
        for i, (s, script) in enumerate(zip(servers, scripts)):
            client = Client(gw.url(f"/u/h{i}"))
            listings.append(list_once(client, s))
            client.close()
            for call in s.calls:
                jobs.append((i, s, script, call))
        tags = itertools.count(1)
        clients: "queue.Queue[_Clients]" = queue.Queue()
        pools = [_Clients(gw) for _ in range(workers)]
        for p in pools:
            clients.put(p)

        def run(job: tuple[int, Server, ServerScript, Call]) -> CallResult:
            i, s, script, call = job
            why = check_call(call, s.tools)
            if why:
                return CallResult(s.source, s.group, call.tool, call.origin, "skipped", why)
            pool = clients.get()
            try:
                return one_call(pool[i], s, script, call, str(next(tags)))
            finally:
                clients.put(pool)

        with concurrent.futures.ThreadPoolExecutor(workers) as ex:
            calls = list(ex.map(run, jobs))
        for p in pools:
            p.close()
        flag_from_audit(calls, gw.audit_events())
    finally:
        gw.stop()
        up.close()
    return calls, listings


class _Clients(dict):
    """One keep-alive client per route, made when first used."""

    def __init__(self, gw: Gateway):
        super().__init__()
        self.gw = gw

    def __missing__(self, i: int) -> Client:
        c = Client(self.gw.url(f"/u/h{i}"))
        self[i] = c
        return c

    def close(self) -> None:
        for c in self.values():
            c.close()


def list_once(client: Client, s: Server) -> ListingResult:
    reply = client.request("tools/list")
    if reply.result is None:
        return ListingResult(s.source, s.group, len(s.tools), [], [], refused=reply.reason or f"http {reply.status}")
    delivered = {t.get("name") for t in reply.result.get("tools") or [] if isinstance(t, dict)}
    removed = [n for n in s.tools if n not in delivered]
    return ListingResult(s.source, s.group, len(s.tools), removed, provenance_verdicts(reply.message))


def one_call(client: Client, s: Server, script: ServerScript, call: Call, tag: str) -> CallResult:
    reply: Reply = client.request("tools/call", {"name": call.tool, "arguments": call.arguments},
                                  headers={TAG_HEADER: tag})
    rid = reply.headers.get("x-request-id")
    base = dict(source=s.source, group=s.group, tool=call.tool, origin=call.origin, request_id=rid)
    if reply.reason:
        return CallResult(**base, outcome="refused", detail=reply.reason)
    with script.lock:
        arrived = script.tagged.get(tag)
    if arrived is None:
        return CallResult(**base, outcome="refused", detail=f"not forwarded (http {reply.status})")
    diffs = differences(call.arguments, arrived.params.get("arguments"), "arguments", limit=4)
    if arrived.params.get("name") != call.tool:
        diffs.insert(0, "name changed")
    if diffs:
        return CallResult(**base, outcome="changed", detail="; ".join(diffs))
    expected = dict(NEUTRAL_RESULT, resultType="complete")
    if reply.result is None or differences(normalize(expected), normalize(reply.result), "result"):
        return CallResult(**base, outcome="result_changed",
                          detail="; ".join(differences(normalize(expected), normalize(reply.result or {}), "result")))
    marks = provenance_verdicts(reply.message)
    if marks:
        return CallResult(**base, outcome="flagged", detail=", ".join(marks))
    return CallResult(**base, outcome="ok")


def flag_from_audit(calls: list[CallResult], events: list[dict[str, Any]]) -> None:
    by_request: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in events:
        if isinstance(e.get("request_id"), str):
            by_request[e["request_id"]].append(e)
    for c in calls:
        if c.outcome != "ok" or not c.request_id:
            continue
        signals = audit_signals(by_request.get(c.request_id, []))
        if signals:
            c.outcome = "flagged"
            c.detail = ", ".join(dict.fromkeys(signals))


# --- reporting -------------------------------------------------------------------------------

COUNTED = ("refused", "changed", "result_changed")


def summarize(calls: list[CallResult], listings: list[ListingResult]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for c in calls:
        row = per.setdefault(c.source, {"sent": 0, "skipped": 0, "ok": 0, "flagged": 0, "refused": 0, "changed": 0,
                                        "result_changed": 0, "reasons": collections.Counter(),
                                        "skips": collections.Counter(), "examples": []})
        if c.outcome == "skipped":
            row["skipped"] += 1
            row["skips"][c.detail.split(" at ")[0]] += 1
            continue
        row["sent"] += 1
        row[c.outcome] += 1
        if c.outcome in COUNTED or c.outcome == "flagged":
            row["reasons"][f"{c.outcome}: {c.detail}"] += 1
            if len(row["examples"]) < 12 and c.outcome in COUNTED:
                row["examples"].append(f"{c.group} / {c.tool} ({c.origin}): {c.outcome}: {c.detail}")
    for lst in listings:
        row = per.setdefault(lst.source, {"sent": 0, "skipped": 0, "ok": 0, "flagged": 0, "refused": 0, "changed": 0,
                                          "result_changed": 0, "reasons": collections.Counter(),
                                          "skips": collections.Counter(), "examples": []})
        row["tools_listed"] = row.get("tools_listed", 0) + lst.listed
        row["tools_removed"] = row.get("tools_removed", 0) + len(lst.removed)
        row.setdefault("removed_tools", []).extend(f"{lst.group}: {name}" for name in lst.removed)
        row.setdefault("listing_verdicts", collections.Counter()).update(lst.verdicts)
        if lst.refused:
            row.setdefault("lists_refused", collections.Counter())[lst.refused] += 1
    for row in per.values():
        bad = sum(row[k] for k in COUNTED)
        row["refused_or_changed"] = bad
        row["rate"] = bad / row["sent"] if row["sent"] else 0.0
    return per


def render(summaries: dict[str, dict[str, Any]]) -> str:
    lines = ["| source | policy | calls sent | refused | changed | result changed | refused or changed | "
             "flagged only | skipped (answer outside its schema) | tools listed | removed from the listing |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for policy, per in summaries.items():
        for source, r in per.items():
            lines.append(f"| {source} | {policy} | {r['sent']} | {r['refused']} | {r['changed']} | "
                         f"{r['result_changed']} | {r['refused_or_changed']} ({r['rate'] * 100:.2f}%) | "
                         f"{r['flagged']} | {r['skipped']} | {r.get('tools_listed', 0)} | "
                         f"{r.get('tools_removed', 0)} |")
    lines.append("")
    for policy, per in summaries.items():
        for source, r in per.items():
            if r["reasons"]:
                lines.append(f"{source}, {policy}: reasons")
                for reason, n in r["reasons"].most_common(15):
                    lines.append(f"  {n:5d}  {reason[:200]}")
            if r.get("listing_verdicts"):
                lines.append(f"{source}, {policy}: listing verdicts")
                for v, n in r["listing_verdicts"].most_common(10):
                    lines.append(f"  {n:5d}  {v}")
            if r.get("removed_tools"):
                lines.append(f"{source}, {policy}: tools removed from the listing")
                for t in r["removed_tools"][:20]:
                    lines.append(f"         {t}")
            if r.get("lists_refused"):
                lines.append(f"{source}, {policy}: lists refused: {dict(r['lists_refused'])}")
            if r["skips"]:
                lines.append(f"{source}, {policy}: not sent")
                for why, n in r["skips"].most_common(6):
                    lines.append(f"  {n:5d}  {why}")
            if r["examples"]:
                lines.append(f"{source}, {policy}: examples")
                for e in r["examples"]:
                    lines.append(f"  {e[:220]}")
    return "\n".join(lines) + "\n"


def to_json(summaries: dict[str, dict[str, Any]]) -> str:
    def plain(v: Any) -> Any:
        if isinstance(v, collections.Counter):
            return dict(v.most_common())
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    return json.dumps(plain(summaries), indent=2) + "\n"
