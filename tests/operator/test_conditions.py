"""Conditions in Kubernetes' format: lastTransitionTime moves only when a condition's status changes."""

from __future__ import annotations

import re

from stratalog_operator.conditions import Condition, condition, merge_conditions, now_rfc3339

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def _ready(status: bool | None, reason: str = "AgentNotReady", message: str = "waiting") -> Condition:
    return Condition("Ready", status, reason, message)


def test_a_new_condition_starts_now_with_the_generation() -> None:
    [ready] = merge_conditions(None, [_ready(False)], generation=3, now=T0)
    assert ready == {"type": "Ready", "status": "False", "reason": "AgentNotReady", "message": "waiting",
                     "lastTransitionTime": T0, "observedGeneration": 3}


def test_same_status_with_new_reason_and_message_keeps_the_transition_time() -> None:
    before = merge_conditions(None, [_ready(False)], generation=1, now=T0)
    [after] = merge_conditions(before, [_ready(False, "InvalidSettings", "bad key")], generation=2, now=T1)
    assert after["lastTransitionTime"] == T0
    assert (after["reason"], after["message"], after["observedGeneration"]) == ("InvalidSettings", "bad key", 2)


def test_a_status_change_moves_the_transition_time() -> None:
    before = merge_conditions(None, [_ready(False)], generation=1, now=T0)
    [after] = merge_conditions(before, [_ready(True, "AgentReady", "ready")], generation=1, now=T1)
    assert after["status"] == "True"
    assert after["lastTransitionTime"] == T1
    [unknown] = merge_conditions([after], [_ready(None, "Unknown", "?")], generation=1, now=T0)
    assert unknown["status"] == "Unknown" and unknown["lastTransitionTime"] == T0


def test_without_a_generation_the_old_observed_generation_is_kept() -> None:
    before = merge_conditions(None, [_ready(False)], generation=4, now=T0)
    [after] = merge_conditions(before, [_ready(False)], generation=None, now=T1)
    assert after["observedGeneration"] == 4
    [fresh] = merge_conditions(None, [_ready(False)], generation=None, now=T1)
    assert "observedGeneration" not in fresh


def test_conditions_of_other_writers_are_kept_unless_told_otherwise() -> None:
    agent = {"type": "DiskPressure", "status": "False", "reason": "Enough", "message": "",
             "lastTransitionTime": T0}
    kept = merge_conditions([agent], [_ready(False)], generation=1, now=T1)
    assert [c["type"] for c in kept] == ["DiskPressure", "Ready"]
    assert kept[0] == agent
    dropped = merge_conditions([agent], [_ready(False)], generation=1, now=T1, keep_others=False)
    assert [c["type"] for c in dropped] == ["Ready"]


def test_result_is_sorted_by_type_so_equal_states_compare_equal() -> None:
    wanted = [Condition("StorageResizing", False, "NotResizing", ""), _ready(False),
              Condition("ReconciliationPaused", False, "NotPaused", "")]
    first = merge_conditions(None, wanted, generation=1, now=T0)
    assert [c["type"] for c in first] == ["Ready", "ReconciliationPaused", "StorageResizing"]
    assert merge_conditions(first, list(reversed(wanted)), generation=1, now=T1) == first


def test_condition_lookup_and_clock_format() -> None:
    conds = merge_conditions(None, [_ready(True, "AgentReady", "")], generation=1, now=T0)
    assert condition(conds, "Ready") is not None
    assert condition(conds, "Missing") is None
    assert condition(None, "Ready") is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now_rfc3339())
