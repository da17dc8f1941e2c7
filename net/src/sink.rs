//! A network sink node: items from an `Input` out of a ZeroMQ socket, sent
//! from the queue's own memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dmaflow::graph::{BoxError, Graph, Input};
use dmaflow::ring::Pod;

use crate::link::Link;
use crate::outbox::{Copied, Outbox, Sent, refuse_at_high_water_mark};
use crate::tags::Header;
use crate::{Edge, Error, Pattern, Stats};

/// Adds node `name` to `g`: it sends the items of type `T` it reads from
/// `input` at `edge` (PUSH or PUB, bound or connected as the edge says), up
/// to `edge.max_items` per message, each message behind a tag header with
/// its first item's offset and the tags `edge.relay` holds for its items
/// when `edge.pass_tags`.
///
/// Without tags a message of `edge.copy_below` bytes or more is built over
/// the queue's own slots (`zmq_msg_init_data`): nothing is copied, and the
/// slots stay unconsumed, so the writer upstream cannot reuse them, until
/// ZeroMQ has let go of the message. With tags the payload is copied once
/// behind the header: gr-zeromq reads header and items from one message
/// part. [`Stats::copied`] counts the bytes copied.
///
/// A PUSH send waits while the peer's queue is at the high-water mark (the
/// network's back-pressure; the time is [`Stats::waited_ns`]); one no peer
/// takes within `edge.grace` fails the graph. A PUB sink never waits: a
/// message a subscriber has no room for is dropped, for every subscriber,
/// and counted ([`Stats::dropped_at_hwm`]). At the end of the input it sends
/// an empty message (`edge.send_eos`) and waits, at most `edge.grace`, for
/// the peer to close its end (a dmaflow source does once it has read
/// everything; a GNU Radio one does not, so there the wait is the whole
/// grace period), then for its messages to leave. Returns what crossed.
pub fn add_sink<T: Pod + Send>(
    g: &mut Graph,
    name: &str,
    edge: Edge,
    input: Input<T>,
) -> Result<Arc<Stats>, Error> {
    let mut link = Link::open(&edge, true)?;
    if edge.pattern == Pattern::PubSub {
        refuse_at_high_water_mark(&mut link.socket).map_err(|source| Error::Zmq {
            what: "socket options",
            source,
        })?;
    }
    let stats = Arc::new(Stats::default());
    let counted = stats.clone();
    let max_items = edge.max_items.max(1);
    let item = std::mem::size_of::<T>();
    g.node(name, move || {
        let stats = counted;
        let mut out = Outbox::new(link, input);
        let mut offset = 0u64;
        loop {
            let fresh = out.fresh(&edge)?.len();
            if fresh == 0 {
                break;
            }
            let mut done = 0;
            while done < fresh {
                let n = (fresh - done).min(max_items);
                let bytes = n * item;
                let zero_copy = !edge.pass_tags && bytes >= edge.copy_below;
                let delivered = if zero_copy {
                    deliver(&mut out, &edge, &stats, None, n)?
                } else {
                    let mut head = Vec::new();
                    if edge.pass_tags {
                        let end = offset + n as u64;
                        let tags = edge
                            .relay
                            .as_ref()
                            .map(|r| r.take(offset, end))
                            .unwrap_or_default();
                        stats.saw(&tags);
                        Header { offset, tags }.write(&mut head);
                    }
                    let Some(items) = out.unsent(n) else {
                        unreachable!("items fresh a moment ago are readable");
                    };
                    let msg = Copied::new(&head, bytemuck::cast_slice(items))
                        .map_err(zmq_err("a message"))?;
                    stats.add(&stats.copied, bytes as u64);
                    deliver(&mut out, &edge, &stats, Some(msg), n)?
                };
                if delivered {
                    stats.add(&stats.messages, 1);
                    stats.add(&stats.items, n as u64);
                    stats.add(&stats.bytes, bytes as u64);
                }
                offset += n as u64;
                done += n;
                // The writer upstream gets back what ZeroMQ let go of while
                // more than half the queue is on its way.
                if out.held() > out.capacity() / 2 {
                    out.release()?;
                }
            }
        }
        if edge.send_eos {
            let mut eos = Vec::new();
            if edge.pass_tags {
                Header {
                    offset,
                    tags: Vec::new(),
                }
                .write(&mut eos);
            }
            let msg = Copied::new(&eos, &[]).map_err(zmq_err("a message"))?;
            deliver(&mut out, &edge, &stats, Some(msg), 0)?;
            // A dmaflow peer closes its end once it has read the end of
            // stream: wait for that (at most the grace period), so that
            // nothing still on its way is cut off when this end closes.
            let deadline = Instant::now() + edge.grace;
            while out.link.peers()? > 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Dropping the outbox terminates the link's context, which waits up
        // to the linger (edge.grace) for the messages still queued to leave
        // (every message let go of), and only then the reading end.
        drop(out);
        Ok(())
    })?;
    Ok(stats)
}

fn zmq_err(what: &'static str) -> impl FnOnce(zmq::Error) -> Error {
    move |source| Error::Zmq { what, source }
}

/// Sends the next `n` items: `copy` (a message holding them, or the end of
/// stream) or, with `None`, a message over their slots. A send that does not
/// wait goes first; only when the socket has no room does the sink wait, a
/// slice at a time inside libzmq's send (one poll of its mailbox, as a bare
/// blocking loop's), looking at the graph between slices. A PUSH sink waits
/// (failing once a peer that was there has been gone for `edge.grace`); a
/// PUB sink drops the message and counts it. Returns whether the message
/// went.
fn deliver<T: Pod + Send>(
    out: &mut Outbox<T>,
    edge: &Edge,
    stats: &Stats,
    mut copy: Option<Copied>,
    n: usize,
) -> Result<bool, BoxError> {
    let mut gone_since: Option<Instant> = None;
    let mut flags = zmq::DONTWAIT;
    loop {
        let t0 = (flags == 0).then(Instant::now);
        let sent = match copy.as_mut() {
            Some(msg) => msg.send(&mut out.link.socket, flags),
            None => out.send_held(n, flags),
        }
        .map_err(zmq_err("sending"))?;
        if let Some(t0) = t0 {
            stats.add(&stats.waited_ns, t0.elapsed().as_nanos() as u64);
            // Slots ZeroMQ let go of meanwhile go back to the writer.
            out.release()?;
        }
        if sent == Sent::Queued {
            if copy.is_some() {
                out.sent_copy(n);
            }
            return Ok(true);
        }
        if edge.pattern == Pattern::PubSub {
            // A subscriber is at its high-water mark: the message is
            // dropped here, and counted, instead of silently by ZeroMQ.
            stats.add(&stats.dropped_at_hwm, n as u64);
            out.sent_copy(n);
            return Ok(false);
        }
        if flags == 0 {
            // A slice went by without room.
            out.input().try_peek(0)?;
            out.link.check_peer_gone(edge, &mut gone_since)?;
        }
        flags = 0;
    }
}
