//! stratalog's native record kernel: whole-batch work in one call, no Python object per record.
//!
//! Each function is the twin of a pure-Python one in `stratalog.records` (the reference and the
//! fallback): same results, and for damaged input the same error at the same byte position, so the
//! caller's `CorruptRecordError` reads the same whichever ran. Differential tests hold them to it.

mod append;
mod columns;
mod crc;
mod encode;
mod fault;
mod frame;
mod offset_map;
mod producers;
mod scan;
mod socket_writer;
mod summary;
mod varint;
mod walk;

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyIndexError, PyOSError, PyValueError};
use pyo3::prelude::*;

use fault::Fault;

create_exception!(stratalog_native, RecordError, PyValueError,
                  "Damaged records: args are (byte position, reason), as CorruptRecordError takes them.");

/// A read-only view of any contiguous buffer (bytes, bytearray, memoryview, mmap).
pub(crate) struct Bytes {
    buffer: PyBuffer<u8>,
}

impl Bytes {
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        let buffer = PyBuffer::<u8>::get(obj)?;
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err("expected a contiguous buffer"));
        }
        Ok(Bytes { buffer })
    }

    /// The whole buffer, after checking that [start, end) lies within it.
    pub(crate) fn region(&self, start: usize, end: usize) -> PyResult<&[u8]> {
        let slice = self.slice();
        if start > end || end > slice.len() {
            return Err(PyValueError::new_err(format!("records [{start}, {end}) outside a buffer of {} bytes",
                                                     slice.len())));
        }
        Ok(slice)
    }

    pub(crate) fn slice(&self) -> &[u8] {
        // The buffer export pins the memory (a bytearray cannot resize while it is held).
        unsafe { std::slice::from_raw_parts(self.buffer.buf_ptr() as *const u8, self.buffer.len_bytes()) }
    }
}

pub(crate) fn raise(fault: Fault) -> PyErr {
    match fault {
        Fault::At(position, reason) => RecordError::new_err((position, reason)),
        Fault::PastData => PyIndexError::new_err("a record's fields run past the end of the data"),
    }
}

/// `summarize_records`' walk over `data[start:end]`: (min timestamp, max timestamp, offset delta of
/// the max timestamp, index of the first keyless record or -1). Raises RecordError(position, reason),
/// or IndexError for fields that run past the end of `data`, as the Python walk does.
#[pyfunction]
fn summarize_records(data: &Bound<'_, PyAny>, start: usize, end: usize, count: i64, base_timestamp: i64,
                     last_offset_delta: i64) -> PyResult<(i128, i128, i128, i64)> {
    let bytes = Bytes::of(data)?;
    let slice = bytes.region(start, end)?;
    let s = summary::summarize(slice, start, end, count, base_timestamp, last_offset_delta).map_err(raise)?;
    Ok((s.min_timestamp, s.max_timestamp, s.offset_delta_of_max_timestamp, s.first_keyless_index))
}

/// The header fields of a v2 batch, in on-disk order, in two tuples (PyO3 converts at most 12):
/// `BatchHeader(*first, *second)`.
type HeaderFields = ((i64, i32, i32, i8, u32, u16, i32), (i64, i64, i64, i16, i32, i32));

pub(crate) fn be<const N: usize>(data: &[u8], p: usize) -> [u8; N] {
    data[p..p + N].try_into().unwrap()
}

/// A v2 batch header's fields, read once for the functions below.
struct Head {
    base_offset: i64,
    batch_length: i32,
    partition_leader_epoch: i32,
    crc: u32,
    attributes: u16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: i32,
    size: usize, // batch_length + 12, within `data`
}

/// The header of the v2 batch at the start of `data`, when it can describe a whole batch there
/// (length at least a header's, a known codec, no negative count, the batch inside `data`); None
/// otherwise. The CRC is not checked here.
fn v2_head(d: &[u8]) -> Option<Head> {
    if d.len() < 61 || d[16] != 2 {
        return None;
    }
    let (batch_length, attributes, count) = (i32::from_be_bytes(be(d, 8)), u16::from_be_bytes(be(d, 21)),
                                             i32::from_be_bytes(be(d, 57)));
    let size = batch_length as i64 + 12;
    if batch_length < 49 || (attributes & 0x07) > 4 || size > d.len() as i64 || count < 0 {
        return None;
    }
    Some(Head {
        base_offset: i64::from_be_bytes(be(d, 0)), batch_length, partition_leader_epoch: i32::from_be_bytes(be(d, 12)),
        crc: u32::from_be_bytes(be(d, 17)), attributes, last_offset_delta: i32::from_be_bytes(be(d, 23)),
        base_timestamp: i64::from_be_bytes(be(d, 27)), max_timestamp: i64::from_be_bytes(be(d, 35)),
        producer_id: i64::from_be_bytes(be(d, 43)), producer_epoch: i16::from_be_bytes(be(d, 51)),
        base_sequence: i32::from_be_bytes(be(d, 53)), count, size: size as usize,
    })
}

