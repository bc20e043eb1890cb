//! Recovery's scan of a segment's `.log` (`LogSegment.recover`'s loop over `FileRecords` batches):
//! where the valid bytes end, the max timestamp, the sparse index points and the leader epochs,
//! in one pass over the mapped file instead of Python work per batch.
//!
//! A batch is valid as `peek_batch` + `validate_batch` + the segment's offset range judge it; the
//! scan stops at the first one that is not (recovery truncates there: why does not matter). Legacy
//! v0/v1 entries are left to the Python scan: the caller gets None.

const LOG_OVERHEAD: usize = 12;
const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
const RECORD_OVERHEAD_V0: i64 = 14;
const MIN_BATCH_LENGTH: i64 = 49;
const ATTRIBUTES_OFFSET: usize = 21;
const INT32_MAX: i64 = i32::MAX as i64;

pub struct IndexPoint {
    pub last_offset: i64,
    pub position: usize,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
}

pub struct Scan {
    pub valid_bytes: usize,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub index: Vec<IndexPoint>,
    pub epochs: Vec<(i32, i64)>, // (leader epoch, first offset) where a batch starts a newer epoch
}

fn i32_at(data: &[u8], p: usize) -> i32 {
    i32::from_be_bytes(data[p..p + 4].try_into().unwrap())
}

fn i64_at(data: &[u8], p: usize) -> i64 {
    i64::from_be_bytes(data[p..p + 8].try_into().unwrap())
}

pub fn scan(data: &[u8], base_offset: i64, index_interval_bytes: usize, mut latest_epoch: Option<i32>) -> Option<Scan> {
    let mut out = Scan { valid_bytes: 0, max_timestamp: -1, offset_of_max_timestamp: base_offset, index: Vec::new(),
                         epochs: Vec::new() };
    let mut last_index_entry = 0usize;
    let mut p = 0usize;
    let limit = data.len();
    loop {
        let remaining = limit - p;
        if remaining <= HEADER_SIZE_UP_TO_MAGIC {
            break; // a partial tail, or the end
        }
        let size = i32_at(data, p + 8) as i64;
        if size < RECORD_OVERHEAD_V0 {
            break;
        }
        let total = LOG_OVERHEAD as i64 + size;
        if total > remaining as i64 {
            break;
        }
        let total = total as usize;
        match data[p + 16] {
            2 => {}
            0 | 1 => return None,
            _ => break,
        }
        if size < MIN_BATCH_LENGTH || (data[p + ATTRIBUTES_OFFSET + 1] & 0x07) > 4 {
            break;
        }
        let stored_crc = u32::from_be_bytes(data[p + 17..p + 21].try_into().unwrap());
        if crate::crc::crc32c(&data[p + ATTRIBUTES_OFFSET..p + total]) != stored_crc {
            break;
        }
        let first = i64_at(data, p);
        let last_wide = first as i128 + i32_at(data, p + 23) as i128;   // exact, as Python's
        if !(0..=INT32_MAX as i128).contains(&(last_wide - base_offset as i128)) {
            break;
        }
        if last_wide > i64::MAX as i128 {
            return None; // offsets past int64 at the top of the range: the Python scan takes them
        }
        let last = last_wide as i64;
        let max_timestamp = i64_at(data, p + 35);
        if max_timestamp > out.max_timestamp {
            out.max_timestamp = max_timestamp;
            out.offset_of_max_timestamp = last;
        }
        if out.valid_bytes - last_index_entry > index_interval_bytes {
            out.index.push(IndexPoint { last_offset: last, position: out.valid_bytes, max_timestamp: out.max_timestamp,
                                        offset_of_max_timestamp: out.offset_of_max_timestamp });
            last_index_entry = out.valid_bytes;
        }
        let epoch = i32_at(data, p + 12);
        if epoch >= 0 && latest_epoch.is_none_or(|latest| epoch > latest) {
            out.epochs.push((epoch, first));
            latest_epoch = Some(epoch);
        }
        out.valid_bytes += total;
        p += total;
    }
    Some(out)
}
