"""Producer ids: handed out in blocks reserved on disk, so a restart never repeats one."""

from __future__ import annotations

import pytest

from stratalog.broker.producer_ids import BLOCK_FILE, BLOCK_SIZE, BROKER_SHIFT, ProducerIdAllocator, ProducerIdBlockError


def test_ids_follow_each_other_and_a_restart_starts_past_the_reserved_block(tmp_path):
    first = ProducerIdAllocator(tmp_path)
    assert [first.generate() for _ in range(3)] == [0, 1, 2]
    assert (tmp_path / BLOCK_FILE).read_text() == f"{BLOCK_SIZE}\n"   # reserved before the first was given
    restarted = ProducerIdAllocator(tmp_path)                         # 3..999 are skipped, never repeated
    assert restarted.generate() == BLOCK_SIZE
    ids = [restarted.generate() for _ in range(BLOCK_SIZE)]
    assert ids[-1] == 2 * BLOCK_SIZE and (tmp_path / BLOCK_FILE).read_text() == f"{3 * BLOCK_SIZE}\n"


def test_each_broker_has_ids_of_its_own(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert ProducerIdAllocator(tmp_path / "a", broker_id=2).generate() == 2 << BROKER_SHIFT
    assert ProducerIdAllocator(tmp_path / "b", broker_id=3).generate() == 3 << BROKER_SHIFT


def test_the_largest_broker_id_an_agent_can_have_still_gives_int64_producer_ids(tmp_path):
    largest = (1 << 31) - 1                               # an agent's broker id is a 31-bit hash
    assert ProducerIdAllocator(tmp_path, broker_id=largest).generate() < 1 << 63
    with pytest.raises(ValueError, match="int64"):
        ProducerIdAllocator(tmp_path, broker_id=1 << 31)


def test_a_damaged_block_file_is_refused_by_name(tmp_path):
    (tmp_path / BLOCK_FILE).write_text("12ab\n")
    with pytest.raises(ProducerIdBlockError, match=f"{BLOCK_FILE}.*'12ab'"):
        ProducerIdAllocator(tmp_path).generate()
