//! The transaction and producer scan's walk over batch headers (`storage.log._feed_transactions`):
//! of a buffer of batches, only those a producer wrote (a producer id, or the transactional bit)
//! matter to that scan; every other batch is stepped over by its size, without a Python object.

use crate::be;

pub struct ProducerBatches {
    pub positions: Vec<usize>,
    pub consumed: usize,
    pub batches: usize,
    pub stop: u8,
}

/// Walk the v2 headers of `data` from `position`, `limit` being how many bytes of the file follow
/// `position` (a batch declared past it is a torn tail). Reports the positions of producers'
/// batches whose last offset is at or after `start`. Stops with 0 when the next header is not in
/// `data` (`consumed` may step past `data`'s end, over a batch larger than it), 1 when the next
/// batch needs the Python walk (v0/v1, a header that cannot be a batch, a torn tail: it handles
/// or names them), 2 at the first batch starting at or after `end`.
pub fn producer_batches(data: &[u8], position: usize, limit: usize, start: i64, end: Option<i64>) -> ProducerBatches {
    let mut found = ProducerBatches { positions: Vec::new(), consumed: 0, batches: 0, stop: 0 };
    let mut p = position;
    loop {
        let walked = p - position;
        if walked >= limit {
            found.stop = 0;
            break;
        }
        if p + 61 > data.len() {
            found.stop = if p + 61 > position + limit { 1 } else { 0 };
            break;
        }
        let d = &data[p..];
        let batch_length = i32::from_be_bytes(be(d, 8));
        if d[16] != 2 || batch_length < 49 {
            found.stop = 1;
            break;
        }
        let size = batch_length as usize + 12;
        if walked + size > limit {
            found.stop = 1;
            break;
        }
        let base_offset = i64::from_be_bytes(be(d, 0));
        if end.is_some_and(|end| base_offset >= end) {
            found.stop = 2;
            break;
        }
        let last_offset = base_offset as i128 + i32::from_be_bytes(be(d, 23)) as i128;
        let producer_id = i64::from_be_bytes(be(d, 43));
        let transactional = d[22] & 0x10 != 0;
        if (producer_id >= 0 || transactional) && last_offset >= start as i128 {
            found.positions.push(p);
        }
        found.batches += 1;
        p += size;
    }
    found.consumed = p - position;
    found
}
