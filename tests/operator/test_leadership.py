"""Partition records in a Topic's status: read, written, and created from the assignment."""

from __future__ import annotations

from stratalog_operator.controller.leadership import initial_records
from stratalog_operator.election import records_of, render_records
from stratalog_operator.election import PartitionRecord

ASSIGNMENT = [{"partition": 0, "logDirs": ["dir-a", "dir-b"]}, {"partition": 1, "logDirs": ["dir-b", "dir-a"]}]


def test_a_partition_without_a_record_starts_led_by_its_preferred_replica_with_everyone_in_sync():
    created = initial_records(ASSIGNMENT, {})
    assert created == {0: PartitionRecord(0, ("dir-a", "dir-b"), "dir-a", 0, ("dir-a", "dir-b"), 0),
                       1: PartitionRecord(1, ("dir-b", "dir-a"), "dir-b", 0, ("dir-b", "dir-a"), 0)}


def test_an_existing_record_is_never_recreated_from_the_assignment():
    existing = {0: PartitionRecord(0, ("dir-a", "dir-b"), "dir-b", 4, ("dir-b",), 9)}
    assert set(initial_records(ASSIGNMENT, existing)) == {1}


def test_records_round_trip_through_the_status_form_and_malformed_entries_are_dropped():
    records = {0: PartitionRecord(0, ("dir-a", "dir-b"), None, 2, ("dir-a",), 5)}
    status = {"status": {"partitions": [*render_records(records), {"partition": 1, "replicas": "oops"}]}}
    assert render_records(records) == [{"partition": 0, "replicas": ["dir-a", "dir-b"], "leader": None,
                                        "leaderEpoch": 2, "isr": ["dir-a"], "partitionEpoch": 5}]
    assert records_of(status) == records
