//! The AXI DMA's register semantics (PG021) as the CPU sees them: every write
//! applied with the IP's rules (self-clearing reset, halt after the transfer in
//! progress, write-1-to-clear status, doorbells), and the protocol checks.

use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::axi::regs::*;
use crate::platform::sim::BusTarget;

use super::state::*;

impl Shared {
    pub(super) fn reset(&self, st: &mut State, e: usize) {
        for ch in 0..2 {
            for r in [
                DMACR,
                CURDESC,
                CURDESC_MSB,
                TAILDESC,
                TAILDESC_MSB,
                ADDR,
                ADDR_MSB,
                LENGTH,
            ] {
                self.set(e, ch, r, 0);
            }
            // PG021's reset value: IRQThreshold 1, reserved bit 1 reads 1.
            self.set(e, ch, DMACR, DMACR_RESET_VALUE);
            let sg = if self.sg { DMASR_SG_INCLD } else { 0 };
            self.update_sr(e, ch, |_| DMASR_HALTED | sg);
        }
        st.engines[e] = Engine::new();
        st.processor.reset();
        *self.last_s2mm[e]
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        // Doorbells from before the reset are void.
        for ch in 0..2 {
            self.void_posts(st, e, ch);
            self.in_flight[e][ch].store(false, Ordering::Release);
        }
    }

    /// Makes work posted by a register write visible to the device thread, waking
    /// it if it sleeps.
    pub(super) fn post(&self) {
        self.posted.fetch_add(1, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            // The sleeper holds the lock until its wait releases it, so taking the
            // lock here orders this notify after the wait began.
            let _held = lock(&self.state);
            self.work.notify_one();
        }
    }

    /// Whether TAILDESC was written since the device last looked.
    pub(super) fn posts_pending(&self, st: &State) -> bool {
        st.engines.iter().enumerate().any(|(e, g)| {
            (0..2).any(|ch| self.posts[e][ch].load(Ordering::Acquire) != g.posts_seen[ch])
        })
    }

    /// Picks up direct-mode LENGTH writes as jobs (address and length as the
    /// registers hold them: the driver writes them once per transfer).
    pub(super) fn pick_up_jobs(&self, st: &mut State, e: usize) {
        for ch in 0..2 {
            let writes = self.posts[e][ch].load(Ordering::Acquire);
            if writes == st.engines[e].posts_seen[ch] {
                continue;
            }
            st.engines[e].posts_seen[ch] = writes;
            let ns = self.post_time[e][ch].load(Ordering::Acquire);
            let job = Job {
                addr: (self.reg(e, ch, ADDR) as u64) | ((self.reg(e, ch, ADDR_MSB) as u64) << 32),
                len: self.reg(e, ch, LENGTH) as usize,
                posted: self.epoch + Duration::from_nanos(ns),
            };
            if ch == 0 {
                st.engines[e].mm2s.push_back(job);
            } else {
                st.engines[e].s2mm.push_back(job);
            }
        }
    }

    /// Picks up TAILDESC writes, each in turn (PG021: every write of the tail
    /// pointer restarts the engine): a running channel's chain now ends at the new
    /// tail; an idle one fetches on from the descriptor after the last it
    /// processed (or CURDESC as written), even when the new tail is that same
    /// descriptor again (a one-descriptor ring re-posted).
    pub(super) fn pick_up_posts(&self, st: &mut State, e: usize) {
        for (ch, base) in CHANNELS.into_iter().enumerate() {
            let writes = self.posts[e][ch].load(Ordering::Acquire);
            if writes == st.engines[e].posts_seen[ch] {
                continue;
            }
            st.engines[e].posts_seen[ch] = writes;
            let tails: Vec<(u64, u64)> = self.tails[e][ch]
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .drain(..)
                .collect();
            if self.reg(e, ch, DMASR) & DMASR_HALTED != 0 {
                continue;
            }
            let cyclic = self.reg(e, ch, DMACR) & DMACR_CYCLIC != 0;
            for (tail, ns) in tails {
                if !cyclic {
                    let from = match (ch, st.engines[e].s2mm_chain) {
                        (1, Some((cur, _))) => cur,
                        _ => self.next_descriptor(st, e, ch),
                    };
                    // The chain from the current descriptor reaches the tail
                    // still pending (checked when it was written), so a new
                    // tail past it is checked from there: the walk covers the
                    // descriptors added since, not the whole ring per write.
                    let pending = match ch {
                        0 => st.engines[e].mm2s_tail,
                        _ => st.engines[e].s2mm_chain.map(|(_, t)| t),
                    };
                    let reached = pending.is_some_and(|t| self.chain_reaches(t, tail))
                        || self.chain_reaches(from, tail);
                    if !reached {
                        let _ = self.checker.record(
                            e,
                            base + TAILDESC,
                            tail,
                            "TAILDESC outside the descriptor chain",
                            false,
                        );
                    }
                }
                if ch == 0 {
                    st.engines[e].tail_posted = self.epoch + Duration::from_nanos(ns);
                    st.engines[e].mm2s_tail = Some(tail);
                } else {
                    let cur = match st.engines[e].s2mm_chain {
                        Some((cur, _)) => cur,
                        None => self.next_descriptor(st, e, 1),
                    };
                    st.engines[e].s2mm_chain = Some((cur, tail));
                }
            }
        }
    }

