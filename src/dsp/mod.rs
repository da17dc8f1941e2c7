//! Signal and image processing: the algorithms the experiments run, in software
//! (and as the references the emulated coprocessors are checked against).

pub mod bgsub;
pub mod conv;
pub mod fir;
