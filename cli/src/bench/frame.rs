//! The frame that owns an experiment's method: the experiment states its
//! points (a series at a parameter), what one measurement of a point returns,
//! its columns (each key described once, on its column), its plots (by column
//! keys) and its findings; the frame runs the rounds in turns
//! ([`in_turns`]: every point once a round, the order reversed every other
//! round), keeps every round's sample, gives each column its median, range
//! and ratio to the baseline series ([`Row`]), draws the plots, and stamps
//! the experiment's name and the method sentence on the report.
//!
//! ```text
//! pub static EXPERIMENT: Bench<Config, Params, Sample> = Bench {
//!     name: "NAME", question: "...", conditions: Conditions { .. },
//!     points, measure, columns, plots: &[Plot { .. }], heading, findings,
//!     ..Bench::new(Config::at, |c| c.rounds)
//! };
//! ```

use std::fmt::Display;

use serde_json::Value;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::harness::{Experiment, OnGpu, Setup};
use super::on_board::{BoardRig, Mode};
use super::plot::{LinePlot, Series, XAxis};
use super::report::{Report, Target, sentence};
use super::spread::{Interval, Ratio, Spread, in_turns, mean_and_deviation};

/// One point of an experiment: a series (an implementation, a mode, a path)
/// at a parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<P> {
    /// The series, e.g. `dmaflow` or `vmcircbuffer`.
    pub series: &'static str,
    /// Where on the series, e.g. a size or a reader count.
    pub at: P,
}

/// One point's samples, round by round, beside those its baseline series
/// took in the same rounds at the same parameter: what a column reads.
#[derive(Debug, Clone)]
pub struct Row<P, S> {
    /// The point.
    pub point: Point<P>,
    /// Its samples, in round order.
    pub samples: Vec<S>,
    /// The baseline series' samples at the same parameter, in round order
    /// (none for the baseline itself, or without one).
    pub baseline: Option<Vec<S>>,
    /// Every other series' samples at the same parameter, in round order:
    /// what [`Row::ratio_to`] compares with.
    pub others: Vec<(&'static str, Vec<S>)>,
}

impl<P, S> Row<P, S> {
    /// The spread of `figure` over the rounds; a round whose figure is not
    /// finite (`NaN`: it measured nothing, e.g. a peer stalled) is left out.
    pub fn spread(&self, figure: impl Fn(&S) -> f64) -> Spread {
        let v: Vec<f64> = self.samples.iter().map(figure).collect();
        Spread::of(&v.into_iter().filter(|x| x.is_finite()).collect::<Vec<_>>())
    }

    /// The median of `figure` over the rounds.
    pub fn median(&self, figure: impl Fn(&S) -> f64) -> f64 {
        self.spread(figure).median
    }

    /// `figure` against the baseline's, round by round.
    pub fn ratio(&self, figure: impl Fn(&S) -> f64) -> Option<Ratio> {
        let base = self.baseline.as_ref()?;
        Some(Self::paired(&self.samples, base, figure))
    }

    /// `figure` against `other`'s (another point's row), round by round:
    /// for experiments that compare more pairs than each point with one
    /// baseline.
    pub fn against(&self, other: &Row<P, S>, figure: impl Fn(&S) -> f64) -> Ratio {
        Self::paired(&self.samples, &other.samples, figure)
    }

    /// The ratios of `figure` in `a` over `b`, round by round, leaving out
    /// a round in which either is not finite.
    fn paired(a: &[S], b: &[S], figure: impl Fn(&S) -> f64) -> Ratio {
        let (x, y): (Vec<f64>, Vec<f64>) = a
            .iter()
            .zip(b)
            .map(|(p, q)| (figure(p), figure(q)))
            .filter(|(p, q)| p.is_finite() && q.is_finite())
            .unzip();
        Ratio::of(&x, &y)
    }

    /// `figure` against `series`' at the same parameter, round by round
    /// (none where `series` has no point there).
    pub fn ratio_to(&self, series: &str, figure: impl Fn(&S) -> f64) -> Option<Ratio> {
        let (_, base) = self.others.iter().find(|(s, _)| *s == series)?;
        Some(Self::paired(&self.samples, base, figure))
    }

    /// The mean gain of `figure` over `series`' at the same parameter, in
    /// percent, from the rounds' ratios (`(a / b - 1) * 100`, round by
    /// round), with its Student-t interval Bonferroni-corrected for a family
    /// of `comparisons` (none where `series` has no point there).
    pub fn gain_to(
        &self,
        series: &str,
        figure: impl Fn(&S) -> f64,
        comparisons: usize,
    ) -> Option<Interval> {
        let (_, base) = self.others.iter().find(|(s, _)| *s == series)?;
        let gains: Vec<f64> = (self.samples.iter().zip(base))
            .map(|(a, b)| (figure(a) / figure(b) - 1.0) * 100.0)
            .filter(|g| g.is_finite())
            .collect();
        Some(Interval::of(&gains, comparisons))
    }

    /// The typical value of `figure`: the median of the rounds.
    pub fn typical(&self, figure: impl Fn(&S) -> f64) -> f64 {
        self.median(figure)
    }

    /// The typical value of `figure` on `series` at the same parameter
    /// (this row's own where it is `series`): the median of its rounds;
    /// none where `series` has no point there.
    pub fn typical_of(&self, series: &str, figure: impl Fn(&S) -> f64) -> Option<f64> {
        if self.point.series == series {
            return Some(self.typical(figure));
        }
        let (_, samples) = self.others.iter().find(|(s, _)| *s == series)?;
        let v: Vec<f64> = samples
            .iter()
            .map(figure)
            .filter(|x| x.is_finite())
            .collect();
        Some(Spread::of(&v).median)
    }

    /// Whether `figure` is a number in some round: a figure a point does not
    /// have is `NaN` in every round (`-` in the table and null in the JSON
    /// of [`Columns::typical`] and [`Columns::summary`]).
    pub fn measured(&self, figure: impl Fn(&S) -> f64) -> bool {
        self.samples.iter().any(|s| !figure(s).is_nan())
    }

    /// `figure` in every round, in round order.
    pub fn each(&self, figure: impl Fn(&S) -> f64) -> Vec<f64> {
        self.samples.iter().map(figure).collect()
    }

    /// `figure` minus the baseline's, round by round, leaving out a round
    /// in which either is not finite.
    pub fn difference(&self, figure: impl Fn(&S) -> f64) -> Option<Spread> {
        let base = self.baseline.as_ref()?;
        let d: Vec<f64> = (self.samples.iter().zip(base))
            .map(|(a, b)| figure(a) - figure(b))
            .filter(|d| d.is_finite())
            .collect();
        Some(Spread::of(&d))
    }

