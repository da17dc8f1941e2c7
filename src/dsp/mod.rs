//! Signal processing run as process-network nodes.

pub mod fir;
