//! The emulated fabric: an AXI DMA engine with the PG021 register behaviour and an
//! AXI-Stream processor between its two channels, in a device thread of its own.
//! It is reached only as a real device is: through the sim board's register window,
//! DMA memory and interrupt lines ([`crate::platform::sim`]).
//!
//! Register writes are applied at once, in the writer's thread, with the IP's
//! semantics (self-clearing reset, write-1-to-clear interrupt bits, a LENGTH write
//! that starts a transfer); the data moves in the device thread, which spins
//! briefly and then sleeps when idle so that it does not starve a 2-core machine.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::axi::regs::*;
use crate::platform::sim::{BusTarget, DeviceView, SimBoard};

/// The stream rate limit of the fabric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    /// No limit: measures pure software overhead.
    Unlimited,
    /// `mhz` million cycles per second, `bytes_per_cycle` bytes per cycle.
    Rate {
        /// Clock frequency in MHz.
        mhz: f64,
        /// Stream width in bytes.
        bytes_per_cycle: f64,
    },
}

impl Clock {
    /// Time to stream `bytes`.
    pub fn duration(&self, bytes: usize) -> Duration {
        match *self {
            Clock::Unlimited => Duration::ZERO,
            Clock::Rate {
                mhz,
                bytes_per_cycle,
            } => Duration::from_secs_f64(bytes as f64 / (mhz * 1e6 * bytes_per_cycle)),
        }
    }
}

/// An AXI-Stream processor: a packet (bytes ended by TLAST) in, a packet out.
pub trait StreamProcessor: Send {
    /// Processes one packet into `output` (empty on entry).
    fn process(&mut self, input: &[u8], output: &mut Vec<u8>);
}

/// Returns every packet unchanged.
#[derive(Debug, Default)]
pub struct Loopback;

impl StreamProcessor for Loopback {
    fn process(&mut self, input: &[u8], output: &mut Vec<u8>) {
        output.extend_from_slice(input);
    }
}

/// Faults to inject, for tests.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Set these DMASR error bits on the next completion of this channel (0 = MM2S).
    pub force_error: Option<(usize, u32)>,
    /// Complete but raise no interrupt, once.
    pub drop_irq: bool,
    /// Hold every transfer this long before completing.
    pub stall: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    addr: u64,
    len: usize,
}

struct State {
    mm2s: VecDeque<Job>,
    s2mm: VecDeque<Job>,
    /// Packets produced by the processor, waiting for S2MM, with the time their
    /// last byte leaves the stream.
    stream: VecDeque<(Vec<u8>, Instant)>,
    /// When the MM2S transfer in flight finishes.
    mm2s_done_at: Option<Instant>,
    /// Scatter-gather mode (DMASR.SGIncld).
    sg: bool,
    /// MM2S descriptor chain to run, up to this tail descriptor.
    mm2s_tail: Option<u64>,
    /// S2MM descriptors available: (current, tail).
    s2mm_chain: Option<(u64, u64)>,
    /// Completed packets not yet signalled, per channel (IRQThreshold coalescing).
    coalesced: [u32; 2],
    /// Buffers reused for what MM2S reads and for packets.
    read_buf: Vec<u8>,
    spare: Vec<Vec<u8>>,
    processor: Box<dyn StreamProcessor>,
    faults: Faults,
    stop: bool,
}

struct Shared {
    dev: DeviceView,
    state: Mutex<State>,
    work: Condvar,
    /// Bumped on every job posted, so the idle device can watch for work without
    /// taking the lock.
    posted: AtomicU64,
    clock: Clock,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

const CHANNELS: [usize; 2] = [MM2S, S2MM];

impl Shared {
    fn reg(&self, ch: usize, r: usize) -> u32 {
        self.dev.reg(0, CHANNELS[ch] + r)
    }
    fn set(&self, ch: usize, r: usize, v: u32) {
        self.dev.set_reg(0, CHANNELS[ch] + r, v);
    }

