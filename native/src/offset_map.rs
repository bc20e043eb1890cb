//! The cleaner's key → latest-offset map (`stratalog.storage.cleaner.offset_map.OffsetMap`'s twin),
//! and the cleaner's walks that use it: mapping a batch's keys, filtering and rebuilding a batch.
//!
//! Kafka's `SkimpyOffsetMap` keeps only an MD5 of each key, so two keys with one digest share
//! a slot and one of them loses its latest record. This map keeps the key bytes themselves (in
//! one arena; a table entry is 16 bytes: where the key is, and its offset), so a shared hash
//! costs a comparison, never a record. Its real allocation (table and arena) is what counts
//! against `log.cleaner.dedupe.buffer.size` × load factor: with Kafka's usual short keys that
//! is about 32 bytes a key, near Kafka's 24-byte slots at 0.9 load.

use hashbrown::{DefaultHashBuilder, HashTable};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::hash::BuildHasher;

use crate::encode::{put_headers, put_nullable, put_varint};
use crate::walk::{walk, RecordSpans};
use crate::fault::Fault;
use crate::{be, raise, Bytes};

#[derive(Clone, Copy)]
struct Entry {
    key_at: u32,
    key_len: u32,
    offset: i64,
}

/// A rebuilt batch's records: (their bytes, base timestamp, delete horizon, last offset delta, max timestamp).
type Rebuilt<'py> = (Bound<'py, PyBytes>, i64, Option<i64>, i64, i64);
/// What the filter makes of a batch: (records kept, keyless records dropped, its rebuilt records if it changes).
type Filtered = (i64, i64, Option<(Vec<u8>, i64, Option<i64>, i64, i64)>);

// Why a walk over a chunk of batches stopped (`stratalog.storage.cleaner.chunks`).
const CHUNK_DONE: u8 = 0; // the next batch is not whole in the chunk, or the chunk is done
const TO_PYTHON: u8 = 1; // the next batch is for the Python path
const MAP_FULL: u8 = 2; // the offset map filled up
const AT_END: u8 = 3; // the next batch starts at or after the pass's end offset

/// The size of the v2 batch at the start of `d` if it is whole there; else why a chunk walk stops.
fn whole_v2_batch(d: &[u8]) -> Result<usize, u8> {
    if d.len() < 61 {
        return Err(CHUNK_DONE);
    }
    let batch_length = i32::from_be_bytes(be(d, 8));
    if d[16] != 2 || batch_length < 49 {
        return Err(TO_PYTHON);
    }
    let size = batch_length as usize + 12;
    if size > d.len() { Err(CHUNK_DONE) } else { Ok(size) }
}

/// A batch the chunk walks take: uncompressed, neither transactional nor control, a record count
/// that can be, and a CRC that matches.
fn plain_and_sound(d: &[u8], size: usize) -> bool {
    u16::from_be_bytes(be(d, 21)) & 0x37 == 0 && i32::from_be_bytes(be(d, 57)) >= 0
        && crate::crc::crc32c(&d[21..size]) == u32::from_be_bytes(be(d, 17))
}

const MIN_ARENA_GROWTH: usize = 64 << 10;
const MIN_TABLE_BYTES: usize = 256; // hashbrown's first allocation for 16-byte entries, rounded up
const INT32_MAX: i64 = i32::MAX as i64;

#[pyclass(module = "stratalog_native")]
pub struct OffsetMap {
    table: HashTable<Entry>,
    arena: Vec<u8>,
    hasher: DefaultHashBuilder,
    #[pyo3(get)]
    memory_bytes: usize,
    #[pyo3(get)]
    budget: i64,
    #[pyo3(get)]
    latest_offset: i64,
    #[pyo3(get)]
    lookups: u64,
    #[pyo3(get)]
    peak_bytes: usize,
    spans: Vec<RecordSpans>,
    colliding: bool, // every key hashes alike: for tests that a shared hash never loses a record
}

