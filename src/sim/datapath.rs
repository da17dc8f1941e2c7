//! The data movement of the emulated fabric: descriptor chains, direct-mode
//! jobs, the stream processor, the clocked links, completions and interrupts.

use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::axi::regs::*;

use super::AppWords;
use super::state::*;
use super::timing::S2MM_WRITE_CYCLES;

impl Shared {
    /// Stops channel `ch` with `error` at descriptor `cur`, which CURDESC then
    /// holds (PG021: on an error CURDESC points at the failing descriptor).
    pub(super) fn fail_at(&self, st: &mut State, e: usize, ch: usize, cur: u64, error: u32) {
        let what = if !cur.is_multiple_of(DESC_ALIGN) {
            Some("a descriptor pointer not 64-byte aligned")
        } else if error & (DMASR_DMA_DEC_ERR | DMASR_SG_DEC_ERR) != 0 {
            Some("a buffer or descriptor outside DMA memory (DECERR)")
        } else {
            None
        };
        if let Some(what) = what {
            let _ = self
                .checker
                .record(e, CHANNELS[ch] + CURDESC, cur, what, false);
        }
        self.set(e, ch, CURDESC, cur as u32);
        self.set(e, ch, CURDESC_MSB, (cur >> 32) as u32);
        self.complete(st, e, ch, error);
    }

    /// Completes a transfer: status bits, interrupt.
    pub(super) fn complete(&self, st: &mut State, e: usize, ch: usize, error: u32) {
        // Direct mode: Idle sets when the transfer completes. Scatter-gather: only
        // once the engine has processed TAILDESC (set where the chain ends).
        let mut set = if self.sg { 0 } else { DMASR_IDLE };
        self.in_flight[e][ch].store(false, Ordering::Release);
        let cr = self.reg(e, ch, DMACR);
        if let Some((fch, bits)) = st.faults.force_error
            && fch == ch
        {
            st.faults.force_error = None;
            return self.complete(st, e, ch, error | bits);
        }
        let irq = if error != 0 {
            // The channel halts (Idle reads 0 while halted) and stays halted with
            // the error latched until a reset.
            set = error | DMASR_ERR_IRQ;
            self.set(e, ch, DMACR, cr & !DMACR_RS);
            self.stop_channel(st, e, ch);
            cr & DMACR_ERR_IRQ_EN != 0
        } else {
            set |= DMASR_IOC_IRQ;
            cr & DMACR_IOC_IRQ_EN != 0
        };
        // The status bits and the interrupt appear together: a driver that sees
        // the bits and acknowledges them cannot do so before the interrupt is
        // raised (it would re-enable the line and then take a stale interrupt).
        let _held = self.sr_lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.set(e, ch, DMASR, self.reg(e, ch, DMASR) | set);
        if irq {
            if st.faults.drop_irq {
                st.faults.drop_irq = false;
            } else {
                self.dev.raise(super::irq_line(e, ch));
            }
        }
    }

    /// Whether the device has work it can do now or later.
    pub(super) fn busy(&self, st: &State) -> bool {
        // A store-and-compute processor with every input in fires once the last
        // byte has arrived (whatever the mode: SG chains leave no job behind).
        let firing = !st.processor.cut_through() && st.engines.iter().all(|g| g.input.is_some());
        firing
            || st
                .engines
                .iter()
                .any(|g| g.delay_due.iter().any(Option::is_some))
            || self.posts_pending(st)
            || st.engines.iter().any(|g| {
                (g.input.is_none() && !g.mm2s.is_empty() && g.stream_bytes() < MAX_STREAM_PACKET)
                    || (g.input.is_none() && !g.stream_full() && g.mm2s_tail.is_some())
                    || g.mm2s_done_at.is_some()
                    || !g.mm2s_completions.is_empty()
                    || ((!g.s2mm.is_empty() || g.s2mm_chain.is_some()) && !g.stream.is_empty())
            })
    }

