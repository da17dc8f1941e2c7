//! A circular scatter-gather descriptor ring: the descriptors are linked once into
//! a circle and handed to the channel; from then on the driver fills descriptors
//! at the head, moves TAILDESC forward to hand them over, and reclaims them in
//! order as the engine marks them Cmplt. The channel never halts between packets.

use std::time::Instant;

use super::regs::*;
use super::{AxiDma, Channel, DESC_WORDS, Error, Wait};
use crate::mem::DmaBuf;
use crate::platform::{self, RegisterSpace};

/// A descriptor ring owned by one channel of an engine. At most
/// [`capacity`](DescRing::capacity) (one fewer than the slots) descriptors are in
/// use at once.
pub struct DescRing {
    desc: DmaBuf<u32>,
    channel: Channel,
    slots: usize,
    /// Descriptors filled (monotonic); its slot is `head_slot`.
    head: u64,
    /// Descriptors handed to the engine with TAILDESC.
    posted: u64,
    /// Descriptors reclaimed after Cmplt.
    done: u64,
    /// `head` and `done` as slots, kept by wrapping increments (no division
    /// per packet).
    head_slot: usize,
    done_slot: usize,
    /// What each descriptor's BUFFER_ADDRESS and CONTROL hold (as the driver
    /// last wrote them; the engine writes only STATUS and APP words), so a
    /// push that reuses a descriptor for the same buffer and length writes
    /// STATUS alone.
    written: Vec<(u64, u32)>,
}

/// Interrupt coalescing of a ring's channel (PG021 DMACR IRQThreshold and
/// IRQDelay): IOC is raised once `threshold` packets have completed, and
/// Dly_Irq when `delay` ticks of the delay timer pass after a packet with
/// fewer than that (so a last partial batch still wakes a sleeping wait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coalescing {
    /// Packets per completion interrupt (1 to 255).
    pub threshold: u8,
    /// Delay timer ticks (PG021: 125 SG clock periods each) after the last
    /// packet before Dly_Irq; 0 leaves the timer off.
    pub delay: u8,
}

impl Coalescing {
    /// An interrupt per packet, no delay timer (the IP's reset value).
    pub const NONE: Coalescing = Coalescing {
        threshold: 1,
        delay: 0,
    };
}

impl Default for Coalescing {
    fn default() -> Self {
        Coalescing::NONE
    }
}

fn word(slot: usize, field: u64) -> usize {
    slot * DESC_WORDS + (field / 4) as usize
}

impl<R: RegisterSpace> AxiDma<R> {
    /// Links the descriptors of `desc` ([`DESC_WORDS`] words each) into a circle,
    /// points CURDESC at the first while the channel is halted and sets RS, with
    /// the completion interrupt enabled if `irq`. Nothing moves until descriptors
    /// are pushed and flushed.
    pub fn ring_start(&self, ch: Channel, desc: DmaBuf<u32>, irq: bool) -> Result<DescRing, Error> {
        self.ring_start_coalesced(ch, desc, irq, Coalescing::NONE)
    }

    /// Like [`ring_start`](Self::ring_start), with the channel's interrupts
    /// coalesced as `coalescing` says (the delay interrupt enabled with the
    /// others if `irq` and `coalescing.delay > 0`). A threshold of 0 is an
    /// error (PG021 does not allow it).
    pub fn ring_start_coalesced(
        &self,
        ch: Channel,
        mut desc: DmaBuf<u32>,
        irq: bool,
        coalescing: Coalescing,
    ) -> Result<DescRing, Error> {
        if coalescing.threshold == 0 {
            return Err(Error::ZeroThreshold(ch));
        }
        self.usable()?;
        if desc.is_lost() {
            return Err(crate::mem::Error::Lost.into());
        }
        super::check_descriptor_alignment(ch, &desc)?;
        if self.status(ch)? & DMASR_SG_INCLD == 0 {
            return Err(Error::NoSg(ch));
        }
        let slots = desc.len() / DESC_WORDS;
        if slots < 2 {
            return Err(Error::RingFull {
                channel: ch,
                needed: 2,
                capacity: slots,
            });
        }
        // The channel stops before its new descriptors are written.
        self.halt(ch)?;
        let base = desc.bus_addr();
        let words = desc.as_mut_slice();
        words.fill(0);
        for i in 0..slots {
            let next = base + (((i + 1) % slots) as u64) * DESC_ALIGN;
            words[word(i, DESC_NXTDESC)] = next as u32;
            words[word(i, DESC_NXTDESC_MSB)] = (next >> 32) as u32;
        }
        desc.sync_for_device(desc.byte_len())?;
        self.sg_arm_coalesced(ch, base, irq, false, coalescing)?;
        Ok(DescRing {
            desc,
            channel: ch,
            slots,
            head: 0,
            posted: 0,
            done: 0,
            head_slot: 0,
            done_slot: 0,
            written: vec![(0, 0); slots],
        })
    }