    /// Whether following NXTDESC from `from` reaches `tail` (within a bound: a
    /// chain longer than any ring dmaflow or the drivers it replays build).
    pub(super) fn chain_reaches(&self, from: u64, tail: u64) -> bool {
        let mut cur = from;
        for _ in 0..4096 {
            if cur == tail {
                return true;
            }
            if !cur.is_multiple_of(DESC_ALIGN) {
                return false;
            }
            let (Ok(lo), Ok(hi)) = (
                self.dev.read_word(cur + DESC_NXTDESC),
                self.dev.read_word(cur + DESC_NXTDESC_MSB),
            ) else {
                return false;
            };
            cur = lo as u64 | ((hi as u64) << 32);
        }
        false
    }

    /// At a direct-mode S2MM start on a non-coherent board: the data the last
    /// S2MM transfer wrote must have been invalidated by the CPU since (else it
    /// read, or will read, stale lines).
    pub(super) fn check_invalidated(
        &self,
        e: usize,
        offset: usize,
        value: u32,
    ) -> Result<(), crate::platform::Error> {
        let last = *self.last_s2mm[e]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match last.and_then(|(addr, len)| self.dev.first_uninvalidated(addr, len)) {
            Some(_) => self.checker.record(
                e,
                offset,
                value.into(),
                "S2MM started again before the CPU invalidated what the last transfer wrote",
                true,
            ),
            None => Ok(()),
        }
    }

    /// Forgets TAILDESC writes not yet picked up (a halt or reset voids them).
    pub(super) fn void_posts(&self, st: &mut State, e: usize, ch: usize) {
        let mut tails = self.tails[e][ch]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        tails.clear();
        st.engines[e].posts_seen[ch] = self.posts[e][ch].load(Ordering::Acquire);
    }

    /// Applies a DMACR write with the IP's semantics: Reset resets the engine;
    /// an interrupt enable set while its DMASR bit is latched raises the line;
    /// RS = 1 leaves Halted unless an error is latched (errors are sticky until a
    /// reset); RS = 0 stops the channel and flushes what it had pending, so a
    /// later start fetches from CURDESC as written.
    pub(super) fn control(&self, st: &mut State, e: usize, ch: usize, value: u32) {
        if value & DMACR_RESET != 0 {
            self.reset(st, e);
            return;
        }
        let before = self.reg(e, ch, DMACR);
        self.set(e, ch, DMACR, value | DMACR_RESERVED_ONE);
        // The interrupt output is each DMASR interrupt bit and its enable
        // (bits 14:12 of both registers): an enable set over a latched bit
        // raises it.
        let rising = value & !before & self.reg(e, ch, DMASR) & DMASR_IRQ_MASK;
        if rising != 0 {
            self.dev.raise(super::irq_line(e, ch));
        }
        if value & DMACR_RS != 0 {
            // Halted clears; Idle stays 0 until a transfer completes (direct mode)
            // or the engine has processed a tail (scatter-gather).
            self.update_sr(e, ch, |sr| {
                if sr & DMASR_HALTED != 0 && sr & DMASR_ERR_MASK == 0 {
                    sr & !(DMASR_HALTED | DMASR_IDLE)
                } else {
                    sr
                }
            });
        } else if ch == 1 && self.sg && {
            let g = &st.engines[e];
            g.s2mm_chain.is_some() && g.stream.is_empty() && g.s2mm_offset == 0
        } {
            // S2MM with descriptors fetched and no stream data to finish them:
            // on the IP Halted does not assert (Linux's xilinx_dma reports
            // "Cannot stop channel" and resets). The channel stops taking data
            // but keeps reading as not halted until a reset.
            self.stop_channel(st, e, ch);
            self.update_sr(e, ch, |sr| sr & !DMASR_HALTED);
        } else {
            self.stop_channel(st, e, ch);
        }
    }

