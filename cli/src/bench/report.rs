//! What an experiment leaves behind: its tables as text, its rows as JSON and CSV,
//! its plots as SVG, and an `index.html` that shows every table and plot of a run
//! with the machine, date and command at the top.

use std::path::{Path, PathBuf};

use dmaflow::dma::Completion;
use serde_json::Value;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::plot::{LinePlot, Series, write_svg};

/// A target an experiment checks, and what this run found.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is aimed at, e.g. `64 B packets >= 2 M/s`.
    pub what: String,
    /// The figure this run found, e.g. `3.9 M/s`.
    pub found: String,
    /// Whether the figure meets the target.
    pub met: bool,
}

impl Target {
    /// A target with the figure found and whether it is met.
    pub fn new(what: impl Into<String>, found: impl Into<String>, met: bool) -> Self {
        Target {
            what: what.into(),
            found: found.into(),
            met,
        }
    }

    /// As JSON: `{"what", "found", "met"}`.
    pub fn json(&self) -> Value {
        serde_json::json!({"what": self.what, "found": self.found, "met": self.met})
    }

    /// The targets as printed under a table, one per line.
    pub fn lines(targets: &[Target]) -> String {
        targets
            .iter()
            .map(|t| {
                format!(
                    "target {}: {} ({})\n",
                    t.what,
                    t.found,
                    if t.met { "met" } else { "missed" }
                )
            })
            .collect()
    }
}

/// Whether `x` lies in `low..=high`: a target "within" a band is checked on
/// both sides, so a suspiciously fast run fails it as a slow one does.
pub fn within(x: f64, low: f64, high: f64) -> bool {
    (low..=high).contains(&x)
}