    /// Points CURDESC at `first` while the channel is halted (the caller halted
    /// it; PG021 allows the write only then), clears stale interrupt bits and sets
    /// RS, with the completion interrupt enabled if `irq` and Cyclic BD Enable if
    /// `cyclic`. Nothing moves until TAILDESC is written.
    pub(super) fn sg_arm(
        &self,
        ch: Channel,
        first: u64,
        irq: bool,
        cyclic: bool,
    ) -> Result<(), Error> {
        self.sg_arm_coalesced(ch, first, irq, cyclic, Coalescing::NONE)
    }

    /// [`sg_arm`](Self::sg_arm) with IRQThreshold and IRQDelay from
    /// `coalescing` (Dly_IrqEn with the other enables when a delay is set).
    fn sg_arm_coalesced(
        &self,
        ch: Channel,
        first: u64,
        irq: bool,
        cyclic: bool,
        coalescing: Coalescing,
    ) -> Result<(), Error> {
        let i = ch as usize;
        self.set(ch, DMASR, DMASR_IRQ_MASK)?;
        self.set(ch, CURDESC, first as u32)?;
        self.set(ch, CURDESC_MSB, (first >> 32) as u32)?;
        let mut cr = DMACR_RS
            | (u32::from(coalescing.threshold.max(1)) << DMACR_IRQ_THRESHOLD_SHIFT)
            | (u32::from(coalescing.delay) << DMACR_IRQ_DELAY_SHIFT);
        if cyclic {
            cr |= DMACR_CYCLIC;
        }
        if irq {
            cr |= DMACR_IOC_IRQ_EN | DMACR_ERR_IRQ_EN;
            if coalescing.delay > 0 {
                cr |= DMACR_DLY_IRQ_EN;
            }
        }
        self.set_cached(ch, DMACR, &self.written_cr[i], cr)?;
        Ok(())
    }

    /// Stops the channel (RS cleared) and waits until it reports Halted; if it
    /// does not in time, the engine is recovered ([`AxiDma::recover`]) and the
    /// timeout returned.
    pub(super) fn halt(&self, ch: Channel) -> Result<(), Error> {
        self.halt_within(ch, self.cfg.timeout)
    }

