//! Two-way transfers through a GPU: the message goes to device memory (H2D, the
//! GPU's MM2S), optionally through a kernel, and comes back (D2H, its S2MM), under
//! the same completion modes as an AXI DMA engine:
//!
//! - [`Completion::Poll`]: spin on `cuEventQuery` of an event recorded after the work.
//! - [`Completion::Yield`]: the same query with `sched_yield` between looks.
//! - [`Completion::Irq`]: an event made with `CU_EVENT_BLOCKING_SYNC`, so the thread
//!   that waits on it sleeps until the device's interrupt. That thread is the
//!   engine's waiter, which wakes the caller: the caller's wait has a timeout, as
//!   every wait on a device must (`cuEventSynchronize` has none), the way a kernel
//!   driver's interrupt handler wakes the sleeping process.
//!
//! [`Completion::Proxy`] is the AXI engines' kernel-style driver thread; a GPU's
//! driver already is one (pageable memory is its standard I/O), so it is refused
//! here as [`Error::Unsupported`].

use super::context::{DeviceMem, Event, Stream};
use super::host::{HostBuf, HostKind};
use super::kernels::Kernels;
use super::{Error, Gpu, check};
use crate::dma::{Completion, Partition, Timing};
use crate::dsp::conv;
use cudarc::driver::sys;
use std::cell::Cell;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// What the device does to a block between H2D and D2H.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// Nothing: the block comes back as it went (a loopback).
    Echo,
    /// A kernel inverts every byte in device memory (each byte read and written
    /// once by the multiprocessors, so the answer proves the kernel ran).
    Invert,
}

/// What the device does between a block's H2D and D2H.
#[derive(Debug, Clone, Copy)]
enum Step {
    Echo,
    Invert,
    /// A convolution layer of this shape over the packet in the lane's buffer,
    /// into the lane's output buffer.
    Conv(conv::Shape),
}

/// Where a block's timing marks stand against the host's submission of its
/// copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceTiming {
    /// The marks are queued with the copies as the host submits them: on an
    /// idle stream the first mark runs at once and the device then waits
    /// for the host to submit the copy, so a small transfer's "device time"
    /// includes that submission. What a caller waits for.
    #[default]
    AsSubmitted,
    /// A kernel holds the lane's stream while the host queues the block's
    /// marks and copies, and lets go once all are queued: the marks time the
    /// copies back to back on the device, as the copy engines' ceiling
    /// ([`super::ceiling`]) is timed. Needs the kernels (NVRTC); costs a
    /// kernel launch per block, so wall time is not measured this way.
    Held,
}

/// A request to the waiter thread: wait on this event, then answer.
type Job = (Arc<Event>, mpsc::SyncSender<Result<(), Error>>);

/// One stream's resources: the stream, its device buffer and its events.
struct Lane {
    stream: Stream,
    dev: DeviceMem,
    /// Where a layer's output maps go (made on the first layer).
    out: Option<DeviceMem>,
    /// Timing events: before H2D, after H2D (before the kernel, if any).
    marks: [Event; 2],
    /// After D2H: the lane's completion, timed too. Made with
    /// `CU_EVENT_BLOCKING_SYNC`, so Irq sleeps on it; Poll and Yield query it.
    done: Arc<Event>,
    /// With [`DeviceTiming::Held`]: the mapped flag the holding kernel
    /// polls (word 0: let go; word 1: the kernel gave up waiting), made on
    /// first use.
    hold: Option<HostBuf>,
}

/// A GPU driven as a DMA engine with two streams (single or double buffering).
pub struct GpuEngine {
    gpu: Gpu,
    lanes: Vec<Lane>,
    kernels: Option<Arc<Kernels>>,
    waiter: Option<(mpsc::Sender<Job>, std::thread::JoinHandle<()>)>,
    timing: Cell<Timing>,
    timeout: Duration,
    stopped: Cell<bool>,
    device_timing: DeviceTiming,
}