impl Head {
    fn crc_matches(&self, d: &[u8]) -> bool {
        crc::crc32c(&d[21..self.size]) == self.crc
    }

    fn summary(&self, d: &[u8]) -> Option<summary::Summary> {
        summary::summarize(d, 61, self.size, self.count as i64, self.base_timestamp, self.last_offset_delta as i64).ok()
    }
}

/// A whole producer batch checked in one call, for the append path's common case: `data` is one
/// complete v2 batch whose header parses, whose CRC matches and, uncompressed, whose records
/// summarize. Returns (header fields, the records' summary or None when compressed); None when
/// anything is wrong, so the caller's Python checks run and name it, exactly as without the kernel.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn check_batch(data: &Bound<'_, PyAny>) -> PyResult<Option<(HeaderFields, Option<(i128, i128, i128, i64)>)>> {
    let bytes = Bytes::of(data)?;
    let d = bytes.slice();
    let Some(h) = v2_head(d) else { return Ok(None) };
    if !h.crc_matches(d) {
        return Ok(None);
    }
    let fields: HeaderFields = (
        (h.base_offset, h.batch_length, h.partition_leader_epoch, 2, h.crc, h.attributes, h.last_offset_delta),
        (h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence, h.count),
    );
    if h.attributes & 0x07 != 0 {
        return Ok(Some((fields, None)));
    }
    Ok(h.summary(d).map(|s| (fields, Some((s.min_timestamp, s.max_timestamp, s.offset_delta_of_max_timestamp,
                                           s.first_keyless_index)))))
}

/// What the leader's append needs of a producer batch, for its common case, in one call: `data` is
/// exactly one whole uncompressed v2 batch whose CRC matches and whose records summarize. Returns
/// (size, attributes, last offset delta, the header's max timestamp, producer id, producer epoch,
/// base sequence, records count, the records' min and max timestamp, index of the first keyless
/// record or -1, base offset); None for anything else (compressed, damaged, not exactly one batch,
/// no records): the caller's reference path then decides and names what is wrong.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn leader_batch_facts(data: &Bound<'_, PyAny>)
                      -> PyResult<Option<(usize, u16, i32, i64, i64, i16, i32, i32, i64, i64, i64, i64)>> {
    let bytes = Bytes::of(data)?;
    let d = bytes.slice();
    let Some(h) = v2_head(d) else { return Ok(None) };
    // Before the CRC: a compressed batch goes the reference path anyway. The GIL stays held: a 16 KiB
    // batch takes about a microsecond, less than a hand-off could cost.
    if h.size != d.len() || h.attributes & 0x07 != 0 || h.count <= 0 || !h.crc_matches(d) {
        return Ok(None);
    }
    let Some(s) = h.summary(d) else { return Ok(None) };
    let (Ok(min_ts), Ok(max_ts)) = (i64::try_from(s.min_timestamp), i64::try_from(s.max_timestamp)) else {
        return Ok(None);
    };
    Ok(Some((h.size, h.attributes, h.last_offset_delta, h.max_timestamp, h.producer_id, h.producer_epoch,
             h.base_sequence, h.count, min_ts, max_ts, s.first_keyless_index, h.base_offset)))
}

