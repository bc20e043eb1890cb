//! The full walk over a v2 batch's records (`stratalog.records.walker._walk`), as spans into the
//! data instead of Python objects: every check, message and position is the Python walk's.

use crate::fault::Fault;
use crate::frame::{all_consumed, next_record};
use crate::varint::{decode, field, VARINT_MAX_BYTES, VARLONG_MAX_BYTES};

/// Where one record's parts are in the data; a null key or value has `len` -1.
#[derive(Clone, Copy, Default)]
pub struct Span {
    pub start: usize,
    pub len: i64,
}

impl Span {
    pub fn bytes<'a>(&self, data: &'a [u8]) -> Option<&'a [u8]> {
        if self.len < 0 { None } else { Some(&data[self.start..self.start + self.len as usize]) }
    }
}

#[derive(Clone, Copy, Default)]
pub struct RecordSpans {
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    pub key: Span,
    pub value: Span,
    pub headers: Span, // the header count varint and every header, as written; len 0 for none
    pub header_count: i64,
}

fn nullable(data: &[u8], p: usize, rec_end: usize, what: &str, inline: bool) -> Result<(Span, usize), Fault> {
    let (size, p) = if inline { field(data, p, VARINT_MAX_BYTES, rec_end)? } else { decode(data, p, VARINT_MAX_BYTES, rec_end)? };
    if size < 0 {
        return Ok((Span { start: p, len: -1 }, p));
    }
    if p as i128 + size <= rec_end as i128 {
        return Ok((Span { start: p, len: size as i64 }, p + size as usize));
    }
    Err(Fault::at(p, format!("{what} of {size} bytes overruns its record by {} bytes",
                             p as i128 + size - rec_end as i128)))
}

fn utf8_reason(bytes: &[u8], error: std::str::Utf8Error) -> &'static str {
    // Python's names for the three ways UTF-8 fails.
    if error.error_len().is_none() {
        return "unexpected end of data";
    }
    match bytes[error.valid_up_to()] {
        0x80..=0xC1 | 0xF5..=0xFF => "invalid start byte",
        _ => "invalid continuation byte",
    }
}

fn headers(data: &[u8], mut p: usize, rec_end: usize, count: i128) -> Result<usize, Fault> {
    if count < 0 {
        return Err(Fault::at(p, format!("Found invalid number of record headers {count}")));
    }
    if count > rec_end as i128 - p as i128 {
        return Err(Fault::at(p, format!(
            "Found invalid number of record headers. {count} is larger than the remaining size of the buffer")));
    }
    for _ in 0..count {
        let key_start = p;
        let (key_size, next) = decode(data, p, VARINT_MAX_BYTES, rec_end)?;
        p = next;
        if key_size < 0 {
            return Err(Fault::at(key_start, format!("Invalid negative header key size {key_size}")));
        }
        if p as i128 + key_size > rec_end as i128 {
            return Err(Fault::at(key_start, format!("header key of {key_size} bytes overruns its record")));
        }
        let key = &data[p..p + key_size as usize];
        if let Err(error) = std::str::from_utf8(key) {
            return Err(Fault::at(p + error.valid_up_to(),
                                 format!("header key is not valid UTF-8: {}", utf8_reason(key, error))));
        }
        let (_, next) = nullable(data, p + key_size as usize, rec_end, "field", false)?;
        p = next;
    }
    Ok(p)
}

/// Walk `count` records of `data[start..end]` into `out` (cleared first); on error `out` is
/// left partly filled and must not be used.
pub fn walk(data: &[u8], start: usize, end: usize, count: i64, out: &mut Vec<RecordSpans>) -> Result<(), Fault> {
    out.clear();
    let mut p = start;
    for i in 0..count.max(0) {
        let frame = next_record(data, p, end, count, i)?;
        let (rec_start, rec_end, length) = (frame.start, frame.end, frame.length);
        // The attributes byte (unused) follows the length.
        let (timestamp_delta, next) = field(data, frame.body + 1, VARLONG_MAX_BYTES, rec_end)?;
        let (offset_delta, next) = field(data, next, VARINT_MAX_BYTES, rec_end)?;
        let (key, next) = nullable(data, next, rec_end, "key", true)?;
        let (value, next) = nullable(data, next, rec_end, "value", true)?;
        p = next;
        let headers_start = p;
        let header_count: i128;
        if p < rec_end && data[p] == 0 {
            p += 1;
            header_count = 0;
        } else {
            let (count, next) = decode(data, p, VARINT_MAX_BYTES, rec_end)?;
            header_count = count;
            p = headers(data, next, rec_end, count)?;
        }
        if p != rec_end {
            return Err(Fault::at(rec_start, format!(
                "Invalid record size: expected to read {length} bytes in record payload, but instead read {}",
                p as i128 - (rec_end as i128 - length))));
        }
        out.push(RecordSpans {
            timestamp_delta: timestamp_delta as i64,
            offset_delta: offset_delta as i64,
            key,
            value,
            headers: Span { start: headers_start, len: (p - headers_start) as i64 },
            header_count: header_count as i64,
        });
    }
    all_consumed(p, end, count)?;
    Ok(())
}
