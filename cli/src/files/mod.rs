//! The file tools behind `dmaflow fir` and `dmaflow bgsub`.

pub mod bgsub;
pub mod fir;
