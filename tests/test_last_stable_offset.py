"""The last stable offset: a read_committed reader stops at the first transaction that may still abort.

Transactional batches reach an engine's log only in a log Kafka wrote, or as a follower copies its
leader's (the engine's own producers may not write them: it has no transaction coordinator), so the
logs here are written with ``append_raw`` and ``append_as_follower``, as those are. A real Kafka
broker's transactions are read in test_kafka_broker_interop.py.
"""

from __future__ import annotations

import pytest

from conftest import batch
from stratalog.common.errors import InvalidTxnStateError
from stratalog.records import ControlRecordType, Record, build_batch, decode_records, iter_batch_infos, parse_header
from stratalog.records.control import build_end_txn_marker_batch
from stratalog.records.transactions import AbortedTransaction, TransactionState
from stratalog.storage.isolation import FetchIsolation

T = 1_700_000_000_000


def data(offset: int, producer: int, *values: bytes) -> bytes:
    """A producer's transactional batch at ``offset`` (its offsets as a log would hold them)."""
    return build_batch([Record(offset + i, T, b"k", v) for i, v in enumerate(values)], base_offset=offset,
                       producer_id=producer, producer_epoch=0, base_sequence=0, is_transactional=True)


def marker(offset: int, producer: int, kind: ControlRecordType) -> bytes:
    return build_end_txn_marker_batch(kind, producer_id=producer, producer_epoch=0, coordinator_epoch=0,
                                      base_offset=offset, timestamp=T)


def plain(offset: int, value: bytes) -> bytes:
    return build_batch([Record(offset, T, b"k", value)], base_offset=offset)


COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def values_read(log, isolation: FetchIsolation) -> list[bytes]:
    """What a consumer would get: records below the read's bound, aborted transactions and markers skipped."""
    fetched = log.read(log.log_start_offset, 1 << 20, isolation=isolation)
    aborted = {(t.producer_id, t.first_offset, t.last_offset) for t in fetched.aborted_transactions or ()}
    out = []
    for info in iter_batch_infos(fetched.data):
        raw = fetched.data[info.position: info.position + info.size]
        records = decode_records(raw)
        header = parse_header(raw)
        if header.is_control or any(p == header.producer_id and f <= info.base_offset <= e for p, f, e in aborted):
            continue
        out.extend(r.value for r in records)
    return out


# -- the state, without a log ------------------------------------------------------------------------

def test_an_open_transaction_is_unstable_from_its_first_batch_until_its_marker_is_below_the_high_watermark():
    state = TransactionState()
    state.on_batch(plain(0, b"p"))
    state.on_batch(data(1, 7, b"a"))
    state.on_batch(data(2, 8, b"b"))
    state.on_batch(data(3, 7, b"c"))
    assert state.first_unstable_offset(high_watermark=4) == 1
    state.on_batch(marker(4, 7, COMMIT))
    # Producer 7's marker is at 4: until the high watermark passes it, its transaction may still vanish
    # with a leader change (Kafka's unreplicated transactions).
    assert state.first_unstable_offset(high_watermark=4) == 1
    assert state.first_unstable_offset(high_watermark=5) == 2
    state.on_batch(marker(5, 8, ABORT))
    assert state.first_unstable_offset(high_watermark=6) is None
    assert state.aborted_between(0, None) == [AbortedTransaction(8, 2, 5)]


def test_aborted_transactions_are_those_a_read_of_the_range_meets():
    state = TransactionState()
    for raw in (data(0, 1, b"a"), marker(1, 1, ABORT), data(2, 2, b"b"), marker(3, 2, ABORT),
                data(4, 3, b"c"), marker(5, 3, ABORT)):
        state.on_batch(raw)
    assert [t.producer_id for t in state.aborted_between(2, 4)] == [2]
    assert [t.producer_id for t in state.aborted_between(1, 5)] == [1, 2, 3]
    state.forget_below(2)
    assert [t.producer_id for t in state.aborted_between(0, None)] == [2, 3]


def test_a_marker_with_no_data_before_it_ends_nothing_open_and_holds_nothing():
    state = TransactionState()
    state.on_batch(data(0, 1, b"a"))
    state.on_batch(marker(1, 2, ABORT))    # producer 2's data was cleaned away
    assert state.first_unstable_offset(high_watermark=2) == 0
    assert state.aborted_between(0, None) == [AbortedTransaction(2, 1, 1)]


# -- a log --------------------------------------------------------------------------------------------

def test_read_committed_stops_at_an_open_transaction_that_read_uncommitted_passes(make_log):
    log = make_log()
    log.append_raw(plain(0, b"before") + data(1, 7, b"t1", b"t2") + plain(3, b"after"))
    assert log.last_stable_offset() == 1
    assert values_read(log, FetchIsolation.HIGH_WATERMARK) == [b"before", b"t1", b"t2", b"after"]
    assert values_read(log, FetchIsolation.TXN_COMMITTED) == [b"before"]
    assert log.read(1, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).data == b""

    log.append_raw(marker(4, 7, COMMIT))
    assert log.last_stable_offset() == 5 == log.high_watermark
    assert values_read(log, FetchIsolation.TXN_COMMITTED) == [b"before", b"t1", b"t2", b"after"]


def test_a_read_committed_read_names_the_aborted_transactions_it_meets(make_log):
    log = make_log()
    log.append_raw(data(0, 7, b"kept") + data(1, 8, b"dropped") + marker(2, 8, ABORT) + marker(3, 7, COMMIT))
    fetched = log.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED)
    assert fetched.last_stable_offset == 4
    assert fetched.aborted_transactions == (AbortedTransaction(8, 1, 2),)
    assert values_read(log, FetchIsolation.TXN_COMMITTED) == [b"kept"]
    assert log.read(0, 1 << 20).aborted_transactions is None   # read_uncommitted: Kafka's null


