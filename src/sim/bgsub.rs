//! The background-subtraction coprocessor (paper 000) as the fabric runs it: a
//! pixel pipeline fed by two streams (frame and background, one DMA engine each)
//! and feeding two (new background and mask). Like the hardware it works row by
//! row with three-line buffers for the difference and smoothed images, so a row of
//! the mask leaves two rows after its pixels came in.

use super::StreamProcessor;
use crate::dsp::bgsub::Params;

/// The coprocessor, configured for one frame size, threshold and filter setting.
#[derive(Debug, Clone)]
pub struct BgSubCore {
    params: Params,
    d: [Vec<u8>; 3],
    s: [Vec<u8>; 3],
    /// Column sums and maxima of the current three lines.
    col: Vec<u16>,
    colmax: Vec<u8>,
}

impl BgSubCore {
    /// A core for frames of `params`.
    pub fn new(params: Params) -> Self {
        let w = params.width;
        BgSubCore {
            params,
            d: [vec![0; w], vec![0; w], vec![0; w]],
            s: [vec![0; w], vec![0; w], vec![0; w]],
            col: vec![0; w],
            colmax: vec![0; w],
        }
    }

    /// Smoothed row `r` from difference rows r-1..r+1 (held in the line buffers):
    /// the vertical [1 2 1] sum per column, then the horizontal one.
    fn smooth_row(&mut self, r: usize) {
        let (w, h) = (self.params.width, self.params.height);
        let (a, b, c) = (
            &self.d[r.saturating_sub(1) % 3],
            &self.d[r % 3],
            &self.d[(r + 1).min(h - 1) % 3],
        );
        for (v, ((&a, &b), &c)) in self.col.iter_mut().zip(a.iter().zip(b).zip(c)) {
            *v = a as u16 + 2 * b as u16 + c as u16;
        }
        let v = &self.col;
        let out = &mut self.s[r % 3];
        for (x, o) in out.iter_mut().enumerate() {
            let sum = v[x.saturating_sub(1)] + 2 * v[x] + v[(x + 1).min(w - 1)];
            *o = ((sum + 8) >> 4) as u8;
        }
    }

    /// Mask row `r` from smoothed rows r-1..r+1: the vertical maximum per column,
    /// then the horizontal one, then the threshold.
    fn mask_row(&mut self, r: usize, mask: &mut Vec<u8>) {
        let (w, h) = (self.params.width, self.params.height);
        let (a, b, c) = (
            &self.s[r.saturating_sub(1) % 3],
            &self.s[r % 3],
            &self.s[(r + 1).min(h - 1) % 3],
        );
        for (v, ((&a, &b), &c)) in self.colmax.iter_mut().zip(a.iter().zip(b).zip(c)) {
            *v = a.max(b).max(c);
        }
        let v = &self.colmax;
        let t = self.params.threshold;
        mask.extend((0..w).map(|x| {
            let m = v[x.saturating_sub(1)].max(v[x]).max(v[(x + 1).min(w - 1)]);
            if m > t { 255 } else { 0 }
        }));
    }
}

impl StreamProcessor for BgSubCore {
    fn streams(&self) -> usize {
        2
    }

    fn process(&mut self, inputs: &[&[u8]], outputs: &mut [Vec<u8>]) {
        let (w, h) = (self.params.width, self.params.height);
        let n = self.params.frame_bytes();
        let ([frame, background], [new_bg, mask]) = (inputs, outputs) else {
            return;
        };
        // A frame of the wrong size is dropped: nothing comes out.
        if frame.len() != n || background.len() != n {
            return;
        }
        for y in 0..h {
            let (fr, br) = (&frame[y * w..(y + 1) * w], &background[y * w..(y + 1) * w]);
            for (x, (&i, &b)) in fr.iter().zip(br).enumerate() {
                self.d[y % 3][x] = i.abs_diff(b);
                new_bg.push(if i > b {
                    b + 1
                } else if i < b {
                    b - 1
                } else {
                    b
                });
            }
            if !self.params.filter {
                let t = self.params.threshold;
                mask.extend(self.d[y % 3].iter().map(|&d| if d > t { 255 } else { 0 }));
                continue;
            }
            if y >= 1 {
                self.smooth_row(y - 1);
            }
            if y >= 2 {
                self.mask_row(y - 2, mask);
            }
        }
        if self.params.filter {
            self.smooth_row(h - 1);
            if h >= 2 {
                self.mask_row(h - 2, mask);
            }
            self.mask_row(h - 1, mask);
        }
    }
}