    /// [`halt`](Self::halt), waiting at most `patience` before recovering.
    pub(super) fn halt_within(
        &self,
        ch: Channel,
        patience: std::time::Duration,
    ) -> Result<(), Error> {
        self.set(ch, DMACR, 0)?;
        self.written_cr[ch as usize].set(Some(0));
        let deadline = Instant::now() + patience;
        while self.status(ch)? & DMASR_HALTED == 0 {
            if Instant::now() > deadline {
                let dmasr = self.status(ch)?;
                self.recover();
                return Err(Error::Timeout {
                    channel: ch,
                    timeout: self.cfg.timeout,
                    dmasr,
                });
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Hands every descriptor pushed since the last flush to the engine (one
    /// TAILDESC write).
    pub fn ring_flush(&self, ring: &mut DescRing) -> Result<(), Error> {
        if ring.posted == ring.head {
            return Ok(());
        }
        let count = (ring.head - ring.posted) as usize;
        // The slot `count` before the head, wrapped (count < slots).
        let first = match ring.head_slot.checked_sub(count) {
            Some(f) => f,
            None => ring.head_slot + ring.slots - count,
        };
        // Explicit cache maintenance covers the descriptors just written, which
        // may wrap around the end of the ring.
        let d = DESC_ALIGN as usize;
        let end = first + count;
        ring.desc
            .sync_range_for_device(first * d, (end.min(ring.slots) - first) * d)?;
        if end > ring.slots {
            ring.desc.sync_range_for_device(0, (end - ring.slots) * d)?;
        }
        // Rule 1 of the ordering contract: descriptors before the doorbell.
        platform::dma_wmb();
        let tail = ring.addr(ring.head_slot.checked_sub(1).unwrap_or(ring.slots - 1));
        let ch = ring.channel;
        self.set(ch, TAILDESC_MSB, (tail >> 32) as u32)?;
        self.set(ch, TAILDESC, tail as u32)?;
        ring.posted = ring.head;
        Ok(())
    }

    /// Waits, as `how` says and at most the configured timeout, until the oldest
    /// descriptor not yet reclaimed is Cmplt; returns its status word (length and,
    /// for S2MM, RXSOF/RXEOF). It stays the oldest until [`DescRing::reclaim`].
    pub fn ring_wait(&self, ring: &DescRing, how: &Wait<'_>) -> Result<u32, Error> {
        if ring.done == ring.posted {
            return Err(Error::RingEmpty(ring.channel));
        }
        let ch = ring.channel;
        self.wait_for(ch, how, || {
            if let Some(s) = ring.errored() {
                self.recover();
                return Err(Error::Descriptor {
                    channel: ch,
                    what: super::decode_descriptor_errors(s),
                    status: s,
                });
            }
            if let Some(s) = ring.completed() {
                if how.sleeps() {
                    self.acknowledge(ch)?;
                }
                return Ok(Some(s));
            }
            if let Err(e) = self.checked_status(ch) {
                // The engine halted with an error (and was recovered): the
                // descriptor that reports it names it better, if it does.
                return Err(match ring.errored() {
                    Some(s) => Error::Descriptor {
                        channel: ch,
                        what: super::decode_descriptor_errors(s),
                        status: s,
                    },
                    None => e,
                });
            }
            if how.sleeps() {
                // Acknowledge, then look again: a completion between the two
                // raises a fresh interrupt.
                self.acknowledge(ch)?;
                if let Some(s) = ring.completed() {
                    return Ok(Some(s));
                }
            }
            Ok(None)
        })
    }
}

impl Drop for DescRing {
    /// A ring dropped with descriptors handed to the engine and not reclaimed
    /// (a panic, an early return without halting the engine): the device may
    /// still read and write them, so their memory is given up to it, never
    /// returned to the pool. Whoever halts the engine first says so
    /// ([`AxiDma::recover`] and the drivers built on rings do).
    fn drop(&mut self) {
        if self.posted > self.done {
            self.desc.surrender();
        }
    }
}

impl DescRing {
    /// Descriptors in the ring.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Descriptors pushed and not yet reclaimed.
    pub fn in_flight(&self) -> usize {
        (self.head - self.done) as usize
    }

    /// Descriptors that may be in use at once: one fewer than the ring holds, so
    /// that a TAILDESC equal to the engine's current descriptor always means
    /// "nothing new" and never "a whole turn of the ring".
    pub fn capacity(&self) -> usize {
        self.slots - 1
    }

    /// Whether every usable descriptor is in use.
    pub fn is_full(&self) -> bool {
        self.in_flight() == self.capacity()
    }

    /// Slot the next [`push`](Self::push) fills.
    pub fn next_slot(&self) -> usize {
        self.head_slot
    }

    /// Descriptors pushed so far (the sequence number of the next push).
    pub fn pushed(&self) -> u64 {
        self.head
    }

    /// Descriptors reclaimed so far (the sequence number of the oldest in use).
    pub fn reclaimed(&self) -> u64 {
        self.done
    }

    /// Descriptors pushed but not yet handed over by a flush.
    pub fn unflushed(&self) -> usize {
        (self.head - self.posted) as usize
    }

    /// Slot of the oldest descriptor not yet reclaimed.
    pub fn oldest(&self) -> usize {
        self.done_slot
    }

    /// The slot after `slot`.
    fn after(&self, slot: usize) -> usize {
        if slot + 1 == self.slots { 0 } else { slot + 1 }
    }

    fn addr(&self, slot: usize) -> u64 {
        self.desc.bus_addr() + slot as u64 * DESC_ALIGN
    }

    /// Fills the next descriptor: `len` bytes at bus address `addr`; for MM2S a
    /// whole packet (TXSOF and TXEOF). Returns its slot. Handed over by the next
    /// flush.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be DMA memory that nothing else uses from the
    /// flush that hands this descriptor over until the descriptor is reclaimed
    /// after its Cmplt or, after an error or timeout, until the engine is
    /// confirmed halted ([`AxiDma::recover`], [`AxiDma::reset`]); if neither
    /// happens, the range stays the device's for good.
    pub unsafe fn push(&mut self, addr: u64, len: usize, max_len: usize) -> Result<usize, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.push_part(addr, len, max_len, true, true) }
    }

    /// Like [`push`](Self::push), for one part of an MM2S packet spread over
    /// several descriptors: TXSOF on its `first` part, TXEOF (TLAST) on its
    /// `last`. For S2MM the flags are ignored (the stream decides).
    ///
    /// # Safety
    ///
    /// As for [`push`](Self::push).
    pub unsafe fn push_part(
        &mut self,
        addr: u64,
        len: usize,
        max_len: usize,
        first: bool,
        last: bool,
    ) -> Result<usize, Error> {
        if len == 0 {
            return Err(Error::ZeroLength {
                channel: self.channel,
            });
        }
        if len > max_len {
            return Err(Error::TooLong {
                channel: self.channel,
                len,
                max: max_len,
            });
        }
        if self.is_full() {
            return Err(Error::RingFull {
                channel: self.channel,
                needed: self.in_flight() + 1,
                capacity: self.capacity(),
            });
        }
        let slot = self.head_slot;
        let mut control = len as u32 & DESC_LENGTH_MASK;
        if self.channel == Channel::Mm2s {
            if first {
                control |= DESC_CTRL_TXSOF;
            }
            if last {
                control |= DESC_CTRL_TXEOF;
            }
        }
        // The engine writes only STATUS (and APP words): what the driver
        // wrote last is still there, and is written again only if it differs.
        let (was_addr, was_control) = self.written[slot];
        if was_addr != addr {
            self.desc
                .write_volatile(word(slot, DESC_BUFFER_ADDRESS), addr as u32);
            self.desc
                .write_volatile(word(slot, DESC_BUFFER_ADDRESS_MSB), (addr >> 32) as u32);
        }
        if was_control != control {
            self.desc.write_volatile(word(slot, DESC_CONTROL), control);
        }
        self.written[slot] = (addr, control);
        self.desc.write_volatile(word(slot, DESC_STATUS), 0);
        self.head += 1;
        self.head_slot = self.after(slot);
        Ok(slot)
    }

    /// The oldest outstanding descriptor's status word.
    fn oldest_status(&self) -> Option<u32> {
        if self.done == self.posted {
            return None;
        }
        Some(self.status_of(1).1)
    }

    /// The oldest outstanding descriptor's status word if the engine marked it
    /// Cmplt without an error. A descriptor whose status reports an error
    /// (see [`errored`](Self::errored)) is never complete: what it moved is
    /// not data.
    pub fn completed(&self) -> Option<u32> {
        let s = self.oldest_status()?;
        if s & DESC_STS_CMPLT == 0 || s & DESC_STS_ERR_MASK != 0 {
            return None;
        }
        // Rule 2 of the ordering contract: Cmplt before what it announces.
        platform::dma_rmb();
        Some(s)
    }

    /// The oldest outstanding descriptor's status word if it reports an error
    /// (DMAIntErr, DMASlvErr, DMADecErr). [`AxiDma::ring_wait`] turns it into
    /// [`Error::Descriptor`].
    pub fn errored(&self) -> Option<u32> {
        self.oldest_status().filter(|s| s & DESC_STS_ERR_MASK != 0)
    }

    /// Gives the descriptors up to an engine that could not be halted: their
    /// memory is lost to it (see [`DmaBuf`]).
    pub(crate) fn surrender(&mut self) {
        self.desc.surrender();
    }

    /// The engine is confirmed halted (recovered or reset): nothing handed
    /// over is the device's any more, and the ring must be started again
    /// ([`AxiDma::ring_start`]) before it is used.
    pub(crate) fn engine_halted(&mut self) {
        self.posted = self.head;
        self.done = self.head;
        self.done_slot = self.head_slot;
    }

    /// Whether the engine has finished every descriptor handed to it (the
    /// newest handed over is Cmplt, or none is outstanding): the channel
    /// idles until the next flush. Reads one status word. For S2MM that
    /// means every receive buffer is full (an overrun); for MM2S, that the
    /// stream ran dry (an underrun).
    pub fn drained(&self) -> bool {
        match self.posted_in_flight() {
            0 => true,
            n => self.status_of(n).1 & DESC_STS_CMPLT != 0,
        }
    }

    /// Whether the `count` oldest descriptors handed to the engine are all
    /// Cmplt without an error, read from the status of the newest of them
    /// alone (the engine completes descriptors in order and halts at the
    /// first error). `false` when `count` is 0 or more than are handed over.
    /// Reclaims nothing: for a caller that waits for a batch before taking
    /// it.
    pub fn completed_through(&self, count: usize) -> bool {
        if count == 0 || count > self.posted_in_flight() {
            return false;
        }
        let s = self.status_of(count).1;
        s & DESC_STS_CMPLT != 0 && s & DESC_STS_ERR_MASK == 0
    }

    /// The slot `count - 1` after the oldest (wrapped; `1 <= count <=
    /// slots`) and its STATUS word, the line dropped first (explicit
    /// maintenance; a no-op when coherent).
    fn status_of(&self, count: usize) -> (usize, u32) {
        let last = self.done_slot + count - 1;
        let last = if last >= self.slots {
            last - self.slots
        } else {
            last
        };
        let _ = self
            .desc
            .sync_range_for_cpu(last * DESC_ALIGN as usize, DESC_ALIGN as usize);
        (
            last,
            self.desc.load_word(word(last, DESC_STATUS)).unwrap_or(0),
        )
    }

    /// Descriptors handed to the engine and not yet reclaimed.
    pub fn posted_in_flight(&self) -> usize {
        (self.posted - self.done) as usize
    }

    /// Reclaims the `count` oldest descriptors handed to the engine at once if
    /// the newest of them is Cmplt without an error, reading that one status
    /// alone (the engine completes descriptors in order and halts at the
    /// first error, so every earlier one completed without error). Returns
    /// the descriptors reclaimed: `count`, or 0 when that one is not
    /// complete yet (or `count` is 0 or more than are handed over).
    pub fn reclaim_batch(&mut self, count: usize) -> usize {
        if count == 0 || count > self.posted_in_flight() {
            return 0;
        }
        let (last, s) = self.status_of(count);
        if s & DESC_STS_CMPLT == 0 || s & DESC_STS_ERR_MASK != 0 {
            return 0;
        }
        platform::dma_rmb();
        // The others' lines as the engine left them too (explicit
        // maintenance; a no-op when coherent), before the driver writes
        // their STATUS again.
        let d = DESC_ALIGN as usize;
        let first = self.done_slot;
        if last >= first {
            let _ = self.desc.sync_range_for_cpu(first * d, (last - first) * d);
        } else {
            let _ = self
                .desc
                .sync_range_for_cpu(first * d, (self.slots - first) * d);
            let _ = self.desc.sync_range_for_cpu(0, last * d);
        }
        self.done += count as u64;
        self.done_slot = self.after(last);
        count
    }

    /// Gives the oldest descriptor back to the driver after its completion.
    pub fn reclaim(&mut self) {
        if self.done < self.posted {
            self.done += 1;
            self.done_slot = self.after(self.done_slot);
        }
    }
}
