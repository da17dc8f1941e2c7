//! The emulated fabric: an AXI DMA engine with the PG021 register behaviour and an
//! AXI-Stream processor between its two channels, in a device thread of its own.
//! It is reached only as a real device is: through the sim board's register window,
//! DMA memory and interrupt lines ([`crate::platform::sim`]).
//!
//! Register writes are applied at once, in the writer's thread, with the IP's
//! semantics (self-clearing reset, write-1-to-clear interrupt bits, a LENGTH write
//! that starts a transfer); the data moves in the device thread, which spins
//! briefly and then sleeps when idle so that it does not starve a 2-core machine
//! (or, for short direct-mode transfers when the fabric is set to, in the
//! writer's thread right after the LENGTH write: [`Fabric::set_prompt_bytes`]).

mod bgsub;
mod checker;
pub mod conv;
mod datapath;
mod device;
mod faults;
mod fir;
mod registers;
mod state;
mod timing;

pub use bgsub::{BGSUB_FABRIC, BgSubCore};
pub use checker::Violation;
pub use conv::ConvCore;
pub use faults::Faults;
pub use fir::FirCore;
pub use state::{DEFAULT_LENGTH_WIDTH, MAX_STREAM_PACKET};
pub use timing::{
    Clock, MM2S_DIRECT_START_CYCLES, MM2S_SG_START_CYCLES, Profile, S2MM_WRITE_CYCLES,
};

use device::device_loop;
use state::{Engine, Shared, State, lock};

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::platform::sim::SimBoard;

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
    /// For a core that is not cut-through: the modelled time the packets just
    /// processed take to compute on the device, from the last input's arrival
    /// to the first output beat. `None` (the default): as long as computing them
    /// took on this host.
    fn compute_time(&self) -> Option<std::time::Duration> {
        None
    }
    /// Bytes of the core's own AXI-Lite register window, the board's window
    /// after the DMA engines' (0, the default: the core has none).
    fn control_bytes(&self) -> usize {
        0
    }
    /// The CPU wrote `value` at `offset` of the core's register window (inside
    /// [`control_bytes`](Self::control_bytes)); returns what the register reads
    /// afterwards.
    fn control_write(&mut self, offset: usize, value: u32) -> u32 {
        let _ = (offset, value);
        0
    }
    /// Registers of the core's window and what they read at power-up.
    fn control_reads(&self) -> Vec<(usize, u32)> {
        Vec::new()
    }
}

/// The board interrupt line of engine `engine`'s channel `channel` (0: MM2S,
/// 1: S2MM, as [`crate::axi::Channel`] counts them): line 2 `engine` +
/// `channel`, where the fabric raises it.
pub const fn irq_line(engine: usize, channel: usize) -> usize {
    2 * engine + channel
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

/// The emulated device's own work ([`Fabric::work`]), in host time on the
/// thread that did it: the device thread, or for a short direct-mode
/// transfer stepped at once ([`Fabric::set_prompt_bytes`]) the thread that
/// started it. On a board the DMA engine and the core run beside the CPU;
/// here a host thread does their work at the host's speed: its memory time
/// depends on where the host's caches hold the data (written by another core
/// just before, or untouched since the last packet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceWork {
    /// Moving payload between DMA memory and the streams: MM2S reads and
    /// S2MM writes.
    pub memory: Duration,
    /// Computing the core's packets (for a plain loopback, passing each
    /// packet through).
    pub compute: Duration,
    /// Packets the core computed.
    pub packets: u64,
}

impl DeviceWork {
    /// Memory and compute together.
    pub fn total(&self) -> Duration {
        self.memory + self.compute
    }
}

/// Reads a fabric's [`DeviceWork`] ([`Fabric::work_meter`]); it keeps the
/// fabric's counters, not its device thread, alive.
#[derive(Clone)]
pub struct WorkMeter(Arc<Shared>);

