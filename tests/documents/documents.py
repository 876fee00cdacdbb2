#!/usr/bin/env python3
"""Real documents returned as results, through the gateway's own policy.

Fetches the packages of documents.toml (fetch.py), then returns each text as a
`tools/call` text result and as `resources/read` contents through
`portcullis explain --json` under the `untrusted` and `trusted` presets, and
compares what the client would receive with what was sent (changes.py):
unchanged, changed only where an external image was, changed otherwise (by
class: link, html, code, invisible, escape, inserted, text), refused. Writes
OUT/report.json and OUT/report.md; prints the shares and the classes.

Exit 1 when fewer than --min-unchanged percent of the documents are delivered
unchanged apart from external images under either preset, or a document could
not be checked. Standard library only.

Usage: documents.py [--subset] [--out DIR] [--bin PATH] [--jobs N]
                    [--min-unchanged PCT] [--retry-failed] [--fetch-only]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import changes  # noqa: E402
import fetch  # noqa: E402

PRESETS = ("untrusted", "trusted")
CARRIERS = ("tools/call", "resources/read")
OUTCOMES = ("unchanged", "images_only", "changed", "refused", "error")
DEFAULT_OUT = fetch.ROOT / "target" / "documents"

CONFIG = """# Written by tests/documents/documents.py: one upstream per preset, never contacted.
[[listener]]
name = "public"
address = "127.0.0.1:1"

[audit]
sink = "off"

