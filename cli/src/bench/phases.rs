//! The frame for an experiment measured in phases, each phase its own kind
//! of point and its own table (e.g. a reference measured first, then points
//! set against it): [`phase`] measures one phase's points in turns, each
//! for its own number of rounds, with what every round needs once before
//! its points; a later phase reads an earlier one's rows (its figures feed
//! the next phase as arguments do); [`Sections`] puts every phase's table
//! in one report, each table with its own columns (its own JSON layout),
//! their JSON rows in one list.
//!
//! ```text
//! let (refs, rows) = phase("NAME", &points, |p| rounds, progress,
//!     |round| measure_reference(round), |p, round| measure(p, round))?;
//! let next = phase("NAME", &more, |_| rounds, progress, |_| Ok(()),
//!     |p, round| measure_against(p, round, &rows))?;
//! let s = Sections::default().table(&columns, &rows).table_after(&others, &next);
//! ```

use std::fmt::Display;

use serde_json::Value;

use super::columns::Columns;
use super::error::Error;
use super::frame::{Point, Row};

/// Measures one phase's `points` in turns, as the frame does
/// ([`super::spread::in_turns`]: every point once a round, the order
/// reversed every other round), each point for its own number of rounds
/// (`rounds`): a point with fewer rounds than another sits out the rounds
/// after its last, the others keeping their turns. Before every round's
/// points, `each_round` measures what the round needs once (e.g. a ceiling
/// the points are set against, in the same rounds); its results come back
/// in round order, beside a row a point (in the points' order, its samples
/// in round order, beside the other series' at the same parameter). The
/// phase runs as many rounds as its point with the most; the first round
/// takes the points in their stated order.
#[allow(clippy::type_complexity)]
pub fn phase<P, S, R>(
    name: &str,
    points: &[Point<P>],
    rounds: impl Fn(&Point<P>) -> usize,
    progress: &mut dyn FnMut(&str),
    mut each_round: impl FnMut(usize) -> Result<R, Error>,
    mut measure: impl FnMut(&Point<P>, usize) -> Result<S, Error>,
) -> Result<(Vec<R>, Vec<Row<P, S>>), Error>
where
    P: Clone + Display + PartialEq,
    S: Clone,
{
    let counts: Vec<usize> = points.iter().map(&rounds).collect();
    let most = counts.iter().copied().max().unwrap_or(0);
    let mut per_round = Vec::with_capacity(most);
    let mut samples: Vec<Vec<S>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    for round in 0..most {
        per_round.push(each_round(round)?);
        let mut order: Vec<usize> = (0..points.len()).filter(|&i| counts[i] > round).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let p = &points[i];
            progress(&format!(
                "{name}: {} at {}, round {} of {}",
                p.series,
                p.at,
                round + 1,
                counts[i]
            ));
            samples[i].push(measure(p, round)?);
        }
    }
    let rows = points
        .iter()
        .zip(&samples)
        .map(|(p, s)| Row {
            point: p.clone(),
            samples: s.clone(),
            baseline: None,
            others: points
                .iter()
                .zip(&samples)
                .filter(|(q, _)| q.series != p.series && q.at == p.at)
                .map(|(q, s)| (q.series, s.clone()))
                .collect(),
        })
        .collect();
    Ok((per_round, rows))
}

impl<P, S> Row<P, S> {
    /// The row of `point` from its `samples` in round order, compared with
    /// no other (e.g. a figure [`phase`]'s `each_round` measured, a row a
    /// figure).
    pub fn alone(point: Point<P>, samples: Vec<S>) -> Self {
        Row {
            point,
            samples,
            baseline: None,
            others: Vec::new(),
        }
    }
}

/// A report's text and JSON rows made of several tables, each with its own
/// columns (its own JSON layout): the rows of every table in one JSON list,
/// in the tables' order, each table's text under the one before.
#[derive(Debug, Clone, Default)]
pub struct Sections {
    /// The tables' text (and any lines between them).
    pub text: String,
    /// Every table's JSON rows.
    pub rows: Vec<Value>,
}

impl Sections {
    /// With `line` added to the text.
    pub fn line(mut self, line: impl Into<String>) -> Self {
        self.text += &line.into();
        self.text.push('\n');
        self
    }

    /// With `rows`' JSON (of `columns`' kept keys) and no table: rows whose
    /// text the lines before give.
    pub fn json<R>(mut self, columns: &Columns<R>, rows: &[R]) -> Self {
        self.rows.extend(columns.json(rows));
        self
    }

    /// With `rows` as a table of `columns` (its header even without rows)
    /// and their JSON.
    pub fn table<R>(mut self, columns: &Columns<R>, rows: &[R]) -> Self {
        self.text += &columns.table(rows);
        self.json(columns, rows)
    }

    /// With `rows` as a table of `columns` after a blank line, where there
    /// are any, and their JSON.
    pub fn table_after<R>(mut self, columns: &Columns<R>, rows: &[R]) -> Self {
        if !rows.is_empty() {
            self.text += &format!("\n{}", columns.table(rows));
        }
        self.json(columns, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three points, the last with one round of three: what each measured
    /// in which round and turn.
    #[test]
    fn points_keep_their_own_rounds_and_the_round_hook_runs_first() {
        let points: Vec<Point<u32>> = [("a", 1), ("b", 1), ("c", 2)]
            .map(|(series, at)| Point { series, at })
            .to_vec();
        let mut turn = 0;
        let mut log = Vec::new();
        let (refs, rows) = phase(
            "toy",
            &points,
            |p| if p.series == "c" { 1 } else { 3 },
            &mut |_| {},
            |round| Ok(round * 100),
            |p, round| {
                turn += 1;
                log.push(format!("{}{round}", p.series));
                Ok((round, turn))
            },
        )
        .unwrap();
        assert_eq!(refs, [0, 100, 200]);
        // Round 0 in order, round 1 reversed without c, round 2 in order.
        assert_eq!(log, ["a0", "b0", "c0", "b1", "a1", "a2", "b2"]);
        assert_eq!(rows[0].samples, [(0, 1), (1, 5), (2, 6)]);
        assert_eq!(rows[2].samples, [(0, 3)]);
        assert_eq!(rows[0].others.len(), 1);
        assert!(rows[2].others.is_empty() && rows[2].baseline.is_none());
        let alone = Row::alone(points[2].clone(), vec![3.0, 1.0, 2.0]);
        assert_eq!(alone.spread(|x| *x).median, 2.0);
        // A measurement's error ends the phase.
        let failed = phase(
            "toy",
            &points,
            |_| 2,
            &mut |_| {},
            |_| Ok(()),
            |p, _| match p.series {
                "b" => Err(Error::peer("toy")("b failed")),
                _ => Ok(1),
            },
        );
        assert!(failed.is_err());
    }

    #[test]
    fn sections_keep_each_tables_layout_and_skip_empty_later_tables() {
        let nums = Columns::new().plain("n", "n", |r: &u32| *r);
        let words = Columns::new().plain("word", "word", |r: &&str| *r);
        let s = Sections::default()
            .line("first")
            .table(&nums, &[1, 2])
            .table_after(&words, &[])
            .table_after(&words, &["x"]);
        assert!(s.text.starts_with("first\n"), "{}", s.text);
        assert_eq!(s.text.matches("word").count(), 1, "{}", s.text);
        assert!(s.text.contains("\n\nword"), "{}", s.text);
        assert_eq!(s.rows.len(), 3);
        assert_eq!(
            (s.rows[1]["n"].clone(), s.rows[2]["word"].clone()),
            (2.into(), "x".into())
        );
    }
}
