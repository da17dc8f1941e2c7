//! A DMA buffer that numpy views in place: the buffer protocol hands out the
//! address of a separate CPU view of the buffer's pages (never a copy).
//! Closing the buffer (PYNQ's `freebuffer`) gives its memory back to the pool
//! at the call: views still open are first cut off from the DMA memory (their
//! pages become a private copy), so they never show the next owner's bytes.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dmaflow::mem::{CachePolicy, CpuView, DmaBuf};
use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::errors::runtime;
use crate::state::BoardState;

/// A buffer of DMA memory on a board. Python sees its bytes through the
/// buffer protocol (`numpy.frombuffer`, `memoryview`), in place. Closing it
/// while a transfer owns it is an error; closing it while views are open
/// returns the memory at once and leaves the views a private copy of the
/// bytes.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct DmaBuffer {
    board: Arc<BoardState>,
    /// The buffer; `None` once returned to the pool.
    buf: Mutex<Option<DmaBuf<u8>>>,
    /// Bytes Python sees.
    nbytes: usize,
    /// The separate CPU view Python's views read (`None` where the memory
    /// has no file to map again: views then read the pool's mapping, and
    /// closing waits for the last view).
    view: Option<CpuView>,
    /// CPU address of the first byte (stays valid while this object lives,
    /// and reads private memory once the buffer is closed or given up to a
    /// device).
    address: usize,
    physical: u64,
    /// Buffer-protocol views open.
    exports: AtomicUsize,
    /// Transfers in flight on the buffer.
    device: AtomicUsize,
    closed: AtomicBool,
}

impl DmaBuffer {
    pub(crate) fn new(board: Arc<BoardState>, nbytes: usize) -> PyResult<Self> {
        if nbytes == 0 {
            return Err(PyValueError::new_err("a DMA buffer of zero bytes"));
        }
        let page = rustix::param::page_size();
        let span = nbytes
            .checked_next_multiple_of(page)
            .ok_or_else(|| PyValueError::new_err(format!("{nbytes} bytes do not fit")))?;
        // Whole pages: if a device ever keeps the buffer, its pages are
        // replaced by private memory and the views Python holds stop reaching it.
        let buf = board
            .pool
            .alloc_aligned(span, page)
            .map_err(crate::errors::memory)?;
        let view = buf.cpu_view().ok();
        let address = match &view {
            Some(v) => v.as_ptr() as usize,
            None => buf.as_slice().as_ptr() as usize,
        };
        let physical = buf.bus_addr();
        Ok(DmaBuffer {
            board,
            buf: Mutex::new(Some(buf)),
            nbytes,
            view,
            address,
            physical,
            exports: AtomicUsize::new(0),
            device: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
        })
    }

    /// The buffer, for one call; an error once closed.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut DmaBuf<u8>) -> PyResult<T>) -> PyResult<T> {
        if self.closed.load(Ordering::Acquire) {
            return Err(PyValueError::new_err("the DMA buffer is closed"));
        }
        let mut g = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        match g.as_mut() {
            Some(b) => f(b),
            None => Err(PyValueError::new_err("the DMA buffer is closed")),
        }
    }

    /// Whether the buffer is `board`'s memory.
    pub(crate) fn is_on(&self, board: &Arc<BoardState>) -> bool {
        Arc::ptr_eq(&self.board, board)
    }

    /// Bytes Python sees.
    pub(crate) fn len(&self) -> usize {
        self.nbytes
    }

    /// A transfer takes the buffer (refused once closed).
    pub(crate) fn lend(&self) -> PyResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(PyValueError::new_err("the DMA buffer is closed"));
        }
        self.device.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A transfer gives the buffer back.
    pub(crate) fn give_back(&self) {
        self.device.fetch_sub(1, Ordering::AcqRel);
        self.release_if_done();
    }

    /// Gives the buffer up to a device that could not be halted: its memory is
    /// never reused, and the pages Python views become private memory.
    pub(crate) fn surrender(&self) {
        let mut g = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = g.as_mut() {
            if let Some(v) = &self.view {
                v.cut_off_zeroed();
            }
            b.surrender();
        }
    }

    /// Returns the memory to the pool once closed with no transfer left and
    /// no view reaching it (views open are cut off first where they can be).
    fn release_if_done(&self) {
        if !self.closed.load(Ordering::Acquire) || self.device.load(Ordering::Acquire) != 0 {
            return;
        }
        let unreachable = self.exports.load(Ordering::SeqCst) == 0
            || self.view.as_ref().is_some_and(CpuView::cut_off);
        if unreachable {
            self.buf
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        }
    }

    fn sync(&self, offset: usize, nbytes: Option<usize>, to_device: bool) -> PyResult<()> {
        let n = nbytes.unwrap_or(self.nbytes.saturating_sub(offset));
        if offset.checked_add(n).is_none_or(|end| end > self.nbytes) {
            return Err(PyValueError::new_err(format!(
                "{n} bytes from {offset} do not fit the {}-byte buffer",
                self.nbytes
            )));
        }
        self.with(|b| {
            if to_device {
                b.sync_range_for_device(offset, n).map_err(runtime)
            } else {
                b.sync_range_for_cpu(offset, n).map_err(runtime)
            }
        })
    }
}