/// What `clause` says of each completion mode it has something for, in the
/// papers' order (`poll`, `yield`, `irq`, `proxy`), joined with commas.
pub fn per_mode(clause: impl Fn(&'static str) -> Option<String>) -> String {
    let said: Vec<String> = Completion::ALL
        .iter()
        .filter_map(|c| clause(c.name()))
        .collect();
    said.join(", ")
}

/// Clauses joined into one sentence: `; ` between them, the first letter upper
/// case, a full stop at the end. No clauses: "No rows to summarise."
pub fn sentence(clauses: &[String]) -> String {
    let joined = clauses.join("; ");
    let mut chars = joined.chars();
    match chars.next() {
        None => "No rows to summarise.".into(),
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
    }
}

/// The outcome of one experiment.
#[derive(Debug, Clone)]
pub struct Report {
    /// Experiment name (`transfer`, `twoway`, ...).
    pub experiment: &'static str,
    /// One line saying what was measured and how.
    pub heading: String,
    /// One sentence saying what the run found, with the figure behind it.
    pub answer: String,
    /// The targets checked, with what was found.
    pub targets: Vec<Target>,
    /// Tables and target lines, as printed.
    pub text: String,
    /// `{"experiment": NAME, "rows": [...]}`.
    pub json: Value,
    /// Plots, each written as `NAME-<i>.svg` (or `NAME.svg` when alone).
    pub plots: Vec<LinePlot>,
}

/// A JSON value as a CSV or table cell.
fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Report {
    /// The report of `rows` under `heading`: its text is their table and
    /// its JSON `{"experiment": NAME, "rows": [...]}`, both from `columns`;
    /// no answer, targets or plots yet.
    pub fn of<R>(
        experiment: &'static str,
        heading: String,
        columns: &Columns<R>,
        rows: &[R],
    ) -> Report {
        Report {
            experiment,
            heading,
            answer: String::new(),
            targets: Vec::new(),
            text: columns.table(rows),
            json: serde_json::json!({"experiment": experiment, "rows": columns.json(rows)}),
            plots: Vec::new(),
        }
    }

    /// With `text` for the text (tables other than the rows' one), the
    /// targets' lines kept under it.
    pub fn text(mut self, text: String) -> Self {
        self.text = text + &Target::lines(&self.targets);
        self
    }

    /// With `answer` for the answer.
    pub fn answer(mut self, answer: String) -> Self {
        self.answer = answer;
        self
    }

    /// With `targets` checked, their lines under the text.
    pub fn targets(mut self, targets: Vec<Target>) -> Self {
        self.text += &Target::lines(&targets);
        self.targets.extend(targets);
        self
    }

    /// With `plots` after the plots so far.
    pub fn plots(mut self, plots: impl IntoIterator<Item = LinePlot>) -> Self {
        self.plots.extend(plots);
        self
    }

    /// With `key` in the JSON document beside the rows.
    pub fn kept(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.json[key] = value.into();
        self
    }

    /// The row keys: those of the first row in order, then any others.
    fn columns(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for r in self.json["rows"].as_array().into_iter().flatten() {
            for k in r.as_object().into_iter().flat_map(|o| o.keys()) {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        keys
    }

    /// The rows as CSV: one column per key (in the order of the first row, then
    /// any others), one line per row.
    pub fn csv(&self) -> String {
        let keys = self.columns();
        let mut w = csv::Writer::from_writer(Vec::new());
        // Writing to memory cannot fail.
        let _ = w.write_record(&keys);
        for r in self.json["rows"].as_array().into_iter().flatten() {
            let _ = w.write_record(keys.iter().map(|k| r.get(k).map(cell).unwrap_or_default()));
        }
        w.into_inner()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// File names of the plots.
    pub fn plot_files(&self) -> Vec<String> {
        match self.plots.len() {
            1 => vec![format!("{}.svg", self.experiment)],
            n => (1..=n)
                .map(|i| format!("{}-{i}.svg", self.experiment))
                .collect(),
        }
    }

    /// The run's JSON document: what the experiment put in its JSON (`rows`
    /// and the rest) with the heading, the answer and the targets checked
    /// (`{"what", "found", "met"}` each), from which `dmaflow targets`
    /// makes the Targets table.
    pub fn document(&self) -> Value {
        let mut j = self.json.clone();
        if let Some(o) = j.as_object_mut() {
            o.insert("experiment".into(), self.experiment.into());
            o.insert("heading".into(), self.heading.clone().into());
            o.insert("answer".into(), self.answer.clone().into());
            o.insert(
                "targets".into(),
                self.targets.iter().map(Target::json).collect(),
            );
        }
        j
    }

    /// Writes `NAME.json` (the [`Report::document`]), `NAME.csv` and the
    /// plots into `dir` (created if missing); returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, Error> {
        std::fs::create_dir_all(dir).map_err(Error::io(dir.display()))?;
        let doc = dir.join(format!("{}.json", self.experiment));
        let text = serde_json::to_string_pretty(&self.document()).unwrap_or_default();
        std::fs::write(&doc, text + "\n").map_err(Error::io(doc.display()))?;
        let csv = dir.join(format!("{}.csv", self.experiment));
        std::fs::write(&csv, self.csv()).map_err(Error::io(csv.display()))?;
        let mut files = vec![doc, csv];
        for (plot, name) in self.plots.iter().zip(self.plot_files()) {
            let path = dir.join(name);
            write_svg(&path, plot)?;
            files.push(path);
        }
        Ok(files)
    }
}

/// Why a run's JSON documents could not be made into a Targets table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetsError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A file is not a report's JSON document.
    #[error("{path}: not a dmaflow bench JSON document ({why})")]
    NotAReport {
        /// The path.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// Nothing to make a table of.
    #[error("no dmaflow bench JSON documents in {0}")]
    Empty(String),
}

/// Reads the reports' JSON documents at `paths`: files, or directories whose
/// `NAME.json` files for the experiments of `order` are read (a `bench
/// --out` directory). Documents come back in `order`.
pub fn read_documents(paths: &[PathBuf], order: &[&str]) -> Result<Vec<Value>, TargetsError> {
    let read = |p: &Path| -> Result<Value, TargetsError> {
        let path = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(|source| TargetsError::Read {
            path: path.clone(),
            source,
        })?;
        let why = match serde_json::from_str::<Value>(&text) {
            Ok(v) if v["experiment"].is_string() && v["targets"].is_array() => return Ok(v),
            Ok(_) => "no \"experiment\" and \"targets\" keys".into(),
            Err(e) => e.to_string(),
        };
        Err(TargetsError::NotAReport { path, why })
    };
    let mut docs = Vec::new();
    for p in paths {
        if p.is_dir() {
            for name in order {
                let f = p.join(format!("{name}.json"));
                if f.is_file() {
                    docs.push(read(&f)?);
                }
            }
        } else {
            docs.push(read(p)?);
        }
    }
    if docs.is_empty() {
        return Err(TargetsError::Empty(
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    let rank = |v: &Value| {
        let e = v["experiment"].as_str().unwrap_or("");
        order.iter().position(|&o| o == e).unwrap_or(order.len())
    };
    docs.sort_by_key(rank);
    Ok(docs)
}

/// The targets of the documents as a markdown table (`| experiment | target
/// | found | |`, a missed one in bold), as BENCHMARKS.md's Targets table.
pub fn targets_markdown(docs: &[Value]) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from("| experiment | target | found | |\n|---|---|---|---|\n");
    for d in docs {
        let e = d["experiment"].as_str().unwrap_or("?");
        for t in d["targets"].as_array().into_iter().flatten() {
            let met = t["met"].as_bool().unwrap_or(false);
            out += &format!(
                "| {e} | {} | {} | {} |\n",
                cell(t["what"].as_str().unwrap_or("")),
                cell(t["found"].as_str().unwrap_or("")),
                if met { "met" } else { "**missed**" }
            );
        }
    }
    out
}

/// Groups rows into plot lines: one per distinct `label`, in order of first
/// appearance, with points `(x, y)` sorted by x.
pub fn series_by<R>(
    rows: &[R],
    label: impl Fn(&R) -> String,
    x: impl Fn(&R) -> f64,
    y: impl Fn(&R) -> f64,
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in rows {
        let l = label(r);
        let i = match out.iter().position(|s| s.label == l) {
            Some(i) => i,
            None => {
                out.push(Series::new(l, Vec::new()));
                out.len() - 1
            }
        };
        out[i].points.push((x(r), y(r)));
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Where and when a run happened.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// CPU model, cores, kernel.
    pub machine: String,
    /// UTC date and time.
    pub date: String,
    /// The command line.
    pub command: String,
    /// The board the DMA experiments ran on (emulated fabric, memory model).
    pub board: String,
}

impl RunInfo {
    /// This machine, now, and this process's command line.
    pub fn here() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|m| m.trim().to_string())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| format!(", Linux {}", s.trim()))
            .unwrap_or_default();
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let idle = idle_at(Path::new("/sys"))
            .map(|i| format!(", {i}"))
            .unwrap_or_default();
        RunInfo {
            machine: format!("{cpu}, {cores} cores{kernel}{idle}"),
            date: utc(secs),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            board: String::new(),
        }
    }
}

/// How the machine's idle cores wait, from the sysfs tree at `sys`: the
/// cpuidle driver and governor, and for a virtual machine's `haltpoll`
/// driver whether the guest polls before it halts (`guest_halt_poll_ns`).
/// It moves every wait that lets a core go idle: with the guest's polling
/// off, a halted virtual CPU wakes only when the host runs it again (about
/// 30-40 us on the virtual machines measured in BENCHMARKS.md). `None`
/// where the machine says nothing.
fn idle_at(sys: &Path) -> Option<String> {
    let read = |p: &str| {
        std::fs::read_to_string(sys.join(p))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let cpuidle = "devices/system/cpu/cpuidle";
    let driver = read(&format!("{cpuidle}/current_driver"))?;
    let mut out = format!("cpuidle {driver}");
    if let Some(g) = read(&format!("{cpuidle}/current_governor"))
        .or_else(|| read(&format!("{cpuidle}/current_governor_ro")))
        .filter(|g| *g != driver)
    {
        out.push_str(&format!(" ({g} governor)"));
    }
    match read("module/haltpoll/parameters/guest_halt_poll_ns").map(|v| v.parse::<u64>()) {
        Some(Ok(0)) => out.push_str(", guest halt-polling off"),
        Some(Ok(ns)) => out.push_str(&format!(", guest halt-polling {} us", ns / 1000)),
        _ => {}
    }
    Some(out)
}

/// `YYYY-MM-DD HH:MM UTC` for seconds since the epoch.
pub fn utc(secs: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    // RFC 3339: `YYYY-MM-DDTHH:MM:SSZ`.
    let s = humantime::format_rfc3339_seconds(at).to_string();
    format!("{} {} UTC", &s[..10], &s[11..16])
}

/// A number as a table shows it: integers whole, others to four significant
/// digits or so.
fn shown(v: &Value) -> (String, bool) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let text = match x.abs() {
                a if a >= 1000.0 => format!("{x:.0}"),
                a if a >= 10.0 => format!("{x:.1}"),
                a if a >= 0.1 => format!("{x:.3}"),
                _ => format!("{x:.3e}"),
            };
            (text, true)
        }
        Value::Number(n) => (n.to_string(), true),
        other => (cell(other), false),
    }
}

/// Rows folded away (behind a click) from this many on.
const FOLD_ROWS: usize = 16;

/// Writes `index.html` into `dir`: the run's machine, date, command and version,
/// what each experiment measured, then per experiment its plots, its rows as a
/// table (folded when long, the CSV linked) and its tables as printed. Returns
/// its path.
pub fn write_index(
    dir: &Path,
    info: &RunInfo,
    reports: &[(Report, Conditions)],
) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir).map_err(Error::io(dir.display()))?;
    let experiments: Vec<Value> = reports
        .iter()
        .map(|(r, c)| {
            let columns = r.columns();
            let rows: Vec<Value> = r.json["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|row| {
                    Value::Array(
                        columns
                            .iter()
                            .map(|k| {
                                let (text, num) = row.get(k).map(shown).unwrap_or_default();
                                serde_json::json!({ "text": text, "num": num })
                            })
                            .collect(),
                    )
                })
                .collect();
            serde_json::json!({
                "name": r.experiment,
                "heading": r.heading,
                "conditions": [
                    ["timed", c.timed],
                    ["compared with", c.against],
                    ["the model's", c.model],
                    ["against the paper", c.paper],
                ],
                "answer": r.answer,
                "targets": r.targets.iter().map(Target::json).collect::<Value>(),
                "plots": r.plot_files(),
                "columns": columns,
                "fold": rows.len() >= FOLD_ROWS,
                "rows": rows,
                "text": r.text,
            })
        })
        .collect();
    let mut env = minijinja::Environment::new();
    let html = env
        .add_template("index.html", include_str!("index.html"))
        .and_then(|()| env.get_template("index.html"))
        .and_then(|t| {
            t.render(minijinja::context! {
                run => serde_json::json!({
                    "machine": info.machine,
                    "date": info.date,
                    "command": info.command,
                    "version": env!("CARGO_PKG_VERSION"),
                    "board": info.board,
                }),
                experiments => experiments,
            })
        })
        .map_err(|e| std::io::Error::other(e.to_string()));
    let path = dir.join("index.html");
    html.and_then(|html| std::fs::write(&path, html))
        .map_err(Error::io(path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine line names the idle driver and governor, and a virtual
    /// machine's guest halt-polling, off or its window; nothing without
    /// cpuidle.
    #[test]
    fn the_machine_line_says_how_idle_cores_wait() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        assert_eq!(idle_at(sys), None);
        let put = |p: &str, v: &str| {
            let f = sys.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, v).unwrap();
        };
        put("devices/system/cpu/cpuidle/current_driver", "intel_idle\n");
        put("devices/system/cpu/cpuidle/current_governor", "menu\n");
        assert_eq!(
            idle_at(sys).as_deref(),
            Some("cpuidle intel_idle (menu governor)")
        );
        put("devices/system/cpu/cpuidle/current_driver", "haltpoll\n");
        put("devices/system/cpu/cpuidle/current_governor", "haltpoll\n");
        put("module/haltpoll/parameters/guest_halt_poll_ns", "0\n");
        assert_eq!(
            idle_at(sys).as_deref(),
            Some("cpuidle haltpoll, guest halt-polling off")
        );
        put("module/haltpoll/parameters/guest_halt_poll_ns", "200000\n");
        assert_eq!(
            idle_at(sys).as_deref(),
            Some("cpuidle haltpoll, guest halt-polling 200 us")
        );
    }

    #[test]
    fn rows_group_into_sorted_lines() {
        let rows = [("a", 2.0, 20.0), ("b", 1.0, 5.0), ("a", 1.0, 10.0)];
        let s = series_by(&rows, |r| r.0.to_string(), |r| r.1, |r| r.2);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label, "a");
        assert_eq!(s[0].points, vec![(1.0, 10.0), (2.0, 20.0)]);
        assert_eq!(s[1].points, vec![(1.0, 5.0)]);
    }

    fn report() -> Report {
        Report {
            experiment: "demo",
            heading: "a <demo>".into(),
            answer: "demo moves 2 GB/s".into(),
            targets: vec![
                Target::new("at least 1 GB/s", "2 GB/s", true),
                Target::new("at most 1 us", "3 us", false),
            ],
            text: "a  b\n1  2\n".into(),
            json: serde_json::json!({"experiment": "demo", "rows": [
                {"bytes": 64, "path": "zero,copy", "ok": true},
                {"bytes": 128, "path": "copy", "ok": false, "extra": 1.5},
            ]}),
            plots: vec![
                LinePlot::new(
                    "t",
                    crate::bench::plot::XAxis::Bytes,
                    "x",
                    "y",
                    vec![Series::new("s", vec![(64.0, 1.0), (128.0, 2.0)])],
                )
                .log_y(),
            ],
        }
    }

    #[test]
    fn csv_has_every_key_and_quotes_commas() {
        let csv = report().csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "bytes,ok,path,extra");
        assert_eq!(lines[1], "64,true,\"zero,copy\",");
        assert_eq!(lines[2], "128,false,copy,1.5");
    }

    #[test]
    fn writes_csv_plots_and_an_index_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = report().write(dir.path()).unwrap();
        assert_eq!(files.len(), 3);
        assert!(dir.path().join("demo.svg").exists());
        let info = RunInfo {
            machine: "m".into(),
            date: utc(0),
            command: "dmaflow bench".into(),
            board: "emulated fabric".into(),
        };
        let conditions = Conditions {
            timed: "t",
            against: "a",
            model: "m",
            paper: "p",
        };
        let index = write_index(dir.path(), &info, &[(report(), conditions)]).unwrap();
        let html = std::fs::read_to_string(index).unwrap();
        for needle in [
            "1970-01-01 00:00 UTC",
            "dmaflow bench",
            "demo.svg",
            "demo.csv",
            "a &lt;demo&gt;",
            "<th>bytes</th>",
            "<td class=\"num\">64</td>",
            "<td class=\"num\">1.500</td>",
            "<td>zero,copy</td>",
            "demo moves 2 GB",
            "emulated fabric",
            "at least 1 GB&#x2f;s: 2 GB",
            "class=\"missed\"",
            env!("CARGO_PKG_VERSION"),
        ] {
            assert!(html.contains(needle), "missing {needle}");
        }
        // A short table is open; a long one folds.
        assert!(html.contains("<details open>"), "{html}");
    }

    #[test]
    fn the_targets_table_comes_from_the_written_documents() {
        let dir = tempfile::tempdir().unwrap();
        report().write(dir.path()).unwrap();
        let mut ring = report();
        ring.experiment = "ring";
        ring.targets = vec![Target::new("a | b", "1.0x", true)];
        ring.write(dir.path()).unwrap();
        let docs = read_documents(&[dir.path().to_path_buf()], &["ring"]).unwrap();
        // Only the experiments named are read from a directory.
        assert_eq!(docs.len(), 1);
        let more = read_documents(
            &[dir.path().join("demo.json"), dir.path().to_path_buf()],
            &["ring"],
        )
        .unwrap();
        assert_eq!(more[0]["experiment"], "ring");
        let md = targets_markdown(&more);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "| experiment | target | found | |");
        assert_eq!(lines[2], "| ring | a \\| b | 1.0x | met |");
        assert_eq!(lines[3], "| demo | at least 1 GB/s | 2 GB/s | met |");
        assert_eq!(lines[4], "| demo | at most 1 us | 3 us | **missed** |");
        assert!(matches!(
            read_documents(&[dir.path().join("demo.csv")], &[]),
            Err(TargetsError::NotAReport { .. })
        ));
        assert!(matches!(
            read_documents(&[dir.path().join("nothing")], &[]),
            Err(TargetsError::Read { .. })
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_documents(&[empty.path().to_path_buf()], &["ring"]),
            Err(TargetsError::Empty(_))
        ));
    }

    #[test]
    fn within_is_checked_on_both_sides() {
        assert!(within(1.0, 0.9, 1.1));
        assert!(!within(0.8, 0.9, 1.1));
        assert!(!within(1.3, 0.9, 1.1));
        assert!(!within(f64::NAN, 0.9, 1.1));
    }

    #[test]
    fn clauses_make_one_sentence() {
        assert_eq!(
            sentence(&["a is 1".into(), "b is 2".into()]),
            "A is 1; b is 2."
        );
        assert_eq!(sentence(&[]), "No rows to summarise.");
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_795_000_000), "2026-11-18 11:06 UTC");
    }
}