    fn reset(&self, st: &mut State) {
        for ch in 0..2 {
            for r in [
                DMACR,
                DMASR,
                CURDESC,
                CURDESC_MSB,
                TAILDESC,
                TAILDESC_MSB,
                ADDR,
                ADDR_MSB,
                LENGTH,
            ] {
                self.set(ch, r, 0);
            }
            self.set(ch, DMACR, 1 << DMACR_IRQ_THRESHOLD_SHIFT);
            self.set(
                ch,
                DMASR,
                DMASR_HALTED | if st.sg { DMASR_SG_INCLD } else { 0 },
            );
        }
        st.mm2s_tail = None;
        st.s2mm_chain = None;
        st.coalesced = [0; 2];
        st.mm2s.clear();
        st.s2mm.clear();
        st.stream.clear();
        st.mm2s_done_at = None;
    }

    /// Completes a transfer: status bits, interrupt.
    fn complete(&self, st: &mut State, ch: usize, error: u32) {
        let mut sr = self.reg(ch, DMASR) | DMASR_IDLE;
        let cr = self.reg(ch, DMACR);
        if let Some((fch, bits)) = st.faults.force_error
            && fch == ch
        {
            st.faults.force_error = None;
            return self.complete(st, ch, error | bits);
        }
        let irq = if error != 0 {
            sr |= error | DMASR_ERR_IRQ | DMASR_HALTED;
            self.set(ch, DMACR, cr & !DMACR_RS);
            cr & DMACR_ERR_IRQ_EN != 0
        } else {
            sr |= DMASR_IOC_IRQ;
            cr & DMACR_IOC_IRQ_EN != 0
        };
        self.set(ch, DMASR, sr);
        if irq {
            if st.faults.drop_irq {
                st.faults.drop_irq = false;
            } else {
                self.dev.raise(ch);
            }
        }
    }

    /// Whether the device has work it can do now or later.
    fn busy(st: &State) -> bool {
        !st.mm2s.is_empty()
            || st.mm2s_done_at.is_some()
            || st.mm2s_tail.is_some()
            || ((!st.s2mm.is_empty() || st.s2mm_chain.is_some()) && !st.stream.is_empty())
    }

    /// A packet finished on `ch` in SG mode: IOC once IRQThreshold packets have.
    fn packet_done(&self, st: &mut State, ch: usize) {
        let threshold =
            ((self.reg(ch, DMACR) & DMACR_IRQ_THRESHOLD_MASK) >> DMACR_IRQ_THRESHOLD_SHIFT).max(1);
        st.coalesced[ch] += 1;
        if st.coalesced[ch] >= threshold {
            st.coalesced[ch] = 0;
            self.complete(st, ch, 0);
        }
    }

    /// Reads a descriptor: (next, buffer address, control).
    fn descriptor(&self, at: u64) -> Result<(u64, u64, u32), ()> {
        let w = |o: u64| self.dev.read_word(at + o).map_err(|_| ());
        let next = w(DESC_NXTDESC)? as u64 | ((w(DESC_NXTDESC_MSB)? as u64) << 32);
        let addr = w(DESC_BUFFER_ADDRESS)? as u64 | ((w(DESC_BUFFER_ADDRESS_MSB)? as u64) << 32);
        Ok((next, addr, w(DESC_CONTROL)?))
    }

