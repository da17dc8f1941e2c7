//! A CUDA GPU as a DMA device: its copy engines move data between host memory and
//! device memory over PCIe, and its kernels are the coprocessor. The vocabulary is
//! the AXI DMA's ([`crate::dma::Completion`], [`crate::dma::Partition`],
//! [`crate::dma::Timing`]): a two-way transfer sends a buffer to the device (H2D,
//! the GPU's MM2S) and receives the answer (D2H, its S2MM).
//!
//! CUDA is loaded when first used ([`driver`]): the crate builds, and everything
//! else in it runs, on machines with no CUDA at all. Without a driver or a device
//! every call here is an [`Error`] ([`Error::NoDriver`], [`Error::NoDevice`]),
//! never a panic.
//!
//! - [`driver`]: loading the driver, listing devices ([`devices`]).
//! - [`context`]: one device's context, its streams, events and memory.
//! - [`host`]: host memory the copy engines read and write: pageable, pinned,
//!   pinned write-combined, mapped and registered ([`HostKind`]).
//! - [`engine`]: two-way transfers and whole messages under every completion mode.
//! - [`kernels`]: the coprocessor's kernels (CUDA C compiled at run time by NVRTC).
//! - [`ceiling`]: the copy engines' own rate, measured with the copies queued
//!   behind a kernel that holds the stream.

pub mod ceiling;
pub mod context;
pub mod driver;
pub mod engine;
pub mod host;
pub mod kernels;

pub use context::Gpu;
pub use driver::{DeviceInfo, devices};
pub use engine::GpuEngine;
pub use host::{HostBuf, HostKind};
pub use kernels::Kernels;

use cudarc::driver::sys;

/// What went wrong with a GPU.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CUDA driver library (libcuda) is not on this machine.
    #[error("no CUDA driver: libcuda could not be loaded")]
    NoDriver,
    /// No device of that ordinal.
    #[error("no CUDA device {ordinal}: this machine has {count}")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver sees.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA {call} failed: {name}")]
    Driver {
        /// The driver function.
        call: &'static str,
        /// The driver's name for the error (`CUDA_ERROR_...`).
        name: String,
    },
    /// NVRTC (libnvrtc) is not on this machine, so kernels cannot be compiled.
    #[error("no NVRTC: libnvrtc could not be loaded, so the kernels cannot be compiled")]
    NoNvrtc,
    /// NVRTC refused the kernels' source.
    #[error("NVRTC could not compile {what}: {log}")]
    Compile {
        /// What was compiled.
        what: &'static str,
        /// The compiler's log.
        log: String,
    },
    /// A wait on the device ran out of time. The host buffers of the transfer stay
    /// the device's (they are never given back) and the engine refuses further work.
    #[error("timed out after {waited:?} waiting for {what}; its host buffers stay with the device")]
    Timeout {
        /// What was waited for.
        what: &'static str,
        /// How long.
        waited: std::time::Duration,
    },
    /// The engine stopped after a timeout.
    #[error("the GPU engine stopped after an earlier timeout; make a new one")]
    Stopped,
    /// A transfer of zero bytes.
    #[error("a transfer of zero bytes")]
    Empty,
    /// More bytes than a buffer holds.
    #[error("cannot move {len} bytes through a {capacity}-byte buffer")]
    TooLong {
        /// Bytes asked for.
        len: usize,
        /// Bytes the buffer holds.
        capacity: usize,
    },
    /// A kernel's arguments do not fit what it computes.
    #[error("{0}")]
    Shape(String),
    /// The device cannot do what was asked (a memory kind it does not support).
    #[error("device {ordinal} cannot {what}")]
    Unsupported {
        /// The device.
        ordinal: usize,
        /// What it cannot do.
        what: &'static str,
    },
}

/// `Ok(())` for `CUDA_SUCCESS`, else the call's error with the driver's name for it.
pub(crate) fn check(call: &'static str, r: sys::CUresult) -> Result<(), Error> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Driver {
            call,
            name: format!("{r:?}"),
        })
    }
}

/// [`check`] for cudarc's wrapped calls.
pub(crate) fn wrap<T>(
    call: &'static str,
    r: Result<T, cudarc::driver::DriverError>,
) -> Result<T, Error> {
    r.map_err(|e| Error::Driver {
        call,
        name: format!("{:?}", e.0),
    })
}
