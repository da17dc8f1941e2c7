//! The frame's statistics, the one method for the experiments' repeats:
//! points measured in turns (the order reversed every other round), each
//! point's samples summarised as a median with its spread, two points
//! compared round by round ([`Ratio`]: "no measurable difference" unless
//! every round agrees), a mean with a Student-t interval corrected for a
//! family of comparisons ([`Interval`], Bonferroni), and whether the rounds
//! straddle a target ([`Spread::straddles`]). No experiment computes these
//! itself.

use serde_json::json;

/// The samples of one point, summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median.
    pub median: f64,
    /// First quartile (linear interpolation between order statistics).
    pub p25: f64,
    /// Third quartile.
    pub p75: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Samples.
    pub n: usize,
}

impl Spread {
    /// The summary of `samples` (all `NaN` with none).
    pub fn of(samples: &[f64]) -> Spread {
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let h = v.len().saturating_sub(1) as f64 * q;
            let lo = h.floor() as usize;
            match (v.get(lo), v.get(lo + 1)) {
                (Some(&a), Some(&b)) => a + (h - lo as f64) * (b - a),
                (Some(&a), None) => a,
                _ => f64::NAN,
            }
        };
        Spread {
            median: at(0.5),
            p25: at(0.25),
            p75: at(0.75),
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
            n: v.len(),
        }
    }

    /// The summary with every figure scaled by `k` (a unit change).
    pub fn scaled(self, k: f64) -> Spread {
        Spread {
            median: self.median * k,
            p25: self.p25 * k,
            p75: self.p75 * k,
            min: self.min * k,
            max: self.max * k,
            n: self.n,
        }
    }

    /// Whether the rounds fall on both sides of `target` (the smallest below
    /// it, the largest at or above it): a median that meets or misses such a
    /// target says so only by chance.
    pub fn straddles(&self, target: f64) -> bool {
        self.min < target && self.max >= target
    }

    /// `"; the runs straddle the target: not dependably met or missed"` when
    /// [`Spread::straddles`], else nothing: the note a target's figure
    /// carries.
    pub fn straddle_note(&self, target: f64) -> &'static str {
        note_if(self.straddles(target))
    }

    /// Whether the rounds fall both inside `lo..=hi` (or across it) and
    /// outside it: a target of a band ("within 10 %") that the median meets
    /// or misses by chance.
    pub fn straddles_band(&self, lo: f64, hi: f64) -> bool {
        (self.min < lo || self.max > hi) && self.max >= lo && self.min <= hi
    }

    /// [`Spread::straddle_note`] for a band ([`Spread::straddles_band`]).
    pub fn band_note(&self, lo: f64, hi: f64) -> &'static str {
        note_if(self.straddles_band(lo, hi))
    }

    /// As JSON: median, p25, p75, min, max, n.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "median": self.median,
            "p25": self.p25,
            "p75": self.p75,
            "min": self.min,
            "max": self.max,
            "n": self.n,
        })
    }
}

/// The note of a target whose rounds straddle it, where `straddles`.
fn note_if(straddles: bool) -> &'static str {
    if straddles {
        "; the runs straddle the target: not dependably met or missed"
    } else {
        ""
    }
}

impl From<Spread> for serde_json::Value {
    fn from(s: Spread) -> Self {
        s.json()
    }
}

/// The typical value of `samples`: their median (`NaN` with none), for a
/// figure measured in a few repeats of its own (e.g. a calibration before
/// the rounds).
pub fn typical(samples: &[f64]) -> f64 {
    Spread::of(samples).median
}

/// Measures `points` points for `rounds` rounds, the points taking turns in
/// each round and the order reversed every other round, so that a drift of
/// the machine falls on all of them alike; returns each point's samples in
/// round order (sample `r` of every point comes from round `r`).
pub fn in_turns<T, E>(
    points: usize,
    rounds: usize,
    mut measure: impl FnMut(usize, usize) -> Result<T, E>,
) -> Result<Vec<Vec<T>>, E> {
    let mut samples: Vec<Vec<T>> = (0..points).map(|_| Vec::with_capacity(rounds)).collect();
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..points).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for p in order {
            samples[p].push(measure(p, round)?);
        }
    }
    Ok(samples)
}

/// One point's wall and CPU seconds, round by round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timed {
    /// Wall seconds per round.
    pub seconds: Vec<f64>,
    /// CPU seconds per round over the same span.
    pub cpu: Vec<f64>,
}