impl GpuEngine {
    /// An engine on `gpu` for transfers of up to `capacity` bytes per block, with
    /// `timeout` as the longest wait on the device. `kernels` are needed for
    /// [`Process::Invert`] and for mapped memory (which kernels read in place).
    pub fn new(
        gpu: &Gpu,
        capacity: usize,
        kernels: Option<Arc<Kernels>>,
        timeout: Duration,
    ) -> Result<GpuEngine, Error> {
        let mut lanes = Vec::with_capacity(2);
        for _ in 0..2 {
            lanes.push(Lane {
                stream: gpu.stream()?,
                dev: gpu.alloc(capacity)?,
                out: None,
                marks: [gpu.event(false, true)?, gpu.event(false, true)?],
                done: Arc::new(gpu.event(true, true)?),
                hold: None,
            });
        }
        Ok(GpuEngine {
            gpu: gpu.clone(),
            lanes,
            kernels,
            waiter: None,
            timing: Cell::new(Timing::default()),
            timeout,
            stopped: Cell::new(false),
            device_timing: DeviceTiming::AsSubmitted,
        })
    }

    /// How the next blocks' device time is taken ([`DeviceTiming`]);
    /// [`DeviceTiming::Held`] needs the kernels ([`Error::NoNvrtc`] without).
    pub fn set_device_timing(&mut self, t: DeviceTiming) -> Result<(), Error> {
        if t == DeviceTiming::Held && self.kernels.is_none() {
            return Err(Error::NoNvrtc);
        }
        if t == DeviceTiming::Held {
            for lane in &mut self.lanes {
                if lane.hold.is_none() {
                    let mut flag = HostBuf::new(&self.gpu, HostKind::Mapped, 8)?;
                    flag.as_mut_slice().fill(0);
                    lane.hold = Some(flag);
                }
            }
        }
        self.device_timing = t;
        Ok(())
    }

    /// How device time is taken now.
    pub fn device_timing(&self) -> DeviceTiming {
        self.device_timing
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Bytes one block may hold.
    pub fn capacity(&self) -> usize {
        self.lanes[0].dev.len()
    }

    /// Device time of the last transfer's or message's two directions, from the
    /// device's own timer (summed over blocks): `tx` the H2D copy, `rx` the
    /// kernel (if any) and the D2H copy.
    pub fn last_timing(&self) -> Timing {
        self.timing.get()
    }

    /// Two-way transfer: the first `len` bytes of `tx` to the device, through
    /// `process`, back into `rx`; returns the bytes received.
    pub fn two_way(
        &mut self,
        tx: &mut HostBuf,
        rx: &mut HostBuf,
        len: usize,
        process: Process,
        c: Completion,
    ) -> Result<usize, Error> {
        self.send_message(tx, rx, len, Partition::Unique, 1, process, c)
    }

    /// A whole message of `len` bytes from `tx` to `rx`, cut as `partition` says
    /// into blocks that take turns on `depth` streams (1 single, 2 double
    /// buffering: one block's H2D overlaps the one before's D2H). Returns the bytes
    /// received.
    #[allow(clippy::too_many_arguments)]
    pub fn send_message(
        &mut self,
        tx: &mut HostBuf,
        rx: &mut HostBuf,
        len: usize,
        partition: Partition,
        depth: usize,
        process: Process,
        c: Completion,
    ) -> Result<usize, Error> {
        self.check(tx, len, rx, len, depth, process == Process::Invert, c)?;
        let block = match partition {
            Partition::Unique => len,
            Partition::Blocks(0) => return Err(Error::Empty),
            Partition::Blocks(k) => k.min(len),
        };
        if block > self.capacity() {
            return Err(Error::TooLong {
                len: block,
                capacity: self.capacity(),
            });
        }
        self.gpu.bind()?;
        let (Some(txp), Some(rxp)) = (tx.host_ptr(), rx.host_ptr()) else {
            return Err(Error::Stopped);
        };
        let mapped = (tx.device_ptr()?, rx.device_ptr()?);
        let mut used = vec![false; depth];
        let r = self.run_blocks((txp, rxp), mapped, len, block, process, c, &mut used);
        let t = self.settle(r, &used, c, tx, rx)?;
        self.timing.set(t);
        Ok(len)
    }

    /// Queues the blocks of a checked message lane by lane, waiting for a lane's
    /// last block before it takes the next, then for every lane; returns the
    /// summed device timing. `used` says which lanes were given work.
    #[allow(clippy::too_many_arguments)]
    fn run_blocks(
        &mut self,
        host: (*mut u8, *mut u8),
        mapped: (Option<sys::CUdeviceptr>, Option<sys::CUdeviceptr>),
        len: usize,
        block: usize,
        process: Process,
        c: Completion,
        used: &mut [bool],
    ) -> Result<Timing, Error> {
        let depth = used.len();
        let mut t = Timing::default();
        let mut at = 0;
        let mut i = 0;
        while at < len {
            let n = block.min(len - at);
            let l = i % depth;
            if used[l] {
                // The lane's buffer and events are reused: its last block must be done.
                self.wait(l, c)?;
                t = add(t, self.lane_timing(l)?);
            }
            used[l] = true;
            self.queue_block(l, host, mapped, at, n, process)?;
            at += n;
            i += 1;
        }
        for l in (0..depth).filter(|&l| used[l]) {
            self.wait(l, c)?;
            t = add(t, self.lane_timing(l)?);
        }
        Ok(t)
    }

    /// Everything that can refuse a message, checked before the device is given
    /// anything.
    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        tx: &HostBuf,
        tx_len: usize,
        rx: &HostBuf,
        rx_len: usize,
        depth: usize,
        kernel: bool,
        c: Completion,
    ) -> Result<(), Error> {
        if self.stopped.get() {
            return Err(Error::Stopped);
        }
        if c == Completion::Proxy {
            return Err(Error::Unsupported {
                ordinal: self.gpu.ordinal(),
                what: "run the proxy completion mode (a GPU's driver is its own proxy: use pageable memory)",
            });
        }
        if tx_len == 0 || rx_len == 0 {
            return Err(Error::Empty);
        }
        if !(1..=self.lanes.len()).contains(&depth) {
            return Err(Error::Shape(format!(
                "{depth} buffers asked for; a GPU engine has 1 or {}",
                self.lanes.len()
            )));
        }
        for (b, len) in [(tx, tx_len), (rx, rx_len)] {
            if len > b.len() {
                return Err(Error::TooLong {
                    len,
                    capacity: b.len(),
                });
            }
            if b.is_lost() {
                return Err(Error::Stopped);
            }
        }
        let mapped = tx.kind() == HostKind::Mapped || rx.kind() == HostKind::Mapped;
        if (mapped || kernel) && self.kernels.is_none() {
            return Err(Error::NoNvrtc);
        }
        Ok(())
    }

