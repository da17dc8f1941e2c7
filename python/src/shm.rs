//! dmaflow's queue shared between processes (`dmaflow::ring::shm`) from
//! Python: a writer in one process, readers in others, the same in-place
//! windows as [`crate::queue`] with the same counting of views. Items are of
//! 1, 2, 4, 8 or 16 bytes (numpy's item sizes); the queue checks that both
//! ends agree on it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use dmaflow::ring::Pod;
use dmaflow::ring::shm::{EvictReason, ReaderEvent, ShmConfig, ShmReader, ShmWriter};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::queue::poll_until;
use crate::window::{Lease, Window};

/// One end of a shared queue, over items of one of numpy's sizes.
enum BySize<A, B, C, D, E> {
    B1(A),
    B2(B),
    B4(C),
    B8(D),
    B16(E),
}

type AnyWriter =
    BySize<ShmWriter<u8>, ShmWriter<u16>, ShmWriter<u32>, ShmWriter<u64>, ShmWriter<[u64; 2]>>;
type AnyReader =
    BySize<ShmReader<u8>, ShmReader<u16>, ShmReader<u32>, ShmReader<u64>, ShmReader<[u64; 2]>>;

/// `$body` with `$v` bound to whichever end `$e` holds.
macro_rules! each {
    ($e:expr, $v:ident => $body:expr) => {
        match $e {
            BySize::B1($v) => $body,
            BySize::B2($v) => $body,
            BySize::B4($v) => $body,
            BySize::B8($v) => $body,
            BySize::B16($v) => $body,
        }
    };
}

/// `$make::<T>($args)` for the `T` of `itemsize` bytes, as a [`BySize`].
macro_rules! by_size {
    ($itemsize:expr, $make:ident ( $($arg:expr),* )) => {
        match $itemsize {
            1 => BySize::B1($make::<u8>($($arg),*)?),
            2 => BySize::B2($make::<u16>($($arg),*)?),
            4 => BySize::B4($make::<u32>($($arg),*)?),
            8 => BySize::B8($make::<u64>($($arg),*)?),
            16 => BySize::B16($make::<[u64; 2]>($($arg),*)?),
            n => {
                return Err(PyValueError::new_err(format!(
                    "item size {n}: a shared queue holds items of 1, 2, 4, 8 or 16 bytes"
                )));
            }
        }
    };
}

/// The address and byte length of a slice of items.
fn span<T: Pod>(s: &[T]) -> (usize, usize) {
    (s.as_ptr() as usize, std::mem::size_of_val(s))
}

fn create<T: Pod>(items: usize, cfg: &ShmConfig) -> PyResult<ShmWriter<T>> {
    ShmWriter::create(items, cfg).map_err(crate::errors::ring)
}

fn attach<T: Pod>(fd: OwnedFd) -> PyResult<ShmReader<T>> {
    // SAFETY: the object is a dmaflow shared queue's (its layout is checked),
    // written only by its writer, and this reader's windows are views that
    // `consume` refuses to give back while alive; what the contract leaves
    // to the caller (not holding a window past the writer's eviction time
    // while it waits) is said in the Python class's documentation.
    unsafe { ShmReader::from_fd(fd) }.map_err(crate::errors::ring)
}

fn reason(r: EvictReason) -> String {
    match r {
        EvictReason::ProcessGone => "process gone".into(),
        EvictReason::NoProgress(d) => format!("no progress for {:.3} s", d.as_secs_f64()),
    }
}

/// The writing end of a queue shared between processes.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct SharedWriter {
    writer: Mutex<Option<AnyWriter>>,
    itemsize: usize,
    capacity: usize,
    fd: i32,
    views: Arc<Lease>,
}

impl SharedWriter {
    fn with<T>(&self, f: impl FnOnce(&mut AnyWriter) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        match g.as_mut() {
            Some(w) => f(w),
            None => Err(PyValueError::new_err("the shared queue's writer is closed")),
        }
    }
}

