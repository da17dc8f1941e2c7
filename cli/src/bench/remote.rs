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
//! The points take turns round by round; per point the median over rounds,
//! the rounds' range, and host CPU per operation (the client process's, and
//! for the remote point the server process's too).
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
use super::harness::{OnBoard, Progress, Setup, Spec, Tier, bytes_label};
use super::peers::{ScratchDir, output_within};
use super::report::{Report, Target};
use super::spread::{Ratio, Spread};

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

/// One operation through one point.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// `mmio_read` or `loopback`.
    pub what: &'static str,
    /// One of [`POINTS`].
    pub point: &'static str,
    /// Bytes per operation (a register; the loopback's buffer).
    pub bytes: usize,
    /// Operations per round.
    pub ops: usize,
    /// Wall time per operation, microseconds, one sample per round.
    pub us: Option<Vec<f64>>,
    /// Host CPU per operation (client, and server for the remote point),
    /// microseconds, per round.
    pub cpu_us: Option<Vec<f64>>,
    /// Of that, the server process's, per round (remote point only).
    pub server_cpu_us: Option<Vec<f64>>,
    /// Whether the loopback's data came back equal (checked after the
    /// rounds); `None` for the MMIO reads.
    pub verified: Option<bool>,
    /// Why it was not measured (empty when it was).
    pub note: String,
}

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

/// The rows, none measured, each saying why.
fn unmeasured(cfg: &Config, why: &str) -> Vec<Row> {
    CELLS
        .iter()
        .map(|&(what, point, _)| {
            let (bytes, ops) = if what == OPS[0] {
                (4, cfg.mmio_reads)
            } else {
                (cfg.bytes, cfg.loopbacks)
            };
            Row {
                what,
                point,
                bytes,
                ops,
                note: why.to_string(),
                ..Row::default()
            }
        })
        .collect()
}

/// Runs the experiment. A Python side that is not installed, a server that
/// does not start, or a client that fails is said in the rows' notes; only
/// this machine's own failures (a scratch directory) are errors.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    if !cfg.python.exists() {
        return Ok(unmeasured(
            cfg,
            &format!(
                "PYNQ 4.0 is not installed here ({} missing: scripts/pynq-remote-venv.sh \
                 installs it, `pip install ./python` into it adds dmaflow.pynq)",
                cfg.python.display()
            ),
        ));
    }
    let scratch = ScratchDir::new("dmaflow-bench-remote")?;
    let exported = dmaflow_remote::hwh::export("loopback", scratch.path());
    let exported = exported.map_err(|e| std::io::Error::other(e.to_string()));
    exported.map_err(Error::io(scratch.path().display()))?;
    progress("remote: starting dmaflow serve");
    let served = match serve() {
        Ok(s) => s,
        Err(why) => return Ok(unmeasured(cfg, &why)),
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
        Err(e) => return Ok(unmeasured(cfg, &format!("the PYNQ client: {e}"))),
    };
    let doc: Option<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok());
    let Some(doc) = doc.filter(|_| out.status.success()) else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        let why = format!("the PYNQ client failed: {}", last.unwrap_or("").trim());
        return Ok(unmeasured(cfg, &why));
    };
    Ok(rows_of(cfg, &doc))
}

/// The rows from the client's document.
fn rows_of(cfg: &Config, doc: &Value) -> Vec<Row> {
    let series = |v: &Value| -> Option<Vec<f64>> {
        let s: Vec<f64> = v.as_array()?.iter().filter_map(Value::as_f64).collect();
        (!s.is_empty()).then_some(s)
    };
    let mut rows = unmeasured(cfg, "");
    for (r, &(_, _, side)) in rows.iter_mut().zip(&CELLS) {
        let remote = side == "remote";
        let key = format!("{}|{side}", r.what);
        let s = &doc["samples"][&key];
        r.us = series(&s["us"]);
        r.cpu_us = series(&s["cpu_us"]);
        r.server_cpu_us = series(&s["server_cpu_us"]).filter(|_| remote);
        r.verified = doc["verified"][&key].as_bool();
        if r.us.is_none() {
            r.note = doc["notes"][side]
                .as_str()
                .unwrap_or("not measured")
                .to_string();
        }
    }
    rows
}

