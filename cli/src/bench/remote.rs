//! PYNQ.remote measured (`dmaflow bench remote`): PYNQ 4.0's own client
//! (from PyPI, unmodified) drives `dmaflow serve` on the emulated board over
//! gRPC: an MMIO read round trip, and a loopback through PYNQ's own DMA
//! driver (`pynq.lib.dma`, direct mode: `transfer` and `wait` on both
//! channels, the buffers' `flush` and `invalidate` included); beside the same
//! MMIO read and DMA cell through `dmaflow.pynq` in the same Python process,
//! and PYNQ's MMIO read against a minimal PYNQ.remote server written in
//! Python with grpcio (PYNQ's generated servicers answering from a dict, in
//! the client's process: what any server's MMIO round trip costs at least
//! through Python's gRPC client).
//! The client takes the frame's turns itself (every point once a round, the
//! order reversed every other round), in one run; the frame summarises each
//! point's rounds: wall and host CPU per operation (the client process's,
//! and for the remote point the server process's too).
//!
//! PYNQ 4.0 lives in a virtual environment of its own
//! (`scripts/pynq-remote-venv.sh` makes `target/pynq-venv`; `pip install
//! ./python` into it adds `dmaflow.pynq`). A point whose Python side is not
//! installed is reported as not measured, saying why; the run goes on.

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Point, Row};
use super::harness::{Setup, Tier, bytes_label};
use super::peers::{ScratchDir, output_within};
use super::report::Target;

/// PYNQ's client connects to this port of the address in
/// `PYNQ_REMOTE_DEVICES` (always: the address picks the server).
const PYNQ_PORT: u16 = 7967;
/// The loopback design's AXI DMA, whose MM2S DMASR the MMIO point reads.
const DMA_BASE: u64 = 0x4040_0000;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Rounds: every point once per round, in turns.
    pub rounds: usize,
    /// MMIO reads per point and round.
    pub mmio_reads: usize,
    /// Bytes of the loopback.
    pub bytes: usize,
    /// Loopbacks per point and round.
    pub loopbacks: usize,
    /// The Python with PYNQ 4.0 (and `dmaflow.pynq`) installed.
    pub python: PathBuf,
    /// The longest the client's whole run may take.
    pub limit: Duration,
}

/// The virtual environment the project's scripts install PYNQ 4.0 into.
fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pynq-venv/bin/python")
}

impl Config {
    /// The size `setup` asks for: the recorded run (4 MiB loopbacks, 7
    /// rounds), a shorter one, or the smallest (every row and key).
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            rounds: 7,
            mmio_reads: 200,
            bytes: 4 << 20,
            loopbacks: 3,
            python: venv_python(),
            limit: Duration::from_secs(600),
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                rounds: 3,
                mmio_reads: 100,
                loopbacks: 2,
                ..full
            },
            Tier::Tiny => Config {
                rounds: 1,
                mmio_reads: 10,
                bytes: 64 << 10,
                loopbacks: 1,
                limit: Duration::from_secs(120),
                ..full
            },
        }
    }
}

/// The operations measured.
const OPS: [&str; 2] = ["mmio_read", "loopback"];
/// The points: PYNQ 4.0 against `dmaflow serve`, `dmaflow.pynq` in process,
/// and PYNQ 4.0 against the minimal Python server.
const POINTS: [&str; 3] = [
    "pynq-remote/dmaflow-serve",
    "dmaflow.pynq-in-process",
    "pynq-remote/python-minimal",
];
/// Each operation and the points it runs through (the minimal server
/// answers MMIO reads only), with the client's name of the point's side.
const CELLS: [(&str, &str, &str); 5] = [
    (OPS[0], POINTS[0], "remote"),
    (OPS[0], POINTS[2], "minimal"),
    (OPS[0], POINTS[1], "local"),
    (OPS[1], POINTS[0], "remote"),
    (OPS[1], POINTS[1], "local"),
];

/// The client's program (`cli/peers/pynq_remote_client.py`): builds the points that are
/// installed, measures them in turns, and prints one JSON line of samples.
const CLIENT: &str = include_str!("../../peers/pynq_remote_client.py");