    /// Whether `check` holds in every round.
    pub fn every(&self, check: impl Fn(&S) -> bool) -> bool {
        self.samples.iter().all(check)
    }

    /// The rounds measured.
    pub fn rounds(&self) -> usize {
        self.samples.len()
    }

    /// Each round's median of `values` (for a measurement that holds many,
    /// e.g. every transfer of the round), spread over the rounds.
    pub fn per_round(&self, values: impl Fn(&S) -> &[f64]) -> Spread {
        per_round(&self.samples, values)
    }

    /// Every round's `values` as one sample (e.g. every transfer of every
    /// round), summarised.
    pub fn pooled(&self, values: impl Fn(&S) -> &[f64]) -> Spread {
        Spread::of(&self.pooled_values(values))
    }

    /// The median of every round's `values` as one sample (e.g. every
    /// frame of every round).
    pub fn pooled_typical(&self, values: impl Fn(&S) -> &[f64]) -> f64 {
        self.pooled(values).median
    }

    /// The mean and population standard deviation of every round's
    /// `values` as one sample.
    pub fn pooled_mean(&self, values: impl Fn(&S) -> &[f64]) -> (f64, f64) {
        mean_and_deviation(&self.pooled_values(values))
    }

    fn pooled_values(&self, values: impl Fn(&S) -> &[f64]) -> Vec<f64> {
        self.samples
            .iter()
            .flat_map(|s| values(s).iter().copied())
            .collect()
    }

    /// The baseline's [`Row::per_round`] (none for the baseline itself, or
    /// without one).
    pub fn baseline_per_round(&self, values: impl Fn(&S) -> &[f64]) -> Option<Spread> {
        Some(per_round(self.baseline.as_ref()?, values))
    }
}

/// Each of `samples`' medians of `values`, spread over the samples.
fn per_round<S>(samples: &[S], values: impl Fn(&S) -> &[f64]) -> Spread {
    let medians: Vec<f64> = samples
        .iter()
        .map(|s| Spread::of(values(s)).median)
        .collect();
    Spread::of(&medians)
}

impl<'a, P: 'a, S: 'a> Columns<'a, Row<P, S>> {
    /// The point's series, in both.
    pub fn series(self, header: &'static str, key: &'static str, doc: &'static str) -> Self {
        self.plain(header, key, |r: &Row<P, S>| r.point.series)
            .doc(doc)
    }

    /// A measured figure: in the table its median times `scale` with
    /// `places` decimals and the rounds' range ([`range_text`]: `-` where
    /// no round measured it); in the JSON its median under
    /// `key` and the rounds' smallest and largest under `key_min` and
    /// `key_max`.
    pub fn measured(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        (scale, places): (f64, usize),
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r| range_text(&r.spread(figure).scaled(scale), places, "", false),
            move |r| r.median(figure),
        )
        .doc(format!(
            "{doc}, median of the rounds; {key}_min, {key}_max: their range"
        ))
        .kept_as(format!("{key}_min"), move |r| r.spread(figure).min)
        .kept_as(format!("{key}_max"), move |r| r.spread(figure).max)
    }

    /// A measured figure in two table columns: its median times `scale`
    /// with `places` decimals under `header`, the rounds' `min..max` under
    /// `range_header` (`-` in both where no round measured it); in the JSON
    /// as [`Columns::measured`] keeps it (`key`, `key_min`, `key_max`).
    pub fn measured_apart(
        self,
        (header, range_header): (&'static str, &'static str),
        key: &'static str,
        doc: &'static str,
        (scale, places): (f64, usize),
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        let spread = move |r: &Row<P, S>| r.spread(figure).scaled(scale);
        let dash = |s: &Spread, text: String| if s.n == 0 { "-".into() } else { text };
        self.col(
            header,
            key,
            move |r| {
                let s = spread(r);
                dash(&s, format!("{:.places$}", s.median))
            },
            move |r| r.median(figure),
        )
        .doc(format!(
            "{doc}, median of the rounds; {key}_min, {key}_max: their range"
        ))
        .shown(range_header, move |r| {
            let s = spread(r);
            dash(&s, format!("{:.places$}..{:.places$}", s.min, s.max))
        })
        .kept_as(format!("{key}_min"), move |r| r.spread(figure).min)
        .kept_as(format!("{key}_max"), move |r| r.spread(figure).max)
    }

