//! Approximate-median background subtraction (paper 000), on 8-bit grayscale
//! frames W x H in row-major order. The background B starts as the first frame;
//! for each frame I (the first included):
//! 1. D = |I - B| per pixel, with B as it was before this frame;
//! 2. B moves one step toward I (+1 where I > B, -1 where I < B);
//! 3. unless the filter is off: S = 3x3 Gaussian of D, kernel [1 2 1; 2 4 2; 1 2 1],
//!    as (sum + 8) >> 4 with coordinates clamped at the borders; M = 3x3 maximum of
//!    S, clamped likewise; with the filter off, M = D;
//! 4. mask = 255 where M > T, else 0.

/// What a frame stream looks like and how it is thresholded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Pixels per row.
    pub width: usize,
    /// Rows per frame.
    pub height: usize,
    /// Mask threshold T: foreground where M > T.
    pub threshold: u8,
    /// Gaussian then maximum filter on the difference image.
    pub filter: bool,
}

/// Bad parameters or frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Width or height is zero.
    #[error("frame size {width} x {height} is not usable (both must be at least 1)")]
    BadSize {
        /// Width asked for.
        width: usize,
        /// Height asked for.
        height: usize,
    },
    /// Width times height does not fit the address space.
    #[error(
        "frame size {width} x {height} overflows: the frame's byte count does not fit in memory"
    )]
    TooLarge {
        /// Width asked for.
        width: usize,
        /// Height asked for.
        height: usize,
    },
    /// A frame, background or mask of the wrong length.
    #[error("{what} holds {len} bytes, a frame is {frame} bytes")]
    BadLength {
        /// Which buffer.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The frame size.
        frame: usize,
    },
}

impl Params {
    /// Parameters, checked: width and height at least 1.
    pub fn new(width: usize, height: usize, threshold: u8, filter: bool) -> Result<Self, Error> {
        if width == 0 || height == 0 {
            return Err(Error::BadSize { width, height });
        }
        if width
            .checked_mul(height)
            .is_none_or(|n| isize::try_from(n).is_err())
        {
            return Err(Error::TooLarge { width, height });
        }
        Ok(Params {
            width,
            height,
            threshold,
            filter,
        })
    }

    /// Bytes per frame.
    pub fn frame_bytes(&self) -> usize {
        self.width * self.height
    }

    fn check(&self, what: &'static str, buf: &[u8]) -> Result<(), Error> {
        if buf.len() != self.frame_bytes() {
            return Err(Error::BadLength {
                what,
                len: buf.len(),
                frame: self.frame_bytes(),
            });
        }
        Ok(())
    }
}

/// One step of the algorithm without state: from a frame and the background
/// before it, the background after it and the frame's mask.
pub fn step(
    p: &Params,
    frame: &[u8],
    background: &[u8],
    new_background: &mut [u8],
    mask: &mut [u8],
) -> Result<(), Error> {
    p.check("frame", frame)?;
    p.check("background", background)?;
    p.check("new background", new_background)?;
    p.check("mask", mask)?;
    let d: Vec<u8> = frame
        .iter()
        .zip(background)
        .map(|(&i, &b)| i.abs_diff(b))
        .collect();
    for ((nb, &i), &b) in new_background.iter_mut().zip(frame).zip(background) {
        *nb = match i.cmp(&b) {
            std::cmp::Ordering::Greater => b + 1,
            std::cmp::Ordering::Less => b - 1,
            std::cmp::Ordering::Equal => b,
        };
    }
    let m = if p.filter {
        max3x3(p, &gauss3x3(p, &d))
    } else {
        d
    };
    for (k, &v) in mask.iter_mut().zip(&m) {
        *k = if v > p.threshold { 255 } else { 0 };
    }
    Ok(())
}

