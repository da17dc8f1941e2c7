//! Python's exceptions for what the library reports: the module's own
//! (`DmaError`, `DmaTimeoutError`, `QueueClosed`) and the choice between
//! them and Python's built-in ones, made here and nowhere else.

use dmaflow::{axi, dma, graph, ring};
use pyo3::PyErr;
use pyo3::exceptions::{PyRuntimeError, PyValueError};

use crate::state;

pyo3::create_exception!(
    _native,
    DmaError,
    pyo3::exceptions::PyRuntimeError,
    "The DMA engine reported an error (named, with DMASR); it was halted before this was raised."
);
pyo3::create_exception!(
    _native,
    DmaTimeoutError,
    pyo3::exceptions::PyTimeoutError,
    "A DMA transfer did not complete in time; the engine was halted (or the buffer given up to it) before this was raised."
);
pyo3::create_exception!(
    _native,
    QueueClosed,
    pyo3::exceptions::PyBrokenPipeError,
    "Every reader of this graph queue has finished: the writing node's work is done. A node that lets it propagate ends normally."
);

/// A failure of the library's as Python's `RuntimeError`, naming it.
pub(crate) fn runtime(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// Bad input as Python's `ValueError`, naming it.
pub(crate) fn value(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// DMA memory that could not be had, as Python's `MemoryError`.
pub(crate) fn memory(e: impl std::fmt::Display) -> PyErr {
    pyo3::exceptions::PyMemoryError::new_err(e.to_string())
}

/// A queue's refusal (too big, closed, more than its window): `ValueError`.
pub(crate) fn ring(e: ring::Error) -> PyErr {
    value(e)
}

/// A process network's failure: `QueueClosed` where a port's queue has no
/// reader left (the writing node's work is done), `RuntimeError` otherwise.
pub(crate) fn graph(e: graph::Error) -> PyErr {
    match e {
        graph::Error::Port {
            source: ring::Error::Closed,
            ..
        } => QueueClosed::new_err(e.to_string()),
        e => runtime(e),
    }
}

/// What the DMA engine reported, as `DmaError`.
pub(crate) fn device(e: impl std::fmt::Display) -> PyErr {
    DmaError::new_err(e.to_string())
}

/// A failed wait for the engine: `DmaTimeoutError` for a timeout,
/// `DmaError` otherwise.
pub(crate) fn axi(e: &axi::Error) -> PyErr {
    match e {
        axi::Error::Timeout { .. } => DmaTimeoutError::new_err(e.to_string()),
        _ => device(e),
    }
}

/// A failed transfer: as [`axi`] for the engine's failures, `DmaError` for
/// the rest.
pub(crate) fn dma(e: dma::Error) -> PyErr {
    match &e {
        dma::Error::Axi(a) => axi(a),
        _ => device(e),
    }
}

/// A packet ring's failure: a packet of no bytes or too many is bad input,
/// the rest as [`dma`].
pub(crate) fn packet(e: dma::Error) -> PyErr {
    match e {
        dma::Error::TooLong { .. } | dma::Error::Empty => value(e),
        e => dma(e),
    }
}

impl From<state::Error> for PyErr {
    fn from(e: state::Error) -> PyErr {
        use state::Error as E;
        match e {
            E::Engine(_) => device(e),
            E::NoEngine { .. } | E::NoWindow { .. } | E::Register(_) | E::NoFir(_) | E::Taps(_) => {
                value(e)
            }
            E::Rig(_) | E::Open(_) | E::Window(_) | E::Reset(_) | E::InRing(_) | E::NotEmulated => {
                runtime(e)
            }
        }
    }
}
