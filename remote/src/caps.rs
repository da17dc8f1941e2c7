//! What one client can make the server hold, and what all of them can: the
//! caps on connections, DMA memory and data in flight, each a setting of
//! `dmaflow serve` with a default, and the accounting that enforces them.
//!
//! DMA memory is charged when a buffer is allocated and given back when it
//! is freed (or its client goes). Data in flight is what the server holds
//! for a request not yet done: a file or bitstream upload not yet finished
//! (held whole until it is, as PYNQ's client sends it in 2 MiB chunks), and
//! the chunk a buffer read holds until the client takes it. A charge past
//! a cap is refused with an error that names the cap and its setting; a
//! charge is given back when it is dropped, so a client that disconnects
//! mid-transfer leaves nothing charged.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The caps a server enforces (each an option of `dmaflow serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; further ones are closed as soon as they
    /// are accepted (`--max-connections`).
    pub connections: usize,
    /// How long a new connection may take to open HTTP/2 (send its client
    /// preface) before it is closed (`--handshake-timeout`): an idle TCP
    /// connection does not hold one of the connection slots for ever.
    pub handshake: Duration,
    /// DMA memory one connection may hold in buffers, in bytes
    /// (`--client-dma-memory`).
    pub client_dma: usize,
    /// DMA memory all connections together may hold, in bytes
    /// (`--max-dma-memory`); the board's DMA memory bounds it too.
    pub total_dma: usize,
    /// Data one connection may have in flight, in bytes
    /// (`--client-in-flight`).
    pub client_in_flight: usize,
    /// Data all connections together may have in flight, in bytes
    /// (`--max-in-flight`).
    pub total_in_flight: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: DEFAULT_CONNECTIONS,
            handshake: DEFAULT_HANDSHAKE,
            client_dma: DEFAULT_CLIENT_DMA,
            total_dma: DEFAULT_TOTAL_DMA,
            client_in_flight: DEFAULT_CLIENT_IN_FLIGHT,
            total_in_flight: DEFAULT_TOTAL_IN_FLIGHT,
        }
    }
}

/// Default of [`Limits::connections`].
pub const DEFAULT_CONNECTIONS: usize = 256;
/// Default of [`Limits::handshake`].
pub const DEFAULT_HANDSHAKE: Duration = Duration::from_secs(10);
/// Default of [`Limits::client_dma`]: half the emulated board's DMA memory.
pub const DEFAULT_CLIENT_DMA: usize = 128 << 20;
/// Default of [`Limits::total_dma`]: no cap beyond the board's DMA memory.
pub const DEFAULT_TOTAL_DMA: usize = usize::MAX;
/// Default of [`Limits::client_in_flight`]: one bitstream of the largest
/// size served (64 MiB) and a few chunks of buffer reads beside it.
pub const DEFAULT_CLIENT_IN_FLIGHT: usize = 80 << 20;
/// Default of [`Limits::total_in_flight`].
pub const DEFAULT_TOTAL_IN_FLIGHT: usize = 256 << 20;

/// A cap a request was refused by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    /// [`Limits::client_dma`].
    ClientDma,
    /// [`Limits::total_dma`].
    TotalDma,
    /// [`Limits::client_in_flight`].
    ClientInFlight,
    /// [`Limits::total_in_flight`].
    TotalInFlight,
}

impl Cap {
    /// The cap's name and the option that sets it.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Cap::ClientDma => ("DMA memory per client", "--client-dma-memory"),
            Cap::TotalDma => ("DMA memory of all clients", "--max-dma-memory"),
            Cap::ClientInFlight => ("data in flight per client", "--client-in-flight"),
            Cap::TotalInFlight => ("data in flight of all clients", "--max-in-flight"),
        }
    }
}

/// A charge refused: it would take a cap past its setting.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what}: {asked} more bytes would pass the cap on {name} ({held} of {cap_bytes} bytes held; \
     `dmaflow serve {option}` sets it)",
    name = cap.describe().0,
    option = cap.describe().1
)]
pub(crate) struct CapError {
    /// What was asked for.
    pub(crate) what: String,
    /// The cap.
    pub(crate) cap: Cap,
    /// Bytes asked for.
    pub(crate) asked: usize,
    /// Bytes already held under the cap.
    pub(crate) held: usize,
    /// The cap's setting.
    pub(crate) cap_bytes: usize,
}

/// What is held: per connection and in all.
#[derive(Debug, Default)]
struct Held {
    dma: usize,
    in_flight: usize,
    client_dma: HashMap<u64, usize>,
    client_in_flight: HashMap<u64, usize>,
}

/// The accounting of every cap of one server (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct Caps {
    limits: Limits,
    held: Arc<Mutex<Held>>,
}

/// Which account a charge is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dma,
    InFlight,
}

