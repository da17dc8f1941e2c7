//! The scheduling state of one edge, shared by its ports and the runtime.

use crossbeam_utils::CachePadded;

use crate::ring;
use crate::sync::{AtomicU8, AtomicU64, AtomicUsize, Condvar, Ordering};

/// The side of an edge a node waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::graph) enum Side {
    Write,
    Read,
}

/// Scheduling state of one edge, shared by its ports and the runtime. The
/// two targets, written by a side as it blocks and read by the other side on
/// every commit or consume, lie on cache lines of their own, away from the
/// fields every port call reads (capacity, growth request).
pub(in crate::graph) struct Edge {
    pub(in crate::graph) id: usize,
    /// `from.port -> to.port, ...` for messages.
    pub(in crate::graph) label: String,
    pub(in crate::graph) writer_node: usize,
    /// Reading ends alive (a writer whose every output has none left has
    /// ended its work).
    pub(in crate::graph) readers: AtomicUsize,
    /// Whether a reader was still there when the writing end closed
    /// ([`WRITER_OPEN`] until it closes).
    pub(in crate::graph) read_at_close: AtomicU8,
    pub(in crate::graph) capacity: AtomicUsize,
    /// Bytes of one item, and the most items the queue may grow to.
    pub(in crate::graph) item_bytes: usize,
    pub(in crate::graph) max_items: usize,
    /// Capacity a reader's threshold (or the runtime) asked the writer to grow to.
    pub(in crate::graph) grow_to: AtomicUsize,
    /// The slowest reader position at which the blocked writer can go on.
    pub(in crate::graph) writer_target: CachePadded<AtomicU64>,
    /// The write position at which some blocked reader can go on.
    pub(in crate::graph) readers_target: CachePadded<AtomicU64>,
    pub(in crate::graph) writer_cv: Condvar,
    pub(in crate::graph) readers_cv: Condvar,
}

/// [`Edge::read_at_close`]: the writing end has not closed yet.
const WRITER_OPEN: u8 = 0;
/// [`Edge::read_at_close`]: closed with no reader left.
const CLOSED_UNREAD: u8 = 1;
/// [`Edge::read_at_close`]: closed while a reader was still reading.
const CLOSED_WHILE_READ: u8 = 2;

impl Edge {
    /// Records the writing end's close (before the queue closes, so no
    /// reader has seen the end of the stream yet).
    pub(in crate::graph) fn writer_closing(&self) {
        let read = if self.readers.load(Ordering::SeqCst) > 0 {
            CLOSED_WHILE_READ
        } else {
            CLOSED_UNREAD
        };
        self.read_at_close.store(read, Ordering::SeqCst);
    }

    /// Whether a reader of this edge was left reading when its writer ended:
    /// still there when the writing end closed (or now, if it has not).
    pub(super) fn left_reading(&self) -> bool {
        match self.read_at_close.load(Ordering::SeqCst) {
            WRITER_OPEN => self.readers.load(Ordering::SeqCst) > 0,
            read => read == CLOSED_WHILE_READ,
        }
    }

    /// The error for growing this queue to `items` items, beyond its limit.
    pub(in crate::graph) fn over_limit(&self, items: usize) -> ring::Error {
        ring::Error::QueueLimit {
            bytes: items.saturating_mul(self.item_bytes),
            limit: self.max_items.saturating_mul(self.item_bytes),
        }
    }

    /// A new edge `id` written by node `writer_node`, with a queue of `capacity`
    /// items that may grow to `max_items` items of `item_bytes` bytes.
    pub(in crate::graph) fn new(
        id: usize,
        label: String,
        writer_node: usize,
        capacity: usize,
        item_bytes: usize,
        max_items: usize,
    ) -> Self {
        Edge {
            item_bytes,
            max_items,
            id,
            label,
            writer_node,
            readers: AtomicUsize::new(0),
            read_at_close: AtomicU8::new(WRITER_OPEN),
            capacity: AtomicUsize::new(capacity),
            grow_to: AtomicUsize::new(0),
            writer_target: CachePadded::new(AtomicU64::new(u64::MAX)),
            readers_target: CachePadded::new(AtomicU64::new(u64::MAX)),
            writer_cv: Condvar::new(),
            readers_cv: Condvar::new(),
        }
    }
}
