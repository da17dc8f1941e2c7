//! A convolution coprocessor (the role NullHop plays in paper 002): it takes one
//! packet per layer (header, weights, biases, input feature maps; see
//! [`crate::dsp::conv`]) and streams back the output feature maps. Like a MAC
//! array it sweeps whole planes: for each output map, each weight is applied to a
//! shifted input plane at once, accumulating in 64-bit registers.

use std::time::Duration;

use super::StreamProcessor;
use crate::dsp::conv::{LayerPacket, Shape, activate, decode};

/// NullHop's multiply-accumulate blocks (paper 002: "128 MAC blocks").
pub const NULLHOP_MACS_PER_CYCLE: u32 = 128;

/// The clock NullHop is modelled at, in MHz. Paper 002 does not give it; the
/// 100 MHz fabric clock of paper 000's design is assumed.
pub const NULLHOP_MHZ: f64 = 100.0;

/// The convolution core. A malformed packet produces no output (the S2MM side
/// sees an empty packet).
#[derive(Debug, Default)]
pub struct ConvCore {
    acc: Vec<i64>,
    act: Vec<i16>,
    /// MACs per cycle and clock (MHz) of the modelled array; none: the core
    /// takes as long as this host computes.
    rate: Option<(u32, f64)>,
    /// The modelled compute time of the last layer.
    last: Option<Duration>,
}

impl ConvCore {
    /// A core whose compute takes as long as this host takes.
    pub fn new() -> Self {
        Self::default()
    }

    /// A core modelled as NullHop's MAC array: [`NULLHOP_MACS_PER_CYCLE`] at
    /// [`NULLHOP_MHZ`], so the model's time includes the computation.
    pub fn nullhop() -> Self {
        ConvCore {
            rate: Some((NULLHOP_MACS_PER_CYCLE, NULLHOP_MHZ)),
            ..Self::default()
        }
    }

    /// The modelled time to compute a layer of `shape` on an array of
    /// `macs_per_cycle` at `mhz`: its MACs over the array's rate.
    pub fn compute_time(shape: &Shape, macs_per_cycle: u32, mhz: f64) -> Duration {
        let cycles = shape.macs().div_ceil(u64::from(macs_per_cycle.max(1)));
        Duration::from_secs_f64(cycles as f64 / (mhz * 1e6))
    }
}

impl StreamProcessor for ConvCore {
    /// Output maps need every parameter and input map first.
    fn cut_through(&self) -> bool {
        false
    }

    fn compute_time(&self) -> Option<Duration> {
        self.last
    }

    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        self.last = None;
        let Ok(LayerPacket {
            shape: s,
            weights,
            bias,
            input,
        }) = decode(inputs[0])
        else {
            return;
        };
        self.last = self
            .rate
            .map(|(per, mhz)| ConvCore::compute_time(&s, per, mhz));
        let (h, w, k) = (s.height, s.width, s.kernel);
        let p = k / 2;
        let (oh, ow) = s.out_dims();
        let out = &mut outputs[0];
        out.reserve(s.out_bytes());
        self.acc.resize(h * w, 0);
        self.act.resize(h * w, 0);
        for o in 0..s.out_maps {
            self.acc.fill((bias[o] as i64) << s.shift);
            for i in 0..s.in_maps {
                let plane = &input[i * h * w..(i + 1) * h * w];
                for ky in 0..k {
                    for kx in 0..k {
                        let wv = weights[((o * s.in_maps + i) * k + ky) * k + kx] as i64;
                        if wv == 0 {
                            continue;
                        }
                        // Output rows/columns whose tap (ky, kx) falls inside.
                        let y0 = p.saturating_sub(ky);
                        let y1 = (h + p).saturating_sub(ky).min(h);
                        let x0 = p.saturating_sub(kx);
                        let x1 = (w + p).saturating_sub(kx).min(w);
                        if x0 >= x1 {
                            continue;
                        }
                        for y in y0..y1 {
                            let src = (y + ky - p) * w + (x0 + kx - p);
                            let row = &plane[src..src + (x1 - x0)];
                            let acc = &mut self.acc[y * w + x0..y * w + x1];
                            for (a, &v) in acc.iter_mut().zip(row) {
                                *a += wv * v as i64;
                            }
                        }
                    }
                }
            }
            for (a, &acc) in self.act.iter_mut().zip(&self.acc) {
                *a = activate(acc, s.shift);
            }
            if s.pool {
                for y in 0..oh {
                    for x in 0..ow {
                        let at = |dy: usize, dx: usize| self.act[(2 * y + dy) * w + 2 * x + dx];
                        let m = at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1));
                        out.extend_from_slice(&m.to_le_bytes());
                    }
                }
            } else {
                for v in &self.act {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layer_takes_its_macs_over_the_array_rate() {
        // 2 -> 3 maps, 3 x 3 kernel, 4 x 4 plane: 864 MACs, 6.75 cycles of a
        // 128-MAC array, so 7 cycles: 70 ns at 100 MHz.
        let shape = Shape {
            in_maps: 2,
            out_maps: 3,
            height: 4,
            width: 4,
            kernel: 3,
            pool: false,
            shift: 0,
        };
        assert_eq!(shape.macs(), 864);
        assert_eq!(
            ConvCore::compute_time(&shape, 128, 100.0),
            Duration::from_nanos(70)
        );
        // A core without a rate reports none: the host's time stands.
        assert!(StreamProcessor::compute_time(&ConvCore::new()).is_none());
    }
}
