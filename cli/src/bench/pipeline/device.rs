//! The device-only baselines of `bench pipeline`: each emulated core's DMA
//! channels driven bare (one descriptor ring per channel, descriptors written
//! straight at buffers the data already sits in, no graph, no queues, no
//! source or sink threads), so that what the pipelines deliver can be set
//! against what the device itself does on this host in the same rounds.

use dmaflow::axi::regs::{DESC_LENGTH_MASK, DESC_STS_RXEOF};
use dmaflow::axi::{Channel, Coalescing, DESC_WORDS, DescRing, Wait};
use dmaflow::dma::Completion;
use dmaflow::mem::DmaBuf;
use dmaflow::rig::SimEngine;

use super::Error;

/// One engine's MM2S and S2MM as descriptor rings, driven bare: one
/// descriptor per packet, no checks beyond the completed answer's length.
pub(super) struct Bare<'a> {
    engine: &'a SimEngine,
    completion: Completion,
    mm2s: DescRing,
    s2mm: DescRing,
    /// Bytes pushed on MM2S since its last flush.
    pushed: usize,
    /// Until when an adaptive wait spins (and naps): the last MM2S flush's
    /// expected end at the link's rate.
    spin_until: std::time::Instant,
}

impl<'a> Bare<'a> {
    /// Rings of `slots` descriptors on both channels of `engine`, completions
    /// waited for as `completion` says, S2MM's interrupts coalesced as
    /// `s2mm` says (as the accelerator node measured against this run does).
    pub(super) fn new(
        engine: &'a SimEngine,
        slots: usize,
        completion: Completion,
        s2mm: Coalescing,
    ) -> Result<Self, Error> {
        let irq = completion.sleeps();
        let descs = || engine.pool().alloc::<u32>(slots * DESC_WORDS);
        let mm2s = engine.dma().ring_start(Channel::Mm2s, descs()?, irq)?;
        let s2mm = engine
            .dma()
            .ring_start_coalesced(Channel::S2mm, descs()?, irq, s2mm)?;
        Ok(Bare {
            engine,
            completion,
            mm2s,
            s2mm,
            pushed: 0,
            spin_until: std::time::Instant::now(),
        })
    }

    fn how(&self, ch: Channel) -> Wait<'_> {
        match self.completion {
            Completion::Irq => Wait::Irq(self.engine.irq(ch)),
            Completion::Adaptive => Wait::Adaptive {
                line: self.engine.irq(ch),
                spin_until: self.spin_until,
            },
            Completion::Yield => Wait::Yield,
            _ => Wait::Poll,
        }
    }

    /// Puts one packet of `bytes` at `bus` on `ch`'s ring (not yet handed
    /// over: [`Bare::flush`]).
    ///
    /// # Safety
    ///
    /// `bus..bus + bytes` is DMA memory of the engine's pool that stays
    /// allocated, and that nothing else writes (MM2S) or reads or writes
    /// (S2MM), until the descriptor completes or the engine is halted.
    pub(super) unsafe fn push(&mut self, ch: Channel, bus: u64, bytes: usize) -> Result<(), Error> {
        let max = self.engine.dma().max_len();
        let ring = match ch {
            Channel::Mm2s => {
                self.pushed += bytes;
                &mut self.mm2s
            }
            Channel::S2mm => &mut self.s2mm,
        };
        // SAFETY: the caller's contract, passed on.
        unsafe { ring.push_part(bus, bytes, max, true, true) }?;
        Ok(())
    }

    /// Hands what was pushed on `ch` to the engine (one TAILDESC write).
    pub(super) fn flush(&mut self, ch: Channel) -> Result<(), Error> {
        let ring = match ch {
            Channel::Mm2s => &mut self.mm2s,
            Channel::S2mm => &mut self.s2mm,
        };
        self.engine.dma().ring_flush(ring)?;
        if ch == Channel::Mm2s {
            let now = std::time::Instant::now();
            self.spin_until = self.engine.link().spin_until(now, self.pushed);
            self.pushed = 0;
        }
        Ok(())
    }

    /// Waits for the oldest MM2S packet and reclaims it.
    pub(super) fn sent(&mut self) -> Result<(), Error> {
        let how = self.how(Channel::Mm2s);
        self.engine.dma().ring_wait(&self.mm2s, &how)?;
        self.mm2s.reclaim();
        Ok(())
    }

    /// Whether the oldest S2MM landing is there already (no wait).
    pub(super) fn has_landed(&self) -> bool {
        self.s2mm.completed().is_some()
    }

    /// Waits for the oldest S2MM landing, reclaims it and returns its length,
    /// which must end the packet (TLAST) and be `expected` bytes.
    pub(super) fn landed(&mut self, expected: usize) -> Result<usize, Error> {
        let how = self.how(Channel::S2mm);
        let status = self.engine.dma().ring_wait(&self.s2mm, &how)?;
        self.s2mm.reclaim();
        let got = (status & DESC_LENGTH_MASK) as usize;
        if status & DESC_STS_RXEOF == 0 || got != expected {
            return Err(Error::Peer {
                peer: "device-only baseline",
                reason: format!(
                    "an answer of {got} bytes (TLAST {}), expected {expected}",
                    { status & DESC_STS_RXEOF != 0 }
                ),
            });
        }
        Ok(got)
    }
}

/// Halts the engines of a bare run that ended early, or gives the run's
/// buffers up to them for good when they cannot be halted (they may still
/// read or write them).
pub(super) fn stop(engines: &[&SimEngine], bufs: &mut [&mut DmaBuf<u8>]) {
    if !engines.iter().all(|e| e.dma().recover()) {
        bufs.iter_mut().for_each(|b| b.surrender());
    }
}
