"""kube.is_subset: desired vs actual the way the API server stores objects (defaults added, quantities
canonicalised, keyed lists merged with other writers' entries)."""

from __future__ import annotations

import pytest

from stratalog_operator.kube import is_subset


def test_fields_the_server_defaults_are_not_differences() -> None:
    desired = {"spec": {"replicas": 1, "serviceName": "a"}}
    actual = {"spec": {"replicas": 1, "serviceName": "a", "revisionHistoryLimit": 10,
                       "podManagementPolicy": "OrderedReady"}, "status": {"replicas": 0}}
    assert is_subset(desired, actual)
    assert not is_subset({"spec": {"replicas": 2}}, actual)
    assert not is_subset({"spec": {"selector": {"a": "b"}}}, actual)     # missing field


def test_missing_actual_is_empty() -> None:
    assert is_subset({}, None)
    assert is_subset([], None)
    assert is_subset({"a": {}}, {})
    assert not is_subset({"a": 1}, None)
    assert not is_subset({"a": [1]}, {})


def test_type_mismatches_differ() -> None:
    assert not is_subset({"a": 1}, "x")
    assert not is_subset([1], {"a": 1})
    assert not is_subset({"a": {"b": 1}}, {"a": [1]})


@pytest.mark.parametrize("desired, actual, equal", [
    ("1Gi", "1Gi", True),
    ("1Gi", "1024Mi", True),
    ("10Gi", "10737418240", True),
    ("500m", "0.5", True),
    (1, "1", True),
    ("2", 2, True),
    ("1Gi", "2Gi", False),
    ("1G", "1Gi", False),
    ("http", "HTTP", False),          # not quantities: plain string equality
    ("http", "http", True),
    (8092, 8093, False),
], ids=str)
def test_quantities_compare_by_value(desired: object, actual: object, equal: bool) -> None:
    assert is_subset({"storage": desired}, {"storage": actual}) is equal


def test_keyed_lists_match_by_key_in_any_order_with_extra_entries_allowed() -> None:
    desired = {"containers": [{"name": "agent", "image": "img:1"}]}
    actual = {"containers": [{"name": "sidecar", "image": "other"},
                             {"name": "agent", "image": "img:1", "terminationMessagePath": "/dev/termination-log"}]}
    assert is_subset(desired, actual)
    assert not is_subset({"containers": [{"name": "agent", "image": "img:2"}]}, actual)
    assert not is_subset({"containers": [{"name": "missing"}]}, actual)


@pytest.mark.parametrize("key", ["type", "name", "partition", "containerPort"])
def test_each_list_map_key_is_recognised(key: str) -> None:
    desired = [{key: 1, "v": "x"}, {key: 2, "v": "y"}]
    actual = [{key: 2, "v": "y"}, {key: 1, "v": "x"}, {key: 3, "v": "z"}]
    assert is_subset(desired, actual)
    assert not is_subset([{key: 1, "v": "changed"}], actual)


def test_conditions_by_type_ignore_other_writers() -> None:
    desired = {"conditions": [{"type": "Ready", "status": "False"}]}
    actual = {"conditions": [{"type": "DiskPressure", "status": "True"},
                             {"type": "Ready", "status": "False", "lastTransitionTime": "t"}]}
    assert is_subset(desired, actual)
    assert not is_subset({"conditions": [{"type": "Ready", "status": "True"}]}, actual)


def test_plain_lists_compare_in_order_and_length() -> None:
    command = ["stratalog", "agent", "--data-dir", "/a"]
    assert is_subset(command, list(command))
    assert not is_subset(command, command + ["--data-dir", "/b"])
    assert not is_subset(command, list(reversed(command)))
    assert not is_subset(command[:-1], command)
    assert is_subset([{"a": 1}], [{"a": 1, "b": 2}])          # unkeyed objects: position by position


def test_an_empty_desired_list_means_empty() -> None:
    assert not is_subset({"ownerReferences": []}, {"ownerReferences": [{"uid": "u"}]})
    assert is_subset({"ownerReferences": []}, {})
