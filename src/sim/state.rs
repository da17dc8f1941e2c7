//! The emulated fabric's state: each AXI DMA engine's channels, the stream
//! between them, and what the register side shares with the device thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::axi::regs::*;
use crate::platform::sim::DeviceView;

use super::{AppWords, Clock, Faults, StreamProcessor, checker};

#[derive(Debug, Clone, Copy)]
pub(super) struct Job {
    pub(super) addr: u64,
    pub(super) len: usize,
    /// When the driver started it (the LENGTH write).
    pub(super) posted: Instant,
}

/// An MM2S descriptor whose status waits for the stream to take its packet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Mm2sCompletion {
    /// When the packet's last byte has left on the stream.
    pub(super) due: Instant,
    /// The descriptor and the status word to write to it.
    pub(super) desc: u64,
    pub(super) status: u32,
    /// The packet's last descriptor (IOC counts packets).
    pub(super) last: bool,
    /// The chain's tail: Idle sets once it is reported.
    pub(super) at_tail: bool,
}

/// One AXI DMA engine's state.
pub(super) struct Engine {
    pub(super) mm2s: VecDeque<Job>,
    pub(super) s2mm: VecDeque<Job>,
    /// Packets produced by the processor, waiting for S2MM, with the time their
    /// last byte leaves the stream.
    pub(super) stream: VecDeque<(Vec<u8>, Instant, Option<AppWords>)>,
    /// The packet MM2S delivered to the processor, waiting for the other inputs,
    /// with the time its last byte arrived.
    pub(super) input: Option<(Vec<u8>, Instant)>,
    /// When the MM2S transfer in flight finishes.
    pub(super) mm2s_done_at: Option<Instant>,
    /// When each stream link is free again (MM2S side, S2MM side).
    pub(super) link_free: [Instant; 2],
    /// MM2S descriptor chain to run, up to this tail descriptor.
    pub(super) mm2s_tail: Option<u64>,
    /// S2MM descriptors available: (current, tail).
    pub(super) s2mm_chain: Option<(u64, u64)>,
    /// Next descriptor each channel fetches (None: CURDESC as written while
    /// halted).
    pub(super) next_desc: [Option<u64>; 2],
    /// Completed packets not yet signalled, per channel (IRQThreshold coalescing).
    pub(super) coalesced: [u32; 2],
    /// TAILDESC writes already picked up, per channel.
    pub(super) posts_seen: [u64; 2],
    /// When the MM2S TAILDESC picked up last was written.
    pub(super) tail_posted: Instant,
    /// The front packet of `stream` is already in the front S2MM buffer (direct
    /// mode writes as the packet streams in and completes when its last byte has).
    pub(super) front_written: bool,
    /// Bytes of the front packet of `stream` already written by SG S2MM (it ran
    /// out of descriptors mid-packet).
    pub(super) s2mm_offset: usize,
    /// An MM2S packet read up to the chain's tail before its TXEOF.
    pub(super) mm2s_partial: Vec<u8>,
    /// Descriptors (address, status to write) of the MM2S packet being read.
    pub(super) mm2s_descs: Vec<(u64, u32)>,
    /// Descriptors of MM2S packets read, waiting for the stream to take the
    /// packets' last bytes.
    pub(super) mm2s_completions: VecDeque<Mm2sCompletion>,
    /// When each channel's interrupt delay timer fires (packets completed below
    /// IRQThreshold).
    pub(super) delay_due: [Option<Instant>; 2],
}

