//! Coprocessor drivers and accelerator nodes for process networks: what sits
//! between an application's graph and an AXI DMA engine. Like `axi` and `dma`,
//! this layer reaches a device only through [`crate::platform`].

pub mod bgsub;
pub mod fir;
pub mod stage;