[limits]
max_response_body_bytes = 67108864
"""


def write_config(path: Path) -> None:
    text = CONFIG
    for p in PRESETS:
        text += (f'\n[[upstream]]\nid = "{p}"\nname = "documents ({p})"\nurl = "http://127.0.0.1:9/mcp"\n'
                 f'policy = "{p}"\n\n[[route]]\npath = "/mcp/{p}"\nupstream = "{p}"\n')
    path.write_text(text)


def resource_uri(doc: fetch.Document) -> str:
    return f"file:///documents/{doc.package.registry}/{doc.package.folder_name}/{doc.path}"


def block(doc: fetch.Document, text: str, carrier: str) -> dict:
    if carrier == "tools/call":
        return {"type": "text", "text": text}
    mime = "text/markdown" if doc.path.lower().endswith((".md", ".markdown")) else "text/plain"
    return {"uri": resource_uri(doc), "mimeType": mime, "text": text}


def message(docs: list[fetch.Document], texts: list[str], carrier: str) -> dict:
    """One tools/call result (a text block per document) or one resources/read
    result (a contents entry per document)."""
    blocks = [block(d, t, carrier) for d, t in zip(docs, texts)]
    key = "content" if carrier == "tools/call" else "contents"
    return {"jsonrpc": "2.0", "id": 1, "result": {key: blocks}}


def received_texts(report: dict, carrier: str, n: int) -> list[str] | None:
    result = (report.get("client_receives") or {}).get("result")
    if not isinstance(result, dict):
        return None
    items = result.get("content" if carrier == "tools/call" else "contents")
    if not isinstance(items, list) or len(items) != n:
        return None
    texts = [i.get("text") if isinstance(i, dict) else None for i in items]
    return texts if all(isinstance(t, str) for t in texts) else None


def explain(binary: str, config: Path, preset: str, carrier: str, target: str, msg: dict) -> dict:
    p = subprocess.run(
        [binary, "explain", "--config", str(config), "--upstream", preset, "--method", carrier,
         "--target", target, "--json", "-"],
        input=json.dumps(msg, ensure_ascii=False).encode(), capture_output=True, timeout=300, check=False,
    )
    if p.returncode not in (0, 1):
        raise RuntimeError(f"explain exited {p.returncode}: {p.stderr.decode(errors='replace').strip()[:300]}")
    return json.loads(p.stdout)


def _verdicts(report: dict, index: int | None) -> list[str]:
    keys = (None,) if index is None else (None, f"content[{index}]", f"contents[{index}]")
    return sorted({f"{c.get('rule')}: {c.get('action')} ({c.get('detail')})" for c in report.get("checks", [])
                   if c.get("action") not in ("pass", None) and (index is None or c.get("key") in keys)})


def outcome(text: str, got: str) -> dict:
    c = changes.classify(text, got)
    out = {"images": c["images"], "changes": c["changes"]}
    out["outcome"] = "unchanged" if got == text else "images_only" if not c["changes"] else "changed"
    return out


def judge_one(binary: str, config: Path, doc: fetch.Document, text: str, preset: str, carrier: str) -> dict:
    target = "fetch" if carrier == "tools/call" else resource_uri(doc)
    try:
        report = explain(binary, config, preset, carrier, target, message([doc], [text], carrier))
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        return {"outcome": "error", "error": str(e)[:300]}
    got = received_texts(report, carrier, 1)
    if report.get("decision") != "delivered" or got is None:
        err = (report.get("client_receives") or {}).get("error") or {}
        return {"outcome": "refused", "reason": (err.get("data") or {}).get("reason"), "checks": _verdicts(report, None)}
    return {**outcome(text, got[0]), "checks": _verdicts(report, None)}


def judge(binary: str, config: Path, docs: list[fetch.Document]) -> list[dict]:
    """Documents through both carriers under both presets: together in one
    message where the gateway delivers it, one by one where it does not (so a
    refusal is laid on the document that caused it)."""
    texts = [d.text() for d in docs]
    rows = [{"id": d.id, "bytes": len(t.encode()), "results": {}} for d, t in zip(docs, texts)]
    for preset in PRESETS:
        for carrier in CARRIERS:
            k = f"{preset} {carrier}"
            got = None
            report: dict = {}
            if len(docs) > 1:
                try:
                    report = explain(binary, config, preset, carrier, "fetch" if carrier == "tools/call"
                                     else resource_uri(docs[0]), message(docs, texts, carrier))
                    if report.get("decision") == "delivered":
                        got = received_texts(report, carrier, len(docs))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired):
                    got = None
            for i, (doc, text, row) in enumerate(zip(docs, texts, rows)):
                if got is None:
                    row["results"][k] = judge_one(binary, config, doc, text, preset, carrier)
                else:
                    row["results"][k] = {**outcome(text, got[i]), "checks": _verdicts(report, i)}
    return rows


def batches(docs: list[fetch.Document], max_docs: int, max_bytes: int) -> list[list[fetch.Document]]:
    out: list[list[fetch.Document]] = []
    size = 0
    for d in docs:
        n = d.file.stat().st_size
        if not out or len(out[-1]) >= max_docs or size + n > max_bytes:
            out.append([])
            size = 0
        out[-1].append(d)
        size += n
    return out


def summarise(rows: list[dict]) -> dict:
    summary: dict = {}
    for preset in PRESETS:
        for carrier in CARRIERS:
            k = f"{preset} {carrier}"
            outs = [r["results"][k] for r in rows]
            counts = collections.Counter(o["outcome"] for o in outs)
            ok = counts["unchanged"] + counts["images_only"]
            classes = collections.Counter()
            docs_by_class = collections.Counter()
            checks = collections.Counter()
            for o in outs:
                cls = collections.Counter(c["class"] for c in o.get("changes", []))
                classes.update(cls)
                docs_by_class.update(cls.keys())
                checks.update(o.get("checks", []))
            # the issue lets escapes and invisible characters go too
            lenient = sum(1 for o in outs if o["outcome"] in ("unchanged", "images_only") or (
                o["outcome"] == "changed" and all(c["class"] in ("invisible", "escape") for c in o["changes"])))
            summary[k] = {
                "documents": len(outs),
                **{o: counts[o] for o in OUTCOMES},
                "unchanged_apart_from_images_pct": round(100.0 * ok / len(outs), 2) if outs else 0.0,
                "unchanged_apart_from_images_escapes_invisible_pct":
                    round(100.0 * lenient / len(outs), 2) if outs else 0.0,
                "documents_by_change_class": dict(docs_by_class.most_common()),
                "changes_by_class": dict(classes.most_common()),
                "gateway_checks": dict(checks.most_common()),
            }
    return summary


def report_md(summary: dict, rows: list[dict], packages: int, docs: int) -> str:
    md = [f"# Real documents as results ({docs} texts of {packages} packages)", "",
          "| preset and carrier | documents | unchanged | images only | changed | refused | error | ok % |",
          "|---|---|---|---|---|---|---|---|"]
    for k, s in summary.items():
        md.append(f"| {k} | {s['documents']} | {s['unchanged']} | {s['images_only']} | {s['changed']} | "
                  f"{s['refused']} | {s['error']} | {s['unchanged_apart_from_images_pct']} |")
    for k, s in summary.items():
        md += ["", f"## {k}: documents changed, by what the change touched", ""]
        md += [f"- {c}: {n} documents ({s['changes_by_class'][c]} edits)" for c, n in s["documents_by_change_class"].items()]
        md += ["", "the gateway's own verdicts (rule: action (detail)): documents", ""]
        md += [f"- {c}: {n}" for c, n in s["gateway_checks"].items()]
    md += ["", "## Excerpts under untrusted tools/call (first change of each changed document)", ""]
    for r in rows:
        o = r["results"]["untrusted tools/call"]
        if o["outcome"] == "changed":
            c = o["changes"][0]
            md.append(f"- {r['id']}: {c['class']}: `{ascii(c['before'][:80])[1:-1]}` -> `{ascii(c['after'][:80])[1:-1]}`")
        elif o["outcome"] in ("refused", "error"):
            md.append(f"- {r['id']}: {o['outcome']} {o.get('reason') or o.get('error', '')}")
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--subset", action="store_true", help="only the packages of documents.toml's subset")
    ap.add_argument("--list", type=Path, default=fetch.LIST, help="the package list (default documents.toml)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--bin", default=os.environ.get("PORTCULLIS_BIN", str(fetch.ROOT / "target" / "debug" / "portcullis")))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("DOCUMENTS_JOBS", "2")))
    ap.add_argument("--fetch-jobs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16, help="documents per message (one by one where refused)")
    ap.add_argument("--batch-bytes", type=int, default=96 * 1024, help="text bytes per message")
    ap.add_argument("--min-unchanged", type=float, default=99.0, help="the share to reach, percent (default 99)")
    ap.add_argument("--retry-failed", action="store_true", help="fetch again the packages that failed before")
    ap.add_argument("--fetch-only", action="store_true")
    ap.add_argument("--cached-only", action="store_true", help="use the packages already in the cache, fetch none")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    try:
        packages = fetch.load(args.list, subset=args.subset)
    except fetch.ListError as e:
        print(f"documents: {e}", file=sys.stderr)
        return 2
    started = time.monotonic()
    notes: list[str] = []
    fetched = fetch.fetch(packages, args.fetch_jobs, args.retry_failed, log=notes.append,
                          cached_only=args.cached_only)
    # several packages ship one text (a workspace's crates share their README): count it once
    seen: set[str] = set()
    docs = []
    for d in fetched:
        digest = hashlib.sha256(d.file.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            docs.append(d)
    print(f"documents: {len(docs)} distinct texts ({len(fetched)} fetched) from {len(packages)} packages "
          f"({len(notes)} packages not fetched) in {time.monotonic() - started:.0f}s", flush=True)
    if not args.quiet:
        for n in notes:
            print(f"  {n}", file=sys.stderr)
    if args.fetch_only:
        return 0
    if not Path(args.bin).is_file():
        print(f"documents: no gateway binary at {args.bin}", file=sys.stderr)
        return 2
    lock = threading.Lock()
    done = [0]
    with tempfile.TemporaryDirectory(prefix="portcullis-documents-") as tmp:
        config = Path(tmp) / "gateway.toml"
        write_config(config)

        def one(group: list[fetch.Document]) -> list[dict]:
            got = judge(args.bin, config, group)
            with lock:
                done[0] += len(group)
                if not args.quiet:
                    print(f"checked {done[0]}/{len(docs)}", file=sys.stderr, flush=True)
            return got

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = [r for group in pool.map(one, batches(docs, args.batch, args.batch_bytes)) for r in group]
    summary = summarise(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    report = {"binary": args.bin, "packages": len(packages), "documents": len(docs), "fetched": len(fetched),
              "not_fetched": notes, "seconds": round(time.monotonic() - started, 1), "summary": summary, "rows": rows}
    (args.out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    (args.out / "report.md").write_text(report_md(summary, rows, len(packages), len(docs)))
    failed = []
    for k, s in summary.items():
        print(f"{k:28} {s['documents']} documents: {s['unchanged']} unchanged, {s['images_only']} images only, "
              f"{s['changed']} changed, {s['refused']} refused, {s['error']} errors: "
              f"{s['unchanged_apart_from_images_pct']}% unchanged apart from images")
        if s["documents_by_change_class"]:
            print("    changed documents by class: " + ", ".join(f"{c} {n}" for c, n in s["documents_by_change_class"].items()))
        if s["unchanged_apart_from_images_pct"] < args.min_unchanged or s["error"]:
            failed.append(k)
    print(f"report: {args.out / 'report.md'} ({report['seconds']}s)")
    n = len(rows)
    bad = sum(1 for r in rows if any(o["outcome"] not in ("unchanged", "images_only") for o in r["results"].values()))
    print(f"documents: {n - bad} passed, {bad} failed")
    if failed:
        print(f"documents: below {args.min_unchanged}% (or errors) under: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