/// The Gaussian [1 2 1; 2 4 2; 1 2 1] / 16 with rounding, borders clamped: a
/// horizontal [1 2 1] pass, then a vertical one.
fn gauss3x3(p: &Params, d: &[u8]) -> Vec<u8> {
    let (w, h) = (p.width, p.height);
    let mut rows = vec![0u16; w * h];
    for y in 0..h {
        let r = &d[y * w..(y + 1) * w];
        for x in 0..w {
            let l = r[x.saturating_sub(1)] as u16;
            let c = r[x] as u16;
            let rr = r[(x + 1).min(w - 1)] as u16;
            rows[y * w + x] = l + 2 * c + rr;
        }
    }
    let mut out = vec![0u8; w * h];
    for y in 0..h {
        let (up, down) = (y.saturating_sub(1), (y + 1).min(h - 1));
        for x in 0..w {
            let sum = rows[up * w + x] + 2 * rows[y * w + x] + rows[down * w + x];
            out[y * w + x] = ((sum + 8) >> 4) as u8;
        }
    }
    out
}

/// The 3x3 maximum, borders clamped: horizontal, then vertical.
fn max3x3(p: &Params, s: &[u8]) -> Vec<u8> {
    let (w, h) = (p.width, p.height);
    let mut rows = vec![0u8; w * h];
    for y in 0..h {
        let r = &s[y * w..(y + 1) * w];
        for x in 0..w {
            rows[y * w + x] = r[x.saturating_sub(1)].max(r[x]).max(r[(x + 1).min(w - 1)]);
        }
    }
    let mut out = vec![0u8; w * h];
    for y in 0..h {
        let (up, down) = (y.saturating_sub(1), (y + 1).min(h - 1));
        for x in 0..w {
            out[y * w + x] = rows[up * w + x]
                .max(rows[y * w + x])
                .max(rows[down * w + x]);
        }
    }
    out
}

/// The algorithm with its state: feed frames in order, get masks.
#[derive(Debug, Clone)]
pub struct BackgroundSubtractor {
    params: Params,
    background: Option<Vec<u8>>,
    next: Vec<u8>,
}

impl BackgroundSubtractor {
    /// A subtractor whose background is the first frame it sees.
    pub fn new(params: Params) -> Self {
        BackgroundSubtractor {
            params,
            background: None,
            next: vec![0; params.frame_bytes()],
        }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The background model as it stands (None before the first frame).
    pub fn background(&self) -> Option<&[u8]> {
        self.background.as_deref()
    }

    /// Processes one frame into `mask`.
    pub fn process(&mut self, frame: &[u8], mask: &mut [u8]) -> Result<(), Error> {
        self.params.check("frame", frame)?;
        let bg = self.background.get_or_insert_with(|| frame.to_vec());
        step(&self.params, frame, bg, &mut self.next, mask)?;
        std::mem::swap(bg, &mut self.next);
        Ok(())
    }
}

/// Synthetic test video: a textured background with noise and two bright
/// rectangles moving across it. Deterministic for a given seed.
pub fn synthetic_frames(p: &Params, frames: usize, seed: u64) -> Vec<u8> {
    let (w, h) = (p.width, p.height);
    let mut state = seed | 1;
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 7) as i32 - 3
    };
    let mut out = Vec::with_capacity(w * h * frames);
    for f in 0..frames {
        let objects = [
            ((f * 3) % w.max(1), h / 4, w / 8 + 1, h / 6 + 1, 230i32),
            (
                (w + w / 2).saturating_sub(f * 2) % w.max(1),
                h / 2,
                w / 10 + 1,
                h / 5 + 1,
                200,
            ),
        ];
        for y in 0..h {
            for x in 0..w {
                let mut v = 60 + ((x * 7 + y * 3) % 40) as i32 + noise();
                for &(ox, oy, ow, oh, level) in &objects {
                    if (ox..ox + ow).contains(&x) && (oy..oy + oh).contains(&y) {
                        v = level + noise();
                    }
                }
                out.push(v.clamp(0, 255) as u8);
            }
        }
    }
    out
}

