//! Walking a scatter-gather descriptor chain as the engine does (PG021): from a
//! first descriptor along NXTDESC to the tail, or in cyclic mode round the ring
//! back to the first. The walk reads descriptors through a caller's reader (the
//! driver's own memory, or memory another party filled that must be checked
//! before any engine fetches it) and is bounded: a chain that does not end
//! within `most` descriptors is an error, never a hang.

use super::regs::*;

/// One descriptor as the engine reads it: where it lies and its sixteen words'
/// fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// Its bus address (64-byte aligned).
    pub at: u64,
    /// NXTDESC (with the MSB word), as written.
    pub next: u64,
    /// BUFFER_ADDRESS (with the MSB word).
    pub buffer: u64,
    /// CONTROL (length, TXSOF, TXEOF).
    pub control: u32,
    /// STATUS (Cmplt, errors, bytes transferred).
    pub status: u32,
    /// APP0..APP4.
    pub app: [u32; 5],
}

impl Descriptor {
    /// The descriptor at `at` from its sixteen words (word `i` at byte `4 i`).
    pub fn from_words(at: u64, w: &[u32; 16]) -> Self {
        let pair =
            |lo: u64| u64::from(w[(lo / 4) as usize]) | (u64::from(w[(lo / 4) as usize + 1]) << 32);
        let a = (DESC_APP0 / 4) as usize;
        Descriptor {
            at,
            next: pair(DESC_NXTDESC),
            buffer: pair(DESC_BUFFER_ADDRESS),
            control: w[(DESC_CONTROL / 4) as usize],
            status: w[(DESC_STATUS / 4) as usize],
            app: [w[a], w[a + 1], w[a + 2], w[a + 3], w[a + 4]],
        }
    }

    /// Its sixteen words, NXTDESC replaced by `next`.
    pub fn words_with_next(&self, next: u64) -> [u32; 16] {
        let mut w = [0u32; 16];
        w[(DESC_NXTDESC / 4) as usize] = next as u32;
        w[(DESC_NXTDESC_MSB / 4) as usize] = (next >> 32) as u32;
        w[(DESC_BUFFER_ADDRESS / 4) as usize] = self.buffer as u32;
        w[(DESC_BUFFER_ADDRESS_MSB / 4) as usize] = (self.buffer >> 32) as u32;
        w[(DESC_CONTROL / 4) as usize] = self.control;
        w[(DESC_STATUS / 4) as usize] = self.status;
        let a = (DESC_APP0 / 4) as usize;
        w[a..a + 5].copy_from_slice(&self.app);
        w
    }

    /// The address the engine fetches after this descriptor (bits \[5:0\] of
    /// NXTDESC are ignored).
    pub fn next_fetch(&self) -> u64 {
        self.next & !(DESC_ALIGN - 1)
    }
}

/// Where a chain ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// At the descriptor TAILDESC names.
    Tail(u64),
    /// Cyclic BD mode: back at the first descriptor.
    Cyclic,
}

/// Why a walk stopped short.
#[derive(Debug, thiserror::Error)]
pub enum WalkError<E: std::error::Error + 'static> {
    /// The reader refused a descriptor (it is not where it may be read).
    #[error(transparent)]
    Read(E),
    /// The chain does not come to its end within `most` descriptors.
    #[error("the descriptor chain from {first:#x} {how} within {most} descriptors")]
    Endless {
        /// The first descriptor.
        first: u64,
        /// What it does not do ("does not reach TAILDESC 0x..").
        how: String,
        /// Descriptors walked.
        most: usize,
    },
}

/// Walks the chain from `first` to its `end` through `read`, at most `most`
/// descriptors: the descriptors in the engine's order, the tail last. `read`
/// is asked for each 64-byte aligned address the engine would fetch (the
/// walk aligns as the engine does) and may refuse it.
pub fn walk<E: std::error::Error + 'static>(
    first: u64,
    end: End,
    most: usize,
    mut read: impl FnMut(u64) -> Result<Descriptor, E>,
) -> Result<Vec<Descriptor>, WalkError<E>> {
    let first = first & !(DESC_ALIGN - 1);
    let mut at = first;
    let mut chain = Vec::new();
    while chain.len() < most {
        let d = read(at).map_err(WalkError::Read)?;
        chain.push(d);
        let next = d.next_fetch();
        match end {
            End::Tail(t) if at == t & !(DESC_ALIGN - 1) => return Ok(chain),
            End::Cyclic if next == first => return Ok(chain),
            _ => at = next,
        }
    }
    Err(WalkError::Endless {
        first,
        how: match end {
            End::Tail(t) => format!("does not reach TAILDESC {t:#x}"),
            End::Cyclic => "does not come back to itself".into(),
        },
        most,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("no descriptor at {0:#x}")]
    struct Missing(u64);

    fn ring(links: &[(u64, u64)]) -> impl FnMut(u64) -> Result<Descriptor, Missing> + '_ {
        move |at| {
            links
                .iter()
                .find(|l| l.0 == at)
                .map(|&(at, next)| Descriptor {
                    at,
                    next,
                    ..Default::default()
                })
                .ok_or(Missing(at))
        }
    }

    #[test]
    fn a_chain_ends_at_its_tail_or_back_at_its_first() {
        let links = [(0x1000, 0x1040), (0x1040, 0x1080), (0x1080, 0x1000)];
        let at = |c: Vec<Descriptor>| c.iter().map(|d| d.at).collect::<Vec<_>>();
        let c = walk(0x1000, End::Tail(0x1040), 8, ring(&links)).unwrap();
        assert_eq!(at(c), [0x1000, 0x1040]);
        let c = walk(0x1040, End::Cyclic, 8, ring(&links)).unwrap();
        assert_eq!(at(c), [0x1040, 0x1080, 0x1000]);
    }

    #[test]
    fn a_loop_missing_its_tail_and_a_refused_read_are_errors() {
        let links = [(0x1000, 0x1040), (0x1040, 0x1000)];
        let e = walk(0x1000, End::Tail(0x2000), 5, ring(&links)).unwrap_err();
        assert!(matches!(e, WalkError::Endless { most: 5, .. }), "{e}");
        assert!(e.to_string().contains("does not reach TAILDESC 0x2000"));
        let links = [(0x1000, 0x9000)];
        let e = walk(0x1000, End::Tail(0x2000), 5, ring(&links)).unwrap_err();
        assert_eq!(e.to_string(), "no descriptor at 0x9000");
        // NXTDESC's low six bits are ignored, as by the engine.
        let links = [(0x1000, 0x1043), (0x1040, 0)];
        assert_eq!(
            walk(0x1000, End::Tail(0x1040), 5, ring(&links))
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn words_round_trip_with_a_new_next() {
        let mut w = [0u32; 16];
        for (i, v) in w.iter_mut().enumerate() {
            *v = i as u32 + 1;
        }
        let d = Descriptor::from_words(0x40, &w);
        let back = d.words_with_next(0x1_2345_6780);
        assert_eq!(back[0], 0x2345_6780);
        assert_eq!(back[1], 1);
        assert_eq!(back[2..4], w[2..4]);
        assert_eq!(back[6..13], w[6..13]);
        assert_eq!(back[4..6], [0, 0]);
    }
}
