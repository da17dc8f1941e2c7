//! Where an edge meets the network: a ZeroMQ endpoint, its pattern and which
//! side binds.

use std::time::Duration;

use crate::{Error, Relay};

/// How messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// PUSH -> PULL: lossless and ordered; a sink blocks at the high-water
    /// mark, so a process network split across processes stays
    /// deterministic. gr-zeromq's `push_sink` / `pull_source`.
    PushPull,
    /// PUB -> SUB: a publisher never waits; while a subscriber is at its
    /// high-water mark, the publisher drops each message (for every
    /// subscriber) and counts it (`Stats::dropped_at_hwm`); a subscriber
    /// counts what it lost where the stream carries item offsets, with
    /// `pass_tags`. gr-zeromq's `pub_sink` / `sub_source`.
    PubSub,
}

/// What a source does when its peer goes away mid-stream and does not come
/// back within the grace period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vanish {
    /// The stream ends cleanly with what arrived.
    End,
    /// The graph fails with [`Error::PeerVanished`].
    Fail,
}

/// A checked ZeroMQ endpoint: `tcp://HOST:PORT` or `ipc://PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint(String);

impl Endpoint {
    /// Checks `text` (`tcp://HOST:PORT`, `ipc://PATH`); `*` as HOST only
    /// binds, on every interface.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bad = |reason: String| Error::BadEndpoint {
            endpoint: text.to_string(),
            reason,
        };
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(bad(
                "not SCHEME://ADDRESS (tcp://HOST:PORT or ipc://PATH)".into()
            ));
        };
        match scheme {
            "tcp" => {
                let Some((host, port)) = rest.rsplit_once(':') else {
                    return Err(bad("a tcp endpoint needs a port: tcp://HOST:PORT".into()));
                };
                if host.is_empty() {
                    return Err(bad("a tcp endpoint needs a host: tcp://HOST:PORT".into()));
                }
                match port.parse::<u16>() {
                    Ok(p) if p > 0 => {}
                    _ => return Err(bad(format!("{port:?} is not a port (1..=65535)"))),
                }
                Ok(Endpoint(text.to_string()))
            }
            "ipc" if rest.is_empty() => Err(bad("an ipc endpoint needs a path: ipc://PATH".into())),
            "ipc" => Ok(Endpoint(text.to_string())),
            other => Err(Error::UnknownScheme {
                endpoint: text.to_string(),
                scheme: other.to_string(),
            }),
        }
    }

    /// Whether `text` names a ZeroMQ endpoint rather than a file (it has a
    /// `SCHEME://` prefix).
    pub fn looks_like(text: &str) -> bool {
        text.split_once("://")
            .is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()))
    }

    /// The endpoint as ZeroMQ takes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One end of a network edge.
#[derive(Debug, Clone)]
pub struct Edge {
    /// Where.
    pub endpoint: Endpoint,
    /// PUSH/PULL or PUB/SUB.
    pub pattern: Pattern,
    /// Whether this end binds (else it connects). gr-zeromq: sinks bind,
    /// sources connect.
    pub bind: bool,
    /// Whether messages carry gr-zeromq's tag header (`pass_tags`).
    pub pass_tags: bool,
    /// Messages queued before a PUSH sink blocks (a PUB sink drops).
    pub high_water_mark: i32,
    /// A source ends its stream after this long without a message (GNU
    /// Radio peers send no end of stream; before the first message, after
    /// at least `grace`: a peer may take that long to start); `None`: only
    /// an end-of-stream message or a vanished peer ends it.
    pub idle_timeout: Option<Duration>,
    /// How long a vanished peer has to come back (it reconnects) before
    /// [`Vanish`] applies; a sink also gives up on a send no peer takes
    /// within it, and waits this long at the end for its last messages to
    /// leave.
    pub grace: Duration,
    /// What a source does when its peer vanished for good.
    pub vanish: Vanish,
    /// Whether a sink ends its stream with an empty message (dmaflow's end
    /// of stream; a GNU Radio receiver reads it as no items).
    pub send_eos: bool,
    /// Items at most per message a sink sends.
    pub max_items: usize,
    /// A sink copies a message of fewer bytes than this into memory of
    /// ZeroMQ's instead of sending it from the queue's slots: holding slots
    /// for a message and getting them back (a free function on ZeroMQ's I/O
    /// thread, a ticket per message) costs about what copying a few hundred
    /// bytes does. 0: every message without tags goes from the queue.
    /// Default [`Edge::COPY_BELOW`].
    pub copy_below: usize,
    /// With `pass_tags`: a source puts the tags it receives on this relay, a
    /// sink sends those on the relay with its items. One relay given to a
    /// graph's source and sink carries tags through the nodes between them.
    pub relay: Option<Relay>,
}

impl Edge {
    /// A sink's default [`Edge::copy_below`]: 512 bytes (measured on x86-64
    /// with 64-byte messages: the sink's CPU per message sent from the
    /// queue's slots was 60-100 ns above that of a copy into ZeroMQ's
    /// memory, which copying 512 bytes about takes).
    pub const COPY_BELOW: usize = 512;

    /// gr-zeromq's defaults for a sink at `endpoint`: PUSH, binds.
    pub fn sink(endpoint: Endpoint) -> Self {
        Edge {
            endpoint,
            pattern: Pattern::PushPull,
            bind: true,
            pass_tags: false,
            high_water_mark: 16,
            idle_timeout: None,
            grace: Duration::from_secs(5),
            vanish: Vanish::Fail,
            send_eos: true,
            max_items: 1 << 16,
            copy_below: Edge::COPY_BELOW,
            relay: None,
        }
    }

    /// gr-zeromq's defaults for a source at `endpoint`: PULL, connects.
    pub fn source(endpoint: Endpoint) -> Self {
        Edge {
            bind: false,
            ..Edge::sink(endpoint)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked_and_named() {
        for ok in [
            "tcp://127.0.0.1:5601",
            "tcp://*:5601",
            "tcp://[::1]:80",
            "ipc:///tmp/x",
        ] {
            assert_eq!(Endpoint::parse(ok).unwrap().as_str(), ok);
        }
        for (bad, says) in [
            ("tcp://127.0.0.1", "needs a port"),
            ("tcp://:5601", "needs a host"),
            ("tcp://h:70000", "not a port"),
            ("tcp://h:0", "not a port"),
            ("ipc://", "needs a path"),
            ("127.0.0.1:5601", "SCHEME://"),
        ] {
            let e = Endpoint::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(says), "{bad}: {e}");
        }
        let e = Endpoint::parse("udp://h:1").unwrap_err().to_string();
        assert!(e.contains("\"udp\"") && e.contains("tcp, ipc"), "{e}");
        assert!(Endpoint::looks_like("tcp://x:1") && Endpoint::looks_like("udp://x"));
        assert!(!Endpoint::looks_like("out.f32") && !Endpoint::looks_like("/tmp/a://b"));
    }
}
