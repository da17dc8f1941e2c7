//! A network sink node: items from an `Input` out of a ZeroMQ socket.

use std::sync::Arc;
use std::time::Instant;

use dmaflow::graph::{Graph, Input};
use dmaflow::ring::Pod;

use crate::link::{Link, SLICE_MS};
use crate::tags::Header;
use crate::{Edge, Error, Stats};

/// Adds node `name` to `g`: it sends the items of type `T` it reads from
/// `input` at `edge` (PUSH or PUB, bound or connected as the edge says), up
/// to `edge.max_items` per message, each message behind a tag header with
/// its first item's offset and the tags `edge.relay` holds for its items
/// when `edge.pass_tags`. A PUSH send waits while
/// the peer's queue is at the high-water mark (the network's back-pressure);
/// one no peer takes within `edge.grace` fails the graph. At the end of the
/// input it sends an empty message (`edge.send_eos`) and waits, at most
/// `edge.grace`, for the peer to close its end (a dmaflow source does once it
/// has read everything; a GNU Radio one does not, so there the wait is the
/// whole grace period), then for its messages to leave. Returns what crossed.
pub fn add_sink<T: Pod + Send>(
    g: &mut Graph,
    name: &str,
    edge: Edge,
    mut input: Input<T>,
) -> Result<Arc<Stats>, Error> {
    let mut link = Link::open(&edge, true)?;
    let stats = Arc::new(Stats::default());
    let counted = stats.clone();
    let max_items = edge.max_items.max(1);
    g.node(name, move || {
        let stats = counted;
        let mut offset = 0u64;
        // Everything readable goes out as messages of up to `max_items` with
        // one consume, so the writer is woken once per batch, not per message.
        let batch = (input.capacity() / 2).max(1);
        let mut messages = Vec::new();
        loop {
            let s = input.peek(1)?;
            if s.is_empty() {
                break;
            }
            let total = s.len().min(batch);
            for chunk in s[..total].chunks(max_items) {
                let mut head = Vec::new();
                if edge.pass_tags {
                    let end = offset + chunk.len() as u64;
                    let tags = edge
                        .relay
                        .as_ref()
                        .map(|r| r.take(offset, end))
                        .unwrap_or_default();
                    stats.saw(&tags);
                    Header { offset, tags }.write(&mut head);
                }
                // One copy, from the queue into the message ZeroMQ sends.
                let mut msg = zmq::Message::with_size(head.len() + std::mem::size_of_val(chunk));
                msg[..head.len()].copy_from_slice(&head);
                msg[head.len()..].copy_from_slice(bytemuck::cast_slice(chunk));
                offset += chunk.len() as u64;
                messages.push(msg);
            }
            input.consume(total)?;
            let sent = messages.len() as u64;
            for msg in messages.drain(..) {
                send_all(&mut link, &mut input, msg, &edge)?;
            }
            stats.add(&stats.messages, sent);
            stats.add(&stats.items, total as u64);
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
            send_all(&mut link, &mut input, zmq::Message::from(eos), &edge)?;
            // A dmaflow peer closes its end once it has read the end of
            // stream: wait for that (at most the grace period), so that
            // nothing still on its way is cut off when this end closes.
            let deadline = Instant::now() + edge.grace;
            while link.peers()? > 0 && Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        // Dropping the link waits up to the linger (edge.grace) for the
        // messages still queued to leave.
        drop(link);
        Ok(())
    })?;
    Ok(stats)
}

/// Sends `msg` once the socket can take it, waiting in slices while it
/// cannot (the high-water mark, no peer yet) and looking at the graph
/// meanwhile; fails once a peer that was there has been gone for
/// `edge.grace`.
fn send_all<T: Pod + Send>(
    link: &mut Link,
    input: &mut Input<T>,
    msg: zmq::Message,
    edge: &Edge,
) -> Result<(), dmaflow::graph::BoxError> {
    let mut gone_since: Option<Instant> = None;
    loop {
        // ZMQ_EVENTS first (no system call); a poll only when there is no room.
        let room = link
            .socket
            .get_events()
            .map(|e| e.contains(zmq::POLLOUT))
            .unwrap_or(false);
        let ready = if room {
            1
        } else {
            link.socket
                .poll(zmq::POLLOUT, SLICE_MS)
                .map_err(|source| Error::Zmq {
                    what: "waiting to send",
                    source,
                })?
        };
        if ready > 0 {
            // Room for one message (ZeroMQ's POLLOUT): a send that does not
            // wait takes it.
            return link.socket.send(msg, zmq::DONTWAIT).map_err(|source| {
                Error::Zmq {
                    what: "sending",
                    source,
                }
                .into()
            });
        }
        input.try_peek(0)?;
        if link.peers()? == 0 && link.seen_peer {
            let since = *gone_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= edge.grace {
                return Err(Error::NoPeer {
                    endpoint: edge.endpoint.to_string(),
                    grace: edge.grace,
                }
                .into());
            }
        } else {
            gone_since = None;
        }
    }
}