    /// Runs the MM2S descriptor chain from CURDESC to `tail`.
    fn run_mm2s_chain(&self, st: &mut State, tail: u64) {
        let mut cur = self.reg(0, CURDESC) as u64 | ((self.reg(0, CURDESC_MSB) as u64) << 32);
        let mut packet = st.spare.pop().unwrap_or_default();
        packet.clear();
        loop {
            if !cur.is_multiple_of(DESC_ALIGN) {
                return self.complete(st, 0, DMASR_SG_INT_ERR);
            }
            let Ok((next, addr, control)) = self.descriptor(cur) else {
                return self.complete(st, 0, DMASR_SG_DEC_ERR);
            };
            let len = (control & DESC_LENGTH_MASK) as usize;
            if len == 0 {
                return self.complete(st, 0, DMASR_DMA_INT_ERR);
            }
            let start = packet.len();
            packet.resize(start + len, 0);
            if self.dev.read_ddr(addr, &mut packet[start..]).is_err() {
                return self.complete(st, 0, DMASR_DMA_DEC_ERR);
            }
            let _ = self
                .dev
                .write_word(cur + DESC_STATUS, len as u32 | DESC_STS_CMPLT);
            self.set(0, CURDESC, cur as u32);
            self.set(0, CURDESC_MSB, (cur >> 32) as u32);
            if control & DESC_CTRL_TXEOF != 0 {
                let mut out = st.spare.pop().unwrap_or_default();
                out.clear();
                st.processor.process(&packet, &mut out);
                let ready = Instant::now() + self.clock.duration(packet.len());
                st.stream.push_back((out, ready));
                packet.clear();
                self.packet_done(st, 0);
            }
            if cur == tail {
                let sr = self.reg(0, DMASR);
                self.set(0, DMASR, sr | DMASR_IDLE);
                return;
            }
            cur = next;
        }
    }

    /// Writes one packet from the stream into the S2MM descriptors.
    fn run_s2mm_packet(&self, st: &mut State, packet: &[u8]) {
        let Some((mut cur, tail)) = st.s2mm_chain else {
            return;
        };
        let mut off = 0;
        loop {
            let Ok((next, addr, control)) = self.descriptor(cur) else {
                st.s2mm_chain = None;
                return self.complete(st, 1, DMASR_SG_DEC_ERR);
            };
            let cap = (control & DESC_LENGTH_MASK) as usize;
            if cap == 0 {
                st.s2mm_chain = None;
                return self.complete(st, 1, DMASR_DMA_INT_ERR);
            }
            let n = cap.min(packet.len() - off);
            if self.dev.write_ddr(addr, &packet[off..off + n]).is_err() {
                st.s2mm_chain = None;
                return self.complete(st, 1, DMASR_DMA_DEC_ERR);
            }
            if cur == tail && off + n < packet.len() {
                // The packet does not fit the descriptors given: the channel stops
                // with an internal error, and the descriptor says so (no Cmplt).
                st.s2mm_chain = None;
                self.complete(st, 1, DMASR_DMA_INT_ERR);
                let _ = self
                    .dev
                    .write_word(cur + DESC_STATUS, n as u32 | DESC_STS_INT_ERR);
                return;
            }
            let mut status = n as u32 | DESC_STS_CMPLT;
            if off == 0 {
                status |= DESC_STS_RXSOF;
            }
            off += n;
            if off == packet.len() {
                status |= DESC_STS_RXEOF;
            }
            let _ = self.dev.write_word(cur + DESC_STATUS, status);
            self.set(1, CURDESC, cur as u32);
            self.set(1, CURDESC_MSB, (cur >> 32) as u32);
            let at_tail = cur == tail;
            if off == packet.len() {
                st.s2mm_chain = if at_tail { None } else { Some((next, tail)) };
                if at_tail {
                    let sr = self.reg(1, DMASR);
                    self.set(1, DMASR, sr | DMASR_IDLE);
                }
                return self.packet_done(st, 1);
            }
            cur = next;
        }
    }

