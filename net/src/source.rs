//! A network source node: messages from a ZeroMQ socket into an `Output`,
//! or handed, where they landed, to the node's first consumer.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use dmaflow::graph::{BoxError, Graph, Output};
use dmaflow::ring::Pod;

use crate::link::Link;
use crate::tags::Header;
use crate::{Edge, Error, Pattern, Stats, Vanish};

/// Adds node `name` to `g`: it receives items of type `T` at `edge` (PULL or
/// SUB, bound or connected as the edge says) and writes them to `out`, whole
/// items in order; bytes of an item split across messages are joined. Each
/// payload byte is copied once, out of the message into the queue
/// ([`Stats::copied`]); [`add_source_with`] hands each message to a
/// consumer where it landed instead. The socket is bound or connected here,
/// so a bad endpoint or a port in use is an error before the graph runs.
/// The stream ends at an empty message (dmaflow's end of stream), after
/// `edge.idle_timeout` without a message, or when the peer went away and
/// did not come back within `edge.grace` ([`Vanish`] says whether that ends
/// the stream or fails the graph). Returns what crossed, counted while it
/// runs.
pub fn add_source<T: Pod + Send>(
    g: &mut Graph,
    name: &str,
    edge: Edge,
    mut out: Output<T>,
) -> Result<Arc<Stats>, Error> {
    let mut inlet = Inlet::open::<T>(edge)?;
    let stats = inlet.stats.clone();
    g.node(name, move || {
        let item = inlet.item;
        // Bytes of an item that began in an earlier message.
        let mut carry: Vec<u8> = Vec::with_capacity(item);
        // Items written to reserved slots and not yet committed: messages that
        // are already here go out to the reader in one commit, not one each.
        let mut pending = 0usize;
        let batch = (out.capacity() / 4).max(1);
        loop {
            // The graph's abort reaches a node waiting on the network here
            // (a reservation of nothing: only with nothing reserved).
            if pending == 0 {
                out.try_reserve(0)?;
            }
            // With items pending, a message not here yet is not waited for:
            // the reader gets what came first.
            let range = match inlet.next(pending == 0)? {
                Next::Data(range) => range,
                Next::Idle => {
                    if pending > 0 {
                        out.commit(pending)?;
                        pending = 0;
                    }
                    continue;
                }
                Next::End => break,
            };
            let stats = &inlet.stats;
            let mut payload: &[u8] = &inlet.msg[range];
            // Every payload byte is copied once, out of the message into
            // the queue (or into the item begun earlier).
            stats.add(&stats.copied, payload.len() as u64);
            // Complete an item begun earlier.
            if !carry.is_empty() {
                let k = (item - carry.len()).min(payload.len());
                carry.extend_from_slice(&payload[..k]);
                payload = &payload[k..];
                if carry.len() == item {
                    let slots = out.reserve(pending + 1)?;
                    slots[pending] = bytemuck::pod_read_unaligned::<T>(&carry);
                    pending += 1;
                    stats.add(&stats.items, 1);
                    carry.clear();
                }
            }
            let whole = payload.len() / item;
            let mut done = 0;
            while done < whole {
                if pending >= batch {
                    out.commit(pending)?;
                    pending = 0;
                }
                let n = (whole - done).min(batch - pending);
                let slots = out.reserve(pending + n)?;
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut slots[pending..pending + n]);
                bytes.copy_from_slice(&payload[done * item..(done + n) * item]);
                pending += n;
                done += n;
            }
            stats.add(&stats.items, whole as u64);
            carry.extend_from_slice(&payload[whole * item..]);
        }
        if pending > 0 {
            out.commit(pending)?;
        }
        inlet.finished(&carry)
    })?;
    Ok(stats)
}

