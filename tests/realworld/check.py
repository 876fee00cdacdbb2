#!/usr/bin/env python3
"""Runs every recording of the corpus through the gateway's own policy.

Each recorded `result` (initialize.json, tools.json, prompts.json,
resources.json, templates.json) is wrapped as a JSON-RPC response and judged
by `portcullis explain --json --method METHOD` under a config whose upstream
uses the `untrusted` preset, then again under `trusted`. What the client
would receive is compared with what the server sent, string by string:

  refused     the whole message was refused (reason and rule)
  removed     listed items the client does not receive
  visible     strings whose text a person can see was changed (anything
              beyond removed invisible or control characters), or text
              fields dropped from an item that is still delivered
  invisible   strings that differ only by invisible/control characters
  flags       rule verdicts recorded without acting (flag, monitor)

Prints one row per server and totals, writes OUT/report.json and
OUT/report.md, and exits 1 when the threshold is broken under `untrusted`
(a refused message or a visible-text change), or when a server asked for
was not recorded; 0 otherwise. Standard library only.

Usage: check.py [--subset] [--out DIR] [--only ID,...] [--bin PATH] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import DEFAULT_OUT, LISTS, ROOT, add_selection_args, selected  # noqa: E402

PRESETS = ("untrusted", "trusted")
MESSAGES = [("initialize", "initialize.json", None)] + [(m, f, k) for m, (f, k) in LISTS.items()]
FLAG_ACTIONS = {"flag", "monitor"}

CONFIG = """# Written by tests/realworld/check.py: one upstream per preset, never contacted.
[[listener]]
name = "public"
address = "127.0.0.1:1"

[limits]
# Real lists are large (one recorded tools/list is ~1 MiB of JSON); the body
# limit is not what this corpus measures.
max_response_body_bytes = 67108864
"""

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_INVISIBLE_EXTRA = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2028", "\u2029"}


def invisible(c: str) -> bool:
    """A character a person does not see: controls (other than tab and line
    breaks), format characters (zero-width, bidi, tag characters, soft
    hyphen), variation selectors, Hangul fillers, line/paragraph separators."""
    if c in "\t\n\r":
        return False
    cat = unicodedata.category(c)
    if cat in ("Cc", "Cf"):
        return True
    o = ord(c)
    return 0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF or c in _INVISIBLE_EXTRA


def visible_text(s: str) -> str:
    return "".join(c for c in _ANSI.sub("", s) if not invisible(c))


def _has_text(v) -> bool:
    if isinstance(v, str):
        return bool(visible_text(v).strip())
    if isinstance(v, dict):
        return any(_has_text(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_text(x) for x in v)
    return False


def diff(orig, new, path: str, out: list[dict]) -> None:
    """Append every change between what was sent and what is received."""
    if isinstance(orig, str) and isinstance(new, str):
        if orig != new:
            kind = "invisible" if visible_text(orig) == visible_text(new) else "visible"
            out.append({"at": path, "kind": kind, "before": orig, "after": new})
        return
    if isinstance(orig, dict) and isinstance(new, dict):
        for k, v in orig.items():
            if k not in new:
                kind = "visible" if _has_text(v) else "structure"
                out.append({"at": f"{path}.{k}", "kind": kind, "before": v, "after": None})
            else:
                diff(v, new[k], f"{path}.{k}", out)
        for k in new:
            if k not in orig and k != "_meta":
                kind = "visible" if _has_text(new[k]) else "structure"
                out.append({"at": f"{path}.{k}", "kind": kind, "before": None, "after": new[k]})
        return
    if isinstance(orig, list) and isinstance(new, list):
        for i, (a, b) in enumerate(zip(orig, new)):
            diff(a, b, f"{path}[{i}]", out)
        if len(orig) != len(new):
            longer = orig[len(new):] if len(orig) > len(new) else new[len(orig):]
            kind = "visible" if _has_text(longer) else "structure"
            out.append({"at": f"{path}[{min(len(orig), len(new))}:]", "kind": kind, "before": None, "after": None})
        return
    if orig != new:
        kind = "visible" if _has_text(orig) or _has_text(new) else "structure"
        out.append({"at": path, "kind": kind, "before": orig, "after": new})


# What names an item of each list: resources are told apart by their `uri`
# (several may share a name), templates by `uriTemplate`, the rest by `name`.
IDENTITY_BY_KEY = {"tools": "name", "prompts": "name", "resources": "uri", "resourceTemplates": "uriTemplate"}


def identity(item, key: str) -> str:
    """The item's identity in its list, or "" when it has none."""
    field_name = IDENTITY_BY_KEY.get(key, "name")
    if isinstance(item, dict) and isinstance(item.get(field_name), str):
        return f"{field_name}={item[field_name]}"
    return ""


