"""A follower's append: its leader's whole batches written as they are (Kafka's ``appendAsFollower``).

The leader assigned the offsets and batch leader epochs; the follower checks each batch whole (its
CRC, and a transaction marker's records, as Kafka's ``ProducerAppendInfo`` reads them) before
anything is written, never lets offsets go back (a gap is fine: the leader's log may have been
compacted), and has its leader-epoch cache learn every epoch it sees. The common case, plain v2
batches after the log's end that need no roll, is checked by the native kernel and written in one
call (``LogSegment.try_append_batches``); the rest go batch by batch, which also names what is wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stratalog.common.errors import OffsetOutOfRangeError
from stratalog.records import follower_batches_natively, validate_batch
from stratalog.records.batch_header import CONTROL_BIT, TRANSACTIONAL_BIT
from stratalog.records.info import split_batches
from stratalog.records.transactions import check_marker
from stratalog.storage.segment import RollParams

if TYPE_CHECKING:
    from stratalog.storage.log import Log


def append_as_follower(log: Log, data: bytes) -> int:
    """Append a leader's whole batches to ``log`` as they are, or none of them and raise what is
    wrong with them; returns the new log end offset."""
    appended = _append_at_once(log, data)
    if appended is not None:
        return appended
    batches = list(split_batches(data))
    end = log.log_end_offset
    restart = None
    if (batches and batches[0][0].base_offset < end <= batches[0][0].last_offset
            and end == log.log_start_offset and log.size == 0):
        # An empty log starting inside the leader's first batch (a log start moved into a batch):
        # take the batch whole, starting the log at its base, as Kafka's appendAsFollower does;
        # the leader's log start offset is followed right after. Once every batch has passed.
        restart = end = batches[0][0].base_offset
    epochs: list[int | None] = []   # each batch's leader epoch, from the header its check read (v2 only)
    for info, batch in batches:
        if info.base_offset < end:
            raise OffsetOutOfRangeError(
                f"{log.topic_partition}: replicated batch at offset {info.base_offset} is below the "
                f"follower's log end offset {end}")
        epoch = None
        if info.magic >= 2:
            source = f"replicated batch of {log.topic_partition} at offset {info.base_offset}"
            header = validate_batch(batch, source=source)
            check_marker(batch, header, source=source)
            epoch = header.partition_leader_epoch
        epochs.append(epoch)
        end = info.last_offset + 1
    if restart is not None:
        log.truncate_fully_and_start_at(restart)
    with log.lock, log.failures.guard(log.log_dir, f"replicated append to {log.topic_partition}"):
        log.local.check_open()
        for (info, batch), epoch in zip(batches, epochs):
            segment = log.maybe_roll(info.size, info.max_timestamp, info.last_offset, log.clock(),
                                     first_offset=info.base_offset)
            segment.append(info.last_offset, info.max_timestamp, info.last_offset, batch)
            if epoch is not None:
                log.epoch_cache.assign(epoch, info.base_offset)
            log.producer_state.on_batch_written(batch)
        if log.log_end_offset - log.recovery_point >= log.config.flush_messages:
            log.flush()   # flush.messages holds for a follower's copy too
        return log.log_end_offset


def _append_at_once(log: Log, data: bytes) -> int | None:
    """``append_as_follower``'s common case in one call and one write: ``data`` is whole v2 batches
    the native kernel has checked, after this log's end, none of which rolls the segment or is a
    control batch. None, nothing written, otherwise: the batch-by-batch path then decides, and
    names what is wrong (a control batch's marker is read there, before the write)."""
    facts = follower_batches_natively(data)
    if not facts:
        return None
    end = log.log_end_offset
    for base_offset, last_offset, _, _, _, _, attributes in facts:
        if base_offset < end or last_offset < base_offset or attributes & CONTROL_BIT:
            return None
        end = last_offset + 1
    with log.lock, log.failures.guard(log.log_dir, f"replicated append to {log.topic_partition}"):
        log.local.check_open()
        params = RollParams(log.config.segment_ms, log.config.segment_bytes, max(f[2] for f in facts),
                            facts[-1][1], len(data), log.clock())
        placed = [(last, ts, size) for _, last, ts, size, _, _, _ in facts]
        if not log.active_segment.try_append_batches(data, placed, params):
            return None
        position = 0
        for base_offset, _, _, size, epoch, producer_id, attributes in facts:
            log.epoch_cache.assign(epoch, base_offset)
            if producer_id >= 0 or attributes & TRANSACTIONAL_BIT:   # what the producer or transaction state takes
                log.producer_state.on_batch_written(data[position:position + size])
            position += size
        if log.log_end_offset - log.recovery_point >= log.config.flush_messages:
            log.flush()
        return log.log_end_offset