    /// A measured figure against the baseline series', round by round: in
    /// the table `1.23x (1.10..1.40)`, or `-` for the baseline; in the JSON
    /// the median ratio (null for the baseline) and its verdict under
    /// `key_verdict` ("faster", "slower" or "no measurable difference":
    /// measurable only when every round agrees).
    pub fn ratio(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r| r.ratio(figure).map_or("-".into(), |q| q.text()),
            move |r| r.ratio(figure).map(|q| q.0.median),
        )
        .doc(format!(
            "{doc}, median of the rounds' ratios, null for the baseline; {key}_verdict: \
             faster or slower where every round agrees, else no measurable difference"
        ))
        .kept_as(format!("{key}_verdict"), move |r| {
            r.ratio(figure).map(|q| q.verdict())
        })
    }

    /// A measured figure minus the baseline series', round by round: in
    /// the table `+1.23 (+0.50..+2.00)` (times `scale`, `places` decimals),
    /// or `-` for the baseline; in the JSON the median difference (null for
    /// the baseline), its range under `key_min` and `key_max`, and its
    /// verdict under `key_verdict` ("larger", "smaller" or "no measurable
    /// difference": measurable only when every round agrees on the sign).
    pub fn difference(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        (scale, places): (f64, usize),
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        let diff = move |r: &Row<P, S>| r.difference(figure).map(|d| d.scaled(scale));
        self.col(
            header,
            key,
            move |r| diff(r).map_or("-".into(), |d| range_text(&d, places, "", true)),
            move |r| diff(r).map(|d| d.median),
        )
        .doc(format!(
            "{doc}, median of the rounds' differences, null for the baseline; {key}_min, \
             {key}_max: their range; {key}_verdict: larger or smaller where every round \
             agrees, else no measurable difference"
        ))
        .kept_as(format!("{key}_min"), move |r| diff(r).map(|d| d.min))
        .kept_as(format!("{key}_max"), move |r| diff(r).map(|d| d.max))
        .kept_as(format!("{key}_verdict"), move |r| {
            diff(r).map(|d| difference_verdict(&d))
        })
    }

    /// A check every round must pass, in both (`yes` or `NO`).
    pub fn checked(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        check: impl Fn(&S) -> bool + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r| if r.every(check) { "yes" } else { "NO" }.into(),
            move |r| r.every(check),
        )
        .doc(doc)
    }

    /// A measured figure with its whole spread: in the table its median
    /// times `scale` with `places` decimals and the rounds' range; in the
    /// JSON under `key` the spread of the rounds (median, p25, p75, min, max,
    /// n).
    pub fn spread(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        (scale, places): (f64, usize),
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r| range_text(&r.spread(figure).scaled(scale), places, "", false),
            move |r| r.spread(figure).json(),
        )
        .doc(format!(
            "{doc}, over the rounds: median, p25, p75, min, max, n"
        ))
    }

    /// A measured figure's spread over the rounds, for a figure whose
    /// median has a column of its own: in the table its range `min..max`
    /// with `places` decimals, in the JSON under `key` the whole spread
    /// (median, p25, p75, min, max, n).
    pub fn rounds_range(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        places: usize,
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        self.range(header, key, places, move |r: &Row<P, S>| r.spread(figure))
            .doc(format!(
                "{doc} over the rounds: median, p25, p75, min, max, n"
            ))
    }

    /// A figure's median over the rounds, in both: in the table times
    /// `scale` with `places` decimals (a figure `NaN` in every round: `-`
    /// and null).
    pub fn typical(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        (scale, places): (f64, usize),
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r| match r.measured(figure) {
                true => format!("{:.places$}", r.median(figure) * scale),
                false => "-".into(),
            },
            move |r| r.measured(figure).then(|| r.median(figure)),
        )
        .doc(format!("{doc}, median of the rounds"))
    }

    /// A figure's median over the rounds under `key` and its whole spread
    /// under `spread_key` (median, p25, p75, min, max, n); in the table the
    /// median times `scale` with `places` decimals and `unit`, the rounds'
    /// range beside it (a figure `NaN` in every round: `-` and nulls).
    pub fn summary(
        self,
        (header, key, spread_key): (&'static str, &'static str, &'static str),
        doc: &'static str,
        (scale, places, unit): (f64, usize, &'static str),
        figure: impl Fn(&S) -> f64 + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r| range_text(&r.spread(figure).scaled(scale), places, unit, false),
            move |r| r.measured(figure).then(|| r.median(figure)),
        )
        .doc(format!(
            "{doc}, median of the rounds; {spread_key}: their median, p25, p75, min, max, n"
        ))
        .kept_as(spread_key.to_string(), move |r| {
            r.measured(figure).then(|| r.spread(figure).json())
        })
    }

    /// A figure of which each round holds many values (e.g. one a frame),
    /// every round's values pooled as one sample: its median in both, in the
    /// table with `places` decimals.
    pub fn pooled(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        places: usize,
        values: impl Fn(&S) -> &[f64] + Copy + 'a,
    ) -> Self {
        self.fixed(header, key, places, move |r: &Row<P, S>| {
            r.pooled_typical(values)
        })
        .doc(format!("{doc}, median of every round's values pooled"))
    }

    /// A pooled figure's (as [`Columns::pooled`]) interquartile range
    /// `p25..p75` in the table with `places` decimals, its whole spread
    /// (median, p25, p75, min, max, n) in the JSON under `key`.
    pub fn pooled_spread(
        self,
        header: &'static str,
        key: &'static str,
        doc: &'static str,
        places: usize,
        values: impl Fn(&S) -> &[f64] + Copy + 'a,
    ) -> Self {
        self.col(
            header,
            key,
            move |r: &Row<P, S>| {
                let s = r.pooled(values);
                format!("{:.places$}..{:.places$}", s.p25, s.p75)
            },
            move |r| r.pooled(values).json(),
        )
        .doc(format!(
            "{doc}, every round's values pooled: median, p25, p75, min, max, n"
        ))
    }

    /// A pooled figure (as [`Columns::pooled`]) in the JSON only: its
    /// median under `key`, its whole spread under `spread_key`.
    pub fn pooled_kept(
        self,
        key: &'static str,
        spread_key: &'static str,
        doc: &'static str,
        values: impl Fn(&S) -> &[f64] + Copy + 'a,
    ) -> Self {
        self.kept(key, move |r: &Row<P, S>| r.pooled_typical(values))
            .doc(format!(
                "{doc}, median of every round's values pooled; {spread_key}: their median, \
                 p25, p75, min, max, n"
            ))
            .kept_as(spread_key.to_string(), move |r| r.pooled(values).json())
    }

    /// The rounds measured, in both.
    pub fn rounds(self) -> Self {
        self.plain("rounds", "rounds", |r: &Row<P, S>| r.rounds())
            .doc("rounds measured")
    }
}

/// A spread as a cell: `median (min..max)` with `places` decimals, `unit`
/// after the median and, where `signed`, a sign on each figure; `-` where
/// no round measured it (no finite sample).
pub fn range_text(s: &Spread, places: usize, unit: &str, signed: bool) -> String {
    if s.n == 0 {
        return "-".into();
    }
    let f = |x: f64| match signed {
        true => format!("{x:+.places$}"),
        false => format!("{x:.places$}"),
    };
    format!("{}{unit} ({}..{})", f(s.median), f(s.min), f(s.max))
}

/// The verdict on differences taken round by round: "larger" or "smaller"
/// where every round agrees on the sign, else "no measurable difference".
pub fn difference_verdict(d: &Spread) -> &'static str {
    if d.n > 0 && d.min > 0.0 {
        "larger"
    } else if d.n > 0 && d.max < 0.0 {
        "smaller"
    } else {
        "no measurable difference"
    }
}

/// A plot the frame draws from the rows' JSON, named by column keys.
#[derive(Debug, Clone, Copy)]
pub struct Plot {
    /// Title above it.
    pub title: &'static str,
    /// The key of the x axis (its column's header labels the axis).
    pub x: &'static str,
    /// The key of the y axis (its column's header labels the axis).
    pub y: &'static str,
    /// The keys of the interval drawn around each point; none: the y
    /// column's `_min` and `_max` where it is measured.
    pub interval: Option<(&'static str, &'static str)>,
    /// The y values are multiplied by this (the unit of the y column's
    /// header: `1e-6` for a header in millions).
    pub y_scale: f64,
    /// The keys whose values, joined, name a line.
    pub lines: &'static [&'static str],
    /// How the x axis is scaled.
    pub axis: XAxis,
    /// A logarithmic y axis.
    pub log_y: bool,
}

