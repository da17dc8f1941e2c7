//! A network source node: messages from a ZeroMQ socket into an `Output`.

use std::sync::Arc;
use std::time::Instant;

use dmaflow::graph::{Graph, Output};
use dmaflow::ring::Pod;

use crate::link::{Link, SLICE_MS};
use crate::tags::Header;
use crate::{Edge, Error, Pattern, Stats, Vanish};

/// Adds node `name` to `g`: it receives items of type `T` at `edge` (PULL or
/// SUB, bound or connected as the edge says) and writes them to `out`, whole
/// items in order; bytes of an item split across messages are joined. The
/// socket is bound or connected here, so a bad endpoint or a port in use is
/// an error before the graph runs. The stream ends at an empty message
/// (dmaflow's end of stream), after `edge.idle_timeout` without a message,
/// or when the peer went away and did not come back within `edge.grace`
/// ([`Vanish`] says whether that ends the stream or fails the graph).
/// Returns what crossed, counted while it runs.
pub fn add_source<T: Pod + Send>(
    g: &mut Graph,
    name: &str,
    edge: Edge,
    mut out: Output<T>,
) -> Result<Arc<Stats>, Error> {
    let mut link = Link::open(&edge, false)?;
    let stats = Arc::new(Stats::default());
    let counted = stats.clone();
    let item = std::mem::size_of::<T>();
    g.node(name, move || {
        let stats = counted;
        // Bytes of an item that began in an earlier message.
        let mut carry: Vec<u8> = Vec::with_capacity(item);
        let mut last = Instant::now();
        let mut gone_since: Option<Instant> = None;
        // Where the next item should be in the sender's stream (PUB/SUB with
        // tags: a gap is what this subscriber lost).
        let mut expected: Option<u64> = None;
        // Items written to reserved slots and not yet committed: messages that
        // are already here go out to the reader in one commit, not one each.
        let mut pending = 0usize;
        let batch = (out.capacity() / 4).max(1);
        // One message object, received into again and again.
        let mut msg = zmq::Message::new();
        loop {
            // The graph's abort reaches a node waiting on the network here
            // (a reservation of nothing: only with nothing reserved).
            if pending == 0 {
                out.try_reserve(0)?;
            }
            // A receive that does not wait first (no system call when a
            // message is here); a poll only when none is.
            let msg = match link.socket.recv(&mut msg, zmq::DONTWAIT) {
                Ok(()) => &msg,
                Err(zmq::Error::EAGAIN) => {
                    if pending > 0 {
                        // Nothing more here now: the reader gets what came.
                        out.commit(pending)?;
                        pending = 0;
                    }
                    let t0 = Instant::now();
                    let readable = link
                        .socket
                        .poll(zmq::POLLIN, SLICE_MS)
                        .map_err(|source| Error::Zmq {
                            what: "waiting for a message",
                            source,
                        })?;
                    stats.add(&stats.waited_ns, t0.elapsed().as_nanos() as u64);
                    if readable > 0 {
                        continue;
                    }
                    let now = Instant::now();
                    if edge.idle_timeout.is_some_and(|t| now - last >= t) {
                        break;
                    }
                    // A peer that went away (and is not back) ends or fails the
                    // stream after the grace period.
                    if link.peers()? == 0 && link.seen_peer {
                        let since = *gone_since.get_or_insert(now);
                        if now - since >= edge.grace {
                            match edge.vanish {
                                Vanish::End => break,
                                Vanish::Fail => {
                                    return Err(Error::PeerVanished {
                                        endpoint: edge.endpoint.to_string(),
                                        items: stats.snapshot().1,
                                        grace: edge.grace,
                                    }
                                    .into());
                                }
                            }
                        }
                    } else {
                        gone_since = None;
                    }
                    continue;
                }
                Err(source) => {
                    return Err(Error::Zmq {
                        what: "receiving",
                        source,
                    }
                    .into());
                }
            };
            last = Instant::now();
            gone_since = None;
            let mut payload: &[u8] = msg;
            if edge.pass_tags && !payload.is_empty() {
                // Everything in the header is the peer's: each count and
                // offset is checked before it is used.
                let bad = |what: String| Error::BadMessage(format!("{}: {what}", edge.endpoint));
                let (header, rest) = Header::parse(payload).map_err(|e| bad(e.to_string()))?;
                let n = (rest.len() / item.max(1)) as u64;
                let end = header.offset.checked_add(n).ok_or_else(|| {
                    bad(format!(
                        "a message of {n} items at offset {} runs past the end of the stream's count",
                        header.offset
                    ))
                })?;
                if let (Pattern::PubSub, Some(e)) = (edge.pattern, expected) {
                    stats.add(&stats.dropped, header.offset.saturating_sub(e));
                }
                expected = Some(end);
                // Tags move to this stream's offsets (the items written so
                // far), as gr-zeromq's sources place them. A tag belongs to
                // an item of its message (gr-zeromq's sinks send no other).
                let written = stats.items.load(std::sync::atomic::Ordering::Relaxed);
                let mut tags = Vec::with_capacity(header.tags.len());
                for mut t in header.tags {
                    if t.offset < header.offset || t.offset >= end.max(header.offset.saturating_add(1)) {
                        return Err(bad(format!(
                            "a tag at offset {} outside its message's items {}..{end}",
                            t.offset, header.offset
                        ))
                        .into());
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
                payload = rest;
            }
            if payload.is_empty() {
                // dmaflow's end of stream.
                break;
            }
            stats.add(&stats.messages, 1);
            stats.add(&stats.bytes, payload.len() as u64);
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
        if !carry.is_empty() {
            return Err(Error::PartialItem {
                endpoint: edge.endpoint.to_string(),
                bytes: carry.len(),
                item,
            }
            .into());
        }
        Ok(())
    })?;
    Ok(stats)
}
