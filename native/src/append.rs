//! A leader's append of one producer batch as it was sent, in one call: the checks that
//! `stratalog.storage.validation._accepted_as_sent` makes, the active segment's roll checks, and
//! the write with the base offset and partition leader epoch set (`FileRecords.append_batch`).
//!
//! It exists because on the append path the Python layers between a batch and its write cost more
//! than the write itself. It decides only the common case and declines everything else before
//! writing a byte, so the caller's reference path decides, and names, whatever is not plain.

use std::io;

use crate::{be, v2_head};

// Attributes that the reference path refuses or rewrites: control, transactional, LogAppendTime.
const REFUSED_ATTRIBUTES: u16 = 0x20 | 0x10 | 0x08;
const COMPRESSION_BITS: u16 = 0x07;

/// The topic's rules and the segment's room for this append (`append_as_sent` in lib.rs makes them
/// from what `LogSegment.try_append_as_sent` passes).
pub struct Limits {
    pub max_message_bytes: i128,
    pub compact: bool,
    pub timestamp_before_max_ms: i128,
    pub timestamp_after_max_ms: i128,
    pub now_ms: i128,
    /// Bytes the active segment may still take before it must roll.
    pub room: i128,
    /// A max timestamp above this rolls the segment by time.
    pub roll_after_timestamp: i128,
    /// The largest last offset delta that this segment (and, on an event loop, the flush interval)
    /// allows the batch.
    pub max_last_offset_delta: i128,
    /// The producer id the caller read from the batch, whose sequence it has checked if it is one.
    pub checked_producer_id: i64,
}

/// What the caller's `AppendInfo` needs: (last offset delta, max timestamp, record count).
pub type Accepted = (i32, i64, i32);

/// The facts of `d` when it is one sound, uncompressed v2 batch of the producer whose sequence the
/// caller checked (or of none) that every rule accepts as sent and that fits the active segment;
/// None otherwise.
pub fn accept(d: &[u8], limits: &Limits) -> Option<Accepted> {
    let h = v2_head(d)?;
    // The cheap refusals first, before the CRC: anything the reference path would refuse or
    // rewrite, and a producer's batch whose sequence the caller has not checked.
    if h.size != d.len() || h.attributes & (COMPRESSION_BITS | REFUSED_ATTRIBUTES) != 0 || h.base_offset != 0
        || h.producer_id != limits.checked_producer_id || (h.producer_id >= 0 && h.base_sequence < 0)
        || h.count <= 0 || h.count != h.last_offset_delta.wrapping_add(1)
        || h.size as i128 > limits.max_message_bytes || h.size as i128 > limits.room
        || i128::from(h.last_offset_delta) > limits.max_last_offset_delta {
        return None;
    }
    if !h.crc_matches(d) {
        return None;
    }
    let s = h.summary(d)?;
    let (min_ts, max_ts) = (s.min_timestamp, s.max_timestamp);
    if (limits.compact && s.first_keyless_index >= 0) || max_ts != i128::from(h.max_timestamp)
        || (min_ts >= 0 && limits.now_ms - min_ts > limits.timestamp_before_max_ms)
        || (max_ts >= 0 && max_ts - limits.now_ms > limits.timestamp_after_max_ms)
        || max_ts > limits.roll_after_timestamp {
        return None;
    }
    Some((h.last_offset_delta, h.max_timestamp, h.count))
}

/// `d` written at `position` of `fd` with bytes 0..8 set to `base_offset` and 12..16 to
/// `leader_epoch` (neither is under the CRC); `d` itself is not changed or copied.
pub fn write(fd: i32, position: i64, d: &[u8], base_offset: i64, leader_epoch: i32) -> io::Result<()> {
    let mut prefix = [0u8; 16];
    prefix[0..8].copy_from_slice(&base_offset.to_be_bytes());
    prefix[8..12].copy_from_slice(&be::<4>(d, 8));
    prefix[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
    let (mut head, mut rest): (&[u8], &[u8]) = (&prefix, &d[16..]);
    let mut at = position;
    // One system call as a rule; a short write continues where it stopped.
    while !head.is_empty() || !rest.is_empty() {
        let parts = [
            libc::iovec { iov_base: head.as_ptr() as *mut libc::c_void, iov_len: head.len() },
            libc::iovec { iov_base: rest.as_ptr() as *mut libc::c_void, iov_len: rest.len() },
        ];
        // SAFETY: both iovecs point into live slices of the stated lengths; pwritev only reads them.
        let written = unsafe { libc::pwritev(fd, parts.as_ptr(), 2, at) };
        if written < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        let mut n = written as usize;
        at += written as i64;
        let from_head = n.min(head.len());
        head = &head[from_head..];
        n -= from_head;
        rest = &rest[n..];
    }
    Ok(())
}
