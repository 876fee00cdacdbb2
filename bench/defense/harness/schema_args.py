"""Arguments a tool's `inputSchema` accepts, as an honest caller would write them.

`example(schema)` builds one value the schema accepts: the schema's own hints
first (`const`, `default`, `examples`, `enum`), then what its `format` or
`pattern` asks for, then an ordinary value chosen by the property's name
(`path` → a relative file name, `url` → an https URL, `email` → an address),
then a plain word; numbers within their bounds, arrays of one item (or
`minItems`), objects with every declared property (required ones first). Local
`$ref`s, `allOf`, `anyOf`/`oneOf` (the first branch that is not `null`) and
type lists are followed. Values are plain and ordinary on purpose: they stand
for what a person asks a model to pass, not for edge cases.

Standard library only (the regex generator walks `re`'s own parse tree).
"""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11+
    import re._constants as sre_c  # type: ignore[import-not-found]
    import re._parser as sre_parse  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older Pythons
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

MAX_DEPTH = 6

FORMATS = {
    "email": "ada@example.com",
    "idn-email": "ada@example.com",
    "uri": "https://example.com/docs/getting-started",
    "url": "https://example.com/docs/getting-started",
    "iri": "https://example.com/docs/getting-started",
    "uri-reference": "/docs/getting-started",
    "iri-reference": "/docs/getting-started",
    "uri-template": "https://example.com/items/{id}",
    "date": "2026-03-14",
    "date-time": "2026-03-14T09:30:00Z",
    "time": "09:30:00Z",
    "duration": "P3D",
    "uuid": "6f1c2a4e-8b3d-4f5a-9c7e-2d1b0a9f8e7d",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "8.8.8.8",
    "ipv6": "2001:4860:4860::8888",
    "regex": "^[a-z]+$",
    "json-pointer": "/items/0",
    "relative-json-pointer": "0/name",
    "byte": "aGVsbG8gd29ybGQ=",
    "binary": "hello world",
    "password": "",  # never invent a secret: an empty string or the schema's own hint
    "int32": "42",
    "int64": "42",
    "float": "1.5",
    "double": "1.5",
}

# Ordinary values by what a property's name says it holds (word → value); the
# first word of the name found here wins.
BY_NAME: list[tuple[tuple[str, ...], Any]] = [
    (("url", "uri", "link", "href", "endpoint", "website", "homepage"), "https://example.com/docs/getting-started"),
    (("email", "mail"), "ada@example.com"),
    (("path", "file", "filename", "filepath", "dir", "directory", "folder"), "docs/notes.md"),
    (("query", "q", "search", "keyword", "keywords", "term", "prompt", "question"), "weather in Paris this weekend"),
    (("text", "content", "body", "message", "comment", "note", "description", "summary"),
     "Thanks, the meeting is moved to Thursday at 10."),
    (("title", "subject", "name", "label"), "Quarterly report"),
    (("owner", "user", "username", "author", "login"), "octocat"),
    (("repo", "repository", "project"), "hello-world"),
    (("branch", "ref"), "main"),
    (("lang", "language", "locale"), "en"),
    (("city", "location", "place", "address"), "Paris"),
    (("country",), "FR"),
    (("currency",), "EUR"),
    (("symbol", "ticker"), "AAPL"),
    (("color", "colour"), "blue"),
    (("phone", "tel", "telephone"), "+33 1 23 45 67 89"),
    (("date", "day"), "2026-03-14"),
    (("time",), "09:30"),
    (("timezone", "tz"), "Europe/Paris"),
    (("command", "cmd"), "git status"),
    (("code", "script", "snippet"), "print('hello')"),
    (("sql",), "SELECT id, name FROM customers LIMIT 10"),
    (("id", "key", "slug", "uuid"), "item-1042"),
    (("format", "type", "kind", "mode", "status", "category", "sort", "order"), "default"),
    (("version",), "1.2.0"),
    (("tag", "tags"), "release"),
    (("channel",), "general"),
    (("domain", "host", "hostname"), "example.com"),
    # An IP lookup or a ping is given a public address as a model would.
    (("ip", "ipv4", "ipv6", "ipaddr"), "8.8.8.8"),
]

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def name_words(name: str | None) -> list[str]:
    if not name:
        return []
    return [w.lower() for w in _WORD.findall(name)]