def match_items(sent: list, got: list, key: str) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Pairs (sent index, received index) of the same item, the sent items not
    received, and the received items not sent.

    Items are paired by identity; items sharing one identity (duplicates) are
    paired in their order, the k-th sent with the k-th received. Items without
    an identity are paired by position among themselves."""
    queues: dict[str, list[int]] = {}
    for j, item in enumerate(got):
        queues.setdefault(identity(item, key), []).append(j)
    pairs, removed = [], []
    for i, item in enumerate(sent):
        queue = queues.get(identity(item, key))
        if queue:
            pairs.append((i, queue.pop(0)))
        else:
            removed.append(i)
    added = sorted(j for q in queues.values() for j in q)
    return pairs, removed, added


def label(item, key: str, index: int) -> str:
    return identity(item, key) or f"#{index}"


def compare(result: dict, received: dict, key: str | None) -> tuple[list[str], list[dict]]:
    """(labels of removed items, changes) between sent and received."""
    changes: list[dict] = []
    if key is None:
        top = {k: v for k, v in result.items() if k != "_meta"}
        got = {k: v for k, v in received.items() if k != "_meta"}
        diff(top, got, "", changes)
        return [], changes
    sent_items = result.get(key) or []
    got_items = received.get(key) or []
    pairs, removed_at, added_at = match_items(sent_items, got_items, key)
    for i, j in pairs:
        diff(sent_items[i], got_items[j], f"{key}[{label(sent_items[i], key, i)}]", changes)
    for j in added_at:
        item = got_items[j]
        kind = "visible" if _has_text(item) else "structure"
        changes.append({"at": f"{key}[+{label(item, key, j)}]", "kind": kind, "before": None, "after": item})
    rest = {k: v for k, v in result.items() if k not in (key, "_meta")}
    got_rest = {k: v for k, v in received.items() if k not in (key, "_meta")}
    diff(rest, got_rest, "", changes)
    return [label(sent_items[i], key, i) for i in removed_at], changes


def explain(binary: str, config: Path, preset: str, method: str, message: bytes) -> dict:
    p = subprocess.run(
        [binary, "explain", "--config", str(config), "--upstream", preset, "--method", method, "--json", "-"],
        input=message,
        capture_output=True,
        timeout=300,
        check=False,
    )
    if p.returncode not in (0, 1):
        raise RuntimeError(f"explain exited {p.returncode}: {p.stderr.decode(errors='replace').strip()[:300]}")
    return json.loads(p.stdout)


def judge(binary: str, config: Path, preset: str, folder: Path) -> dict:
    """One server's row under one preset."""
    row = {"lists": 0, "items": 0, "refused": 0, "removed": 0, "visible": 0, "invisible": 0, "flags": 0}
    detail: dict = {"refusals": [], "removed": [], "changes": [], "flags": [], "errors": []}
    for method, name, key in MESSAGES:
        path = folder / name
        if not path.is_file():
            continue
        result = json.loads(path.read_text())
        row["lists"] += 1
        if key is not None:
            row["items"] += len(result.get(key) or [])
        message = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, ensure_ascii=False).encode()
        try:
            e = explain(binary, config, preset, method, message)
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as err:
            detail["errors"].append(f"{method}: {err}")
            continue
        for c in e.get("checks", []):
            if c.get("action") in FLAG_ACTIONS:
                row["flags"] += 1
                detail["flags"].append({"method": method, **c})
        received = e.get("client_receives") or {}
        if e.get("decision") == "refused" or "error" in received:
            row["refused"] += 1
            data = (received.get("error") or {}).get("data") or {}
            rule = data.get("injectionRule") or data.get("limit") or data.get("rule")
            detail["refusals"].append(
                {"method": method, "reason": data.get("reason"), "rule": rule, "key": data.get("key"),
                 "message": (received.get("error") or {}).get("message")}
            )
            continue
        got = received.get("result")
        if not isinstance(got, dict):
            detail["errors"].append(f"{method}: no result received")
            continue
        removed, changes = compare(result, got, key)
        row["removed"] += len(removed)
        detail["removed"] += [{"method": method, "item": r} for r in removed]
        for ch in changes:
            if ch["kind"] in ("visible", "invisible"):
                row[ch["kind"]] += 1
            detail["changes"].append({"method": method, **ch})
    return {"row": row, **detail}


