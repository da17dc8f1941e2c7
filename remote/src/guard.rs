//! What a client may aim a DMA engine at: only its own buffers. A client
//! drives an engine by hand through MMIO (as PYNQ's DMA driver does), so a
//! register write could point the engine at any DMA memory of the board,
//! another client's buffers included. Before a write that starts a channel
//! reaches the engine, the memory the channel will reach is checked against
//! the writing client's buffers: in direct mode the address and length of
//! the LENGTH write; in scatter-gather mode, on a TAILDESC (or TAILDESC_MSB)
//! write, every descriptor from CURDESC to the tail (the whole ring in
//! cyclic mode), where it lies and the buffer it names.
//!
//! The descriptors checked are flushed to memory as they are read, so the
//! engine fetches what was checked (a client's unflushed copy included). The server keeps what
//! a started chain reaches ([`Chains`]): a client may not rewrite those
//! descriptors while the channel runs, and freeing a buffer that holds them
//! stops the channel, so that the descriptors the engine fetches stay the
//! ones checked.

use std::collections::HashMap;
use std::sync::Mutex;

use dmaflow::axi::regs::{
    DESC_ALIGN, DESC_BUFFER_ADDRESS, DESC_BUFFER_ADDRESS_MSB, DESC_CONTROL, DESC_NXTDESC,
    DESC_NXTDESC_MSB,
};

/// A register write that starts a channel of an AXI DMA, with what the
/// channel will reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Start {
    /// The engine's instance name.
    pub(crate) ip: String,
    /// The address of the channel's DMASR.
    pub(crate) dmasr: u64,
    /// `MM2S` or `S2MM`.
    pub(crate) channel: &'static str,
    /// What it will reach.
    pub(crate) reach: Reach,
}

/// The memory a started channel reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Direct mode: `len` bytes at `addr`.
    Direct {
        /// Source (MM2S_SA) or destination (S2MM_DA).
        addr: u64,
        /// Bytes (LENGTH as the IP keeps it).
        len: u64,
    },
    /// Scatter-gather mode: the descriptor chain from `cur` to `tail`, or
    /// in cyclic mode the ring from `cur` back to it.
    Chain {
        /// CURDESC.
        cur: u64,
        /// TAILDESC.
        tail: u64,
        /// Whether DMACR's Cyclic BD Enable is set.
        cyclic: bool,
        /// The bits of a descriptor's CONTROL that are its length
        /// (`c_sg_length_width`).
        length_mask: u32,
    },
}

/// Memory a client may aim an engine at: its buffers' bus ranges, and how
/// to read a word of them.
pub(crate) trait Own {
    /// `(bus address, bytes)` of each buffer.
    fn ranges(&self) -> &[(u64, u64)];
    /// The 32-bit word at bus address `addr` (inside one of the ranges).
    fn word(&self, addr: u64) -> u32;
}

/// Why a start was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// The channel would reach memory outside the client's buffers.
    #[error(
        "{channel} of {ip} not started: {what} {addr:#x}..{end:#x} is outside this client's buffers"
    )]
    Outside {
        /// The engine.
        ip: String,
        /// The channel.
        channel: &'static str,
        /// What lies there (a buffer, a descriptor).
        what: &'static str,
        /// First byte.
        addr: u64,
        /// One past the last byte.
        end: u64,
    },
    /// The chain does not come to its end within what the client's buffers
    /// can hold.
    #[error(
        "{channel} of {ip} not started: the descriptor chain from CURDESC {cur:#x} {how} \
         within {most} descriptors (what this client's buffers can hold)"
    )]
    Endless {
        /// The engine.
        ip: String,
        /// The channel.
        channel: &'static str,
        /// CURDESC.
        cur: u64,
        /// What it does not do.
        how: String,
        /// Descriptors walked.
        most: u64,
    },
}

/// What a started chain reaches.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Reached {
    /// Its descriptors, the tail's successor included (where the engine
    /// fetches next).
    pub(crate) descs: Vec<u64>,
    /// Their buffers: (address, bytes).
    pub(crate) buffers: Vec<(u64, u64)>,
}

/// A chain a channel was started on.
struct Chain {
    /// `S2MM of axi_dma_0`.
    label: String,
    /// What it reaches.
    reach: Reached,
}

