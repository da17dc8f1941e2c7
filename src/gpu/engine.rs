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

/// A request to the waiter thread: wait on this event, then answer.
type Job = (Arc<Event>, mpsc::SyncSender<Result<(), Error>>);

/// One stream's resources: the stream, its device buffer and its events.
struct Lane {
    stream: Stream,
    dev: DeviceMem,
    /// Timing events: before H2D, after H2D (and the kernel).
    marks: [Event; 2],
    /// After D2H: the lane's completion, timed too. Made with
    /// `CU_EVENT_BLOCKING_SYNC`, so Irq sleeps on it; Poll and Yield query it.
    done: Arc<Event>,
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
                marks: [gpu.event(false, true)?, gpu.event(false, true)?],
                done: Arc::new(gpu.event(true, true)?),
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
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Bytes one block may hold.
    pub fn capacity(&self) -> usize {
        self.lanes[0].dev.len()
    }

    /// Device time of the last transfer's or message's H2D and D2H copies, from
    /// the device's own timer (summed over blocks).
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
        self.check(tx, rx, len, depth, process, c)?;
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
        match self.run_blocks((txp, rxp), mapped, len, block, process, c, &mut used) {
            Ok(t) => {
                self.timing.set(t);
                Ok(len)
            }
            Err(e) => {
                // Blocks may still be in flight on some lane: wait them out, or,
                // after a timeout or if they do not finish, give the buffers up.
                if matches!(e, Error::Timeout { .. }) || self.drain(&used, c).is_err() {
                    self.stop(tx, rx);
                }
                Err(e)
            }
        }
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
    fn check(
        &self,
        tx: &HostBuf,
        rx: &HostBuf,
        len: usize,
        depth: usize,
        process: Process,
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
        if len == 0 {
            return Err(Error::Empty);
        }
        if !(1..=self.lanes.len()).contains(&depth) {
            return Err(Error::Shape(format!(
                "{depth} buffers asked for; a GPU engine has 1 or {}",
                self.lanes.len()
            )));
        }
        for b in [tx, rx] {
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
        if (mapped || process == Process::Invert) && self.kernels.is_none() {
            return Err(Error::NoNvrtc);
        }
        Ok(())
    }

    /// Queues block `[at, at + n)` on lane `l`: in (copy, or a kernel reading
    /// mapped memory), the process, out, each direction between timing marks.
    fn queue_block(
        &self,
        l: usize,
        (txp, rxp): (*mut u8, *mut u8),
        mapped: (Option<sys::CUdeviceptr>, Option<sys::CUdeviceptr>),
        at: usize,
        n: usize,
        process: Process,
    ) -> Result<(), Error> {
        let lane = &self.lanes[l];
        let s = lane.stream.raw();
        lane.marks[0].record(&lane.stream)?;
        match (mapped.0, &self.kernels) {
            (Some(d), Some(k)) => k.copy(&lane.stream, lane.dev.ptr(), d + at as u64, n)?,
            // SAFETY: `n` bytes at `txp + at` are inside `tx` (checked), which the
            // caller borrows until the block is waited for or surrendered; the
            // device buffer holds `n` (checked against the capacity).
            _ => check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(lane.dev.ptr(), txp.add(at).cast(), n, s)
            })?,
        }
        if process == Process::Invert
            && let Some(k) = &self.kernels
        {
            k.invert(&lane.stream, lane.dev.ptr(), n)?;
        }
        lane.marks[1].record(&lane.stream)?;
        match (mapped.1, &self.kernels) {
            (Some(d), Some(k)) => k.copy(&lane.stream, d + at as u64, lane.dev.ptr(), n)?,
            // SAFETY: as above, for `rx`, borrowed mutably.
            _ => check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(rxp.add(at).cast(), lane.dev.ptr(), n, s)
            })?,
        }
        lane.done.record(&lane.stream)
    }

    /// Device time of lane `l`'s last block (done).
    fn lane_timing(&self, l: usize) -> Result<Timing, Error> {
        let lane = &self.lanes[l];
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
                while !done.done()? {
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
        Ok(&self.waiter.as_ref().expect("started just above").0)
    }

    /// Waits out the lanes in `used` (after a failure to queue more work).
    fn drain(&mut self, used: &[bool], c: Completion) -> Result<(), Error> {
        let c = if c == Completion::Irq {
            Completion::Yield
        } else {
            c
        };
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