    /// A packet finished on `ch` in SG mode: IOC once IRQThreshold packets have.
    pub(super) fn packet_done(&self, st: &mut State, e: usize, ch: usize) {
        let cr = self.reg(e, ch, DMACR);
        let threshold = ((cr & DMACR_IRQ_THRESHOLD_MASK) >> DMACR_IRQ_THRESHOLD_SHIFT).max(1);
        let delay = cr >> DMACR_IRQ_DELAY_SHIFT;
        let g = &mut st.engines[e];
        g.coalesced[ch] += 1;
        if g.coalesced[ch] >= threshold {
            g.coalesced[ch] = 0;
            g.delay_due[ch] = None;
            self.coalescing_status(e, ch, threshold, 0);
            self.complete(st, e, ch, 0);
        } else {
            // The delay timer restarts with every packet; when it runs out with
            // packets still below the threshold, Dly_Irq says so.
            g.delay_due[ch] = (delay > 0).then(|| Instant::now() + DELAY_TICK * delay);
            let left = threshold - g.coalesced[ch];
            self.coalescing_status(e, ch, left, if delay > 0 { delay } else { 0 });
        }
    }

    /// DMASR[23:16] (IRQThresholdSts: packets left before IOC) and [31:24]
    /// (IRQDelaySts: the delay timer's setting while it runs, else 0).
    pub(super) fn coalescing_status(&self, e: usize, ch: usize, left: u32, delay: u32) {
        self.update_sr(e, ch, |sr| {
            (sr & 0xFFFF) | ((left & 0xFF) << 16) | ((delay & 0xFF) << DMACR_IRQ_DELAY_SHIFT)
        });
    }

    /// Fires the delay timers that ran out: Dly_Irq, with its interrupt if
    /// enabled; returns when the next one is due.
    pub(super) fn run_delay_timers(
        &self,
        st: &mut State,
        e: usize,
        now: Instant,
    ) -> Option<Instant> {
        let mut next = None;
        for ch in 0..2 {
            let Some(due) = st.engines[e].delay_due[ch] else {
                continue;
            };
            if due > now {
                next = Some(next.map_or(due, |n: Instant| n.min(due)));
                continue;
            }
            st.engines[e].delay_due[ch] = None;
            st.engines[e].coalesced[ch] = 0;
            let cr = self.reg(e, ch, DMACR);
            let threshold = ((cr & DMACR_IRQ_THRESHOLD_MASK) >> DMACR_IRQ_THRESHOLD_SHIFT).max(1);
            self.coalescing_status(e, ch, threshold, 0);
            let _held = self.sr_lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.set(e, ch, DMASR, self.reg(e, ch, DMASR) | DMASR_DLY_IRQ);
            if cr & DMACR_DLY_IRQ_EN != 0 {
                self.dev.raise(super::irq_line(e, ch));
            }
        }
        next
    }

    /// Reads a descriptor: (next, buffer address, control, status).
    pub(super) fn descriptor(&self, at: u64) -> Result<(u64, u64, u32, u32), ()> {
        // One burst for the fields the engine fetches (NXTDESC..STATUS).
        let mut raw = [0u8; (DESC_STATUS + 4) as usize];
        self.dev.read_ddr(at, &mut raw).map_err(|_| ())?;
        let w = |o: u64| {
            let o = o as usize;
            u32::from_le_bytes([raw[o], raw[o + 1], raw[o + 2], raw[o + 3]])
        };
        let next = w(DESC_NXTDESC) as u64 | ((w(DESC_NXTDESC_MSB) as u64) << 32);
        let addr = w(DESC_BUFFER_ADDRESS) as u64 | ((w(DESC_BUFFER_ADDRESS_MSB) as u64) << 32);
        Ok((next, addr, w(DESC_CONTROL), w(DESC_STATUS)))
    }