impl Engine {
    pub(super) fn new() -> Self {
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

pub(super) struct State {
    pub(super) engines: Vec<Engine>,
    /// Buffers reused for packets.
    pub(super) spare: Vec<Vec<u8>>,
    /// Bytes of capacity in `spare`.
    pub(super) spare_bytes: usize,
    pub(super) processor: Box<dyn StreamProcessor>,
    /// Lists reused by every firing of the processor.
    pub(super) fire_inputs: Vec<(Vec<u8>, Instant)>,
    pub(super) fire_outputs: Vec<Vec<u8>>,
    pub(super) faults: Faults,
    pub(super) stop: bool,
    /// A transfer is in progress outside the lock (a stalled device): DMACR
    /// writes wait for it to end.
    pub(super) in_beat: bool,
    /// DMACR writes (engine, channel, value) that arrived during the beat.
    pub(super) deferred: Vec<(usize, usize, u32)>,
}

impl Engine {
    /// Whether the stream between the channels holds all it can: MM2S
    /// waits (back-pressure) until S2MM takes some.
    pub(super) fn stream_full(&self) -> bool {
        self.stream.len() >= STREAM_FIFO || self.stream_bytes() >= MAX_STREAM_PACKET
    }

    /// Bytes of the packets the stream holds.
    pub(super) fn stream_bytes(&self) -> usize {
        self.stream.iter().map(|(p, _, _)| p.len()).sum()
    }
}

impl State {
    pub(super) fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.spare.pop().unwrap_or_default();
        self.spare_bytes -= b.capacity();
        b.clear();
        b
    }

    /// Keeps `b` for a later packet, while the buffers kept stay within
    /// 256 of them and [`SPARE_BYTES`].
    pub(super) fn recycle(&mut self, b: Vec<u8>) {
        if self.spare.len() < 256 && self.spare_bytes + b.capacity() <= SPARE_BYTES {
            self.spare_bytes += b.capacity();
            self.spare.push(b);
        }
    }
}

/// TAILDESC values written and not yet picked up, each with its time (ns since
/// the fabric's epoch).
pub(super) type Tails = VecDeque<(u64, u64)>;

pub(super) struct Shared {
    pub(super) dev: DeviceView,
    pub(super) state: Mutex<State>,
    pub(super) work: Condvar,
    /// Bumped on every job posted, so the idle device can watch for work without
    /// taking the lock.
    pub(super) posted: AtomicU64,
    /// Set while the device thread sleeps on `work`.
    pub(super) sleeping: AtomicBool,
    /// The device thread's id (0 until it has started).
    pub(super) device_tid: AtomicI32,
    /// Times the device thread went to sleep on `work` (to be woken by a post).
    pub(super) sleeps: AtomicU64,
    /// Times the device thread gave the CPU away while idle or waiting.
    pub(super) yields: AtomicU64,
    /// Nanoseconds by which this host's computation of a core's packets took
    /// longer than the core's modelled compute time: the emulator's delay, not
    /// the device's.
    pub(super) compute_overrun_ns: AtomicU64,
    /// The device's own work, timed only while [`Fabric::time_work`] is on.
    ///
    /// [`Fabric::time_work`]: super::Fabric::time_work
    pub(super) own_work: WorkClock,
    /// TAILDESC writes per engine and channel: the writer stores the register and
    /// bumps this without the lock; the device picks the new tail up.
    pub(super) posts: Vec<[AtomicU64; 2]>,
    /// When the last doorbell of each engine and channel was written, in
    /// nanoseconds since `epoch`.
    pub(super) post_time: Vec<[AtomicU64; 2]>,
    /// Direct-mode transfer started and not yet completed, per engine and channel.
    pub(super) in_flight: Vec<[AtomicBool; 2]>,
    /// Direct-mode transfers of at most this many bytes are stepped by the
    /// thread whose LENGTH write starts them, when it can (0: never).
    pub(super) prompt_bytes: AtomicUsize,
    /// Bits of LENGTH and of descriptor lengths the IP keeps (c_sg_length_width).
    pub(super) length_mask: AtomicU32,
    /// Per engine: the range the last direct-mode S2MM transfer wrote.
    pub(super) last_s2mm: Vec<Mutex<Option<(u64, usize)>>>,
    /// The protocol checker.
    pub(super) checker: checker::Checker,
    /// TAILDESC values written per engine and channel, with their times, not yet
    /// picked up: every write counts.
    pub(super) tails: Vec<[Mutex<Tails>; 2]>,
    pub(super) epoch: Instant,
    /// Scatter-gather mode (DMASR.SGIncld).
    pub(super) sg: bool,
    /// Serialises read-modify-writes of the DMASR registers.
    pub(super) sr_lock: Mutex<()>,
    pub(super) clock: Clock,
}

pub(super) fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) const CHANNELS: [usize; 2] = [MM2S, S2MM];

