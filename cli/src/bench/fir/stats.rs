//! The improvements: the mean of the interleaved pairs' ratios per point
//! with the frame's Student-t interval, Bonferroni-corrected so that a
//! family's intervals hold together ([`Interval`]).

use super::Row;
pub use crate::bench::spread::{FAMILY_CONFIDENCE, Interval, t_quantile};

/// The improvement at one FFT length and overlap (paper 001's gain grows with
/// the overlap, so overlaps are not pooled), with its interval: Student's t
/// over the pairs, Bonferroni-corrected to hold together at [`FAMILY_CONFIDENCE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Improvement {
    /// FFT length N.
    pub fft_len: usize,
    /// Filter length as a percentage of N.
    pub overlap_pct: u32,
    /// Mean improvement, in percent.
    pub pct: f64,
    /// Lower end of the interval, in percent.
    pub low: f64,
    /// Upper end of the interval, in percent.
    pub high: f64,
    /// Comparisons in the family the interval is corrected for.
    pub comparisons: usize,
    /// Interleaved pairs of runs the interval is made of.
    pub pairs: usize,
}

impl Improvement {
    /// Whether the interval excludes zero.
    pub fn measurable(&self) -> bool {
        let (low, high) = (self.low, self.high);
        Interval {
            mean: self.pct,
            low,
            high,
            comparisons: self.comparisons,
            n: self.pairs,
        }
        .measurable()
    }
}

/// The improvement of reading windows in place over the manual copy per FFT
/// length and overlap, in the graph (`mode` `zerocopy` over `copy`) or on one
/// thread (`bare` over `bare-copy`): the mean of the interleaved pairs'
/// ratios, with an interval corrected for every comparison of that family
/// (Bonferroni: each at 1 - 0.05 / m).
pub fn improvement(rows: &[Row], mode: &str) -> Vec<Improvement> {
    let points: Vec<&Row> = rows
        .iter()
        .filter(|r| r.mode == mode && !r.ratios.is_empty())
        .collect();
    let m = points.len();
    points
        .into_iter()
        .map(|r| {
            let gains: Vec<f64> = r.ratios.iter().map(|q| (q - 1.0) * 100.0).collect();
            let i = Interval::of(&gains, m);
            Improvement {
                fft_len: r.fft_len,
                overlap_pct: r.overlap_pct,
                pct: i.mean,
                low: i.low,
                high: i.high,
                comparisons: i.comparisons,
                pairs: i.n,
            }
        })
        .collect()
}
