//! What `dmaflow bench` leaves behind, pinned: every experiment's smallest run
//! (`bench all --tiny`) gives the JSON documents, row keys, report files and
//! Targets table listed in `pinned/bench_tiny.txt`. A change to any key or file
//! name shows here as a difference against that list.
//!
//! Peers that are not on every machine (GNU Radio, FutureSDR, a GPU) add keys
//! where they are present: the list marks those with `?` (may be absent), and a
//! document that ran a peer missing here is compared only in what the list pins.
//!
//! `DMAFLOW_PIN_WRITE=1` writes the list from this machine's run instead (the
//! `?` lines are then to be added back by hand).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the whole tiny run may take before the test fails.
const LIMIT: Duration = Duration::from_secs(300);

const PINNED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pinned/bench_tiny.txt");

/// Runs the tool with `args`, killed after [`LIMIT`]; its stdout.
fn run_within(args: &[&str], dir: &Path) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(args)
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let stderr = child.stderr.take().unwrap();
    let errors = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dmaflow {args:?} still running after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().unwrap();
    let err = errors.join().unwrap();
    assert!(status.success(), "dmaflow {args:?}: {err}");
    out
}

/// Every key path of `v`: objects' keys joined with `.`, arrays as `[]`.
fn paths(prefix: &str, v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(&p, x, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                paths(&format!("{prefix}[]"), x, out);
            }
        }
        _ => {}
    }
}

/// The pinned description of one run: per experiment its key paths, then the
/// files written and the Targets table's experiments and targets.
fn describe(docs: &[Value], files: &[String], targets: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut d: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for doc in docs {
        let name = doc["experiment"].as_str().unwrap().to_string();
        let mut keys = BTreeSet::new();
        paths("", doc, &mut keys);
        d.entry(format!("keys {name}")).or_default().extend(keys);
    }
    d.insert("files".into(), files.iter().cloned().collect());
    // The table's header and, per line, the experiment and what is aimed at
    // (the figure found differs run to run).
    let rows = targets
        .lines()
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            cells[..cells.len().min(2)].join(" | ")
        })
        .collect();
    d.insert("targets".into(), rows);
    d
}

fn write(d: &BTreeMap<String, BTreeSet<String>>) -> String {
    let mut s = String::new();
    for (section, lines) in d {
        s += &format!("[{section}]\n");
        for l in lines {
            s += &format!("{l}\n");
        }
    }
    s
}

fn read(text: &str) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let mut d: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    let mut section = String::new();
    for l in text.lines() {
        if let Some(s) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
            d.entry(section.clone()).or_default();
        } else if let Some(opt) = l.strip_prefix("? ") {
            d.get_mut(&section).unwrap().1.insert(opt.to_string());
        } else {
            d.get_mut(&section).unwrap().0.insert(l.to_string());
        }
    }
    d
}

/// Whether the optional line `m` allows `l`: the same, or `m` ends in `*`
/// and `l` starts with what comes before it.
fn allows(m: &str, l: &str) -> bool {
    m.strip_suffix('*').map_or(m == l, |p| l.starts_with(p))
}

#[test]
fn every_experiments_keys_files_and_targets_are_as_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_within(&["bench", "all", "--tiny", "--json", "--out"], dir.path());
    let docs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let targets = run_within(&["targets"], dir.path());
    // Every file the run wrote holds what stdout printed.
    for doc in &docs {
        let name = doc["experiment"].as_str().unwrap();
        let written: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(
            written.as_object().map(|o| o.len()),
            doc.as_object().map(|o| o.len())
        );
        let csv = std::fs::read_to_string(dir.path().join(format!("{name}.csv"))).unwrap();
        let rows = doc["rows"].as_array().map_or(0, Vec::len);
        // A header line, then one line per row (a header of no keys without rows).
        assert_eq!(csv.lines().count(), rows + 1, "{name}.csv");
    }
    let found = describe(&docs, &files, &targets);
    if std::env::var_os("DMAFLOW_PIN_WRITE").is_some() {
        std::fs::write(PINNED, write(&found)).unwrap();
        return;
    }
    let pinned = read(&std::fs::read_to_string(PINNED).unwrap());
    // Every pinned experiment still runs; one added since is not pinned yet
    // (its keys, files and targets are its own to add to the list).
    let new: Vec<String> = found
        .keys()
        .filter_map(|k| k.strip_prefix("keys "))
        .filter(|e| !pinned.contains_key(&format!("keys {e}")))
        .map(str::to_string)
        .collect();
    let theirs = |l: &str| {
        new.iter().any(|e| {
            l.starts_with(&format!("{e}."))
                || l.starts_with(&format!("{e}-"))
                || l.starts_with(&format!("| {e} |"))
        })
    };
    let found: BTreeMap<String, BTreeSet<String>> = found
        .into_iter()
        .filter(|(k, _)| !new.iter().any(|e| *k == format!("keys {e}")))
        .map(|(k, v)| (k, v.into_iter().filter(|l| !theirs(l)).collect()))
        .collect();
    let sections: Vec<&String> = found.keys().collect();
    assert_eq!(
        sections,
        pinned.keys().collect::<Vec<_>>(),
        "experiments run"
    );
    for (section, lines) in &found {
        let (must, may) = &pinned[section];
        let missing: Vec<&String> = must.difference(lines).collect();
        let extra: Vec<&String> = lines
            .iter()
            .filter(|l| !must.contains(*l) && !may.iter().any(|m| allows(m, l)))
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "[{section}] missing {missing:?}, not pinned {extra:?}"
        );
    }
}
