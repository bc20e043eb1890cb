//! The append path's walk over a v2 batch's records (`stratalog.records.reader.summarize_records`):
//! record boundaries, timestamp and offset deltas, whether each has a key; nothing is copied.
//! Every check, message and position is the Python walk's, so the two are interchangeable.

use crate::fault::Fault;
use crate::frame::{all_consumed, next_record};
use crate::varint::{field, VARINT_MAX_BYTES, VARLONG_MAX_BYTES};

pub struct Summary {
    pub min_timestamp: i128,
    pub max_timestamp: i128,
    pub offset_delta_of_max_timestamp: i128,
    pub first_keyless_index: i64,
}

/// Walk `count` records in `data[start..end]`; `data` may run on past `end` (a caller's whole buffer).
pub fn summarize(data: &[u8], start: usize, end: usize, count: i64, base_timestamp: i64, last_offset_delta: i64)
                 -> Result<Summary, Fault> {
    let mut p = start;
    let mut min_ts: i128 = 1i128 << 63;
    let mut max_ts: i128 = -(1i128 << 63) - 1;
    let mut max_ts_delta: i128 = -1;
    let mut previous_delta: i128 = -1;
    let mut first_keyless: i64 = -1;
    let last_delta = last_offset_delta as i128;
    for i in 0..count.max(0) {
        let frame = next_record(data, p, end, count, i)?;
        let (rec_start, rec_end) = (frame.start, frame.end);
        // The attributes byte (unused) follows the length.
        let (ts_delta, next) = field(data, frame.body + 1, VARLONG_MAX_BYTES, rec_end)?;
        let (offset_delta, next) = field(data, next, VARINT_MAX_BYTES, rec_end)?;
        let (key_size, next) = field(data, next, VARINT_MAX_BYTES, rec_end)?;
        p = next;
        // +2: valueLength and headerCount still follow the key.
        if key_size < 0 {
            if p + 2 > rec_end {
                return Err(Fault::at(rec_start, "record fields overrun its declared length".to_string()));
            }
            if first_keyless < 0 {
                first_keyless = i;
            }
        } else if p as i128 + key_size + 2 > rec_end as i128 {
            return Err(Fault::at(rec_start, format!(
                "record fields (key of {key_size} bytes) overrun its declared length")));
        }
        if offset_delta <= previous_delta || offset_delta > last_delta {
            return Err(Fault::at(rec_start, format!(
                "record offset delta {offset_delta} not in ({previous_delta}, {last_delta}] \
                 (deltas must increase up to lastOffsetDelta)")));
        }
        previous_delta = offset_delta;
        let ts = base_timestamp as i128 + ts_delta;
        if ts > max_ts {
            max_ts = ts;
            max_ts_delta = offset_delta;
        }
        if ts < min_ts {
            min_ts = ts;
        }
        p = rec_end;
    }
    all_consumed(p, end, count)?;
    Ok(Summary { min_timestamp: min_ts, max_timestamp: max_ts, offset_delta_of_max_timestamp: max_ts_delta,
                 first_keyless_index: first_keyless })
}
