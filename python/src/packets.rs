//! dmaflow's packet ring (paper 004's stream of packets through a ring of DMA
//! buffers) from Python. The ring borrows its engine for its whole life, so it
//! lives on a thread of its own that holds the engine; Python's calls reach it
//! as requests and wait for the answer with the GIL released (standard I/O:
//! the packet is copied into and out of the ring's DMA buffers, as
//! `PacketRing::send`/`recv` do).

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};

use dmaflow::dma::{self, Completion};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::packet as to_py;
use crate::state::BoardState;

/// A request to the ring's thread.
enum Request {
    Send(Vec<u8>),
    Recv,
    Flush,
}

/// Its answer: a packet received, or nothing, or the error.
type Answer = Result<Option<Vec<u8>>, dma::Error>;

/// Where requests go: each with the channel its answer comes back on.
type Requests = Sender<(Request, Sender<Answer>)>;

/// A ring of `slots` DMA buffers of `slot_bytes` each on one engine of a
/// scatter-gather design: `send(data)` queues a packet (descriptors handed
/// over `batch` at a time), `recv()` returns the next packet received.
#[pyclass(module = "dmaflow._native", frozen)]
pub struct PacketRing {
    requests: Mutex<Option<Requests>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    slot_bytes: usize,
}

impl PacketRing {
    pub(crate) fn new(
        board: Arc<BoardState>,
        engine: usize,
        slots: usize,
        slot_bytes: usize,
        batch: usize,
        c: Completion,
    ) -> PyResult<Self> {
        if !board.sg(engine) {
            return Err(PyValueError::new_err(
                "a packet ring needs a scatter-gather design (c_include_sg = 1)",
            ));
        }
        board.take_for_ring(engine)?;
        let (tx, rx) = channel::<(Request, Sender<Answer>)>();
        let (ready_tx, ready_rx) = channel::<Result<(), dma::Error>>();
        let held = board.clone();
        let thread = std::thread::Builder::new()
            .name("dmaflow-packet-ring".into())
            .spawn(move || serve(&board, engine, slots, slot_bytes, batch, c, &rx, &ready_tx))
            .map_err(|e| {
                held.release_from_ring(engine);
                crate::errors::runtime(e)
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(PacketRing {
                requests: Mutex::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
                slot_bytes,
            }),
            Ok(Err(e)) => Err(to_py(e)),
            Err(_) => Err(PyRuntimeError::new_err("the packet ring's thread ended")),
        }
    }

    fn ask(&self, py: Python<'_>, r: Request) -> PyResult<Option<Vec<u8>>> {
        let requests = self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| PyRuntimeError::new_err("the packet ring is closed"))?;
        let (answer_tx, answer_rx) = channel();
        requests
            .send((r, answer_tx))
            .map_err(|_| PyRuntimeError::new_err("the packet ring's thread ended"))?;
        py.detach(move || answer_rx.recv())
            .map_err(|_| PyRuntimeError::new_err("the packet ring's thread ended"))?
            .map_err(to_py)
    }
}

/// The ring's thread: holds the engine and the ring until the requests end.
#[allow(clippy::too_many_arguments)]
fn serve(
    board: &BoardState,
    engine: usize,
    slots: usize,
    slot_bytes: usize,
    batch: usize,
    c: Completion,
    requests: &Receiver<(Request, Sender<Answer>)>,
    ready: &Sender<Result<(), dma::Error>>,
) {
    /// Lets the engine go when the thread ends, however it ends.
    struct Release<'a>(&'a BoardState, usize);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.release_from_ring(self.1);
        }
    }
    let _release = Release(board, engine);
    let e = board.engine(engine);
    let mut ring = match dma::PacketRing::new(&e, slots, slot_bytes, batch, c) {
        Ok(r) => {
            let _ = ready.send(Ok(()));
            r
        }
        Err(err) => {
            let _ = ready.send(Err(err));
            return;
        }
    };
    let mut buf = vec![0u8; slot_bytes];
    for (r, answer) in requests {
        let a = match r {
            Request::Send(data) => ring.send(&data).map(|()| None),
            Request::Flush => ring.flush().map(|()| None),
            Request::Recv => ring.recv(&mut buf).map(|n| Some(buf[..n].to_vec())),
        };
        // The caller may have gone; nothing to do then.
        let _ = answer.send(a);
    }
    // Dropping the ring halts the engine before its buffers go back.
}

#[pymethods]
impl PacketRing {
    /// Bytes each buffer holds (the longest packet).
    #[getter]
    fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Queues a copy of `data` (any bytes-like object) as one packet.
    fn send(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        self.ask(py, Request::Send(data.to_vec())).map(|_| ())
    }

    /// Hands every packet queued so far to the engine.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.ask(py, Request::Flush).map(|_| ())
    }

    /// Waits (at most the board's timeout) for the next packet and returns it.
    fn recv<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        match self.ask(py, Request::Recv)? {
            Some(p) => Ok(PyBytes::new(py, &p)),
            None => Err(PyRuntimeError::new_err("no packet came back")),
        }
    }

    /// Stops the ring: the engine is halted before its buffers go back, and
    /// the engine is free for other users.
    fn close(&self, py: Python<'_>) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let t = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = t {
            py.detach(move || {
                let _ = t.join();
            });
        }
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // Ends the thread's loop; the ring halts its engine as it drops.
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}