class Generator:
    def __init__(self, root: dict[str, Any]):
        self.root = root

    def resolve(self, schema: Any, depth: int) -> Any:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 16:
            ref = schema["$ref"]
            target = self._pointer(ref)
            if target is None:
                return {k: v for k, v in schema.items() if k != "$ref"}
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest} if rest else target
            seen += 1
        return schema

    def _pointer(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def value(self, schema: Any, name: str | None = None, depth: int = 0) -> Any:
        schema = self.resolve(schema, depth)
        if schema is True or schema is None or schema == {}:
            return self.by_name(name, "string")
        if not isinstance(schema, dict):
            return "example"
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            non_null = [e for e in schema["enum"] if e is not None]
            return non_null[0] if non_null else None
        if "default" in schema and schema["default"] is not None:
            return schema["default"]
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return examples[0]
        if "example" in schema and schema["example"] is not None:
            return schema["example"]
        if isinstance(schema.get("allOf"), list):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                merge(merged, self.resolve(part, depth))
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.value(merge(merged, rest), name, depth)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                rest = {k: v for k, v in schema.items() if k != key}
                resolved = [self.resolve(b, depth) for b in branches]
                chosen = next((b for b in resolved if not is_null(b)), resolved[0])
                return self.value(merge(dict(rest), chosen) if isinstance(chosen, dict) else chosen, name, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"] or ["null"]
            kind = kinds[0]
        if kind is None:
            if "properties" in schema or "required" in schema:
                kind = "object"
            elif "items" in schema:
                kind = "array"
            else:
                kind = "string"
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            return self.array(schema, name, depth)
        if kind in ("number", "integer"):
            return number(schema, kind == "integer")
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self.string(schema, name)

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        out: dict[str, Any] = {}
        if depth >= MAX_DEPTH:
            names = required
        else:
            names = required + [p for p in props if p not in required]
        for p in names:
            out[p] = self.value(props.get(p, {}), p, depth + 1)
        min_props = schema.get("minProperties")
        extra = schema.get("additionalProperties")
        if isinstance(min_props, int) and len(out) < min_props and extra is not False:
            for i in range(min_props - len(out)):
                out[f"key{i + 1}"] = self.value(extra if isinstance(extra, dict) else {}, "key", depth + 1)
        return out

    def array(self, schema: dict[str, Any], name: str | None, depth: int) -> list[Any]:
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems")
        count = schema.get("minItems") if isinstance(schema.get("minItems"), int) else 1
        if isinstance(schema.get("maxItems"), int):
            count = min(count, schema["maxItems"])
        out: list[Any] = []
        singular = name[:-1] if name and name.endswith("s") else name
        if isinstance(prefix, list):
            for p in prefix:
                out.append(self.value(p, singular, depth + 1))
        for i in range(len(out), max(count, len(out) if prefix else count)):
            v = self.value(items if items is not None else {}, singular, depth + 1)
            if schema.get("uniqueItems") and v in out:
                v = vary(v, i)
            out.append(v)
        return out

    def string(self, schema: dict[str, Any], name: str | None) -> str:
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        if isinstance(fmt, str) and fmt in FORMATS and fmt != "password":
            text = FORMATS[fmt]
        elif isinstance(pattern, str):
            # the ordinary value when the pattern takes it ("^https?://" takes a URL), else the
            # shortest string the pattern matches
            ordinary = self.by_name(name, "string")
            text = ordinary if matches(pattern, ordinary) else (from_pattern(pattern) or ordinary)
        else:
            text = self.by_name(name, "string")
        return fit_length(text, schema)

    def by_name(self, name: str | None, _kind: str) -> str:
        words = name_words(name)
        for w in reversed(words):  # the last word says what it is: "file_path" is a path
            for keys, value in BY_NAME:
                if w in keys:
                    return value
        return "example"


def merge(into: dict[str, Any], other: Any) -> dict[str, Any]:
    if not isinstance(other, dict):
        return into
    for k, v in other.items():
        if k == "properties" and isinstance(v, dict):
            into.setdefault("properties", {}).update(v)
        elif k == "required" and isinstance(v, list):
            into["required"] = list(dict.fromkeys((into.get("required") or []) + v))
        else:
            into.setdefault(k, v)
    return into


def is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("type") == "null" or schema.get("const", 0) is None)


def vary(v: Any, i: int) -> Any:
    if isinstance(v, str):
        return f"{v}-{i + 1}"
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v + i
    return v


def number(schema: dict[str, Any], integer: bool) -> int | float:
    lo = schema.get("minimum")
    hi = schema.get("maximum")
    xlo = schema.get("exclusiveMinimum")
    xhi = schema.get("exclusiveMaximum")
    if isinstance(xlo, bool):  # draft 4: a flag beside minimum
        xlo = lo if xlo else None
    if isinstance(xhi, bool):
        xhi = hi if xhi else None
    step = schema.get("multipleOf") if isinstance(schema.get("multipleOf"), (int, float)) else None
    v: float = 1
    if isinstance(lo, (int, float)) and v < lo:
        v = lo
    if isinstance(xlo, (int, float)) and v <= xlo:
        v = xlo + (step or 1)
    if isinstance(hi, (int, float)) and v > hi:
        v = hi
    if isinstance(xhi, (int, float)) and v >= xhi:
        v = xhi - (step or 1) if integer or step else (xhi + (xlo if isinstance(xlo, (int, float)) else xhi - 1)) / 2
    if step:
        v = round(v / step) * step
    if integer:
        return int(v)
    return v


def fit_length(text: str, schema: dict[str, Any]) -> str:
    lo = schema.get("minLength")
    hi = schema.get("maxLength")
    if isinstance(lo, int) and len(text) < lo:
        text = (text + " ") * (lo // max(len(text) + 1, 1) + 1) if text else "x" * lo
        text = text[: max(lo, len(text.rstrip()))]
        if len(text) < lo:
            text = text + "x" * (lo - len(text))
    if isinstance(hi, int) and len(text) > hi:
        text = text[:hi]
    return text


def from_pattern(pattern: str) -> str | None:
    """A short string the regex matches (searched, as JSON Schema does), or None
    when the pattern uses what this walker does not know."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, RecursionError, TypeError):
        return None
    try:
        text = _emit(tree)
    except (_Unknown, RecursionError):
        return None
    return text if re.search(pattern, text) else None


class _Unknown(Exception):
    pass


REPEATS = tuple(x for x in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)) if x is not None)


def _emit(tree: Any) -> str:
    return "".join(_emit_one(op, av) for op, av in tree)


def _emit_one(op: Any, av: Any) -> str:
    if op == sre_c.LITERAL:
        return chr(av)
    if op == sre_c.NOT_LITERAL:
        return "a" if chr(av) != "a" else "b"
    if op == sre_c.ANY:
        return "a"
    if op == sre_c.IN:
        return _emit_in(av)
    if op in REPEATS:
        lo, _hi, sub = av
        # one copy of an optional part: `^[a-z]*$` gives a word, not ""
        return _emit(sub) * max(lo, 1)
    if op == sre_c.SUBPATTERN:
        return _emit(av[-1])
    if op == getattr(sre_c, "ATOMIC_GROUP", object()):
        return _emit(av)
    if op == sre_c.BRANCH:
        return _emit(av[1][0])
    if op == sre_c.AT:
        return ""
    if op == sre_c.CATEGORY:
        return _category(av)
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        return ""
    if op == sre_c.GROUPREF:
        raise _Unknown
    raise _Unknown


def _emit_in(items: Any) -> str:
    negate = any(op == sre_c.NEGATE for op, _ in items)
    if negate:
        excluded = set()
        for op, av in items:
            if op == sre_c.LITERAL:
                excluded.add(chr(av))
            elif op == sre_c.RANGE:
                excluded.update(chr(c) for c in range(av[0], min(av[1], 0x2FF) + 1))
        for c in "abcxyz019":
            if c not in excluded:
                return c
        raise _Unknown
    for op, av in items:
        if op == sre_c.LITERAL:
            return chr(av)
        if op == sre_c.RANGE:
            lo, hi = av
            for c in "a0A":
                if lo <= ord(c) <= hi:
                    return c
            return chr(lo)
        if op == sre_c.CATEGORY:
            return _category(av)
    raise _Unknown


def _category(cat: Any) -> str:
    name = str(cat)
    if "NOT_DIGIT" in name:
        return "a"
    if "DIGIT" in name:
        return "1"
    if "NOT_SPACE" in name:
        return "a"
    if "SPACE" in name:
        return " "
    if "NOT_WORD" in name:
        return "-"
    if "WORD" in name:
        return "a"
    raise _Unknown


def example(schema: Any) -> Any:
    """One value `schema` accepts (its root is the schema for local `$ref`s)."""
    root = schema if isinstance(schema, dict) else {}
    return Generator(root).value(schema, None, 0)


def arguments(input_schema: Any) -> dict[str, Any]:
    """Arguments for a tool whose `inputSchema` is `input_schema` (an object)."""
    value = example(input_schema if isinstance(input_schema, dict) else {"type": "object"})
    return value if isinstance(value, dict) else {}


def matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except (re.error, RecursionError):
        return False
