//! `dmaflow bench python`: what the Python layer costs. Two-way transfers
//! through `Engine.two_way` called from Python against the same transfers
//! done by the Rust API in a Rust loop, in one Python process, on the same
//! emulated loopback board and buffers (`dmaflow.bench.two_ways` times the
//! calls; the frame runs the rounds, the points in turns, and keeps the
//! statistics). Per size: the time per transfer of each, Python's minus
//! Rust's round by round, and the calling thread's CPU per transfer.
//!
//! dmaflow's Python package lives in the virtual environment the README's
//! test command makes (`target/venv`, `pip install ./python`); without it
//! every row is there, not measured, saying why.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, PoisonError, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Point, Row, difference_verdict};
use super::harness::{Setup, bytes_label};
use super::report::Target;

/// `dmaflow bench python`.
pub static EXPERIMENT: Bench<Config, usize, Sample> = Bench {
    name: "python",
    question: "What a two-way transfer costs through dmaflow's Python layer against the Rust \
               API, in the same process.",
    conditions: Conditions {
        timed: "each two-way transfer from the call to its return (Python's perf_counter \
                around Engine.two_way; Instant around the Rust API's call in the Rust loop), \
                the round's mean per transfer; the calling thread's CPU time",
        against: "the Rust API's two_way_into in a Rust loop, in the same Python process, \
                  on the same board and buffers",
        model: "the emulated loopback board's unlimited clock: the DMA takes no modelled \
                time, so the difference is the Python layer's own cost",
        paper: "none: dmaflow's own Python layer",
    },
    emulator_only: "it measures the Python layer on the emulated loopback board",
    baseline: Some("rust"),
    heading: |c| {
        format!(
            "Engine.two_way from Python vs the Rust API in a loop, one Python process, \
             completion {}, {} transfers per point and round at most",
            c.completion, c.count
        )
    },
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// What to measure, and the Python process measuring it (started on the
/// first measurement, stopped when the configuration is dropped).
pub struct Config {
    /// Transfer sizes, bytes each way.
    pub sizes: Vec<usize>,
    /// Rounds: every point once per round, in turns.
    pub rounds: usize,
    /// Most transfers per point and round (fewer for large sizes: 64 MiB
    /// a point over the rounds, at least 20).
    pub count: usize,
    /// How a transfer's end is waited for: `poll`, `yield` or `irq`.
    pub completion: &'static str,
    /// The Python with dmaflow's package installed.
    pub python: PathBuf,
    /// The longest one answer of the Python process may take.
    pub limit: Duration,
    caller: Mutex<Option<Result<Caller, String>>>,
}

/// The virtual environment the README's test command installs dmaflow's
/// Python package into.
fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/venv/bin/python")
}

impl Config {
    /// The size `setup` asks for: the recorded run (64 B to 1 MiB, 9
    /// rounds), a shorter one, or the smallest (every row and key).
    pub fn at(setup: &Setup) -> Self {
        let (rounds, count) = setup.tier.pick((9, 400), (3, 50), (1, 5));
        let sizes = match setup.tier {
            super::harness::Tier::Tiny => vec![64, 65536],
            _ => (0..8).map(|k| 64usize << (2 * k)).collect(),
        };
        Config::with(sizes, rounds, count, venv_python())
    }

    /// A configuration with its own sizes, rounds, transfers and Python.
    pub fn with(sizes: Vec<usize>, rounds: usize, count: usize, python: PathBuf) -> Self {
        Config {
            sizes,
            rounds,
            count,
            completion: "poll",
            python,
            limit: Duration::from_secs(120),
            caller: Mutex::new(None),
        }
    }

    /// Transfers per round at `bytes`.
    fn transfers(&self, bytes: usize) -> usize {
        let share = (64 << 20) / bytes.max(1) / self.rounds.max(1);
        share.clamp(20.min(self.count), self.count.max(1))
    }
}

/// The Python process: its input, and its output's lines as they come.
struct Caller {
    child: Child,
    input: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl Drop for Caller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The peer program (`cli/peers/python_calls_client.py`).
const CLIENT: &str = include_str!("../../peers/python_calls_client.py");

impl Caller {
    /// Starts the peer with `python`; `Err` says why it is not there.
    fn start(python: &Path, limit: Duration) -> Result<Caller, String> {
        if !python.exists() {
            return Err(format!(
                "dmaflow's Python package is not installed here ({} missing: the README's test \
                 command makes target/venv and installs ./python into it)",
                python.display()
            ));
        }
        let mut child = Command::new(python)
            .args(["-c", CLIENT])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", python.display()))?;
        let (input, output) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err("the Python process has no pipes".into()),
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut caller = Caller {
            child,
            input,
            lines,
        };
        let hello = caller.answer(limit)?;
        match hello["error"].as_str() {
            Some(why) => Err(why.to_string()),
            None => Ok(caller),
        }
    }