    /// Where channel `ch` of engine `e` fetches its next descriptor.
    pub(super) fn next_descriptor(&self, st: &State, e: usize, ch: usize) -> u64 {
        st.engines[e].next_desc[ch].unwrap_or_else(|| {
            self.reg(e, ch, CURDESC) as u64 | ((self.reg(e, ch, CURDESC_MSB) as u64) << 32)
        })
    }

    /// An input packet (whose last byte arrives at `arrived`) for the processor.
    pub(super) fn deliver(&self, st: &mut State, e: usize, packet: Vec<u8>, arrived: Instant) {
        st.engines[e].input = Some((packet, arrived));
        if st.processor.cut_through() {
            self.fire(st);
        }
    }

    /// For a processor that computes on whole packets: fires once every input
    /// has fully arrived; otherwise says when that will be.
    pub(super) fn fire_when_arrived(&self, st: &mut State, now: Instant) -> Option<Instant> {
        if st.processor.cut_through() || st.engines.iter().any(|g| g.input.is_none()) {
            return None;
        }
        let due = st
            .engines
            .iter()
            .filter_map(|g| g.input.as_ref().map(|i| i.1))
            .max()?;
        if due > now {
            return Some(due);
        }
        self.fire(st);
        None
    }

    /// Runs the processor once every input has a packet.
    pub(super) fn fire(&self, st: &mut State) {
        if st.engines.iter().any(|g| g.input.is_none()) {
            return;
        }
        let mut inputs = std::mem::take(&mut st.fire_inputs);
        let mut outputs = std::mem::take(&mut st.fire_outputs);
        inputs.clear();
        outputs.clear();
        for e in 0..st.engines.len() {
            if let Some(i) = st.engines[e].input.take() {
                inputs.push(i);
            }
            let b = st.buffer();
            outputs.push(b);
        }
        let arrived = inputs
            .iter()
            .map(|(_, t)| *t)
            .max()
            .unwrap_or_else(Instant::now);
        let began = Instant::now();
        match inputs.as_slice() {
            // The common single-stream case without building a list of slices.
            [(p, _)] => st.processor.process(&[p.as_slice()], &mut outputs),
            many => {
                let refs: Vec<&[u8]> = many.iter().map(|(p, _)| p.as_slice()).collect();
                st.processor.process(&refs, &mut outputs);
            }
        }
        let cut_through = st.processor.cut_through();
        // A core that computes on whole packets starts once the last input has
        // arrived and takes as long as its computation took here. Timed from
        // the arrival, not from when this thread got to it: a device thread
        // that comes late (woken from sleep, descheduled) is the emulator's
        // delay, not the device's, and must not hold back every later packet.
        let host = began.elapsed();
        self.own_work.computed(host);
        let modelled = st.processor.compute_time();
        if let Some(m) = modelled {
            let over = host.saturating_sub(m).as_nanos().min(u64::MAX as u128) as u64;
            self.compute_overrun_ns
                .fetch_add(over, std::sync::atomic::Ordering::Relaxed);
        }
        let computed = if cut_through {
            arrived
        } else {
            arrived + modelled.unwrap_or(host)
        };
        for (p, _) in inputs.drain(..) {
            st.recycle(p);
        }
        st.fire_inputs = inputs;
        for (e, out) in outputs.drain(..).enumerate() {
            if out.is_empty() {
                // A stream cannot carry an empty packet: no TLAST, nothing for
                // S2MM.
                st.recycle(out);
                continue;
            }
            let app = st.processor.app_words(e);
            let g = &mut st.engines[e];
            let d = self.clock.duration(out.len());
            let ready = if cut_through {
                // The output streams out while the input streams in, but no
                // faster than its own link allows.
                arrived.max(g.link_free[1] + d)
            } else {
                // The output streams out once computed.
                computed.max(g.link_free[1]) + d
            };
            g.link_free[1] = ready;
            // The last beat reaches memory after the S2MM write latency; the next
            // packet's beats follow on the link meanwhile.
            let landed = ready + self.clock.cycles(S2MM_WRITE_CYCLES);
            g.stream.push_back((out, landed, app));
        }
        st.fire_outputs = outputs;
    }