def test_the_state_is_scanned_from_the_segments_when_the_log_is_opened_again(make_log):
    log = make_log(segment_bytes=200)
    log.append_raw(data(0, 7, b"x" * 50))
    for offset in range(1, 6):
        log.append_raw(plain(offset, b"y" * 50))     # several segments past the open transaction's start
    log.append_raw(data(6, 8, b"z") + marker(7, 8, ABORT))
    assert len(log.segments) > 2
    log.close()
    reopened = make_log(segment_bytes=200, clean=True)
    assert reopened.last_stable_offset() == 0
    reopened.append_raw(marker(8, 7, COMMIT))      # the first transaction ends after the reopen
    assert reopened.last_stable_offset() == 9
    assert reopened.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).aborted_transactions == (
        AbortedTransaction(8, 6, 7),)


def test_truncating_a_marker_away_opens_its_transaction_again(make_log):
    log = make_log()
    log.append_raw(plain(0, b"p") + data(1, 7, b"t") + marker(2, 7, COMMIT) + plain(3, b"q"))
    assert log.last_stable_offset() == 4
    log.truncate_to(2)   # a follower's truncation cuts the marker: the transaction is open again
    assert log.last_stable_offset() == 1
    log.truncate_fully_and_start_at(10)
    assert log.last_stable_offset() == 10


def test_a_follower_copy_is_stable_only_below_its_high_watermark(make_log):
    log = make_log()
    log.hw_follows_leo = False   # replicated: the leader's fetch answers move the high watermark
    assert log.last_stable_offset() == 0          # known before the copy: each append keeps it current
    log.append_as_follower(plain(0, b"p") + data(1, 7, b"t") + marker(2, 7, COMMIT))
    log.set_high_watermark(2)
    assert log.last_stable_offset() == 1          # the marker is not committed yet
    log.set_high_watermark(3)
    assert log.last_stable_offset() == 3


def test_retention_past_an_aborted_transaction_forgets_it(make_log):
    log = make_log()
    log.append_raw(data(0, 8, b"a") + marker(1, 8, ABORT) + plain(2, b"p") + plain(3, b"q"))
    assert log.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).aborted_transactions
    log.maybe_increment_log_start_offset(2)
    assert log.read(2, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED).aborted_transactions == ()


def test_a_producer_may_not_write_a_transactional_batch(make_log):
    log = make_log()
    transactional = build_batch([Record(0, T, b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=0,
                                is_transactional=True)
    with pytest.raises(InvalidTxnStateError, match="producer id 7 is transactional.*no transaction coordinator"):
        log.append(transactional)
    assert log.log_end_offset == 0
    log.append(batch(1))   # idempotent or plain batches are fine
    assert log.last_stable_offset() == 1


# -- through stratalog serve ----------------------------------------------------------------------------

def served(tmp_path, *batches: bytes):
    """A real ``stratalog serve`` over a directory whose partition t-0 holds ``batches``."""
    from server_harness import Server
    from stratalog.common.config import LogConfig
    from stratalog.common.names import TopicPartition
    from stratalog.storage.loader import load_log

    root = tmp_path / "data"
    (root / "t-0").mkdir(parents=True)
    log, _ = load_log(root / "t-0", TopicPartition("t", 0), LogConfig.from_overrides({}), recovery_point=0,
                      had_clean_shutdown=False)
    log.append_raw(b"".join(batches))
    log.close()
    return Server([root], log_path=tmp_path / "serve.log").start()


def test_a_producer_that_aborts_then_commits_is_read_committed_for_its_second_transaction(tmp_path):
    server = served(tmp_path, data(0, 7, b"aborted"), marker(1, 7, ABORT), data(2, 7, b"committed"),
                    marker(3, 7, COMMIT), marker(4, 8, ABORT), data(5, 8, b"after-a-bare-abort"),
                    marker(6, 8, COMMIT))
    try:
        read = server.fetch_json("t", 0, 0, isolation="read_committed")
        assert [r["value"] for r in read["records"]] == ["committed", "after-a-bare-abort"], read
        assert "X-Aborted-Transactions" not in server.get("/v1/topics/t/partitions/0/records",
                                                          params={"isolation": "read_committed"}).headers
    finally:
        server.terminate()


def test_a_read_committed_fetch_at_the_lso_under_many_aborted_transactions_answers_nothing_without_error(tmp_path):
    many = 201   # more than a header carries: the binary answer serves fewer batches, here none at all
    server = served(tmp_path, *(data(i, 1000 + i, b"x") for i in range(many)), data(many, 1, b"open"),
                    *(marker(many + 1 + i, 1000 + i, ABORT) for i in range(many)))
    try:
        reply = server.get("/v1/topics/t/partitions/0/records",
                           params={"offset": many, "isolation": "read_committed", "format": "binary"})
        assert reply.status_code == 200 and reply.content == b"", reply.text
        assert reply.headers["X-Last-Stable-Offset"] == str(many) and reply.headers["X-Aborted-Transactions"] == ""
        first = server.get("/v1/topics/t/partitions/0/records",
                           params={"offset": 0, "isolation": "read_committed", "format": "binary"})
        assert first.status_code == 200 and len(first.headers["X-Aborted-Transactions"].split(",")) <= 200
    finally:
        server.terminate()