#[pymethods]
impl DmaBuffer {
    /// Bytes in the buffer.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The bus (physical) address of the first byte, as the device sees it.
    #[getter]
    fn physical_address(&self) -> u64 {
        self.physical
    }

    /// The CPU address of the first byte (where numpy's views start).
    #[getter]
    fn address(&self) -> usize {
        self.address
    }

    /// Whether the board's caches are coherent (no flush/invalidate needed).
    #[getter]
    fn coherent(&self) -> bool {
        self.board.pool.policy() == CachePolicy::Coherent
    }

    /// Whether the buffer was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a transfer owns the buffer now.
    #[getter]
    fn device_owned(&self) -> bool {
        self.device.load(Ordering::Acquire) > 0
    }

    /// Whether the buffer was given up to an engine that could not be halted
    /// (its views read private memory since).
    #[getter]
    fn lost(&self) -> bool {
        let g = self.buf.lock().unwrap_or_else(PoisonError::into_inner);
        g.as_ref().is_some_and(DmaBuf::is_lost)
    }

    /// Cleans `nbytes` bytes from `offset` (all by default) so the device reads
    /// what the CPU wrote (nothing to do on a coherent board).
    #[pyo3(signature = (offset = 0, nbytes = None))]
    fn sync_to_device(&self, offset: usize, nbytes: Option<usize>) -> PyResult<()> {
        self.sync(offset, nbytes, true)
    }

    /// Invalidates `nbytes` bytes from `offset` (all by default) so the CPU
    /// reads what the device wrote.
    #[pyo3(signature = (offset = 0, nbytes = None))]
    fn sync_from_device(&self, offset: usize, nbytes: Option<usize>) -> PyResult<()> {
        self.sync(offset, nbytes, false)
    }

    /// Closes the buffer (PYNQ's `freebuffer`): refused while a transfer owns
    /// it. The memory goes back to the pool at the call; arrays still viewing
    /// it keep a private copy of its bytes (where the memory cannot be mapped
    /// again, it goes back when the last view goes).
    fn close(&self) -> PyResult<()> {
        if self.device.load(Ordering::Acquire) > 0 {
            return Err(PyRuntimeError::new_err(
                "the DMA buffer is in use by a transfer: wait for it before closing",
            ));
        }
        self.closed.store(true, Ordering::SeqCst);
        self.release_if_done();
        Ok(())
    }

    /// The buffer protocol: a writable, one-dimensional view of the bytes in
    /// place.
    ///
    /// # Safety
    ///
    /// Called by Python with a valid `Py_buffer` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        // Counted before the look at `closed` (and `close` stores `closed`
        // before it counts the views, both sequentially consistent): a close
        // that runs meanwhile either sees this view, and cuts it off, or is
        // seen here.
        me.exports.fetch_add(1, Ordering::SeqCst);
        if me.closed.load(Ordering::SeqCst) {
            me.exports.fetch_sub(1, Ordering::AcqRel);
            return Err(PyBufferError::new_err("the DMA buffer is closed"));
        }
        let (address, len) = (me.address, me.nbytes);
        // SAFETY: Python asked for the view. The address stays mapped while
        // the view holds `obj` (this buffer, which owns the mapping); the
        // memory behind it is the buffer's until `close` or `surrender` cuts
        // the mapping off to a private copy, before the memory goes back to
        // the pool or to the device for good; the device writes it only while
        // a transfer owns it, as on PYNQ.
        let filled = unsafe {
            crate::window::fill_view(view, flags, slf.clone().into_any(), address, len, true)
        };
        if filled.is_err() {
            me.exports.fetch_sub(1, Ordering::AcqRel);
        }
        filled
    }

    /// The end of a view: the memory goes back once closed and unviewed.
    ///
    /// # Safety
    ///
    /// Called by Python with a view this object filled.
    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: Python releases a view `__getbuffer__` filled, once.
        unsafe { crate::window::release_view(view) };
        self.exports.fetch_sub(1, Ordering::AcqRel);
        self.release_if_done();
    }

    fn __repr__(&self) -> String {
        format!(
            "DmaBuffer(nbytes={}, physical_address={:#x}{})",
            self.nbytes,
            self.physical,
            if self.closed() { ", closed" } else { "" }
        )
    }
}
