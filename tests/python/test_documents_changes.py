"""The documents corpus' change classes (tests/documents/changes.py): which
edits are the external images the issue lets the gateway touch, and what every
other edit touched."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "documents"))

import changes  # noqa: E402

README = """# demo

[![CI](https://github.com/o/demo/actions/workflows/ci.yml/badge.svg)](https://github.com/o/demo/actions)
[![crates.io][crates-badge]][crates-url]
![logo](https://example.org/logo.png)
<img src="https://example.org/shot.png" width="300">

Read the [guide](https://example.org/guide) or the [API docs][docs].

[crates-badge]: https://img.shields.io/crates/v/demo.svg
[crates-url]: https://crates.io/crates/demo
[docs]: https://docs.rs/demo

```sh
cargo add demo
```
"""


def _remove(text: str, part: str, by: str = "") -> str:
    assert part in text
    return text.replace(part, by, 1)


def test_identical_text_has_no_change():
    assert changes.classify(README, README) == {"images": 0, "changes": []}


def test_removing_external_images_and_badges_is_allowed():
    got = README
    for part in (
        "[![CI](https://github.com/o/demo/actions/workflows/ci.yml/badge.svg)](https://github.com/o/demo/actions)\n",
        "[![crates.io][crates-badge]][crates-url]",
        "![logo](https://example.org/logo.png)",
        '<img src="https://example.org/shot.png" width="300">',
        "[crates-badge]: https://img.shields.io/crates/v/demo.svg\n",
        "[crates-url]: https://crates.io/crates/demo\n",
    ):
        got = _remove(got, part)
    result = changes.classify(README, got)
    assert result["changes"] == []
    assert result["images"] >= 4


def test_an_image_replaced_by_its_alt_text_is_allowed():
    got = _remove(README, "![logo](https://example.org/logo.png)", "logo")
    assert changes.classify(README, got)["changes"] == []


def test_a_link_losing_its_target_is_a_link_change():
    got = _remove(README, "[guide](https://example.org/guide)", "guide")
    classes = {c["class"] for c in changes.classify(README, got)["changes"]}
    assert classes == {"link"}


def test_a_reference_link_and_its_definition_are_links():
    got = _remove(_remove(README, "[API docs][docs]", "API docs"), "[docs]: https://docs.rs/demo\n")
    classes = {c["class"] for c in changes.classify(README, got)["changes"]}
    assert classes == {"link"}


def test_other_edits_are_classed_by_what_they_touched():
    assert {c["class"] for c in changes.classify(README, _remove(README, "cargo add demo", "cargo add"))["changes"]} == {"code"}
    assert {c["class"] for c in changes.classify(README, README + "[notice]")["changes"]} == {"inserted"}
    assert {c["class"] for c in changes.classify(README, _remove(README, "# demo", "# dem"))["changes"]} == {"text"}
    assert {c["class"] for c in changes.classify("a\u200bb", "ab")["changes"]} == {"invisible"}


def test_a_local_image_is_not_external():
    text = "![diagram](docs/diagram.png)\n"
    assert changes.classify(text, "\n")["changes"] != []


def test_a_badge_whose_target_starts_on_the_next_line_is_an_image():
    # CommonMark allows a line break between `(` and a link's target.
    sent = "# demo\n\n[![Build](https://ci.example.org/badge.svg)](\nhttps://ci.example.org/runs)\ntext\n"
    got = "# demo\n\n[Build](\nhttps://ci.example.org/runs)\ntext\n"
    assert changes.classify(sent, got)["changes"] == []
    # The text after it is still read: an edit there is a change.
    edited = got.replace("text", "test")
    assert changes.classify(sent, edited)["changes"] != []
