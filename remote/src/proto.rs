//! PYNQ.remote's messages and services, compiled from `proto/` at build time.
#![allow(missing_docs, non_camel_case_types, clippy::all, clippy::pedantic)]

/// The device service: bitstreams, PL clocks, files.
pub mod remote_device {
    tonic::include_proto!("remote_device");
}
/// Register access by window.
pub mod mmio {
    tonic::include_proto!("mmio");
}
/// DMA memory buffers.
pub mod buffer {
    tonic::include_proto!("buffer");
}
/// PS GPIO.
pub mod gpio {
    tonic::include_proto!("gpio");
}
