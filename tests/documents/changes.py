"""What the gateway changed in a document, and whether the change is one the
issue allows: an image (markdown or HTML) that a client would fetch from
another host. Everything else is a change, classed by what it touched.

Written from markdown's and HTML's syntax, not from the gateway's rules: the
spans are found in the text as sent, then every edit between sent and received
is laid over them. Standard library only.
"""

from __future__ import annotations

import difflib
import re
import unicodedata

_EXTERNAL = r"(?:https?:)?//"
# ![alt](url "title"): alt may hold brackets one level deep
_MD_IMAGE = re.compile(r"!\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?(" + _EXTERNAL + r"[^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_MD_REF_IMAGE = re.compile(r"!\[((?:[^\[\]]|\[[^\[\]]*\])*)\](?:\[([^\]]*)\])?")
_REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?[ \t]*$", re.M)
_HTML_IMG = re.compile(r"<(?:img|source|image)\b[^>]*?\b(?:src|srcset|href)\s*=\s*[\"']?\s*" + _EXTERNAL + r"[^>]*>", re.I)
# CommonMark lets white space (one line break included) stand around a link's target.
_MD_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\](?:\(\s*[^)\s]*(?:\s+\"[^\"]*\")?\s*\)|\[[^\]]*\])")
_SHORTCUT = re.compile(r"(?<![!\]])\[([^\[\]]+)\](?![(\[])")
_AUTOLINK = re.compile(r"<(?:https?|ftp|mailto):[^>\s]+>|\bhttps?://[^\s)>\]\"'`]+", re.I)
_HTML_A = re.compile(r"</?a\b[^>]*>", re.I)
_HTML_A_BLOCK = re.compile(r"<a\b[^>]*>(.*?)</a>", re.I | re.S)
_HTML_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9-]*\b[^<>]*>", re.S)
_FENCE = re.compile(r"^ {0,3}(```|~~~)[^\n]*\n.*?^ {0,3}\1[^\n]*$", re.S | re.M)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")

CLASSES = ("link", "html", "code", "invisible", "escape", "inserted", "text")


def _norm_label(s: str) -> str:
    return " ".join(s.lower().split())


def image_spans(text: str) -> list[tuple[int, int]]:
    """Where the text holds an image a client would fetch from another host:
    inline and reference markdown images, their definitions when only images
    use them, HTML <img>/<source>/<image> tags, and a link whose whole label
    is such an image (a badge), with its definition when only badges use it."""
    spans = [m.span() for m in _MD_IMAGE.finditer(text)]
    spans += [m.span() for m in _HTML_IMG.finditer(text)]
    defs = {}
    for m in _REF_DEF.finditer(text):
        defs.setdefault(_norm_label(m.group(1)), (m.span(), m.group(2)))
    image_refs: set[str] = set()
    for m in _MD_REF_IMAGE.finditer(text):
        if text.startswith("(", m.end()) and m.group(2) is None:
            continue  # an inline image, handled above (or a local one)
        label = _norm_label(m.group(2) or m.group(1))
        if label in defs and re.match(_EXTERNAL, defs[label][1]):
            spans.append(m.span())
            image_refs.add(label)
    images = _merge(spans)
    badge_refs: set[str] = set()
    other_refs: set[str] = set()
    for m in _MD_LINK.finditer(text):
        if m.start() > 0 and text[m.start() - 1] == "!":
            continue
        whole = m.group(0)
        close = _label_end(whole)
        label = whole[1:close]
        ref = re.match(r"\[([^\]]*)\]$", whole[close + 1:])
        ref_label = _norm_label(ref.group(1) or label) if ref else None
        start = m.start() + 1
        if label.strip() and _covered(start + len(label) - len(label.lstrip()),
                                      start + len(label.rstrip()), images):
            spans.append(m.span())
            if ref_label:
                badge_refs.add(ref_label)
        elif ref_label:
            other_refs.add(ref_label)
    def_spans = [span for span, _ in defs.values()]
    for m in _SHORTCUT.finditer(text):
        if not any(a <= m.start() < b for a, b in def_spans):
            other_refs.add(_norm_label(m.group(1)))
    for label in (image_refs | badge_refs) - other_refs:
        if label in defs:
            spans.append(defs[label][0])
    for m in _HTML_A_BLOCK.finditer(text):
        inner = m.group(1)
        off = m.start(1)
        if inner.strip() and _covered(off + len(inner) - len(inner.lstrip()), off + len(inner.rstrip()), images):
            spans.append(m.span())
    return _merge(spans)