/// A `dmaflow serve` of this tool on a free loopback address, stopped
/// when dropped, and another free one for the minimal Python server.
struct Served {
    child: Child,
    addr: SocketAddr,
    minimal: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `dmaflow serve` (this executable) on the first loopback address
/// whose port 7967 is free; `Err` says why none started.
fn serve() -> Result<Served, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this executable: {e}"))?;
    let pid = std::process::id();
    let mut last = String::from("no two loopback addresses with port 7967 free");
    let free = (0..64u32)
        .map(|k| {
            let ip = Ipv4Addr::new(
                127,
                100 + (pid % 150) as u8,
                ((pid >> 8) % 250) as u8 + 1,
                2 + k as u8,
            );
            SocketAddr::from((ip, PYNQ_PORT))
        })
        .filter(|&a| TcpListener::bind(a).is_ok());
    let free: Vec<SocketAddr> = free.take(8).collect();
    for pair in free.chunks_exact(2) {
        let (addr, minimal) = (pair[0], pair[1]);
        let mut child = Command::new(&exe)
            .args(["serve", "--listen", &addr.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        // The banner's first line says it listens; the rest is drained so
        // that the server never blocks on its output.
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
            for _ in lines {}
        });
        let first = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        if first.contains("PYNQ.remote on") {
            return Ok(Served {
                child,
                addr,
                minimal,
            });
        }
        let _ = child.kill();
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        last = format!(
            "dmaflow serve on {addr}: {}{}",
            first,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Err(last)
}

/// What the client measured of one point in one round, with what it found
/// of the point after the rounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Wall time per operation, microseconds (`NaN`: not measured).
    pub us: f64,
    /// Host CPU per operation (client, and server for the remote point),
    /// microseconds.
    pub cpu_us: f64,
    /// Of that, the server process's (`NaN` but for the remote point).
    pub server_cpu_us: f64,
    /// Bytes per operation (a register; the loopback's buffer).
    pub bytes: usize,
    /// Operations per round.
    pub ops: usize,
    /// Whether the loopback's data came back equal (checked after the
    /// rounds); `None` for the MMIO reads and where not measured.
    pub verified: Option<bool>,
    /// Why the point was not measured (empty when it was).
    pub note: String,
}

/// Every operation through every point it runs through (the minimal
/// server answers MMIO reads only).
fn points(_: &Config) -> Vec<Point<&'static str>> {
    let each = |&(what, series, _): &(&'static str, &'static str, &str)| Point { series, at: what };
    CELLS.iter().map(each).collect()
}