impl Plot {
    /// The plot of `rows` (JSON objects), its axes labelled from `columns`.
    pub fn draw<R>(&self, columns: &Columns<R>, rows: &[Value]) -> LinePlot {
        let num = |r: &Value, k: &str| r.get(k).and_then(Value::as_f64);
        let mut series: Vec<Series> = Vec::new();
        for r in rows {
            let (Some(x), Some(y)) = (num(r, self.x), num(r, self.y)) else {
                continue;
            };
            let label = self
                .lines
                .iter()
                .map(|k| match r.get(*k) {
                    Some(Value::String(s)) => s.clone(),
                    // A yes-or-no key names its column where it holds.
                    Some(Value::Bool(b)) => b
                        .then(|| columns.header_of(k).unwrap_or(k))
                        .unwrap_or_default()
                        .to_string(),
                    Some(v) => format!("{} {v}", columns.header_of(k).unwrap_or(k)),
                    None => String::new(),
                })
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let i = match series.iter().position(|s| s.label == label) {
                Some(i) => i,
                None => {
                    series.push(Series::new(label, Vec::new()));
                    series.len() - 1
                }
            };
            let k = self.y_scale;
            series[i].points.push((x, y * k));
            let (lo, hi) = match self.interval {
                Some((lo, hi)) => (lo.to_string(), hi.to_string()),
                None => (self.y.to_string() + "_min", self.y.to_string() + "_max"),
            };
            if let (Some(lo), Some(hi)) = (num(r, &lo), num(r, &hi)) {
                series[i].interval.push((lo * k, hi * k));
            }
        }
        for s in &mut series {
            let mut order: Vec<usize> = (0..s.points.len()).collect();
            order.sort_by(|&a, &b| s.points[a].0.total_cmp(&s.points[b].0));
            s.points = order.iter().map(|&i| s.points[i]).collect();
            // An interval for every point, or none drawn.
            s.interval = if s.interval.len() == s.points.len() {
                order.iter().map(|&i| s.interval[i]).collect()
            } else {
                Vec::new()
            };
        }
        let label = |k: &str| columns.header_of(k).unwrap_or("").to_string();
        let plot = LinePlot::new(
            self.title,
            self.axis,
            &label(self.x),
            &label(self.y),
            series,
        );
        if self.log_y { plot.log_y() } else { plot }
    }
}

impl Report {
    /// With `plots` drawn from the report's JSON rows, their axes labelled
    /// from `columns`.
    pub fn drawn<R>(self, columns: &Columns<R>, plots: &[Plot]) -> Self {
        let rows = self.json["rows"].as_array().cloned().unwrap_or_default();
        let drawn: Vec<LinePlot> = plots.iter().map(|p| p.draw(columns, &rows)).collect();
        self.plots(drawn)
    }
}

/// What an experiment finds in its rows beyond the table: clauses of its
/// answer, notes printed under the table, and the targets it checks.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// Clauses of the one-sentence answer.
    pub clauses: Vec<String>,
    /// Lines printed under the table.
    pub notes: String,
    /// The targets checked.
    pub targets: Vec<Target>,
    /// Keys of the report's JSON beside its rows, with their values.
    pub kept: Vec<(&'static str, Value)>,
    /// Plots drawn from other tables than the rows (with [`Plot::draw`]),
    /// placed before the declared ones.
    pub plots: Vec<LinePlot>,
}

/// What a run finds or makes before its first round, kept in its
/// configuration; progress text goes to the second argument.
pub type Prepare<C> = fn(&mut C, &mut dyn FnMut(&str)) -> Result<(), Error>;

/// What a run on a real board (`--board`) does before its first round, in
/// place of [`Prepare`]: the board's engine kept in the configuration;
/// progress text goes to the third argument.
pub type OnBoardPrepare<C> = fn(&mut C, BoardRig, &mut dyn FnMut(&str)) -> Result<(), Error>;

/// The text an experiment gives in place of its rows' one table.
pub type TablesOf<C, P, S> = fn(&C, &[Row<P, S>]) -> String;

/// Every point's samples, in round order, from a peer program that takes the
/// turns itself (one run of it measures every round); progress text goes to
/// the third argument.
pub type Sampled<C, P, S> = fn(&C, &[Point<P>], &mut dyn FnMut(&str)) -> Result<Vec<Vec<S>>, Error>;

/// One measurement of one point in round `r` (from 0): for a measurement
/// that differs by round (e.g. each round its own share of the inputs).
pub type InRound<C, P, S> = fn(&C, &Point<P>, usize) -> Result<S, Error>;

/// The parts of one point's sample that are rows of their own, each with
/// its parameter (e.g. every stage of one pass through a chain): the row
/// of each part is the point's series at that parameter. Every round of a
/// point gives the same parameters in the same order.
pub type Parts<C, P, S> = fn(&C, &Point<P>, &S) -> Vec<(P, S)>;

