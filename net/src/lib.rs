//! dmaflow's process-network edges across processes and machines, over
//! ZeroMQ, wire-compatible with GNU Radio's gr-zeromq blocks.
//!
//! A graph edge becomes remote by giving one side's port to a network node:
//! [`add_sink`] sends what a node writes (an `Input` of the edge), [`add_source`]
//! receives into an `Output` that a node reads ([`add_source_with`]: into a
//! node's first work, in place). The nodes at either end do
//! not know. Items go as gr-zeromq sends them: whole items, several per
//! message, native little-endian layout, optionally behind gr-zeromq's tag
//! header ([`tags`]). PUSH/PULL (the default) is lossless and ordered and
//! blocks at the high-water mark; PUB/SUB drops when a subscriber is slow.
//! Between dmaflow peers an empty message ends the stream; GNU Radio peers
//! send none, so a source takes an idle timeout. A peer that goes away
//! mid-stream ends the stream or fails the graph, as configured, after a
//! grace period in which a restarted peer reconnects.
//!
//! Copies: a sink sends each message from the queue's own slots
//! (`zmq_msg_init_data`), holding them (unconsumed, so the writer cannot
//! reuse them) until ZeroMQ has let go of the message; only a message with a
//! tag header is copied (gr-zeromq reads header and items from one message
//! part), and one under [`Edge::copy_below`] bytes (512 by default: a copy
//! is cheaper than holding the slots). [`add_source_with`] runs a node's
//! first work on each message where it landed, in ZeroMQ's buffer;
//! [`add_source`] copies each message into a queue. Sends and receives go
//! without waiting first; one that would block waits inside libzmq's own
//! send or receive, as a bare blocking loop does.
//! [`Stats`] counts messages, bytes, the bytes copied, the time waited on the
//! network and what a PUB sink dropped at its high-water mark (ZeroMQ would
//! drop it silently).
//!
//! The transport is libzmq (the implementation GNU Radio uses) through the
//! `zmq` crate, built from vendored source so a machine needs no system
//! package.

mod endpoint;
mod link;
mod outbox;
mod relay;
mod sink;
mod source;
pub mod tags;

pub use endpoint::{Edge, Endpoint, Pattern, Vanish};
pub use relay::Relay;
pub use sink::add_sink;
pub use source::{add_source, add_source_with};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// What went wrong at a network edge.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An endpoint that is not `tcp://HOST:PORT` or `ipc://PATH`.
    #[error("endpoint {endpoint:?}: {reason}")]
    BadEndpoint {
        /// What was given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An endpoint with a scheme other than tcp or ipc.
    #[error("endpoint {endpoint:?}: unknown scheme {scheme:?} (tcp, ipc)")]
    UnknownScheme {
        /// What was given.
        endpoint: String,
        /// Its scheme.
        scheme: String,
    },
    /// Binding or connecting failed (a port in use, an address not here).
    #[error("{action} {endpoint}: {source}")]
    Socket {
        /// "bind" or "connect".
        action: &'static str,
        /// Where.
        endpoint: String,
        /// ZeroMQ's error.
        source: zmq::Error,
    },
    /// ZeroMQ failed otherwise.
    #[error("ZeroMQ, {what}: {source}")]
    Zmq {
        /// What was being done.
        what: &'static str,
        /// ZeroMQ's error.
        source: zmq::Error,
    },
    /// The peer went away mid-stream and did not come back in time.
    #[error(
        "{endpoint}: the peer went away mid-stream after {items} items and did not come back within {grace:?}"
    )]
    PeerVanished {
        /// Where.
        endpoint: String,
        /// Items that had crossed.
        items: u64,
        /// How long it had to come back.
        grace: std::time::Duration,
    },
    /// No peer took what a sink sends within the grace period.
    #[error("{endpoint}: no peer took the stream within {0:?}", .grace)]
    NoPeer {
        /// Where.
        endpoint: String,
        /// How long the send waited.
        grace: std::time::Duration,
    },
    /// A message that is not what the edge expects.
    #[error("{0}")]
    BadMessage(String),
    /// The stream ended inside an item.
    #[error("{endpoint}: the stream ended {bytes} bytes into a {item}-byte item")]
    PartialItem {
        /// Where.
        endpoint: String,
        /// Bytes of the last item that arrived.
        bytes: usize,
        /// Item size.
        item: usize,
    },
    /// The graph refused the node.
    #[error(transparent)]
    Graph(#[from] dmaflow::graph::Error),
}

impl Error {
    /// Whether the error is the caller's input (an endpoint, a port in use)
    /// rather than a failure while running.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::BadEndpoint { .. } | Error::UnknownScheme { .. } | Error::Socket { .. }
        )
    }
}

/// What crossed an edge, shared with the node while it runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages sent or received (end of stream not counted).
    pub messages: AtomicU64,
    /// Items sent or received.
    pub items: AtomicU64,
    /// Items a PUB/SUB subscriber lost (from the offsets in tag headers;
    /// counted only with `pass_tags`).
    pub dropped: AtomicU64,
    /// Tags received (a source) or sent (a sink) in tag headers.
    pub tags: AtomicU64,
    /// Payload bytes sent or received (tag headers not counted).
    pub bytes: AtomicU64,
    /// Payload bytes this end copied: a sink into messages (with tags, or
    /// below [`Edge::copy_below`]), a source out of messages into its queue.
    /// A sink that sends from the queue copies none.
    pub copied: AtomicU64,
    /// Nanoseconds this end waited on the network: a sink for room (the
    /// peer at its high-water mark, no peer yet), a source for a message.
    pub waited_ns: AtomicU64,
    /// Items a PUB sink dropped because a subscriber was at its high-water
    /// mark (ZeroMQ would have dropped them silently).
    pub dropped_at_hwm: AtomicU64,
    /// The first [`Stats::TAGS_KEPT`] of those tags, offsets as in the
    /// stream this end reads or writes.
    seen: Mutex<Vec<tags::Tag>>,
}

impl Stats {
    fn add(&self, counter: &AtomicU64, n: u64) {
        let _ = self;
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// How many tags [`Stats::tags_seen`] keeps.
    pub const TAGS_KEPT: usize = 16;

    fn saw(&self, tags: &[tags::Tag]) {
        self.add(&self.tags, tags.len() as u64);
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let room = Self::TAGS_KEPT.saturating_sub(seen.len());
        seen.extend(tags.iter().take(room).cloned());
    }

    /// The first tags that crossed (at most [`Stats::TAGS_KEPT`]).
    pub fn tags_seen(&self) -> Vec<tags::Tag> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Bytes copied per payload byte that crossed (0 for an end that
    /// neither copies into nor out of its messages).
    pub fn copies_per_byte(&self) -> f64 {
        let bytes = self.bytes.load(Ordering::Relaxed);
        if bytes == 0 {
            return 0.0;
        }
        self.copied.load(Ordering::Relaxed) as f64 / bytes as f64
    }

    /// `(messages, items, dropped, tags)` now.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.messages.load(Ordering::Relaxed),
            self.items.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
            self.tags.load(Ordering::Relaxed),
        )
    }
}