/// The algorithm's definition written out pixel by pixel, with clamped 3x3
/// windows and no shared code with [`BackgroundSubtractor`]: the masks of every
/// whole frame in `frames`, the first frame taken as the initial background.
/// Slow; it is what the fast implementations are checked against.
pub fn definition(p: &Params, frames: &[u8]) -> Vec<u8> {
    // The definition written out pixel by pixel, with clamped 3x3 windows.
    let (w, h) = (p.width as i64, p.height as i64);
    let at = |img: &[u8], x: i64, y: i64| {
        img[(y.clamp(0, h - 1) * w + x.clamp(0, w - 1)) as usize] as u32
    };
    let mut bg = frames[..p.frame_bytes()].to_vec();
    let mut masks = Vec::new();
    for f in frames.chunks(p.frame_bytes()) {
        let d: Vec<u8> = f.iter().zip(&bg).map(|(&i, &b)| i.abs_diff(b)).collect();
        for (b, &i) in bg.iter_mut().zip(f) {
            if i > *b {
                *b += 1
            } else if i < *b {
                *b -= 1
            }
        }
        let k = [[1, 2, 1], [2, 4, 2], [1, 2, 1]];
        let mut s = vec![0u8; d.len()];
        for y in 0..h {
            for x in 0..w {
                let mut sum = 0;
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        sum += k[(dy + 1) as usize][(dx + 1) as usize] * at(&d, x + dx, y + dy);
                    }
                }
                s[(y * w + x) as usize] = ((sum + 8) >> 4) as u8;
            }
        }
        for y in 0..h {
            for x in 0..w {
                let m = if p.filter {
                    let mut m = 0;
                    for dy in -1..=1 {
                        for dx in -1..=1 {
                            m = m.max(at(&s, x + dx, y + dy));
                        }
                    }
                    m
                } else {
                    d[(y * w + x) as usize] as u32
                };
                masks.push(if m > p.threshold as u32 { 255 } else { 0 });
            }
        }
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_definition_pixel_by_pixel() {
        for (w, h, filter) in [
            (17, 9, true),
            (1, 1, true),
            (5, 1, true),
            (1, 4, false),
            (32, 24, false),
        ] {
            let p = Params::new(w, h, 25, filter).unwrap();
            let frames = synthetic_frames(&p, 6, 42);
            let mut sub = BackgroundSubtractor::new(p);
            let mut got = vec![0u8; frames.len()];
            for (f, m) in frames
                .chunks(p.frame_bytes())
                .zip(got.chunks_mut(p.frame_bytes()))
            {
                sub.process(f, m).unwrap();
            }
            assert_eq!(got, definition(&p, &frames), "{w}x{h} filter={filter}");
        }
    }

    #[test]
    fn first_frame_is_background_and_moving_objects_show() {
        let p = Params::new(64, 48, 25, true).unwrap();
        let frames = synthetic_frames(&p, 8, 1);
        let mut sub = BackgroundSubtractor::new(p);
        let mut mask = vec![0u8; p.frame_bytes()];
        sub.process(&frames[..p.frame_bytes()], &mut mask).unwrap();
        assert!(mask.iter().all(|&m| m == 0), "first frame: nothing moves");
        let f = &frames[7 * p.frame_bytes()..];
        sub.process(f, &mut mask).unwrap();
        assert!(mask.contains(&255), "moved objects show");
        assert!(mask.iter().all(|&m| m == 0 || m == 255));
    }

    #[test]
    fn bad_sizes_are_named() {
        assert!(matches!(
            Params::new(0, 5, 25, true),
            Err(Error::BadSize { .. })
        ));
        let p = Params::new(4, 4, 25, true).unwrap();
        let e = BackgroundSubtractor::new(p)
            .process(&[0u8; 15], &mut [0u8; 16])
            .unwrap_err();
        assert_eq!(e.to_string(), "frame holds 15 bytes, a frame is 16 bytes");
    }
}