    /// Halts channel `ch` of engine `e`: queued transfers, descriptor chains and a
    /// completion not yet signalled are dropped; doorbells not yet picked up are
    /// void.
    pub(super) fn stop_channel(&self, st: &mut State, e: usize, ch: usize) {
        self.void_posts(st, e, ch);
        if ch == 1 {
            // What a stopped channel wrote may be discarded unread.
            *self.last_s2mm[e]
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = None;
        }
        self.in_flight[e][ch].store(false, Ordering::Release);
        let g = &mut st.engines[e];
        g.delay_due[ch] = None;
        if ch == 0 {
            g.mm2s.clear();
            g.mm2s_done_at = None;
            g.mm2s_tail = None;
            g.mm2s_partial.clear();
            g.mm2s_descs.clear();
            g.mm2s_completions.clear();
        } else {
            g.s2mm.clear();
            g.s2mm_chain = None;
            g.front_written = false;
            // A packet half written when the channel stops is flushed.
            if std::mem::take(&mut g.s2mm_offset) > 0 {
                g.stream.pop_front();
            }
        }
        g.next_desc[ch] = None;
        g.coalesced[ch] = 0;
        self.update_sr(e, ch, |sr| (sr | DMASR_HALTED) & !DMASR_IDLE);
    }

    /// Applies the DMACR writes that arrived while a transfer was in progress.
    pub(super) fn end_beat(&self, st: &mut State) {
        st.in_beat = false;
        for (e, ch, value) in std::mem::take(&mut st.deferred) {
            self.control(st, e, ch, value);
        }
    }
}