    /// Queues block `[at, at + n)` on lane `l`: in (copy, or a kernel reading
    /// mapped memory), the step, out, each direction between timing marks.
    fn queue_block(
        &self,
        l: usize,
        host: (*mut u8, *mut u8),
        mapped: (Option<sys::CUdeviceptr>, Option<sys::CUdeviceptr>),
        at: usize,
        n: usize,
        process: Process,
    ) -> Result<(), Error> {
        let step = match process {
            Process::Echo => Step::Echo,
            Process::Invert => Step::Invert,
        };
        self.queue(l, host, mapped, (at, n, n), step)
    }

    /// Queues on lane `l`: `n_in` bytes from `at` in `tx` to the lane's buffer,
    /// `step` on the device, `n_out` bytes of the answer to `at` in `rx`.
    fn queue(
        &self,
        l: usize,
        (txp, rxp): (*mut u8, *mut u8),
        mapped: (Option<sys::CUdeviceptr>, Option<sys::CUdeviceptr>),
        (at, n_in, n_out): (usize, usize, usize),
        step: Step,
    ) -> Result<(), Error> {
        let lane = &self.lanes[l];
        let held = match (self.device_timing, &lane.hold, &self.kernels) {
            (DeviceTiming::Held, Some(flag), Some(k)) => {
                let flag_dev = flag.device_ptr()?.ok_or(Error::Stopped)?;
                // The lane's last block is done (waited for before reuse), so
                // its kernel has let go: the flag is reset for this one.
                super::ceiling::set_flag(flag, 0, 0);
                super::ceiling::set_flag(flag, 1, 0);
                k.hold(&lane.stream, flag_dev, self.timeout)?;
                Some(flag)
            }
            (DeviceTiming::Held, ..) => return Err(Error::NoNvrtc),
            (DeviceTiming::AsSubmitted, ..) => None,
        };
        let queued = self.queue_held(l, (txp, rxp), mapped, (at, n_in, n_out), step);
        // Let go whatever happened: the stream must never stay held.
        if let Some(flag) = held {
            super::ceiling::set_flag(flag, 0, 1);
        }
        queued
    }