/// Groups of points that take turns only among themselves, the groups
/// measured one after another (each for every round): the key of a point's
/// group (consecutive points with the same key are a group) and what a group
/// is, as the heading says it (e.g. "batch size").
pub type TurnsWithin<P> = (fn(&Point<P>) -> String, &'static str);

/// What an experiment's rows must hold across points ([`Bench::check`]).
pub type Check<C, P, S> = fn(&C, &[Row<P, S>]) -> Result<(), Error>;

/// How the figures summarise the rounds where each round holds many values
/// pooled ([`Columns::pooled`]), as [`Bench::figures`] says it.
pub const POOLED: &str = "each figure the median of every round's values pooled (e.g. every \
                          frame of every round) with their interquartile range";

/// The rows' columns as an experiment states them.
pub type ColumnsOf<P, S> = fn() -> Columns<'static, Row<P, S>>;

/// An experiment as the frame runs it: its configuration at a setup's size
/// (`C`), its points' parameters (`P`), and what one measurement returns
/// (`S`). It is an [`Experiment`]: one line of the registry.
pub struct Bench<C: 'static, P: 'static, S: 'static> {
    /// The name on the command line and of its report files, given once.
    pub name: &'static str,
    /// What it asks, one line.
    pub question: &'static str,
    /// What its numbers are.
    pub conditions: Conditions,
    /// Why it needs the emulated fabric (it runs on this machine only).
    pub emulator_only: &'static str,
    /// Another experiment `bench NAME` runs after it.
    pub then: Option<&'static str>,
    /// Its form with `--device cuda:N`.
    pub on_gpu: Option<OnGpu>,
    /// Its configuration at the setup's size, on the setup's board.
    pub config: fn(&Setup) -> C,
    /// What a run finds or makes before its first round (peers found or
    /// built, scratch files), kept in the configuration; by default nothing.
    pub prepare: Prepare<C>,
    /// Its form with `--board ROOT`: the engine's mode and what the run
    /// does with the board before its first round; none: it needs the
    /// emulated fabric ([`Bench::emulator_only`] says why).
    pub board: Option<(Mode, OnBoardPrepare<C>)>,
    /// The rounds every point is measured in.
    pub rounds: fn(&C) -> usize,
    /// The points, in the table's order.
    pub points: fn(&C) -> Vec<Point<P>>,
    /// The series every other is compared with, round by round.
    pub baseline: Option<&'static str>,
    /// One measurement of one point.
    pub measure: fn(&C, &Point<P>) -> Result<S, Error>,
    /// One measurement of one point that needs its round, used instead of
    /// `measure`; by default none.
    pub in_round: Option<InRound<C, P, S>>,
    /// Where one measurement holds several rows' samples: its parts, each
    /// a row; by default none (a row a point).
    pub parts: Option<Parts<C, P, S>>,
    /// Whether a sample measured anything (a round in which a peer was
    /// missing gives one that did not); by default every sample did. An
    /// experiment none of whose samples measured anything says so in its
    /// heading in place of the rounds.
    pub ran: Option<fn(&S) -> bool>,
    /// Where a peer program measures every point in turns itself (the
    /// same method, in its own loop): what it measured, used instead of
    /// `measure`; by default none.
    pub sampled: Option<Sampled<C, P, S>>,
    /// Where a point takes turns only with the points of its group: the
    /// group of each; by default every point takes turns with every other.
    pub turns_within: Option<TurnsWithin<P>>,
    /// The columns of its rows.
    pub columns: ColumnsOf<P, S>,
    /// The report's JSON keys beside its rows (those of [`Findings::kept`]),
    /// described for `bench --help` after the rows' keys; by default none.
    pub beside: &'static str,
    /// The plots, by column keys.
    pub plots: &'static [Plot],
    /// The text in place of the rows' one table (several tables, e.g. one
    /// per group of rows, made from columns); none: the rows' table.
    pub tables: Option<TablesOf<C, P, S>>,
    /// What was measured, one line (the frame adds the method).
    pub heading: fn(&C) -> String,
    /// How the figures summarise the rounds, as the heading says it: by
    /// default each the median of the rounds with their range; an
    /// experiment whose figures pool every round's values says so.
    pub figures: &'static str,
    /// What the rows say.
    pub findings: fn(&C, &[Row<P, S>]) -> Findings,
    /// What the rows must hold across points once every round is in (e.g.
    /// two series' outputs equal round by round), else the run fails with
    /// its error; by default nothing.
    pub check: Option<Check<C, P, S>>,
}

impl<C, P, S> Bench<C, P, S> {
    /// The parts every experiment has, which its literal takes with
    /// `..Bench::new(..)`: its configuration and rounds, its points, its
    /// measurement and its columns; the literal states the rest (the empty
    /// texts here are always replaced: the registry's test checks they are).
    pub const fn new(
        config: fn(&Setup) -> C,
        rounds: fn(&C) -> usize,
        points: fn(&C) -> Vec<Point<P>>,
        measure: fn(&C, &Point<P>) -> Result<S, Error>,
        columns: ColumnsOf<P, S>,
    ) -> Self {
        Bench {
            name: "",
            question: "",
            conditions: Conditions {
                timed: "",
                against: "",
                model: "",
                paper: "",
            },
            emulator_only: "it measures this machine, not a DMA device",
            then: None,
            on_gpu: None,
            config,
            prepare: |_, _| Ok(()),
            board: None,
            rounds,
            points,
            baseline: None,
            measure,
            in_round: None,
            parts: None,
            ran: None,
            sampled: None,
            turns_within: None,
            columns,
            beside: "",
            plots: &[],
            tables: None,
            heading: |_| String::new(),
            figures: "each figure the median of the rounds with their min..max",
            findings: |_, _| Findings::default(),
            check: None,
        }
    }
}

impl<C, P, S> Bench<C, P, S> {
    /// [`Bench::new`] for an experiment whose peer program takes the turns
    /// itself: `sampled` gives every point's rounds in one run.
    pub const fn by_peer(
        config: fn(&Setup) -> C,
        rounds: fn(&C) -> usize,
        points: fn(&C) -> Vec<Point<P>>,
        sampled: Sampled<C, P, S>,
        columns: ColumnsOf<P, S>,
    ) -> Self {
        Bench {
            sampled: Some(sampled),
            ..Bench::new(config, rounds, points, Self::one_alone, columns)
        }
    }

    /// What measuring one point alone gives where the peer program measures
    /// every point at once: an error saying so.
    fn one_alone(_: &C, p: &Point<P>) -> Result<S, Error> {
        Err(Error::peer("the frame")(format!(
            "{}: measured with every other point by its peer program, not alone",
            p.series
        )))
    }
}