/// Adds node `name` to `g`: it receives items of type `T` at `edge` as
/// [`add_source`] does, but instead of copying them into a queue it runs
/// `consumer` on each message's whole items where the message landed
/// (ZeroMQ's own buffer): the node's first work reads the network's bytes
/// in place, with no copy and no hand-over to another thread. Only bytes
/// that must move are copied, and counted ([`Stats::copied`]): an item split
/// across messages, joined, and a message whose items are not aligned for
/// `T` in ZeroMQ's buffer.
///
/// `consumer` is also called with no items whenever no message is waiting,
/// before the node waits and after each slice it waited: the time to commit
/// what it has written to its ports and to look at the graph there (a
/// `try_reserve(0)` returns the graph's abort). The stream ends as
/// [`add_source`]'s does; a consumer's error fails the graph.
pub fn add_source_with<T, F>(
    g: &mut Graph,
    name: &str,
    edge: Edge,
    mut consumer: F,
) -> Result<Arc<Stats>, Error>
where
    T: Pod + Send,
    F: FnMut(&[T]) -> Result<(), BoxError> + Send + 'static,
{
    let mut inlet = Inlet::open::<T>(edge)?;
    let stats = inlet.stats.clone();
    g.node(name, move || {
        let item = inlet.item;
        let mut carry: Vec<u8> = Vec::with_capacity(item);
        // Items moved to aligned memory (a misaligned message).
        let mut aligned: Vec<T> = Vec::new();
        let mut waited = true;
        loop {
            // A message not here yet is waited for only once the consumer
            // has been told so.
            let range = match inlet.next(waited)? {
                Next::Data(range) => range,
                Next::Idle => {
                    consumer(&[])?;
                    waited = true;
                    continue;
                }
                Next::End => break,
            };
            waited = false;
            let stats = &inlet.stats;
            let mut payload: &[u8] = &inlet.msg[range];
            if !carry.is_empty() {
                let k = (item - carry.len()).min(payload.len());
                carry.extend_from_slice(&payload[..k]);
                stats.add(&stats.copied, k as u64);
                payload = &payload[k..];
                if carry.len() == item {
                    consumer(&[bytemuck::pod_read_unaligned::<T>(&carry)])?;
                    stats.add(&stats.items, 1);
                    carry.clear();
                }
            }
            let whole = payload.len() / item;
            let (body, rest) = payload.split_at(whole * item);
            match bytemuck::try_cast_slice::<u8, T>(body) {
                _ if whole == 0 => {}
                Ok(items) => consumer(items)?,
                Err(_) => {
                    aligned.clear();
                    aligned.extend(
                        body.chunks_exact(item)
                            .map(bytemuck::pod_read_unaligned::<T>),
                    );
                    stats.add(&stats.copied, body.len() as u64);
                    consumer(&aligned)?;
                }
            }
            stats.add(&stats.items, whole as u64);
            carry.extend_from_slice(rest);
            stats.add(&stats.copied, rest.len() as u64);
        }
        inlet.finished(&carry)
    })?;
    Ok(stats)
}

/// What [`Inlet::next`] found.
enum Next {
    /// A message with items: its payload's bytes in [`Inlet::msg`].
    Data(Range<usize>),
    /// No message now (or within a slice).
    Idle,
    /// The end of the stream.
    End,
}

/// A source's socket, the message last received and what the stream has
/// shown so far.
struct Inlet {
    link: Link,
    edge: Edge,
    stats: Arc<Stats>,
    /// Item size in bytes.
    item: usize,
    /// The message last received (received into again and again).
    msg: zmq::Message,
    /// When the last message came, at the latest (set when a wait that
    /// followed it ends without one).
    last: Instant,
    /// Whether a message came since `last` was set.
    came: bool,
    /// Whether any message came.
    began: bool,
    /// Since when the peer has been gone.
    gone_since: Option<Instant>,
    /// Where the next item should be in the sender's stream (PUB/SUB with
    /// tags: a gap is what this subscriber lost).
    expected: Option<u64>,
}

impl Inlet {
    /// The socket for `edge`, bound or connected.
    fn open<T>(edge: Edge) -> Result<Self, Error> {
        Ok(Inlet {
            link: Link::open(&edge, false)?,
            edge,
            stats: Arc::new(Stats::default()),
            item: std::mem::size_of::<T>(),
            msg: zmq::Message::new(),
            last: Instant::now(),
            came: false,
            began: false,
            gone_since: None,
            expected: None,
        })
    }

