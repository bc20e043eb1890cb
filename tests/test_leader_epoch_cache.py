"""The leader-epoch cache against a model of Kafka's ``LeaderEpochFileCache`` rules.

Every change (assign, truncation from either end, clear) must leave three things agreeing: the
entries, the ``latest`` entry (what ``would_change`` holds an append against), and the checkpoint
file a fresh cache reads back. ``would_change`` must say exactly whether ``assign`` would change anything.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stratalog.storage.leader_epoch import LeaderEpochCache


def model_assign(entries: list[tuple[int, int]], epoch: int, start: int) -> list[tuple[int, int]]:
    if entries and entries[-1][0] == epoch and start >= entries[-1][1]:
        return entries
    return [(e, o) for e, o in entries if e < epoch and o < start] + [(epoch, start)]


def model_truncate_from_start(entries: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    below = [(e, o) for e, o in entries if o <= start]
    if not below:
        return entries
    return [(below[-1][0], start)] + [(e, o) for e, o in entries if o > start]


_ops = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 200)),
    st.tuples(st.just("truncate_from_end"), st.integers(0, 200)),
    st.tuples(st.just("truncate_from_start"), st.integers(0, 200)),
    st.tuples(st.just("clear")),
), max_size=30)


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_the_latest_entry_and_the_checkpoint_follow_every_change(tmp_path_factory, ops):
    directory = Path(tmp_path_factory.mktemp("epochs"))
    cache = LeaderEpochCache(directory)
    model: list[tuple[int, int]] = []
    for op in ops:
        if op[0] == "assign":
            _, epoch, start = op
            assert cache.would_change(epoch, start) == (model_assign(model, epoch, start) != model)
            cache.assign(epoch, start)
            model = model_assign(model, epoch, start)
        elif op[0] == "truncate_from_end":
            cache.truncate_from_end(op[1])
            model = [(e, o) for e, o in model if o < op[1]]
        elif op[0] == "truncate_from_start":
            cache.truncate_from_start(op[1])
            model = model_truncate_from_start(model, op[1])
        else:
            cache.clear()
            model = []
        assert cache.entries == model
        assert cache.latest == (model[-1] if model else None)
        reread = LeaderEpochCache(directory)
        assert reread.entries == model and reread.latest == cache.latest


def test_a_negative_epoch_never_changes_the_cache(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    assert not cache.would_change(-1, 0)
    cache.assign(3, 10)
    assert not cache.would_change(-1, 0) and cache.would_change(4, 10) and not cache.would_change(3, 11)
    assert cache.would_change(3, 9)   # the same epoch said to begin earlier: Kafka rewrites it