/// The side the client names a point by.
fn side(p: &Point<&'static str>) -> &'static str {
    let cell = CELLS.iter().find(|(w, s, _)| *w == p.at && *s == p.series);
    cell.map_or("", |c| c.2)
}

/// The bytes and operations of `what` per round.
fn sized(cfg: &Config, what: &str) -> (usize, usize) {
    if what == OPS[0] {
        (4, cfg.mmio_reads)
    } else {
        (cfg.bytes, cfg.loopbacks)
    }
}

/// Every point's one sample saying why it was not measured.
fn unmeasured(cfg: &Config, points: &[Point<&'static str>], why: &str) -> Vec<Vec<Sample>> {
    let one = |p: &Point<&'static str>| {
        let (bytes, ops) = sized(cfg, p.at);
        vec![Sample {
            us: f64::NAN,
            cpu_us: f64::NAN,
            server_cpu_us: f64::NAN,
            bytes,
            ops,
            verified: None,
            note: why.to_string(),
        }]
    };
    points.iter().map(one).collect()
}

/// Runs the client once: it measures every point in turns. A Python side
/// that is not installed, a server that does not start, or a client that
/// fails is said in the points' notes; only this machine's own failures (a
/// scratch directory) are errors.
fn sampled(
    cfg: &Config,
    points: &[Point<&'static str>],
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<Vec<Sample>>, Error> {
    if !cfg.python.exists() {
        let why = format!(
            "PYNQ 4.0 is not installed here ({} missing: scripts/pynq-remote-venv.sh \
             installs it, `pip install ./python` into it adds dmaflow.pynq)",
            cfg.python.display()
        );
        return Ok(unmeasured(cfg, points, &why));
    }
    let scratch = ScratchDir::new("dmaflow-bench-remote")?;
    let exported = dmaflow_remote::hwh::export("loopback", scratch.path());
    let exported = exported.map_err(|e| std::io::Error::other(e.to_string()));
    exported.map_err(Error::io(scratch.path().display()))?;
    progress("remote: starting dmaflow serve");
    let served = match serve() {
        Ok(s) => s,
        Err(why) => return Ok(unmeasured(cfg, points, &why)),
    };
    progress(&format!(
        "remote: PYNQ 4.0 against dmaflow serve on {} and a minimal Python server on {}, \
         dmaflow.pynq in process",
        served.addr, served.minimal
    ));
    let setup = json!({
        "bit": scratch.path().join("loopback.bit"),
        "base": DMA_BASE,
        "bytes": cfg.bytes,
        "mmio_reads": cfg.mmio_reads,
        "loopbacks": cfg.loopbacks,
        "rounds": cfg.rounds,
        "server_pid": served.child.id(),
        "minimal": served.minimal.to_string(),
    });
    let out = output_within(
        Command::new(&cfg.python)
            .args(["-c", CLIENT])
            .env(
                "PYNQ_REMOTE_DEVICES",
                format!("{},{}", served.addr.ip(), served.minimal.ip()),
            )
            .env("DMAFLOW_BENCH_REMOTE", setup.to_string()),
        cfg.limit,
    );
    drop(served);
    let out = match out {
        Ok(o) => o,
        Err(e) => return Ok(unmeasured(cfg, points, &format!("the PYNQ client: {e}"))),
    };
    let doc: Option<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok());
    let Some(doc) = doc.filter(|_| out.status.success()) else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        let why = format!("the PYNQ client failed: {}", last.unwrap_or("").trim());
        return Ok(unmeasured(cfg, points, &why));
    };
    Ok(samples_of(cfg, points, &doc))
}

/// Every point's samples from the client's document, round by round; a
/// point it did not measure gets one sample saying why.
fn samples_of(cfg: &Config, points: &[Point<&'static str>], doc: &Value) -> Vec<Vec<Sample>> {
    let series = |v: &Value| -> Vec<f64> {
        let s = v.as_array().into_iter().flatten();
        s.filter_map(Value::as_f64).collect()
    };
    let mut out = unmeasured(cfg, points, "");
    for (p, samples) in points.iter().zip(&mut out) {
        let side = side(p);
        let key = format!("{}|{side}", p.at);
        let s = &doc["samples"][&key];
        let (us, cpu) = (series(&s["us"]), series(&s["cpu_us"]));
        let server = series(&s["server_cpu_us"]);
        let first = samples[0].clone();
        if us.is_empty() {
            let note = doc["notes"][side].as_str().unwrap_or("not measured");
            samples[0].note = note.to_string();
            continue;
        }
        let at = |v: &[f64], r: usize| v.get(r).copied().unwrap_or(f64::NAN);
        *samples = (0..us.len())
            .map(|r| Sample {
                us: us[r],
                cpu_us: at(&cpu, r),
                server_cpu_us: if side == "remote" {
                    at(&server, r)
                } else {
                    f64::NAN
                },
                verified: doc["verified"][&key].as_bool(),
                ..first.clone()
            })
            .collect();
    }
    out
}

/// The point's first sample: what it says of the whole point.
fn first(r: &Row<&'static str, Sample>) -> Sample {
    r.samples.first().cloned().unwrap_or_default()
}

/// The rows' columns.
fn columns() -> Columns<'static, Row<&'static str, Sample>> {
    Columns::new()
        .plain("what", "what", |r: &Row<&'static str, Sample>| r.point.at)
        .doc("mmio_read|loopback")
        .series(
            "point",
            "point",
            "pynq-remote/dmaflow-serve|dmaflow.pynq-in-process|pynq-remote/python-minimal",
        )
        .col(
            "bytes",
            "bytes",
            |r| bytes_label(first(r).bytes),
            |r| first(r).bytes,
        )
        .doc("bytes per operation")
        .plain("ops/round", "ops", |r| first(r).ops)
        .doc("operations per round")
        .summary(
            ("us/op", "us", "us_spread"),
            "wall time per operation, microseconds",
            (1.0, 1, ""),
            |s| s.us,
        )
        .summary(
            ("host CPU us/op", "cpu_us", "cpu_us_spread"),
            "host CPU per operation, microseconds: the client's, and the server's for the \
             remote point",
            (1.0, 1, ""),
            |s| s.cpu_us,
        )
        .typical(
            "server CPU us/op",
            "server_cpu_us",
            "of that, the dmaflow serve process's",
            (1.0, 1),
            |s| s.server_cpu_us,
        )
        .shown_as(
            "data",
            "verified",
            |r| first(r).verified,
            |v| v.map_or("-".into(), |v| if v { "equal" } else { "DIFFERENT" }.into()),
        )
        .doc("the loopback's data came back equal (null for MMIO reads)")
        .kept("rounds", |r| {
            r.samples.iter().filter(|s| s.us.is_finite()).count()
        })
        .doc("rounds measured")
        .kept("note", |r| first(r).note)
        .doc("why not measured (empty when measured; null numbers then)")
}

/// The notes on points not measured, the remote point against the others,
/// and the loopbacks' data checked.
fn findings(_: &Config, rows: &[Row<&'static str, Sample>]) -> Findings {
    let mut found = Findings::default();
    for r in rows.iter().filter(|r| !first(r).note.is_empty()) {
        let note = first(r).note;
        found.notes += &format!("{} {}: not measured: {note}\n", r.point.at, r.point.series);
    }
    let mut clauses = Vec::new();
    let remote = |what| {
        rows.iter()
            .find(|r| r.point.at == what && r.point.series == POINTS[0])
            .filter(|r| r.measured(|s| s.us))
    };
    for what in OPS {
        let q = remote(what).and_then(|r| r.ratio_to(POINTS[1], |s| s.us));
        if let Some(q) = q.filter(|q| q.0.n > 0) {
            found.notes += &format!("{what}: remote / in process {}\n", q.text());
            clauses.push(format!("{what} {:.0}x the in-process time", q.typical()));
        }
    }
    let q = remote(OPS[0]).and_then(|r| r.ratio_to(POINTS[2], |s| s.us));
    if let Some(q) = q.filter(|q| q.0.n > 0) {
        found.notes += &format!(
            "{}: dmaflow serve / minimal Python server {}\n",
            OPS[0],
            q.text()
        );
        clauses.push(format!(
            "{} {:.2}x a minimal Python server's",
            OPS[0],
            q.typical()
        ));
    }
    found.targets = rows
        .iter()
        .filter_map(|r| {
            let equal = first(r).verified?;
            Some(Target::new(
                format!(
                    "{} loopback through {}: the data comes back equal",
                    bytes_label(first(r).bytes),
                    r.point.series
                ),
                if equal { "equal" } else { "different" },
                equal,
            ))
        })
        .collect();
    found.clauses = vec![if clauses.is_empty() {
        "not measured: PYNQ 4.0's client and dmaflow.pynq did not both run here (see the notes)"
            .to_string()
    } else {
        format!(
            "through PYNQ.remote (gRPC on loopback, the whole buffer sent on flush and read back \
             on invalidate): {}",
            clauses.join("; ")
        )
    }];
    found
}

/// The experiment as `dmaflow bench` runs it.
pub static EXPERIMENT: Bench<Config, &'static str, Sample> = Bench {
    name: "remote",
    emulator_only: "it serves the emulated board to PYNQ's client (on a board, `dmaflow serve \
                    --board` serves it)",
    question: "PYNQ 4.0's own client over PYNQ.remote against dmaflow serve, beside dmaflow.pynq in process.",
    conditions: Conditions {
        timed: "each point's operations back to back in its turn, wall time per operation; host \
                CPU the client process's (all its threads) plus, for the remote point, the \
                dmaflow serve process's (its threads' run time)",
        against: "dmaflow.pynq in the same Python process: the same MMIO read and DMA cell on its \
                  own emulated board, no network; and for the MMIO read, a minimal PYNQ.remote \
                  server in Python (grpcio, answering from a dict) in the client's process",
        model: "the emulated board's unlimited clock: the DMA takes no modelled time, so the \
                remote loopback is PYNQ.remote's cost: gRPC calls plus the whole buffer sent on \
                flush() and read back on invalidate()",
        paper: "none: PYNQ.remote's own path, PYNQ 4.0's client and the server on one machine \
                over loopback TCP, no board",
    },
    heading: |cfg| {
        format!(
            "PYNQ 4.0's own client against `dmaflow serve` (emulated board, loopback TCP) vs \
             dmaflow.pynq in process and a minimal Python PYNQ.remote server: MMIO read x{} and \
             a {} loopback x{} through each DMA driver, {} rounds asked, the client taking the \
             turns",
            cfg.mmio_reads,
            bytes_label(cfg.bytes),
            cfg.loopbacks,
            cfg.rounds
        )
    },
    findings,
    ran: Some(|s| s.us.is_finite()),
    ..Bench::by_peer(Config::at, |c| c.rounds, points, sampled, columns)
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::harness::Experiment;

    /// Without PYNQ's environment every row is there, unmeasured, saying
    /// why; from the client's document, a side that did not run keeps its
    /// note, the other its samples.
    #[test]
    fn unmeasured_rows_say_why_and_measured_ones_keep_their_samples() {
        let cfg = Config {
            python: PathBuf::from("/nonexistent/python"),
            ..Config::at(&Setup::TINY)
        };
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), CELLS.len());
        assert!(
            rows.iter()
                .all(|r| !r.measured(|s| s.us) && first(r).note.contains("not installed"))
        );
        let rep = EXPERIMENT.report(&cfg, &rows);
        let first_row = &rep.json["rows"][0];
        for key in [
            "what",
            "point",
            "us",
            "us_spread",
            "cpu_us",
            "verified",
            "note",
        ] {
            assert!(first_row.get(key).is_some(), "{key}");
        }
        assert!(first_row["us"].is_null());
        assert_eq!(first_row["rounds"], 0);
        assert!(rep.answer.starts_with("Not measured"), "{}", rep.answer);
        assert!(rep.text.contains("not measured: PYNQ 4.0 is not installed"));
        assert!(EXPERIMENT.keys().contains("us_spread"));
        let doc = json!({
            "notes": {"local": "dmaflow.pynq: ModuleNotFoundError"},
            "samples": {
                "mmio_read|remote": {"us": [100.0, 120.0], "cpu_us": [80.0, 90.0], "server_cpu_us": [20.0, 25.0]},
                "mmio_read|minimal": {"us": [300.0, 320.0], "cpu_us": [250.0, 260.0], "server_cpu_us": [0.0, 0.0]},
                "loopback|remote": {"us": [4.0e4, 5.0e4], "cpu_us": [3.0e4, 3.5e4], "server_cpu_us": [1.0e4, 1.0e4]}
            },
            "verified": {"loopback|remote": true}
        });
        let cfg = Config::at(&Setup::TINY);
        let points = points(&cfg);
        let samples = samples_of(&cfg, &points, &doc);
        let rows: Vec<_> = points
            .iter()
            .zip(samples)
            .map(|(p, samples)| {
                // Beside every other point at the same operation, as the
                // frame puts it.
                let others = points.iter().zip(samples_of(&cfg, &points, &doc));
                let others = others
                    .filter(|(q, _)| q.at == p.at && q.series != p.series)
                    .map(|(q, s)| (q.series, s))
                    .collect();
                Row {
                    point: p.clone(),
                    samples,
                    baseline: None,
                    others,
                }
            })
            .collect();
        let find = |what: &str, point: &str| {
            rows.iter()
                .find(|r| r.point.at == what && r.point.series == point)
                .unwrap()
        };
        let remote = find("loopback", POINTS[0]);
        assert_eq!(first(remote).verified, Some(true));
        assert_eq!(remote.typical(|s| s.us), 4.5e4);
        let local = find("mmio_read", POINTS[1]);
        assert!(!local.measured(|s| s.us) && first(local).note.contains("ModuleNotFoundError"));
        let minimal = find("mmio_read", POINTS[2]);
        assert_eq!(minimal.typical(|s| s.us), 310.0);
        assert!(!minimal.measured(|s| s.server_cpu_us));
        let q = find("mmio_read", POINTS[0])
            .ratio_to(POINTS[2], |s| s.us)
            .unwrap();
        assert!(q.typical() < 0.4, "{q:?}");
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert!(
            rep.text.contains("dmaflow serve / minimal Python server"),
            "{}",
            rep.text
        );
        assert!(!rep.text.contains("remote / in process"), "{}", rep.text);
        assert_eq!(rep.targets.len(), 1);
        assert!(
            rep.answer.contains("a minimal Python server's"),
            "{}",
            rep.answer
        );
    }
}
