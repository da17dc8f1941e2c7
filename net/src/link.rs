//! A ZeroMQ socket for one edge, with a monitor that counts its peers.

use std::sync::atomic::{AtomicU64, Ordering};

/// The largest message a receiving end takes (ZMQ_MAXMSGSIZE): gr-zeromq
/// sends a scheduler buffer's worth (kilobytes to a few megabytes); dmaflow's
/// own sinks send at most a queue's worth.
pub const MAX_MESSAGE_BYTES: i64 = 64 << 20;

use crate::{Edge, Error, Pattern};

/// How long one wait lasts before a node looks at its graph again (an abort
/// elsewhere, a peer gone).
pub(crate) const SLICE_MS: i64 = 50;

/// A socket of its own context (so that dropping it waits, up to the
/// linger, for its last messages to leave), with its monitor.
pub(crate) struct Link {
    pub(crate) socket: zmq::Socket,
    monitor: zmq::Socket,
    /// Peers connected now (handshakes less disconnects).
    peers: i64,
    /// Whether a peer was ever connected.
    pub(crate) seen_peer: bool,
    _context: zmq::Context,
}

fn zmq_err(what: &'static str) -> impl FnOnce(zmq::Error) -> Error {
    move |source| Error::Zmq { what, source }
}

impl Link {
    /// The socket for `edge`'s `send` (sink) or receive side, bound or
    /// connected.
    pub(crate) fn open(edge: &Edge, send: bool) -> Result<Self, Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let context = zmq::Context::new();
        let kind = match (edge.pattern, send) {
            (Pattern::PushPull, true) => zmq::PUSH,
            (Pattern::PushPull, false) => zmq::PULL,
            (Pattern::PubSub, true) => zmq::PUB,
            (Pattern::PubSub, false) => zmq::SUB,
        };
        let socket = context.socket(kind).map_err(zmq_err("a socket"))?;
        socket
            .set_sndhwm(edge.high_water_mark)
            .and_then(|()| socket.set_rcvhwm(edge.high_water_mark))
            .and_then(|()| socket.set_linger(edge.grace.as_millis().min(i32::MAX as u128) as i32))
            // A peer's message larger than this drops its connection
            // instead of being taken into memory.
            .and_then(|()| socket.set_maxmsgsize(MAX_MESSAGE_BYTES))
            // A send or receive that waits (after one that does not) waits
            // at most a slice inside libzmq: one poll of its mailbox, as a
            // bare blocking loop's, then the node looks at its graph.
            .and_then(|()| socket.set_sndtimeo(SLICE_MS as i32))
            .and_then(|()| socket.set_rcvtimeo(SLICE_MS as i32))
            .map_err(zmq_err("socket options"))?;
        if kind == zmq::SUB {
            socket.set_subscribe(b"").map_err(zmq_err("subscribing"))?;
        }
        let addr = format!(
            "inproc://dmaflow-monitor-{}",
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        socket
            .monitor(
                &addr,
                (zmq::SocketEvent::HANDSHAKE_SUCCEEDED.to_raw()
                    | zmq::SocketEvent::DISCONNECTED.to_raw()) as i32,
            )
            .map_err(zmq_err("a monitor"))?;
        let monitor = context.socket(zmq::PAIR).map_err(zmq_err("a monitor"))?;
        monitor.connect(&addr).map_err(zmq_err("a monitor"))?;
        let at = edge.endpoint.as_str();
        let (action, done) = if edge.bind {
            ("bind", socket.bind(at))
        } else {
            ("connect", socket.connect(at))
        };
        done.map_err(|source| Error::Socket {
            action,
            endpoint: at.to_string(),
            source,
        })?;
        Ok(Link {
            socket,
            monitor,
            peers: 0,
            seen_peer: false,
            _context: context,
        })
    }

    /// Fails with [`Error::NoPeer`] once every peer this sending end had has
    /// been gone for `edge.grace`; `gone_since` keeps when they went (reset
    /// while a peer is connected, or before the first ever was).
    pub(crate) fn check_peer_gone(
        &mut self,
        edge: &Edge,
        gone_since: &mut Option<std::time::Instant>,
    ) -> Result<(), Error> {
        if self.peers()? == 0 && self.seen_peer {
            let since = *gone_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= edge.grace {
                return Err(Error::NoPeer {
                    endpoint: edge.endpoint.to_string(),
                    grace: edge.grace,
                });
            }
        } else {
            *gone_since = None;
        }
        Ok(())
    }

    /// Reads the monitor's events so far; returns the peers connected now.
    pub(crate) fn peers(&mut self) -> Result<i64, Error> {
        loop {
            match self.monitor.recv_msg(zmq::DONTWAIT) {
                Ok(m) => {
                    if m.len() >= 2 {
                        let raw = u16::from_ne_bytes([m[0], m[1]]);
                        if raw == zmq::SocketEvent::HANDSHAKE_SUCCEEDED.to_raw() {
                            self.peers += 1;
                            self.seen_peer = true;
                        } else if raw == zmq::SocketEvent::DISCONNECTED.to_raw() {
                            self.peers = (self.peers - 1).max(0);
                        }
                    }
                    // The event's second frame (the endpoint).
                    while self.monitor.get_rcvmore().unwrap_or(false) {
                        let _ = self.monitor.recv_msg(0);
                    }
                }
                Err(zmq::Error::EAGAIN) => return Ok(self.peers),
                Err(e) => {
                    return Err(Error::Zmq {
                        what: "the monitor",
                        source: e,
                    });
                }
            }
        }
    }
}