impl WorkMeter {
    /// The device's own work so far ([`Fabric::work`]).
    pub fn read(&self) -> DeviceWork {
        let w = &self.0.own_work;
        let ns = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        DeviceWork {
            memory: ns(&w.memory_ns),
            compute: ns(&w.compute_ns),
            packets: w.packets.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for WorkMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WorkMeter").field(&self.read()).finish()
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
        let control = processor.control_bytes();
        let windows = engines + usize::from(control > 0);
        if dev.windows() < windows {
            return Err(unfit("register windows", windows, dev.windows()));
        }
        if control > crate::platform::sim::REGISTER_WINDOW {
            return Err(unfit(
                "bytes of register window for the core",
                control,
                crate::platform::sim::REGISTER_WINDOW,
            ));
        }
        for (offset, value) in processor.control_reads() {
            dev.set_reg(engines, offset, value);
        }
        if dev.lines() < 2 * engines {
            return Err(unfit("interrupt lines", 2 * engines, dev.lines()));
        }
        let shared = Arc::new(Shared {
            dev,
            state: Mutex::new(State {
                engines: (0..engines).map(|_| Engine::new()).collect(),
                spare: Vec::new(),
                spare_bytes: 0,
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
            device_tid: AtomicI32::new(0),
            sleeps: AtomicU64::new(0),
            yields: AtomicU64::new(0),
            compute_overrun_ns: AtomicU64::new(0),
            own_work: state::WorkClock::default(),
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
            prompt_bytes: AtomicUsize::new(0),
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
            .spawn(move || {
                let tid = crate::platform::cpu::current_thread();
                s.device_tid
                    .store(tid.as_raw_nonzero().get(), Ordering::Release);
                device_loop(&s)
            })
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

    /// Has a direct-mode transfer of at most `bytes` bytes carried out by the
    /// thread whose LENGTH write starts it, as far as the clock model says it
    /// is done by then, instead of waiting for the device thread to be
    /// scheduled (0, the default: the device thread moves every transfer).
    /// A program that reads a short transfer's data right after starting it
    /// then finds it there, as on a board, where the engine starts at once;
    /// the price is that this thread's CPU time includes the emulated
    /// device's copy.
    pub fn set_prompt_bytes(&self, bytes: usize) {
        self.shared.prompt_bytes.store(bytes, Ordering::Relaxed);
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

    /// The cores the device thread may run on.
    pub fn device_cores(&self) -> Result<Vec<usize>, crate::platform::Error> {
        crate::platform::cpu::allowed_cores(Some(self.device_thread()?))
    }

    /// The device thread's id; it records it first thing (waited for, bounded).
    fn device_thread(&self) -> Result<rustix::thread::Pid, crate::platform::Error> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let raw = self.shared.device_tid.load(Ordering::Acquire);
            if let Some(pid) = rustix::thread::Pid::from_raw(raw) {
                return Ok(pid);
            }
            if Instant::now() > deadline {
                return Err(crate::platform::Error::Io {
                    path: "fabric thread".into(),
                    source: std::io::Error::other("the device thread did not start"),
                });
            }
            std::thread::yield_now();
        }
    }

    /// Runs the device thread on `cores` only (see [`crate::platform::cpu`]):
    /// with a core of its own it stands in for a separate chip, as the fabric is
    /// on a board, instead of taking turns with the driver it serves.
    pub fn pin_device(&self, cores: &[usize]) -> Result<(), crate::platform::Error> {
        let tid = self.device_thread()?;
        crate::platform::cpu::pin(Some(tid), cores)
    }

    /// Asks for a short scheduling slice for the device thread
    /// ([`crate::platform::cpu::request_slice`]): a board's device never
    /// takes turns with a program, so the emulated one should lose as little
    /// of its core as the host allows. Returns what was granted.
    pub fn request_device_slice(&self, slice: Duration) -> crate::platform::cpu::Granted {
        match self.device_thread() {
            Ok(tid) => crate::platform::cpu::request_slice(Some(tid), slice),
            Err(e) => crate::platform::cpu::Granted::NotGranted(e.to_string()),
        }
    }

    /// CPU time the device thread has used since the fabric started: the
    /// emulated device's own cost on this host, which a board's hardware
    /// does not take from its CPU (compare it with a driver's thread CPU
    /// time to see which side limits a stream).
    pub fn device_cpu_time(&self) -> Result<Duration, crate::platform::Error> {
        crate::platform::cpu::cpu_time_of(self.device_thread()?)
    }

    /// How often the device thread has gone to sleep waiting for work, and how
    /// often it has yielded the CPU, since the fabric started. A steady stream
    /// of transfers should cost far fewer sleeps than transfers: each sleep is a
    /// wake-up (tens of microseconds on a loaded machine) before the next one
    /// moves.
    pub fn device_sleeps(&self) -> (u64, u64) {
        (
            self.shared.sleeps.load(Ordering::Relaxed),
            self.shared.yields.load(Ordering::Relaxed),
        )
    }

    /// How much longer, in all, this host took to compute the core's packets
    /// than the core's modelled compute time ([`StreamProcessor::compute_time`]):
    /// a delay of the emulator that a measurement over the model must not
    /// count as software's. Zero for cores without a modelled compute time.
    pub fn compute_overrun(&self) -> Duration {
        Duration::from_nanos(self.shared.compute_overrun_ns.load(Ordering::Relaxed))
    }

    /// Starts (`true`) or stops timing the emulated device's own work
    /// ([`Fabric::work`]). Off by default: each payload access then costs
    /// two more clock reads on the device thread.
    pub fn time_work(&self, on: bool) {
        self.shared.own_work.on.store(on, Ordering::Relaxed);
    }

    /// The emulated device's own work while [`Fabric::time_work`] was on
    /// ([`DeviceWork`]): what a run's time per window spends in the device,
    /// to be told apart from the driver's and the waits'.
    pub fn work(&self) -> DeviceWork {
        self.work_meter().read()
    }

    /// A handle that reads [`Fabric::work`] without borrowing the fabric,
    /// for a caller that hands the fabric's owner to another thread.
    pub fn work_meter(&self) -> WorkMeter {
        WorkMeter(self.shared.clone())
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

impl Drop for Fabric {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.work.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