def _excerpt(before, after, width: int = 70) -> tuple[str, str]:
    """The neighbourhood of the first difference, for the report."""
    b = before if isinstance(before, str) else json.dumps(before, ensure_ascii=False)
    a = after if isinstance(after, str) else json.dumps(after, ensure_ascii=False)
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    start = max(0, i - width // 2)

    def cut(s: str) -> str:
        return ascii(s[start:start + width])[1:-1]

    return cut(b), cut(a)


COLS = ("lists", "items", "refused", "removed", "visible", "invisible", "flags")


def table(rows: list[dict], preset: str) -> str:
    lines = [f"| server ({preset}) | " + " | ".join(COLS) + " | refused by |", "|" + "---|" * (len(COLS) + 2)]
    totals = dict.fromkeys(COLS, 0)
    for r in rows:
        j = r["presets"].get(preset)
        if j is None:
            lines.append(f"| {r['id']} | " + " | ".join("–" for _ in COLS) + f" | not recorded: {r.get('error', '')[:80]} |")
            continue
        for c in COLS:
            totals[c] += j["row"][c]
        by = ", ".join(sorted({f"{x['method']}: {x['reason']}/{x['rule']}" for x in j["refusals"]}))
        lines.append(f"| {r['id']} | " + " | ".join(str(j["row"][c]) for c in COLS) + f" | {by} |")
    recorded = sum(1 for r in rows if preset in r["presets"])
    lines.append(f"| **total: {recorded} servers** | " + " | ".join(f"**{totals[c]}**" for c in COLS) + " | |")
    return "\n".join(lines)


def write_gateway_config(path: Path) -> None:
    text = CONFIG
    for p in PRESETS:
        text += (
            f'\n[[upstream]]\nid = "{p}"\nname = "real-world corpus ({p})"\n'
            f'url = "http://127.0.0.1:9/mcp"\npolicy = "{p}"\n'
            f'\n[[route]]\npath = "/mcp/{p}"\nupstream = "{p}"\n'
        )
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_selection_args(ap)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the recordings (default {DEFAULT_OUT})")
    ap.add_argument("--bin", default=os.environ.get("PORTCULLIS_BIN", str(ROOT / "target" / "debug" / "portcullis")))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("REALWORLD_JOBS", "2")))
    ap.add_argument("--quiet", action="store_true", help="print totals only, not every server's row")
    args = ap.parse_args(argv)
    servers = selected(args)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="portcullis-realworld-check-") as tmp:
        config = Path(tmp) / "gateway.toml"
        write_gateway_config(config)
        lock = threading.Lock()
        done: list[str] = []

        def one(server) -> dict:
            folder = args.out / server.id
            row = {"id": server.id, "package": server.spec, "registry": server.registry, "presets": {}}
            try:
                status = json.loads((folder / "status.json").read_text())
            except (OSError, ValueError):
                status = {"ok": False, "error": "no recording"}
            row["recorded"] = bool(status.get("ok"))
            if status.get("error"):
                row["error"] = status["error"]
            if row["recorded"]:
                for preset in PRESETS:
                    row["presets"][preset] = judge(args.bin, config, preset, folder)
            with lock:
                done.append(server.id)
                if not args.quiet:
                    print(f"checked {len(done)}/{len(servers)} {server.id}", file=sys.stderr, flush=True)
            return row

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(one, servers))
    seconds = round(time.monotonic() - started, 1)

    def total(preset: str, col: str) -> int:
        return sum(r["presets"][preset]["row"][col] for r in rows if preset in r["presets"])

    missing = [r["id"] for r in rows if not r["recorded"]]
    errors = [(r["id"], e) for r in rows for p in r["presets"].values() for e in p["errors"]]
    report = {
        "servers": len(rows),
        "recorded": len(rows) - len(missing),
        "seconds": seconds,
        "binary": args.bin,
        "totals": {p: {c: total(p, c) for c in COLS} for p in PRESETS},
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    md = [f"# Real-world corpus through the policy ({report['recorded']} of {len(rows)} servers recorded)", ""]
    for p in PRESETS:
        md += [table(rows, p), ""]
    md += ["## Changes and refusals under `untrusted` (excerpts)", ""]
    for r in rows:
        j = r["presets"].get("untrusted")
        if not j:
            continue
        for x in j["refusals"]:
            md.append(f"- {r['id']} {x['method']} refused: {x['reason']} / {x['rule']} (item {x['key']})")
        for x in j["removed"]:
            md.append(f"- {r['id']} {x['method']} removed {ascii(x['item'])[1:-1]}")
        for ch in [c for c in j["changes"] if c["kind"] == "visible"][:5]:
            b, a = _excerpt(ch["before"], ch["after"])
            md.append(f"- {r['id']} {ch['method']} {ascii(ch['at'])[1:-1]}: `{b}` -> `{a}`")
    (args.out / "report.md").write_text("\n".join(md) + "\n")

    shown = table(rows, "untrusted")
    if args.quiet:
        shown = "\n".join(shown.splitlines()[:2] + shown.splitlines()[-1:])
    print(shown)
    t = report["totals"]
    for p in PRESETS:
        print(f"{p}: " + ", ".join(f"{c} {t[p][c]}" for c in COLS))
    for sid, e in errors:
        print(f"error: {sid}: {e}", file=sys.stderr)
    print(f"report: {args.out / 'report.md'} ({seconds}s)")
    bad = []
    if t["untrusted"]["refused"]:
        bad.append(f"{t['untrusted']['refused']} refused")
    if t["untrusted"]["visible"]:
        bad.append(f"{t['untrusted']['visible']} visible-text changes")
    if errors:
        bad.append(f"{len(errors)} explain errors")
    if missing:
        bad.append(f"{len(missing)} not recorded ({', '.join(missing[:5])}{'…' if len(missing) > 5 else ''})")
    failed = [
        r["id"]
        for r in rows
        if not r["recorded"]
        or r["presets"]["untrusted"]["errors"]
        or r["presets"]["untrusted"]["row"]["refused"]
        or r["presets"]["untrusted"]["row"]["visible"]
    ]
    print(f"realworld: {len(rows) - len(failed)} passed, {len(failed)} failed")
    if bad:
        print("realworld: threshold broken under untrusted: " + "; ".join(bad))
        return 1
    print("realworld: 0 refused, 0 visible-text changes under untrusted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
