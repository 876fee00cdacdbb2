"""Honest tool calls with their schemas, from sets nobody here wrote.

Each source yields `Case`s: the tools a server lists (as MCP tools: name,
description, `inputSchema`) and the calls a model made to them (the answer the
benchmark accepts). Nothing is invented here but where a source has no call
(the real-world servers: arguments are generated from each schema,
`harness.schema_args`).

- `bfcl`: the Berkeley Function Calling Leaderboard's question sets and their
  possible answers (the `bfcl-eval` package on PyPI, or a snapshot of
  ShishirPatil/gorilla); each answer's first accepted value per parameter,
  parameters whose only accepted value is "absent" left out.
- `mcptoolbench`: MCPToolBench++ (AI-Agent-Hub/MCPToolBenchPP): real MCP
  servers' tool lists and the labelled calls of each query.
- `realworld`: the recordings of scripts/realworld (target/realworld/<server>/
  tools.json), each tool called with arguments its schema accepts.
"""

from __future__ import annotations

import ast
import json
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import schema_args  # noqa: E402


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]
    origin: str  # where in the source it comes from (a case id)


@dataclass
class Case:
    source: str
    group: str  # a category, a server: what a report is split by
    id: str
    tools: list[dict[str, Any]]
    calls: list[Call] = field(default_factory=list)


# --- BFCL ------------------------------------------------------------------------------------

BFCL_CATEGORIES = [
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "multi_turn_base",
]
# The multi-turn function documents, by the class a case involves.
BFCL_CLASS_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json", "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json", "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json", "VehicleControlAPI": "vehicle_control.json",
}
# BFCL's parameter types (Python, Java and JavaScript spellings) as JSON Schema types.
BFCL_TYPES = {
    "dict": "object", "object": "object", "hashmap": "object",
    "float": "number", "double": "number", "number": "number",
    "integer": "integer", "int": "integer", "long": "integer", "short": "integer",
    "string": "string", "str": "string", "char": "string",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "arraylist": "array", "list": "array", "tuple": "array",
    "any": None, "": None,
}


class BfclData:
    """The BFCL data folder, from the PyPI wheel or a gorilla snapshot."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files

    @classmethod
    def from_wheel(cls, wheel: Path) -> "BfclData":
        files = {}
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("bfcl_eval/data/") and name.endswith(".json"):
                    files[name.removeprefix("bfcl_eval/data/")] = z.read(name)
        return cls(files)

    @classmethod
    def from_snapshot(cls, git_dir: Path, rev: str = "HEAD") -> "BfclData":
        prefix = "berkeley-function-call-leaderboard/bfcl_eval/data/"
        names = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", rev, prefix],
                               capture_output=True, text=True, check=True).stdout.split()
        files = {}
        for name in names:
            if name.endswith(".json"):
                files[name.removeprefix(prefix)] = subprocess.run(
                    ["git", "--git-dir", str(git_dir), "show", f"{rev}:{name}"], capture_output=True, check=True).stdout
        return cls(files)

    def lines(self, name: str) -> list[dict[str, Any]]:
        data = self.files.get(name)
        if data is None:
            return []
        return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def bfcl_schema(p: Any, java_like: bool) -> Any:
    """A BFCL parameter description as JSON Schema."""
    if not isinstance(p, dict):
        return p
    out: dict[str, Any] = {}
    for k, v in p.items():
        if k == "type" and isinstance(v, str):
            mapped = BFCL_TYPES.get(v.lower(), "string" if java_like else None)
            if mapped is not None:
                out["type"] = mapped
        elif k == "properties" and isinstance(v, dict):
            out["properties"] = {name: bfcl_schema(x, java_like) for name, x in v.items()}
        elif k == "items":
            out["items"] = bfcl_schema(v, java_like)
        elif k in ("required", "enum", "description", "default", "format", "minimum", "maximum", "title",
                   "minItems", "maxItems", "additionalProperties"):
            out[k] = v
    return out


def bfcl_tool(fn: dict[str, Any], java_like: bool) -> dict[str, Any]:
    schema = bfcl_schema(fn.get("parameters") or {"type": "dict", "properties": {}}, java_like)
    schema["type"] = "object"
    return {"name": fn["name"], "description": fn.get("description", ""), "inputSchema": schema}


def pick(options: Any, schema: Any) -> tuple[bool, Any]:
    """The first accepted value of a BFCL answer's option list ("" or null: the
    parameter may be left out, as a model would); (False, None) when the
    parameter is to be left out."""
    if not isinstance(options, list):
        return True, options
    chosen = [o for o in options if o != "" and o is not None]
    if not chosen:
        return False, None
    return True, resolve(chosen[0], schema)


def resolve(value: Any, schema: Any) -> Any:
    """A dict parameter's accepted value is itself a dict of option lists."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, dict) and value and all(isinstance(v, list) for v in value.values()):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        if props or schema.get("type") == "object":
            out = {}
            for k, opts in value.items():
                keep, v = pick(opts, props.get(k, {}))
                if keep:
                    out[k] = v
            return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [resolve(x, schema["items"]) for x in value]
    return value


