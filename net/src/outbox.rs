//! A sink's outbox: messages sent from the queue's own memory, without a
//! copy, each holding the slots it covers until ZeroMQ has let go of it.
//!
//! A message is built over the slots with `zmq_msg_init_data`; libzmq calls
//! the free function given there once the message has left (written to the
//! kernel, or dropped: the I/O thread, any thread). Until then the items stay
//! unconsumed in the queue, so the writer upstream cannot reuse the slots:
//! the queue itself is the hold, and no library hook is needed. The free
//! function only marks the message's [`Ticket`] released and wakes the sink;
//! the sink consumes the longest released run from the front (messages may
//! be let go out of order: a PUB pipe drops one while an earlier one is
//! still queued). Each ticket keeps the queue's memory mapped
//! ([`MemoryHold`]) until its message is let go, should the queue grow into
//! new memory meanwhile. The outbox owns the socket and the reading end, the
//! socket first, so that on every way out (an error included) the context
//! is terminated (every message sent or dropped, every free function run)
//! before the reading end lets the writer have the slots.
//!
//! Only `tcp://` and `ipc://` endpoints reach here ([`crate::Endpoint`]): an
//! `inproc://` receiver would get the queue's memory as its message, for as
//! long as it liked and writable.

#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::os::raw::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;

use dmaflow::graph::{BoxError, Input};
use dmaflow::ring::{MemoryHold, Pod};

use std::time::{Duration, Instant};

use crate::Edge;
use crate::link::{Link, SLICE_MS};

/// One message in flight: released once ZeroMQ has let go of it.
struct Ticket {
    released: AtomicBool,
    /// The sink's thread, woken by a release.
    sink: Thread,
    /// The queue's memory as it was mapped when the message was built.
    memory: Option<MemoryHold>,
}

/// libzmq's free function for a message built over queue slots: runs once
/// per message, on whichever thread lets go of it last.
unsafe extern "C" fn let_go(_data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the `Arc::into_raw` of one strong count of a
    // `Ticket`, made in `Outbox::send_held` for this message alone, and
    // libzmq calls the free function exactly once per message: the count is
    // taken back once.
    let ticket = unsafe { Arc::from_raw(hint as *const Ticket) };
    ticket.released.store(true, Ordering::Release);
    ticket.sink.unpark();
}

/// What became of a message handed to ZeroMQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// It is on its way.
    Queued,
    /// The socket could not take it now (EAGAIN, or a wait cut short by a
    /// signal): the items are as before.
    Full,
}

/// A run of items sent, in stream order.
struct Flight {
    /// `None`: a copy went (or the message was dropped): released already.
    ticket: Option<Arc<Ticket>>,
    items: usize,
}

/// The sink's socket and reading end, with the messages in flight over the
/// reading end's slots.
pub(crate) struct Outbox<T: Pod> {
    /// First: dropped (the context terminated, every message let go) before
    /// the reading end.
    pub(crate) link: Link,
    input: Input<T>,
    flights: VecDeque<Flight>,
    /// Items sent and not yet consumed (the front of the readable window).
    held: usize,
    /// Tickets to reuse (no other count).
    spare: Vec<Arc<Ticket>>,
    sink: Thread,
}

impl<T: Pod> Outbox<T> {
    /// An outbox over `input`, sending at `link`, woken on the calling
    /// thread.
    pub(crate) fn new(link: Link, input: Input<T>) -> Self {
        Outbox {
            link,
            input,
            flights: VecDeque::new(),
            held: 0,
            spare: Vec::new(),
            sink: std::thread::current(),
        }
    }

    /// Items sent and not yet let go of.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// The queue's capacity in items, as its reader last saw it.
    pub(crate) fn capacity(&self) -> usize {
        self.input.capacity()
    }

    /// Consumes the items of the messages let go of at the front; returns
    /// how many.
    pub(crate) fn release(&mut self) -> Result<usize, BoxError> {
        let mut n = 0;
        while let Some(f) = self.flights.front() {
            if let Some(t) = &f.ticket
                && !t.released.load(Ordering::Acquire)
            {
                break;
            }
            let f = self.flights.pop_front().unwrap_or_else(|| unreachable!());
            n += f.items;
            if let Some(t) = f.ticket {
                self.recycle(t);
            }
        }
        if n > 0 {
            self.held -= n;
            self.input.consume(n)?;
        }
        Ok(n)
    }

    /// Keeps a released ticket for the next message, if nothing else counts
    /// it any more (the free function drops its count just after marking).
    fn recycle(&mut self, mut t: Arc<Ticket>) {
        if let Some(ticket) = Arc::get_mut(&mut t) {
            ticket.memory = None;
            ticket.released.store(false, Ordering::Relaxed);
            self.spare.push(t);
        }
    }

