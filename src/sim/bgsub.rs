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
        let smooth = |l: u16, c: u16, r: u16| ((l + 2 * c + r + 8) >> 4) as u8;
        out[0] = smooth(v[0], v[0], v[1.min(w - 1)]);
        if w > 1 {
            out[w - 1] = smooth(v[w - 2], v[w - 1], v[w - 1]);
        }
        for (o, t) in out[1..w.saturating_sub(1).max(1)]
            .iter_mut()
            .zip(v.windows(3))
        {
            *o = smooth(t[0], t[1], t[2]);
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
        let bit = |m: u8| if m > t { 255 } else { 0 };
        let start = mask.len();
        mask.resize(start + w, 0);
        let row = &mut mask[start..];
        row[0] = bit(v[0].max(v[1.min(w - 1)]));
        if w > 1 {
            row[w - 1] = bit(v[w - 2].max(v[w - 1]));
        }
        for (o, m) in row[1..w.saturating_sub(1).max(1)]
            .iter_mut()
            .zip(v.windows(3))
        {
            *o = bit(m[0].max(m[1]).max(m[2]));
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
            for ((d, &i), &b) in self.d[y % 3].iter_mut().zip(fr).zip(br) {
                *d = i.abs_diff(b);
            }
            new_bg.extend(
                fr.iter()
                    .zip(br)
                    .map(|(&i, &b)| b.wrapping_add((i > b) as u8).wrapping_sub((i < b) as u8)),
            );
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
