//! An answer as the writing thread holds it: its buffers and file region, and the sends that move it.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

const MAX_SENDFILE: usize = 1 << 30;

/// Bytes to send: a Python `bytes` held (immutable, so its memory stays as it is while held) or a copy.
/// A held object dropped on the writer's thread has its reference released by PyO3 the next time the
/// loop's thread calls in (PyO3's pool of deferred decrefs): the writer never takes the lock.
pub(super) enum Keep {
    Held(#[allow(dead_code)] Py<PyBytes>),
    Copied(#[allow(dead_code)] Vec<u8>),
}

pub(super) struct Buffer {
    pub(super) ptr: *const u8,
    pub(super) len: usize,
    pub(super) _keep: Keep,
}

/// A region of a file to follow an answer's buffers, on a descriptor the writer owns and closes.
pub(super) struct FilePart {
    pub(super) fd: i32,
    pub(super) position: i64,
    pub(super) remaining: usize,
}

impl Drop for FilePart {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// One answer: its buffers, written with as few sends as the socket allows, then its file region.
pub(super) struct Piece {
    pub(super) buffers: Vec<Buffer>,
    pub(super) first: usize,    // the buffers before it are sent
    pub(super) offset: usize,   // ... and this much of it
    pub(super) file: Option<FilePart>,
}

// The raw pointers point into the objects the piece holds, which nothing changes while it is held.
unsafe impl Send for Piece {}

/// What one send of a connection's front piece is to do, taken under the lock and done outside it.
pub(super) enum Step {
    Buffers(Vec<libc::iovec>, bool),   // the rest of the buffers; more (the file) follows
    File(i32, i64, usize),
}

pub(super) fn front_step(piece: &Piece) -> Option<Step> {
    if piece.first < piece.buffers.len() {
        let iov = piece.buffers[piece.first..].iter().enumerate().map(|(i, b)| {
            let skip = if i == 0 { piece.offset } else { 0 };
            libc::iovec { iov_base: unsafe { b.ptr.add(skip) } as *mut libc::c_void, iov_len: b.len - skip }
        }).collect();
        return Some(Step::Buffers(iov, piece.file.as_ref().is_some_and(|f| f.remaining > 0)));
    }
    match &piece.file {
        Some(f) if f.remaining > 0 => Some(Step::File(f.fd, f.position, f.remaining.min(MAX_SENDFILE))),
        _ => None,
    }
}

/// `n` bytes of the front piece sent: true when it is all sent.
pub(super) fn advance(piece: &mut Piece, mut n: usize, from_file: bool) -> bool {
    if from_file {
        let f = piece.file.as_mut().expect("a file step has a file");
        f.position += n as i64;
        f.remaining -= n;
    } else {
        while n > 0 {
            let left = piece.buffers[piece.first].len - piece.offset;
            if n >= left {
                n -= left;
                piece.first += 1;
                piece.offset = 0;
            } else {
                piece.offset += n;
                n = 0;
            }
        }
        while piece.first < piece.buffers.len() && piece.buffers[piece.first].len == 0 {
            piece.first += 1;
        }
    }
    piece.first == piece.buffers.len() && piece.file.as_ref().is_none_or(|f| f.remaining == 0)
}

pub(super) fn send_step(fd: i32, step: &Step) -> isize {
    match step {
        Step::Buffers(iov, more) => {
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = iov.len().min(libc::UIO_MAXIOV as usize) as _;
            // MSG_NOSIGNAL: a peer that went is an EPIPE to report, not a signal.
            // MSG_MORE also where the buffers are more than one send takes: the rest follows.
            let capped = iov.len() > libc::UIO_MAXIOV as usize;
            let flags = libc::MSG_NOSIGNAL | if *more || capped { libc::MSG_MORE } else { 0 };
            unsafe { libc::sendmsg(fd, &msg, flags) }
        }
        Step::File(file_fd, position, count) => {
            // sendfile has no MSG_NOSIGNAL: a peer that went is an EPIPE here because Python ignores
            // SIGPIPE in every process it starts (the signal's default would end the server).
            let mut offset: libc::off_t = *position;
            unsafe { libc::sendfile(fd, *file_fd, &mut offset, *count) }
        }
    }
}

pub(super) fn buffers_of(items: &Bound<'_, PyAny>) -> PyResult<(Vec<Buffer>, usize)> {
    let mut out = Vec::new();
    let mut size = 0;
    for item in items.try_iter()? {
        let item = item?;
        let buffer = match item.cast::<PyBytes>() {
            Ok(bytes) => {
                let data = bytes.as_bytes();
                Buffer { ptr: data.as_ptr(), len: data.len(), _keep: Keep::Held(bytes.clone().unbind()) }
            }
            Err(_) => {   // a bytearray or memoryview may change after the call: copied
                let copy = crate::Bytes::of(&item)?.slice().to_vec();
                Buffer { ptr: copy.as_ptr(), len: copy.len(), _keep: Keep::Copied(copy) }
            }
        };
        if buffer.len > 0 {   // a send of nothing would read as a peer that went
            size += buffer.len;
            out.push(buffer);
        }
    }
    Ok((out, size))
}
