"""Replica assignment (seed 004's rule): partition i on LogDir i mod n, replica j on (i + j) mod n over
the sorted LogDirs; partitions already placed stay where they are."""

from __future__ import annotations

from stratalog_operator.assignment import by_rule, parse_assignment, plan_assignment, render_assignment

# The worked example: 6 partitions × 2 replicas over three LogDirs.
DIRS = ["dir-b", "dir-c", "dir-d"]
WORKED = {
    0: ["dir-b", "dir-c"],
    1: ["dir-c", "dir-d"],
    2: ["dir-d", "dir-b"],
    3: ["dir-b", "dir-c"],
    4: ["dir-c", "dir-d"],
    5: ["dir-d", "dir-b"],
}


def test_rule_places_partition_i_replica_j_on_sorted_dir_i_plus_j_mod_n() -> None:
    assert {p: by_rule(p, 2, DIRS) for p in range(6)} == WORKED


def test_rule_sorts_the_logdirs_first() -> None:
    assert by_rule(0, 3, ["dir-d", "dir-b", "dir-c"]) == ["dir-b", "dir-c", "dir-d"]
    assert by_rule(1, 1, ["z", "a"]) == ["z"]


def test_fresh_topic_gets_the_worked_example() -> None:
    plan = plan_assignment(6, 2, DIRS, {})
    assert plan.assignment == WORKED
    assert plan.satisfiable
    assert plan.reason == "Assigned"
    assert plan.message == "6 partitions × 2 replicas on 3 LogDirs"
    assert plan.moved == []


def test_message_uses_singulars() -> None:
    assert plan_assignment(1, 1, ["a"], {}).message == "1 partition × 1 replica on 1 LogDir"


def test_growing_partitions_keeps_existing_partitions_and_places_new_ones_by_rule() -> None:
    plan = plan_assignment(8, 2, DIRS, WORKED)
    assert {p: plan.assignment[p] for p in range(6)} == WORKED
    assert plan.assignment[6] == ["dir-b", "dir-c"]
    assert plan.assignment[7] == ["dir-c", "dir-d"]
    assert plan.moved == []


def test_adding_a_logdir_moves_nothing_and_new_partitions_use_it() -> None:
    dirs = DIRS + ["dir-a"]               # sorts first: the rule over four dirs differs everywhere
    plan = plan_assignment(6, 2, dirs, WORKED)
    assert plan.assignment == WORKED
    assert plan.moved == []
    assert plan.message == "6 partitions × 2 replicas on 4 LogDirs"
    grown = plan_assignment(8, 2, dirs, WORKED)
    assert {p: grown.assignment[p] for p in range(6)} == WORKED
    assert grown.assignment[6] == ["dir-c", "dir-d"]     # sorted [a, b, c, d]: 6 mod 4 = 2
    assert grown.assignment[7] == ["dir-d", "dir-a"]


def test_partitions_on_a_vanished_logdir_are_replaced_by_rule_over_what_remains() -> None:
    plan = plan_assignment(6, 2, ["dir-b", "dir-d"], WORKED)     # dir-c is gone
    assert plan.satisfiable
    assert plan.assignment == {
        0: ["dir-b", "dir-d"],       # had dir-c: by rule over [b, d]
        1: ["dir-d", "dir-b"],       # had dir-c
        2: ["dir-d", "dir-b"],       # untouched
        3: ["dir-d", "dir-b"],       # had dir-c
        4: ["dir-b", "dir-d"],       # had dir-c
        5: ["dir-d", "dir-b"],       # untouched
    }
    assert plan.moved == [0, 1, 3, 4]


def test_a_changed_replica_count_replaces_every_partition() -> None:
    plan = plan_assignment(3, 1, DIRS, {p: WORKED[p] for p in range(3)})
    assert plan.assignment == {0: ["dir-b"], 1: ["dir-c"], 2: ["dir-d"]}
    assert plan.moved == [0, 1, 2]


def test_a_partition_with_a_repeated_logdir_is_replaced() -> None:
    plan = plan_assignment(1, 2, DIRS, {0: ["dir-b", "dir-b"]})
    assert plan.assignment == {0: ["dir-b", "dir-c"]}
    assert plan.moved == [0]


def test_duplicate_logdir_names_count_once() -> None:
    plan = plan_assignment(2, 2, ["b", "a", "b"], {})
    assert plan.assignment == {0: ["a", "b"], 1: ["b", "a"]}
    assert plan.message.endswith("on 2 LogDirs")


def test_more_replicas_than_logdirs_is_unsatisfiable_and_keeps_the_assignment() -> None:
    current = {0: ["dir-b", "dir-c"], 1: ["dir-c", "dir-d"]}
    plan = plan_assignment(4, 3, ["dir-c", "dir-b"], current)
    assert not plan.satisfiable
    assert plan.reason == "InsufficientLogDirs"
    assert plan.message == "3 replicas need 3 LogDirs but only 2 LogDirs are selected (dir-b, dir-c)"
    assert plan.assignment == current
    assert plan.assignment[0] is not current[0]      # a copy: the caller's state is not shared
    assert plan.moved == []


def test_insufficient_messages_for_one_and_no_logdir() -> None:
    assert plan_assignment(1, 2, ["a"], {}).message == "2 replicas need 2 LogDirs but only 1 LogDir is selected (a)"
    none = plan_assignment(1, 1, [], {})
    assert not none.satisfiable
    assert none.message.endswith("but no LogDir is selected")
    assert none.assignment == {}


def test_status_round_trip() -> None:
    rendered = render_assignment({1: ["b"], 0: ["a", "b"]})
    assert rendered == [{"partition": 0, "logDirs": ["a", "b"]}, {"partition": 1, "logDirs": ["b"]}]
    assert parse_assignment(rendered) == {0: ["a", "b"], 1: ["b"]}


def test_parse_skips_malformed_entries() -> None:
    assert parse_assignment(None) == {}
    assert parse_assignment([{"partition": "0", "logDirs": ["a"]}, {"partition": 1, "logDirs": "a"},
                             {"logDirs": ["a"]}, {"partition": 2, "logDirs": ["c"]}]) == {2: ["c"]}
