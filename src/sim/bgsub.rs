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
}

impl BgSubCore {
    /// A core for frames of `params`.
    pub fn new(params: Params) -> Self {
        let w = params.width;
        BgSubCore {
            params,
            d: [vec![0; w], vec![0; w], vec![0; w]],
            s: [vec![0; w], vec![0; w], vec![0; w]],
        }
    }

    /// Smoothed row `r` from difference rows r-1..r+1 (held in the line buffers).
    fn smooth_row(&mut self, r: usize) {
        let (w, h) = (self.params.width, self.params.height);
        let rows = [r.saturating_sub(1), r, (r + 1).min(h - 1)];
        let mut out = std::mem::take(&mut self.s[r % 3]);
        for (x, o) in out.iter_mut().enumerate() {
            let cols = [x.saturating_sub(1), x, (x + 1).min(w - 1)];
            let mut sum = 0u32;
            for (ky, &ry) in [1u32, 2, 1].iter().zip(&rows) {
                let line = &self.d[ry % 3];
                for (kx, &cx) in [1u32, 2, 1].iter().zip(&cols) {
                    sum += ky * kx * line[cx] as u32;
                }
            }
            *o = ((sum + 8) >> 4) as u8;
        }
        self.s[r % 3] = out;
    }

    /// Mask row `r` from smoothed rows r-1..r+1.
    fn mask_row(&self, r: usize, mask: &mut Vec<u8>) {
        let (w, h) = (self.params.width, self.params.height);
        let rows = [r.saturating_sub(1), r, (r + 1).min(h - 1)];
        for x in 0..w {
            let cols = [x.saturating_sub(1), x, (x + 1).min(w - 1)];
            let m = rows
                .iter()
                .flat_map(|&ry| cols.iter().map(move |&cx| (ry, cx)))
                .map(|(ry, cx)| self.s[ry % 3][cx])
                .max()
                .unwrap_or(0);
            mask.push(if m > self.params.threshold { 255 } else { 0 });
        }
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