fn key_of<'a>(arena: &'a [u8], e: &Entry) -> &'a [u8] {
    &arena[e.key_at as usize..e.key_at as usize + e.key_len as usize]
}

impl OffsetMap {
    fn hash(&self, key: &[u8]) -> u64 {
        if self.colliding { 0 } else { self.hasher.hash_one(key) }
    }

    fn allocated(&self) -> usize {
        self.table.allocation_size() + self.arena.capacity()
    }

    /// Room for one more key of `len` bytes within the budget: the table's and the arena's size
    /// after any growth this key needs is checked first, and only then is anything grown; false
    /// (and nothing allocated) if it does not fit.
    fn make_room(&mut self, len: usize) -> bool {
        if len > u32::MAX as usize || self.arena.len() + len > u32::MAX as usize {
            return false;
        }
        let budget = self.budget.max(0) as usize;
        let table_grows = self.table.len() == self.table.capacity();
        // hashbrown doubles its buckets (16-byte entries and a control byte each, plus a group).
        let table_after = match (table_grows, self.table.allocation_size()) {
            (false, now) => now,
            (true, 0) => MIN_TABLE_BYTES,
            (true, now) => 2 * now,
        };
        let needed = self.arena.len() + len;
        let arena_after = if needed > self.arena.capacity() {
            // Grown in steps that leave the table room to grow too (a small budget's included).
            let want = (self.arena.capacity() / 2).max(MIN_ARENA_GROWTH.min(budget / 16)).max(len);
            let room = budget.saturating_sub(table_after + self.arena.capacity());
            self.arena.capacity() + want.min(room)
        } else {
            self.arena.capacity()
        };
        if needed > arena_after || table_after + arena_after > budget {
            return false;
        }
        if table_grows {
            let (arena, hasher, colliding) = (&self.arena, &self.hasher, self.colliding);
            self.table.reserve(1, |e| if colliding { 0 } else { hasher.hash_one(key_of(arena, e)) });
        }
        if arena_after > self.arena.capacity() {
            self.arena.reserve_exact(arena_after - self.arena.len());
        }
        self.peak_bytes = self.peak_bytes.max(self.allocated());
        true
    }

    fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let hash = self.hash(key);
        let arena = &self.arena;
        if let Some(entry) = self.table.find_mut(hash, |e| key_of(arena, e) == key) {
            entry.offset = offset;
            return true;
        }
        if !self.make_room(key.len()) {
            return false;
        }
        let entry = Entry { key_at: self.arena.len() as u32, key_len: key.len() as u32, offset };
        self.arena.extend_from_slice(key);
        let (arena, hasher, colliding) = (&self.arena, &self.hasher, self.colliding);
        self.table.insert_unique(hash, entry, |e| if colliding { 0 } else { hasher.hash_one(key_of(arena, e)) });
        true
    }

    fn latest(&mut self, key: &[u8]) -> i64 {
        self.lookups += 1;
        let hash = self.hash(key);
        let arena = &self.arena;
        self.table.find(hash, |e| key_of(arena, e) == key).map_or(-1, |e| e.offset)
    }

    /// The cleaner's choice for an uncompressed data batch's records (`Cleaner._keep_record`), and
    /// the kept records encoded as `build_batch` encodes them when the batch must change: what
    /// `filter_records` answers, its records as a Vec.
    ///
    /// Returns (kept, keyless records dropped, rebuilt) where rebuilt is None when every record is
    /// kept and no delete horizon is due, or when none is kept; else (records bytes, base timestamp,
    /// delete horizon or None, last offset delta of the records, their max timestamp). Returns
    /// None instead of all that where `build_batch` would refuse the records (offsets out of order
    /// or past int32 of the base: a caller falls back to it, and to its error).
    #[allow(clippy::too_many_arguments)]
    fn filter(&mut self, data: &[u8], start: usize, end: usize, count: i64, base_offset: i64, base_timestamp: i64,
              append_time: Option<i64>, reach: i64, delete_horizon: Option<i64>, now_ms: i64,
              delete_retention_ms: i64, last_offset_delta: i64) -> Result<Option<Filtered>, Fault> {
        let mut spans = std::mem::take(&mut self.spans);
        if let Err(fault) = walk(data, start, end, count, &mut spans) {
            self.spans = spans;
            return Err(fault);
        }
        let mut kept: Vec<usize> = Vec::with_capacity(spans.len());
        let mut invalid = 0i64;
        let mut has_tombstone = false;
        for (i, record) in spans.iter().enumerate() {
            let offset = base_offset as i128 + record.offset_delta as i128;   // exact, as Python's
            let keep = if offset > reach as i128 {
                true
            } else if let Some(key) = record.key.bytes(data) {
                if offset < self.latest(key) as i128 {
                    false
                } else if record.value.len >= 0 {
                    true
                } else {
                    delete_horizon.is_none_or(|horizon| now_ms < horizon)
                }
            } else {
                invalid += 1;
                false
            };
            if keep {
                has_tombstone |= record.value.len < 0;
                kept.push(i);
            }
        }
        let needs_horizon = has_tombstone && delete_horizon.is_none();
        if kept.is_empty() || (kept.len() == spans.len() && !needs_horizon) {
            self.spans = spans;
            return Ok(Some((kept.len() as i64, invalid, None)));
        }
        let horizon = if needs_horizon {
            match now_ms.checked_add(delete_retention_ms) {
                Some(horizon) => Some(horizon),
                None => {
                    // Past int64: build_batch refuses it, and says so.
                    self.spans = spans;
                    return Ok(None);
                }
            }
        } else {
            delete_horizon
        };
        let timestamp = |r: &RecordSpans| append_time.unwrap_or(base_timestamp.wrapping_add(r.timestamp_delta));
        let new_base = horizon.unwrap_or_else(|| timestamp(&spans[kept[0]]));
        let mut out = Vec::with_capacity(end - start);
        let mut body = Vec::with_capacity(256);
        let mut previous = -1i64;
        let mut max_ts = -1i64;
        for &i in &kept {
            let record = &spans[i];
            let ts = timestamp(record);
            let (delta, ts_delta) = (record.offset_delta, ts.checked_sub(new_base));
            if delta <= previous || delta > INT32_MAX || ts_delta.is_none()
                || (base_timestamp as i128 + record.timestamp_delta as i128) != ts as i128 && append_time.is_none() {
                self.spans = spans;
                return Ok(None);
            }
            previous = delta;
            max_ts = max_ts.max(ts);
            body.clear();
            body.push(0); // attributes
            put_varint(&mut body, ts_delta.unwrap_or(0));
            put_varint(&mut body, delta);
            put_nullable(&mut body, record.key.bytes(data));
            put_nullable(&mut body, record.value.bytes(data));
            put_headers(&mut body, data, record);
            put_varint(&mut out, body.len() as i64);
            out.extend_from_slice(&body);
        }
        self.spans = spans;
        if !(previous.max(0) <= last_offset_delta && last_offset_delta <= INT32_MAX) {
            return Ok(None);
        }
        Ok(Some((kept.len() as i64, invalid, Some((out, new_base, horizon, previous, max_ts)))))
    }
}

#[pymethods]
impl OffsetMap {
    #[new]
    #[pyo3(signature = (memory_bytes, load_factor = 0.9, colliding = false))]
    fn new(memory_bytes: i64, load_factor: f64, colliding: bool) -> PyResult<Self> {
        if memory_bytes <= 0 {
            return Err(pyo3::exceptions::PyValueError::new_err("the offset map needs a positive memory budget"));
        }
        Ok(OffsetMap { table: HashTable::new(), arena: Vec::new(), hasher: DefaultHashBuilder::default(),
                       memory_bytes: memory_bytes as usize, budget: (memory_bytes as f64 * load_factor) as i64, latest_offset: -1,
                       lookups: 0, peak_bytes: 0, spans: Vec::new(), colliding })
    }

