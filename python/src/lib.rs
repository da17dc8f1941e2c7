//! The extension module behind the `dmaflow` Python package: a board with a
//! design loaded ([`board`], the class; [`state`], what it holds, which the
//! classes made from it share), the emulated designs' table ([`designs`]),
//! Python's exceptions for the library's errors ([`errors`]), DMA buffers that numpy arrays view in
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
mod designs;
mod dsp;
mod engine;
mod errors;
mod graph;
mod names;
mod packets;
mod queue;
mod shm;
mod state;
mod window;

use pyo3::prelude::*;

use errors::{DmaError, DmaTimeoutError, QueueClosed};

/// The `dmaflow._native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<board::Board>()?;
    m.add_function(wrap_pyfunction!(dsp::bgsub_step, m)?)?;
    m.add_function(wrap_pyfunction!(designs::emulated_designs, m)?)?;
    m.add_function(wrap_pyfunction!(designs::design_ips, m)?)?;
    m.add_function(wrap_pyfunction!(designs::axi_dma_registers, m)?)?;
    m.add_function(wrap_pyfunction!(designs::axi_dma_parameters, m)?)?;
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
