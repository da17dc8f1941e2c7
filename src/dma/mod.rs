//! Transfers over an AXI DMA engine, as an application uses them: a two-way
//! transfer (MM2S out, S2MM back) either zero-copy, on [`DmaBuf`]s the application
//! fills and reads in place, or through standard I/O, copying through buffers the
//! driver owns. Completion by busy-polling, scheduled polling (a short spin,
//! then short sleeps), or interrupts.

mod inflight;
mod proxy;
mod ring;

pub use inflight::{Done, Failed, InFlight};
pub use proxy::Proxy;
pub use ring::{PacketRing, Starved};

use crate::axi::{self, AxiDma, Channel, Wait};
use crate::mem::{self, DmaBuf, DmaPool};
use crate::platform::{IrqLine, RegisterSpace};

/// How the caller learns that a transfer finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Busy-poll DMASR ("user-level polling").
    Poll,
    /// Poll DMASR, leaving the core to others between reads: a short spin,
    /// then short sleeps ("user-level scheduled"; [`crate::axi::pause`]).
    Yield,
    /// Sleep on the channel's interrupt line.
    Irq,
    /// Wait for the time the transfer should take at the link's rate
    /// ([`Link`]) without the interrupt, then sleep on the interrupt line:
    /// short transfers end in a spin (no interrupt, no system call), long
    /// ones in a timer nap until just before their expected end and a short
    /// spin (one system call). Only a transfer later than the link says
    /// sleeps on the line, which is re-armed only before such a sleep. On
    /// rings the engine coalesces interrupts (DMACR.IRQThreshold). The
    /// default where it wins ([`Completion::DEFAULT`]).
    Adaptive,
    /// Hand the request to a kernel-style driver thread ([`Proxy`]) that copies
    /// through its own DMA buffers and sleeps on the interrupt. The thread owns the
    /// engine, so this mode is used through [`Proxy::start`]; [`Engine`]'s own calls
    /// refuse it with [`Error::ProxyOnly`].
    Proxy,
}

impl Completion {
    /// Every mode, in the order the papers discuss them.
    pub const ALL: [Completion; 5] = [
        Completion::Poll,
        Completion::Yield,
        Completion::Irq,
        Completion::Adaptive,
        Completion::Proxy,
    ];

    /// The mode to use when nothing says otherwise: adaptive (the latency of
    /// polling on short transfers, the CPU of interrupts on long ones).
    pub const DEFAULT: Completion = Completion::Adaptive;

    /// The mode's short name: `poll`, `yield`, `irq`, `adaptive` or `proxy`.
    pub fn name(self) -> &'static str {
        match self {
            Completion::Poll => "poll",
            Completion::Yield => "yield",
            Completion::Irq => "irq",
            Completion::Adaptive => "adaptive",
            Completion::Proxy => "proxy",
        }
    }

    /// Whether the mode sleeps on the interrupt line (so transfers start with
    /// the engine's interrupts wanted).
    pub fn sleeps(self) -> bool {
        matches!(self, Completion::Irq | Completion::Adaptive)
    }
}

/// What an adaptive wait ([`Completion::Adaptive`]) expects a transfer to
/// take: the device's fixed latency plus the bytes at the link's rate. A
/// two-way transfer's wait lasts until then (from the transfer's start): a
/// timer nap while the end is far ([`crate::axi::NAP_WAKE`]), a spin over its
/// last microseconds, then a sleep on the interrupt if the transfer is late
/// (Linux blk-mq's hybrid polling: the latency of polling, near the CPU of
/// sleeping, one system call per wait). Also the clock by which a stream's
/// ring is sized in time ([`Link::slots_for`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// The stream's rate in bytes per second; `None` when unknown or
    /// unlimited (only the latency is spun).
    pub bytes_per_s: Option<f64>,
    /// The device's own latency per transfer (start-up, write-back), and
    /// what a wake-up would cost beyond it.
    pub latency: std::time::Duration,
    /// The longest spin without a nap before it ([`Link::spin`], which rings
    /// use: beyond it they sleep at once); also the most a two-way wait spins
    /// for the device's latency once the expected end has passed.
    pub spin_limit: std::time::Duration,
}