    /// Waits until items not yet sent are readable and returns them, or an
    /// empty slice at the end of the stream once every message is let go of.
    /// While messages are in flight it wakes on each release (and at least
    /// every `slice`), consuming what was let go of, so the writer upstream
    /// gets its slots back as soon as ZeroMQ is done with them.
    /// A peer that was there and has been gone for `edge.grace` while
    /// messages wait fails the graph ([`Error::NoPeer`]), as a send that no
    /// peer takes does; so does the graph's abort.
    pub(crate) fn fresh(&mut self, edge: &Edge) -> Result<&[T], BoxError> {
        let slice = Duration::from_millis(SLICE_MS as u64);
        let mut gone_since: Option<Instant> = None;
        loop {
            self.release()?;
            if self.held == 0 {
                let s = self.input.peek(1)?;
                let (ptr, len) = (s.as_ptr(), s.len());
                // SAFETY: reborrowing `s` (a slice of `self.input` borrowed
                // for the returned lifetime) past the loop the borrow checker
                // cannot see the end of; nothing else borrows `self` meanwhile.
                return Ok(unsafe { std::slice::from_raw_parts(ptr, len) });
            }
            if self.held < self.input.capacity()
                && let Some(s) = self.input.try_peek(self.held + 1)?
                && s.len() > self.held
            {
                let (ptr, len) = (s.as_ptr(), s.len());
                // SAFETY: as above.
                let s = unsafe { std::slice::from_raw_parts(ptr, len) };
                return Ok(&s[self.held..]);
            }
            // The graph's abort, while the queue is all in flight.
            self.input.try_peek(0)?;
            self.link.check_peer_gone(edge, &mut gone_since)?;
            // Nothing new (or the stream ended): wait for a release. A
            // release that came between the look and here has unparked
            // already, so this returns at once.
            std::thread::park_timeout(slice);
        }
    }

    /// Records `items` sent as a copy (or dropped): released already.
    pub(crate) fn sent_copy(&mut self, items: usize) {
        self.push(None, items);
    }

    fn push(&mut self, ticket: Option<Arc<Ticket>>, items: usize) {
        // Runs of released items merge, so a copying edge keeps one entry.
        if ticket.is_none()
            && let Some(last) = self.flights.back_mut()
            && last.ticket.is_none()
        {
            last.items += items;
        } else {
            self.flights.push_back(Flight { ticket, items });
        }
        self.held += items;
    }

    /// The first `n` items not yet sent, if that many are readable (known
    /// readable after [`Outbox::fresh`]: no wait, no growth).
    pub(crate) fn unsent(&mut self, n: usize) -> Option<&[T]> {
        let (from, want) = (self.held, self.held + n);
        match self.input.try_peek(want) {
            Ok(Some(s)) if s.len() >= want => Some(&s[from..want]),
            _ => None,
        }
    }

    /// Sends the first `n` items not yet sent (within what
    /// [`Outbox::fresh`] returned last) as one message over the queue's
    /// slots, `flags` as `zmq_msg_send` takes them (with DONTWAIT it never
    /// waits: `Sent::Full` when the socket has no room).
    pub(crate) fn send_held(&mut self, n: usize, flags: i32) -> Result<Sent, zmq::Error> {
        let Some(items) = self.unsent(n) else {
            return Err(zmq::Error::EINVAL);
        };
        let bytes: &[u8] = bytemuck::cast_slice(items);
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        let memory = self.input.hold();
        let mut ticket = self.spare.pop().unwrap_or_else(|| {
            Arc::new(Ticket {
                released: AtomicBool::new(false),
                sink: self.sink.clone(),
                memory: None,
            })
        });
        if let Some(t) = Arc::get_mut(&mut ticket) {
            t.memory = memory;
        }
        let hint = Arc::into_raw(ticket.clone()) as *mut c_void;
        let mut msg = zmq_sys::zmq_msg_t::default();
        // SAFETY: `ptr..ptr + len` are readable items of the queue, in memory
        // the ticket keeps mapped (`MemoryHold`) until the free function has
        // run; they are not consumed until the ticket is released (only
        // `release` consumes, and only released runs), so the writer cannot
        // reserve and rewrite them while libzmq reads them, and libzmq only
        // reads a message it sends (tcp and ipc only: no in-process receiver
        // gets the pointer). `let_go` takes back the count `hint` carries.
        let rc = unsafe {
            zmq_sys::zmq_msg_init_data(&mut msg, ptr as *mut c_void, len, Some(let_go), hint)
        };
        if rc != 0 {
            // SAFETY: the message was not made, so `let_go` will not run:
            // the count `hint` carries is taken back here, once.
            drop(unsafe { Arc::from_raw(hint as *const Ticket) });
            self.recycle(ticket);
            return Err(last_error());
        }
        // SAFETY: `msg` was initialised above; the socket pointer is the
        // link's live socket, used on this thread only.
        let rc = unsafe { zmq_sys::zmq_msg_send(&mut msg, self.link.socket.as_mut_ptr(), flags) };
        if rc < 0 {
            let e = last_error();
            // Not sent: the message is still ours; closing it runs `let_go`
            // now, on this thread.
            // SAFETY: `msg` is initialised and not sent.
            unsafe { zmq_sys::zmq_msg_close(&mut msg) };
            self.recycle(ticket);
            return if matches!(e, zmq::Error::EAGAIN | zmq::Error::EINTR) {
                Ok(Sent::Full)
            } else {
                Err(e)
            };
        }
        self.push(Some(ticket), n);
        Ok(Sent::Queued)
    }

