//! Answers written to client sockets by a thread of its own, which never takes the interpreter lock.
//!
//! Why: a busy `stratalog serve` is bound by its event loop's one thread, and about a sixth of that
//! thread went to the send(2) of answers (bench/README.md, "Service path"). Kafka's broker writes
//! its answers on network threads apart from its request handlers; this is that thread for ours.
//!
//! The loop hands each connection's answers over in order (`send`, `send_file`); the thread writes
//! them in that order to its own duplicate of the connection's socket, so that the loop's transport
//! may close its descriptor meanwhile without another socket or file ever receiving the bytes. A
//! socket that takes no more waits in the thread's epoll set, and the others go on. What the loop
//! must hear of (a connection's queue fell to a level it asked about, a write failed, a file ended
//! before its region did) comes back as events through an eventfd the loop watches.

mod piece;
mod thread;

use std::io::Error;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::os_error;
use piece::{buffers_of, FilePart, Piece};
use thread::{run, Conn, Inner, Shared};

fn eventfd() -> PyResult<i32> {
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 { Err(os_error(Error::last_os_error())) } else { Ok(fd) }
}

/// One writing thread and the connections it writes for, by the descriptor each was attached with.
#[pyclass(module = "stratalog_native")]
pub struct SocketWriter {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl SocketWriter {
    fn conn(shared: &mut Shared, fd: i32) -> PyResult<&mut Conn> {
        match shared.conns.get_mut(&fd) {
            Some(conn) if !conn.released => Ok(conn),
            _ => Err(PyValueError::new_err(format!("descriptor {fd} is not a connection of this writer"))),
        }
    }

    /// Queue `piece`; on an error the piece comes back with it, its file descriptor still the caller's.
    fn enqueue(&self, fd: i32, piece: Piece, size: usize) -> Result<usize, (PyErr, Box<Piece>)> {
        let mut shared = self.inner.lock();
        let shared = &mut *shared;
        let conn = match SocketWriter::conn(shared, fd) {
            Ok(conn) => conn,
            Err(error) => return Err((error, Box::new(piece))),
        };
        if conn.failed || size == 0 {
            // A failure: the loop hears of it by its event, and what follows has nowhere to go. Nothing
            // to send: a piece of no bytes would read as the end of the queue.
            return Ok(conn.queued);
        }
        conn.pieces.push_back(piece);
        conn.queued += size;
        let queued = conn.queued;
        self.inner.make_ready(shared, fd);
        Ok(queued)
    }
}

#[pymethods]
impl SocketWriter {
    #[new]
    fn new() -> PyResult<Self> {
        let wake_fd = eventfd()?;
        let events_fd = eventfd().inspect_err(|_| unsafe { libc::close(wake_fd); })?;
        let epoll_fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let inner = Arc::new(Inner { shared: Mutex::new(Shared::default()), wake_fd, events_fd, epoll_fd });
        if epoll_fd < 0 {
            return Err(os_error(Error::last_os_error()));
        }
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: wake_fd as u64 };
        if unsafe { libc::epoll_ctl(epoll_fd, libc::EPOLL_CTL_ADD, wake_fd, &mut event) } != 0 {
            return Err(os_error(Error::last_os_error()));
        }
        let for_thread = Arc::clone(&inner);
        let thread = std::thread::Builder::new().name("socket-writer".into()).spawn(move || run(for_thread))
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(SocketWriter { inner, thread: Some(thread) })
    }

    /// The eventfd that is readable while events wait (`take_events`).
    #[getter]
    fn events_fd(&self) -> i32 {
        self.inner.events_fd
    }