/// Packets the stream between an engine's channels holds before MM2S descriptor
/// chains stall.
pub(super) const STREAM_FIFO: usize = 64;

/// The most bytes the emulated stream carries in one packet, and holds in
/// all between an engine's channels before MM2S stalls: 64 MiB, the largest
/// buffer one PG021 descriptor or LENGTH write names. The emulator moves
/// whole packets, so a packet without TLAST (TXEOF) past this is an error
/// of the S2MM side (DMAIntErr, as an S2MM reports a packet longer than the
/// buffer it has), never memory without bound.
pub const MAX_STREAM_PACKET: usize = 1 << 26;

/// Bytes of packet buffers kept for reuse.
const SPARE_BYTES: usize = 2 * MAX_STREAM_PACKET;

/// Width of the emulated IP's buffer-length register when nothing else is set:
/// Vivado's default for c_sg_length_width.
pub const DEFAULT_LENGTH_WIDTH: u32 = 14;

/// Descriptors a cyclic MM2S ring runs per turn of the device loop.
pub(super) const CYCLIC_BURST: usize = 256;

/// One tick of the interrupt delay timer (DMACR.IRQDelay counts these): the IP's
/// default resolution of 125 cycles of a 100 MHz scatter-gather clock.
pub(super) const DELAY_TICK: Duration = Duration::from_nanos(1250);

impl Shared {
    pub(super) fn reg(&self, e: usize, ch: usize, r: usize) -> u32 {
        self.dev.reg(e, CHANNELS[ch] + r)
    }
    pub(super) fn set(&self, e: usize, ch: usize, r: usize, v: u32) {
        self.dev.set_reg(e, CHANNELS[ch] + r, v);
    }

    /// Read-modify-write of a DMASR, serialised with the CPU's write-1-to-clear
    /// writes (which do not take the state lock).
    pub(super) fn update_sr(&self, e: usize, ch: usize, f: impl FnOnce(u32) -> u32) {
        let _held = self.sr_lock.lock().unwrap_or_else(PoisonError::into_inner);
        let v = f(self.reg(e, ch, DMASR));
        self.set(e, ch, DMASR, v);
    }
}

/// Host time the device thread spends on the device's own work: moving
/// payload between DMA memory and the stream, and computing the core's
/// packets. Off by default: timing each access costs two clock reads.
#[derive(Debug, Default)]
pub(super) struct WorkClock {
    pub(super) on: AtomicBool,
    pub(super) memory_ns: AtomicU64,
    pub(super) compute_ns: AtomicU64,
    pub(super) packets: AtomicU64,
}

impl WorkClock {
    /// Runs `access` (a payload read or write of DMA memory), adding its
    /// time to the memory total while timing is on.
    pub(super) fn memory<R>(&self, access: impl FnOnce() -> R) -> R {
        if !self.on.load(Ordering::Relaxed) {
            return access();
        }
        let t0 = Instant::now();
        let r = access();
        let ns = t0.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.memory_ns.fetch_add(ns, Ordering::Relaxed);
        r
    }

    /// Adds one packet computed in `took` while timing is on.
    pub(super) fn computed(&self, took: Duration) {
        if self.on.load(Ordering::Relaxed) {
            let ns = took.as_nanos().min(u64::MAX as u128) as u64;
            self.compute_ns.fetch_add(ns, Ordering::Relaxed);
            self.packets.fetch_add(1, Ordering::Relaxed);
        }
    }
}