    /// When a packet of `len` bytes, handed to engine `e`'s MM2S at `posted`, has
    /// arrived: the link takes it once free. Times are those of the register
    /// writes, so the link runs on the driver's schedule even when the device
    /// thread comes late.
    pub(super) fn mm2s_arrival(
        &self,
        st: &mut State,
        e: usize,
        posted: Instant,
        len: usize,
    ) -> Instant {
        let g = &mut st.engines[e];
        // An idle channel first fetches its descriptor; a busy one has prefetched.
        let start = posted + self.clock.mm2s_start(self.sg);
        let t = start.max(g.link_free[0]) + self.clock.duration(len);
        g.link_free[0] = t;
        t
    }

    /// Runs engine `e`'s MM2S descriptor chain up to `tail`, packet by packet, while
    /// the processor takes input.
    ///
    /// A packet whose TXEOF has not come yet when the chain reaches its tail
    /// waits for more descriptors. In cyclic mode (DMACR.Cyclic BD Enable) the
    /// ring is followed for ever: Cmplt and TAILDESC are ignored.
    pub(super) fn run_mm2s_chain(&self, st: &mut State, e: usize, tail: u64) {
        let mut cur = self.next_descriptor(st, e, 0);
        let mut packet = std::mem::take(&mut st.engines[e].mm2s_partial);
        let now = st.engines[e].tail_posted.min(Instant::now());
        let cyclic = self.reg(e, 0, DMACR) & DMACR_CYCLIC != 0;
        let mut fetched = 0usize;
        loop {
            fetched += 1;
            if (cyclic && fetched > CYCLIC_BURST)
                || (packet.is_empty()
                    && (st.engines[e].input.is_some() || st.engines[e].stream_full()))
            {
                // Back-pressure: the processor has not taken the last packet, or
                // its output is not being drained (or a cyclic ring has run a
                // burst: it goes on at the next turn of the device loop, with
                // the packet read so far).
                st.engines[e].mm2s_tail = Some(tail);
                st.engines[e].mm2s_partial = packet;
                return;
            }
            if !cur.is_multiple_of(DESC_ALIGN) {
                return self.fail_at(st, e, 0, cur, DMASR_SG_INT_ERR);
            }
            let Ok((next, addr, control, status)) = self.descriptor(cur) else {
                return self.fail_at(st, e, 0, cur, DMASR_SG_DEC_ERR);
            };
            if status & DESC_STS_CMPLT != 0 && !cyclic {
                // A descriptor still marked complete was not handed back.
                return self.fail_at(st, e, 0, cur, DMASR_SG_INT_ERR);
            }
            let len =
                (control & DESC_LENGTH_MASK & self.length_mask.load(Ordering::Relaxed)) as usize;
            if len == 0 {
                return self.fail_at(st, e, 0, cur, DMASR_DMA_INT_ERR);
            }
            let start = packet.len();
            if start + len > MAX_STREAM_PACKET {
                return self.overlong_packet(st, e, packet);
            }
            packet.resize(start + len, 0);
            let read = self
                .own_work
                .memory(|| self.dev.read_ddr(addr, &mut packet[start..]));
            if read.is_err() {
                return self.fail_at(st, e, 0, cur, DMASR_DMA_DEC_ERR);
            }
            if let Some((0, bits)) = st.faults.descriptor_error {
                // The injected bus error on the read: the descriptor reports
                // it, nothing goes out on the stream, the channel halts.
                st.faults.descriptor_error = None;
                let status = len as u32 | DESC_STS_CMPLT | bits;
                let _ = self.dev.write_word(cur + DESC_STATUS, status);
                return self.fail_at(st, e, 0, cur, descriptor_to_dmasr(bits));
            }
            // Cmplt is written once the stream has taken the packet's data.
            st.engines[e]
                .mm2s_descs
                .push((cur, len as u32 | DESC_STS_CMPLT));
            self.set(e, 0, CURDESC, cur as u32);
            self.set(e, 0, CURDESC_MSB, (cur >> 32) as u32);
            st.engines[e].next_desc[0] = Some(next);
            let at_tail = cur == tail && !cyclic;
            if control & DESC_CTRL_TXEOF != 0 {
                let arrived = self.mm2s_arrival(st, e, now, packet.len());
                let full = std::mem::replace(&mut packet, st.buffer());
                self.deliver(st, e, full, arrived);
                let g = &mut st.engines[e];
                let n = g.mm2s_descs.len();
                for (i, (desc, status)) in g.mm2s_descs.drain(..).enumerate() {
                    g.mm2s_completions.push_back(Mm2sCompletion {
                        due: arrived,
                        desc,
                        status,
                        last: i + 1 == n,
                        at_tail: at_tail && i + 1 == n,
                    });
                }
            } else if at_tail {
                self.update_sr(e, 0, |sr| sr | DMASR_IDLE);
            }
            if at_tail {
                // A packet without its TXEOF yet goes on with the next chain.
                st.engines[e].mm2s_partial = packet;
                return;
            }
            cur = next;
        }
    }