    /// The next line the peer prints, as JSON, within `limit`.
    fn answer(&mut self, limit: Duration) -> Result<Value, String> {
        let line = self.lines.recv_timeout(limit).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => {
                format!("the Python process gave no answer in {limit:?}")
            }
            mpsc::RecvTimeoutError::Disconnected => "the Python process ended".to_string(),
        })?;
        serde_json::from_str(&line).map_err(|e| format!("the Python process said {line:?}: {e}"))
    }

    /// One request, and its answer.
    fn ask(&mut self, request: &Value, limit: Duration) -> Result<Value, String> {
        writeln!(self.input, "{request}")
            .and_then(|()| self.input.flush())
            .map_err(|e| format!("the Python process: {e}"))?;
        let v = self.answer(limit)?;
        match v["error"].as_str() {
            Some(why) => Err(why.to_string()),
            None => Ok(v),
        }
    }
}

/// What one measurement gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Wall time per two-way transfer, the round's mean, microseconds
    /// (`NaN` when not measured).
    pub us: f64,
    /// The calling thread's CPU per transfer, microseconds.
    pub cpu_us: f64,
    /// Transfers in the round.
    pub transfers: usize,
    /// Whether what came back equals what was sent (`None`: not measured).
    pub equal: Option<bool>,
    /// Why it was not measured.
    pub note: Option<String>,
}

impl Sample {
    /// Not measured, for this reason.
    fn unmeasured(why: String, transfers: usize) -> Sample {
        Sample {
            us: f64::NAN,
            cpu_us: f64::NAN,
            transfers,
            equal: None,
            note: Some(why),
        }
    }
}

/// Both ways at every size, Rust first.
fn points(cfg: &Config) -> Vec<Point<usize>> {
    let mut v = Vec::new();
    for &at in &cfg.sizes {
        for series in ["rust", "python"] {
            v.push(Point { series, at });
        }
    }
    v
}

/// One round of one point's transfers in the Python process.
fn measure(cfg: &Config, p: &Point<usize>) -> Result<Sample, Error> {
    let transfers = cfg.transfers(p.at);
    let mut held = cfg.caller.lock().unwrap_or_else(PoisonError::into_inner);
    let caller = held.get_or_insert_with(|| Caller::start(&cfg.python, cfg.limit));
    let answer = match caller {
        Ok(c) => c.ask(
            &json!({
                "through": p.series,
                "bytes": p.at,
                "count": transfers,
                "completion": cfg.completion,
            }),
            cfg.limit,
        ),
        Err(why) => return Ok(Sample::unmeasured(why.clone(), transfers)),
    };
    let v = match answer {
        Ok(v) => v,
        Err(why) => {
            // The process is left behind: the remaining points say why.
            *held = Some(Err(why.clone()));
            return Ok(Sample::unmeasured(why, transfers));
        }
    };
    let times: Vec<f64> = v["times"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let n = times.len().max(1) as f64;
    Ok(Sample {
        us: times.iter().sum::<f64>() / n * 1e6,
        cpu_us: v["cpu"].as_f64().unwrap_or(f64::NAN) / n * 1e6,
        transfers: times.len(),
        equal: v["equal"].as_bool(),
        note: None,
    })
}

/// The rows' columns.
fn columns() -> Columns<'static, Row<usize, Sample>> {
    Columns::new()
        .series(
            "through",
            "through",
            "python (Engine.two_way called from Python) or rust (the Rust API in a Rust loop)",
        )
        .bytes("bytes", "bytes", |r: &Row<usize, Sample>| r.point.at)
        .doc("bytes each way per transfer")
        .measured(
            "us/transfer",
            "us",
            "wall time per two-way transfer, microseconds (the round's mean)",
            (1.0, 2),
            |s| s.us,
        )
        .difference(
            "minus rust, us",
            "diff_us",
            "us minus rust's in the same round",
            (1.0, 2),
            |s| s.us,
        )
        .measured(
            "CPU us/transfer",
            "cpu_us",
            "the calling thread's CPU per transfer, microseconds",
            (1.0, 2),
            |s| s.cpu_us,
        )
        .plain("transfers/round", "transfers", |r| {
            r.samples.first().map_or(0, |s| s.transfers)
        })
        .doc("transfers per round")
        .shown_as(
            "data",
            "verified",
            |r| {
                let seen: Option<Vec<bool>> = r.samples.iter().map(|s| s.equal).collect();
                seen.map(|v| v.iter().all(|&e| e))
            },
            |v| v.map_or("-".into(), |v| if v { "equal" } else { "DIFFERENT" }.into()),
        )
        .doc("what came back equals what was sent in every round (null: not measured)")
        .rounds()
        .kept("note", |r| r.samples.iter().find_map(|s| s.note.clone()))
        .doc("why it was not measured (null when it was)")
}

