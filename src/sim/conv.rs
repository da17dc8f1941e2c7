//! A convolution coprocessor (the role NullHop plays in paper 002): it takes one
//! packet per layer (header, weights, biases, input feature maps; see
//! [`crate::dsp::conv`]) and streams back the output feature maps. Like a MAC
//! array it sweeps whole planes: for each output map, each weight is applied to a
//! shifted input plane at once, accumulating in 64-bit registers.

use super::StreamProcessor;
use crate::dsp::conv::{LayerPacket, activate, decode};

/// The convolution core. A malformed packet produces no output (the S2MM side
/// sees an empty packet).
#[derive(Debug, Default)]
pub struct ConvCore {
    acc: Vec<i64>,
    act: Vec<i16>,
}

impl ConvCore {
    /// A core.
    pub fn new() -> Self {
        Self::default()
    }
}

impl StreamProcessor for ConvCore {
    /// Output maps need every parameter and input map first.
    fn cut_through(&self) -> bool {
        false
    }

    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        let Ok(LayerPacket {
            shape: s,
            weights,
            bias,
            input,
        }) = decode(inputs[0])
        else {
            return;
        };
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
