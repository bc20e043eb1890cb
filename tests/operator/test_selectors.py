"""A Topic's logDirSelector evaluated in memory with the API server's LabelSelector semantics."""

from __future__ import annotations

from typing import Any

import pytest

from stratalog_operator.selectors import SelectorError, matches

LABELS = {"pool": "fast", "zone": "a"}


@pytest.mark.parametrize("selector", [None, {}, {"matchLabels": {}}, {"matchExpressions": []}])
def test_an_empty_selector_selects_everything(selector: dict[str, Any] | None) -> None:
    assert matches(selector, LABELS)
    assert matches(selector, None)


def test_match_labels_must_all_be_equal() -> None:
    assert matches({"matchLabels": {"pool": "fast"}}, LABELS)
    assert matches({"matchLabels": {"pool": "fast", "zone": "a"}}, LABELS)
    assert not matches({"matchLabels": {"pool": "fast", "zone": "b"}}, LABELS)
    assert not matches({"matchLabels": {"pool": "fast"}}, None)


@pytest.mark.parametrize("expr, selected", [
    ({"key": "pool", "operator": "In", "values": ["fast", "slow"]}, True),
    ({"key": "pool", "operator": "In", "values": ["slow"]}, False),
    ({"key": "tier", "operator": "In", "values": ["x"]}, False),
    ({"key": "pool", "operator": "NotIn", "values": ["slow"]}, True),
    ({"key": "pool", "operator": "NotIn", "values": ["fast"]}, False),
    ({"key": "tier", "operator": "NotIn", "values": ["x"]}, True),       # a missing key is "not in"
    ({"key": "zone", "operator": "Exists"}, True),
    ({"key": "tier", "operator": "Exists"}, False),
    ({"key": "tier", "operator": "DoesNotExist"}, True),
    ({"key": "zone", "operator": "DoesNotExist"}, False),
], ids=["in", "not-in-values", "in-missing-key", "notin", "notin-listed", "notin-missing-key",
        "exists", "exists-missing", "does-not-exist", "does-not-exist-present"])
def test_match_expressions(expr: dict[str, Any], selected: bool) -> None:
    assert matches({"matchExpressions": [expr]}, LABELS) is selected


def test_labels_and_expressions_are_anded() -> None:
    selector = {"matchLabels": {"pool": "fast"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    assert not matches(selector, LABELS)
    assert matches(selector, {"pool": "fast", "zone": "b"})


@pytest.mark.parametrize("expr, words", [
    ({"key": "pool", "operator": "In", "values": []}, "operator In needs at least one value"),
    ({"key": "pool", "operator": "NotIn"}, "operator NotIn needs at least one value"),
    ({"key": "pool", "operator": "Exists", "values": ["x"]}, "operator Exists takes no values"),
    ({"key": "pool", "operator": "Gt", "values": ["1"]}, "unknown operator 'Gt'"),
])
def test_unusable_expressions_raise_naming_the_index(expr: dict[str, Any], words: str) -> None:
    selector = {"matchExpressions": [{"key": "zone", "operator": "Exists"}, expr]}
    with pytest.raises(SelectorError) as info:
        matches(selector, LABELS)
    assert str(info.value) == f"logDirSelector.matchExpressions[1]: {words}"
