"""What the gateway did, read from what it leaves behind at run time.

- on the wire: a refusal (a JSON-RPC error with the gateway's `data.reason`),
  a message delivered otherwise than the upstream sent it, arguments that
  reached the upstream otherwise than the client sent them;
- recorded: verdicts in the provenance under `_meta`, audit trail events, and
  the verdict metrics of the admin listener.

`Outcome` collects both; `enforced` is a refusal or a change on the wire,
`detected` any of it.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

GATEWAY_META = "dev.portcullis/"

# Audit events that tell the story of an exchange without judging it.
STORY_EVENTS = {"input_required_received", "delivered", "retry_received", "forwarded", "operation_end"}
# Metric families that count what the gateway decided about a message.
VERDICT_FAMILY = re.compile(r"verdict|intent|listing_change|finding|flow|redact|argument|secret|egress|identity")
QUIET_OUTCOMES = {"ok", "client_cancelled"}


def normalize(message: Any) -> Any:
    """A message without the gateway's own `_meta` keys (at any depth), for
    comparing what a server sent with what a client got."""
    return _strip(copy.deepcopy(message))


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k == "_meta" and isinstance(x, dict):
                kept = {mk: _strip(mv) for mk, mv in x.items() if not mk.startswith(GATEWAY_META)}
                if kept:
                    out[k] = kept
                continue
            out[k] = _strip(x)
        return out
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


def differences(sent: Any, got: Any, path: str = "$", limit: int = 8) -> list[str]:
    """JSON paths where two (normalised) values differ; at most `limit`."""
    out: list[str] = []
    _diff(sent, got, path, out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a.keys()) + [k for k in b.keys() if k not in a]:
            if k not in a:
                out.append(f"{path}.{k} added")
            elif k not in b:
                out.append(f"{path}.{k} removed")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out, limit)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path} length {len(a)} -> {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out, limit)
        return
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                       and not isinstance(a, bool) and not isinstance(b, bool)):
        out.append(f"{path} type")
        return
    if a != b:
        out.append(f"{path} changed")


def provenance_verdicts(message: Any) -> list[str]:
    """Verdicts the gateway attached under `_meta["dev.portcullis/…"]` anywhere in
    a delivered message (rule/action[:intent]), and items it names as removed."""
    found: list[str] = []
    _walk_meta(message, found)
    return found


def _walk_meta(v: Any, found: list[str]) -> None:
    if isinstance(v, dict):
        meta = v.get("_meta")
        if isinstance(meta, dict):
            for k, x in meta.items():
                if not k.startswith(GATEWAY_META):
                    continue
                if k.endswith("/provenance"):
                    for p in x if isinstance(x, list) else [x]:
                        if isinstance(p, dict):
                            for verdict in p.get("verdicts") or []:
                                if isinstance(verdict, dict) and verdict.get("action") not in (None, "pass"):
                                    found.append(f"provenance:{verdict.get('rule')}/{verdict.get('action')}")
                elif k.endswith("/removed"):
                    for item in x if isinstance(x, list) else []:
                        if isinstance(item, dict):
                            found.append(f"removed:{item.get('kind')}:{item.get('reason')}")
        for x in v.values():
            _walk_meta(x, found)
    elif isinstance(v, list):
        for x in v:
            _walk_meta(x, found)


def audit_signals(events: list[dict[str, Any]], request_ids: set[str] | None = None) -> list[str]:
    """Audit events that judge something (a verdict, a refusal, a changed
    listing, any event of a kind not known to only tell the story)."""
    found = []
    for e in events:
        if request_ids is not None and e.get("request_id") not in request_ids:
            continue
        kind = str(e.get("event"))
        if kind in STORY_EVENTS:
            if kind == "delivered" and e.get("stripped"):
                found.append("audit:delivered/stripped")
            continue
        if kind == "policy_verdict":
            if e.get("action") == "pass":
                continue
            found.append(f"audit:policy_verdict:{e.get('rule')}/{e.get('action')}")
        elif kind == "refused":
            found.append(f"audit:refused:{e.get('reason')}")
        elif kind == "listing_changed":
            found.append(f"audit:listing_changed/{e.get('action')}")
        else:
            action = e.get("action") or e.get("outcome") or e.get("verdict")
            if action in ("pass", "ok"):
                continue
            found.append(f"audit:{kind}" + (f"/{action}" if action else ""))
    return found


def metric_signals(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> list[str]:
    """Counters of decisions: verdict families with a non-zero sample, and
    requests whose outcome was a refusal of the gateway's own."""
    found = []
    for (name, labels), value in sorted(samples.items()):
        if value <= 0 or not name.startswith("portcullis_"):
            continue
        lab = dict(labels)
        if name == "portcullis_requests_total":
            outcome = lab.get("outcome", "")
            if outcome not in QUIET_OUTCOMES and not outcome.startswith("upstream_"):
                found.append(f"metric:requests_total{{outcome={outcome}}}")
            continue
        if not name.endswith("_total") or not VERDICT_FAMILY.search(name):
            continue
        if lab.get("action") in ("pass", "ok") or lab.get("outcome") in ("pass", "ok"):
            continue
        shown = ",".join(f"{k}={v}" for k, v in sorted(lab.items()) if k not in ("upstream", "generation"))
        found.append(f"metric:{name.removeprefix('portcullis_')}{{{shown}}}")
    return found


@dataclass
class Outcome:
    """What the gateway did with one input: refusals and changes on the wire
    (enforced), and what it recorded (detected)."""

    refused: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def enforced(self) -> bool:
        return bool(self.refused or self.changed)

    @property
    def detected(self) -> bool:
        return self.enforced or bool(self.recorded)

    def verdict(self) -> dict[str, Any]:
        parts = []
        if self.refused:
            parts.append("refused: " + ", ".join(dict.fromkeys(self.refused)))
        if self.changed:
            parts.append("changed: " + ", ".join(dict.fromkeys(self.changed)))
        if self.recorded:
            parts.append("recorded: " + ", ".join(dict.fromkeys(self.recorded)))
        if self.notes:
            parts.append("; ".join(self.notes))
        return {"detect": self.detected, "enforce": self.enforced, "signal": " | ".join(parts) or "nothing"}
