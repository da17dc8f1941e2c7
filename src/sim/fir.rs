//! A FIR filter coprocessor as the fabric runs it: little-endian f32 samples in
//! on one stream, filtered samples out, its taps loaded over an AXI-Lite
//! register window of its own (the way the papers' coprocessors are
//! controlled: the DMA engine moves data, a small register window sets the
//! core up).
//!
//! The core is a block filter without state between packets: a packet of `n`
//! samples `x` gives the `n - T + 1` outputs of the "valid" convolution,
//! `y[i] = sum_k taps[k] * x[i + T - 1 - k]`, accumulated in f32 in the order
//! k = 0..T, and ends its output with TLAST. Consecutive windows that overlap
//! by `T - 1` samples therefore give one continuous filtered stream (overlap-save
//! in the time domain); the overlap is sent again, never copied. A packet
//! shorter than the filter gives nothing (the stream cannot carry an empty
//! packet), and neither does a packet while no taps are loaded.
//!
//! Its register map is the one its driver knows ([`crate::accel::fir`]).

use super::StreamProcessor;
use crate::accel::fir::{FIR_ID, FIR_REG_ID, FIR_REG_NTAPS, FIR_REG_TAPS, MAX_TAPS};

/// The FIR coprocessor.
#[derive(Debug, Clone)]
pub struct FirCore {
    taps: Vec<f32>,
    ntaps: usize,
    /// The packet's samples (kept between packets: no allocation per packet).
    x: Vec<f32>,
    /// The outputs being accumulated.
    y: Vec<f32>,
}

impl Default for FirCore {
    fn default() -> Self {
        Self::new()
    }
}

impl FirCore {
    /// A core after power-up: no taps loaded.
    pub fn new() -> Self {
        FirCore {
            taps: vec![0.0; MAX_TAPS],
            ntaps: 0,
            x: Vec::new(),
            y: Vec::new(),
        }
    }
}

/// `y[i] += h * x[i]` for every output: one tap's term. Kept out of line: as
/// a function's arguments the two slices are known not to overlap, so the
/// compiler vectorises the loop (inlined into `process`, where both come from
/// the core's own buffers, it stayed scalar, at half the speed).
#[inline(never)]
fn accumulate(y: &mut [f32], x: &[f32], h: f32) {
    for (acc, &v) in y.iter_mut().zip(x) {
        *acc += h * v;
    }
}

/// Little-endian stream words to host order, or back: the same swap either
/// way, and nothing on a little-endian host.
fn swap_to_host(v: &mut [f32]) {
    if cfg!(target_endian = "big") {
        for s in v {
            *s = f32::from_bits(s.to_bits().swap_bytes());
        }
    }
}

impl StreamProcessor for FirCore {
    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        let (Some(input), Some(out)) = (inputs.first(), outputs.first_mut()) else {
            return;
        };
        let t = self.ntaps;
        let n = input.len() / 4;
        if t == 0 || n < t {
            return;
        }
        // The stream's little-endian words as samples.
        let x = &mut self.x;
        x.clear();
        x.resize(n, 0.0);
        bytemuck::cast_slice_mut::<f32, u8>(x).copy_from_slice(&input[..4 * n]);
        swap_to_host(x);
        let m = n - t + 1;
        // Tap by tap over every output (the order a pipelined core accumulates
        // in, k = 0..T for each sample), which the host vectorises: the
        // emulated core should not be what limits a benchmark of software.
        let y = &mut self.y;
        y.clear();
        y.resize(m, 0.0);
        for (k, &h) in self.taps[..t].iter().enumerate() {
            accumulate(y, &x[t - 1 - k..t - 1 - k + m], h);
        }
        swap_to_host(y);
        out.extend_from_slice(bytemuck::cast_slice(y));
    }

    fn control_bytes(&self) -> usize {
        FIR_REG_TAPS + 4 * MAX_TAPS
    }

    fn control_write(&mut self, offset: usize, value: u32) -> u32 {
        match offset {
            FIR_REG_NTAPS => {
                if (1..=MAX_TAPS).contains(&(value as usize)) {
                    self.ntaps = value as usize;
                }
                self.ntaps as u32
            }
            o if o >= FIR_REG_TAPS && (o - FIR_REG_TAPS) / 4 < MAX_TAPS && o % 4 == 0 => {
                self.taps[(o - FIR_REG_TAPS) / 4] = f32::from_bits(value);
                value
            }
            FIR_REG_ID => FIR_ID,
            _ => 0,
        }
    }

    fn control_reads(&self) -> Vec<(usize, u32)> {
        vec![(FIR_REG_ID, FIR_ID), (FIR_REG_NTAPS, self.ntaps as u32)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(core: &mut FirCore, taps: &[f32]) {
        for (k, t) in taps.iter().enumerate() {
            core.control_write(FIR_REG_TAPS + 4 * k, t.to_bits());
        }
        assert_eq!(
            core.control_write(FIR_REG_NTAPS, taps.len() as u32),
            taps.len() as u32
        );
    }

    fn run(core: &mut FirCore, x: &[f32]) -> Vec<f32> {
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = [Vec::new()];
        core.process(&[&bytes], &mut out);
        out[0]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    #[test]
    fn a_packet_gives_its_valid_convolution() {
        let mut core = FirCore::new();
        load(&mut core, &[1.0, 10.0, 100.0]);
        // y[i] = x[i+2] + 10 x[i+1] + 100 x[i]
        assert_eq!(run(&mut core, &[1.0, 2.0, 3.0, 4.0]), vec![123.0, 234.0]);
        // Shorter than the filter: nothing.
        assert!(run(&mut core, &[1.0, 2.0]).is_empty());
    }

    #[test]
    fn no_taps_no_output_and_bad_counts_are_not_taken() {
        let mut core = FirCore::new();
        assert!(run(&mut core, &[1.0; 8]).is_empty());
        assert_eq!(core.control_write(FIR_REG_NTAPS, 0), 0);
        assert_eq!(core.control_write(FIR_REG_NTAPS, MAX_TAPS as u32 + 1), 0);
        assert_eq!(core.control_write(FIR_REG_ID, 7), FIR_ID);
    }
}