    /// An MM2S packet grew past [`MAX_STREAM_PACKET`] without TXEOF: more
    /// than the emulated stream carries in one packet. A running S2MM
    /// reports it as a packet longer than it can take (DMAIntErr, halted
    /// with Err_Irq); MM2S, its stream no longer taken, stalls as TREADY
    /// held low leaves it, until it is stopped or reset. The packet's bytes
    /// are dropped.
    fn overlong_packet(&self, st: &mut State, e: usize, packet: Vec<u8>) {
        st.recycle(packet);
        let g = &mut st.engines[e];
        g.mm2s_tail = None;
        g.mm2s_descs.clear();
        if self.reg(e, 1, DMACR) & DMACR_RS != 0 && self.reg(e, 1, DMASR) & DMASR_HALTED == 0 {
            if self.sg {
                st.engines[e].s2mm_chain = None;
            }
            self.complete(st, e, 1, DMASR_DMA_INT_ERR);
        }
    }

    /// Reports the MM2S packets whose last byte the stream has taken by `now`:
    /// their descriptors' Cmplt, IOC (per IRQThreshold) and, at the tail, Idle.
    /// Returns when the next one is due.
    pub(super) fn complete_mm2s(&self, st: &mut State, e: usize, now: Instant) -> Option<Instant> {
        while let Some(&c) = st.engines[e].mm2s_completions.front() {
            if c.due > now {
                return Some(c.due);
            }
            st.engines[e].mm2s_completions.pop_front();
            let _ = self.dev.write_word(c.desc + DESC_STATUS, c.status);
            if c.at_tail && st.engines[e].mm2s_completions.is_empty() {
                self.update_sr(e, 0, |sr| sr | DMASR_IDLE);
            }
            if c.last {
                self.packet_done(st, e, 0);
            }
        }
        None
    }