    /// Runs what can run now; returns how long until the next thing can.
    fn step(&self, st: &mut State) -> Option<Duration> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        if st.mm2s_done_at.is_none()
            && let Some(job) = st.mm2s.pop_front()
        {
            let mut buf = std::mem::take(&mut st.read_buf);
            buf.resize(job.len, 0);
            let read = self.dev.read_ddr(job.addr, &mut buf);
            let mut out = st.spare.pop().unwrap_or_default();
            out.clear();
            if read.is_ok() {
                st.processor.process(&buf, &mut out);
            }
            st.read_buf = buf;
            match read {
                Ok(()) => {
                    // The last byte leaves the stream after len / rate.
                    let ready = now + self.clock.duration(job.len);
                    st.stream.push_back((out, ready));
                    st.mm2s_done_at = Some(ready);
                }
                Err(_) => self.complete(st, 0, DMASR_DMA_DEC_ERR),
            }
        }
        if let Some(tail) = st.mm2s_tail.take() {
            self.run_mm2s_chain(st, tail);
        }
        if st.s2mm_chain.is_some()
            && let Some(&(_, ready)) = st.stream.front()
        {
            if ready > now {
                next = Some(next.map_or(ready, |n| n.min(ready)));
            } else if let Some((packet, _)) = st.stream.pop_front() {
                self.run_s2mm_packet(st, &packet);
                if st.spare.len() < 4 {
                    st.spare.push(packet);
                }
            }
        }
        if let Some(t) = st.mm2s_done_at {
            if t <= now {
                st.mm2s_done_at = None;
                self.complete(st, 0, 0);
            } else {
                next = Some(t);
            }
        }
        if let (Some(job), Some(&(_, ready))) = (st.s2mm.front().copied(), st.stream.front()) {
            if ready > now {
                next = Some(next.map_or(ready, |n| n.min(ready)));
            } else if let Some((packet, _)) = st.stream.pop_front() {
                st.s2mm.pop_front();
                if packet.len() > job.len {
                    // The packet does not fit the buffer (no TLAST within LENGTH).
                    self.complete(st, 1, DMASR_DMA_INT_ERR);
                } else {
                    match self.dev.write_ddr(job.addr, &packet) {
                        Ok(()) => {
                            self.set(1, LENGTH, packet.len() as u32);
                            self.complete(st, 1, 0);
                        }
                        Err(_) => self.complete(st, 1, DMASR_DMA_DEC_ERR),
                    }
                }
                if st.spare.len() < 4 {
                    st.spare.push(packet);
                }
            }
        }
        next.map(|t| t.saturating_duration_since(now))
    }
}

