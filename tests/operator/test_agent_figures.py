"""Topic status figures: coarse, and written only when a reader would care."""

from __future__ import annotations

from stratalog_operator.agent.figures import PartitionFigures, WritePolicy, significant, topic_entry


def entry(end: int = 1000, size: int = 123_456, segments: int = 3, ratio: float | None = None,
          retention: int | None = None) -> dict[str, object]:
    return topic_entry([PartitionFigures(0, 0, end, size, segments, ratio, retention)])


def test_sizes_are_rounded_to_two_significant_figures() -> None:
    assert entry()["partitions"]["0"]["sizeBytes"] == 120_000   # type: ignore[index]
    assert entry(size=42)["partitions"]["0"]["sizeBytes"] == 42   # type: ignore[index]


def test_retention_segments_and_dirty_ratio_moves_are_significant_small_drift_is_not() -> None:
    assert significant(entry(), entry(segments=2))
    assert significant(entry(), entry(retention=1_700_000_000_000))
    assert significant(entry(ratio=0.9), entry(ratio=0.1))
    assert not significant(entry(ratio=0.50), entry(ratio=0.55))
    assert not significant(entry(end=1000), entry(end=1050))
    assert significant(entry(end=1000), entry(end=1200))


def test_the_write_policy_never_writes_an_unchanged_entry_and_rate_limits_the_rest() -> None:
    policy = WritePolicy(min_interval=10, max_interval=300)
    assert policy.should_write(None, entry(), None, now=0)
    assert not policy.should_write(entry(), entry(), last_write=0, now=10_000)
    assert not policy.should_write(entry(), entry(segments=9), last_write=0, now=5)
    assert policy.should_write(entry(), entry(segments=9), last_write=0, now=10)
    assert not policy.should_write(entry(), entry(end=1010), last_write=0, now=299)
    assert policy.should_write(entry(), entry(end=1010), last_write=0, now=300)