    /// Writes (the rest of) one packet from engine `e`'s stream into its S2MM
    /// descriptors. Returns `false` when the descriptors ran out first: the
    /// channel goes idle at the tail with the rest of the packet waiting, and
    /// resumes when TAILDESC moves (PG021; no error). `true` when the packet is
    /// done with (written, or dropped by an error).
    pub(super) fn run_s2mm_packet(
        &self,
        st: &mut State,
        e: usize,
        packet: &[u8],
        app: Option<AppWords>,
    ) -> bool {
        let Some((mut cur, tail)) = st.engines[e].s2mm_chain else {
            return true;
        };
        let mut off = std::mem::take(&mut st.engines[e].s2mm_offset);
        loop {
            let fetched = self.descriptor(cur);
            let Ok((next, addr, control, status)) = fetched else {
                st.engines[e].s2mm_chain = None;
                self.fail_at(st, e, 1, cur, DMASR_SG_DEC_ERR);
                return true;
            };
            let cyclic = self.reg(e, 1, DMACR) & DMACR_CYCLIC != 0;
            if status & DESC_STS_CMPLT != 0 && !cyclic {
                st.engines[e].s2mm_chain = None;
                self.fail_at(st, e, 1, cur, DMASR_SG_INT_ERR);
                return true;
            }
            let cap =
                (control & DESC_LENGTH_MASK & self.length_mask.load(Ordering::Relaxed)) as usize;
            if cap == 0 {
                st.engines[e].s2mm_chain = None;
                self.fail_at(st, e, 1, cur, DMASR_DMA_INT_ERR);
                return true;
            }
            let n = cap.min(packet.len() - off);
            let wrote = self
                .own_work
                .memory(|| self.dev.write_ddr(addr, &packet[off..off + n]));
            if wrote.is_err() {
                st.engines[e].s2mm_chain = None;
                self.fail_at(st, e, 1, cur, DMASR_DMA_DEC_ERR);
                return true;
            }
            let mut status = n as u32 | DESC_STS_CMPLT;
            if off == 0 {
                status |= DESC_STS_RXSOF;
            }
            off += n;
            if off == packet.len() {
                status |= DESC_STS_RXEOF;
                // The core's status stream lands in the last descriptor's APP
                // words, before its status.
                for (i, w) in app.iter().flatten().enumerate() {
                    let _ = self.dev.write_word(cur + DESC_APP0 + 4 * i as u64, *w);
                }
            }
            if let Some((1, bits)) = st.faults.descriptor_error {
                st.faults.descriptor_error = None;
                let _ = self.dev.write_word(cur + DESC_STATUS, status | bits);
                st.engines[e].s2mm_chain = None;
                self.complete(st, e, 1, descriptor_to_dmasr(bits));
                return true;
            }
            let _ = self.dev.write_word(cur + DESC_STATUS, status);
            self.set(e, 1, CURDESC, cur as u32);
            self.set(e, 1, CURDESC_MSB, (cur >> 32) as u32);
            st.engines[e].next_desc[1] = Some(next);
            let at_tail = cur == tail && !cyclic;
            if at_tail {
                st.engines[e].s2mm_chain = None;
                self.update_sr(e, 1, |sr| sr | DMASR_IDLE);
            }
            if off == packet.len() {
                if !at_tail {
                    st.engines[e].s2mm_chain = Some((next, tail));
                }
                self.packet_done(st, e, 1);
                return true;
            }
            if at_tail {
                // Out of descriptors mid-packet: wait for more.
                st.engines[e].s2mm_offset = off;
                return false;
            }
            cur = next;
        }
    }