    /// Take `fd` (a socket's duplicate, which the writer now owns and closes) as a connection. The
    /// socket is made non-blocking (an event loop's are already): a send must never wait for it.
    fn attach(&self, fd: i32) -> PyResult<()> {
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(os_error(Error::last_os_error()));
        }
        let mut shared = self.inner.lock();
        if shared.stopping {
            return Err(PyValueError::new_err("the socket writer is closed"));
        }
        if shared.conns.contains_key(&fd) {
            return Err(PyValueError::new_err(format!("descriptor {fd} is a connection of this writer already")));
        }
        shared.conns.insert(fd, Conn::default());
        Ok(())
    }

    /// Queue `buffers` (bytes-like) to be sent on `fd` after what was queued before; the bytes now queued.
    fn send(&self, fd: i32, buffers: &Bound<'_, PyAny>) -> PyResult<usize> {
        let (buffers, size) = buffers_of(buffers)?;
        self.enqueue(fd, Piece { buffers, first: 0, offset: 0, file: None }, size).map_err(|(error, _)| error)
    }

    /// Queue `head` then `size` bytes of the file open on `file_fd` from `position`; the bytes now
    /// queued. Once it returns, the writer owns `file_fd` and closes it when sent or dropped; when it
    /// raises, `file_fd` is still the caller's to close.
    fn send_file(&self, fd: i32, head: &Bound<'_, PyAny>, file_fd: i32, position: i64, size: usize) -> PyResult<usize> {
        let (buffers, head_size) = buffers_of(head)?;
        let file = FilePart { fd: file_fd, position, remaining: size };
        self.enqueue(fd, Piece { buffers, first: 0, offset: 0, file: Some(file) }, head_size + size)
            .map_err(|(error, mut piece)| {
                std::mem::forget(piece.file.take());   // not closed here: the caller still owns it
                error
            })
    }

    /// Bytes queued on `fd` and not yet taken by its socket.
    fn queued(&self, fd: i32) -> PyResult<usize> {
        let mut shared = self.inner.lock();
        Ok(SocketWriter::conn(&mut shared, fd)?.queued)
    }

    /// Whether at most `level` bytes are queued on `fd` (or its writes failed); if not, an event
    /// (fd, 0) says when they are.
    fn report_below(&self, fd: i32, level: usize) -> PyResult<bool> {
        let mut shared = self.inner.lock();
        let conn = SocketWriter::conn(&mut shared, fd)?;
        if conn.queued <= level || conn.failed {
            conn.report_below = None;
            return Ok(true);
        }
        conn.report_below = Some(level);
        Ok(false)
    }

    /// The loop is done with `fd`: it is closed once its queue is written, or at once with `discard`
    /// (the rest dropped).
    #[pyo3(signature = (fd, discard=false))]
    fn release(&self, fd: i32, discard: bool) -> PyResult<()> {
        let mut shared = self.inner.lock();
        let shared = &mut *shared;
        let Ok(conn) = SocketWriter::conn(shared, fd) else {
            return Ok(());   // released before, or the writer closed: nothing of it is held
        };
        conn.released = true;
        conn.discard = discard;
        conn.report_below = None;
        if conn.stalled && discard {
            conn.stalled = false;
        }
        // Events not yet taken are dropped with it: its number may be another connection's by the time
        // the loop would read them.
        shared.events.retain(|&(event_fd, _)| event_fd != fd);
        self.inner.make_ready(shared, fd);
        Ok(())
    }

    /// Whether a write on `fd` failed (its queue was dropped and an event said why).
    fn failed(&self, fd: i32) -> PyResult<bool> {
        let mut shared = self.inner.lock();
        Ok(SocketWriter::conn(&mut shared, fd)?.failed)
    }

    /// Connections whose descriptors the writer still holds, released ones still being written included.
    fn held(&self) -> usize {
        self.inner.lock().conns.len()
    }

    /// The events since the last call, as (fd, code): 0 the queue fell to the level asked for, an
    /// errno a write failed (the rest was dropped), -1 a file ended before its region did (the
    /// connection was shut down).
    fn take_events(&self) -> Vec<(i32, i32)> {
        let mut shared = self.inner.lock();
        let mut count: u64 = 0;
        unsafe { libc::read(self.inner.events_fd, &mut count as *mut u64 as *mut libc::c_void, 8) };
        std::mem::take(&mut shared.events)
    }

    /// Write what the sockets take now, close every descriptor held, and end the thread.
    fn close(&mut self, py: Python<'_>) {
        self.stop(py);
    }
}

impl SocketWriter {
    fn stop(&mut self, py: Python<'_>) {
        {
            let mut shared = self.inner.lock();
            shared.stopping = true;
            Inner::signal(self.inner.wake_fd);
        }
        if let Some(thread) = self.thread.take() {
            py.detach(|| { let _ = thread.join(); });
        }
    }
}

impl Drop for SocketWriter {
    fn drop(&mut self) {
        if self.thread.is_some() {
            Python::attach(|py| self.stop(py));
        }
    }
}
