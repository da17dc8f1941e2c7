//! dmaflow's mirrored queue from Python: a reader's `peek(n)` is `n` items
//! in place, contiguous across the wrap (the mirror), a writer's `reserve(n)`
//! is `n` free slots in place. Views are counted: `consume` and `commit`,
//! which end a view's permission, are refused while views are alive, so a
//! view never sees slots that changed hands.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use dmaflow::ring::{self, Reader, Writer};
use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;

use crate::window::{Lease, Window};

/// A mirrored circular queue of fixed-size items (bytes underneath).
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Queue {
    writer: Mutex<Option<Writer<u8>>>,
    reader: Mutex<Reader<u8>>,
    itemsize: usize,
    capacity: usize,
    /// Views of the reader's window and of the writer's reservation alive.
    read_views: Arc<Lease>,
    write_views: Arc<Lease>,
}

/// Polls `attempt` with the GIL released until it gives an answer or
/// `timeout` passes.
pub(crate) fn poll_until<T: Send>(
    py: Python<'_>,
    timeout: Option<f64>,
    what: &str,
    mut attempt: impl FnMut() -> PyResult<Option<T>> + Send,
) -> PyResult<T> {
    let limit = timeout
        .map(|t| {
            if t.is_finite() && t >= 0.0 {
                Ok(Duration::from_secs_f64(t))
            } else {
                Err(PyValueError::new_err(format!("a timeout of {t} s")))
            }
        })
        .transpose()?;
    let got = py.detach(move || -> PyResult<Option<T>> {
        let t0 = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(v) = attempt()? {
                return Ok(Some(v));
            }
            if limit.is_some_and(|l| t0.elapsed() >= l) {
                return Ok(None);
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    })?;
    got.ok_or_else(|| PyTimeoutError::new_err(format!("{what}: nothing within {timeout:?} s")))
}

impl Queue {
    /// Bytes of `n` items; an error where that does not fit a number (taken
    /// as 64 bits on every machine, so a 32-bit board names the same error).
    fn bytes(&self, n: u64) -> PyResult<usize> {
        usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(self.itemsize))
            .ok_or_else(|| PyValueError::new_err(format!("{n} items: too many")))
    }

    fn view(slf: &Bound<'_, Self>, address: usize, len: usize, writable: bool) -> Window {
        let q = slf.get();
        let views = if writable {
            &q.write_views
        } else {
            &q.read_views
        };
        Window::new(
            slf.clone().into_any().unbind(),
            views.clone(),
            address,
            len,
            writable,
        )
    }
}

#[pymethods]
impl Queue {
    /// A queue of at least `items` items of `itemsize` bytes (a power of two
    /// up to 4096; rounded up to whole pages).
    #[new]
    fn new(items: usize, itemsize: usize) -> PyResult<Self> {
        if !itemsize.is_power_of_two() || itemsize > 4096 {
            return Err(PyValueError::new_err(format!(
                "item size {itemsize}: a power of two up to 4096 bytes"
            )));
        }
        let bytes = items
            .checked_mul(itemsize)
            .ok_or_else(|| PyValueError::new_err("the queue does not fit the address space"))?;
        let (w, r) = ring::channel::<u8>(bytes.max(1)).map_err(crate::errors::ring)?;
        let capacity = w.capacity() / itemsize;
        Ok(Queue {
            writer: Mutex::new(Some(w)),
            reader: Mutex::new(r),
            itemsize,
            capacity,
            read_views: Arc::default(),
            write_views: Arc::default(),
        })
    }

    /// Capacity in items.
    #[getter]
    fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Waits (at most `timeout` seconds; `None`: for ever) until `n` free
    /// slots can be reserved and returns them in place.
    #[pyo3(signature = (n, timeout = None))]
    fn reserve(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        n: u64,
        timeout: Option<f64>,
    ) -> PyResult<Window> {
        let bytes = slf.get().bytes(n)?;
        let queue = slf.clone().unbind();
        let address = poll_until(py, timeout, "reserve", move || {
            let q = queue.get();
            let mut g = q.writer.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g
                .as_mut()
                .ok_or_else(|| PyValueError::new_err("the queue's writer is closed"))?;
            Ok(w.try_reserve(bytes)
                .map_err(crate::errors::ring)?
                .map(|s| s.as_mut_ptr() as usize))
        })?;
        Ok(Queue::view(slf, address, bytes, true))
    }

    /// Publishes the first `n` reserved items; refused while a view of the
    /// reservation is alive.
    fn commit(&self, n: u64) -> PyResult<()> {
        self.write_views.hand_on("reserved slots")?;
        let mut g = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let w = g
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("the queue's writer is closed"))?;
        w.commit(self.bytes(n)?).map_err(crate::errors::ring)
    }

    /// Ends the stream: the reader sees what is left, then an empty window.
    fn close_writer(&self) -> PyResult<()> {
        self.write_views.hand_on("reserved slots")?;
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(())
    }

    /// Waits (at most `timeout` seconds; `None`: for ever) until `n` items
    /// are readable (the firing threshold) and returns exactly `n` in place,
    /// read-only; fewer, down to none, once the writer is closed.
    #[pyo3(signature = (n, timeout = None))]
    fn peek(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        n: u64,
        timeout: Option<f64>,
    ) -> PyResult<Window> {
        let q = slf.get();
        let bytes = q.bytes(n)?;
        let itemsize = q.itemsize;
        let queue = slf.clone().unbind();
        let (address, len) = poll_until(py, timeout, "peek", move || {
            let q = queue.get();
            let mut r = q.reader.lock().unwrap_or_else(PoisonError::into_inner);
            let closed = r.is_writer_closed();
            Ok(r.try_peek(bytes).map_err(crate::errors::ring)?.map(|s| {
                let len = if closed { s.len().min(bytes) } else { bytes };
                (s.as_ptr() as usize, len / itemsize * itemsize)
            }))
        })?;
        Ok(Queue::view(slf, address, len, false))
    }

    /// Releases the first `n` items of the window; refused while a view of
    /// the window is alive.
    fn consume(&self, n: u64) -> PyResult<()> {
        self.read_views.hand_on("window")?;
        self.reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .consume(self.bytes(n)?)
            .map_err(crate::errors::ring)
    }
}