/// A follower's copy of its leader's batches (`Log.append_as_follower`), checked in one call: for
/// each batch of `data`, (base offset, last offset, max timestamp, size, partition leader epoch,
/// producer id, attributes), once `data` is exactly whole v2 batches whose headers parse and whose
/// CRCs match.
/// None for anything else (a partial tail, another magic, damage, a last offset past int64): the
/// reference path then decides and names what is wrong. The GIL stays held, as in
/// `leader_batch_facts`: a fetch's worth of CRC takes less than a hand-off.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn follower_batches(data: &Bound<'_, PyAny>) -> PyResult<Option<Vec<(i64, i64, i64, usize, i32, i64, u16)>>> {
    let bytes = Bytes::of(data)?;
    let d = bytes.slice();
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < d.len() {
        let batch = &d[pos..];
        let Some(h) = v2_head(batch) else { return Ok(None) };
        if !h.crc_matches(batch) {
            return Ok(None);
        }
        let Some(last) = h.base_offset.checked_add(h.last_offset_delta as i64) else { return Ok(None) };
        out.push((h.base_offset, last, h.max_timestamp, h.size, h.partition_leader_epoch, h.producer_id, h.attributes));
        pos += h.size;
    }
    Ok(Some(out))
}

/// A leader's append of one producer batch as sent, checked and written in one call (append.rs):
/// (last offset delta, max timestamp, record count) once `data` is written at `position` of `fd`
/// with `base_offset` and `leader_epoch` set; None, and nothing written, when anything about it is
/// not the plain case, so that the caller's reference path decides. `rules`: the topic's
/// `AsSentRules` (max.message.bytes, compact, the two timestamp bounds, segment.ms, segment.bytes),
/// taken whole so that the caller need not unpack it for every batch. `producer_id`: the batch's, as
/// the caller read it and checked its sequence (negative: none); a batch of another is declined. A failed
/// write raises OSError and may leave part of the batch past `position`: the caller truncates it.
#[pyfunction]
#[pyo3(signature = (fd, position, data, base_offset, leader_epoch, rules, now_ms, roll_after_timestamp,
                    max_last_offset, producer_id))]
#[allow(clippy::too_many_arguments)]
fn append_as_sent(py: Python<'_>, fd: i32, position: i64, data: &Bound<'_, PyAny>, base_offset: i64,
                  leader_epoch: i32, rules: (i64, bool, i64, i64, i64, i64), now_ms: i64,
                  roll_after_timestamp: i64, max_last_offset: i64, producer_id: i64)
                  -> PyResult<Option<append::Accepted>> {
    let bytes = Bytes::of(data)?;
    let d = bytes.slice();
    // The offsets, timestamps and bounds are Kafka longs: taken as i64 (an i128 costs several Python
    // calls each under the stable ABI) and widened for the arithmetic, which a batch's own timestamps
    // could overflow.
    let (max_message_bytes, compact, timestamp_before_max_ms, timestamp_after_max_ms, _segment_ms, segment_bytes) = rules;
    let limits = append::Limits { max_message_bytes: max_message_bytes.into(), compact,
                                  timestamp_before_max_ms: timestamp_before_max_ms.into(),
                                  timestamp_after_max_ms: timestamp_after_max_ms.into(), now_ms: now_ms.into(),
                                  room: i128::from(segment_bytes) - i128::from(position),
                                  roll_after_timestamp: roll_after_timestamp.into(),
                                  max_last_offset_delta: i128::from(max_last_offset) - i128::from(base_offset),
                                  checked_producer_id: producer_id };
    let Some(accepted) = append::accept(d, &limits) else { return Ok(None) };
    // The write lets other threads run, as os.pwritev does. The buffer export stops a resize, not a
    // change: the caller passes immutable bytes (FileRecords.append_as_sent takes nothing else).
    py.detach(|| append::write(fd, position, d, base_offset, leader_epoch))
        .map_err(os_error)?;
    Ok(Some(accepted))
}

/// An `io::Error` as the OSError `os.pwritev` raises: errno and strerror, so that the directory's
/// offline report reads the same whichever wrote.
pub(crate) fn os_error(error: std::io::Error) -> PyErr {
    let text = error.to_string();
    match error.raw_os_error() {
        // Rust's text is strerror's followed by " (os error N)".
        Some(code) => PyOSError::new_err((code, text.strip_suffix(&format!(" (os error {code})")).unwrap_or(&text)
                                                   .to_string())),
        None => PyOSError::new_err(text),
    }
}

