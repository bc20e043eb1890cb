//! The append path's walk over a v2 batch's records (`stratalog.records.reader.summarize_records`):
//! record boundaries, timestamp and offset deltas, whether each has a key; nothing is copied.
//! Every check, message and position is the Python walk's, so the two are interchangeable.

use crate::fault::Fault;
use crate::varint::{decode, field, zigzag, VARINT_MAX_BYTES, VARLONG_MAX_BYTES};

pub const MIN_RECORD_BODY: i128 = 6;

pub struct Summary {
    pub min_timestamp: i128,
    pub max_timestamp: i128,
    pub offset_delta_of_max_timestamp: i128,
    pub first_keyless_index: i64,
}

pub fn bad_length(length: i128, remaining: i128) -> String {
    if length < MIN_RECORD_BODY {
        return format!("Invalid record size: {length} is below the {MIN_RECORD_BODY}-byte minimum record body");
    }
    format!(
        "Invalid record size: expected {length} bytes in record payload, but instead the buffer has only \
         {remaining} remaining bytes."
    )
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
        if p >= end {
            return Err(Fault::at(p, format!(
                "Incorrect declared batch size, premature EOF reached: {count} records declared, {i} present")));
        }
        let rec_start = p;
        let b = data[p];
        let length: i128;
        if b < 0x80 {
            length = zigzag(b as u128);
            p += 1;
        } else if p + 1 < end && data[p + 1] < 0x80 {
            length = zigzag(((b & 0x7F) as u128) | ((data[p + 1] as u128) << 7));
            p += 2;
        } else {
            let (value, next) = decode(data, p, VARINT_MAX_BYTES, end)?;
            length = value;
            p = next;
        }
        let rec_end_wide = p as i128 + length;
        if length < MIN_RECORD_BODY || rec_end_wide > end as i128 {
            return Err(Fault::at(rec_start, bad_length(length, end as i128 - p as i128)));
        }
        let rec_end = rec_end_wide as usize;
        p += 1; // record attributes: unused
        let (ts_delta, next) = field(data, p, VARLONG_MAX_BYTES, rec_end)?;
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
    if p != end {
        return Err(Fault::at(p, format!(
            "Incorrect declared batch size, records still remaining in file: {} bytes after {count} records",
            end as i128 - p as i128)));
    }
    Ok(Summary { min_timestamp: min_ts, max_timestamp: max_ts, offset_delta_of_max_timestamp: max_ts_delta,
                 first_keyless_index: first_keyless })
}
