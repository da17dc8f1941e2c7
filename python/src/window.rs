//! Slots of a queue handed to Python in place: a window a reader may read, or
//! slots a writer reserved. Each window counts its buffer-protocol views on a
//! [`Lease`] its owner shares, so that the owner can refuse to give the slots
//! away (`consume`, `commit`, `close`) while a view is alive; and once the
//! owner has given them away, the lease's generation has moved on and the
//! window (which Python code can still reach, `arr.base.obj`) makes no new
//! view of slots that are no longer its own.

use std::ffi::{CString, c_int, c_void};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

/// What an owner of slots shares with the windows it lends: the views
/// alive, and a generation that moves on each time the slots change hands.
#[derive(Default)]
pub(crate) struct Lease {
    /// (views alive, generation)
    state: Mutex<(usize, u64)>,
}

impl Lease {
    fn state(&self) -> std::sync::MutexGuard<'_, (usize, u64)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The generation windows lent now belong to.
    pub(crate) fn generation(&self) -> u64 {
        self.state().1
    }

    /// Before the owner gives its slots away (`consume`, `commit`, a new
    /// window): refused while views of them are alive; otherwise every
    /// window lent so far makes no new view.
    pub(crate) fn hand_on(&self, what: &str) -> PyResult<()> {
        let mut st = self.state();
        if st.0 > 0 {
            return Err(PyBufferError::new_err(format!(
                "views of the {what} are still alive: drop them (del) first"
            )));
        }
        st.1 += 1;
        Ok(())
    }

    /// The owner is closing whatever happens: every window lent so far
    /// makes no new view; returns the views still alive (the owner keeps
    /// their memory for them).
    pub(crate) fn end(&self) -> usize {
        let mut st = self.state();
        st.1 += 1;
        st.0
    }

    /// Counts a new view of a window of `generation`; refused once the
    /// owner has moved on.
    fn add_view(&self, generation: u64) -> PyResult<()> {
        let mut st = self.state();
        if st.1 != generation {
            return Err(PyBufferError::new_err(
                "this window's slots were handed on (consume, commit, a newer window or \
                 close): take a new window",
            ));
        }
        st.0 += 1;
        Ok(())
    }

    fn drop_view(&self) {
        let mut st = self.state();
        st.0 = st.0.saturating_sub(1);
    }
}

/// Slots of a queue, in place, through the buffer protocol (read-only for a
/// reader's window).
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Window {
    /// Keeps the memory mapped while the window lives.
    _owner: Py<PyAny>,
    /// The owner's lease on the slots.
    lease: Arc<Lease>,
    /// The lease's generation when the window was lent.
    generation: u64,
    address: usize,
    len: usize,
    writable: bool,
}

impl Window {
    /// A window of `len` bytes at `address`, kept valid by `owner` while
    /// `lease` counts a view of it or its generation has not moved on (the
    /// owner's promise).
    pub(crate) fn new(
        owner: Py<PyAny>,
        lease: Arc<Lease>,
        address: usize,
        len: usize,
        writable: bool,
    ) -> Self {
        let generation = lease.generation();
        Window {
            _owner: owner,
            lease,
            generation,
            address,
            len,
            writable,
        }
    }
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
        let lease = me.lease.clone();
        // Counted first (refused if the slots were handed on), so that the
        // owner cannot give them away between this check and the view.
        lease.add_view(me.generation)?;
        // SAFETY: Python asked for the view. The slots stay the view's while
        // it is counted (the owner refuses to give them away until the count
        // drops, and a closing owner keeps them for it), and the memory stays
        // mapped while `obj` (this window, which holds the owner) lives.
        let filled = unsafe { fill_view(view, flags, slf.into_any(), address, len, writable) };
        if filled.is_err() {
            lease.drop_view();
        }
        filled
    }

    /// The end of a view.
    ///
    /// # Safety
    ///
    /// Called by Python with a view this object filled.
    unsafe fn __releasebuffer__(&self, view: *mut ffi::Py_buffer) {
        // SAFETY: Python releases a view `__getbuffer__` filled, once.
        unsafe { release_view(view) };
        self.lease.drop_view();
    }
}