/// Recovery's scan of a segment's batches (see scan.rs): None for a log with v0/v1 entries, else
/// (valid bytes, max timestamp, its offset, index points as (last offset, position, max timestamp,
/// its offset), new leader epochs as (epoch, start offset)).
#[pyfunction]
#[pyo3(signature = (data, base_offset, index_interval_bytes, latest_epoch))]
#[allow(clippy::type_complexity)]
fn scan_log(py: Python<'_>, data: &Bound<'_, PyAny>, base_offset: i64, index_interval_bytes: usize,
            latest_epoch: Option<i32>)
            -> PyResult<Option<(usize, i64, i64, Vec<(i64, usize, i64, i64)>, Vec<(i32, i64)>)>> {
    let bytes = Bytes::of(data)?;
    let slice = bytes.slice();
    let scanned = py.detach(|| scan::scan(slice, base_offset, index_interval_bytes, latest_epoch));
    Ok(scanned.map(|s| (s.valid_bytes, s.max_timestamp, s.offset_of_max_timestamp,
                        s.index.iter().map(|i| (i.last_offset, i.position, i.max_timestamp,
                                                i.offset_of_max_timestamp)).collect(),
                        s.epochs)))
}

/// The batches of `data` from `position` that the transaction and producer scan must see (see
/// producers.rs): (their positions, bytes consumed, batches walked, why it stopped).
#[pyfunction]
#[pyo3(signature = (data, position, limit, start, end))]
fn producer_batches(data: &Bound<'_, PyAny>, position: usize, limit: usize, start: i64, end: Option<i64>)
                    -> PyResult<(Vec<usize>, usize, usize, u8)> {
    let bytes = Bytes::of(data)?;
    let found = producers::producer_batches(bytes.slice(), position, limit, start, end);
    Ok((found.positions, found.consumed, found.batches, found.stop))
}

/// `records.info.whole_batches`' walk: the whole v2 batches at the start of `data`, as a consumer
/// keeps them of a fetch that may end inside a batch. (bytes they span, batches, records, last
/// offset or -1). Only headers are read, as `iter_batch_infos` reads them. None where the Python
/// walk must decide: an entry that is not v2, a size field too small for a v2 batch (it raises), a
/// last offset past the int64 range.
#[pyfunction]
fn whole_batches(data: &Bound<'_, PyAny>) -> PyResult<Option<(usize, usize, i64, i64)>> {
    let bytes = Bytes::of(data)?;
    let d = bytes.slice();
    let (mut pos, mut batches, mut records, mut last) = (0usize, 0usize, 0i64, -1i64);
    // At most 17 bytes left (up to the magic) is a partial tail, as `peek_batch` has it.
    while d.len() - pos > 17 {
        let size = i32::from_be_bytes(be(d, pos + 8));
        if d[pos + 16] != 2 || size < 49 {
            return Ok(None);
        }
        let total = size as usize + 12;
        if total > d.len() - pos {
            break;   // a partial tail: the fetch ended inside this batch
        }
        // Past i64 only in damaged or hostile bytes: Python's integers say what the offset is.
        last = match i64::from_be_bytes(be(d, pos)).checked_add(i32::from_be_bytes(be(d, pos + 23)) as i64) {
            Some(offset) => offset,
            None => return Ok(None),
        };
        records += i32::from_be_bytes(be(d, pos + 57)) as i64;
        batches += 1;
        pos += total;
    }
    Ok(Some((pos, batches, records, last)))
}

#[pymodule]
fn stratalog_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // What records/native.py checks before it uses this module: bump it with records/native.py's
    // INTERFACE whenever a function or class is added or removed, or changes its arguments or results,
    // so that an extension built from older sources is refused by name instead of failing mid-append.
    m.add("INTERFACE", 7u32)?;
    m.add("RecordError", m.py().get_type::<RecordError>())?;
    m.add_function(wrap_pyfunction!(summarize_records, m)?)?;
    m.add_class::<offset_map::OffsetMap>()?;
    m.add_class::<columns::ColumnBuilder>()?;
    m.add_function(wrap_pyfunction!(scan_log, m)?)?;
    m.add_function(wrap_pyfunction!(check_batch, m)?)?;
    m.add_function(wrap_pyfunction!(leader_batch_facts, m)?)?;
    m.add_function(wrap_pyfunction!(append_as_sent, m)?)?;
    m.add_function(wrap_pyfunction!(producer_batches, m)?)?;
    m.add_function(wrap_pyfunction!(whole_batches, m)?)?;
    m.add_function(wrap_pyfunction!(follower_batches, m)?)?;
    m.add_class::<socket_writer::SocketWriter>()?;
    Ok(())
}