/// Python's difference at the smallest size, and from 64 KiB up.
fn findings(_: &Config, rows: &[Row<usize, Sample>]) -> Findings {
    let mut found = Findings::default();
    // Each reason once: for every point, or for the points it stopped.
    let why = |r: &Row<usize, Sample>| r.samples.iter().find_map(|s| s.note.clone());
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for r in rows {
        let Some(why) = why(r) else { continue };
        let point = format!("{} at {}", r.point.series, bytes_label(r.point.at));
        match reasons.iter_mut().find(|(w, _)| *w == why) {
            Some((_, points)) => points.push(point),
            None => reasons.push((why, vec![point])),
        }
    }
    for (why, points) in reasons {
        let which = match points.len() == rows.len() {
            true => "every point".to_string(),
            false => points.join(", "),
        };
        found.notes += &format!("not measured ({which}): {why}\n");
    }
    let python = rows.iter().filter(|r| r.point.series == "python");
    let diffs: Vec<_> = (python.filter_map(|r| Some((r.point.at, r.difference(|s| s.us)?))))
        .filter(|(_, d)| d.median.is_finite())
        .collect();
    if diffs.is_empty() {
        found
            .clauses
            .push("not measured: dmaflow's Python package did not run here (see the notes)".into());
        return found;
    }
    if let Some((_, d)) = diffs.iter().find(|(at, _)| *at == 64) {
        found.clauses.push(format!(
            "at 64 B Python adds {:+.2} us per transfer (rounds {:+.2}..{:+.2})",
            d.median, d.min, d.max
        ));
        found.targets.push(Target::new(
            "Python within 2 us of Rust per transfer at 64 B",
            format!("{:+.2} us{}", d.median, d.straddle_note(2.0)),
            d.median < 2.0,
        ));
    }
    let large: Vec<_> = diffs.iter().filter(|(at, _)| *at >= 65536).collect();
    if !large.is_empty() {
        let text = large
            .iter()
            .map(|(at, d)| {
                format!(
                    "{} {:+.2} us ({})",
                    bytes_label(*at),
                    d.median,
                    difference_verdict(d)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        found.clauses.push(format!("from 64 KiB up {text}"));
        found.targets.push(Target::new(
            "no measurable difference from 64 KiB up",
            text,
            large.iter().all(|(_, d)| {
                difference_verdict(d) == "no measurable difference" || d.median.abs() < 2.0
            }),
        ));
    }
    let checked: Vec<bool> = rows
        .iter()
        .flat_map(|r| &r.samples)
        .filter_map(|s| s.equal)
        .collect();
    found.targets.push(Target::new(
        "every transfer's data as sent",
        format!("{} rounds checked", checked.len()),
        checked.iter().all(|&e| e),
    ));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without dmaflow's Python package every row is there, not measured,
    /// saying why, with every key.
    #[test]
    fn without_the_python_package_every_row_says_why() {
        let cfg = Config::with(vec![64, 65536], 1, 5, PathBuf::from("/nonexistent/python"));
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 4);
        let rep = EXPERIMENT.report(&cfg, &rows);
        let r1 = &rep.json["rows"][1];
        assert_eq!(r1["through"], "python");
        assert!(
            r1["note"].as_str().unwrap().contains("not installed"),
            "{r1}"
        );
        for key in [
            "us",
            "us_min",
            "diff_us",
            "diff_us_verdict",
            "cpu_us",
            "verified",
        ] {
            assert!(r1.get(key).is_some(), "{key}");
        }
        assert!(
            rep.answer.to_lowercase().contains("not measured"),
            "{}",
            rep.answer
        );
        assert!(rep.targets.is_empty());
        // No "NaN" cells: "-" for what was not measured, the reason once.
        assert!(!rep.text.contains("NaN"), "{}", rep.text);
        assert_eq!(rep.text.matches("not installed").count(), 1, "{}", rep.text);
        assert!(
            rep.text.contains("not measured (every point)"),
            "{}",
            rep.text
        );
    }

    /// Large sizes take fewer transfers a round, never fewer than 20 (or
    /// the count, when smaller).
    #[test]
    fn transfers_per_round_shrink_with_the_size() {
        let cfg = Config::with(vec![], 8, 400, PathBuf::new());
        assert_eq!(cfg.transfers(64), 400);
        assert_eq!(cfg.transfers(1 << 20), 20);
        assert_eq!(
            Config::with(vec![], 1, 5, PathBuf::new()).transfers(1 << 20),
            5
        );
    }
}
