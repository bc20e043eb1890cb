//! ZigZag varints exactly as `stratalog.records.varint.decode_varint` reads them, errors included.

use crate::fault::Fault;

pub const VARINT_MAX_BYTES: usize = 5;
pub const VARLONG_MAX_BYTES: usize = 10;

#[inline]
pub fn zigzag(u: u128) -> i128 {
    ((u >> 1) as i128) ^ -((u & 1) as i128)
}

/// One varint at `pos`, reading no further than `end` nor `limit` bytes: (value, position after it).
pub fn decode(data: &[u8], pos: usize, limit: usize, end: usize) -> Result<(i128, usize), Fault> {
    if pos >= end {
        return Err(Fault::at(pos, "varint truncated: no bytes left".to_string()));
    }
    let first = *data.get(pos).ok_or(Fault::PastData)?;
    if first < 0x80 {
        return Ok((zigzag(first as u128), pos + 1));
    }
    let start = pos;
    let last = end.min(pos + limit);
    let mut result: u128 = 0;
    let mut shift = 0u32;
    let mut p = pos;
    while p < last {
        let b = *data.get(p).ok_or(Fault::PastData)?;
        p += 1;
        result |= ((b & 0x7F) as u128) << shift;
        if b < 0x80 {
            let width = if limit <= VARINT_MAX_BYTES { 32 } else { 64 };
            if result >> width != 0 {
                return Err(Fault::at(start, format!("varint value {result:#x} wider than {limit}-byte range")));
            }
            return Ok((zigzag(result), p));
        }
        shift += 7;
    }
    if p - start >= limit {
        return Err(Fault::at(start, format!("varint longer than {limit} bytes")));
    }
    Err(Fault::at(start, format!("varint truncated after {} bytes", p - start)))
}

/// The walker's inline read of a record field: one or two bytes without a bound on the
/// record's end (the checks after the fields catch an overrun), longer ones by `decode`.
#[inline]
pub fn field(data: &[u8], p: usize, limit: usize, rec_end: usize) -> Result<(i128, usize), Fault> {
    let b = *data.get(p).ok_or(Fault::PastData)?;
    if b < 0x80 {
        return Ok((zigzag(b as u128), p + 1));
    }
    let c = *data.get(p + 1).ok_or(Fault::PastData)?;
    if c < 0x80 {
        return Ok((zigzag(((b & 0x7F) as u128) | ((c as u128) << 7)), p + 2));
    }
    decode(data, p, limit, rec_end)
}