def _label_end(link: str) -> int:
    """The index of the `]` that closes a link's label (labels nest one level)."""
    depth = 0
    for i, c in enumerate(link):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i
    return len(link) - 1


def _covered(a: int, b: int, spans: list[tuple[int, int]]) -> bool:
    """[a, b) is made of spans and white space between them."""
    pos = a
    for s, e in spans:
        if e <= pos:
            continue
        if s > pos:
            return False
        pos = e
        if pos >= b:
            return True
    return pos >= b


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _spans(pattern: re.Pattern, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def link_spans(text: str) -> list[tuple[int, int]]:
    """Inline, reference, shortcut and auto links, bare URLs, HTML anchors and
    link definitions."""
    defined = {_norm_label(m.group(1)) for m in _REF_DEF.finditer(text)}
    shortcuts = [m.span() for m in _SHORTCUT.finditer(text) if _norm_label(m.group(1)) in defined]
    return _merge(_spans(_MD_LINK, text) + _spans(_AUTOLINK, text) + _spans(_HTML_A, text)
                  + [m.span() for m in _REF_DEF.finditer(text)] + shortcuts)


def edits(sent: str, got: str) -> list[tuple[int, int, str]]:
    """(start, end, replacement) edits of `sent` that give `got`, lines first,
    then characters within changed lines."""
    a_lines = sent.splitlines(keepends=True)
    b_lines = got.splitlines(keepends=True)
    a_off = [0]
    for line in a_lines:
        a_off.append(a_off[-1] + len(line))
    out = []
    lines = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in lines.get_opcodes():
        if tag == "equal":
            continue
        a_text, b_text = "".join(a_lines[i1:i2]), "".join(b_lines[j1:j2])
        base = a_off[i1]
        if tag != "replace" or len(a_text) + len(b_text) > 200_000:
            out.append((base, base + len(a_text), b_text))
            continue
        chars = difflib.SequenceMatcher(None, a_text, b_text, autojunk=False)
        for ctag, c1, c2, d1, d2 in chars.get_opcodes():
            if ctag != "equal":
                out.append((base + c1, base + c2, b_text[d1:d2]))
    return out


def _inside(a: int, b: int, spans: list[tuple[int, int]]) -> bool:
    """[a, b) lies within one span (an insertion, a == b, may touch its ends)."""
    return any(s <= a and b <= e for s, e in spans)


def _image_edit(a: int, b: int, sent: str, spans: list[tuple[int, int]]) -> bool:
    """The edit touches an image and removes nothing else but white space."""
    if _inside(a, b, spans):
        return True
    if not _touches(a, b, spans):
        return False
    rest = list(sent[a:b])
    for s, e in spans:
        for k in range(max(a, s), min(b, e)):
            rest[k - a] = " "
    return not "".join(rest).strip()


def _touches(a: int, b: int, spans: list[tuple[int, int]]) -> bool:
    if a == b:
        return any(s < a < e for s, e in spans)
    return any(s < b and a < e for s, e in spans)


def _invisible(c: str) -> bool:
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf") or 0xFE00 <= ord(c) <= 0xFE0F


def classify(sent: str, got: str) -> dict:
    """{"images": n, "changes": [{"class", "before", "after"}...]} for one text."""
    if sent == got:
        return {"images": 0, "changes": []}
    images = image_spans(sent)
    links = link_spans(sent)
    html = _spans(_HTML_TAG, sent)
    code = _spans(_FENCE, sent)
    escapes = _spans(_ANSI, sent)
    n_images, changes = 0, []
    for a, b, new in edits(sent, got):
        before = sent[a:b]
        if _image_edit(a, b, sent, images):
            n_images += 1
            continue
        if before and all(_invisible(c) for c in before) and not new:
            cls = "invisible"
        elif _touches(a, b, escapes):
            cls = "escape"
        elif a == b:
            cls = "inserted"
        elif _touches(a, b, links):
            cls = "link"
        elif _touches(a, b, code):
            cls = "code"
        elif _touches(a, b, html):
            cls = "html"
        else:
            cls = "text"
        changes.append({"class": cls, "at": a, "before": before[:200], "after": new[:200]})
    return {"images": n_images, "changes": changes}
