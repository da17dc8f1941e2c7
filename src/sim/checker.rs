//! The protocol checker: every register access or device-side event that PG021
//! documents as undefined, or that a real IP would silently mishandle, is recorded
//! with the register, the value and the time. In strict mode (the default) a CPU
//! access that breaks the protocol also fails at once with
//! [`crate::platform::Error::Protocol`], so a driver bug is named where it is made.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One breach of the AXI DMA protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Register window (engine) it happened on.
    pub window: usize,
    /// Register offset within the window (for device-side events, the register
    /// of the channel concerned).
    pub register: usize,
    /// Value written (or the bus address concerned).
    pub value: u64,
    /// When, since the fabric started.
    pub at: Duration,
    /// What PG021 says about it.
    pub what: &'static str,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "window {} register {:#04x} value {:#x} at {:?}: {}",
            self.window, self.register, self.value, self.at, self.what
        )
    }
}

/// Violations kept at most (the first ones: later ones repeat them).
const KEPT: usize = 256;

pub(super) struct Checker {
    strict: AtomicBool,
    epoch: Instant,
    seen: Mutex<Vec<Violation>>,
}

impl Checker {
    pub(super) fn new(epoch: Instant) -> Self {
        Checker {
            strict: AtomicBool::new(true),
            epoch,
            seen: Mutex::new(Vec::new()),
        }
    }

    pub(super) fn set_strict(&self, on: bool) {
        self.strict.store(on, Ordering::Relaxed);
    }

    /// Records a violation; in strict mode a CPU access (`cpu`) fails with it.
    pub(super) fn record(
        &self,
        window: usize,
        register: usize,
        value: u64,
        what: &'static str,
        cpu: bool,
    ) -> Result<(), crate::platform::Error> {
        let v = Violation {
            window,
            register,
            value,
            at: self.epoch.elapsed(),
            what,
        };
        let message = v.to_string();
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.len() < KEPT {
                seen.push(v);
            }
        }
        if cpu && self.strict.load(Ordering::Relaxed) {
            return Err(crate::platform::Error::Protocol(message));
        }
        Ok(())
    }

    pub(super) fn violations(&self) -> Vec<Violation> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