impl Default for Link {
    /// Rate unknown, 5 us of latency, spins of at most 20 us (a sleep and
    /// wake-up on a loaded Linux host costs about 10 to 20 us).
    fn default() -> Self {
        Link {
            bytes_per_s: None,
            latency: std::time::Duration::from_micros(5),
            spin_limit: std::time::Duration::from_micros(20),
        }
    }
}

impl Link {
    /// How long after its start a transfer of `bytes` should be over.
    pub fn expected(&self, bytes: usize) -> std::time::Duration {
        let link = self
            .bytes_per_s
            .filter(|r| r.is_finite() && *r > 0.0)
            .map_or(0.0, |r| bytes as f64 / r);
        self.latency + std::time::Duration::from_secs_f64(link.min(1e6))
    }

    /// How long to spin from its start for a transfer of `bytes`, or zero
    /// (sleep at once) when that is beyond the spin limit.
    pub fn spin(&self, bytes: usize) -> std::time::Duration {
        let t = self.expected(bytes);
        if t > self.spin_limit {
            std::time::Duration::ZERO
        } else {
            t
        }
    }

    /// Until when a wait that begins now should wait without the interrupt
    /// for a transfer of `bytes` started at `from`: until its expected end,
    /// and at least the device's latency (at most the spin limit) from now,
    /// so that a long transfer's last stretch, such as S2MM's write-back once
    /// MM2S is done, is spun. The wait naps through what is far from it
    /// ([`crate::axi::Wait::Adaptive`]).
    pub fn spin_until(&self, from: std::time::Instant, bytes: usize) -> std::time::Instant {
        let now = std::time::Instant::now();
        let end = from + self.expected(bytes);
        end.max(now + self.latency.min(self.spin_limit))
    }

    /// How many buffers of `slot_bytes` a ring needs to hold `time` of the
    /// link (rounded up, at least 2), so that a stream survives its program
    /// being off the CPU that long; `None` when the link's rate is unknown,
    /// the slot is empty, or the count does not fit a `usize`.
    pub fn slots_for(&self, time: std::time::Duration, slot_bytes: usize) -> Option<usize> {
        let rate = self.bytes_per_s.filter(|r| r.is_finite() && *r > 0.0)?;
        if slot_bytes == 0 {
            return None;
        }
        let n = (time.as_secs_f64() * rate / slot_bytes as f64).ceil();
        (n.is_finite() && n < usize::MAX as f64).then(|| (n as usize).max(2))
    }
}

/// How a message is cut into transfers (paper 002).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// One transfer of the whole message.
    Unique,
    /// Transfers of at most this many bytes.
    Blocks(usize),
}

/// What went wrong with a transfer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine failed.
    #[error(transparent)]
    Axi(#[from] axi::Error),
    /// DMA memory failed (or a buffer from another pool was given).
    #[error(transparent)]
    Mem(#[from] mem::Error),
    /// Asked to move more bytes than the buffer holds.
    #[error("cannot move {len} bytes through a {capacity}-byte buffer")]
    TooLong {
        /// Bytes asked for.
        len: usize,
        /// Buffer size.
        capacity: usize,
    },
    /// A transfer of zero bytes.
    #[error("a transfer of zero bytes")]
    Empty,
    /// `Completion::Proxy` given to an engine's own calls.
    #[error("Completion::Proxy runs through dma::Proxy, whose driver thread owns the engine")]
    ProxyOnly,
    /// A packet longer than a packet ring's buffers arrived (over several
    /// descriptors); it was dropped and the buffers went back to S2MM.
    #[error("a {len}-byte packet arrived for {slot}-byte ring buffers; it was dropped")]
    PacketTooLong {
        /// Bytes the packet had.
        len: usize,
        /// Bytes one ring buffer holds.
        slot: usize,
    },
    /// A receive buffer shorter than the packet waiting; the packet stays queued.
    #[error(
        "the next packet has {len} bytes, the receive buffer holds {capacity}; it stays queued"
    )]
    OutTooShort {
        /// Bytes of the packet.
        len: usize,
        /// Bytes the buffer holds.
        capacity: usize,
    },
    /// A proxy given a different number of jobs than it has engines.
    #[error("{got} transfers given to a proxy driver with {engines} DMA engines (one each)")]
    Lanes {
        /// Jobs given.
        got: usize,
        /// Engines the proxy drives.
        engines: usize,
    },
    /// A packet ring used after an error stopped it.
    #[error("the packet ring stopped after an earlier error; build a new one")]
    Stopped,
}