impl Timed {
    /// `amount` per wall second, round by round.
    pub fn rates(&self, amount: f64) -> Vec<f64> {
        self.seconds.iter().map(|s| amount / s).collect()
    }

    /// CPU seconds over wall seconds, round by round: the cores kept busy.
    pub fn busy(&self) -> Vec<f64> {
        self.cpu
            .iter()
            .zip(&self.seconds)
            .map(|(c, s)| c / s)
            .collect()
    }
}

/// One point against another, round by round: the ratios `a[r] / b[r]` of
/// samples taken in the same round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio(pub Spread);

impl Ratio {
    /// The ratios of `a` over `b`, round by round.
    pub fn of(a: &[f64], b: &[f64]) -> Ratio {
        let r: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        Ratio(Spread::of(&r))
    }

    /// Whether every round agrees on the side of 1: the only case this method
    /// calls a difference measurable (else "no measurable difference").
    pub fn measurable(&self) -> bool {
        self.0.n > 0 && (self.0.min > 1.0 || self.0.max < 1.0)
    }

    /// `faster` or `slower` where every round agrees, else "no measurable
    /// difference".
    pub fn verdict(&self) -> &'static str {
        match (self.measurable(), self.0.median > 1.0) {
            (true, true) => "faster",
            (true, false) => "slower",
            (false, _) => "no measurable difference",
        }
    }

    /// The typical ratio: the median of the rounds'.
    pub fn typical(&self) -> f64 {
        self.0.median
    }

    /// `1.23x (1.10..1.40)`: the median and the rounds' min..max (`-`
    /// where no round compared).
    pub fn text(&self) -> String {
        self.text_noting("")
    }

    /// [`Ratio::text`] with the verdict inside the brackets: `1.23x
    /// (1.10..1.40, faster in every round)`.
    pub fn text_with_verdict(&self) -> String {
        self.text_noting(match self.verdict() {
            "faster" => ", faster in every round",
            "slower" => ", slower in every round",
            _ => ", no measurable difference",
        })
    }

    fn text_noting(&self, note: &str) -> String {
        if self.0.n == 0 {
            return "-".into();
        }
        format!(
            "{:.2}x ({:.2}..{:.2}{note})",
            self.0.median, self.0.min, self.0.max
        )
    }
}

/// The mean of `samples` and their population standard deviation (`NaN`
/// with none): what a mean-reporting paper gives beside the median.
pub fn mean_and_deviation(samples: &[f64]) -> (f64, f64) {
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// The confidence with which every interval of a family holds at once.
pub const FAMILY_CONFIDENCE: f64 = 0.95;

/// Student's t quantile: the `p` quantile with `df` degrees of freedom
/// (infinite with none).
pub fn t_quantile(p: f64, df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) if df > 0 => t.inverse_cdf(p),
        _ => f64::INFINITY,
    }
}

/// The mean of a set of samples with a two-sided Student-t interval,
/// Bonferroni-corrected so that the intervals of a family of `comparisons`
/// hold together at [`FAMILY_CONFIDENCE`] (each at `1 - 0.05 / m`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The samples' mean.
    pub mean: f64,
    /// Lower end of the interval.
    pub low: f64,
    /// Upper end of the interval.
    pub high: f64,
    /// Comparisons in the family the interval is corrected for.
    pub comparisons: usize,
    /// Samples the interval is made of.
    pub n: usize,
}

impl Interval {
    /// The interval of `samples`' mean, one of `comparisons` (infinite with
    /// fewer than two samples).
    pub fn of(samples: &[f64], comparisons: usize) -> Interval {
        let p = 1.0 - (1.0 - FAMILY_CONFIDENCE) / 2.0 / comparisons.max(1) as f64;
        let k = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / k;
        let half = if samples.len() > 1 {
            let var = samples.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (k - 1.0);
            t_quantile(p, samples.len() - 1) * (var / k).sqrt()
        } else {
            f64::INFINITY
        };
        Interval {
            mean,
            low: mean - half,
            high: mean + half,
            comparisons,
            n: samples.len(),
        }
    }

