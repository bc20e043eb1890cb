"""Idempotent producers, as Kafka's ProducerStateManagerTest checks them: the pure rules, then a log
that keeps them across appends, retries and a restart."""

from __future__ import annotations

import pytest

from stratalog.common.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from stratalog.records import Record, build_batch
from stratalog.storage.producer_state import INT32_MAX, ProducerStates, last_sequence

PID = 1000


def written(states: ProducerStates, epoch: int, first_seq: int, records: int, first_offset: int) -> None:
    assert states.check(PID, epoch, first_seq, last_sequence(first_seq, records - 1), "t-0") is None
    states.on_batch(PID, epoch, first_seq, records - 1, first_offset)


def test_a_batch_that_follows_the_last_is_new_and_any_of_the_last_five_is_a_repeat():
    states = ProducerStates()
    for n in range(7):                                  # batches of 2: sequences 0-1, 2-3, ... 12-13
        written(states, 0, 2 * n, 2, 10 * n)
    for n in range(2, 7):                               # the last five are recognised, with their offsets
        repeat = states.check(PID, 0, 2 * n, 2 * n + 1, "t-0")
        assert repeat is not None and (repeat.first_offset, repeat.last_offset) == (10 * n, 10 * n + 1)
    with pytest.raises(OutOfOrderSequenceError, match="ended at 13"):
        states.check(PID, 0, 2, 3, "t-0")               # older than the five kept: out of order, not a repeat
    with pytest.raises(OutOfOrderSequenceError):
        states.check(PID, 0, 15, 15, "t-0")             # a gap
    assert states.check(PID, 0, 14, 20, "t-0") is None


def test_an_older_epoch_is_fenced_and_a_newer_one_starts_at_sequence_0():
    states = ProducerStates()
    written(states, 3, 0, 5, 0)
    with pytest.raises(InvalidProducerEpochError, match="fenced"):
        states.check(PID, 2, 5, 5, "t-0")
    with pytest.raises(OutOfOrderSequenceError, match="must start at sequence 0"):
        states.check(PID, 4, 5, 5, "t-0")
    written(states, 4, 0, 1, 5)
    with pytest.raises(InvalidProducerEpochError):
        states.check(PID, 3, 5, 5, "t-0")               # the new epoch fenced the old one


def test_an_unknown_producer_may_start_at_any_sequence():
    states = ProducerStates()                            # its state went with retention or a restart
    assert states.check(PID, 7, 4242, 4250, "t-0") is None


def test_sequences_wrap_past_the_largest_int32():
    states = ProducerStates()
    written(states, 0, INT32_MAX - 1, 2, 0)              # INT32_MAX - 1 .. INT32_MAX
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert states.check(PID, 0, 0, 1, "t-0") is None


# -- in a log --------------------------------------------------------------------------------------------
def idempotent_batch(first_seq: int, count: int, *, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch([Record(i, 1_700_000_000_000 + i, None, b"v%d" % (first_seq + i)) for i in range(count)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=first_seq)


def test_a_retried_batch_gets_its_first_offsets_and_is_not_written_twice(make_log):
    log = make_log()
    first = log.append(idempotent_batch(0, 3))
    log.append(idempotent_batch(3, 2))
    size = log.size
    again = log.append(idempotent_batch(0, 3))
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (0, 2)
    assert log.size == size and log.log_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(9, 1))
    assert log.size == size


def test_the_producers_state_is_found_again_after_a_restart(make_log):
    log = make_log("t-0")
    log.append(idempotent_batch(0, 3))
    log.append(idempotent_batch(3, 3))
    log.close()
    reopened = make_log("t-0")
    again = reopened.append(idempotent_batch(3, 3))
    assert (again.first_offset, again.last_offset) == (3, 5) and reopened.log_end_offset == 6
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(idempotent_batch(7, 1))         # 6 is next
    reopened.append(idempotent_batch(0, 1, epoch=1))   # the producer's new epoch
    with pytest.raises(InvalidProducerEpochError):
        reopened.append(idempotent_batch(6, 1, epoch=0))


def test_an_out_of_order_batch_among_several_refuses_them_all(make_log):
    log = make_log()
    log.append(idempotent_batch(0, 2))
    size = log.size
    with pytest.raises(OutOfOrderSequenceError):
        log.append_batches([idempotent_batch(2, 2), idempotent_batch(7, 1)])   # the second skips 4..6
    assert log.size == size and log.log_end_offset == 2
    infos = log.append_batches([idempotent_batch(2, 2), idempotent_batch(4, 1)])
    assert [(i.first_offset, i.last_offset) for i in infos] == [(2, 3), (4, 4)]


# -- expiration (producer.id.expiration.ms) ---------------------------------------------------------------

def test_a_producer_idle_past_the_expiration_is_forgotten_unless_its_transaction_is_open():
    states = ProducerStates()
    states.on_batch(1, 0, 0, 0, 0, max_timestamp=1_000)        # idle since 1 000
    states.on_batch(2, 0, 0, 0, 1, max_timestamp=5_000)        # recent
    states.on_batch(3, 0, 0, 0, 2, max_timestamp=1_000)        # idle, but its transaction is open
    assert states.remove_expired(now_ms=11_000, expiration_ms=10_000, open_transactions={3: 2}) == [1]
    assert sorted(states.producers) == [2, 3]
    assert states.remove_expired(now_ms=14_999, expiration_ms=10_000, open_transactions={3: 2}) == []


def test_a_log_forgets_expired_producers_which_may_then_start_at_any_sequence(make_log):
    log = make_log()
    log.append(idempotent_batch(0, 3))                          # timestamps 1_700_000_000_000..002
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idempotent_batch(9, 1))
    assert log.remove_expired_producers(1_700_000_000_002 + 1000, 1000) == 1
    info = log.append(idempotent_batch(9, 1))                   # unknown again: KIP-360
    assert info.first_offset == 3


def test_the_engine_forgets_expired_producers_on_its_schedule_under_kafkas_settings(tmp_path):
    from stratalog.broker.engine import Engine
    from stratalog.broker.topics import TopicAdmin
    from stratalog.common.config import EngineConfig
    config = EngineConfig.from_properties({"producer.id.expiration.ms": "1000",
                                           "producer.id.expiration.check.interval.ms": "50",
                                           "log.initial.task.delay.ms": "0"})
    assert (config.producer_id_expiration_ms, config.producer_id_expiration_check_interval_ms) == (1000, 50)
    assert EngineConfig.defaults().producer_id_expiration_ms == 86_400_000   # Kafka's day
    engine = Engine([tmp_path / "data"], {"producer.id.expiration.ms": "1000",
                                          "producer.id.expiration.check.interval.ms": "50",
                                          "log.initial.task.delay.ms": "0"}).start()
    try:
        TopicAdmin(engine.manager).create_topic("t", 1, {})
        log = engine.manager.get_log("t", 0)
        log.append(idempotent_batch(0, 1))                     # a timestamp long past
        import time
        deadline = time.monotonic() + 10
        while log.producer_state.producers is not None and log.producer_state.producers.producers and time.monotonic() < deadline:
            time.sleep(0.05)
        assert log.producer_state.producers is not None and log.producer_state.producers.producers == {}
        assert engine.tasks["producer-expiration"].runs >= 1
    finally:
        engine.stop()