impl Error {
    /// Whether the driver already recovered the engine on its way to this error
    /// (a timeout or a device error).
    fn recovered(&self) -> bool {
        matches!(
            self,
            Error::Axi(
                axi::Error::Timeout { .. }
                    | axi::Error::Device { .. }
                    | axi::Error::Descriptor { .. }
            )
        )
    }
}

/// Where the time of the last two-way transfer went: each direction timed from
/// its own start to its own completion (paper 002's TX and RX), so the two
/// overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timing {
    /// From programming MM2S to seeing its completion (summed over blocks).
    pub tx: std::time::Duration,
    /// From programming S2MM (before MM2S) to seeing its completion (summed
    /// over blocks).
    pub rx: std::time::Duration,
}

/// When the two channels of a two-way transfer were programmed, and with
/// how many bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    s2mm: std::time::Instant,
    mm2s: std::time::Instant,
    tx_len: usize,
    rx_len: usize,
}

/// An engine behind boxed register and interrupt types, so that engines of
/// different boards (emulated, UIO) are one type ([`Engine::boxed`]).
pub type DynEngine = Engine<Box<dyn RegisterSpace>, Box<dyn IrqLine>>;

/// An AXI DMA engine with its two interrupt lines and its DMA memory.
pub struct Engine<R, I> {
    dma: AxiDma<R>,
    irq: [I; 2],
    pool: DmaPool,
    timing: std::cell::Cell<Timing>,
    link: std::cell::Cell<Link>,
}

impl<R: RegisterSpace + 'static, I: IrqLine + 'static> Engine<R, I> {
    /// The same engine (driver state, lines and pool as they are) as a
    /// [`DynEngine`].
    pub fn boxed(self) -> DynEngine {
        let [mm2s, s2mm] = self.irq;
        Engine {
            dma: self.dma.boxed(),
            irq: [Box::new(mm2s), Box::new(s2mm)],
            pool: self.pool,
            timing: self.timing,
            link: self.link,
        }
    }
}

impl<R: RegisterSpace, I: IrqLine> Engine<R, I> {
    /// An engine; `irq_mm2s` and `irq_s2mm` are the channels' interrupt lines.
    pub fn new(dma: AxiDma<R>, irq_mm2s: I, irq_s2mm: I, pool: DmaPool) -> Self {
        Engine {
            dma,
            irq: [irq_mm2s, irq_s2mm],
            pool,
            timing: std::cell::Cell::new(Timing::default()),
            link: std::cell::Cell::new(Link::default()),
        }
    }

    /// Tells adaptive completion what to expect of the link (the emulated
    /// board's clock, a board design's stream rate).
    pub fn set_link(&self, link: Link) {
        self.link.set(link);
    }

    /// What adaptive completion expects of the link.
    pub fn link(&self) -> Link {
        self.link.get()
    }