/// The descriptor chains started, by the address of their channel's DMASR
/// (the last started on each channel).
#[derive(Default)]
pub(crate) struct Chains(Mutex<HashMap<u64, Chain>>);

impl Chains {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Chain>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The channel of `start` now walks a chain reaching `reach`.
    pub(crate) fn started(&self, start: &Start, reach: Reached) {
        self.map().insert(
            start.dmasr,
            Chain {
                label: format!("{} of {}", start.channel, start.ip),
                reach,
            },
        );
    }

    /// The chains that reach into `base..base + len` (a descriptor, or with
    /// `buffers` a descriptor's buffer too): (DMASR's address, label).
    pub(crate) fn in_range(&self, base: u64, len: u64, buffers: bool) -> Vec<(u64, String)> {
        self.map()
            .iter()
            .filter(|(_, c)| {
                let over = |a: u64, n: u64| a < base + len && a + n > base;
                c.reach.descs.iter().any(|&d| over(d, DESC_ALIGN))
                    || (buffers && c.reach.buffers.iter().any(|&(a, n)| over(a, n)))
            })
            .map(|(&sr, c)| (sr, c.label.clone()))
            .collect()
    }

    /// Forgets the chain of the channel whose DMASR is at `dmasr` (it was
    /// stopped).
    pub(crate) fn forget(&self, dmasr: u64) {
        self.map().remove(&dmasr);
    }

    /// Forgets every chain (the design was loaded again).
    pub(crate) fn clear(&self) {
        self.map().clear();
    }
}

/// Whether `addr..addr + len` lies inside one of `own`'s buffers.
fn inside(own: &dyn Own, addr: u64, len: u64) -> bool {
    addr.checked_add(len)
        .is_some_and(|end| own.ranges().iter().any(|&(b, n)| addr >= b && end <= b + n))
}

