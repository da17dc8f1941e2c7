//! The dmaflow tool's library half: the experiments behind `dmaflow bench`, their
//! reports, and the file tools behind `dmaflow fir` and `dmaflow bgsub`. The
//! `dmaflow` library itself depends on none of this.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod bench;
pub mod board_check;
pub mod files;
pub mod serve;
