//! One channel of a board's AXI DMA engine, with PYNQ's shape: `transfer()`
//! hands a buffer (or part of one) to the channel, `wait()` collects it with
//! the GIL released. In direct register mode one transfer is one ADDR/LENGTH
//! pair; with the scatter-gather engine it is a descriptor chain. A transfer
//! owns its buffer until it is collected or, after a timeout or an error, the
//! engine is confirmed halted; if it cannot be, the buffer is given up to the
//! device for good (its pages replaced, so Python's views never see the
//! device's writes).

use std::sync::{Arc, Mutex, PoisonError};

use dmaflow::axi::{self, Channel as Ch, DESC_WORDS, SgChain, Wait};
use dmaflow::mem::DmaBuf;
use dmaflow::platform::IrqLine;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::buffer::DmaBuffer;
use crate::errors::{device, runtime};
use crate::state::BoardState;

/// Descriptors in a channel's scatter-gather ring.
const RING_DESCRIPTORS: usize = 256;

/// A transfer in flight on a channel.
struct Flight {
    buffer: Py<DmaBuffer>,
    /// Byte offset in the buffer, and length.
    start: usize,
    len: usize,
    /// Scatter-gather: the chain and its descriptors.
    chain: Option<(SgChain, DmaBuf<u32>)>,
    /// Cyclic descriptor mode: never complete; ends with `stop`.
    cyclic: bool,
}

#[derive(Default)]
struct State {
    flight: Option<Flight>,
    /// Bytes the last collected transfer moved.
    transferred: usize,
    /// What went wrong with the last transfer.
    error: Option<String>,
    /// Whether the channel was stopped by hand.
    stopped: bool,
    /// A transfer is being started (the engine taken without the GIL and
    /// without this state's lock): the channel is not idle.
    starting: bool,
    /// The descriptor CURDESC points at while a scatter-gather channel runs
    /// with nothing handed over (`start`); the engine never fetches it.
    park: Option<DmaBuf<u32>>,
}

/// One direction of a board's DMA engine: `"mm2s"` (PYNQ's `sendchannel`) or
/// `"s2mm"` (`recvchannel`).
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Channel {
    board: Arc<BoardState>,
    /// Which of the board's engines.
    engine: usize,
    ch: Ch,
    state: Mutex<State>,
}

