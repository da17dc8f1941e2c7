//! dmaflow's own transfer API beyond PYNQ's: two-way transfers through a
//! board's engine with a completion mode of the caller's choice, the GIL
//! released while the transfer runs.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::buffer::DmaBuffer;
use crate::names::completion;
use crate::state::BoardState;

/// A board's AXI DMA engine driven by dmaflow's zero-copy two-way transfer
/// (both channels at once, the receive side first).
#[pyclass(module = "dmaflow._native", frozen)]
pub struct Engine {
    board: Arc<BoardState>,
    /// Which of the board's engines.
    index: usize,
}

impl Engine {
    pub(crate) fn new(board: Arc<BoardState>, index: usize) -> Self {
        Engine { board, index }
    }

    /// Runs `f` with both buffers lent (neither can be closed meanwhile) and
    /// the GIL released.
    fn with_buffers<T: Send>(
        &self,
        py: Python<'_>,
        tx: &Bound<'_, DmaBuffer>,
        rx: &Bound<'_, DmaBuffer>,
        f: impl FnOnce(&BoardState, usize, &DmaBuffer, &DmaBuffer) -> PyResult<T> + Send,
    ) -> PyResult<T> {
        if tx.is(rx) {
            return Err(PyValueError::new_err(
                "send and receive buffers must differ",
            ));
        }
        self.board.not_in_a_ring(self.index)?;
        let (t, r) = (tx.clone().unbind(), rx.clone().unbind());
        t.get().lend()?;
        if let Err(e) = r.get().lend() {
            t.get().give_back();
            return Err(e);
        }
        let board = self.board.clone();
        let index = self.index;
        let out = py.detach(|| f(&board, index, t.get(), r.get()));
        t.get().give_back();
        r.get().give_back();
        out
    }
}

#[pymethods]
impl Engine {
    /// Sends the first `nbytes` bytes of `tx` (all of it by default) and
    /// receives into `rx`; returns the bytes received. `completion` is
    /// `"poll"`, `"yield"` or `"irq"`. On a timeout or an engine error the
    /// engine is halted before the exception; a buffer it could not be
    /// halted over is given up to it (`lost`).
    #[pyo3(signature = (tx, rx, nbytes = None, completion = "irq"))]
    fn two_way(
        &self,
        py: Python<'_>,
        tx: &Bound<'_, DmaBuffer>,
        rx: &Bound<'_, DmaBuffer>,
        nbytes: Option<usize>,
        completion: &str,
    ) -> PyResult<usize> {
        let c = self::completion(completion)?;
        let n = nbytes.unwrap_or(tx.get().len());
        let rx_len = rx.get().len();
        self.with_buffers(py, tx, rx, move |board, index, t, r| {
            let engine = board.engine(index);
            t.with(|tb| {
                r.with(|rb| {
                    engine
                        .two_way_into(tb, n, rb, rx_len, c)
                        .map_err(crate::errors::dma)
                })
            })
        })
    }

    /// The Rust API's cost, measured in the same process as the Python
    /// layer's: `count` two-way transfers of `nbytes` bytes done in a Rust
    /// loop; returns the seconds each one took.
    #[pyo3(signature = (tx, rx, nbytes, count, completion = "poll"))]
    fn _rust_loop(
        &self,
        py: Python<'_>,
        tx: &Bound<'_, DmaBuffer>,
        rx: &Bound<'_, DmaBuffer>,
        nbytes: usize,
        count: usize,
        completion: &str,
    ) -> PyResult<Vec<f64>> {
        let c = self::completion(completion)?;
        let rx_len = rx.get().len();
        self.with_buffers(py, tx, rx, move |board, index, t, r| {
            let engine = board.engine(index);
            t.with(|tb| {
                r.with(|rb| {
                    let mut times = Vec::with_capacity(count);
                    for _ in 0..count {
                        let t0 = std::time::Instant::now();
                        engine
                            .two_way_into(tb, nbytes, rb, rx_len, c)
                            .map_err(crate::errors::dma)?;
                        times.push(t0.elapsed().as_secs_f64());
                    }
                    Ok(times)
                })
            })
        })
    }
}
