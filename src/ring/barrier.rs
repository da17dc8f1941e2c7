//! Asymmetric barriers for the no-lost-wake-up handshake of [`Wait::Block`]
//! (see `cursor.rs`'s `Event`).
//!
//! The handshake is Dekker's: a publisher stores its cursor, then loads the
//! threshold a sleeper registered; a sleeper stores its threshold, then loads
//! the cursor. Each side needs a full barrier between its store and its load,
//! or both may read the old value and the sleeper misses its wake-up. A full
//! fence on every publish stalls the publisher until its cursor store leaves
//! the store buffer, which at small batches (a reader looking at the same
//! line on the other core) costs a cross-core round trip per commit.
//!
//! Publishes are many and sleeps are rare, so the cost is moved to the
//! sleeper, as userspace RCU and folly's asymmetric barriers do: where the
//! kernel offers `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, the
//! publisher's side is a compiler barrier only ([`Barrier::light`]) and the
//! sleeper's side is that system call ([`Barrier::heavy`]), which runs a full
//! barrier on every core running a thread of this process. Where the kernel
//! lacks it (before Linux 4.14, or a seccomp filter), both sides are full
//! fences. The choice is made once per process, before the first queue that
//! uses it exists, and never changes, so both sides of a queue agree.
//!
//! [`Wait::Block`]: super::Wait::Block

use crate::sync::{Ordering, fence};

/// Which barriers a queue's two sides use; chosen at the queue's creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Barrier {
    asymmetric: bool,
}

impl Barrier {
    /// The barriers this process uses: asymmetric where the kernel allows.
    pub(crate) fn of_process() -> Barrier {
        Barrier {
            asymmetric: asymmetric(),
        }
    }

    /// The publisher's side: orders its cursor store before its load of a
    /// sleeper's threshold, given that a sleeper runs [`heavy`](Self::heavy).
    #[inline]
    pub(crate) fn light(self) {
        if self.asymmetric {
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
    }

    /// The sleeper's side: orders its threshold store before its load of the
    /// cursor, and every other thread's [`light`](Self::light) with it.
    pub(crate) fn heavy(self) {
        fence(Ordering::SeqCst);
        if self.asymmetric {
            expedited();
        }
    }
}

/// Whether this process has registered for private expedited `membarrier`.
#[cfg(not(dmaflow_loom))]
fn asymmetric() -> bool {
    use rustix::thread::{MembarrierCommand, membarrier, membarrier_query};
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *REGISTERED.get_or_init(|| {
        membarrier_query().contains_command(MembarrierCommand::PrivateExpedited)
            && membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
            // One call to check that the registration took.
            && membarrier(MembarrierCommand::PrivateExpedited).is_ok()
    })
}

/// The loom model checks the handshake with full fences on both sides.
#[cfg(dmaflow_loom)]
fn asymmetric() -> bool {
    false
}

/// A full barrier on every core running a thread of this process.
#[cfg(not(dmaflow_loom))]
fn expedited() {
    use rustix::thread::{MembarrierCommand, membarrier};
    // Registered in `asymmetric` before any queue used it; the kernel refuses
    // the command only to an unregistered process, so this fence is a last
    // resort that should never run.
    if membarrier(MembarrierCommand::PrivateExpedited).is_err() {
        fence(Ordering::SeqCst);
    }
}

#[cfg(dmaflow_loom)]
fn expedited() {}

#[cfg(all(test, not(dmaflow_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_choice_is_made_once_per_process() {
        let a = Barrier::of_process();
        assert_eq!(a, Barrier::of_process());
        // Both sides run without failing whichever was chosen.
        a.light();
        a.heavy();
    }
}