    /// How to wait on channel `ch` in mode `c` for a transfer of `bytes`
    /// started at `from`.
    pub(crate) fn how(
        &self,
        ch: Channel,
        c: Completion,
        from: std::time::Instant,
        bytes: usize,
    ) -> Result<Wait<'_>, Error> {
        Ok(match c {
            Completion::Poll => Wait::Poll,
            Completion::Yield => Wait::Yield,
            Completion::Irq => Wait::Irq(&self.irq[ch as usize]),
            Completion::Adaptive => Wait::Adaptive {
                line: &self.irq[ch as usize],
                spin_until: self.link.get().spin_until(from, bytes),
            },
            Completion::Proxy => return Err(Error::ProxyOnly),
        })
    }

    /// Where the time of the last two-way transfer or message went.
    pub fn last_timing(&self) -> Timing {
        self.timing.get()
    }

    /// The pool zero-copy buffers must come from.
    pub fn pool(&self) -> &DmaPool {
        &self.pool
    }

    fn wait(
        &self,
        ch: Channel,
        c: Completion,
        from: std::time::Instant,
        bytes: usize,
    ) -> Result<usize, Error> {
        let how = self.how(ch, c, from, bytes)?;
        Ok(self.dma.wait(ch, &how)?)
    }

    /// Zero-copy two-way transfer: sends the first `tx_len` bytes of `tx`, receives
    /// into `rx`; returns the bytes received (the stream's TLAST may end it early).
    /// The buffers are borrowed for the whole transfer, so the CPU cannot touch
    /// them while the device does. On a timeout or an error the engine is halted
    /// before this returns; if it cannot be, both buffers are lost to it (see
    /// [`DmaBuf`]) and the engine is out of service until a reset succeeds.
    pub fn two_way(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &mut DmaBuf<u8>,
        c: Completion,
    ) -> Result<usize, Error> {
        let rx_len = rx.len();
        self.two_way_into(tx, tx_len, rx, rx_len, c)
    }

    /// [`two_way`](Self::two_way) receiving into the first `rx_len` bytes of `rx`.
    pub fn two_way_into(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &mut DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<usize, Error> {
        self.check_two_way(tx, tx_len, rx, rx_len, c)?;
        self.timing.set(Timing::default());
        let t0 = self.start_two_way(tx, tx_len, rx, rx_len, c)?;
        self.finish(c, t0, tx, rx)
    }

    /// Everything that can refuse a two-way transfer, checked before any channel
    /// starts.
    fn check_two_way(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<(), Error> {
        if c == Completion::Proxy {
            return Err(Error::ProxyOnly);
        }
        self.pool.check(tx)?;
        self.pool.check(rx)?;
        if tx_len == 0 || rx_len == 0 {
            return Err(Error::Empty);
        }
        for (len, capacity) in [(tx_len, tx.len()), (rx_len, rx.len())] {
            if len > capacity {
                return Err(Error::TooLong { len, capacity });
            }
        }
        for (channel, len) in [(Channel::Mm2s, tx_len), (Channel::S2mm, rx_len)] {
            if len > self.dma.max_len() {
                return Err(axi::Error::TooLong {
                    channel,
                    len,
                    max: self.dma.max_len(),
                }
                .into());
            }
        }
        Ok(())
    }

    /// Programs S2MM, then MM2S (checked already); returns when MM2S started. If
    /// MM2S cannot start after S2MM did, the engine is halted (or the buffers lost
    /// to it) before the error returns.
    fn start_two_way(
        &self,
        tx: &DmaBuf<u8>,
        tx_len: usize,
        rx: &mut DmaBuf<u8>,
        rx_len: usize,
        c: Completion,
    ) -> Result<Started, Error> {
        tx.sync_for_device(tx_len)?;
        // No dirty line of the receive buffer may be written back over what the
        // device writes: clean and invalidate it before S2MM starts.
        rx.sync_for_cpu(rx_len)?;
        // Adaptive waits enable the interrupt only when they stop spinning.
        let irq = c == Completion::Irq;
        let s2mm = std::time::Instant::now();
        // SAFETY: `rx` is borrowed mutably until `finish` collects the transfer or
        // `fail` has the engine halted, or surrenders `rx` to it when it cannot be.
        if let Err(e) = unsafe { self.dma.start(Channel::S2mm, rx.bus_addr(), rx_len, irq) } {
            // Nothing of this transfer is in flight; a channel that stays halted
            // (sticky errors) is reset so that the next transfer works.
            if matches!(e, axi::Error::Halted { .. }) {
                self.dma.recover();
            }
            return Err(e.into());
        }
        let t0 = std::time::Instant::now();
        // SAFETY: as above, for `tx` (borrowed, abandoned if the engine cannot be
        // halted).
        if let Err(e) = unsafe { self.dma.start(Channel::Mm2s, tx.bus_addr(), tx_len, irq) } {
            return Err(self.fail(e.into(), tx, rx));
        }
        Ok(Started {
            s2mm,
            mm2s: t0,
            tx_len,
            rx_len,
        })
    }

    /// Waits for the two-way transfer in flight on `tx` and `rx`, started as
    /// `t0` says; returns the bytes received, ready for the CPU, and adds its times to
    /// the last timing. On an error the engine is halted (or the buffers lost to
    /// it) before the error returns.
    fn finish(
        &self,
        c: Completion,
        t0: Started,
        tx: &DmaBuf<u8>,
        rx: &mut DmaBuf<u8>,
    ) -> Result<usize, Error> {
        let waited = if c == Completion::Adaptive {
            // One wait: S2MM naps and spins to the expected end of the data
            // that MM2S streams in, then MM2S is collected (done by then in
            // a stream through a core; else waited for like any adaptive
            // wait). Two waits in a row would spin twice. `t1` is when MM2S
            // was collected.
            self.wait(Channel::S2mm, c, t0.mm2s, t0.tx_len)
                .and_then(|n| {
                    self.wait(Channel::Mm2s, c, t0.mm2s, t0.tx_len)?;
                    Ok((std::time::Instant::now(), n))
                })
        } else {
            self.wait(Channel::Mm2s, c, t0.mm2s, t0.tx_len)
                .and_then(|_| {
                    let t1 = std::time::Instant::now();
                    let n = self.wait(Channel::S2mm, c, t0.s2mm, t0.rx_len)?;
                    Ok((t1, n))
                })
        };
        let (t1, n) = waited.map_err(|e| self.fail(e, tx, rx))?;
        let mut t = self.timing.get();
        t.tx += t1 - t0.mm2s;
        t.rx += t0.s2mm.elapsed();
        self.timing.set(t);
        rx.sync_for_cpu(n)?;
        Ok(n)
    }

    /// After `e` struck a transfer on `tx` and `rx`: makes sure the engine is
    /// halted (the driver recovers it on timeouts and device errors; any other
    /// error is recovered here); if it cannot be, the buffers are lost to it.
    /// Returns `e`.
    fn fail(&self, e: Error, tx: &DmaBuf<u8>, rx: &mut DmaBuf<u8>) -> Error {
        let halted = if e.recovered() {
            !self.dma.is_failed()
        } else {
            self.dma.recover()
        };
        if !halted {
            tx.abandon();
            rx.surrender();
        }
        e
    }

    /// Stops whatever the engine is doing with `tx` and `rx` (a transfer that must
    /// not go on because another failed): halted, or the buffers lost to it.
    fn abort(&self, tx: &DmaBuf<u8>, rx: &mut DmaBuf<u8>) {
        if !self.dma.recover() {
            tx.abandon();
            rx.surrender();
        }
    }

    /// Standard-I/O transfer of a whole message, partitioned and buffered as asked:
    /// `Unique` sends it as one transfer, `Blocks(k)` as k-byte blocks (each
    /// answered by its own block); with `depth` driver buffers (2 = double
    /// buffering) the CPU copies the next block in while the current one is in
    /// flight. Returns the bytes received into `out`.
    pub fn send_message(
        &self,
        data: &[u8],
        out: &mut [u8],
        partition: Partition,
        depth: usize,
        c: Completion,
    ) -> Result<usize, Error> {
        if c == Completion::Proxy {
            return Err(Error::ProxyOnly);
        }
        if data.is_empty() || depth == 0 {
            return Err(Error::Empty);
        }
        if out.len() < data.len() {
            return Err(Error::TooLong {
                len: data.len(),
                capacity: out.len(),
            });
        }
        let block = match partition {
            Partition::Unique => data.len(),
            Partition::Blocks(0) => return Err(Error::Empty),
            Partition::Blocks(k) => k.min(data.len()),
        };
        let mut tx = Vec::with_capacity(depth);
        let mut rx = Vec::with_capacity(depth);
        for _ in 0..depth {
            tx.push(self.pool.alloc::<u8>(block)?);
            rx.push(self.pool.alloc::<u8>(block)?);
        }
        let chunks: Vec<&[u8]> = data.chunks(block).collect();
        self.check_two_way(&tx[0], block, &rx[0], block, c)?;
        let mut received = 0;
        // Block i lives in buffer i % depth; the copy of block i + 1 overlaps the
        // transfer of block i.
        crate::copies::copy(&mut tx[0].as_mut_slice()[..chunks[0].len()], chunks[0]);
        self.timing.set(Timing::default());
        for (i, chunk) in chunks.iter().enumerate() {
            let b = i % depth;
            let nb = (i + 1) % depth;
            let t0 = self.start_two_way(&tx[b], chunk.len(), &mut rx[b], chunk.len(), c)?;
            if let Some(next) = chunks.get(i + 1)
                && nb != b
            {
                crate::copies::copy(&mut tx[nb].as_mut_slice()[..next.len()], next);
            }
            let n = self.finish(c, t0, &tx[b], &mut rx[b])?;
            crate::copies::copy(&mut out[received..received + n], &rx[b].as_slice()[..n]);
            received += n;
            if let Some(next) = chunks.get(i + 1)
                && nb == b
            {
                crate::copies::copy(&mut tx[nb].as_mut_slice()[..next.len()], next);
            }
        }
        Ok(received)
    }

    /// Standard-I/O two-way transfer: copies `data` into a driver-owned DMA buffer,
    /// transfers, and copies what comes back into `out`; returns the bytes received.
    pub fn write_read(&self, data: &[u8], out: &mut [u8], c: Completion) -> Result<usize, Error> {
        if data.is_empty() || out.is_empty() {
            return Err(Error::Empty);
        }
        let mut tx = self.pool.alloc::<u8>(data.len())?;
        let mut rx = self.pool.alloc::<u8>(out.len())?;
        crate::copies::copy(tx.as_mut_slice(), data);
        // A failure halts the engine before the locals go back to the pool, or
        // leaves them lost to it.
        let n = self.two_way(&tx, data.len(), &mut rx, c)?;
        crate::copies::copy(&mut out[..n], &rx.as_slice()[..n]);
        Ok(n)
    }

    /// The engine's driver (status, recovery, reset).
    pub fn dma(&self) -> &AxiDma<R> {
        &self.dma
    }

    /// The interrupt line of channel `ch`.
    pub fn irq(&self, ch: Channel) -> &I {
        &self.irq[ch as usize]
    }
}

impl DynEngine {
    /// The same engine, with its two interrupt lines also handed out
    /// (MM2S, S2MM): a caller that shares the engine behind a lock can sleep
    /// on a line without holding the engine.
    pub fn share_lines(self) -> (DynEngine, [std::sync::Arc<dyn IrqLine>; 2]) {
        let [mm2s, s2mm] = self.irq;
        let (mm2s, s2mm): (std::sync::Arc<dyn IrqLine>, std::sync::Arc<dyn IrqLine>) =
            (mm2s.into(), s2mm.into());
        let engine = Engine {
            dma: self.dma,
            irq: [
                Box::new(mm2s.clone()) as Box<dyn IrqLine>,
                Box::new(s2mm.clone()),
            ],
            pool: self.pool,
            timing: self.timing,
            link: self.link,
        };
        (engine, [mm2s, s2mm])
    }
}

/// One engine's part of a [`two_way_together`] transfer: send the first `tx_len`
/// bytes of `tx`, receive into the first `rx_len` bytes of `rx`.
pub struct Lane<'a, R, I> {
    /// The engine.
    pub engine: &'a Engine<R, I>,
    /// What to send.
    pub tx: &'a DmaBuf<u8>,
    /// Bytes of `tx` to send.
    pub tx_len: usize,
    /// Where the answer goes.
    pub rx: &'a mut DmaBuf<u8>,
    /// Bytes of `rx` the engine may write (the stream's TLAST may end it early).
    pub rx_len: usize,
}

