//! Records encoded as `stratalog.records.builder` encodes them (attributes 0, canonical varints,
//! headers re-encoded), from the spans of a walked batch: the cleaner's rebuild copies key, value
//! and header bytes and writes only the framing anew.

use crate::walk::RecordSpans;

pub fn put_varint(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// The headers of a record (already walked, so well formed) in the builder's encoding.
pub fn put_headers(out: &mut Vec<u8>, data: &[u8], spans: &RecordSpans) {
    if spans.header_count == 0 {
        out.push(0);
        return;
    }
    let end = spans.headers.start + spans.headers.len as usize;
    let read = |p: usize| crate::varint::decode(data, p, crate::varint::VARINT_MAX_BYTES, end)
        .unwrap_or((0, p));
    let (count, mut p) = read(spans.headers.start);
    put_varint(out, count as i64);
    for _ in 0..count {
        let (key_len, next) = read(p);
        let key = &data[next..next + key_len as usize];
        put_nullable(out, Some(key));
        let (value_len, next) = read(next + key_len as usize);
        if value_len < 0 {
            put_nullable(out, None);
            p = next;
        } else {
            put_nullable(out, Some(&data[next..next + value_len as usize]));
            p = next + value_len as usize;
        }
    }
}
