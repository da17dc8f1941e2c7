//! The improvements' statistics: the mean of the interleaved pairs' ratios
//! per point with a Student-t interval, Bonferroni-corrected so that a
//! family's intervals hold together.

use super::Row;

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

/// The confidence with which every interval of a run holds at once.
pub const FAMILY_CONFIDENCE: f64 = 0.95;

impl Improvement {
    /// Whether the interval excludes zero.
    pub fn measurable(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Student's t quantile: the `p` quantile with `df` degrees of freedom
/// (infinite with none).
pub fn t_quantile(p: f64, df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) if df > 0 => t.inverse_cdf(p),
        _ => f64::INFINITY,
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
    let p = 1.0 - (1.0 - FAMILY_CONFIDENCE) / 2.0 / m.max(1) as f64;
    points
        .into_iter()
        .map(|r| {
            let gains: Vec<f64> = r.ratios.iter().map(|q| (q - 1.0) * 100.0).collect();
            let k = gains.len() as f64;
            let mean = gains.iter().sum::<f64>() / k;
            let half = if gains.len() > 1 {
                let var = gains.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (k - 1.0);
                t_quantile(p, gains.len() - 1) * (var / k).sqrt()
            } else {
                f64::INFINITY
            };
            Improvement {
                fft_len: r.fft_len,
                overlap_pct: r.overlap_pct,
                pct: mean,
                low: mean - half,
                high: mean + half,
                comparisons: m,
                pairs: gains.len(),
            }
        })
        .collect()
}
