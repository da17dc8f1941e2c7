//! The emulated fabric: an AXI DMA engine with the PG021 register behaviour and an
//! AXI-Stream processor between its two channels, in a device thread of its own.
//! It is reached only as a real device is: through the sim board's register window,
//! DMA memory and interrupt lines ([`crate::platform::sim`]).
//!
//! Register writes are applied at once, in the writer's thread, with the IP's
//! semantics (self-clearing reset, write-1-to-clear interrupt bits, a LENGTH write
//! that starts a transfer); the data moves in the device thread, which spins
//! briefly and then sleeps when idle so that it does not starve a 2-core machine.

mod bgsub;
mod checker;
mod conv;

pub use bgsub::BgSubCore;
pub use checker::Violation;
pub use conv::ConvCore;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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

/// An AXI-Stream processor between the fabric's DMA engines. It has `streams()`
/// input streams (engine i's MM2S feeds input i) and as many output streams
/// (output i goes to engine i's S2MM); it fires when every input has a packet
/// (bytes ended by TLAST) and produces one packet per output.
pub trait StreamProcessor: Send {
    /// Number of stream pairs, one AXI DMA engine each (1 unless overridden).
    fn streams(&self) -> usize {
        1
    }
    /// Whether outputs stream out while the inputs stream in (a pipeline such as
    /// a loopback or a line-buffered filter: true, the default), or only after
    /// the whole input has arrived and been computed on (false).
    fn cut_through(&self) -> bool {
        true
    }
    /// Processes one packet per input into one packet per output (each empty on
    /// entry).
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]);
    /// The status-stream words (APP0..APP4) of the packet just produced on
    /// `output`, for a core with a status stream; scatter-gather S2MM writes them
    /// into the packet's last descriptor. `None` (the default): no status stream.
    fn app_words(&self, output: usize) -> Option<AppWords> {
        let _ = output;
        None
    }
    /// Returns the core to its state after power-up; the AXI DMA's soft reset
    /// resets the core behind it too.
    fn reset(&mut self) {}
}

/// The five APP words of a descriptor (a core's status stream).
pub type AppWords = [u32; 5];

/// Returns every packet unchanged.
#[derive(Debug, Default)]
pub struct Loopback;

impl StreamProcessor for Loopback {
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        outputs[0].extend_from_slice(inputs[0]);
    }
}

/// Faults to inject, for tests.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Set these DMASR error bits on the next completion of this channel (0 = MM2S).
    pub force_error: Option<(usize, u32)>,
    /// Complete but raise no interrupt, once.
    pub drop_irq: bool,
    /// The next transfer stays in progress this much longer: the device thread
    /// stops for this long with the transfer under way, then completes it (writing
    /// its data) before it honours a halt or reset asked for meanwhile.
    pub stall: Option<Duration>,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    addr: u64,
    len: usize,
    /// When the driver started it (the LENGTH write).
    posted: Instant,
}

/// An MM2S descriptor whose status waits for the stream to take its packet.
#[derive(Debug, Clone, Copy)]
struct Mm2sCompletion {
    /// When the packet's last byte has left on the stream.
    due: Instant,
    /// The descriptor and the status word to write to it.
    desc: u64,
    status: u32,
    /// The packet's last descriptor (IOC counts packets).
    last: bool,
    /// The chain's tail: Idle sets once it is reported.
    at_tail: bool,
}