    fn __len__(&self) -> usize {
        self.table.len()
    }

    /// Bytes the map holds now (its table and key arena), which the budget bounds.
    #[getter]
    fn used_bytes(&self) -> usize {
        self.allocated()
    }

    #[getter]
    fn utilization(&self) -> f64 {
        self.allocated() as f64 / self.memory_bytes as f64
    }

    fn clear(&mut self) {
        self.table.clear();
        self.arena.clear();
        self.latest_offset = -1;
    }

    fn try_put(&mut self, key: &[u8], offset: i64) -> bool {
        self.put(key, offset)
    }

    fn get(&mut self, key: &[u8]) -> i64 {
        self.latest(key)
    }

    fn update_latest_offset(&mut self, offset: i64) {
        if offset > self.latest_offset {
            self.latest_offset = offset;
        }
    }

    /// Every keyed record at or after `from_offset` of the records in `data[start:end]` into the
    /// map: (records walked, whether all fitted). The walk checks them all first, as
    /// `decode_records` does, so damaged records change nothing.
    fn map_records(&mut self, data: &Bound<'_, PyAny>, start: usize, end: usize, count: i64, base_offset: i64,
                   from_offset: i64) -> PyResult<(i64, bool)> {
        let bytes = Bytes::of(data)?;
        let data = bytes.region(start, end)?;
        let mut spans = std::mem::take(&mut self.spans);
        let walked = walk(data, start, end, count, &mut spans);
        let result = match walked {
            Err(fault) => Err(raise(fault)),
            Ok(()) => {
                let mut outcome = (spans.len() as i64, true);
                for (i, record) in spans.iter().enumerate() {
                    if let Some(key) = record.key.bytes(data) {
                        // An offset past int64 (no log the engine wrote holds one) never fits the map.
                        let offset = base_offset.checked_add(record.offset_delta);
                        let wanted = offset.is_none_or(|offset| offset >= from_offset);
                        if wanted && !offset.is_some_and(|offset| self.put(key, offset)) {
                            outcome = (i as i64 + 1, false);
                            break;
                        }
                    }
                }
                Ok(outcome)
            }
        };
        self.spans = spans;
        result
    }