impl Channel {
    pub(crate) fn new(board: Arc<BoardState>, engine: usize, ch: Ch) -> Self {
        Channel {
            board,
            engine,
            ch,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Collects the transfer in flight if the engine has finished it (one
    /// look at DMASR, or at the descriptors' status words), as PYNQ's driver
    /// finds a channel idle without a `wait()`: its buffer is handed back
    /// only once the completion is seen. An engine error is raised here,
    /// after the engine was halted.
    fn collect_finished(&self, py: Python<'_>) -> PyResult<()> {
        let mut st = self.state();
        let Some(flight) = st.flight.as_ref() else {
            return Ok(());
        };
        if flight.cyclic || self.board.in_ring(self.engine) {
            return Ok(());
        }
        let polled = {
            // Another thread's wait holds the engine: not looked at now (the
            // GIL is held here; this never waits for that wait).
            let Some(engine) = self.board.try_engine(self.engine) else {
                return Ok(());
            };
            match &flight.chain {
                Some((c, ring)) => engine
                    .dma()
                    .sg_poll(self.ch, ring, *c)
                    .map(|v| v.map(|v| v.iter().sum::<usize>())),
                None => engine.dma().poll(self.ch),
            }
        };
        match polled {
            Ok(None) => Ok(()),
            Ok(Some(n)) => {
                let flight = st
                    .flight
                    .take()
                    .unwrap_or_else(|| unreachable!("looked at above"));
                drop(st);
                self.finished(py, &flight, n).map(|_| ())
            }
            Err(e) => {
                let flight = st
                    .flight
                    .take()
                    .unwrap_or_else(|| unreachable!("looked at above"));
                drop(st);
                Err(self.failed(py, flight, &e))
            }
        }
    }

    /// A transfer seen complete with `n` bytes moved: its buffer back to
    /// Python (after the cache maintenance an S2MM transfer needs).
    fn finished(&self, py: Python<'_>, flight: &Flight, n: usize) -> PyResult<usize> {
        let buffer = flight.buffer.bind(py).get();
        if self.ch == Ch::S2mm {
            buffer.with(|b| b.sync_range_for_cpu(flight.start, n).map_err(runtime))?;
        }
        buffer.give_back();
        let n = n.min(flight.len);
        self.state().transferred = n;
        Ok(n)
    }

    /// After a failed wait: the driver recovered the engine; if it could not
    /// be halted, the buffer (and the descriptors) go to the device for good.
    fn failed(&self, py: Python<'_>, flight: Flight, e: &axi::Error) -> PyErr {
        let dead = self.board.engine(self.engine).dma().is_failed();
        let buffer = flight.buffer.bind(py).get();
        if dead {
            buffer.surrender();
            if let Some((_, mut ring)) = flight.chain {
                ring.surrender();
            }
        }
        buffer.give_back();
        self.state().error = Some(e.to_string());
        crate::errors::axi(e)
    }
}

#[pymethods]
impl Channel {
    /// Hands `nbytes` bytes of `buffer` from byte `start` to the channel
    /// (all of it from `start` when `nbytes` is 0). Refused while a transfer
    /// is in flight, for a closed buffer, a range outside it, or (direct
    /// mode) more than the length register holds; a scatter-gather engine
    /// spreads a longer transfer over several descriptors, as PYNQ's driver
    /// does. `cyclic` (scatter-gather, send channel only, as on PYNQ) sends
    /// the range again and again until `stop`.
    #[pyo3(signature = (buffer, start = 0, nbytes = 0, cyclic = false))]
    fn transfer(
        &self,
        buffer: Bound<'_, DmaBuffer>,
        start: usize,
        nbytes: usize,
        cyclic: bool,
    ) -> PyResult<()> {
        if cyclic && self.ch != Ch::Mm2s {
            return Err(PyRuntimeError::new_err(
                "Cyclic BD mode only valid in sendchannel",
            ));
        }
        // A transfer the engine finished without a `wait()` is collected here.
        self.collect_finished(buffer.py())?;
        let mut st = self.state();
        if st.flight.is_some() || st.starting {
            return Err(PyRuntimeError::new_err(format!(
                "{}: DMA channel not idle: a transfer is in flight",
                self.ch
            )));
        }
        if st.stopped {
            return Err(PyRuntimeError::new_err(format!(
                "{}: DMA channel not started",
                self.ch
            )));
        }
        self.board.not_in_a_ring(self.engine)?;
        let b = buffer.get();
        if !b.is_on(&self.board) {
            // Another board's memory: its addresses mean other bytes here.
            return Err(PyValueError::new_err(
                "the buffer is another board's memory (allocated before this overlay was \
                 loaded, or for another board): allocate it again after loading the overlay",
            ));
        }
        let len = if nbytes == 0 {
            b.len().saturating_sub(start)
        } else {
            nbytes
        };
        if len == 0 || start.checked_add(len).is_none_or(|end| end > b.len()) {
            return Err(PyValueError::new_err(format!(
                "{len} bytes from byte {start} are not inside the {}-byte buffer",
                b.len()
            )));
        }
        let addr = b.with(|buf| {
            // What the CPU wrote reaches memory before the device reads it; no
            // dirty line is written back over what the device writes.
            match self.ch {
                Ch::Mm2s => buf.sync_range_for_device(start, len),
                Ch::S2mm => buf.sync_range_for_cpu(start, len),
            }
            .map_err(runtime)?;
            Ok(buf.bus_addr() + start as u64)
        })?;
        b.lend()?;
        // Not idle from here; this state's lock is not held while the engine
        // is awaited (a look at the channel from another thread must not wait
        // with the GIL held).
        st.starting = true;
        drop(st);
        let board = self.board.clone();
        let (ch, index) = (self.ch, self.engine);
        // The engine is taken with the GIL released: another thread may hold
        // it for a moment (a look at DMASR) or longer (a two-way transfer).
        let started = buffer.py().detach(move || {
            let engine = board.engine(index);
            let dma = engine.dma();
            if cyclic && !dma.sg_included() {
                return Err(PyRuntimeError::new_err(
                    "cyclic BD mode needs an engine with scatter-gather (C_INCLUDE_SG)",
                ));
            }
            if !dma.sg_included() && len > dma.max_len() {
                return Err(PyValueError::new_err(format!(
                    "{ch}: {len} bytes is more than the {}-byte limit of the length register",
                    dma.max_len()
                )));
            }
            if dma.sg_included() {
                let ring = engine
                    .pool()
                    .alloc::<u32>(RING_DESCRIPTORS * DESC_WORDS)
                    .map_err(runtime);
                ring.and_then(|mut ring| {
                    // SAFETY: the buffer is lent to this transfer (`lend`: it
                    // cannot be closed or freed) and the channel keeps it until
                    // a wait or a look collects the chain or, after a failure,
                    // the engine is confirmed halted; if it cannot be, the
                    // buffer and the descriptors are given up to the device
                    // (`failed`).
                    let chain = unsafe {
                        if cyclic {
                            dma.sg_start_cyclic(ch, &mut ring, &[(addr, len)], false)
                        } else {
                            dma.sg_start(ch, &mut ring, &[(addr, len)], true)
                        }
                    };
                    chain.map(|c| Some((c, ring))).map_err(device)
                })
            } else {
                // SAFETY: as above, for the direct-mode transfer.
                unsafe { dma.start(ch, addr, len, true) }
                    .map(|()| None)
                    .map_err(device)
            }
        });
        let mut st = self.state();
        st.starting = false;
        match started {
            Ok(chain) => {
                st.flight = Some(Flight {
                    buffer: buffer.unbind(),
                    start,
                    len,
                    chain,
                    cyclic,
                });
                st.error = None;
                st.stopped = false;
                Ok(())
            }
            Err(e) => {
                b.give_back();
                Err(e)
            }
        }
    }

    /// Waits for the transfer in flight (at most the board's timeout, with the
    /// GIL released, sleeping on the channel's interrupt line); returns the
    /// bytes moved (for S2MM: received, TLAST may end it early). A timeout
    /// raises `DmaTimeoutError`, an engine error `DmaError`, both after the
    /// engine was halted.
    fn wait(&self, py: Python<'_>) -> PyResult<usize> {
        self.board.not_in_a_ring(self.engine)?;
        if self.state().flight.as_ref().is_some_and(|f| f.cyclic) {
            return Err(PyRuntimeError::new_err("Cannot wait in cyclic BD mode"));
        }
        let Some(mut flight) = self.state().flight.take() else {
            // Idle (nothing started, or collected already): as PYNQ's wait,
            // nothing to wait for; the last transfer's count.
            if self.state().stopped {
                return Err(PyRuntimeError::new_err(format!(
                    "{}: DMA channel not started",
                    self.ch
                )));
            }
            return Ok(self.state().transferred);
        };
        let board = self.board.clone();
        let (ch, index) = (self.ch, self.engine);
        let chain = flight.chain.take();
        let (waited, chain) = py.detach(move || {
            // Asleep on the interrupt line, not holding the engine: the other
            // channel's calls go on meanwhile (each look at DMASR takes the
            // engine for that look only). By scheduled polling where the
            // board does not wire the channel's interrupt to this program.
            let line = board.line(index, ch);
            let how = if line.wired() {
                Wait::Irq(&*line)
            } else {
                Wait::Yield
            };
            let timeout = board.engine(index).dma().timeout();
            let r = axi::wait_until(
                timeout,
                &how,
                || {
                    let engine = board.engine(index);
                    match &chain {
                        Some((c, ring)) => engine
                            .dma()
                            .sg_poll(ch, ring, *c)
                            .map(|v| v.map(|v| v.iter().sum())),
                        None => engine.dma().poll(ch),
                    }
                },
                || board.engine(index).dma().timed_out(ch),
                || {
                    board.engine(index).dma().recover();
                },
            );
            (r, chain)
        });
        flight.chain = chain;
        match waited {
            Ok(n) => self.finished(py, &flight, n),
            Err(e) => Err(self.failed(py, flight, &e)),
        }
    }

    /// Whether nothing is in flight: a transfer the engine has finished is
    /// collected on this look (PYNQ reads DMASR's Idle bit the same way).
    #[getter]
    fn idle(&self, py: Python<'_>) -> PyResult<bool> {
        self.collect_finished(py)?;
        let st = self.state();
        Ok(st.flight.is_none() && !st.starting)
    }

    /// Whether the channel runs, as PYNQ reads it: DMASR not Halted (and the
    /// engine in service). A channel another thread waits on runs.
    #[getter]
    fn running(&self) -> bool {
        if self.state().stopped || self.board.in_ring(self.engine) {
            return false;
        }
        match self.board.try_engine(self.engine) {
            Some(engine) => {
                let dma = engine.dma();
                !dma.is_failed()
                    && dma
                        .status(self.ch)
                        .is_ok_and(|sr| sr & axi::regs::DMASR_HALTED == 0)
            }
            None => true,
        }
    }

    /// What went wrong with the last transfer (`None` if nothing).
    #[getter]
    fn error(&self) -> Option<String> {
        self.state().error.clone()
    }

    /// Bytes the last collected transfer moved.
    #[getter]
    fn transferred(&self) -> usize {
        self.state().transferred
    }

    /// DMASR of the channel.
    #[getter]
    fn status(&self) -> PyResult<u32> {
        self.board.not_in_a_ring(self.engine)?;
        self.board
            .engine(self.engine)
            .dma()
            .status(self.ch)
            .map_err(runtime)
    }

    /// Starts the channel, as PYNQ's driver does when the IP is created:
    /// DMACR.RS set, DMASR leaves Halted (a reset first brings a failed engine
    /// back into service). On a scatter-gather engine CURDESC first points at
    /// a descriptor of the channel's own that is never handed over.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        self.board.not_in_a_ring(self.engine)?;
        let mut st = self.state();
        if st.flight.is_some() || st.starting {
            // In flight: it runs.
            return Ok(());
        }
        let board = self.board.clone();
        let (ch, index) = (self.ch, self.engine);
        let mut park = st.park.take();
        drop(st);
        let started = py.detach(move || {
            let engine = board.engine(index);
            let dma = engine.dma();
            if dma.is_failed() {
                dma.reset().map_err(runtime)?;
            }
            if dma.sg_included() && park.is_none() {
                park = Some(engine.pool().alloc::<u32>(DESC_WORDS).map_err(runtime)?);
            }
            // SAFETY: the parked descriptor is kept in this channel's state
            // (the next start parks the same one) and never
            // written; the driver writes TAILDESC only after arming the channel
            // with descriptors of its own (`sg_start`, `ring_start`).
            unsafe { dma.run(ch, true, park.as_ref()) }.map_err(device)?;
            Ok::<_, PyErr>(park)
        });
        let mut st = self.state();
        st.park = started?;
        st.stopped = false;
        Ok(())
    }

    /// Stops the channel (DMACR.RS cleared, DMASR reports Halted): refused
    /// while a transfer is in flight (wait for it).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        self.collect_finished(py)?;
        let mut st = self.state();
        if st.flight.as_ref().is_some_and(|f| f.cyclic) {
            // Cyclic mode ends here: the buffer comes back once the channel is
            // confirmed halted (or the engine recovered by a reset).
            let flight = st
                .flight
                .take()
                .unwrap_or_else(|| unreachable!("looked at above"));
            st.stopped = true;
            drop(st);
            let board = self.board.clone();
            let (ch, index) = (self.ch, self.engine);
            let stopped = py.detach(move || board.engine(index).dma().stop(ch));
            return match stopped {
                Ok(()) => {
                    flight.buffer.bind(py).get().give_back();
                    Ok(())
                }
                Err(e) => Err(self.failed(py, flight, &e)),
            };
        }
        if st.flight.is_some() || st.starting {
            return Err(PyRuntimeError::new_err(format!(
                "{}: a transfer is in flight: wait for it before stopping",
                self.ch
            )));
        }
        st.stopped = true;
        drop(st);
        if self.board.in_ring(self.engine) {
            return Ok(());
        }
        let board = self.board.clone();
        let (ch, index) = (self.ch, self.engine);
        py.detach(move || {
            let engine = board.engine(index);
            let dma = engine.dma();
            if dma.is_failed() {
                return Ok(());
            }
            dma.stop(ch).map_err(device)
        })
    }
}