    /// The next message with items. Without `wait`, a receive that does not
    /// wait: `Idle` at once when no message is here. With `wait`, a receive
    /// that waits at most a slice inside libzmq (a message already here
    /// costs no system call; none here, one poll of its mailbox, as a bare
    /// blocking loop's), then `Idle` if nothing came (or `End` after the
    /// idle timeout, or a vanished peer's grace).
    fn next(&mut self, wait: bool) -> Result<Next, BoxError> {
        let flags = if wait { 0 } else { zmq::DONTWAIT };
        let t0 = wait.then(Instant::now);
        let got = self.link.socket.recv(&mut self.msg, flags);
        if let Some(t0) = t0 {
            let stats = &self.stats;
            stats.add(&stats.waited_ns, t0.elapsed().as_nanos() as u64);
        }
        match got {
            Ok(()) => {}
            Err(zmq::Error::EAGAIN) if !wait => return Ok(Next::Idle),
            // A slice went by (or a signal came) without a message: the
            // last one came before the wait began.
            Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => {
                if std::mem::take(&mut self.came) {
                    self.last = t0.unwrap_or_else(Instant::now);
                }
                return self.quiet();
            }
            Err(source) => {
                return Err(Error::Zmq {
                    what: "receiving",
                    source,
                }
                .into());
            }
        }
        // No clock read per message: `last` is set from the next wait.
        self.came = true;
        self.began = true;
        self.gone_since = None;
        let mut from = 0;
        if self.edge.pass_tags && !self.msg.is_empty() {
            from = self.header()?;
        }
        if from == self.msg.len() {
            // dmaflow's end of stream.
            return Ok(Next::End);
        }
        let stats = &self.stats;
        stats.add(&stats.messages, 1);
        stats.add(&stats.bytes, (self.msg.len() - from) as u64);
        Ok(Next::Data(from..self.msg.len()))
    }

    /// A slice went by without a message: the idle timeout, or a peer that
    /// went away (and is not back) ends or fails the stream after the grace
    /// period.
    fn quiet(&mut self) -> Result<Next, BoxError> {
        let now = Instant::now();
        let edge = &self.edge;
        // Before the first message the peer may still be starting: it has
        // at least the grace period.
        let idle = |t: std::time::Duration| if self.began { t } else { t.max(edge.grace) };
        if edge
            .idle_timeout
            .is_some_and(|t| now - self.last >= idle(t))
        {
            return Ok(Next::End);
        }
        if self.link.peers()? == 0 && self.link.seen_peer {
            let since = *self.gone_since.get_or_insert(now);
            if now - since >= edge.grace {
                return match edge.vanish {
                    Vanish::End => Ok(Next::End),
                    Vanish::Fail => Err(Error::PeerVanished {
                        endpoint: edge.endpoint.to_string(),
                        items: self.stats.snapshot().1,
                        grace: edge.grace,
                    }
                    .into()),
                };
            }
        } else {
            self.gone_since = None;
        }
        Ok(Next::Idle)
    }

    /// Reads the message's tag header; returns where its items begin.
    /// Everything in the header is the peer's: each count and offset is
    /// checked before it is used.
    fn header(&mut self) -> Result<usize, Error> {
        let (edge, stats, item) = (&self.edge, &self.stats, self.item);
        let bad = |what: String| Error::BadMessage(format!("{}: {what}", edge.endpoint));
        let (header, rest) = Header::parse(&self.msg).map_err(|e| bad(e.to_string()))?;
        let n = (rest.len() / item.max(1)) as u64;
        let end = header.offset.checked_add(n).ok_or_else(|| {
            bad(format!(
                "a message of {n} items at offset {} runs past the end of the stream's count",
                header.offset
            ))
        })?;
        if let (Pattern::PubSub, Some(e)) = (edge.pattern, self.expected) {
            stats.add(&stats.dropped, header.offset.saturating_sub(e));
        }
        self.expected = Some(end);
        // Tags move to this stream's offsets (the items delivered so far),
        // as gr-zeromq's sources place them. A tag belongs to an item of its
        // message (gr-zeromq's sinks send no other).
        let written = stats.items.load(Ordering::Relaxed);
        let mut tags = Vec::with_capacity(header.tags.len());
        for mut t in header.tags {
            if t.offset < header.offset || t.offset >= end.max(header.offset.saturating_add(1)) {
                return Err(bad(format!(
                    "a tag at offset {} outside its message's items {}..{end}",
                    t.offset, header.offset
                )));
            }
            t.offset = written
                .checked_add(t.offset - header.offset)
                .ok_or_else(|| bad("a tag past the end of the stream's count".into()))?;
            tags.push(t);
        }
        stats.saw(&tags);
        if let Some(relay) = &edge.relay {
            for t in tags {
                relay.put(t).map_err(|e| bad(e.to_string()))?;
            }
        }
        Ok(self.msg.len() - rest.len())
    }

    /// The stream's end: an error if it ended inside an item (`carry` holds
    /// its first bytes).
    fn finished(&self, carry: &[u8]) -> Result<(), BoxError> {
        if !carry.is_empty() {
            return Err(Error::PartialItem {
                endpoint: self.edge.endpoint.to_string(),
                bytes: carry.len(),
                item: self.item,
            }
            .into());
        }
        Ok(())
    }
}