fn spin_until(t: Instant) {
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

impl BusTarget for Shared {
    fn write(&self, window: usize, offset: usize, value: u32) {
        if window != 0 {
            return;
        }
        let (ch, r) = if (S2MM..S2MM + 0x30).contains(&offset) {
            (1, offset - S2MM)
        } else if offset < 0x30 {
            (0, offset)
        } else {
            self.dev.set_reg(0, offset, value);
            return;
        };
        // Address and length-MSB registers only hold a value until a LENGTH or
        // TAILDESC write uses it (under the lock, which orders it after this store).
        if matches!(r, ADDR | ADDR_MSB | TAILDESC_MSB) {
            self.set(ch, r, value);
            return;
        }
        let mut st = lock(&self.state);
        match r {
            DMACR => {
                if value & DMACR_RESET != 0 {
                    self.reset(&mut st);
                    return;
                }
                self.set(ch, DMACR, value);
                let sr = self.reg(ch, DMASR);
                if value & DMACR_RS != 0 {
                    if sr & DMASR_HALTED != 0 {
                        self.set(ch, DMASR, (sr & !DMASR_HALTED) | DMASR_IDLE);
                    }
                } else {
                    self.set(ch, DMASR, sr | DMASR_HALTED);
                }
            }
            DMASR => {
                let sr = self.reg(ch, DMASR);
                self.set(ch, DMASR, sr & !(value & DMASR_IRQ_MASK));
            }
            TAILDESC if st.sg => {
                self.set(ch, TAILDESC, value);
                let sr = self.reg(ch, DMASR);
                if sr & DMASR_HALTED == 0 {
                    self.set(ch, DMASR, sr & !DMASR_IDLE);
                    let tail = value as u64 | ((self.reg(ch, TAILDESC_MSB) as u64) << 32);
                    if ch == 0 {
                        st.mm2s_tail = Some(tail);
                    } else {
                        let cur =
                            self.reg(1, CURDESC) as u64 | ((self.reg(1, CURDESC_MSB) as u64) << 32);
                        st.s2mm_chain = Some((cur, tail));
                    }
                    self.posted.fetch_add(1, Ordering::Release);
                    self.work.notify_one();
                }
            }
            CURDESC | CURDESC_MSB => {
                // Only while halted, as PG021 requires.
                if self.reg(ch, DMASR) & DMASR_HALTED != 0 {
                    self.set(ch, r, value);
                }
            }
            LENGTH => {
                self.set(ch, LENGTH, value);
                let sr = self.reg(ch, DMASR);
                if value != 0 && sr & DMASR_HALTED == 0 && !st.sg {
                    self.set(ch, DMASR, sr & !DMASR_IDLE);
                    let addr =
                        (self.reg(ch, ADDR) as u64) | ((self.reg(ch, ADDR_MSB) as u64) << 32);
                    let job = Job {
                        addr,
                        len: value as usize,
                    };
                    if ch == 0 {
                        st.mm2s.push_back(job);
                    } else {
                        st.s2mm.push_back(job);
                    }
                    self.posted.fetch_add(1, Ordering::Release);
                    self.work.notify_one();
                }
            }
            _ => self.set(ch, r, value),
        }
    }
}

/// A running emulated fabric: the AXI DMA model and its device thread.
pub struct Fabric {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Fabric {
    /// Attaches an AXI DMA with a loopback stream processor to register window 0
    /// of `board`, interrupt lines 0 (MM2S) and 1 (S2MM).
    pub fn start(board: &SimBoard, clock: Clock) -> Result<Self, crate::platform::Error> {
        Self::start_with(board, clock, false)
    }

    /// Like [`start`](Fabric::start), with the scatter-gather engine included
    /// (`sg`): transfers then run from descriptor chains started by TAILDESC.
    pub fn start_with(
        board: &SimBoard,
        clock: Clock,
        sg: bool,
    ) -> Result<Self, crate::platform::Error> {
        let shared = Arc::new(Shared {
            dev: board.device()?,
            state: Mutex::new(State {
                mm2s: VecDeque::new(),
                s2mm: VecDeque::new(),
                stream: VecDeque::new(),
                mm2s_done_at: None,
                sg,
                mm2s_tail: None,
                s2mm_chain: None,
                coalesced: [0; 2],
                read_buf: Vec::new(),
                spare: Vec::new(),
                processor: Box::new(Loopback),
                faults: Faults::default(),
                stop: false,
            }),
            work: Condvar::new(),
            posted: AtomicU64::new(0),
            clock,
        });
        shared.reset(&mut lock(&shared.state));
        board.attach(shared.clone());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("dmaflow-fabric".into())
            .spawn(move || device_loop(&s))
            .map_err(|e| crate::platform::Error::Io {
                path: "fabric thread".into(),
                source: e,
            })?;
        Ok(Fabric {
            shared,
            thread: Some(thread),
        })
    }

    /// Arms faults for the next transfers.
    pub fn inject(&self, faults: Faults) {
        lock(&self.shared.state).faults = faults;
        self.shared.work.notify_one();
    }
}

fn device_loop(s: &Shared) {
    let mut idle_since = Instant::now();
    loop {
        let mut st = lock(&s.state);
        if st.stop {
            return;
        }
        if Shared::busy(&st) {
            if let Some(d) = st.faults.stall.take() {
                drop(st);
                std::thread::sleep(d);
                continue;
            }
            let wait = s.step(&mut st);
            // Wait for the stream with the lock released, so register writes are
            // never held up by a clocked transfer.
            drop(st);
            if let Some(d) = wait {
                spin_until(Instant::now() + d.min(Duration::from_micros(200)));
            }
            idle_since = Instant::now();
            continue;
        }
        if idle_since.elapsed() < Duration::from_micros(50) {
            // Spin a little without the lock, watching for posted work.
            let seen = s.posted.load(Ordering::Acquire);
            drop(st);
            while s.posted.load(Ordering::Acquire) == seen
                && idle_since.elapsed() < Duration::from_micros(50)
            {
                std::hint::spin_loop();
            }
            continue;
        }
        // Sleep; a register write that posts work wakes us (it needs the lock we
        // hold until the wait releases it, so no wake-up is lost).
        drop(
            s.work
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner),
        );
        idle_since = Instant::now();
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