    /// The map pass over a buffer of whole batches (a chunk of a segment read at once), for the plain
    /// ones: v2, uncompressed, neither transactional nor control, CRC matching, records walking. From
    /// `position`, each such batch is mapped as `map_records` maps it (keyed records at or after
    /// `from_offset`) and its last offset becomes the map's latest; a batch that ends before
    /// `from_offset` is stepped over unchecked, as the cleaner's Python loop does.
    ///
    /// Returns (bytes consumed, records walked, why it stopped): 0 when the next batch is not whole
    /// in the buffer (or the buffer is done), 1 when the next batch needs the Python path (any other
    /// kind, or anything wrong with it: the Python path names the error), 2 when the map filled up
    /// in a batch (consumed and walked count it), 3 when the next batch starts at or after `end_offset`.
    fn map_batches(&mut self, data: &Bound<'_, PyAny>, position: usize, from_offset: i64, end_offset: i64)
                   -> PyResult<(usize, i64, u8)> {
        let bytes = Bytes::of(data)?;
        let buffer = bytes.slice();
        let mut p = position;
        let mut walked = 0i64;
        let mut spans = std::mem::take(&mut self.spans);
        let stop = loop {
            let d = &buffer[p.min(buffer.len())..];
            let size = match whole_v2_batch(d) {
                Ok(size) => size,
                Err(stop) => break stop,
            };
            let base_offset = i64::from_be_bytes(be(d, 0));
            if base_offset >= end_offset {
                break AT_END;
            }
            let last_offset = base_offset.checked_add(i32::from_be_bytes(be(d, 23)) as i64);
            if last_offset.is_some_and(|last| last < from_offset) {
                p += size;
                continue;
            }
            let count = i32::from_be_bytes(be(d, 57));
            if !plain_and_sound(d, size) {
                break TO_PYTHON;
            }
            let Some(last_offset) = last_offset else { break TO_PYTHON };
            if walk(d, 61, size, count as i64, &mut spans).is_err() {
                break TO_PYTHON;
            }
            let mut fitted = true;
            let mut batch_walked = spans.len() as i64;
            for (i, record) in spans.iter().enumerate() {
                if let Some(key) = record.key.bytes(d) {
                    let offset = base_offset.checked_add(record.offset_delta);
                    let wanted = offset.is_none_or(|offset| offset >= from_offset);
                    if wanted && !offset.is_some_and(|offset| self.put(key, offset)) {
                        (fitted, batch_walked) = (false, i as i64 + 1);
                        break;
                    }
                }
            }
            walked += batch_walked;
            p += size;
            if !fitted {
                break MAP_FULL;
            }
            self.update_latest_offset(last_offset);
        };
        self.spans = spans;
        Ok((p - position, walked, stop))
    }

    /// The cleaner's choice for an uncompressed data batch's records (`Cleaner._keep_record`), and
    /// the kept records encoded as `build_batch` encodes them when the batch must change.
    ///
    /// Returns (kept, keyless records dropped, rebuilt) where rebuilt is None when every record is
    /// kept and no delete horizon is due, or when none is kept; else (records bytes, base timestamp,
    /// delete horizon or None, last offset delta of the records, their max timestamp). Returns
    /// None instead of all that where `build_batch` would refuse the records (offsets out of order
    /// or past int32 of the base: a caller falls back to it, and to its error).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (data, start, end, count, base_offset, base_timestamp, append_time, reach,
                        delete_horizon, now_ms, delete_retention_ms, last_offset_delta))]
    fn filter_records<'py>(&mut self, py: Python<'py>, data: &Bound<'py, PyAny>, start: usize, end: usize,
                           count: i64, base_offset: i64, base_timestamp: i64, append_time: Option<i64>, reach: i64,
                           delete_horizon: Option<i64>, now_ms: i64, delete_retention_ms: i64,
                           last_offset_delta: i64)
                           -> PyResult<Option<(i64, i64, Option<Rebuilt<'py>>)>> {
        let bytes = Bytes::of(data)?;
        let data = bytes.region(start, end)?;
        let filtered = self.filter(data, start, end, count, base_offset, base_timestamp, append_time, reach,
                                   delete_horizon, now_ms, delete_retention_ms, last_offset_delta).map_err(raise)?;
        Ok(filtered.map(|(kept, invalid, rebuilt)| (kept, invalid, rebuilt.map(
            |(body, base, horizon, last_delta, max_ts)| (PyBytes::new(py, &body), base, horizon, last_delta, max_ts)))))
    }

    /// The filter pass over a buffer of whole batches (a chunk of a segment read at once), for the
    /// plain ones (v2, uncompressed, neither transactional nor control, CRC matching) whose fate
    /// needs nothing but the map: each is kept whole, rebuilt (as `filter_records` and
    /// `assemble_batch` rebuild it) or dropped. `keep_empty`: the last offsets of batches kept even
    /// when emptied (the active producers'), None while not yet known.
    ///
    /// Returns (bytes consumed, the batches to write, (last offset, max timestamp, size) of each,
    /// records read, records kept, keyless records dropped, why it stopped): 0 when the next batch
    /// is not whole in the buffer (or the buffer is done), 1 when the next batch needs the Python
    /// path (another kind; anything wrong with it; an emptied batch that may have to stay: the
    /// round's last, or a producer's while `keep_empty` is unknown or holds it; records
    /// `build_batch` would refuse).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    #[pyo3(signature = (data, position, reach, now_ms, delete_retention_ms, round_upper_bound, keep_empty))]
    fn filter_batches<'py>(&mut self, py: Python<'py>, data: &Bound<'py, PyAny>, position: usize, reach: i64,
                           now_ms: i64, delete_retention_ms: i64, round_upper_bound: i64,
                           keep_empty: Option<std::collections::HashSet<i64>>)
                           -> PyResult<(usize, Bound<'py, PyBytes>, Vec<(i64, i64, usize)>, i64, i64, i64, u8)> {
        let bytes = Bytes::of(data)?;
        let buffer = bytes.slice();
        let mut p = position;
        let mut out: Vec<u8> = Vec::new();
        let mut entries = Vec::new();
        let (mut read, mut kept_total, mut invalid_total) = (0i64, 0i64, 0i64);
        let stop = loop {
            let d = &buffer[p.min(buffer.len())..];
            let size = match whole_v2_batch(d) {
                Ok(size) => size,
                Err(stop) => break stop,
            };
            if !plain_and_sound(d, size) {
                break TO_PYTHON;
            }
            let attributes = u16::from_be_bytes(be(d, 21));
            let count = i32::from_be_bytes(be(d, 57));
            let base_offset = i64::from_be_bytes(be(d, 0));
            let last_offset_delta = i32::from_be_bytes(be(d, 23)) as i64;
            let (base_timestamp, max_timestamp) = (i64::from_be_bytes(be(d, 27)), i64::from_be_bytes(be(d, 35)));
            let producer_id = i64::from_be_bytes(be(d, 43));
            let log_append = attributes & 0x08 != 0;
            let delete_horizon = (attributes & 0x40 != 0).then_some(base_timestamp);
            let Some(last_offset) = base_offset.checked_add(last_offset_delta) else { break TO_PYTHON };
            let filtered = self.filter(d, 61, size, count as i64, base_offset, base_timestamp,
                                       log_append.then_some(max_timestamp), reach, delete_horizon, now_ms,
                                       delete_retention_ms, last_offset_delta);
            let Ok(Some((kept, invalid, rebuilt))) = filtered else { break TO_PYTHON };
            if kept == 0 {
                let round_last = last_offset.checked_add(1) == Some(round_upper_bound);
                let producers_last = producer_id >= 0
                    && keep_empty.as_ref().is_none_or(|offsets| offsets.contains(&last_offset));
                if round_last || producers_last {
                    break TO_PYTHON;
                }
            } else if let Some((body, new_base, horizon, _, records_max_ts)) = rebuilt {
                let start = out.len();
                out.extend_from_slice(&d[..61]);
                out.extend_from_slice(&body);
                let header = &mut out[start..];
                let new_max = if log_append { max_timestamp } else { records_max_ts };
                header[8..12].copy_from_slice(&((49 + body.len()) as i32).to_be_bytes());
                let new_attributes = (attributes & 0x08) | if horizon.is_some() { 0x40 } else { 0 };
                header[21..23].copy_from_slice(&new_attributes.to_be_bytes());
                header[27..35].copy_from_slice(&new_base.to_be_bytes());
                header[35..43].copy_from_slice(&new_max.to_be_bytes());
                header[57..61].copy_from_slice(&(kept as i32).to_be_bytes());
                let crc = crate::crc::crc32c(&header[21..]);
                header[17..21].copy_from_slice(&crc.to_be_bytes());
                entries.push((last_offset, new_max, out.len() - start));
            } else {
                out.extend_from_slice(&d[..size]);
                entries.push((last_offset, max_timestamp, size));
            }
            read += count as i64;
            kept_total += kept;
            invalid_total += invalid;
            p += size;
        };
        Ok((p - position, PyBytes::new(py, &out), entries, read, kept_total, invalid_total, stop))
    }
}