/// Checks that the channel `start` starts reaches only `own`'s buffers.
/// Returns what a chain reaches (nothing in direct mode).
pub(crate) fn check(start: &Start, own: &dyn Own) -> Result<Reached, Refused> {
    let outside = |what, addr: u64, len: u64| Refused::Outside {
        ip: start.ip.clone(),
        channel: start.channel,
        what,
        addr,
        end: addr.saturating_add(len),
    };
    match start.reach {
        Reach::Direct { addr, len } => {
            if inside(own, addr, len) {
                Ok(Reached::default())
            } else {
                Err(outside("the buffer", addr, len))
            }
        }
        Reach::Chain {
            cur,
            tail,
            cyclic,
            length_mask,
        } => {
            // More descriptors than the client's buffers can hold means the
            // chain loops without reaching its end.
            let most: u64 = own.ranges().iter().map(|&(_, n)| n / DESC_ALIGN).sum();
            let mut d = cur;
            let mut walked = Reached::default();
            for _ in 0..most {
                if !d.is_multiple_of(DESC_ALIGN) || !inside(own, d, DESC_ALIGN) {
                    return Err(outside("the descriptor", d, DESC_ALIGN));
                }
                walked.descs.push(d);
                let word = |o: u64| own.word(d + o);
                let len = u64::from(word(DESC_CONTROL) & length_mask);
                let addr = u64::from(word(DESC_BUFFER_ADDRESS))
                    | (u64::from(word(DESC_BUFFER_ADDRESS_MSB)) << 32);
                if len > 0 && !inside(own, addr, len) {
                    return Err(outside("the descriptor's buffer", addr, len));
                }
                walked.buffers.push((addr, len));
                let next =
                    u64::from(word(DESC_NXTDESC)) | (u64::from(word(DESC_NXTDESC_MSB)) << 32);
                // The tail's successor is where the engine fetches when the
                // tail moves on: it must be the client's too.
                let next = next & !(DESC_ALIGN - 1);
                if !cyclic && d == tail {
                    walked.descs.push(next);
                    return if inside(own, next, DESC_ALIGN) {
                        Ok(walked)
                    } else {
                        Err(outside("the tail descriptor's next", next, DESC_ALIGN))
                    };
                }
                d = next;
                if cyclic && d == cur {
                    return Ok(walked);
                }
            }
            Err(Refused::Endless {
                ip: start.ip.clone(),
                channel: start.channel,
                cur,
                how: if cyclic {
                    "does not come back to itself".into()
                } else {
                    format!("does not reach TAILDESC {tail:#x}")
                },
                most,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory of one client: buffers as words.
    struct Mem {
        ranges: Vec<(u64, u64)>,
        words: std::collections::HashMap<u64, u32>,
    }

    impl Own for Mem {
        fn ranges(&self) -> &[(u64, u64)] {
            &self.ranges
        }
        fn word(&self, addr: u64) -> u32 {
            self.words.get(&addr).copied().unwrap_or(0)
        }
    }

    impl Mem {
        /// A descriptor at `at` naming `len` bytes at `buf`, followed by `next`.
        fn desc(&mut self, at: u64, next: u64, buf: u64, len: u32) {
            self.words.insert(at + DESC_NXTDESC, next as u32);
            self.words.insert(at + DESC_BUFFER_ADDRESS, buf as u32);
            self.words.insert(at + DESC_CONTROL, len);
        }
    }

    fn chain(cur: u64, tail: u64, cyclic: bool) -> Start {
        Start {
            ip: "axi_dma_0".into(),
            dmasr: 0x4040_0004,
            channel: "MM2S",
            reach: Reach::Chain {
                cur,
                tail,
                cyclic,
                length_mask: (1 << 26) - 1,
            },
        }
    }

    /// Descriptors at 0x1000 (0x100 bytes: four), data at 0x2000 (0x1000).
    fn mem() -> Mem {
        Mem {
            ranges: vec![(0x1000, 0x100), (0x2000, 0x1000)],
            words: Default::default(),
        }
    }

    #[test]
    fn a_ring_of_own_descriptors_passes_and_one_foreign_address_is_named() {
        let mut m = mem();
        m.desc(0x1000, 0x1040, 0x2000, 0x800);
        m.desc(0x1040, 0x1000, 0x2800, 0x800);
        let r = check(&chain(0x1000, 0x1040, false), &m).unwrap();
        assert_eq!(r.descs, [0x1000, 0x1040, 0x1000]);
        assert_eq!(r.buffers, [(0x2000, 0x800), (0x2800, 0x800)]);
        let r = check(&chain(0x1000, 0x1000, true), &m).unwrap();
        assert_eq!(r.descs, [0x1000, 0x1040]);
        // The second buffer runs one byte past the client's memory.
        m.desc(0x1040, 0x1000, 0x2800, 0x801);
        let e = check(&chain(0x1000, 0x1040, false), &m).unwrap_err();
        assert!(e.to_string().contains("0x2800..0x3001"), "{e}");
        // A descriptor outside.
        m.desc(0x1040, 0x9000, 0x2800, 0x10);
        let e = check(&chain(0x1000, 0x1040, false), &m).unwrap_err();
        assert!(e.to_string().contains("next 0x9000"), "{e}");
        let e = check(&chain(0x9000, 0x1040, false), &m).unwrap_err();
        assert!(e.to_string().contains("descriptor 0x9000"), "{e}");
    }

    #[test]
    fn a_loop_that_misses_the_tail_is_refused_within_the_clients_memory() {
        let mut m = mem();
        m.desc(0x1000, 0x1040, 0x2000, 4);
        m.desc(0x1040, 0x1000, 0x2000, 4);
        let e = check(&chain(0x1000, 0x1080, false), &m).unwrap_err();
        assert!(
            e.to_string().contains("does not reach TAILDESC 0x1080"),
            "{e}"
        );
        // In cyclic mode a chain that leaves the ring never comes back.
        m.desc(0x1040, 0x1080, 0x2000, 4);
        m.desc(0x1080, 0x1040, 0x2000, 4);
        let e = check(&chain(0x1000, 0, true), &m).unwrap_err();
        assert!(e.to_string().contains("does not come back"), "{e}");
    }

    #[test]
    fn direct_mode_checks_address_and_length() {
        let m = mem();
        let direct = |addr, len| Start {
            ip: "axi_dma_0".into(),
            dmasr: 0x4040_0034,
            channel: "S2MM",
            reach: Reach::Direct { addr, len },
        };
        check(&direct(0x2000, 0x1000), &m).unwrap();
        assert!(check(&direct(0x2001, 0x1000), &m).is_err());
        assert!(check(&direct(0x0, 0x10), &m).is_err());
        assert!(check(&direct(u64::MAX - 4, 0x10), &m).is_err());
        // Straddling two buffers that are not one.
        assert!(check(&direct(0x10F0, 0x20), &m).is_err());
    }
}