def bfcl_cases(data: BfclData, categories: list[str] | None = None) -> Iterator[Case]:
    for cat in categories or BFCL_CATEGORIES:
        if cat.startswith("multi_turn"):
            yield from bfcl_multi_turn(data, cat)
            continue
        questions = data.lines(f"BFCL_v4_{cat}.json")
        answers = {a["id"]: a for a in data.lines(f"possible_answer/BFCL_v4_{cat}.json")}
        java_like = cat.endswith("java") or cat.endswith("javascript")
        for q in questions:
            answer = answers.get(q["id"])
            if answer is None:
                continue
            tools = [bfcl_tool(fn, java_like) for fn in q.get("function") or []]
            by_name = {t["name"]: t for t in tools}
            case = Case("bfcl", cat, q["id"], tools)
            for truth in answer.get("ground_truth") or []:
                for name, params in truth.items():
                    schema = by_name.get(name, {}).get("inputSchema", {})
                    props = schema.get("properties") or {}
                    args = {}
                    for pname, options in params.items():
                        keep, v = pick(options, props.get(pname, {}))
                        if keep:
                            args[pname] = v
                    case.calls.append(Call(name, args, q["id"]))
            yield case


def bfcl_multi_turn(data: BfclData, cat: str) -> Iterator[Case]:
    docs: dict[str, list[dict[str, Any]]] = {}
    for cls, fname in BFCL_CLASS_DOCS.items():
        docs[cls] = data.lines(f"multi_turn_func_doc/{fname}")
    answers = {a["id"]: a for a in data.lines(f"possible_answer/BFCL_v4_{cat}.json")}
    for q in data.lines(f"BFCL_v4_{cat}.json"):
        answer = answers.get(q["id"])
        if answer is None:
            continue
        fns = [fn for cls in q.get("involved_classes") or [] for fn in docs.get(cls, [])]
        tools = [bfcl_tool(fn, False) for fn in fns]
        order = {t["name"]: list((t["inputSchema"].get("properties") or {}).keys()) for t in tools}
        case = Case("bfcl", cat, q["id"], tools)
        for turn in answer.get("ground_truth") or []:
            for text in turn:
                parsed = python_call(text, order)
                if parsed is not None:
                    case.calls.append(Call(parsed[0], parsed[1], q["id"]))
        yield case


def python_call(text: str, order: dict[str, list[str]]) -> tuple[str, dict[str, Any]] | None:
    """`mv(source='a', destination='b')` as (name, arguments); positional
    arguments take the documented parameters in order."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None
    name = node.func.id
    args: dict[str, Any] = {}
    try:
        for i, a in enumerate(node.args):
            params = order.get(name, [])
            if i >= len(params):
                return None
            args[params[i]] = ast.literal_eval(a)
        for kw in node.keywords:
            if kw.arg is None:
                return None
            args[kw.arg] = ast.literal_eval(kw.value)
    except ValueError:
        return None
    return name, args


# --- MCPToolBench++ --------------------------------------------------------------------------

MCPTOOLBENCH_FILES = [
    ("browser", ["data/browser/browser_0724_single_v3.json"]),
    ("file_system", ["data/file_system/filesystem_0723_single.json"]),
    ("finance", ["data/finance/finance_0724_single_v3.json"]),
    ("search", ["data/search/search_0725_single_v2.json"]),
    # The full map and pay sets are 4 MiB and more; where a snapshot lacks them, their demo sets stand in.
    ("map", ["data/map/map_0717_single_multi_lang_500.json", "data/map/map_single_demo.json"]),
    ("pay", ["data/pay/pay_0723_single.json", "data/pay/pay_single_demo.json"]),
]


PROBLEMS: list[str] = []  # what a source could not be read for, for the report


def git_blob(git_dir: Path, rev: str, path: str) -> bytes | None:
    r = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", f"{rev}:{path}"], capture_output=True)
    return r.stdout if r.returncode == 0 else None


def mcptoolbench_cases(git_dir: Path, rev: str = "HEAD") -> Iterator[Case]:
    for group, candidates in MCPTOOLBENCH_FILES:
        for path in candidates:
            blob = git_blob(git_dir, rev, path)
            if blob is None:
                continue
            try:
                items = json.loads(blob)
            except ValueError as e:
                PROBLEMS.append(f"mcptoolbench: {path} is not JSON ({e}); left out")
                break
            for item in items if isinstance(items, list) else []:
                tools = []
                for t in item.get("tools") or []:
                    schema = t.get("input_schema") or t.get("inputSchema") or {"type": "object"}
                    tools.append({"name": t["name"], "description": t.get("description", ""), "inputSchema": schema})
                case = Case("mcptoolbench", f"{group} ({Path(path).name})", str(item.get("uuid")), tools)
                for label in item.get("function_call_label") or []:
                    if isinstance(label.get("input"), dict):
                        case.calls.append(Call(label["name"], label["input"], str(item.get("uuid"))))
                yield case
            break


# --- the real-world servers' recordings ------------------------------------------------------


def realworld_cases(recordings: Path, only: set[str] | None = None) -> Iterator[Case]:
    for server in sorted(p for p in recordings.iterdir() if p.is_dir()):
        if only is not None and server.name not in only:
            continue
        path = server / "tools.json"
        if not path.is_file():
            continue
        try:
            listed = json.loads(path.read_text())
        except ValueError:
            continue
        tools = listed.get("tools") if isinstance(listed, dict) else None
        if not isinstance(tools, list) or not tools:
            continue
        case = Case("realworld", server.name, server.name, [t for t in tools if isinstance(t, dict)])
        for t in case.tools:
            if isinstance(t.get("name"), str):
                case.calls.append(Call(t["name"], schema_args.arguments(t.get("inputSchema")), server.name))
        yield case
