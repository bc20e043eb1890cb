//! The writing thread: each ready connection's queue written until it is empty or its socket takes no
//! more; sockets that take no more wait in an epoll set with the eventfd that wakes the thread.

use std::collections::{HashMap, VecDeque};
use std::io::Error;
use std::sync::{Arc, Mutex, MutexGuard};

use super::piece::{advance, front_step, send_step, Piece, Step};

/// Event codes besides an errno: the queue fell to the level asked for, or the file of a region
/// ended before the region did (the connection was shut down: its head promised more bytes).
const DRAINED: i32 = 0;
const FILE_SHORT: i32 = -1;

#[derive(Default)]
pub(super) struct Conn {
    pub(super) pieces: VecDeque<Piece>,
    pub(super) queued: usize,
    pub(super) stalled: bool,        // in the epoll set, waiting for the socket to take more
    pub(super) registered: bool,     // ... ever added to it (then modified, not added again)
    pub(super) in_ready: bool,
    pub(super) failed: bool,
    pub(super) released: bool,       // closed by the writer once its queue is written (or dropped)
    pub(super) discard: bool,        // ... at once, without writing the rest
    pub(super) report_below: Option<usize>,
}

#[derive(Default)]
pub(super) struct Shared {
    pub(super) conns: HashMap<i32, Conn>,
    pub(super) ready: VecDeque<i32>,
    pub(super) events: Vec<(i32, i32)>,
    pub(super) asleep: bool,
    pub(super) stopping: bool,
}

pub(super) struct Inner {
    pub(super) shared: Mutex<Shared>,
    pub(super) wake_fd: i32,     // the writer's: something is ready, or it is to stop
    pub(super) events_fd: i32,   // the loop's: events wait in `shared.events`
    pub(super) epoll_fd: i32,
}

impl Drop for Inner {
    fn drop(&mut self) {
        unsafe {
            libc::close(self.wake_fd);
            libc::close(self.events_fd);
            libc::close(self.epoll_fd);
        }
    }
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic on the writer's thread would poison it: the state is still whole (each change is
        // made under the lock in one step), so it is taken as it is.
        self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn signal(fd: i32) {
        let one: u64 = 1;
        unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
    }

    /// An event for the loop, unless the loop released the connection: its number may then be
    /// another connection's by the time the loop reads it (the descriptor closed, a new one duplicated).
    fn push_event(&self, shared: &mut Shared, fd: i32, code: i32) {
        if shared.conns.get(&fd).is_none_or(|conn| conn.released) {
            return;
        }
        if shared.events.is_empty() {
            Inner::signal(self.events_fd);
        }
        shared.events.push((fd, code));
    }

    /// Mark `fd` ready for the writer (unless it waits for its socket), waking it if it sleeps.
    pub(super) fn make_ready(&self, shared: &mut Shared, fd: i32) {
        let Some(conn) = shared.conns.get_mut(&fd) else { return };
        if conn.stalled && !conn.discard || conn.in_ready {
            return;
        }
        conn.in_ready = true;
        shared.ready.push_back(fd);
        if shared.asleep {
            shared.asleep = false;
            Inner::signal(self.wake_fd);
        }
    }
}

