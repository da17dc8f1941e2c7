//! The words Python names the library's choices by: completion modes,
//! channel directions and memory models.

use dmaflow::axi::Channel;
use dmaflow::dma::Completion;
use dmaflow::platform::MemoryModel;
use pyo3::PyResult;
use pyo3::exceptions::PyValueError;

/// A completion mode: `"poll"`, `"yield"`, `"irq"` or `"adaptive"` (spin for
/// the time the transfer should take on the link, then sleep on the line).
pub(crate) fn completion(name: &str) -> PyResult<Completion> {
    match name {
        "poll" => Ok(Completion::Poll),
        "yield" => Ok(Completion::Yield),
        "irq" => Ok(Completion::Irq),
        "adaptive" => Ok(Completion::Adaptive),
        other => Err(PyValueError::new_err(format!(
            "completion is \"poll\", \"yield\", \"irq\" or \"adaptive\", not {other:?}"
        ))),
    }
}

/// The channel a direction names: `"mm2s"`/`"send"` or `"s2mm"`/`"recv"`.
pub(crate) fn direction(name: &str) -> PyResult<Channel> {
    match name {
        "mm2s" | "send" => Ok(Channel::Mm2s),
        "s2mm" | "recv" => Ok(Channel::S2mm),
        other => Err(PyValueError::new_err(format!(
            "a channel is \"mm2s\" or \"s2mm\", not {other:?}"
        ))),
    }
}

/// A memory model: `"coherent"` or `"noncoherent"`.
pub(crate) fn memory(name: &str) -> PyResult<MemoryModel> {
    match name {
        "coherent" => Ok(MemoryModel::Coherent),
        "noncoherent" => Ok(MemoryModel::NonCoherent),
        other => Err(PyValueError::new_err(format!(
            "memory must be \"coherent\" or \"noncoherent\", not {other:?}"
        ))),
    }
}