impl BusTarget for Shared {
    fn write(
        &self,
        window: usize,
        offset: usize,
        value: u32,
    ) -> Result<(), crate::platform::Error> {
        let e = window;
        if e >= self.dev.windows() {
            return Ok(());
        }
        if e >= self.posts.len() {
            // The core's own register window, after the engines'.
            if e == self.posts.len() {
                let mut st = lock(&self.state);
                if offset < st.processor.control_bytes() {
                    let v = st.processor.control_write(offset, value);
                    self.dev.set_reg(e, offset, v);
                }
            }
            return Ok(());
        }
        let (ch, r) = if (S2MM..S2MM + 0x30).contains(&offset) {
            (1, offset - S2MM)
        } else if offset < 0x30 {
            (0, offset)
        } else {
            self.dev.set_reg(e, offset, value);
            return Ok(());
        };
        // Address and length-MSB registers only hold a value until a LENGTH or
        // TAILDESC write uses it (under the lock, which orders it after this store).
        if matches!(r, ADDR | ADDR_MSB | TAILDESC_MSB) {
            self.set(e, ch, r, value);
            return Ok(());
        }
        // Write-1-to-clear interrupt bits never wait for the device thread.
        if r == DMASR && e < self.posts.len() {
            self.update_sr(e, ch, |sr| sr & !(value & DMASR_IRQ_MASK));
            return Ok(());
        }
        // A direct-mode LENGTH write starts a transfer: the device thread picks it
        // up (the channel takes one transfer at a time), without the model's lock.
        if r == LENGTH && !self.sg && e < self.posts.len() {
            // The register is as wide as the IP was built with (c_sg_length_width):
            // higher bits are lost, as on the IP.
            let value = value & self.length_mask.load(Ordering::Relaxed);
            if ch == 1 && value != 0 {
                self.check_invalidated(e, offset, value)?;
            }
            if value != 0 && self.in_flight[e][ch].load(Ordering::Acquire) {
                self.checker.record(
                    e,
                    offset,
                    value.into(),
                    "LENGTH written while the channel's transfer is in flight",
                    true,
                )?;
            }
            self.set(e, ch, LENGTH, value);
            if value != 0 && self.reg(e, ch, DMASR) & DMASR_HALTED == 0 {
                self.in_flight[e][ch].store(true, Ordering::Release);
                self.update_sr(e, ch, |sr| sr & !DMASR_IDLE);
                let ns = self.epoch.elapsed().as_nanos() as u64;
                self.post_time[e][ch].store(ns, Ordering::Release);
                self.posts[e][ch].fetch_add(1, Ordering::Release);
                self.post();
                if value as usize <= self.prompt_bytes.load(Ordering::Relaxed) {
                    self.run_now();
                }
            }
            return Ok(());
        }
        // TAILDESC is picked up by the device thread (an SG channel that is not
        // halted resumes), so the driver's write never waits for the model's lock.
        if r == TAILDESC && self.sg && e < self.posts.len() {
            if !value.is_multiple_of(DESC_ALIGN as u32) {
                self.checker.record(
                    e,
                    offset,
                    value.into(),
                    "TAILDESC not 64-byte aligned (bits [5:0] are ignored)",
                    // Reserved bits: the IP accepts the write, so even the
                    // strict checker only records it.
                    false,
                )?;
            }
            // Descriptor pointers are 64-byte aligned: bits [5:0] read as zero.
            let value = value & !(DESC_ALIGN as u32 - 1);
            self.set(e, ch, r, value);
            let tail = value as u64 | ((self.reg(e, ch, TAILDESC_MSB) as u64) << 32);
            let ns = self.epoch.elapsed().as_nanos() as u64;
            if self.reg(e, ch, DMASR) & DMASR_HALTED == 0 {
                // Idle clears at once, not when the device thread gets round to it.
                self.update_sr(e, ch, |sr| sr & !DMASR_IDLE);
                self.tails[e][ch]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_back((tail, ns));
            }
            self.post_time[e][ch].store(ns, Ordering::Release);
            self.posts[e][ch].fetch_add(1, Ordering::Release);
            self.post();
            return Ok(());
        }
        let mut st = lock(&self.state);
        if e >= st.engines.len() {
            // A window with no engine behind it: plain memory.
            self.set(e, ch, r, value);
            return Ok(());
        }
        match r {
            DMACR
                if st.in_beat
                    && (value & DMACR_RS == 0
                        || value & DMACR_RESET != 0
                        || st.deferred.iter().any(|d| (d.0, d.1) == (e, ch))) =>
            {
                // The engine is in the middle of a transfer: PG021 halts (and
                // resets) only once the transfer in progress ends (a start waits
                // behind a halt asked for earlier). The register
                // shows what was written (Reset reads 1 until it is done); Halted
                // waits for the device thread.
                self.set(e, ch, DMACR, value | DMACR_RESERVED_ONE);
                st.deferred.push((e, ch, value));
            }
            DMACR => self.control(&mut st, e, ch, value),
            CURDESC | CURDESC_MSB => {
                // Only while halted, as PG021 requires; the next fetch starts there.
                // Bits [5:0] of CURDESC read as zero (64-byte aligned descriptors).
                let sr = self.reg(e, ch, DMASR);
                if sr & DMASR_HALTED != 0 {
                    let value = if r == CURDESC {
                        value & !(DESC_ALIGN as u32 - 1)
                    } else {
                        value
                    };
                    self.set(e, ch, r, value);
                    st.engines[e].next_desc[ch] = None;
                } else if sr & DMASR_IDLE == 0 {
                    // Ignored by the IP; a driver that does it expects otherwise.
                    drop(st);
                    return self.checker.record(
                        e,
                        CHANNELS[ch] + r,
                        value.into(),
                        "CURDESC written while the channel is running and busy (ignored)",
                        true,
                    );
                }
            }
            _ => self.set(e, ch, r, value),
        }
        Ok(())
    }
}
