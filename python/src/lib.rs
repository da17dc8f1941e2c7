//! The extension module behind the `dmaflow` Python package: the emulated
//! board with its designs ([`board`]), DMA buffers that numpy arrays view in
//! place ([`buffer`]), the DMA channels PYNQ's driver exposes
//! ([`channel`]), dmaflow's own transfers ([`engine`]) and its mirrored
//! queue with windows numpy views in place ([`queue`], [`window`]), the
//! same queue shared between processes ([`shm`]), and
//! process networks with Python nodes ([`graph`]). Everything calls the dmaflow library; the Python side
//! (`dmaflow/`, `dmaflow/pynq.py`) only shapes it into numpy's and PYNQ's
//! conventions.

mod board;
mod buffer;
mod channel;
mod dsp;
mod engine;
mod graph;
mod packets;
mod queue;
mod shm;
mod window;

use pyo3::prelude::*;

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

/// The `dmaflow._native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<board::Board>()?;
    m.add_function(wrap_pyfunction!(dsp::bgsub_step, m)?)?;
    m.add_class::<buffer::DmaBuffer>()?;
    m.add_class::<channel::Channel>()?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<graph::Graph>()?;
    m.add_class::<packets::PacketRing>()?;
    m.add_class::<graph::InPort>()?;
    m.add_class::<graph::OutPort>()?;
    m.add_class::<queue::Queue>()?;
    m.add_class::<shm::SharedReader>()?;
    m.add_class::<shm::SharedWriter>()?;
    m.add_class::<window::Window>()?;
    m.add("DmaError", m.py().get_type::<DmaError>())?;
    m.add("DmaTimeoutError", m.py().get_type::<DmaTimeoutError>())?;
    m.add("QueueClosed", m.py().get_type::<QueueClosed>())?;
    Ok(())
}