impl<C, P: Clone + Display + PartialEq, S: Clone> Bench<C, P, S> {
    /// Measures every point in turns for the configured rounds.
    pub fn rows(&self, cfg: &C, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row<P, S>>, Error> {
        let points = (self.points)(cfg);
        let rounds = (self.rounds)(cfg).max(1);
        if let Some(sampled) = self.sampled {
            let samples = sampled(cfg, &points, progress)?;
            if samples.len() != points.len() {
                return Err(Error::peer(self.name)(format!(
                    "samples of {} points for {} points",
                    samples.len(),
                    points.len()
                )));
            }
            let (points, samples) = self.split(cfg, &points, samples)?;
            return self.checked(cfg, self.rows_of(&points, samples));
        }
        if let Some((group, _)) = self.turns_within {
            let mut samples = Vec::with_capacity(points.len());
            let mut start = 0;
            while start < points.len() {
                let key = group(&points[start]);
                let n = points[start..]
                    .iter()
                    .take_while(|p| group(p) == key)
                    .count();
                let mine = &points[start..start + n];
                samples.extend(in_turns(n, rounds, |i, round| {
                    self.measure_one(cfg, &mine[i], (round, rounds), progress)
                })?);
                start += n;
            }
            let (points, samples) = self.split(cfg, &points, samples)?;
            return self.checked(cfg, self.rows_of(&points, samples));
        }
        let samples = in_turns(points.len(), rounds, |i, round| {
            self.measure_one(cfg, &points[i], (round, rounds), progress)
        })?;
        let (points, samples) = self.split(cfg, &points, samples)?;
        self.checked(cfg, self.rows_of(&points, samples))
    }

    /// One measurement of `p` in round `round` of `rounds`, heard of by
    /// `progress` before it starts.
    fn measure_one(
        &self,
        cfg: &C,
        p: &Point<P>,
        (round, rounds): (usize, usize),
        progress: &mut dyn FnMut(&str),
    ) -> Result<S, Error> {
        progress(&format!(
            "{}: {} at {}, round {} of {rounds}",
            self.name,
            p.series,
            p.at,
            round + 1
        ));
        match self.in_round {
            Some(measure) => measure(cfg, p, round),
            None => (self.measure)(cfg, p),
        }
    }

    /// Every point's samples split into their [`Bench::parts`], each part a
    /// point of its own (as they are without parts).
    #[allow(clippy::type_complexity)]
    fn split(
        &self,
        cfg: &C,
        points: &[Point<P>],
        samples: Vec<Vec<S>>,
    ) -> Result<(Vec<Point<P>>, Vec<Vec<S>>), Error> {
        let Some(parts) = self.parts else {
            return Ok((points.to_vec(), samples));
        };
        let (mut split, mut kept): (Vec<Point<P>>, Vec<Vec<S>>) = (Vec::new(), Vec::new());
        for (p, rounds) in points.iter().zip(samples) {
            let first = split.len();
            for (round, s) in rounds.iter().enumerate() {
                let got = parts(cfg, p, s);
                if round == 0 {
                    for (at, _) in &got {
                        let series = p.series;
                        split.push(Point {
                            series,
                            at: at.clone(),
                        });
                        kept.push(Vec::new());
                    }
                }
                let same = got.len() == split.len() - first
                    && got
                        .iter()
                        .zip(&split[first..])
                        .all(|((at, _), q)| *at == q.at);
                if !same {
                    return Err(Error::peer(self.name)(format!(
                        "{} at {}: round {} gave other parts than round 1",
                        p.series,
                        p.at,
                        round + 1
                    )));
                }
                for (k, (_, s)) in got.into_iter().enumerate() {
                    kept[first + k].push(s);
                }
            }
        }
        Ok((split, kept))
    }

    /// `rows`, if they hold what [`Bench::check`] asks.
    fn checked(&self, cfg: &C, rows: Vec<Row<P, S>>) -> Result<Vec<Row<P, S>>, Error> {
        match self.check {
            Some(check) => check(cfg, &rows).map(|()| rows),
            None => Ok(rows),
        }
    }

    /// The rows of `points` from their `samples`, each beside its
    /// baseline's and the other series' at the same parameter.
    fn rows_of(&self, points: &[Point<P>], samples: Vec<Vec<S>>) -> Vec<Row<P, S>> {
        let base = |p: &Point<P>| {
            let b = self.baseline.filter(|&b| b != p.series)?;
            let j = points.iter().position(|q| q.series == b && q.at == p.at)?;
            Some(samples[j].clone())
        };
        let others = |p: &Point<P>| {
            points
                .iter()
                .zip(&samples)
                .filter(|(q, _)| q.series != p.series && q.at == p.at)
                .map(|(q, s)| (q.series, s.clone()))
                .collect()
        };
        points
            .iter()
            .zip(&samples)
            .map(|(p, s)| Row {
                baseline: base(p),
                others: others(p),
                point: p.clone(),
                samples: s.clone(),
            })
            .collect()
    }

    /// The report of `rows`: the table, JSON and CSV from the columns, the
    /// notes and targets under the table, the answer, the plots, and the
    /// heading with the method.
    pub fn report(&self, cfg: &C, rows: &[Row<P, S>]) -> Report {
        let columns = (self.columns)();
        let ran = |r: &Row<P, S>| match self.ran {
            Some(ran) => r.samples.iter().filter(|s| ran(s)).count(),
            None => r.rounds(),
        };
        let rounds = rows.iter().map(ran).max().unwrap_or(0);
        let compared = self
            .baseline
            .map(|b| format!(", each point against {b} round by round"))
            .unwrap_or_default();
        let compared = match self.turns_within {
            Some((_, what)) => format!(
                "{compared}; a point takes turns only with those of its {what}, one {what} \
                 after another"
            ),
            None => compared,
        };
        let method = match rounds {
            0 => "nothing measured: no point ran (the notes say why)".to_string(),
            _ => format!(
                "{rounds} round(s), the points taking turns (the order reversed every other \
                 round); {}{compared}",
                self.figures
            ),
        };
        let heading = format!("{}: {}; {method}", self.name, (self.heading)(cfg));
        let found = (self.findings)(cfg, rows);
        let mut report = Report::of(self.name, heading, &columns, rows);
        let table = match self.tables {
            Some(tables) => tables(cfg, rows),
            None => report.text.clone(),
        };
        let text = table + &found.notes;
        for (key, value) in found.kept {
            report = report.kept(key, value);
        }
        report
            .text(text)
            .answer(sentence(&found.clauses))
            .targets(found.targets)
            .plots(found.plots)
            .drawn(&columns, self.plots)
    }
}

impl<C, P, S> Experiment for Bench<C, P, S>
where
    P: Clone + Display + PartialEq,
    S: Clone,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn question(&self) -> &'static str {
        self.question
    }

    fn conditions(&self) -> Conditions {
        self.conditions
    }

    fn keys(&self) -> String {
        let rows = (self.columns)().keys_help();
        match self.beside {
            "" => rows,
            beside => format!("{rows};\n{beside}"),
        }
    }

    fn run(&self, setup: &Setup, progress: &mut dyn FnMut(&str)) -> Result<Report, Error> {
        let mut cfg = (self.config)(setup);
        (self.prepare)(&mut cfg, progress)?;
        let rows = self.rows(&cfg, progress)?;
        Ok(self.report(&cfg, &rows))
    }

    fn then(&self) -> Option<&'static str> {
        self.then
    }

    fn on_gpu(&self) -> Option<OnGpu> {
        self.on_gpu
    }

    fn board_mode(&self) -> Result<Mode, &'static str> {
        self.board.map(|(mode, _)| mode).ok_or(self.emulator_only)
    }

    fn run_on_board(
        &self,
        setup: &Setup,
        rig: BoardRig,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Report, Error> {
        let Some((_, prepare)) = self.board else {
            return Err(Error::EmulatorOnly(self.name, self.emulator_only));
        };
        let mut cfg = (self.config)(setup);
        prepare(&mut cfg, rig, progress)?;
        let rows = self.rows(&cfg, progress)?;
        Ok(self.report(&cfg, &rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up experiment whose measurement is a pure function of the
    /// point and a counter, to check what the frame does with it.
    fn toy_points(_: &usize) -> Vec<Point<u32>> {
        {
            let mut v = Vec::new();
            for at in [1, 2] {
                v.push(Point { series: "base", at });
                v.push(Point {
                    series: "other",
                    at,
                });
            }
            v
        }
    }

    fn toy_measure(_: &usize, p: &Point<u32>) -> Result<f64, Error> {
        {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            // "other" is twice "base", plus a small drift over calls.
            let k = if p.series == "other" { 2.0 } else { 1.0 };
            Ok(k * f64::from(p.at) * 100.0 + f64::from(n % 3))
        }
    }

    fn toy_columns() -> Columns<'static, Row<u32, f64>> {
        {
            Columns::new()
                .series("series", "series", "base or other")
                .plain("at", "at", |r: &Row<u32, f64>| r.point.at)
                .doc("the parameter")
                .measured("v", "v", "value", (1.0, 0), |s| *s)
                .ratio("vs base", "vs_base", "v over base's", |s| *s)
                .spread("v all", "v_spread", "value", (1.0, 0), |s| *s)
                .typical("v mid", "v_mid", "value", (1.0, 0), |s| *s)
                .summary(
                    ("v sum", "v_sum", "v_sum_spread"),
                    "value",
                    (1.0, 0, ""),
                    |s| *s,
                )
                .difference("v - base", "v_diff", "v minus base's", (1.0, 0), |s| *s)
                .rounds()
        }
    }

    fn toy_tables(_: &usize, rows: &[Row<u32, f64>]) -> String {
        format!("{} rows\n", rows.len())
    }

    static TOY: Bench<usize, u32, f64> = Bench {
        name: "toy",
        question: "toy",
        baseline: Some("base"),
        plots: &[Plot {
            title: "toy",
            x: "at",
            y: "v",
            interval: None,
            y_scale: 1.0,
            lines: &["series"],
            axis: XAxis::Linear,
            log_y: false,
        }],
        heading: |_| "a toy".into(),
        findings: |_, _| Findings {
            kept: vec![("toy_kept", 7.into())],
            ..Findings::default()
        },
        ..Bench::new(|_| 3, |c| *c, toy_points, toy_measure, toy_columns)
    };

    fn by_round(_: &usize, p: &Point<u32>, round: usize) -> Result<f64, Error> {
        Ok(f64::from(p.at) * 10.0 + round as f64)
    }

    /// Two parts of every sample: at `10 at + 1` the sample, at `+ 2` its
    /// negative.
    fn halves(_: &usize, p: &Point<u32>, s: &f64) -> Vec<(u32, f64)> {
        vec![(p.at * 10 + 1, *s), (p.at * 10 + 2, -*s)]
    }

    /// One part in an even round's sample, two in an odd one's.
    fn uneven(_: &usize, _: &Point<u32>, s: &f64) -> Vec<(u32, f64)> {
        (0..*s as u32 % 2 + 1).map(|k| (k, *s)).collect()
    }

    #[test]
    fn measurements_by_round_split_into_parts_and_unrun_points_say_so() {
        let split = Bench {
            in_round: Some(by_round),
            parts: Some(halves),
            ..TOY
        };
        let rows = split.rows(&3, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 8);
        let at = |r: &Row<u32, f64>| (r.point.series, r.point.at);
        assert_eq!((at(&rows[0]), at(&rows[1])), (("base", 11), ("base", 12)));
        assert_eq!(rows[0].samples, [10.0, 11.0, 12.0]);
        assert_eq!(rows[1].samples, [-10.0, -11.0, -12.0]);
        // Each part beside the baseline's same part.
        assert_eq!(at(&rows[2]), ("other", 11));
        assert_eq!(rows[2].baseline.as_deref(), Some(&[10.0, 11.0, 12.0][..]));
        let odd = Bench {
            parts: Some(uneven),
            ..split
        };
        assert!(odd.rows(&3, &mut |_| {}).is_err());
        let unrun = Bench {
            ran: Some(|s: &f64| *s < 0.0),
            ..TOY
        };
        let rows = unrun.rows(&3, &mut |_| {}).unwrap();
        let heading = unrun.report(&3, &rows).heading;
        assert!(heading.contains("; nothing measured"), "{heading}");
        assert!(!heading.contains("round(s)"), "{heading}");
    }

    /// A toy point's group: its parameter.
    fn by_at(p: &Point<u32>) -> String {
        p.at.to_string()
    }

    #[test]
    fn points_take_turns_within_their_group_one_group_after_another() {
        let grouped = Bench {
            turns_within: Some((by_at, "parameter")),
            ..TOY
        };
        let mut heard = Vec::new();
        let rows = grouped
            .rows(&3, &mut |t| heard.push(t.to_string()))
            .unwrap();
        // Both series at 1 for every round, the order reversed every other
        // round, then both at 2.
        let mut want = Vec::new();
        for at in [1, 2] {
            for (round, order) in [["base", "other"], ["other", "base"], ["base", "other"]]
                .iter()
                .enumerate()
            {
                for series in order {
                    want.push(format!("toy: {series} at {at}, round {} of 3", round + 1));
                }
            }
        }
        assert_eq!(heard, want);
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.rounds() == 3));
        assert!(rows[0].baseline.is_none() && rows[1].baseline.is_some());
        let heading = grouped.report(&3, &rows).heading;
        assert!(
            heading.contains("; a point takes turns only with those of its parameter, one parameter after another"),
            "{heading}"
        );
        // Another series' typical figure at the same parameter, or the row's own.
        let other = rows[0].typical_of("other", |s| *s).unwrap();
        assert_eq!(other, rows[1].typical(|s| *s));
        assert_eq!(
            rows[0].typical_of("base", |s| *s),
            Some(rows[0].typical(|s| *s))
        );
        assert!(rows[0].typical_of("none", |s| *s).is_none());
        // The median and the range in two cells, the same keys as `measured`.
        let apart = || {
            Columns::new()
                .series("series", "series", "base or other")
                .measured_apart(("v", "v range"), "v", "value", (1.0, 0), |s: &f64| *s)
        };
        let r = &rows[1];
        let s = r.spread(|s| *s);
        let table = apart().table([r]);
        let cells: Vec<&str> = table.lines().nth(2).unwrap().split_whitespace().collect();
        let range = format!("{:.0}..{:.0}", s.min, s.max);
        assert_eq!(
            cells,
            ["other", &format!("{:.0}", s.median), range.as_str()]
        );
        let json = &apart().json([r])[0];
        assert_eq!(
            (json["v"].as_f64(), json["v_min"].as_f64()),
            (Some(s.median), Some(s.min))
        );
        assert_eq!(json["v_max"].as_f64(), Some(s.max));
        let help = apart().keys_help().replace('\n', " ");
        assert!(
            help.ends_with("v (value, median of the rounds; v_min, v_max: their range)"),
            "{help}"
        );
        let none = Row {
            samples: vec![f64::NAN; 2],
            ..r.clone()
        };
        let table = apart().table([&none]);
        let cells: Vec<&str> = table.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(cells, ["other", "-", "-"]);
    }

    #[test]
    fn rows_that_fail_the_check_fail_the_run_with_its_error() {
        fn below(limit: f64, rows: &[Row<u32, f64>]) -> Result<(), Error> {
            match rows.iter().all(|r| r.every(|s| *s < limit)) {
                true => Ok(()),
                false => Err(Error::peer("toy")(format!("a sample of {limit} or more"))),
            }
        }
        let loose = Bench {
            check: Some(|_, rows| below(1000.0, rows)),
            ..TOY
        };
        assert_eq!(loose.rows(&3, &mut |_| {}).unwrap().len(), 4);
        // "other" at 1 measures about 200.
        let strict = Bench {
            check: Some(|_, rows| below(150.0, rows)),
            ..TOY
        };
        let e = strict.rows(&3, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("a sample of 150 or more"), "{e}");
        // Points taking turns within groups are checked the same way.
        let grouped = Bench {
            turns_within: Some((|p: &Point<u32>| p.at.to_string(), "parameter")),
            ..strict
        };
        let e = grouped.rows(&3, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("a sample of 150 or more"), "{e}");
    }

    #[test]
    fn a_range_column_shows_the_rounds_extremes_and_keeps_their_spread() {
        let row = Row {
            point: Point {
                series: "base",
                at: 1,
            },
            samples: vec![3.0, 1.0, 2.5],
            baseline: None,
            others: Vec::new(),
        };
        let cols = Columns::new().rounds_range("range", "v_spread", "value", 1, |s: &f64| *s);
        assert_eq!(cols.table([&row]).lines().nth(2), Some("1.0..3.0"));
        let json = &cols.json([&row])[0]["v_spread"];
        assert_eq!(
            (json["median"].as_f64(), json["n"].as_u64()),
            (Some(2.5), Some(3))
        );
        assert!(
            cols.keys_help()
                .starts_with("v_spread (value over the rounds: median")
        );
    }

    #[test]
    fn a_figure_no_round_measured_is_a_dash_in_every_spread_cell() {
        let s = Spread::of(&[2.0, 1.0, 4.0]);
        assert_eq!(range_text(&s, 1, "", false), "2.0 (1.0..4.0)");
        assert_eq!(range_text(&s, 0, " us", true), "+2 us (+1..+4)");
        let row = Row {
            point: Point {
                series: "other",
                at: 1,
            },
            samples: vec![f64::NAN; 2],
            baseline: Some(vec![1.0, 2.0]),
            others: vec![("base", vec![1.0, 2.0])],
        };
        let table = toy_columns().table([&row]);
        assert!(!table.contains("NaN"), "{table}");
        // measured, ratio, spread, typical, summary, difference: all "-".
        let cells: Vec<&str> = table.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(cells, ["other", "1", "-", "-", "-", "-", "-", "-", "2"]);
    }

    #[test]
    fn the_frame_measures_in_turns_and_keeps_spreads_ratios_and_plots() {
        let rows = TOY.rows(&3, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 4);
        assert!(rows.iter().all(|r| r.rounds() == 3));
        assert!(rows[0].baseline.is_none() && rows[1].baseline.is_some());
        let back = rows[0].ratio_to("other", |s| *s).unwrap();
        assert!(back.0.min > 0.45 && back.0.max < 0.55 && back.verdict() == "slower");
        assert!(rows[0].ratio_to("none", |s| *s).is_none());
        // One value a round: each round's median is the value itself.
        let each = rows[1].per_round(std::slice::from_ref);
        assert_eq!((each.n, each.median), (3, rows[1].median(|s| *s)));
        let base = rows[1].baseline_per_round(std::slice::from_ref).unwrap();
        assert_eq!(base.median, rows[0].median(|s| *s));
        assert!(rows[0].baseline_per_round(std::slice::from_ref).is_none());
        assert_eq!(TOY.board_mode(), Err(TOY.emulator_only));
        let tabled = Bench {
            tables: Some(toy_tables),
            ..TOY
        };
        assert!(tabled.report(&3, &rows).text.starts_with("4 rows\n"));
        let all = rows[1].pooled(std::slice::from_ref);
        assert_eq!((all.n, all.median), (3, rows[1].median(|s| *s)));
        let (mean, _) = rows[1].pooled_mean(std::slice::from_ref);
        assert!(all.min <= mean && mean <= all.max);
        let q = rows[3].ratio(|s| *s).unwrap();
        assert!(q.0.min > 1.9 && q.0.max < 2.1 && q.verdict() == "faster");
        let rep = TOY.report(&3, &rows);
        assert_eq!(rep.experiment, "toy");
        assert!(
            rep.heading.starts_with("toy: a toy; 3 round(s)"),
            "{}",
            rep.heading
        );
        assert!(
            rep.heading
                .contains("; each figure the median of the rounds with")
        );
        let r1 = &rep.json["rows"][1];
        assert_eq!(r1["series"], "other");
        assert!(r1["v_min"].as_f64() <= r1["v"].as_f64());
        assert_eq!(r1["vs_base_verdict"], "faster");
        assert_eq!(r1["v_spread"]["n"], 3);
        assert_eq!(r1["v_spread"]["median"], r1["v"]);
        assert_eq!(r1["v_mid"], r1["v"]);
        assert_eq!(r1["v_sum"], r1["v"]);
        assert_eq!(r1["v_sum_spread"]["max"], r1["v_max"]);
        assert_eq!(rep.json["toy_kept"], 7);
        assert!(rep.json["rows"][0]["vs_base"].is_null());
        assert!(rep.json["rows"][0]["v_diff"].is_null());
        // "other" is base's value again at its parameter: 100 or 200 more.
        let d = r1["v_diff"].as_f64().unwrap();
        assert!((98.0..=102.0).contains(&d), "{d}");
        assert_eq!(r1["v_diff_verdict"], "larger");
        assert!(r1["v_diff_min"].as_f64() <= r1["v_diff_max"].as_f64());
        assert_eq!(rep.plots.len(), 1);
        let lines = &rep.plots[0].series;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].points.len(), 2);
        assert_eq!(lines[0].interval.len(), 2);
        assert_eq!(
            (rep.plots[0].x_label.as_str(), rep.plots[0].y_label.as_str()),
            ("at", "v")
        );
        let help = TOY.keys().replace('\n', " ");
        assert!(
            help.contains("v (value, median of the rounds; v_min, v_max: their range), vs_base"),
            "{help}"
        );
        assert!(help.contains("rounds (rounds measured)"), "{help}");
    }
}
