//! A v2 record's frame, shared by every walk: where the next record starts and ends, and the
//! checks on the count and the length that `records/walker.py` and `records/reader.py` make.

use crate::fault::Fault;
use crate::varint::{decode, zigzag, VARINT_MAX_BYTES};

/// attributes byte + one-byte timestampDelta, offsetDelta, keyLength, valueLength and headerCount.
pub const MIN_RECORD_BODY: i128 = 6;

/// One record's bounds: `start` (its length varint), `body` (after it: the attributes byte), `end`.
pub struct Frame {
    pub start: usize,
    pub body: usize,
    pub end: usize,
    pub length: i128,
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

/// Record `i` of `count`, at `p` in records that end at `end`.
pub fn next_record(data: &[u8], p: usize, end: usize, count: i64, i: i64) -> Result<Frame, Fault> {
    if p >= end {
        return Err(Fault::at(p, format!(
            "Incorrect declared batch size, premature EOF reached: {count} records declared, {i} present")));
    }
    let b = data[p];
    let (length, body) = if b < 0x80 {
        (zigzag(b as u128), p + 1)
    } else if p + 1 < end && data[p + 1] < 0x80 {
        (zigzag(((b & 0x7F) as u128) | ((data[p + 1] as u128) << 7)), p + 2)
    } else {
        decode(data, p, VARINT_MAX_BYTES, end)?
    };
    let rec_end = body as i128 + length;
    if length < MIN_RECORD_BODY || rec_end > end as i128 {
        return Err(Fault::at(p, bad_length(length, end as i128 - body as i128)));
    }
    Ok(Frame { start: p, body, end: rec_end as usize, length })
}

/// After the last record: nothing may be left before `end`.
pub fn all_consumed(p: usize, end: usize, count: i64) -> Result<(), Fault> {
    if p != end {
        return Err(Fault::at(p, format!(
            "Incorrect declared batch size, records still remaining in file: {} bytes after {count} records",
            end as i128 - p as i128)));
    }
    Ok(())
}