    /// [`GpuEngine::queue`]'s commands after the hold (if any): marks,
    /// copies, the step, the completion event.
    fn queue_held(
        &self,
        l: usize,
        (txp, rxp): (*mut u8, *mut u8),
        mapped: (Option<sys::CUdeviceptr>, Option<sys::CUdeviceptr>),
        (at, n_in, n_out): (usize, usize, usize),
        step: Step,
    ) -> Result<(), Error> {
        let lane = &self.lanes[l];
        let s = lane.stream.raw();
        let dev = lane.dev.ptr();
        lane.marks[0].record(&lane.stream)?;
        match (mapped.0, &self.kernels) {
            (Some(d), Some(k)) => k.copy(&lane.stream, dev, d + at as u64, n_in)?,
            // SAFETY: `n_in` bytes at `txp + at` are inside `tx` (checked), which
            // the caller borrows until the block is waited for or surrendered;
            // the device buffer holds them (checked against the capacity).
            _ => check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(dev, txp.add(at).cast(), n_in, s)
            })?,
        }
        // TX ends when the input is in; RX (the step and D2H) after, as the AXI
        // engines time a coprocessor: RX includes its computation.
        lane.marks[1].record(&lane.stream)?;
        let answer = match (step, &self.kernels) {
            (Step::Echo, _) => dev,
            (Step::Invert, Some(k)) => {
                k.invert(&lane.stream, dev, n_in)?;
                dev
            }
            (Step::Conv(shape), Some(k)) => {
                let out = lane.out.as_ref().ok_or(Error::Stopped)?.ptr();
                // The packet's parts where they lie.
                let [w, b, i] = shape.packet_parts().map(|r| dev + r.start as u64);
                k.conv(&lane.stream, [i, w, b, out], &shape)?;
                out
            }
            (_, None) => return Err(Error::NoNvrtc),
        };
        match (mapped.1, &self.kernels) {
            (Some(d), Some(k)) => k.copy(&lane.stream, d + at as u64, answer, n_out)?,
            // SAFETY: as above, for `rx`, borrowed mutably, and the answer's
            // `n_out` bytes (checked against the capacity).
            _ => check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(rxp.add(at).cast(), answer, n_out, s)
            })?,
        }
        lane.done.record(&lane.stream)
    }

    /// The convolution coprocessor's call: the first `tx_len` bytes of `tx` are a
    /// layer packet in [`conv`]'s stream format (header, weights, biases, input
    /// maps, as [`conv::Layer::encode`] makes it); it goes to the device (H2D), a
    /// kernel computes the layer where the packet lies, and the output maps come
    /// back into `rx` (D2H). Returns the bytes received, the output maps'.
    pub fn layer(
        &mut self,
        tx: &mut HostBuf,
        tx_len: usize,
        rx: &mut HostBuf,
        c: Completion,
    ) -> Result<usize, Error> {
        let packet = &tx.as_slice()[..tx_len.min(tx.len())];
        let shape = conv::header(packet).map_err(|e| Error::Shape(e.to_string()))?;
        let out_len = shape.out_bytes();
        self.check(tx, tx_len, rx, out_len, 1, true, c)?;
        for len in [tx_len, out_len] {
            if len > self.capacity() {
                return Err(Error::TooLong {
                    len,
                    capacity: self.capacity(),
                });
            }
        }
        self.gpu.bind()?;
        if self.lanes[0].out.is_none() {
            self.lanes[0].out = Some(self.gpu.alloc(self.capacity())?);
        }
        let (Some(txp), Some(rxp)) = (tx.host_ptr(), rx.host_ptr()) else {
            return Err(Error::Stopped);
        };
        let mapped = (tx.device_ptr()?, rx.device_ptr()?);
        let r = self
            .queue(
                0,
                (txp, rxp),
                mapped,
                (0, tx_len, out_len),
                Step::Conv(shape),
            )
            .and_then(|()| self.wait(0, c))
            .and_then(|()| self.lane_timing(0));
        let t = self.settle(r, &[true], c, tx, rx)?;
        self.timing.set(t);
        Ok(out_len)
    }

    /// After a call on the lanes in `used`: an error with blocks possibly still in
    /// flight waits them out, or, after a timeout or if they do not finish, gives
    /// the buffers up.
    fn settle<T>(
        &mut self,
        r: Result<T, Error>,
        used: &[bool],
        c: Completion,
        tx: &mut HostBuf,
        rx: &mut HostBuf,
    ) -> Result<T, Error> {
        r.map_err(|e| {
            if matches!(e, Error::Timeout { .. }) || self.drain(used, c).is_err() {
                self.stop(tx, rx);
            }
            e
        })
    }

    /// Device time of lane `l`'s last block (done).
    fn lane_timing(&self, l: usize) -> Result<Timing, Error> {
        let lane = &self.lanes[l];
        if self.device_timing == DeviceTiming::Held
            && let Some(flag) = &lane.hold
            && flag.as_slice()[4..8] != [0, 0, 0, 0]
        {
            // The holding kernel gave up before the host let go: the marks
            // do not time the copies back to back.
            return Err(Error::Timeout {
                what: "the block's copies queued behind the holding kernel (it gave up waiting)",
                waited: self.timeout,
            });
        }
        let ms = |a: &Event, b: &Event| {
            b.since(a)
                .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1e3))
        };
        Ok(Timing {
            tx: ms(&lane.marks[0], &lane.marks[1])?,
            rx: ms(&lane.marks[1], &lane.done)?,
        })
    }

    /// Waits for lane `l`'s queued work as `c` says, for at most the timeout.
    fn wait(&mut self, l: usize, c: Completion) -> Result<(), Error> {
        let t0 = Instant::now();
        let timeout = Error::Timeout {
            what: "a GPU transfer",
            waited: self.timeout,
        };
        match c {
            Completion::Poll | Completion::Yield => {
                let done = &self.lanes[l].done;
                self.gpu.bind()?;
                while !done.done_here()? {
                    if t0.elapsed() > self.timeout {
                        return Err(timeout);
                    }
                    if c == Completion::Yield {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Ok(())
            }
            Completion::Adaptive => {
                // Spin as long as a sleep and wake-up would cost, then block.
                let done = &self.lanes[l].done;
                self.gpu.bind()?;
                let spin = crate::dma::Link::default().spin_limit;
                while t0.elapsed() < spin {
                    if done.done_here()? {
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                self.wait(l, Completion::Irq)
            }
            Completion::Irq => {
                let (answer, answered) = mpsc::sync_channel(1);
                let job = (self.lanes[l].done.clone(), answer);
                self.waiter()?.send(job).map_err(|_| Error::Stopped)?;
                match answered.recv_timeout(self.timeout) {
                    Ok(r) => r,
                    Err(_) => Err(timeout),
                }
            }
            Completion::Proxy => Err(Error::Stopped),
        }
    }

    /// The waiter thread's queue, started on first use.
    fn waiter(&mut self) -> Result<&mpsc::Sender<Job>, Error> {
        if self.waiter.is_none() {
            let (jobs, queue) = mpsc::channel::<Job>();
            let handle = std::thread::Builder::new()
                .name("dmaflow-gpu-irq".into())
                .spawn(move || {
                    // Asleep in the driver until the device signals each event.
                    for (event, answer) in queue {
                        let _ = answer.send(event.synchronize());
                    }
                })
                .map_err(|e| Error::Shape(format!("cannot start the GPU waiter thread: {e}")))?;
            self.waiter = Some((jobs, handle));
        }
        match &self.waiter {
            Some((jobs, _)) => Ok(jobs),
            None => Err(Error::Stopped),
        }
    }

    /// Waits out the lanes in `used` (after a failure to queue more work).
    fn drain(&mut self, used: &[bool], c: Completion) -> Result<(), Error> {
        let c = if c.sleeps() { Completion::Yield } else { c };
        for (l, _) in used.iter().enumerate().filter(|(_, u)| **u) {
            self.wait(l, c)?;
        }
        Ok(())
    }

    /// After a timeout: the buffers stay the device's (surrendered), the device
    /// buffers are never freed, and the engine takes no more work.
    fn stop(&self, tx: &mut HostBuf, rx: &mut HostBuf) {
        self.stopped.set(true);
        tx.surrender();
        rx.surrender();
    }
}

impl Drop for GpuEngine {
    fn drop(&mut self) {
        if let Some((jobs, handle)) = self.waiter.take() {
            drop(jobs);
            if !self.stopped.get() {
                let _ = handle.join();
            }
        }
        if self.stopped.get() {
            // The device may still be busy with these: never free them (freeing
            // would wait for it).
            for lane in std::mem::take(&mut self.lanes) {
                std::mem::forget(lane.dev);
                std::mem::forget(lane.out);
            }
        }
    }
}

fn add(a: Timing, b: Timing) -> Timing {
    Timing {
        tx: a.tx + b.tx,
        rx: a.rx + b.rx,
    }
}
