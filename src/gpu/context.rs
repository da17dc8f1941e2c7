//! One device's context and what lives in it: streams, events and device memory.
//! Every handle keeps the context alive, and every call makes the context current
//! on the calling thread first, so they may be used from any thread.

use super::{Error, check, driver, wrap};
use cudarc::driver::{result, sys};
use std::sync::Arc;

/// The primary context of one device, retained while any handle of it lives.
struct Context {
    ordinal: usize,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

// SAFETY: a CUDA context is a process-wide object; the driver API takes it from any
// thread (each call here makes it current on the calling thread first).
unsafe impl Send for Context {}
// SAFETY: as above; the driver serialises what needs serialising.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: `dev` is the device whose primary context `new` retained; this is
        // the one release for that retain. Failure leaves the context retained.
        let _ = unsafe { result::primary_ctx::release(self.dev) };
    }
}

/// A CUDA device, ready for streams, events, memory and kernels.
#[derive(Clone)]
pub struct Gpu {
    ctx: Arc<Context>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Gpu(cuda:{})", self.ctx.ordinal)
    }
}

impl Gpu {
    /// Device `ordinal`'s primary context.
    pub fn open(ordinal: usize) -> Result<Gpu, Error> {
        let dev = driver::device(ordinal)?;
        // SAFETY: `dev` came from `cuDeviceGet`.
        let ctx = wrap("cuDevicePrimaryCtxRetain", unsafe {
            result::primary_ctx::retain(dev)
        })?;
        let gpu = Gpu {
            ctx: Arc::new(Context { ordinal, dev, ctx }),
        };
        gpu.bind()?;
        Ok(gpu)
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal
    }

    /// What the device is.
    pub fn info(&self) -> Result<driver::DeviceInfo, Error> {
        driver::info(self.ctx.ordinal)
    }

    /// Makes this context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<(), Error> {
        // SAFETY: the context is retained for as long as `self.ctx` lives.
        wrap("cuCtxSetCurrent", unsafe {
            result::ctx::set_current(self.ctx.ctx)
        })
    }

    /// A stream that does not wait for the legacy default stream.
    pub fn stream(&self) -> Result<Stream, Error> {
        self.bind()?;
        let s = wrap(
            "cuStreamCreate",
            result::stream::create(result::stream::StreamKind::NonBlocking),
        )?;
        Ok(Stream {
            gpu: self.clone(),
            raw: s,
        })
    }

    /// An event. `blocking` creates it with `CU_EVENT_BLOCKING_SYNC`, so a thread
    /// that waits on it sleeps until the device signals instead of spinning (the
    /// context's schedule flag does not govern event waits); `timing` lets it
    /// time the work between two events.
    pub fn event(&self, blocking: bool, timing: bool) -> Result<Event, Error> {
        self.bind()?;
        let mut flags = 0u32;
        if blocking {
            flags |= sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        }
        if !timing {
            flags |= sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        }
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid place for the handle; the context is current.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut raw, flags)
        })?;
        Ok(Event {
            gpu: self.clone(),
            raw,
        })
    }

    /// `len` bytes of device memory.
    pub fn alloc(&self, len: usize) -> Result<DeviceMem, Error> {
        if len == 0 {
            return Err(Error::Empty);
        }
        self.bind()?;
        // SAFETY: a plain allocation of `len` bytes in the current context.
        let ptr = wrap("cuMemAlloc", unsafe { result::malloc_sync(len) })?;
        Ok(DeviceMem {
            gpu: self.clone(),
            ptr,
            len,
        })
    }

    /// Waits until everything queued in the context has finished (used before
    /// memory the device may still touch is given back).
    pub fn synchronize(&self) -> Result<(), Error> {
        self.bind()?;
        wrap("cuCtxSynchronize", result::ctx::synchronize())
    }
}

/// A stream: work queued on it runs in order, beside other streams' work.
pub struct Stream {
    gpu: Gpu,
    raw: sys::CUstream,
}

// SAFETY: a stream handle may be used from any thread of the process.
unsafe impl Send for Stream {}