/// One AXI DMA engine's state.
struct Engine {
    mm2s: VecDeque<Job>,
    s2mm: VecDeque<Job>,
    /// Packets produced by the processor, waiting for S2MM, with the time their
    /// last byte leaves the stream.
    stream: VecDeque<(Vec<u8>, Instant, Option<AppWords>)>,
    /// The packet MM2S delivered to the processor, waiting for the other inputs,
    /// with the time its last byte arrived.
    input: Option<(Vec<u8>, Instant)>,
    /// When the MM2S transfer in flight finishes.
    mm2s_done_at: Option<Instant>,
    /// When each stream link is free again (MM2S side, S2MM side).
    link_free: [Instant; 2],
    /// MM2S descriptor chain to run, up to this tail descriptor.
    mm2s_tail: Option<u64>,
    /// S2MM descriptors available: (current, tail).
    s2mm_chain: Option<(u64, u64)>,
    /// Next descriptor each channel fetches (None: CURDESC as written while
    /// halted).
    next_desc: [Option<u64>; 2],
    /// Completed packets not yet signalled, per channel (IRQThreshold coalescing).
    coalesced: [u32; 2],
    /// TAILDESC writes already picked up, per channel.
    posts_seen: [u64; 2],
    /// When the MM2S TAILDESC picked up last was written.
    tail_posted: Instant,
    /// The front packet of `stream` is already in the front S2MM buffer (direct
    /// mode writes as the packet streams in and completes when its last byte has).
    front_written: bool,
    /// Bytes of the front packet of `stream` already written by SG S2MM (it ran
    /// out of descriptors mid-packet).
    s2mm_offset: usize,
    /// An MM2S packet read up to the chain's tail before its TXEOF.
    mm2s_partial: Vec<u8>,
    /// Descriptors (address, status to write) of the MM2S packet being read.
    mm2s_descs: Vec<(u64, u32)>,
    /// Descriptors of MM2S packets read, waiting for the stream to take the
    /// packets' last bytes.
    mm2s_completions: VecDeque<Mm2sCompletion>,
    /// When each channel's interrupt delay timer fires (packets completed below
    /// IRQThreshold).
    delay_due: [Option<Instant>; 2],
}

impl Engine {
    fn new() -> Self {
        let now = Instant::now();
        Engine {
            mm2s: VecDeque::new(),
            s2mm: VecDeque::new(),
            stream: VecDeque::new(),
            input: None,
            mm2s_done_at: None,
            link_free: [now; 2],
            mm2s_tail: None,
            s2mm_chain: None,
            next_desc: [None; 2],
            coalesced: [0; 2],
            posts_seen: [0; 2],
            tail_posted: now,
            front_written: false,
            s2mm_offset: 0,
            mm2s_partial: Vec::new(),
            mm2s_descs: Vec::new(),
            mm2s_completions: VecDeque::new(),
            delay_due: [None; 2],
        }
    }
}

struct State {
    engines: Vec<Engine>,
    /// Buffers reused for packets.
    spare: Vec<Vec<u8>>,
    processor: Box<dyn StreamProcessor>,
    /// Lists reused by every firing of the processor.
    fire_inputs: Vec<(Vec<u8>, Instant)>,
    fire_outputs: Vec<Vec<u8>>,
    faults: Faults,
    stop: bool,
    /// A transfer is in progress outside the lock (a stalled device): DMACR
    /// writes wait for it to end.
    in_beat: bool,
    /// DMACR writes (engine, channel, value) that arrived during the beat.
    deferred: Vec<(usize, usize, u32)>,
}

impl State {
    fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        b.clear();
        b
    }

    fn recycle(&mut self, b: Vec<u8>) {
        if self.spare.len() < 256 {
            self.spare.push(b);
        }
    }
}

/// TAILDESC values written and not yet picked up, each with its time (ns since
/// the fabric's epoch).
type Tails = VecDeque<(u64, u64)>;

struct Shared {
    dev: DeviceView,
    state: Mutex<State>,
    work: Condvar,
    /// Bumped on every job posted, so the idle device can watch for work without
    /// taking the lock.
    posted: AtomicU64,
    /// Set while the device thread sleeps on `work`.
    sleeping: AtomicBool,
    /// TAILDESC writes per engine and channel: the writer stores the register and
    /// bumps this without the lock; the device picks the new tail up.
    posts: Vec<[AtomicU64; 2]>,
    /// When the last doorbell of each engine and channel was written, in
    /// nanoseconds since `epoch`.
    post_time: Vec<[AtomicU64; 2]>,
    /// Direct-mode transfer started and not yet completed, per engine and channel.
    in_flight: Vec<[AtomicBool; 2]>,
    /// Bits of LENGTH and of descriptor lengths the IP keeps (c_sg_length_width).
    length_mask: AtomicU32,
    /// Per engine: the range the last direct-mode S2MM transfer wrote.
    last_s2mm: Vec<Mutex<Option<(u64, usize)>>>,
    /// The protocol checker.
    checker: checker::Checker,
    /// TAILDESC values written per engine and channel, with their times, not yet
    /// picked up: every write counts.
    tails: Vec<[Mutex<Tails>; 2]>,
    epoch: Instant,
    /// Scatter-gather mode (DMASR.SGIncld).
    sg: bool,
    /// Serialises read-modify-writes of the DMASR registers.
    sr_lock: Mutex<()>,
    clock: Clock,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

const CHANNELS: [usize; 2] = [MM2S, S2MM];

/// Packets the stream between an engine's channels holds before MM2S descriptor
/// chains stall.
const STREAM_FIFO: usize = 64;

/// Width of the emulated IP's buffer-length register when nothing else is set:
/// Vivado's default for c_sg_length_width.
pub const DEFAULT_LENGTH_WIDTH: u32 = 14;

/// Descriptors a cyclic MM2S ring runs per turn of the device loop.
const CYCLIC_BURST: usize = 256;

/// One tick of the interrupt delay timer (DMACR.IRQDelay counts these): the IP's
/// default resolution of 125 cycles of a 100 MHz scatter-gather clock.
const DELAY_TICK: Duration = Duration::from_nanos(1250);

impl Shared {
    fn reg(&self, e: usize, ch: usize, r: usize) -> u32 {
        self.dev.reg(e, CHANNELS[ch] + r)
    }
    fn set(&self, e: usize, ch: usize, r: usize, v: u32) {
        self.dev.set_reg(e, CHANNELS[ch] + r, v);
    }