    /// The reading end (for a look at the graph while waiting).
    pub(crate) fn input(&mut self) -> &mut Input<T> {
        &mut self.input
    }
}

/// ZeroMQ's error for the call that just failed on this thread.
fn last_error() -> zmq::Error {
    // SAFETY: `zmq_errno` reads this thread's errno.
    zmq::Error::from_raw(unsafe { zmq_sys::zmq_errno() })
}

/// Makes a PUB socket refuse a message (EAGAIN) at the high-water mark
/// instead of dropping it silently (`ZMQ_XPUB_NODROP`, which a PUB socket
/// takes as XPUB does), so the sink can count what it drops.
pub(crate) fn refuse_at_high_water_mark(socket: &mut zmq::Socket) -> Result<(), zmq::Error> {
    let on: i32 = 1;
    // SAFETY: the socket pointer is live; the option's value is an `int`
    // read from `&on` for `size_of::<i32>()` bytes during the call.
    let rc = unsafe {
        zmq_sys::zmq_setsockopt(
            socket.as_mut_ptr(),
            zmq_sys::ZMQ_XPUB_NODROP as i32,
            (&on as *const i32).cast(),
            std::mem::size_of::<i32>(),
        )
    };
    if rc != 0 {
        return Err(last_error());
    }
    Ok(())
}

/// A message of ZeroMQ's own memory, filled by one copy, kept for another
/// try when the socket could not take it.
pub(crate) struct Copied(zmq_sys::zmq_msg_t);

impl Copied {
    /// `head` then `body`, copied into one message.
    pub(crate) fn new(head: &[u8], body: &[u8]) -> Result<Self, zmq::Error> {
        let mut msg = zmq_sys::zmq_msg_t::default();
        let len = head.len() + body.len();
        // SAFETY: `msg` is ours; on failure it is left uninitialised and
        // not used again (no `Copied` is made of it).
        if unsafe { zmq_sys::zmq_msg_init_size(&mut msg, len) } != 0 {
            return Err(last_error());
        }
        let copied = Copied(msg);
        // SAFETY: an initialised message of `len` bytes owns `len` writable
        // bytes at `zmq_msg_data`, which nothing else references yet; the
        // two copies fill them exactly.
        unsafe {
            let at = zmq_sys::zmq_msg_data(&copied.0 as *const _ as *mut _) as *mut u8;
            std::ptr::copy_nonoverlapping(head.as_ptr(), at, head.len());
            std::ptr::copy_nonoverlapping(body.as_ptr(), at.add(head.len()), body.len());
        }
        Ok(copied)
    }

    /// Sends the message, `flags` as `zmq_msg_send` takes them; `Sent::Full`
    /// leaves it here for another try.
    pub(crate) fn send(
        &mut self,
        socket: &mut zmq::Socket,
        flags: i32,
    ) -> Result<Sent, zmq::Error> {
        // SAFETY: `self.0` is an initialised message; the socket pointer is
        // live. A message that was sent is left empty (initialised) by
        // libzmq, so closing it on drop is right either way.
        let rc = unsafe { zmq_sys::zmq_msg_send(&mut self.0, socket.as_mut_ptr(), flags) };
        if rc < 0 {
            let e = last_error();
            return if matches!(e, zmq::Error::EAGAIN | zmq::Error::EINTR) {
                Ok(Sent::Full)
            } else {
                Err(e)
            };
        }
        Ok(Sent::Queued)
    }
}

impl Drop for Copied {
    fn drop(&mut self) {
        // SAFETY: `self.0` is initialised (made in `new`, or emptied by a
        // send) and closed only here.
        unsafe { zmq_sys::zmq_msg_close(&mut self.0) };
    }
}
