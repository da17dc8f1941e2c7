//! Slots of a queue handed to Python in place: a window a reader may read, or
//! slots a writer reserved. Each window counts its buffer-protocol views on a
//! counter its owner shares, so that the owner can refuse to give the slots
//! away (`consume`, `commit`) while a view is alive.

use std::ffi::{CString, c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

/// Slots of a queue, in place, through the buffer protocol (read-only for a
/// reader's window).
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Window {
    /// Keeps the memory mapped while the window lives.
    _owner: Py<PyAny>,
    /// The owner's count of views alive.
    views: Arc<AtomicUsize>,
    address: usize,
    len: usize,
    writable: bool,
}

impl Window {
    /// A window of `len` bytes at `address`, kept valid by `owner` while
    /// `views` is above zero (the owner's promise).
    pub(crate) fn new(
        owner: Py<PyAny>,
        views: Arc<AtomicUsize>,
        address: usize,
        len: usize,
        writable: bool,
    ) -> Self {
        Window {
            _owner: owner,
            views,
            address,
            len,
            writable,
        }
    }
}

/// Refuses to hand slots away while views of them are alive.
pub(crate) fn no_views(views: &AtomicUsize, what: &str) -> PyResult<()> {
    if views.load(Ordering::Acquire) > 0 {
        return Err(PyBufferError::new_err(format!(
            "views of the {what} are still alive: drop them (del) first"
        )));
    }
    Ok(())
}

/// Fills a buffer-protocol view of `len` bytes at `address`, one-dimensional
/// bytes, read-only unless `writable`, held by `obj`.
///
/// # Safety
///
/// `view` is a `Py_buffer` Python asked the exporter to fill, and the bytes
/// stay valid (and, unless `writable`, unwritten by anyone the view's user
/// cannot see) while `obj` lives and the view is not released.
pub(crate) unsafe fn fill_view(
    view: *mut ffi::Py_buffer,
    flags: c_int,
    obj: Bound<'_, PyAny>,
    address: usize,
    len: usize,
    writable: bool,
) -> PyResult<()> {
    if view.is_null() {
        return Err(PyBufferError::new_err("no view to fill"));
    }
    if !writable && flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
        return Err(PyBufferError::new_err(
            "a read-only view was asked to be writable",
        ));
    }
    let format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
        CString::new("B")
            .map_err(|e| PyBufferError::new_err(e.to_string()))?
            .into_raw()
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: `view` is the caller's to fill (non-null, checked); `shape` and
    // `strides` point into the view itself, as the protocol allows for
    // one-dimensional byte buffers; the bytes' validity is the caller's promise.
    unsafe {
        (*view).obj = obj.into_ptr();
        (*view).buf = address as *mut c_void;
        (*view).len = len as isize;
        (*view).readonly = c_int::from(!writable);
        (*view).itemsize = 1;
        (*view).format = format;
        (*view).ndim = 1;
        (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
            &mut (*view).len
        } else {
            std::ptr::null_mut()
        };
        (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
            &mut (*view).itemsize
        } else {
            std::ptr::null_mut()
        };
        (*view).suboffsets = std::ptr::null_mut();
        (*view).internal = std::ptr::null_mut();
    }
    Ok(())
}

/// Frees what [`fill_view`] made for a view.
///
/// # Safety
///
/// `view` was filled by [`fill_view`] and is released once.
pub(crate) unsafe fn release_view(view: *mut ffi::Py_buffer) {
    // SAFETY: the format string, if any, came from `CString::into_raw`.
    unsafe {
        if !view.is_null() && !(*view).format.is_null() {
            drop(CString::from_raw((*view).format));
        }
    }
}

#[pymethods]
impl Window {
    /// Bytes in the window.
    #[getter]
    fn nbytes(&self) -> usize {
        self.len
    }

    /// The buffer protocol: the slots in place.
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
        let (address, len, writable) = (me.address, me.len, me.writable);
        let views = me.views.clone();
        // SAFETY: Python asked for the view. The slots stay the view's while
        // it is counted (the owner refuses to give them away until the count
        // drops), and the memory stays mapped while `obj` (this window, which
        // holds the owner) lives.
        unsafe { fill_view(view, flags, slf.into_any(), address, len, writable) }?;
        views.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The end of a view.
    ///
    /// # Safety
    ///
    /// Called by Python with a view this object filled.
    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: Python releases a view `__getbuffer__` filled, once.
        unsafe { release_view(view) };
        self.views.fetch_sub(1, Ordering::AcqRel);
    }
}
