//! A register-exact driver for the Xilinx AXI DMA IP (PG021), direct register mode,
//! written against [`RegisterSpace`] and [`IrqLine`] only: the same code drives a
//! real board through UIO and the emulated fabric.

pub mod chain;
pub mod pause;
pub mod regs;
mod ring;

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::mem::DmaBuf;
use crate::platform::{self, IrqLine, RegisterSpace};
use regs::*;
pub use ring::{Coalescing, DescRing};

/// Which of the engine's two channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Memory-mapped to stream: reads memory, feeds the stream.
    Mm2s,
    /// Stream to memory-mapped: writes what the stream delivers.
    S2mm,
}

impl Channel {
    /// Offset of the channel's registers.
    pub fn base(self) -> usize {
        match self {
            Channel::Mm2s => MM2S,
            Channel::S2mm => S2MM,
        }
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Mm2s => "MM2S",
            Channel::S2mm => "S2MM",
        })
    }
}

/// What went wrong with the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer-length register width is outside 8..=26 bits.
    #[error("buffer length register width {0} is outside 8..=26 bits")]
    BadLengthWidth(u32),
    /// A transfer of zero bytes.
    #[error("{channel}: a transfer of zero bytes")]
    ZeroLength {
        /// The channel.
        channel: Channel,
    },
    /// A transfer longer than the buffer-length register holds.
    #[error("{channel}: {len} bytes is more than the {max}-byte limit of the length register")]
    TooLong {
        /// The channel.
        channel: Channel,
        /// Bytes asked for.
        len: usize,
        /// Largest transfer.
        max: usize,
    },
    /// The engine reported an error (decoded from DMASR); the driver has halted
    /// and reset the engine (or, if it could not, marked it failed).
    #[error("{channel}: {what} (DMASR {dmasr:#010x})")]
    Device {
        /// The channel.
        channel: Channel,
        /// The error bits by name.
        what: String,
        /// DMASR as read.
        dmasr: u32,
    },
    /// A descriptor's status reports an error (DMAIntErr, DMASlvErr or
    /// DMADecErr in its STATUS word): what it moved is not data. The driver
    /// has halted and reset the engine (or, if it could not, marked it failed).
    #[error("{channel}: descriptor status reports {what} (STATUS {status:#010x})")]
    Descriptor {
        /// The channel.
        channel: Channel,
        /// The error bits by name.
        what: String,
        /// The descriptor's status word as read.
        status: u32,
    },
    /// The engine did not finish in time; the driver has halted and reset the
    /// engine (or, if it could not, marked it failed).
    #[error("{channel}: no completion within {timeout:?} (DMASR {dmasr:#010x})")]
    Timeout {
        /// The channel.
        channel: Channel,
        /// How long we waited.
        timeout: Duration,
        /// DMASR when we gave up.
        dmasr: u32,
    },
    /// More descriptors needed than the descriptor ring holds.
    #[error("{channel}: {needed} descriptors needed, the ring holds {capacity}")]
    RingFull {
        /// The channel.
        channel: Channel,
        /// Descriptors the transfer needs.
        needed: usize,
        /// Descriptors in the ring.
        capacity: usize,
    },
    /// Descriptors off the 0x40-byte grid: the engine ignores CURDESC and
    /// TAILDESC bits 5:0 and would read and write the wrong memory.
    #[error("{channel}: descriptors at {addr:#x} are not 0x40-byte aligned")]
    MisalignedDescriptors {
        /// The channel.
        channel: Channel,
        /// Bus address of the first descriptor.
        addr: u64,
    },
    /// A direct-mode transfer asked of an engine built with scatter-gather
    /// (DMASR.SGIncld is 1): PG021 offers only scatter-gather then.
    #[error(
        "{0}: the engine was built with scatter-gather (SGIncld is 1): no direct register mode"
    )]
    SgOnly(Channel),
    /// The engine was built without scatter-gather (DMASR.SGIncld is 0).
    #[error("{0}: the engine has no scatter-gather engine (SGIncld is 0)")]
    NoSg(Channel),
    /// A scatter-gather channel started without a descriptor for CURDESC.
    #[error(
        "{0}: a scatter-gather channel needs a descriptor for CURDESC before RS is set (PG021)"
    )]
    NoParkingDescriptor(Channel),
    /// Waited on a descriptor ring with nothing handed to the engine.
    #[error("{0}: no descriptor in flight to wait for")]
    RingEmpty(Channel),
    /// Interrupt coalescing asked for an IRQThreshold of 0.
    #[error("{0}: IRQThreshold 0 is not allowed (PG021: 1 to 255 packets per interrupt)")]
    ZeroThreshold(Channel),
    /// A direct-mode transfer started while the channel's last one is still in
    /// flight (it would merge with it).
    #[error("{0}: a transfer is already in flight on this channel")]
    Busy(Channel),
    /// A transfer started on a channel that stays halted after RS is set.
    #[error("{channel}: the channel is halted (DMASR {dmasr:#010x}); nothing was started")]
    Halted {
        /// The channel.
        channel: Channel,
        /// DMASR as read.
        dmasr: u32,
    },
    /// The engine could not be confirmed halted after a timeout or an error: the
    /// buffers it was given are lost to it, and every call fails until a reset
    /// succeeds (each call tries one).
    #[error("the engine could not be halted or reset after a failure; it is out of service")]
    Failed,
    /// A descriptor buffer was unusable (lost to an engine, or its maintenance failed).
    #[error(transparent)]
    Mem(#[from] crate::mem::Error),
    /// The register window or interrupt line failed.
    #[error(transparent)]
    Platform(#[from] platform::Error),
}

/// How a caller learns that a transfer finished.
pub enum Wait<'a> {
    /// Busy-poll DMASR.
    Poll,
    /// Poll DMASR, leaving the core to others between reads: a short spin,
    /// then short sleeps ([`pause`]; paper 002's "user-level scheduled").
    Yield,
    /// Sleep on the channel's interrupt line.
    Irq(&'a dyn IrqLine),
    /// Wait for the time the transfer should take at the link's rate, then
    /// sleep on the channel's interrupt line: while `spin_until` is more than
    /// [`NAP_WAKE`] twice away, a timer sleep ("nap", one system call) until
    /// [`NAP_WAKE`] before it, then a spin on the status until it (Linux
    /// blk-mq's hybrid polling), then the interrupt. The driver's own waits
    /// ([`AxiDma::wait`], [`AxiDma::ring_wait`]) nap once instead, to an aim
    /// each channel learns (a tracker of where its transfers end against
    /// the nap's wake-up: one [`NAP_STEP`] earlier when the first look after
    /// the nap finds the transfer done, [`NAP_STEP_LATER`] later when not,
    /// so that four naps in five find it done), then
    /// spin at most [`NAP_SPIN`] past the later of the aim and `spin_until`
    /// before the interrupt ([`AxiDma::nap_aim_ns`]). The line is re-armed
    /// only before a sleep on it, never after a completion: a wait that the
    /// spin ends makes at most one system call (the nap), one that sleeps on
    /// the line two line operations (re-arm, wait). The first nap on a thread
    /// lowers its timer slack to 1 us for good
    /// ([`platform::cpu::keep_timer_slack_low`]). In direct mode the driver
    /// enables the channel's completion interrupt (DMACR.IOC_IrqEn) only when
    /// the spin is over, so that a transfer the spin collects raises no
    /// interrupt.
    Adaptive {
        /// The channel's interrupt line.
        line: &'a dyn IrqLine,
        /// When to stop spinning and sleep.
        spin_until: Instant,
    },
}

impl Wait<'_> {
    /// Whether the wait may sleep on the interrupt line (the channel's
    /// completion interrupt must then be acknowledged).
    pub fn sleeps(&self) -> bool {
        matches!(self, Wait::Irq(_) | Wait::Adaptive { .. })
    }
}