#[pymethods]
impl SharedWriter {
    /// A new queue of at least `items` items of `itemsize` bytes, in a new
    /// file at `path` (removed when the writer closes) or, without one, in
    /// an anonymous memory object (its descriptor is `fd`, to pass to a
    /// child process).
    #[new]
    #[pyo3(signature = (items, itemsize, path = None, max_readers = 8, evict_after = 1.0))]
    fn new(
        items: usize,
        itemsize: usize,
        path: Option<PathBuf>,
        max_readers: usize,
        evict_after: f64,
    ) -> PyResult<Self> {
        if !(evict_after.is_finite() && evict_after > 0.0) {
            return Err(PyValueError::new_err(format!(
                "evict_after of {evict_after} s: a positive number of seconds"
            )));
        }
        let cfg = ShmConfig {
            max_readers,
            path,
            evict_after: Duration::from_secs_f64(evict_after),
        };
        let w: AnyWriter = by_size!(itemsize, create(items, &cfg));
        let (capacity, fd) = each!(&w, x => (x.capacity(), x.fd().as_raw_fd()));
        Ok(SharedWriter {
            writer: Mutex::new(Some(w)),
            itemsize,
            capacity,
            fd,
            views: Arc::default(),
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

    /// The memory object's file descriptor (valid while the writer is open).
    #[getter]
    fn fd(&self) -> i32 {
        self.fd
    }

    /// Readers attached now.
    #[getter]
    fn readers(&self) -> PyResult<usize> {
        self.with(|w| Ok(each!(w, x => x.readers())))
    }

    /// Waits (the GIL released) until `n` readers are attached, at most
    /// `timeout` seconds (`TimeoutError` after).
    fn wait_for_readers(&self, py: Python<'_>, n: usize, timeout: f64) -> PyResult<()> {
        poll_until(py, Some(timeout), "wait_for_readers", || {
            self.with(|w| Ok((each!(w, x => x.readers()) >= n).then_some(())))
        })
    }

    /// Waits (at most `timeout` seconds; `None`: for ever) until `n` free
    /// slots can be reserved and returns them in place. Readers that are gone
    /// or stuck are evicted meanwhile (see `events`).
    #[pyo3(signature = (n, timeout = None))]
    fn reserve(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Window> {
        let me = slf.get();
        let (address, len) = poll_until(py, timeout, "reserve", || {
            me.with(|w| {
                Ok(each!(w, x => x
                    .try_reserve(n)
                    .map_err(crate::errors::ring)?
                    .map(|s| span(s))))
            })
        })?;
        Ok(Window::new(
            slf.clone().into_any().unbind(),
            me.views.clone(),
            address,
            len,
            true,
        ))
    }

    /// Publishes the first `n` reserved items; refused while a view of the
    /// reservation is alive.
    fn commit(&self, n: usize) -> PyResult<()> {
        self.views.hand_on("reserved slots")?;
        self.with(|w| each!(w, x => x.commit(n).map_err(crate::errors::ring)))
    }

    /// What happened to readers since the last call: `(slot, pid, position,
    /// reason)` for each eviction.
    fn events(&self) -> PyResult<Vec<(usize, u32, u64, String)>> {
        self.with(|w| {
            Ok(each!(w, x => x.take_events())
                .into_iter()
                .map(|e| match e {
                    ReaderEvent::Evicted {
                        slot,
                        pid,
                        position,
                        reason: r,
                    } => (slot, pid, position, reason(r)),
                })
                .collect())
        })
    }

    /// Ends the stream (readers get what is left, then empty windows) and
    /// removes the queue's file, if it has one.
    fn close(&self) -> PyResult<()> {
        self.views.hand_on("reserved slots")?;
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(())
    }
}

/// A reading end of a queue shared between processes.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct SharedReader {
    reader: Mutex<AnyReader>,
    itemsize: usize,
    capacity: usize,
    views: Arc<Lease>,
}

#[pymethods]
impl SharedReader {
    /// Attaches to the queue at `path`, or in the memory object `fd` (a
    /// descriptor this process owns, for instance passed by its parent; it
    /// is taken over), reading items of `itemsize` bytes.
    #[new]
    #[pyo3(signature = (itemsize, path = None, fd = None))]
    fn new(itemsize: usize, path: Option<PathBuf>, fd: Option<i32>) -> PyResult<Self> {
        let owned = match (path, fd) {
            (Some(p), None) => std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .map(OwnedFd::from)
                .map_err(|e| PyValueError::new_err(format!("cannot open {}: {e}", p.display())))?,
            (None, Some(fd)) if fd >= 0 => {
                // A duplicate of the caller's descriptor: the caller keeps
                // its own, and a descriptor that is not open is an error.
                let dup = dup_fd(fd)?;
                // SAFETY: `dup` is a new descriptor this process owns alone.
                unsafe { OwnedFd::from_raw_fd(dup) }
            }
            _ => {
                return Err(PyValueError::new_err(
                    "a shared queue is attached by path or by fd (one of them)",
                ));
            }
        };
        let r: AnyReader = by_size!(itemsize, attach(owned));
        let capacity = each!(&r, x => x.capacity());
        Ok(SharedReader {
            reader: Mutex::new(r),
            itemsize,
            capacity,
            views: Arc::default(),
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

    /// Waits (at most `timeout` seconds; `None`: for ever) until `n` items
    /// are readable (the firing threshold) and returns exactly `n` in place,
    /// read-only; fewer, down to none, once the writer has closed. A writer
    /// process that exits without closing is an error, not a wait.
    #[pyo3(signature = (n, timeout = None))]
    fn peek(
        slf: &Bound<'_, Self>,
        py: Python<'_>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Window> {
        let me = slf.get();
        let itemsize = me.itemsize;
        let (address, len) = poll_until(py, timeout, "peek", || {
            let mut g = me.reader.lock().unwrap_or_else(PoisonError::into_inner);
            each!(&mut *g, x => {
                match x.try_peek(n).map_err(crate::errors::ring)? {
                    Some(s) => {
                        let (a, bytes) = span(s);
                        Ok(Some((a, bytes.min(n * itemsize))))
                    }
                    None => {
                        x.check().map_err(crate::errors::ring)?;
                        Ok(None)
                    }
                }
            })
        })?;
        Ok(Window::new(
            slf.clone().into_any().unbind(),
            me.views.clone(),
            address,
            len,
            false,
        ))
    }

    /// Releases the first `n` items of the window; refused while a view of
    /// the window is alive.
    fn consume(&self, n: usize) -> PyResult<()> {
        self.views.hand_on("window")?;
        let mut g = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        each!(&mut *g, x => x.consume(n).map_err(crate::errors::ring))
    }

    /// Raises if this reader was evicted since its last window was made:
    /// what the window showed may have been overwritten. Ask after reading a
    /// window in place and before acting on what was read.
    fn intact(&self) -> PyResult<()> {
        let g = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        each!(&*g, x => x.intact().map_err(crate::errors::ring))
    }
}

/// A new descriptor for the open file `fd` (close-on-exec).
fn dup_fd(fd: i32) -> PyResult<i32> {
    // SAFETY: `fd` is borrowed only for the duplication, within this call; a
    // descriptor that is not open makes `fcntl(F_DUPFD_CLOEXEC)` fail with
    // EBADF, an error returned, not a use of someone else's file.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    borrowed
        .try_clone_to_owned()
        .map(|o| {
            use std::os::fd::IntoRawFd;
            o.into_raw_fd()
        })
        .map_err(|e| PyValueError::new_err(format!("descriptor {fd}: {e}")))
}