/// A spread of optional samples, for a cell and its JSON.
fn spread(s: &Option<Vec<f64>>) -> Option<Spread> {
    s.as_deref().map(Spread::of)
}

/// The rows' columns.
fn columns<'a>() -> Columns<'a, Row> {
    let median = |s: &Option<Vec<f64>>| spread(s).map(|s| s.median);
    Columns::new()
        .plain("what", "what", |r: &Row| r.what)
        .plain("point", "point", |r| r.point)
        .col("bytes", "bytes", |r| bytes_label(r.bytes), |r| r.bytes)
        .plain("ops/round", "ops", |r| r.ops)
        .optional("us/op", "us", 1, move |r| median(&r.us))
        .shown("rounds min..max", |r| {
            spread(&r.us).map_or("-".into(), |s| format!("{:.1}..{:.1}", s.min, s.max))
        })
        .kept("us_spread", |r| spread(&r.us))
        .optional("host CPU us/op", "cpu_us", 1, move |r| median(&r.cpu_us))
        .kept("cpu_us_spread", |r| spread(&r.cpu_us))
        .optional("server CPU us/op", "server_cpu_us", 1, move |r| {
            median(&r.server_cpu_us)
        })
        .shown_as(
            "data",
            "verified",
            |r| r.verified,
            |v| v.map_or("-".into(), |v| if v { "equal" } else { "DIFFERENT" }.into()),
        )
        .kept("rounds", |r| r.us.as_ref().map_or(0, Vec::len))
        .kept("note", |r| r.note.clone())
}

/// `point`'s time over `against`'s for `what`, round by round, where both
/// ran.
fn ratio(rows: &[Row], what: &str, point: &str, against: &str) -> Option<Ratio> {
    let us = |point: &str| {
        rows.iter()
            .find(|r| r.what == what && r.point == point)
            .and_then(|r| r.us.clone())
    };
    Some(Ratio::of(&us(point)?, &us(against)?))
}

/// The report of `rows`.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let columns = columns();
    let mut text = columns.table(rows);
    for r in rows.iter().filter(|r| !r.note.is_empty()) {
        text += &format!("{} {}: not measured: {}\n", r.what, r.point, r.note);
    }
    let mut clauses = Vec::new();
    for what in OPS {
        if let Some(q) = ratio(rows, what, POINTS[0], POINTS[1]) {
            text += &format!("{what}: remote / in process {}\n", q.text());
            clauses.push(format!("{what} {:.0}x the in-process time", q.0.median));
        }
    }
    if let Some(q) = ratio(rows, OPS[0], POINTS[0], POINTS[2]) {
        text += &format!(
            "{}: dmaflow serve / minimal Python server {}\n",
            OPS[0],
            q.text()
        );
        clauses.push(format!(
            "{} {:.2}x a minimal Python server's",
            OPS[0], q.0.median
        ));
    }
    let targets = rows.iter().filter_map(|r| {
        let equal = r.verified?;
        Some(Target::new(
            format!(
                "{} loopback through {}: the data comes back equal",
                bytes_label(r.bytes),
                r.point
            ),
            if equal { "equal" } else { "different" },
            equal,
        ))
    });
    let answer = if clauses.is_empty() {
        "not measured: PYNQ 4.0's client and dmaflow.pynq did not both run here (see the notes)"
            .to_string()
    } else {
        format!(
            "through PYNQ.remote (gRPC on loopback, the whole buffer sent on flush and read back \
             on invalidate): {}",
            clauses.join("; ")
        )
    };
    let heading = format!(
        "remote: PYNQ 4.0's own client against `dmaflow serve` (emulated board, loopback \
         TCP) vs dmaflow.pynq in process and a minimal Python PYNQ.remote server: MMIO read x{} and a {} loopback x{} through each \
         DMA driver, {} rounds, interleaved",
        cfg.mmio_reads,
        bytes_label(cfg.bytes),
        cfg.loopbacks,
        cfg.rounds
    );
    Report::of("remote", heading, &columns, rows)
        .text(text)
        .answer(answer)
        .targets(targets.collect())
}