/// Driver settings.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// Width of the buffer-length register in bits (the IP's c_sg_length_width).
    pub length_width: u32,
    /// Longest wait for any completion.
    pub timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            length_width: 23,
            timeout: Duration::from_secs(1),
        }
    }
}

/// Names the error bits of a DMASR value.
pub fn decode_errors(dmasr: u32) -> String {
    let names = [
        (DMASR_DMA_INT_ERR, "DMAIntErr"),
        (DMASR_DMA_SLV_ERR, "DMASlvErr"),
        (DMASR_DMA_DEC_ERR, "DMADecErr"),
        (DMASR_SG_INT_ERR, "SGIntErr"),
        (DMASR_SG_SLV_ERR, "SGSlvErr"),
        (DMASR_SG_DEC_ERR, "SGDecErr"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| dmasr & bit != 0)
        .map(|&(_, n)| n)
        .collect();
    v.join("+")
}

/// Names the error bits of a descriptor's status word.
pub fn decode_descriptor_errors(status: u32) -> String {
    let names = [
        (DESC_STS_INT_ERR, "DMAIntErr"),
        (DESC_STS_SLV_ERR, "DMASlvErr"),
        (DESC_STS_DEC_ERR, "DMADecErr"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| status & bit != 0)
        .map(|&(_, n)| n)
        .collect();
    v.join("+")
}

/// An AXI DMA engine in direct register mode.
pub struct AxiDma<R> {
    regs: R,
    cfg: Config,
    /// Bytes of the transfer in flight per channel (MM2S, S2MM).
    pending: [Cell<usize>; 2],
    /// Last DMACR and address-MSB values written per channel, so that a start
    /// writes only the registers that change (None after a reset).
    written_cr: [Cell<Option<u32>>; 2],
    written_msb: [Cell<Option<u32>>; 2],
    /// The engine could not be confirmed halted after a failure.
    failed: Cell<bool>,
    /// The engine was built with scatter-gather (DMASR.SGIncld, read after
    /// the first reset): no direct register mode.
    sg_included: Cell<bool>,
    /// Where each channel's adaptive naps end against the expected end
    /// (MM2S, S2MM), learned from the waits' first looks after them.
    nap: [NapAim; 2],
}

/// How long [`AxiDma::recover`] waits for Halted before it resets the engine.
pub const HALT_GRACE: Duration = Duration::from_millis(2);

/// How often an interrupt wait looks at DMASR even without an interrupt, so that a
/// lost interrupt costs this long, not the whole timeout.
const IRQ_RECHECK: Duration = Duration::from_millis(10);

/// How early an adaptive wait's nap ([`Wait::Adaptive`]) ends before the
/// transfer's expected end, to absorb the timer's wake-up: the spin that
/// follows covers it. A wait with less than twice this left spins at once.
pub const NAP_WAKE: Duration = Duration::from_micros(10);

/// How far a driver's adaptive nap ([`AxiDma::wait`]) moves its aim earlier
/// after a wait whose first look after the nap found the transfer done.
pub const NAP_STEP: Duration = Duration::from_micros(1);

/// How far a driver's adaptive nap moves its aim later after a wait whose
/// first look after the nap found the transfer still running: four
/// [`NAP_STEP`]s, so that the aim settles where four naps in five find the
/// transfer done (the 80th percentile of where transfers end against the
/// wake-ups). A nap is the wait's floor of CPU (about 15 us of thread CPU
/// on a virtual machine); the spin after a nap that woke too early is what
/// the aim saves, at the cost of the wake-up's spread in latency.
pub const NAP_STEP_LATER: Duration = Duration::from_micros(4);

/// The earliest a driver's adaptive nap aims: this long before the
/// transfer's expected end. Bounds how far late wake-ups on a busy host can
/// pull the aim.
pub const NAP_LEAD_MAX: Duration = Duration::from_micros(40);

/// The latest a driver's adaptive nap aims: this long after the transfer's
/// expected end. Bounds how far a device slower than its link can push it.
pub const NAP_LAG_MAX: Duration = Duration::from_micros(20);

/// How long a driver's adaptive wait spins after its nap, past the later of
/// the expected end and the nap's aim, before it sleeps on the interrupt:
/// a transfer a little later than the nap costs a short spin, not a second
/// sleep and an interrupt.
pub const NAP_SPIN: Duration = Duration::from_micros(20);

/// Where a channel's adaptive naps end, in nanoseconds after the transfer's
/// expected end (negative: before it); a quantile tracker with fixed steps
/// ([`NAP_STEP`] earlier, [`NAP_STEP_LATER`] later) between [`NAP_LEAD_MAX`] before and [`NAP_LAG_MAX`]
/// after. It starts at [`NAP_WAKE`] before, as a wait without it aims.
#[derive(Debug)]
struct NapAim(Cell<i64>);

impl NapAim {
    fn new() -> Self {
        NapAim(Cell::new(-(NAP_WAKE.as_nanos() as i64)))
    }

    /// The aim's offset from the expected end in nanoseconds.
    fn offset_ns(&self) -> i64 {
        self.0.get()
    }

    /// When a nap for a transfer expected to end at `end` should end.
    fn target(&self, end: Instant) -> Instant {
        let off = self.0.get();
        let d = Duration::from_nanos(off.unsigned_abs());
        if off >= 0 { end + d } else { end - d }
    }

    /// Moves the aim one step: earlier when the first look after a nap found
    /// the transfer done, later when it did not.
    fn learn(&self, done_at_first_look: bool) {
        let off = if done_at_first_look {
            self.0.get() - NAP_STEP.as_nanos() as i64
        } else {
            self.0.get() + NAP_STEP_LATER.as_nanos() as i64
        };
        let lo = -(NAP_LEAD_MAX.as_nanos() as i64);
        let hi = NAP_LAG_MAX.as_nanos() as i64;
        self.0.set(off.clamp(lo, hi));
    }
}

impl<R: RegisterSpace + 'static> AxiDma<R> {
    /// The same driver, its state as it is, over a boxed register window.
    pub fn boxed(self) -> AxiDma<Box<dyn RegisterSpace>> {
        AxiDma {
            regs: Box::new(self.regs),
            cfg: self.cfg,
            pending: self.pending,
            written_cr: self.written_cr,
            written_msb: self.written_msb,
            failed: self.failed,
            sg_included: self.sg_included,
            nap: self.nap,
        }
    }
}

impl<R: RegisterSpace> AxiDma<R> {
    /// The driver's state over `regs`, no register touched yet; the length
    /// width checked.
    fn untouched(regs: R, cfg: Config) -> Result<Self, Error> {
        if !(8..=26).contains(&cfg.length_width) {
            return Err(Error::BadLengthWidth(cfg.length_width));
        }
        Ok(AxiDma {
            regs,
            cfg,
            pending: [Cell::new(0), Cell::new(0)],
            written_cr: [Cell::new(None), Cell::new(None)],
            written_msb: [Cell::new(None), Cell::new(None)],
            failed: Cell::new(false),
            sg_included: Cell::new(false),
            nap: [NapAim::new(), NapAim::new()],
        })
    }

    /// A driver for the engine behind `regs`; resets it.
    pub fn new(regs: R, cfg: Config) -> Result<Self, Error> {
        let dma = Self::untouched(regs, cfg)?;
        dma.reset()?;
        dma.sg_included
            .set(dma.status(Channel::Mm2s)? & DMASR_SG_INCLD != 0);
        Ok(dma)
    }

    /// A driver for the engine behind `regs` as it is, without a reset: for a
    /// party that programs the engine itself and needs only the driver's halt
    /// ([`recover`](Self::recover)) and channel stop ([`stop`](Self::stop)).
    pub fn attach(regs: R, cfg: Config) -> Result<Self, Error> {
        let dma = Self::untouched(regs, cfg)?;
        dma.sg_included
            .set(dma.status(Channel::Mm2s)? & DMASR_SG_INCLD != 0);
        Ok(dma)
    }

    /// Whether the engine was built with its scatter-gather engine
    /// (DMASR.SGIncld, read at the first reset): PG021 then offers no direct
    /// register mode.
    pub fn sg_included(&self) -> bool {
        self.sg_included.get()
    }

    /// Largest transfer the length register allows.
    pub fn max_len(&self) -> usize {
        (1usize << self.cfg.length_width) - 1
    }

    fn reg(&self, ch: Channel, r: usize) -> Result<u32, Error> {
        Ok(self.regs.read(ch.base() + r)?)
    }

    fn set(&self, ch: Channel, r: usize, v: u32) -> Result<(), Error> {
        // SAFETY: this driver is the window's only writer. The writes that can
        // start a transfer are LENGTH (only from the unsafe `start`, whose
        // caller vouches for ADDR's range) and TAILDESC (from the unsafe
        // `sg_start`, or `ring_flush` over descriptors filled by the unsafe
        // `DescRing::push_part`, whose callers vouch for every buffer address;
        // the descriptors are DMA memory the ring owns). Every other write
        // stops, resets or configures the engine.
        Ok(unsafe { self.regs.write(ch.base() + r, v) }?)
    }

    /// Reads a channel's DMASR.
    pub fn status(&self, ch: Channel) -> Result<u32, Error> {
        self.reg(ch, DMASR)
    }

    /// Soft-resets the engine (both channels), waits for the reset to finish and
    /// confirms both channels halted. A successful reset puts a failed engine back
    /// in service.
    pub fn reset(&self) -> Result<(), Error> {
        self.reset_within(self.cfg.timeout)
    }

    /// [`reset`](Self::reset), waiting at most `patience` for it to finish.
    fn reset_within(&self, patience: Duration) -> Result<(), Error> {
        self.forget_registers();
        self.set(Channel::Mm2s, DMACR, DMACR_RESET)?;
        let deadline = Instant::now() + patience;
        loop {
            let done = self.reg(Channel::Mm2s, DMACR)? & DMACR_RESET == 0
                && self.status(Channel::Mm2s)? & DMASR_HALTED != 0
                && self.status(Channel::S2mm)? & DMASR_HALTED != 0;
            if done {
                break;
            }
            if Instant::now() > deadline {
                self.failed.set(true);
                return Err(Error::Timeout {
                    channel: Channel::Mm2s,
                    timeout: self.cfg.timeout,
                    dmasr: self.status(Channel::Mm2s)?,
                });
            }
            std::hint::spin_loop();
        }
        for p in &self.pending {
            p.set(0);
        }
        self.failed.set(false);
        Ok(())
    }

    /// Forgets what the driver believes the registers hold, so the next start
    /// writes DMACR and the address MSBs again.
    fn forget_registers(&self) {
        for i in 0..2 {
            self.written_cr[i].set(None);
            self.written_msb[i].set(None);
        }
    }

    /// Whether the engine is out of service: it could not be confirmed halted
    /// after a failure, and no reset has succeeded since.
    pub fn is_failed(&self) -> bool {
        self.failed.get()
    }

    /// Fails with [`Error::Failed`] if the engine is out of service and a reset
    /// does not bring it back.
    pub(crate) fn usable(&self) -> Result<(), Error> {
        if self.failed.get() && self.reset().is_err() {
            return Err(Error::Failed);
        }
        Ok(())
    }

    /// After a timeout or an error: stops both channels (RS cleared; PG021 halts a
    /// channel once the transfer in progress ends), waits a moment ([`HALT_GRACE`])
    /// for both to report Halted, then soft-resets the engine to clear its
    /// sticky error state. Returns whether the device is confirmed to own no memory
    /// any more (halted or reset); if not, the engine is marked failed and the
    /// caller must treat every buffer it was given as lost.
    ///
    /// The wait for Halted is short ([`HALT_GRACE`]): an S2MM channel with
    /// descriptors fetched and no stream data does not assert Halted on the IP
    /// at all, and the soft reset that follows itself waits for the transfer in
    /// progress and confirms both channels halted (with the rest of two
    /// timeouts, the patience the halt and the reset had before).
    pub fn recover(&self) -> bool {
        self.forget_registers();
        for ch in [Channel::Mm2s, Channel::S2mm] {
            let _ = self.set(ch, DMACR, 0);
        }
        let grace = self.cfg.timeout.min(HALT_GRACE);
        let deadline = Instant::now() + grace;
        let halted = |ch| self.status(ch).is_ok_and(|sr| sr & DMASR_HALTED != 0);
        let mut stopped = false;
        while Instant::now() <= deadline {
            if halted(Channel::Mm2s) && halted(Channel::S2mm) {
                stopped = true;
                break;
            }
            std::thread::yield_now();
        }
        // The reset waits for a transfer in progress: give it the rest of
        // two timeouts (the halt's and the reset's own).
        let reset = self.reset_within(2 * self.cfg.timeout - grace).is_ok();
        if !reset {
            self.failed.set(true);
        }
        stopped || reset
    }

    /// Writes `value` to register `r` unless the last write there was the same.
    fn set_cached(
        &self,
        ch: Channel,
        r: usize,
        cache: &Cell<Option<u32>>,
        value: u32,
    ) -> Result<(), Error> {
        if cache.get() != Some(value) {
            self.set(ch, r, value)?;
            cache.set(Some(value));
        }
        Ok(())
    }

    /// Starts a direct-mode transfer of `len` bytes at bus address `addr`, with the
    /// completion interrupt enabled if `irq`. Refused with [`Error::Busy`] while the
    /// channel's last transfer has not been collected by [`poll`](Self::poll) or
    /// [`wait`](Self::wait), and with [`Error::Halted`] when the channel does not
    /// leave Halted.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be DMA memory that nothing else uses until the
    /// transfer is collected ([`wait`](Self::wait) or [`poll`](Self::poll) returns
    /// its completion) or, after an error or timeout, until [`recover`](Self::recover)
    /// or [`reset`](Self::reset) has confirmed the engine halted: the device reads
    /// (MM2S) or writes (S2MM) it until then. If neither happens, the range stays
    /// the device's for good. The caller also keeps the ordering contract of
    /// [`crate::platform::order`] for the data it wrote there (this call issues the
    /// write barrier before the doorbell).
    pub unsafe fn start(&self, ch: Channel, addr: u64, len: usize, irq: bool) -> Result<(), Error> {
        self.usable()?;
        if len == 0 {
            return Err(Error::ZeroLength { channel: ch });
        }
        if len > self.max_len() {
            return Err(Error::TooLong {
                channel: ch,
                len,
                max: self.max_len(),
            });
        }
        let i = ch as usize;
        if self.sg_included.get() {
            // Direct register mode does not exist on this engine.
            return Err(Error::SgOnly(ch));
        }
        if self.pending[i].get() != 0 {
            return Err(Error::Busy(ch));
        }
        let mut cr = DMACR_RS | (1 << DMACR_IRQ_THRESHOLD_SHIFT);
        if irq {
            cr |= DMACR_IOC_IRQ_EN | DMACR_ERR_IRQ_EN;
        }
        let wrote = self.written_cr[i].get() != Some(cr);
        self.set_cached(ch, DMACR, &self.written_cr[i], cr)?;
        let mut sr = self.status(ch)?;
        if wrote && sr & DMASR_HALTED != 0 {
            // The channel leaves Halted shortly after RS is set.
            let deadline = Instant::now() + self.cfg.timeout;
            while sr & DMASR_HALTED != 0 && Instant::now() <= deadline {
                std::hint::spin_loop();
                sr = self.status(ch)?;
            }
        }
        if sr & DMASR_HALTED != 0 {
            // Halted behind the driver's back, or by an error that RS cannot
            // clear: nothing starts, and DMACR is written again next time.
            self.written_cr[i].set(None);
            return Err(Error::Halted {
                channel: ch,
                dmasr: sr,
            });
        }
        // Stale interrupt bits (a completion nobody collected) would end the wait
        // for this transfer early: clear them.
        if sr & DMASR_IRQ_MASK != 0 {
            self.set(ch, DMASR, sr & DMASR_IRQ_MASK)?;
        }
        self.set(ch, ADDR, addr as u32)?;
        self.set_cached(ch, ADDR_MSB, &self.written_msb[i], (addr >> 32) as u32)?;
        // Rule 1 of the ordering contract: the buffer before the doorbell.
        platform::dma_wmb();
        self.set(ch, LENGTH, len as u32)?;
        // In flight only once the doorbell was taken.
        self.pending[i].set(len);
        Ok(())
    }

    /// Takes channel `ch` into service without starting a transfer, as
    /// drivers do when they open an engine (PYNQ's DMA starts both channels
    /// when the IP is created): sets DMACR.RS (the completion interrupts
    /// enabled if `irq`) and waits until DMASR leaves Halted. A channel
    /// already running is left as it is. On a scatter-gather engine PG021
    /// wants CURDESC pointing at a descriptor before RS is set: `park` is that
    /// descriptor ([`DESC_WORDS`] words, 64-byte aligned); it is never handed
    /// over (no TAILDESC is written, so the engine fetches nothing), and the
    /// next [`sg_start`](Self::sg_start) halts the channel and points CURDESC
    /// at its own descriptors. Direct mode needs no `park`.
    ///
    /// # Safety
    ///
    /// On a scatter-gather engine `park` becomes the channel's current
    /// descriptor: it must stay this DMA memory, unchanged, until the channel
    /// is halted or armed again ([`stop`](Self::stop), [`reset`](Self::reset),
    /// [`sg_start`](Self::sg_start), [`ring_start`](Self::ring_start)). A
    /// TAILDESC write meanwhile (a [`ring_flush`](Self::ring_flush) of a ring
    /// started before) would make the engine fetch it as a descriptor.
    pub unsafe fn run(
        &self,
        ch: Channel,
        irq: bool,
        park: Option<&DmaBuf<u32>>,
    ) -> Result<(), Error> {
        self.usable()?;
        let i = ch as usize;
        let sr = self.status(ch)?;
        if sr & DMASR_HALTED == 0
            && self.written_cr[i]
                .get()
                .is_some_and(|cr| cr & DMACR_RS != 0)
        {
            return Ok(());
        }
        if self.sg_included.get() {
            let park = park.ok_or(Error::NoParkingDescriptor(ch))?;
            if park.is_lost() {
                return Err(crate::mem::Error::Lost.into());
            }
            check_descriptor_alignment(ch, park)?;
            if sr & DMASR_HALTED == 0 {
                self.halt(ch)?;
            }
            self.sg_arm(ch, park.bus_addr(), irq, false)?;
        } else {
            let mut cr = DMACR_RS | (1 << DMACR_IRQ_THRESHOLD_SHIFT);
            if irq {
                cr |= DMACR_IOC_IRQ_EN | DMACR_ERR_IRQ_EN;
            }
            self.set(ch, DMACR, cr)?;
            self.written_cr[i].set(Some(cr));
        }
        let deadline = Instant::now() + self.cfg.timeout;
        let mut sr = self.status(ch)?;
        while sr & DMASR_HALTED != 0 {
            if Instant::now() > deadline {
                // Halted by an error RS cannot clear: DMACR is written again
                // next time.
                self.written_cr[i].set(None);
                return Err(Error::Halted {
                    channel: ch,
                    dmasr: sr,
                });
            }
            std::hint::spin_loop();
            sr = self.status(ch)?;
        }
        Ok(())
    }

    /// Stops channel `ch` (DMACR.RS cleared) and waits until DMASR reports
    /// Halted; an engine that does not halt in time is recovered
    /// ([`recover`](Self::recover)) and the timeout returned. Only between
    /// transfers: a transfer in flight is lost to the stop.
    pub fn stop(&self, ch: Channel) -> Result<(), Error> {
        self.usable()?;
        if self.pending[ch as usize].get() != 0 {
            return Err(Error::Busy(ch));
        }
        self.halt(ch)
    }

    /// Reads DMASR; if it shows an error, names it, recovers the engine
    /// ([`recover`](Self::recover)) and fails.
    fn checked_status(&self, ch: Channel) -> Result<u32, Error> {
        let sr = self.status(ch)?;
        if sr & DMASR_ERR_MASK != 0 {
            let what = decode_errors(sr);
            self.recover();
            return Err(Error::Device {
                channel: ch,
                what,
                dmasr: sr,
            });
        }
        Ok(sr)
    }

    /// Acknowledges the completion interrupt bit of `ch` (write 1 to clear).
    fn acknowledge(&self, ch: Channel) -> Result<(), Error> {
        // Dly_Irq too: a coalesced ring's last partial batch raises it.
        self.set(ch, DMASR, DMASR_IOC_IRQ | DMASR_DLY_IRQ)
    }

    /// Checks once whether the transfer on `ch` finished: `Some(bytes)` (for S2MM
    /// the bytes actually received) when it did.
    pub fn poll(&self, ch: Channel) -> Result<Option<usize>, Error> {
        if self.checked_status(ch)? & DMASR_IOC_IRQ == 0 {
            return Ok(None);
        }
        // Rule 2 of the ordering contract: the completion before the data (and
        // before S2MM's LENGTH).
        platform::dma_rmb();
        self.acknowledge(ch)?;
        let n = match ch {
            Channel::Mm2s => self.pending[0].get(),
            Channel::S2mm => (self.reg(ch, LENGTH)? & ((1 << self.cfg.length_width) - 1)) as usize,
        };
        self.pending[ch as usize].set(0);
        Ok(Some(n))
    }

    /// Repeats `check` until it gives an answer, waiting between tries as `how`
    /// says, at most the configured timeout; re-arms the interrupt line after. On
    /// a timeout the engine is recovered ([`recover`](Self::recover)) before the
    /// error is returned.
    fn wait_for<T>(
        &self,
        ch: Channel,
        how: &Wait<'_>,
        check: impl FnMut() -> Result<Option<T>, Error>,
    ) -> Result<T, Error> {
        wait_loop(
            self.cfg.timeout,
            how,
            check,
            || self.timed_out(ch),
            || {
                self.recover();
            },
            || self.enable_completion_irq(ch),
            Some(&self.nap[ch as usize]),
        )
    }

    /// Where channel `ch`'s adaptive naps end, in nanoseconds after the
    /// transfer's expected end (negative: before it), as the driver has
    /// learned it so far ([`Wait::Adaptive`]).
    pub fn nap_aim_ns(&self, ch: Channel) -> i64 {
        self.nap[ch as usize].offset_ns()
    }

    /// Enables the completion and error interrupts of channel `ch` (DMACR
    /// IOC_IrqEn and Err_IrqEn) if the driver's last DMACR write left them
    /// off: an adaptive wait does so when it stops spinning. A completion
    /// already latched in DMASR then raises the interrupt at once (PG021: the
    /// interrupt output is the status bit and its enable).
    fn enable_completion_irq(&self, ch: Channel) -> Result<(), Error> {
        let i = ch as usize;
        let irq = DMACR_IOC_IRQ_EN | DMACR_ERR_IRQ_EN;
        let Some(cr) = self.written_cr[i].get() else {
            return Ok(());
        };
        if cr & irq != irq {
            self.set_cached(ch, DMACR, &self.written_cr[i], cr | irq)?;
        }
        Ok(())
    }

    /// The longest wait for any completion ([`Config::timeout`]).
    pub fn timeout(&self) -> Duration {
        self.cfg.timeout
    }

    /// After a wait on `ch` ran out: recovers the engine (halts it, so that
    /// no buffer handed back is still the device's) and returns the timeout
    /// error with the DMASR seen before.
    pub fn timed_out(&self, ch: Channel) -> Error {
        let dmasr = match self.status(ch) {
            Ok(v) => v,
            Err(e) => {
                self.recover();
                return e;
            }
        };
        self.recover();
        Error::Timeout {
            channel: ch,
            timeout: self.cfg.timeout,
            dmasr,
        }
    }

    /// Waits for the transfer on `ch` to finish, at most the configured timeout.
    pub fn wait(&self, ch: Channel, how: &Wait<'_>) -> Result<usize, Error> {
        self.wait_for(ch, how, || self.poll(ch))
    }
}

/// The wait loop of every completion: repeats `check` until it gives an
/// answer, waiting between tries as `how` says, at most `timeout`; re-arms the
/// interrupt line after. `timed_out` makes the error once the time is up
/// (after halting the engine); `halt` halts it when the interrupt line
/// fails. `check` may take and release whatever guards the engine at each
/// try, so that a caller that shares the engine never holds it while asleep.
///
/// With [`Wait::Adaptive`] the caller's transfer must have its completion
/// interrupt enabled already (a ring started with `irq`).
pub fn wait_until<T>(
    timeout: Duration,
    how: &Wait<'_>,
    check: impl FnMut() -> Result<Option<T>, Error>,
    timed_out: impl FnOnce() -> Error,
    halt: impl FnOnce(),
) -> Result<T, Error> {
    wait_loop(timeout, how, check, timed_out, halt, || Ok(()), None)
}

/// One timed sleep of `length` (a "nap"), as an adaptive wait
/// ([`Wait::Adaptive`]) takes it: the thread's timer slack lowered to 1 us
/// (once per thread, [`platform::cpu::keep_timer_slack_low`]), then one
/// `nanosleep`. What it costs the sleeping thread (its CPU clock, the
/// wake-up included) is the floor of every wait that naps: `dmaflow bench
/// loopback`'s `nap` rows measure it beside the transfers.
pub fn nap(length: Duration) {
    platform::cpu::keep_timer_slack_low();
    std::thread::sleep(length);
}

/// [`wait_until`], calling `arm` once when an adaptive wait stops spinning
/// (before it first re-arms the line and sleeps). Given `aim`, an adaptive
/// wait far from its end naps once, to the aim, looks once (and moves the
/// aim by what it saw), then spins up to [`NAP_SPIN`] past the later of the
/// aim and the expected end before it sleeps on the line.
fn wait_loop<T>(
    timeout: Duration,
    how: &Wait<'_>,
    mut check: impl FnMut() -> Result<Option<T>, Error>,
    timed_out: impl FnOnce() -> Error,
    halt: impl FnOnce(),
    mut arm: impl FnMut() -> Result<(), Error>,
    aim: Option<&NapAim>,
) -> Result<T, Error> {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut pause = pause::Pause::new();
    let mut armed = false;
    // An adaptive wait's spin ends here; with an aim, the one nap ends at
    // `nap_to`.
    let (mut nap_to, spin_end) = match (how, aim) {
        (Wait::Adaptive { spin_until, .. }, Some(a))
            if spin_until.saturating_duration_since(start) > 2 * NAP_WAKE =>
        {
            let t = a.target(*spin_until).max(start + NAP_WAKE);
            (Some(t), (*spin_until).max(t) + NAP_SPIN)
        }
        (Wait::Adaptive { spin_until, .. }, _) => (None, *spin_until),
        _ => (None, deadline),
    };
    let mut first_look_after_nap = false;
    loop {
        let seen = check()?;
        if first_look_after_nap {
            first_look_after_nap = false;
            if let Some(a) = aim {
                a.learn(seen.is_some());
            }
        }
        if let Some(v) = seen {
            // The line stays as it is: re-armed before the next sleep on it
            // only (an enable of a line already armed is no system call).
            return Ok(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(timed_out());
        }
        match how {
            Wait::Poll => std::hint::spin_loop(),
            Wait::Yield => pause.pause(),
            Wait::Adaptive { .. } if nap_to.is_some() => {
                // One nap, to where the transfers have been found to end
                // (the wake-up's lateness included), then one look.
                if let Some(t) = nap_to.take() {
                    nap(t.min(deadline).saturating_duration_since(now));
                }
                first_look_after_nap = true;
            }
            Wait::Adaptive { spin_until, .. }
                if aim.is_none() && spin_until.saturating_duration_since(now) > 2 * NAP_WAKE =>
            {
                // Far from the expected end: nap until just before it, the
                // thread's timer slack lowered (once) so that it ends on time.
                nap((*spin_until - NAP_WAKE)
                    .min(deadline)
                    .saturating_duration_since(now));
            }
            Wait::Adaptive { line, .. } if now < spin_end || !line.wired() => {
                // A line not wired to this program: the spin goes on.
                std::hint::spin_loop()
            }
            Wait::Adaptive { line, .. } => {
                if !armed {
                    // The device's interrupt on (a cached no-op once it is),
                    // the line unmasked, then one more look: a completion from
                    // before either raised the interrupt or is seen now.
                    armed = true;
                    if let Err(e) = arm().and_then(|()| Ok(line.enable()?)) {
                        halt();
                        return Err(e);
                    }
                    continue;
                }
                // Sleep in slices (a lost interrupt costs one slice). An
                // interrupt leaves the line masked: re-arm before the next
                // sleep only, never after the completion.
                match line.wait((deadline - now).min(IRQ_RECHECK)) {
                    Ok(_) => armed = false,
                    Err(platform::Error::Timeout(_)) => {}
                    Err(e) => {
                        halt();
                        return Err(e.into());
                    }
                }
            }
            // Unmask before sleeping (a no-op where the line is armed
            // already): an interrupt taken without a wait (a completion seen
            // by polling, an error) leaves the line masked. Sleep in slices,
            // so that a lost interrupt is found by the next look at DMASR
            // instead of ending in a timeout.
            Wait::Irq(line) => match line
                .enable()
                .and_then(|()| line.wait((deadline - now).min(IRQ_RECHECK)))
            {
                Ok(_) | Err(platform::Error::Timeout(_)) => {}
                // The transfer is still the device's: halt it before
                // the error goes back with the buffers.
                Err(e) => {
                    halt();
                    return Err(e.into());
                }
            },
        }
    }
}

/// Refuses descriptors off the 0x40-byte grid (the pool keeps every buffer on
/// it; this names the failure should that ever not hold).
pub(crate) fn check_descriptor_alignment(ch: Channel, desc: &DmaBuf<u32>) -> Result<(), Error> {
    let addr = desc.bus_addr();
    if !addr.is_multiple_of(DESC_ALIGN) {
        return Err(Error::MisalignedDescriptors { channel: ch, addr });
    }
    Ok(())
}

/// 32-bit words per SG descriptor (0x40 bytes: the descriptor alignment).
pub const DESC_WORDS: usize = (DESC_ALIGN / 4) as usize;

/// A chain of SG descriptors handed to a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgChain {
    /// Descriptors used, from the start of the ring.
    pub descriptors: usize,
}

/// How long an S2MM channel whose packet ended before its chain may take to
/// halt before the engine is reset ([`AxiDma::sg_poll`]).
const EARLY_END_PATIENCE: Duration = Duration::from_millis(2);

impl<R: RegisterSpace> AxiDma<R> {
    /// Scatter-gather: halts the channel, writes one descriptor per piece of
    /// `segments` (pieces longer than the length register are split over several
    /// descriptors) into `ring` (a descriptor ring in DMA memory, [`DESC_WORDS`]
    /// words per descriptor), points CURDESC at the first, sets RS and starts the
    /// engine by writing TAILDESC. MM2S sends the segments as one packet (TXSOF on
    /// the first descriptor, TXEOF on the last); for S2MM the segments are the
    /// buffers to receive into.
    ///
    /// # Safety
    ///
    /// Every `(addr, len)` range of `segments` must be DMA memory that nothing else
    /// uses until [`sg_wait`](Self::sg_wait) returns the chain's completion or,
    /// after an error or timeout, until [`recover`](Self::recover) or
    /// [`reset`](Self::reset) has confirmed the engine halted; the same holds for
    /// `ring`, which the device reads and writes until then. If neither happens,
    /// the ranges stay the device's for good.
    pub unsafe fn sg_start(
        &self,
        ch: Channel,
        ring: &mut DmaBuf<u32>,
        segments: &[(u64, usize)],
        irq: bool,
    ) -> Result<SgChain, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.sg_submit(ch, ring, segments, irq, false) }
    }

    /// [`sg_start`](Self::sg_start) in cyclic descriptor mode (DMACR's
    /// Cyclic BD Enable): the engine follows the chain round for ever,
    /// ignoring the descriptors' Cmplt bits, so the segments go out (MM2S) or
    /// are written (S2MM) again and again until [`stop`](Self::stop) or
    /// [`reset`](Self::reset). TAILDESC is written with an address outside the
    /// chain, as PG021 asks. There is no completion to wait for.
    ///
    /// # Safety
    ///
    /// As [`sg_start`](Self::sg_start), until the channel is confirmed halted
    /// ([`stop`](Self::stop) returned `Ok`, or a reset or recovery confirmed
    /// it).
    pub unsafe fn sg_start_cyclic(
        &self,
        ch: Channel,
        ring: &mut DmaBuf<u32>,
        segments: &[(u64, usize)],
        irq: bool,
    ) -> Result<SgChain, Error> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.sg_submit(ch, ring, segments, irq, true) }
    }

    /// [`sg_start`](Self::sg_start), once or cyclic.
    ///
    /// # Safety
    ///
    /// As [`sg_start`](Self::sg_start).
    unsafe fn sg_submit(
        &self,
        ch: Channel,
        ring: &mut DmaBuf<u32>,
        segments: &[(u64, usize)],
        irq: bool,
        cyclic: bool,
    ) -> Result<SgChain, Error> {
        self.usable()?;
        if ring.is_lost() {
            return Err(crate::mem::Error::Lost.into());
        }
        check_descriptor_alignment(ch, ring)?;
        if self.status(ch)? & DMASR_SG_INCLD == 0 {
            return Err(Error::NoSg(ch));
        }
        let max = self.max_len();
        let mut pieces = Vec::new();
        for &(addr, len) in segments {
            if len == 0 {
                return Err(Error::ZeroLength { channel: ch });
            }
            let mut off = 0;
            while off < len {
                let n = (len - off).min(max);
                pieces.push((addr + off as u64, n));
                off += n;
            }
        }
        if pieces.is_empty() {
            return Err(Error::ZeroLength { channel: ch });
        }
        let capacity = ring.len() / DESC_WORDS;
        if pieces.len() > capacity {
            return Err(Error::RingFull {
                channel: ch,
                needed: pieces.len(),
                capacity,
            });
        }
        // The descriptors may be the device's until the channel is halted: halt
        // it before writing them (word by word, never through a slice).
        self.halt(ch)?;
        let base = ring.bus_addr();
        let desc_addr = |i: usize| base + (i as u64) * DESC_ALIGN;
        let last = pieces.len() - 1;
        for (i, &(addr, len)) in pieces.iter().enumerate() {
            let next = desc_addr(if i == last { 0 } else { i + 1 });
            let mut control = len as u32 & DESC_LENGTH_MASK;
            if ch == Channel::Mm2s {
                if i == 0 {
                    control |= DESC_CTRL_TXSOF;
                }
                if i == last {
                    control |= DESC_CTRL_TXEOF;
                }
            }
            let mut d = [0u32; DESC_WORDS];
            d[(DESC_NXTDESC / 4) as usize] = next as u32;
            d[(DESC_NXTDESC_MSB / 4) as usize] = (next >> 32) as u32;
            d[(DESC_BUFFER_ADDRESS / 4) as usize] = addr as u32;
            d[(DESC_BUFFER_ADDRESS_MSB / 4) as usize] = (addr >> 32) as u32;
            d[(DESC_CONTROL / 4) as usize] = control;
            for (w, v) in d.into_iter().enumerate() {
                ring.write_volatile(i * DESC_WORDS + w, v);
            }
        }
        ring.sync_for_device(pieces.len() * DESC_ALIGN as usize)?;
        self.sg_arm(ch, base, irq, cyclic)?;
        // Cyclic: a tail outside the chain (the engine never reaches it).
        let tail = desc_addr(if cyclic { last + 1 } else { last });
        // Rule 1 of the ordering contract: descriptors before the doorbell.
        platform::dma_wmb();
        self.set(ch, TAILDESC_MSB, (tail >> 32) as u32)?;
        self.set(ch, TAILDESC, tail as u32)?;
        Ok(SgChain {
            descriptors: pieces.len(),
        })
    }

    /// Waits until every descriptor of `chain` reports Cmplt; returns the bytes each
    /// one transferred (for S2MM: received).
    pub fn sg_wait(
        &self,
        ch: Channel,
        ring: &DmaBuf<u32>,
        chain: SgChain,
        how: &Wait<'_>,
    ) -> Result<Vec<usize>, Error> {
        self.wait_for(ch, how, || self.sg_poll(ch, ring, chain))
    }

    /// Checks once whether `chain` finished: `Some(bytes of each descriptor)`
    /// when every descriptor reports Cmplt (for S2MM: up to the one with
    /// RXEOF). A descriptor that reports an error is the error, after the
    /// engine was recovered.
    pub fn sg_poll(
        &self,
        ch: Channel,
        ring: &DmaBuf<u32>,
        chain: SgChain,
    ) -> Result<Option<Vec<usize>>, Error> {
        let status = |i: usize| {
            ring.load_word(i * DESC_WORDS + (DESC_STATUS / 4) as usize)
                .unwrap_or(0)
        };
        let last = chain.descriptors - 1;
        self.checked_status(ch)?;
        // Drop stale lines before looking at what the engine wrote.
        ring.sync_range_for_cpu(0, chain.descriptors * DESC_ALIGN as usize)?;
        // A descriptor that reports an error ends the wait with it.
        if let Some(s) = (0..=last).map(status).find(|s| s & DESC_STS_ERR_MASK != 0) {
            self.recover();
            return Err(Error::Descriptor {
                channel: ch,
                what: decode_descriptor_errors(s),
                status: s,
            });
        }
        // S2MM may finish a packet before the last descriptor: its RXEOF ends it.
        let done = (0..=last).find(|&i| {
            let s = status(i);
            s & DESC_STS_CMPLT != 0
                && (i == last || (ch == Channel::S2mm && s & DESC_STS_RXEOF != 0))
        });
        let Some(end) = done else {
            return Ok(None);
        };
        // Rule 2 of the ordering contract: Cmplt before what it announces.
        platform::dma_rmb();
        if end < last {
            // A packet that ended early leaves descriptors of the chain with
            // the engine, over the buffer handed back now: the next packet
            // would land there. The channel stops before the caller gets the
            // buffer (the next chain starts it again). An S2MM channel holding
            // descriptors with no data to fill them does not report Halted
            // (PG021's IP; Linux's driver resets it): after a moment the
            // engine is reset, which stops the other channel too.
            if let Err(e) = self.halt_within(ch, EARLY_END_PATIENCE)
                && self.is_failed()
            {
                return Err(e);
            }
        }
        self.acknowledge(ch)?;
        Ok(Some(
            (0..=end)
                .map(|i| (status(i) & DESC_LENGTH_MASK) as usize)
                .collect(),
        ))
    }
}