impl Caps {
    /// Accounts under `limits`.
    pub(crate) fn new(limits: Limits) -> Self {
        Caps {
            limits,
            held: Arc::default(),
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Charges `bytes` of DMA memory to connection `conn` (for `what`).
    pub(crate) fn dma(&self, conn: u64, bytes: usize, what: &str) -> Result<Charge, CapError> {
        let mut c = self.empty(conn, Kind::Dma);
        c.grow(bytes, what)?;
        Ok(c)
    }

    /// An empty charge of data in flight for connection `conn`, grown as
    /// the data arrives.
    pub(crate) fn in_flight(&self, conn: u64) -> Charge {
        self.empty(conn, Kind::InFlight)
    }

    fn empty(&self, conn: u64, kind: Kind) -> Charge {
        Charge {
            caps: self.clone(),
            conn,
            kind,
            bytes: 0,
        }
    }

    /// Bytes of DMA memory and of data in flight held by connection `conn`.
    #[cfg(test)]
    fn of(&self, conn: u64) -> (usize, usize) {
        let h = self.held();
        (
            h.client_dma.get(&conn).copied().unwrap_or(0),
            h.client_in_flight.get(&conn).copied().unwrap_or(0),
        )
    }
}

/// Bytes charged to one connection under one cap pair; given back when
/// dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    caps: Caps,
    conn: u64,
    kind: Kind,
    bytes: usize,
}

impl Charge {
    /// Charges `more` bytes (for `what`), or refuses them naming the cap
    /// they would pass.
    pub(crate) fn grow(&mut self, more: usize, what: &str) -> Result<(), CapError> {
        let limits = self.caps.limits;
        let mut guard = self.caps.held();
        let h = &mut *guard;
        let (total, per, client_cap, total_cap, caps) = match self.kind {
            Kind::Dma => (
                &mut h.dma,
                &mut h.client_dma,
                limits.client_dma,
                limits.total_dma,
                (Cap::ClientDma, Cap::TotalDma),
            ),
            Kind::InFlight => (
                &mut h.in_flight,
                &mut h.client_in_flight,
                limits.client_in_flight,
                limits.total_in_flight,
                (Cap::ClientInFlight, Cap::TotalInFlight),
            ),
        };
        let mine = per.get(&self.conn).copied().unwrap_or(0);
        let refuse = |cap, held, cap_bytes| CapError {
            what: what.to_string(),
            cap,
            asked: more,
            held,
            cap_bytes,
        };
        if mine.checked_add(more).is_none_or(|n| n > client_cap) {
            return Err(refuse(caps.0, mine, client_cap));
        }
        if total.checked_add(more).is_none_or(|n| n > total_cap) {
            return Err(refuse(caps.1, *total, total_cap));
        }
        *total += more;
        per.insert(self.conn, mine + more);
        self.bytes += more;
        Ok(())
    }

    /// Bytes charged.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut guard = self.caps.held();
        let h = &mut *guard;
        let (total, per) = match self.kind {
            Kind::Dma => (&mut h.dma, &mut h.client_dma),
            Kind::InFlight => (&mut h.in_flight, &mut h.client_in_flight),
        };
        *total -= self.bytes;
        if let Some(n) = per.get_mut(&self.conn) {
            *n -= self.bytes;
            if *n == 0 {
                per.remove(&self.conn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Caps {
        Caps::new(Limits {
            client_dma: 100,
            total_dma: 150,
            client_in_flight: 10,
            total_in_flight: 15,
            ..Limits::default()
        })
    }

    #[test]
    fn a_charge_past_a_cap_is_refused_naming_it_and_given_back_on_drop() {
        let c = caps();
        let a = c.dma(1, 100, "a buffer").unwrap();
        let e = c.dma(1, 1, "a buffer").unwrap_err();
        assert_eq!(e.cap, Cap::ClientDma);
        assert!(e.to_string().contains("--client-dma-memory"), "{e}");
        let _b = c.dma(2, 50, "a buffer").unwrap();
        let e = c.dma(3, 1, "a buffer").unwrap_err();
        assert_eq!((e.cap, e.held, e.cap_bytes), (Cap::TotalDma, 150, 150));
        assert!(e.to_string().contains("--max-dma-memory"), "{e}");
        drop(a);
        assert_eq!(c.of(1), (0, 0));
        c.dma(3, 100, "a buffer").unwrap();

        let mut up = c.in_flight(1);
        up.grow(6, "an upload").unwrap();
        up.grow(4, "an upload").unwrap();
        let e = up.grow(1, "an upload").unwrap_err();
        assert!(e.to_string().contains("--client-in-flight"), "{e}");
        assert_eq!(up.bytes(), 10);
        let mut other = c.in_flight(2);
        let e = other.grow(6, "a read").unwrap_err();
        assert!(e.to_string().contains("--max-in-flight"), "{e}");
        drop(up);
        other.grow(6, "a read").unwrap();
        assert_eq!(c.of(1), (0, 0));
        assert_eq!(c.of(2), (50, 6));
    }
}
