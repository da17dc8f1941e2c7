//! dmaflow's software signal processing, for Python: the references the
//! emulated coprocessors are checked against.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Paper 000's approximate-median background subtraction of one 8-bit frame
/// in software (`dmaflow::dsp::bgsub::step`): returns the new background and
/// the mask (0 or 255 per pixel).
#[pyfunction]
#[pyo3(signature = (frame, background, width, height, threshold = 25))]
pub fn bgsub_step<'py>(
    py: Python<'py>,
    frame: &[u8],
    background: &[u8],
    width: usize,
    height: usize,
    threshold: u8,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let p = dmaflow::dsp::bgsub::Params::new(width, height, threshold, true)
        .map_err(crate::errors::value)?;
    let n = p.frame_bytes();
    let (mut bg, mut mask) = (vec![0u8; n], vec![0u8; n]);
    dmaflow::dsp::bgsub::step(&p, frame, background, &mut bg, &mut mask)
        .map_err(crate::errors::value)?;
    Ok((PyBytes::new(py, &bg), PyBytes::new(py, &mask)))
}