/// Write `fd`'s queue until it is empty or its socket takes no more.
fn write_conn(inner: &Inner, fd: i32) {
    loop {
        let step = {
            let mut shared = inner.lock();
            let Some(conn) = shared.conns.get_mut(&fd) else { return };
            if conn.failed || conn.discard {
                conn.pieces.clear();
                conn.queued = 0;
            }
            match conn.pieces.front().and_then(front_step) {
                Some(step) => step,
                None => {
                    conn.pieces.clear();   // an empty piece (no bytes at all)
                    conn.in_ready = false;
                    if conn.released {
                        let registered = conn.registered;
                        shared.conns.remove(&fd);
                        drop(shared);
                        forget(inner, fd, registered);
                    }
                    return;
                }
            }
        };
        let n = send_step(fd, &step);
        let errno = if n < 0 { Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) } else { 0 };
        let mut shared = inner.lock();
        let shared = &mut *shared;
        let Some(conn) = shared.conns.get_mut(&fd) else { return };
        if n > 0 {
            let n = n as usize;
            conn.queued = conn.queued.saturating_sub(n);
            let front = conn.pieces.front_mut().expect("the piece sent from is still queued");
            if advance(front, n, matches!(step, Step::File(..))) {
                conn.pieces.pop_front();
            }
            if let Some(level) = conn.report_below {
                if conn.queued <= level {
                    conn.report_below = None;
                    inner.push_event(shared, fd, DRAINED);
                }
            }
        } else if n == 0 && matches!(step, Step::File(..)) {
            // The file is shorter than its region now: the head announced bytes that will not come.
            fail(inner, shared, fd, FILE_SHORT);
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        } else if errno == libc::EAGAIN {
            let conn = shared.conns.get_mut(&fd).expect("still there");
            let mut event = libc::epoll_event { events: (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32, u64: fd as u64 };
            let op = if conn.registered { libc::EPOLL_CTL_MOD } else { libc::EPOLL_CTL_ADD };
            if unsafe { libc::epoll_ctl(inner.epoll_fd, op, fd, &mut event) } == 0 {
                conn.registered = true;
                conn.stalled = true;
                conn.in_ready = false;
                return;
            }
            let errno = Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            fail(inner, shared, fd, errno);
        } else if errno != libc::EINTR {
            fail(inner, shared, fd, if n == 0 { libc::EPIPE } else { errno });
        }
    }
}

/// A failed write: the rest of the queue goes, and the loop hears why.
fn fail(inner: &Inner, shared: &mut Shared, fd: i32, code: i32) {
    let conn = shared.conns.get_mut(&fd).expect("a connection that failed is known");
    conn.failed = true;
    conn.report_below = None;
    conn.pieces.clear();   // in the same step as the event: the loop that hears of it finds none queued
    conn.queued = 0;
    inner.push_event(shared, fd, code);
}

/// The writer's descriptor of a connection it no longer holds: out of the epoll set, then closed (in
/// that order: an entry left behind would follow its number to whatever is opened next under it).
fn forget(inner: &Inner, fd: i32, registered: bool) {
    unsafe {
        if registered {
            libc::epoll_ctl(inner.epoll_fd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut());
        }
        libc::close(fd);
    }
}

pub(super) fn run(inner: Arc<Inner>) {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        let next = {
            let mut shared = inner.lock();
            match shared.ready.pop_front() {
                Some(fd) => Some(fd),
                None if shared.stopping => break,
                None => {
                    shared.asleep = true;
                    None
                }
            }
        };
        if let Some(fd) = next {
            write_conn(&inner, fd);
            continue;
        }
        let n = unsafe { libc::epoll_wait(inner.epoll_fd, events.as_mut_ptr(), events.len() as i32, -1) };
        let mut shared = inner.lock();
        shared.asleep = false;
        for event in events.iter().take(n.max(0) as usize) {
            let fd = event.u64 as i32;
            if fd == inner.wake_fd {
                let mut count: u64 = 0;
                unsafe { libc::read(inner.wake_fd, &mut count as *mut u64 as *mut libc::c_void, 8) };
            } else if let Some(conn) = shared.conns.get_mut(&fd) {
                conn.stalled = false;
                inner.make_ready(&mut shared, fd);
            }
        }
    }
    // Stopping: what could be written was; the rest goes with its descriptors.
    let mut shared = inner.lock();
    let conns: Vec<(i32, bool)> = shared.conns.drain().map(|(fd, conn)| (fd, conn.registered)).collect();
    shared.ready.clear();
    drop(shared);
    for (fd, registered) in conns {
        forget(&inner, fd, registered);
    }
}