/// Two-way transfers on several engines at once (a coprocessor with several
/// streams): every lane is checked first, then all are started, then all are
/// waited for. Returns the bytes each lane received. If any lane fails, every
/// lane still running is halted (or its buffers lost to its engine) before the
/// error returns.
pub fn two_way_together<R: RegisterSpace, I: IrqLine>(
    lanes: &mut [Lane<'_, R, I>],
    c: Completion,
) -> Result<Vec<usize>, Error> {
    for l in lanes.iter() {
        l.engine.check_two_way(l.tx, l.tx_len, l.rx, l.rx_len, c)?;
        l.engine.timing.set(Timing::default());
    }
    // Stops the lanes in `running` after lane `failed` went wrong.
    fn stop_others<R: RegisterSpace, I: IrqLine>(
        lanes: &mut [Lane<'_, R, I>],
        running: std::ops::Range<usize>,
    ) {
        for l in &mut lanes[running] {
            l.engine.abort(l.tx, l.rx);
        }
    }
    let mut starts = Vec::with_capacity(lanes.len());
    for i in 0..lanes.len() {
        let l = &mut lanes[i];
        match l.engine.start_two_way(l.tx, l.tx_len, l.rx, l.rx_len, c) {
            Ok(t0) => starts.push(t0),
            Err(e) => {
                stop_others(lanes, 0..i);
                return Err(e);
            }
        }
    }
    let mut received = Vec::with_capacity(lanes.len());
    for (i, t0) in starts.into_iter().enumerate() {
        let l = &mut lanes[i];
        match l.engine.finish(c, t0, l.tx, l.rx) {
            Ok(n) => received.push(n),
            Err(e) => {
                stop_others(lanes, i + 1..lanes.len());
                return Err(e);
            }
        }
    }
    Ok(received)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::CachePolicy;
    use crate::platform::order::count;
    use crate::rig::Rig;
    use crate::sim::{Clock, Loopback};

    /// The ordering contract is kept on every path: a write barrier before each
    /// doorbell, a read barrier after each completion (counted: their effect
    /// cannot be observed on x86).
    #[test]
    fn barriers_are_issued_on_the_doorbell_and_completion_paths() {
        for sg in [false, true] {
            let rig = Rig::new(
                1 << 20,
                Clock::Unlimited,
                sg,
                CachePolicy::Explicit,
                Box::new(Loopback),
            )
            .unwrap();
            let e = &rig.engines[0];
            for c in [Completion::Poll, Completion::Yield, Completion::Irq] {
                let (w0, r0) = count::get();
                if sg {
                    let mut ring = PacketRing::new(e, 4, 256, 1, c).unwrap();
                    let (w1, _) = count::get();
                    // The S2MM buffers handed over: one doorbell.
                    assert!(w1 > w0, "{c:?}: no write barrier before TAILDESC");
                    ring.send(&[7u8; 100]).unwrap();
                    let mut out = [0u8; 256];
                    assert_eq!(ring.recv(&mut out).unwrap(), 100);
                    let (w2, r2) = count::get();
                    assert!(w2 > w1, "{c:?}: no write barrier before the MM2S TAILDESC");
                    assert!(r2 > r0, "{c:?}: no read barrier after Cmplt");
                } else {
                    let tx = e.pool().alloc::<u8>(64).unwrap();
                    let mut rx = e.pool().alloc::<u8>(64).unwrap();
                    e.two_way(&tx, 64, &mut rx, c).unwrap();
                    let (w1, r1) = count::get();
                    assert_eq!(w1 - w0, 2, "{c:?}: one write barrier per LENGTH doorbell");
                    assert!(r1 - r0 >= 2, "{c:?}: a read barrier per completion");
                }
            }
        }
    }
}
