//! The background-subtraction coprocessor (paper 000) as the fabric runs it: a
//! pixel pipeline fed by two streams (frame and background, one DMA engine each)
//! and feeding two (new background and mask). Like the hardware it works row by
//! row with three-line buffers for the difference and smoothed images, so a row of
//! the mask leaves two rows after its pixels came in.

use super::{Clock, StreamProcessor};
use crate::dsp::bgsub::Params;

/// The fabric paper 000's coprocessor was built for: 100 MHz, one byte per
/// cycle.
pub const BGSUB_FABRIC: Clock = Clock::Rate {
    mhz: 100.0,
    bytes_per_cycle: 1.0,
};

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
        let h = self.params.height;
        let (a, b, c) = (
            &self.d[r.saturating_sub(1) % 3],
            &self.d[r % 3],
            &self.d[(r + 1).min(h - 1) % 3],
        );
        vertical_3(&mut self.col, a, b, c, |a, b, c| {
            a as u16 + 2 * b as u16 + c as u16
        });
        // The horizontal [1 2 1] sum, divided by 16 with rounding.
        horizontal_3(&mut self.s[r % 3], &self.col, |l, c, r| {
            ((l + 2 * c + r + 8) >> 4) as u8
        });
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
        vertical_3(&mut self.colmax, a, b, c, |a, b, c| a.max(b).max(c));
        let start = mask.len();
        mask.resize(start + w, 0);
        // The horizontal maximum, thresholded.
        let t = self.params.threshold;
        horizontal_3(&mut mask[start..], &self.colmax, |l, c, r| {
            if l.max(c).max(r) > t { 255 } else { 0 }
        });
    }
}

// The row operations below take their rows as separate slices, so the compiler
// knows they do not overlap and vectorises them (as methods reaching into the
// core's own line buffers they stayed scalar).

/// `out[x] = f(a[x], b[x], c[x])`: three rows, one above the other, combined.
fn vertical_3<O>(out: &mut [O], a: &[u8], b: &[u8], c: &[u8], f: impl Fn(u8, u8, u8) -> O) {
    for (o, ((&a, &b), &c)) in out.iter_mut().zip(a.iter().zip(b).zip(c)) {
        *o = f(a, b, c);
    }
}

/// `out[x] = f(v[x - 1], v[x], v[x + 1])` along a row, the edge pixel
/// standing in for its missing neighbour (the 3x3 windows clamp at the edges).
fn horizontal_3<V: Copy, O>(out: &mut [O], v: &[V], f: impl Fn(V, V, V) -> O) {
    let w = v.len();
    out[0] = f(v[0], v[0], v[1.min(w - 1)]);
    if w > 2 {
        let inner = out[1..w - 1].iter_mut().zip(&v[..w - 2]);
        for ((o, &l), (&c, &r)) in inner.zip(v[1..w - 1].iter().zip(&v[2..])) {
            *o = f(l, c, r);
        }
    }
    if w > 1 {
        out[w - 1] = f(v[w - 2], v[w - 1], v[w - 1]);
    }
}

/// One row through the pixel stage: `d` the absolute difference of frame and
/// background, `new_bg` the background moved one step towards the frame.
fn difference_and_update(d: &mut [u8], new_bg: &mut [u8], fr: &[u8], br: &[u8]) {
    for ((d, &i), &b) in d.iter_mut().zip(fr).zip(br) {
        *d = i.abs_diff(b);
    }
    for ((n, &i), &b) in new_bg.iter_mut().zip(fr).zip(br) {
        *n = b.wrapping_add((i > b) as u8).wrapping_sub((i < b) as u8);
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
            let start = new_bg.len();
            new_bg.resize(start + w, 0);
            difference_and_update(&mut self.d[y % 3], &mut new_bg[start..], fr, br);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsp::bgsub::step;

    #[test]
    fn every_shape_gives_the_software_step_including_the_edges() {
        // Pseudo-random pixels; every threshold, so a smoothed value one off
        // anywhere flips some mask pixel.
        let mut x = 0x2545_f491_u32;
        let mut pixel = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        };
        for (w, h) in [(1, 1), (1, 4), (2, 2), (3, 1), (3, 5), (5, 3), (17, 9)] {
            let n = w * h;
            let frame: Vec<u8> = (0..n).map(|_| pixel()).collect();
            let bg: Vec<u8> = (0..n).map(|_| pixel()).collect();
            for filter in [true, false] {
                for t in 0..=254 {
                    let p = Params::new(w, h, t, filter).unwrap();
                    let (mut want_bg, mut want_mask) = (vec![0; n], vec![0; n]);
                    step(&p, &frame, &bg, &mut want_bg, &mut want_mask).unwrap();
                    let mut out = [Vec::new(), Vec::new()];
                    BgSubCore::new(p).process(&[&frame, &bg], &mut out);
                    assert_eq!(out[0], want_bg, "{w}x{h} filter {filter}: background");
                    assert_eq!(out[1], want_mask, "{w}x{h} filter {filter} t {t}: mask");
                }
            }
        }
    }
}