    /// Read-modify-write of a DMASR, serialised with the CPU's write-1-to-clear
    /// writes (which do not take the state lock).
    fn update_sr(&self, e: usize, ch: usize, f: impl FnOnce(u32) -> u32) {
        let _held = self.sr_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let v = f(self.reg(e, ch, DMASR));
        self.set(e, ch, DMASR, v);
    }

    fn reset(&self, st: &mut State, e: usize) {
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
    fn post(&self) {
        self.posted.fetch_add(1, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            // The sleeper holds the lock until its wait releases it, so taking the
            // lock here orders this notify after the wait began.
            let _held = lock(&self.state);
            self.work.notify_one();
        }
    }

    /// Whether TAILDESC was written since the device last looked.
    fn posts_pending(&self, st: &State) -> bool {
        st.engines.iter().enumerate().any(|(e, g)| {
            (0..2).any(|ch| self.posts[e][ch].load(Ordering::Acquire) != g.posts_seen[ch])
        })
    }

    /// Picks up direct-mode LENGTH writes as jobs (address and length as the
    /// registers hold them: the driver writes them once per transfer).
    fn pick_up_jobs(&self, st: &mut State, e: usize) {
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
    fn pick_up_posts(&self, st: &mut State, e: usize) {
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
                    if !self.chain_reaches(from, tail) {
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
    fn chain_reaches(&self, from: u64, tail: u64) -> bool {
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
    fn check_invalidated(
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
    fn void_posts(&self, st: &mut State, e: usize, ch: usize) {
        let mut tails = self.tails[e][ch]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        tails.clear();
        st.engines[e].posts_seen[ch] = self.posts[e][ch].load(Ordering::Acquire);
    }

    /// Applies a DMACR write with the IP's semantics: Reset resets the engine;
    /// RS = 1 leaves Halted unless an error is latched (errors are sticky until a
    /// reset); RS = 0 stops the channel and flushes what it had pending, so a
    /// later start fetches from CURDESC as written.
    fn control(&self, st: &mut State, e: usize, ch: usize, value: u32) {
        if value & DMACR_RESET != 0 {
            self.reset(st, e);
            return;
        }
        self.set(e, ch, DMACR, value | DMACR_RESERVED_ONE);
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
        } else {
            self.stop_channel(st, e, ch);
        }
    }

    /// Halts channel `ch` of engine `e`: queued transfers, descriptor chains and a
    /// completion not yet signalled are dropped; doorbells not yet picked up are
    /// void.
    fn stop_channel(&self, st: &mut State, e: usize, ch: usize) {
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
    fn end_beat(&self, st: &mut State) {
        st.in_beat = false;
        for (e, ch, value) in std::mem::take(&mut st.deferred) {
            self.control(st, e, ch, value);
        }
    }

    /// Stops channel `ch` with `error` at descriptor `cur`, which CURDESC then
    /// holds (PG021: on an error CURDESC points at the failing descriptor).
    fn fail_at(&self, st: &mut State, e: usize, ch: usize, cur: u64, error: u32) {
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
    fn complete(&self, st: &mut State, e: usize, ch: usize, error: u32) {
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
                self.dev.raise(2 * e + ch);
            }
        }
    }

    /// Whether the device has work it can do now or later.
    fn busy(&self, st: &State) -> bool {
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
                (g.input.is_none() && !g.mm2s.is_empty())
                    || (g.input.is_none() && g.stream.len() < STREAM_FIFO && g.mm2s_tail.is_some())
                    || g.mm2s_done_at.is_some()
                    || ((!g.s2mm.is_empty() || g.s2mm_chain.is_some()) && !g.stream.is_empty())
            })
    }

    /// A packet finished on `ch` in SG mode: IOC once IRQThreshold packets have.
    fn packet_done(&self, st: &mut State, e: usize, ch: usize) {
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
    fn coalescing_status(&self, e: usize, ch: usize, left: u32, delay: u32) {
        self.update_sr(e, ch, |sr| {
            (sr & 0xFFFF) | ((left & 0xFF) << 16) | ((delay & 0xFF) << DMACR_IRQ_DELAY_SHIFT)
        });
    }

    /// Fires the delay timers that ran out: Dly_Irq, with its interrupt if
    /// enabled; returns when the next one is due.
    fn run_delay_timers(&self, st: &mut State, e: usize, now: Instant) -> Option<Instant> {
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
                self.dev.raise(2 * e + ch);
            }
        }
        next
    }

    /// Reads a descriptor: (next, buffer address, control, status).
    fn descriptor(&self, at: u64) -> Result<(u64, u64, u32, u32), ()> {
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
    fn next_descriptor(&self, st: &State, e: usize, ch: usize) -> u64 {
        st.engines[e].next_desc[ch].unwrap_or_else(|| {
            self.reg(e, ch, CURDESC) as u64 | ((self.reg(e, ch, CURDESC_MSB) as u64) << 32)
        })
    }

    /// An input packet (whose last byte arrives at `arrived`) for the processor.
    fn deliver(&self, st: &mut State, e: usize, packet: Vec<u8>, arrived: Instant) {
        st.engines[e].input = Some((packet, arrived));
        if st.processor.cut_through() {
            self.fire(st);
        }
    }

    /// For a processor that computes on whole packets: fires once every input
    /// has fully arrived; otherwise says when that will be.
    fn fire_when_arrived(&self, st: &mut State, now: Instant) -> Option<Instant> {
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
    fn fire(&self, st: &mut State) {
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
        match inputs.as_slice() {
            // The common single-stream case without building a list of slices.
            [(p, _)] => st.processor.process(&[p.as_slice()], &mut outputs),
            many => {
                let refs: Vec<&[u8]> = many.iter().map(|(p, _)| p.as_slice()).collect();
                st.processor.process(&refs, &mut outputs);
            }
        }
        let cut_through = st.processor.cut_through();
        let computed = if cut_through { arrived } else { Instant::now() };
        for (p, _) in inputs.drain(..) {
            st.recycle(p);
        }
        st.fire_inputs = inputs;
        for (e, out) in outputs.drain(..).enumerate() {
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
            g.stream.push_back((out, ready, app));
        }
        st.fire_outputs = outputs;
    }

    /// When a packet of `len` bytes, handed to engine `e`'s MM2S at `posted`, has
    /// arrived: the link takes it once free. Times are those of the register
    /// writes, so the link runs on the driver's schedule even when the device
    /// thread comes late.
    fn mm2s_arrival(&self, st: &mut State, e: usize, posted: Instant, len: usize) -> Instant {
        let g = &mut st.engines[e];
        let t = posted.max(g.link_free[0]) + self.clock.duration(len);
        g.link_free[0] = t;
        t
    }

    /// Runs engine `e`'s MM2S descriptor chain up to `tail`, packet by packet, while
    /// the processor takes input.
    ///
    /// A packet whose TXEOF has not come yet when the chain reaches its tail
    /// waits for more descriptors. In cyclic mode (DMACR.Cyclic BD Enable) the
    /// ring is followed for ever: Cmplt and TAILDESC are ignored.
    fn run_mm2s_chain(&self, st: &mut State, e: usize, tail: u64) {
        let mut cur = self.next_descriptor(st, e, 0);
        let mut packet = std::mem::take(&mut st.engines[e].mm2s_partial);
        let now = st.engines[e].tail_posted.min(Instant::now());
        let cyclic = self.reg(e, 0, DMACR) & DMACR_CYCLIC != 0;
        let mut fetched = 0usize;
        loop {
            fetched += 1;
            if packet.is_empty()
                && ((cyclic && fetched > CYCLIC_BURST)
                    || st.engines[e].input.is_some()
                    || st.engines[e].stream.len() >= STREAM_FIFO)
            {
                // Back-pressure: the processor has not taken the last packet, or
                // its output is not being drained (or a cyclic ring has run a
                // burst: it goes on at the next turn of the device loop).
                st.engines[e].mm2s_tail = Some(tail);
                st.recycle(packet);
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
            packet.resize(start + len, 0);
            if self.dev.read_ddr(addr, &mut packet[start..]).is_err() {
                return self.fail_at(st, e, 0, cur, DMASR_DMA_DEC_ERR);
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

    /// Reports the MM2S packets whose last byte the stream has taken by `now`:
    /// their descriptors' Cmplt, IOC (per IRQThreshold) and, at the tail, Idle.
    /// Returns when the next one is due.
    fn complete_mm2s(&self, st: &mut State, e: usize, now: Instant) -> Option<Instant> {
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
    fn run_s2mm_packet(
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
            if self.dev.write_ddr(addr, &packet[off..off + n]).is_err() {
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
    fn step(&self, st: &mut State) -> Option<Duration> {
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
                && let Some(job) = st.engines[e].mm2s.pop_front()
            {
                let mut buf = st.buffer();
                buf.resize(job.len, 0);
                match self.dev.read_ddr(job.addr, &mut buf) {
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
                && st.engines[e].stream.len() < STREAM_FIFO
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
                    && self.dev.write_ddr(job.addr, packet).is_ok()
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
                        self.dev.write_ddr(job.addr, &packet)
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

/// How long an idle device thread spins watching for work, then yields the CPU
/// between looks until it sleeps.
const IDLE_SPIN: Duration = Duration::from_micros(50);
const IDLE_YIELD: Duration = Duration::from_millis(2);

/// Waits up to this long for a packet inside one device step.
const SHORT_WAIT: Duration = Duration::from_micros(2);

/// Spins until `t`.
fn spin_to(t: Instant) {
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

/// Spins until `t` or until new work is posted.
fn spin_until(s: &Shared, t: Instant) {
    let seen = s.posted.load(Ordering::Acquire);
    while Instant::now() < t && s.posted.load(Ordering::Acquire) == seen {
        std::hint::spin_loop();
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
                    true,
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

/// A running emulated fabric: AXI DMA engines, the stream processor between them
/// and the device thread that moves the data.
pub struct Fabric {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The fabric could not be built on this board.
fn unfit(what: &str, needed: usize, has: usize) -> crate::platform::Error {
    crate::platform::Error::Malformed {
        path: "sim board".into(),
        reason: format!("the fabric needs {needed} {what}, the board has {has}"),
    }
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
        Self::with_processor(board, clock, sg, Box::new(Loopback))
    }

    /// A fabric whose stream processor is `processor`: one AXI DMA engine per
    /// stream, engine i at register window i with interrupt lines 2i (MM2S) and
    /// 2i + 1 (S2MM).
    pub fn with_processor(
        board: &SimBoard,
        clock: Clock,
        sg: bool,
        processor: Box<dyn StreamProcessor>,
    ) -> Result<Self, crate::platform::Error> {
        let dev = board.device()?;
        let engines = processor.streams().max(1);
        if dev.windows() < engines {
            return Err(unfit("register windows", engines, dev.windows()));
        }
        if dev.lines() < 2 * engines {
            return Err(unfit("interrupt lines", 2 * engines, dev.lines()));
        }
        let shared = Arc::new(Shared {
            dev,
            state: Mutex::new(State {
                engines: (0..engines).map(|_| Engine::new()).collect(),
                spare: Vec::new(),
                processor,
                fire_inputs: Vec::new(),
                fire_outputs: Vec::new(),
                faults: Faults::default(),
                stop: false,
                in_beat: false,
                deferred: Vec::new(),
            }),
            work: Condvar::new(),
            posted: AtomicU64::new(0),
            sleeping: AtomicBool::new(false),
            posts: (0..engines)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            post_time: (0..engines)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
            tails: (0..engines)
                .map(|_| [Mutex::default(), Mutex::default()])
                .collect(),
            in_flight: (0..engines)
                .map(|_| [AtomicBool::new(false), AtomicBool::new(false)])
                .collect(),
            checker: checker::Checker::new(Instant::now()),
            length_mask: AtomicU32::new((1 << DEFAULT_LENGTH_WIDTH) - 1),
            last_s2mm: (0..engines).map(|_| Mutex::new(None)).collect(),
            epoch: Instant::now(),
            sg,
            sr_lock: Mutex::new(()),
            clock,
        });
        {
            let mut st = lock(&shared.state);
            for e in 0..engines {
                shared.reset(&mut st, e);
            }
        }
        if !board.attach(shared.clone()) {
            return Err(crate::platform::Error::Malformed {
                path: "sim board".into(),
                reason: "a fabric is already attached to this board".into(),
            });
        }
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

    /// Sets the width of the emulated IP's buffer-length register
    /// (c_sg_length_width, 8..=26 bits; [`DEFAULT_LENGTH_WIDTH`] until set): LENGTH
    /// and descriptor lengths keep only that many bits, as on the IP, so a driver
    /// configured for a wider register than the design has is caught.
    pub fn set_length_width(&self, bits: u32) -> Result<(), crate::platform::Error> {
        if !(8..=26).contains(&bits) {
            return Err(crate::platform::Error::Malformed {
                path: "fabric".into(),
                reason: format!("buffer length width {bits} is outside 8..=26 bits"),
            });
        }
        self.shared
            .length_mask
            .store((1 << bits) - 1, Ordering::Relaxed);
        Ok(())
    }

    /// Turns the protocol checker's strict mode on (the default) or off: in strict
    /// mode a register write PG021 leaves undefined fails with
    /// [`crate::platform::Error::Protocol`]; either way it is recorded.
    pub fn set_strict(&self, on: bool) {
        self.shared.checker.set_strict(on);
    }

    /// Every protocol violation seen so far (the first 256): register accesses
    /// PG021 leaves undefined, and device-side events such as a descriptor pointer
    /// not 64-byte aligned or a buffer outside DMA memory.
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.checker.violations()
    }

    /// The faults armed and not yet consumed.
    pub fn pending_faults(&self) -> Faults {
        lock(&self.shared.state).faults.clone()
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
        // Read before looking for work, so work posted after the look is seen.
        let seen = s.posted.load(Ordering::SeqCst);
        let mut st = lock(&s.state);
        if st.stop {
            return;
        }
        if s.busy(&st) {
            if let Some(d) = st.faults.stall.take() {
                // The transfer in progress takes `d` longer: a halt or reset asked
                // for meanwhile takes effect once it has ended (and written its
                // data), as PG021 describes.
                st.in_beat = true;
                drop(st);
                std::thread::sleep(d);
                let mut st = lock(&s.state);
                s.step(&mut st);
                s.end_beat(&mut st);
                continue;
            }
            let wait = s.step(&mut st);
            // Wait for the stream with the lock released, so register writes are
            // never held up by a clocked transfer.
            drop(st);
            if let Some(d) = wait {
                spin_until(s, Instant::now() + d.min(Duration::from_micros(200)));
            }
            idle_since = Instant::now();
            continue;
        }
        if idle_since.elapsed() < IDLE_YIELD {
            // Watch for posted work without the lock: spin a little, then yield
            // the CPU between looks, then sleep.
            drop(st);
            let mut spins = 0u32;
            while s.posted.load(Ordering::Acquire) == seen {
                spins += 1;
                if spins.is_multiple_of(64) {
                    let idle = idle_since.elapsed();
                    if idle >= IDLE_YIELD {
                        break;
                    }
                    if idle >= IDLE_SPIN {
                        std::thread::yield_now();
                        continue;
                    }
                }
                std::hint::spin_loop();
            }
            continue;
        }
        // Sleep. Lock-free posts look at `sleeping` after bumping `posted`, and
        // take the lock (held here until the wait releases it) to notify.
        s.sleeping.store(true, Ordering::SeqCst);
        if s.posted.load(Ordering::SeqCst) != seen {
            s.sleeping.store(false, Ordering::SeqCst);
            continue;
        }
        drop(
            s.work
                .wait_timeout(st, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner),
        );
        s.sleeping.store(false, Ordering::SeqCst);
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
