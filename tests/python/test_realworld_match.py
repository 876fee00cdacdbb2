"""The real-world corpus' comparison (tests/realworld/check.py): which item
received is which item sent, so an identical copy shows no change and a
removal or edit is told apart from a reordering."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "realworld"))

import check  # noqa: E402


def _resources(n: int, name: str = "Document") -> list[dict]:
    # several resources sharing a name, told apart only by their uri
    return [{"uri": f"file:///docs/{i}.md", "name": name, "description": f"part {i}"} for i in range(n)]


def test_an_identical_copy_of_resources_sharing_a_name_has_no_change():
    result = {"resources": _resources(4)}
    removed, changes = check.compare(result, copy.deepcopy(result), "resources")
    assert removed == []
    assert changes == []


def test_resources_are_matched_by_uri_whatever_their_order():
    sent = {"resources": _resources(4)}
    got = {"resources": list(reversed(copy.deepcopy(sent["resources"])))}
    assert check.compare(sent, got, "resources") == ([], [])


def test_a_removed_resource_is_named_by_its_uri_and_the_rest_are_unchanged():
    sent = {"resources": _resources(4)}
    got = copy.deepcopy(sent)
    del got["resources"][2]
    removed, changes = check.compare(sent, got, "resources")
    assert removed == ["uri=file:///docs/2.md"]
    assert changes == []


def test_an_edit_is_reported_on_the_item_it_was_made_to():
    sent = {"resources": _resources(3)}
    got = copy.deepcopy(sent)
    got["resources"][1]["description"] = "part one, edited"
    removed, changes = check.compare(sent, got, "resources")
    assert removed == []
    assert [(c["at"], c["kind"]) for c in changes] == [("resources[uri=file:///docs/1.md].description", "visible")]


def test_templates_are_matched_by_uri_template():
    sent = {"resourceTemplates": [{"uriTemplate": f"db://{t}/{{id}}", "name": "row"} for t in ("a", "b", "c")]}
    got = {"resourceTemplates": [sent["resourceTemplates"][2], sent["resourceTemplates"][0]]}
    removed, changes = check.compare(sent, got, "resourceTemplates")
    assert removed == ["uriTemplate=db://b/{id}"]
    assert changes == []


def test_duplicate_tool_names_are_paired_in_order():
    first = {"name": "search", "description": "first"}
    second = {"name": "search", "description": "second"}
    sent = {"tools": [first, {"name": "other"}, second]}
    # the second duplicate is removed: the first stays paired with the first
    removed, changes = check.compare(sent, {"tools": [copy.deepcopy(first), {"name": "other"}]}, "tools")
    assert removed == ["name=search"]
    assert changes == []
    # both kept and the second edited: the change lands on the second
    got = {"tools": [copy.deepcopy(first), {"name": "other"}, {"name": "search", "description": "changed"}]}
    removed, changes = check.compare(sent, got, "tools")
    assert removed == []
    assert [c["before"] for c in changes] == ["second"]


def test_tools_are_matched_by_name_not_uri():
    sent = {"tools": [{"name": "a", "uri": "x"}, {"name": "b", "uri": "x"}]}
    assert check.compare(sent, copy.deepcopy(sent), "tools") == ([], [])


def test_an_item_the_gateway_adds_is_a_change():
    sent = {"prompts": [{"name": "p"}]}
    got = {"prompts": [{"name": "p"}, {"name": "q", "description": "new text"}]}
    removed, changes = check.compare(sent, got, "prompts")
    assert removed == []
    assert [(c["at"], c["kind"]) for c in changes] == [("prompts[+name=q]", "visible")]


def test_items_without_an_identity_are_paired_by_position():
    sent = {"tools": [{"description": "x"}, {"description": "y"}]}
    got = {"tools": [{"description": "x"}]}
    removed, changes = check.compare(sent, got, "tools")
    assert removed == ["#1"]
    assert changes == []