/// The experiment as `dmaflow bench` runs it.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "remote",
    board: OnBoard::EmulatorOnly(
        "it serves the emulated board to PYNQ's client (on a board, `dmaflow serve --board` \
         serves it)",
    ),
    question: "PYNQ 4.0's own client over PYNQ.remote against dmaflow serve, beside dmaflow.pynq in process.",
    keys: "what (mmio_read|loopback), point (pynq-remote/dmaflow-serve|\n\
          dmaflow.pynq-in-process|pynq-remote/python-minimal), bytes, ops (per round), us (median\n\
          over rounds of wall time per op), us_spread, cpu_us (host CPU\n\
          per op: client, and server for the remote point), cpu_us_spread,\n\
          server_cpu_us, verified (loopback data equal), rounds, note\n\
          (why not measured; null numbers then)",
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
    ..Spec::new(Config::at, run, report)
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Without PYNQ's environment every row is there, unmeasured, saying
    /// why; from the client's document, a side that did not run keeps its
    /// note, the other its samples.
    #[test]
    fn unmeasured_rows_say_why_and_measured_ones_keep_their_samples() {
        let cfg = Config {
            python: PathBuf::from("/nonexistent/python"),
            ..Config::at(&Setup::TINY)
        };
        let rows = run(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), CELLS.len());
        assert!(
            rows.iter()
                .all(|r| r.us.is_none() && r.note.contains("not installed"))
        );
        let rep = report(&cfg, &rows);
        let first = &rep.json["rows"][0];
        for key in [
            "what",
            "point",
            "us",
            "us_spread",
            "cpu_us",
            "verified",
            "note",
        ] {
            assert!(first.get(key).is_some(), "{key}");
        }
        assert!(first["us"].is_null());
        assert!(rep.answer.starts_with("not measured"));
        let doc = json!({
            "notes": {"local": "dmaflow.pynq: ModuleNotFoundError"},
            "samples": {
                "mmio_read|remote": {"us": [100.0, 120.0], "cpu_us": [80.0, 90.0], "server_cpu_us": [20.0, 25.0]},
                "mmio_read|minimal": {"us": [300.0, 320.0], "cpu_us": [250.0, 260.0], "server_cpu_us": [0.0, 0.0]},
                "loopback|remote": {"us": [4.0e4, 5.0e4], "cpu_us": [3.0e4, 3.5e4], "server_cpu_us": [1.0e4, 1.0e4]}
            },
            "verified": {"loopback|remote": true}
        });
        let rows = rows_of(&Config::at(&Setup::TINY), &doc);
        let remote = rows
            .iter()
            .find(|r| r.what == "loopback" && r.point == POINTS[0])
            .unwrap();
        assert_eq!(remote.verified, Some(true));
        assert_eq!(spread(&remote.us).unwrap().median, 4.5e4);
        let local = rows
            .iter()
            .find(|r| r.what == "mmio_read" && r.point == POINTS[1])
            .unwrap();
        assert!(local.us.is_none() && local.note.contains("ModuleNotFoundError"));
        assert!(ratio(&rows, "mmio_read", POINTS[0], POINTS[1]).is_none());
        let minimal = rows.iter().find(|r| r.point == POINTS[2]).unwrap();
        assert_eq!(minimal.what, "mmio_read");
        assert_eq!(spread(&minimal.us).unwrap().median, 310.0);
        assert!(minimal.server_cpu_us.is_none());
        let q = ratio(&rows, "mmio_read", POINTS[0], POINTS[2]).unwrap();
        assert!(q.0.median < 0.4, "{q:?}");
    }
}