    /// Runs what can run now; returns how long until the next thing can.
    pub(super) fn step(&self, st: &mut State) -> Option<Duration> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut later = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        for e in 0..st.engines.len() {
            if let Some(due) = self.run_delay_timers(st, e, now) {
                later(due);
            }
            if self.sg {
                self.pick_up_posts(st, e);
            } else {
                self.pick_up_jobs(st, e);
            }
            if st.engines[e].mm2s_done_at.is_none()
                && st.engines[e].input.is_none()
                && st.engines[e].stream_bytes() < MAX_STREAM_PACKET
                && let Some(job) = st.engines[e].mm2s.pop_front()
            {
                let mut buf = st.buffer();
                buf.resize(job.len, 0);
                match self
                    .own_work
                    .memory(|| self.dev.read_ddr(job.addr, &mut buf))
                {
                    Ok(()) => {
                        // The last byte leaves memory after len / rate.
                        let arrived = self.mm2s_arrival(st, e, job.posted, job.len);
                        st.engines[e].mm2s_done_at = Some(arrived);
                        self.deliver(st, e, buf, arrived);
                    }
                    Err(_) => {
                        st.recycle(buf);
                        self.complete(st, e, 0, DMASR_DMA_DEC_ERR);
                    }
                }
            }
            if st.engines[e].input.is_none()
                && !st.engines[e].stream_full()
                && let Some(tail) = st.engines[e].mm2s_tail.take()
            {
                self.run_mm2s_chain(st, e, tail);
            }
            if let Some(due) = self.complete_mm2s(st, e, now.max(Instant::now())) {
                later(due);
            }
            if let Some(t) = st.engines[e].mm2s_done_at {
                if t <= now {
                    st.engines[e].mm2s_done_at = None;
                    self.complete(st, e, 0, 0);
                } else {
                    later(t);
                }
            }
        }
        if let Some(due) = self.fire_when_arrived(st, now) {
            later(due);
        }
        for e in 0..st.engines.len() {
            // Every packet whose last byte has arrived goes to memory now; one due
            // within a short while is waited for here rather than by another turn
            // of the device loop.
            let mut now = now;
            while let Some(&(_, ready, _)) = st.engines[e].stream.front() {
                let g = &mut st.engines[e];
                if ready > now
                    && !g.front_written
                    && g.s2mm_chain.is_none()
                    && let (Some(job), Some((packet, _, _))) = (g.s2mm.front(), g.stream.front())
                    && packet.len() <= job.len
                    && self
                        .own_work
                        .memory(|| self.dev.write_ddr(job.addr, packet))
                        .is_ok()
                {
                    // The data lands while it streams; completion waits for the
                    // last byte.
                    g.front_written = true;
                }
                let receiving =
                    st.engines[e].s2mm_chain.is_some() || !st.engines[e].s2mm.is_empty();
                if ready > now && receiving && ready - now < SHORT_WAIT {
                    spin_to(ready);
                    now = Instant::now();
                }
                if ready > now {
                    if receiving {
                        later(ready);
                    }
                    break;
                }
                if st.engines[e].s2mm_chain.is_some() {
                    let Some((packet, ready, app)) = st.engines[e].stream.pop_front() else {
                        break;
                    };
                    if self.run_s2mm_packet(st, e, &packet, app) {
                        st.recycle(packet);
                    } else {
                        st.engines[e].stream.push_front((packet, ready, app));
                    }
                    continue;
                }
                let Some(job) = st.engines[e].s2mm.pop_front() else {
                    break;
                };
                let Some((packet, _, _)) = st.engines[e].stream.pop_front() else {
                    break;
                };
                let written = std::mem::take(&mut st.engines[e].front_written);
                if packet.len() > job.len {
                    // The packet does not fit the buffer (no TLAST within LENGTH).
                    self.complete(st, e, 1, DMASR_DMA_INT_ERR);
                } else {
                    let stored = if written {
                        Ok(())
                    } else {
                        self.own_work
                            .memory(|| self.dev.write_ddr(job.addr, &packet))
                    };
                    match stored {
                        Ok(()) => {
                            *self.last_s2mm[e]
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner) =
                                Some((job.addr, packet.len()));
                            self.set(e, 1, LENGTH, packet.len() as u32);
                            self.complete(st, e, 1, 0);
                        }
                        Err(_) => self.complete(st, e, 1, DMASR_DMA_DEC_ERR),
                    }
                }
                st.recycle(packet);
            }
        }
        next.map(|t| t.saturating_duration_since(now))
    }
}

/// Waits up to this long for a packet inside one device step.
const SHORT_WAIT: Duration = Duration::from_micros(2);

/// Spins until `t`.
fn spin_to(t: Instant) {
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

/// The DMASR error bits (DMAIntErr, DMASlvErr, DMADecErr, bits 4-6) that
/// go with a descriptor's status error bits (bits 28-30).
fn descriptor_to_dmasr(bits: u32) -> u32 {
    (bits & DESC_STS_ERR_MASK) >> 24
}