impl Stream {
    /// The driver's handle.
    pub(crate) fn raw(&self) -> sys::CUstream {
        self.raw
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Waits (the calling thread's way: the context's default) for everything
    /// queued on the stream.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.gpu.bind()?;
        // SAFETY: the stream lives until `self` drops.
        wrap("cuStreamSynchronize", unsafe {
            result::stream::synchronize(self.raw)
        })
    }

    /// Makes work queued on this stream after now wait for `event`.
    pub fn wait_for(&self, event: &Event) -> Result<(), Error> {
        self.gpu.bind()?;
        // SAFETY: both handles live until their owners drop.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(self.raw, event.raw, 0)
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.gpu.bind().is_ok() {
            // SAFETY: the stream was created by `Gpu::stream` and is destroyed
            // once; work still queued on it completes first (the driver's rule).
            let _ = unsafe { result::stream::destroy(self.raw) };
        }
    }
}

/// An event: a point in a stream that the host can query, wait for, or time.
pub struct Event {
    gpu: Gpu,
    raw: sys::CUevent,
}

// SAFETY: an event handle may be used from any thread of the process.
unsafe impl Send for Event {}
// SAFETY: querying and waiting on an event from several threads is allowed.
unsafe impl Sync for Event {}

impl Event {
    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<(), Error> {
        self.gpu.bind()?;
        // SAFETY: both handles live until their owners drop.
        wrap("cuEventRecord", unsafe {
            result::event::record(self.raw, stream.raw)
        })
    }

    /// Whether the work before the event has finished.
    pub fn done(&self) -> Result<bool, Error> {
        self.gpu.bind()?;
        self.done_here()
    }

    /// [`done`](Self::done) on a thread where the event's context is current
    /// already (a polling loop binds once, not at every look).
    pub(crate) fn done_here(&self) -> Result<bool, Error> {
        // SAFETY: the event lives until `self` drops.
        let r = unsafe { sys::cuEventQuery(self.raw) };
        if r == sys::CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("cuEventQuery", r).map(|()| true)
    }

    /// Blocks until the event has happened: spinning, or (an event made with
    /// `blocking`) asleep until the device signals.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.gpu.bind()?;
        // SAFETY: the event lives until `self` drops.
        wrap("cuEventSynchronize", unsafe {
            result::event::synchronize(self.raw)
        })
    }

    /// Milliseconds of device time from `start` to this event (both recorded
    /// with timing, both done).
    pub fn since(&self, start: &Event) -> Result<f64, Error> {
        self.gpu.bind()?;
        // SAFETY: both events live until their owners drop.
        wrap("cuEventElapsedTime", unsafe {
            result::event::elapsed(start.raw, self.raw)
        })
        .map(f64::from)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.gpu.bind().is_ok() {
            // SAFETY: created by `Gpu::event`, destroyed once.
            let _ = unsafe { result::event::destroy(self.raw) };
        }
    }
}

/// Device memory, freed when dropped (after the context has finished with it).
pub struct DeviceMem {
    gpu: Gpu,
    ptr: sys::CUdeviceptr,
    len: usize,
}

// SAFETY: a device pointer is a number valid in every thread of the process.
unsafe impl Send for DeviceMem {}

impl DeviceMem {
    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes (never: allocations are at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address, for kernels' arguments and copies.
    pub(crate) fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Copies `data` into the start of this memory and waits for the copy.
    pub fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        if data.len() > self.len {
            return Err(Error::TooLong {
                len: data.len(),
                capacity: self.len,
            });
        }
        self.gpu.bind()?;
        // SAFETY: `data.len()` bytes fit at `ptr`; the call is synchronous, so
        // `data` is read before it returns.
        wrap("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(self.ptr, data)
        })
    }

    /// Copies the start of this memory into `out` and waits for the copy.
    pub fn read(&self, out: &mut [u8]) -> Result<(), Error> {
        if out.len() > self.len {
            return Err(Error::TooLong {
                len: out.len(),
                capacity: self.len,
            });
        }
        self.gpu.bind()?;
        // SAFETY: `out.len()` bytes are read from within the allocation; the call
        // is synchronous.
        wrap("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(out, self.ptr)
        })
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        // Work still queued may use the memory: wait for the context first.
        if self.gpu.synchronize().is_ok() {
            // SAFETY: allocated by `Gpu::alloc`, freed once, nothing queued uses it.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}