    /// Whether the interval excludes zero.
    pub fn measurable(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_population_deviation() {
        let (m, d) = mean_and_deviation(&[10.0, 20.0, 30.0]);
        assert_eq!(m, 20.0);
        assert!((d - (200.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!(mean_and_deviation(&[]).0.is_nan());
    }

    #[test]
    fn a_summary_is_that_of_the_samples() {
        let s = Spread::of(&[30.0, 10.0, 20.0, 40.0, 1000.0]);
        assert_eq!((s.median, s.p25, s.p75), (30.0, 20.0, 40.0));
        assert_eq!((s.min, s.max, s.n), (10.0, 1000.0, 5));
        assert_eq!(Spread::of(&[1.0, 2.0]).median, 1.5);
        assert!(Spread::of(&[]).median.is_nan());
        assert_eq!(Spread::of(&[2.0]).scaled(3.0).max, 6.0);
        assert_eq!(typical(&[3.0, 1.0, 2.0]), 2.0);
        assert!(typical(&[]).is_nan());
    }

    #[test]
    fn points_take_turns_and_the_order_reverses() {
        let mut seen = Vec::new();
        let s = in_turns::<f64, ()>(3, 2, |p, r| {
            seen.push((r, p));
            Ok((10 * r + p) as f64)
        })
        .unwrap();
        assert_eq!(seen, [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0)]);
        assert_eq!(s[2], vec![2.0, 12.0]);
    }

    #[test]
    fn intervals_widen_with_the_family_and_straddles_are_seen() {
        assert!((t_quantile(0.975, 1) - 12.706).abs() < 1e-3);
        assert!((t_quantile(0.975, 10) - 2.228).abs() < 1e-3);
        assert!(t_quantile(0.975, 0).is_infinite());
        let one = Interval::of(&[1.0, 2.0, 3.0], 1);
        let five = Interval::of(&[1.0, 2.0, 3.0], 5);
        assert_eq!(one.mean, 2.0);
        // sd 1, n 3: half width t(0.975, 2) / sqrt(3) = 4.303 / 1.732.
        assert!((one.high - 2.0 - 4.303 / 3f64.sqrt()).abs() < 1e-2);
        assert!(five.high > one.high && five.low < one.low);
        assert!(!one.measurable() && Interval::of(&[5.0, 5.1, 4.9], 1).measurable());
        assert!(Interval::of(&[1.0], 1).high.is_infinite());
        let s = Spread::of(&[1.4, 1.6]);
        assert!(s.straddles(1.5) && !s.straddles(1.3) && !s.straddles(1.7));
        assert!(s.straddle_note(1.5).contains("straddle") && s.straddle_note(1.0).is_empty());
        // A band: rounds all inside, all on one side outside, or some of each.
        assert!(!Spread::of(&[0.95, 1.05]).straddles_band(0.9, 1.1));
        assert!(!Spread::of(&[0.7, 0.8]).straddles_band(0.9, 1.1));
        assert!(!Spread::of(&[1.2, 1.3]).straddles_band(0.9, 1.1));
        assert!(Spread::of(&[0.85, 1.0]).straddles_band(0.9, 1.1));
        assert!(Spread::of(&[1.0, 1.15]).straddles_band(0.9, 1.1));
        assert!(Spread::of(&[0.8, 1.2]).straddles_band(0.9, 1.1));
        assert!(
            Spread::of(&[1.0, 1.15])
                .band_note(0.9, 1.1)
                .contains("straddle")
        );
        assert!(Spread::of(&[1.0, 1.05]).band_note(0.9, 1.1).is_empty());
    }

    #[test]
    fn a_ratio_is_measurable_only_when_every_round_agrees() {
        assert!(Ratio::of(&[2.0, 3.0], &[1.0, 1.0]).measurable());
        assert!(!Ratio::of(&[2.0, 0.5], &[1.0, 1.0]).measurable());
        assert_eq!(Ratio::of(&[2.0, 3.0, 4.0], &[1.0, 1.0, 2.0]).0.median, 2.0);
        assert_eq!(Ratio::of(&[2.0, 3.0], &[1.0, 1.0]).verdict(), "faster");
        assert_eq!(Ratio::of(&[0.5, 0.6], &[1.0, 1.0]).verdict(), "slower");
        assert_eq!(
            Ratio::of(&[2.0, 0.5], &[1.0, 1.0]).verdict(),
            "no measurable difference"
        );
        assert_eq!(
            Ratio::of(&[2.0, 3.0], &[1.0, 1.0]).text(),
            "2.50x (2.00..3.00)"
        );
    }
}
