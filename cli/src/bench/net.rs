//! `dmaflow bench net`: a dmaflow ZeroMQ edge between two processes against
//! the binding's own ceiling. For each message size, the same bytes cross
//! loopback TCP twice per round: through dmaflow's graph edge (a generator
//! node -> `dmaflow_net` sink here, `dmaflow_net` source -> checksum node in a
//! child process) and through bare PUSH/PULL sockets of the same library
//! (the raw ceiling: a loop that fills a buffer and sends it, a loop that
//! receives and sums it). Both ends touch every byte; the receiver's checksum
//! is verified. GNU Radio sends `size`-byte items, as many to a message as
//! its scheduler hands `work()`, so the comparison with it is made by a
//! third point, `dmaflow-batched`: the same edge with `size`-byte items and
//! messages of every whole item readable (up to 256 KiB, gr-zeromq's way).
//! Where GNU Radio is installed, its `push_sink -> pull_source` between two
//! flowgraphs of one Python process is the fourth point (a vector source of
//! `size`-byte items into a null sink: GNU Radio's ends touch no byte, so
//! the comparison favours it). Points take turns in each round and
//! the order reverses every other round; medians and the min..max of the
//! rounds are reported. Time is the receiver's, from its first message to the
//! end of stream (GNU Radio's: from starting its sender); CPU is the
//! receiving process's (user + system, from `/proc/self/stat`; GNU Radio's
//! counts both flowgraphs).

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use dmaflow::graph::Graph;
use serde_json::json;

use super::report::{Report, Target};
use super::spread::{Ratio, Spread, in_turns};
use super::{Error, median, table};

/// The experiment's size.
#[derive(Debug, Clone)]
pub struct Config {
    /// Message sizes in bytes (multiples of 4: the items are `u32`).
    pub sizes: Vec<usize>,
    /// Bytes per measurement: 100 000 messages, within these bounds.
    pub bytes: (usize, usize),
    /// Rounds per point.
    pub rounds: usize,
    /// Run the receiver on a thread of this process instead of a child
    /// process (tests, where the binary is not `dmaflow`).
    pub in_process: bool,
}

impl Config {
    /// Bytes per measurement with messages of `size` bytes.
    pub fn bytes_for(&self, size: usize) -> usize {
        (size.saturating_mul(100_000)).clamp(self.bytes.0, self.bytes.1) / 4 * 4
    }

    /// The full run.
    pub fn full() -> Self {
        Config {
            sizes: vec![64, 1 << 10, 16 << 10, 64 << 10, 1 << 20],
            bytes: (16 << 20, 256 << 20),
            rounds: 5,
            in_process: false,
        }
    }

    /// A short run.
    pub fn quick() -> Self {
        Config {
            sizes: vec![64, 64 << 10, 1 << 20],
            bytes: (4 << 20, 32 << 20),
            rounds: 3,
            in_process: false,
        }
    }
}

/// GNU Radio's push_sink -> pull_source, run by Debian's Python where GNU
/// Radio is installed.
const GNURADIO_SCRIPT: &str = include_str!("../../../scripts/gnuradio_zmq_bench.py");

/// Whether GNU Radio's Python API with gr-zeromq is here.
pub fn gnuradio_here() -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", "import gnuradio.zeromq"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The ways through the network measured: dmaflow with one message per
/// `size` bytes and the raw ceiling doing the same; dmaflow with `size`-byte
/// items batched into messages as gr-zeromq batches (everything readable,
/// whole items, up to [`BATCHED_BYTES`]), and GNU Radio where it is
/// installed.
fn points(cfg: &Config) -> Vec<&'static str> {
    let mut p = vec!["dmaflow", "raw", "dmaflow-batched"];
    if !cfg.in_process && gnuradio_here() {
        p.push("gnuradio");
    }
    p
}

/// One point at one size: per round, seconds and receiver CPU seconds.
#[derive(Debug, Clone)]
pub struct Row {
    /// Message size in bytes.
    pub size: usize,
    /// `dmaflow`, `raw`, `dmaflow-batched` or `gnuradio`.
    pub point: &'static str,
    /// Bytes per round.
    pub bytes: usize,
    /// Receiver's seconds, per round.
    pub seconds: Vec<f64>,
    /// Receiver's CPU seconds, per round.
    pub cpu: Vec<f64>,
}

impl Row {
    /// Median throughput in MB/s, and its min..max over the rounds.
    pub fn mbps(&self) -> (f64, f64, f64) {
        let v: Vec<f64> = self
            .seconds
            .iter()
            .map(|s| self.bytes as f64 / s / 1e6)
            .collect();
        let s = Spread::of(&v);
        (s.median, s.min, s.max)
    }
}

/// What a receiver found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Received {
    /// Items received.
    pub items: u64,
    /// Wrapping sum of the items.
    pub checksum: u32,
    /// From the first message to the end of stream.
    pub seconds: f64,
    /// The receiving process's CPU time meanwhile.
    pub cpu: f64,
}

/// CPU time of this process so far (user + system).
fn process_cpu() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (in parentheses): utime and stime are
    // the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The receiving end, as `dmaflow net-peer` runs it: `point` is `dmaflow`
/// (a graph: network source -> checksum node) or `raw` (a PULL socket).
pub fn receive(point: &str, endpoint: &str) -> Result<Received, String> {
    let at = dmaflow_net::Endpoint::parse(endpoint).map_err(|e| e.to_string())?;
    if point == "raw" {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::PULL).map_err(|e| e.to_string())?;
        s.set_rcvhwm(16).map_err(|e| e.to_string())?;
        s.connect(at.as_str()).map_err(|e| e.to_string())?;
        let (mut items, mut sum, mut start, mut cpu0) = (0u64, 0u32, None, 0.0);
        loop {
            let m = s.recv_msg(0).map_err(|e| e.to_string())?;
            if start.is_none() {
                start = Some(Instant::now());
                cpu0 = process_cpu();
            }
            if m.is_empty() {
                break;
            }
            for c in m.chunks_exact(4) {
                sum = sum.wrapping_add(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            }
            items += (m.len() / 4) as u64;
        }
        let seconds = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
        return Ok(Received {
            items,
            checksum: sum,
            seconds,
            cpu: process_cpu() - cpu0,
        });
    }
    let mut g = Graph::new();
    let (out, mut inp) = g
        .connect_with_capacity::<u32>(("net", "out"), ("sum", "in"), 1 << 20)
        .map_err(|e| e.to_string())?;
    let edge = dmaflow_net::Edge::source(at);
    dmaflow_net::add_source(&mut g, "net", edge, out).map_err(|e| e.to_string())?;
    let result = std::sync::Arc::new(std::sync::Mutex::new(None));
    let put = result.clone();
    g.node("sum", move || {
        let (mut items, mut sum, mut start, mut cpu0) = (0u64, 0u32, None, 0.0);
        loop {
            let s = inp.peek(1)?;
            if start.is_none() {
                start = Some(Instant::now());
                cpu0 = process_cpu();
            }
            if s.is_empty() {
                break;
            }
            sum = s.iter().fold(sum, |a, &x| a.wrapping_add(x));
            let n = s.len();
            items += n as u64;
            inp.consume(n)?;
        }
        let seconds = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
        *put.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Received {
            items,
            checksum: sum,
            seconds,
            cpu: process_cpu() - cpu0,
        });
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())?;
    let r = *result
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    r.ok_or_else(|| "the receiver found nothing".to_string())
}

/// Sends `bytes` as `u32` counters in messages of `size` bytes at `endpoint`
/// (bound), the way `point` says, then the end of stream.
fn send(point: &str, endpoint: &str, size: usize, bytes: usize) -> Result<(), String> {
    let at = dmaflow_net::Endpoint::parse(endpoint).map_err(|e| e.to_string())?;
    let items = bytes / 4;
    if point == "raw" {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::PUSH).map_err(|e| e.to_string())?;
        s.set_sndhwm(16).map_err(|e| e.to_string())?;
        s.set_linger(5000).map_err(|e| e.to_string())?;
        s.bind(at.as_str()).map_err(|e| e.to_string())?;
        let per = size / 4;
        let mut next = 0u32;
        let mut sent = 0;
        while sent < items {
            let n = per.min(items - sent);
            let mut m = zmq::Message::with_size(n * 4);
            for c in m.chunks_exact_mut(4) {
                c.copy_from_slice(&next.to_le_bytes());
                next = next.wrapping_add(1);
            }
            s.send(m, 0).map_err(|e| e.to_string())?;
            sent += n;
        }
        s.send(Vec::<u8>::new(), 0).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let mut g = Graph::new();
    let (mut out, inp) = g
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), 1 << 18)
        .map_err(|e| e.to_string())?;
    let mut edge = dmaflow_net::Edge::sink(at);
    let per_item = (size / 4).max(1);
    edge.max_items = if point == "dmaflow-batched" {
        (BATCHED_BYTES / 4 / per_item).max(1) * per_item
    } else {
        per_item
    };
    dmaflow_net::add_sink(&mut g, "net", edge, inp).map_err(|e| e.to_string())?;
    // The producer writes in its own batches; the edge cuts them into
    // messages of `size` bytes.
    let per = 1 << 14;
    g.node("count", move || {
        let mut next = 0u32;
        let mut sent = 0;
        while sent < items {
            let s = out.reserve(per.min(items - sent))?;
            for x in s.iter_mut() {
                *x = next;
                next = next.wrapping_add(1);
            }
            let n = s.len();
            out.commit(n)?;
            sent += n;
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())
}

/// The largest message of the batched point: the network sink's default
/// (`Edge::max_items` of `u32`s), or one item where an item is larger.
const BATCHED_BYTES: usize = 1 << 18;

/// One measurement: a receiver (child process or thread) and this sender.
fn measure(cfg: &Config, point: &'static str, size: usize) -> Result<Received, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| Error::Io {
            path: "a free TCP port".into(),
            source: e,
        })?
        .port();
    let endpoint = format!("tcp://127.0.0.1:{port}");
    let fail = |reason: String| Error::Peer {
        peer: point,
        reason,
    };
    if point == "gnuradio" {
        let bytes = cfg.bytes_for(size);
        let out = Command::new("/usr/bin/python3")
            .args(["-c", GNURADIO_SCRIPT])
            .args([size.to_string(), bytes.to_string(), port.to_string()])
            .output()
            .map_err(|e| Error::Io {
                path: "/usr/bin/python3".into(),
                source: e,
            })?;
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        let f: Vec<f64> = line
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if !out.status.success() || f.len() != 2 {
            return Err(fail(format!(
                "{line:?} {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        return Ok(Received {
            items: (bytes / 4) as u64,
            checksum: 0,
            seconds: f[0],
            cpu: f[1],
        });
    }
    let got = if cfg.in_process {
        let at = endpoint.clone();
        let rx = std::thread::spawn(move || receive(point, &at));
        send(point, &endpoint, size, cfg.bytes_for(size)).map_err(fail)?;
        rx.join()
            .map_err(|_| Error::Panicked("net receiver"))?
            .map_err(fail)?
    } else {
        let exe = std::env::current_exe().map_err(|e| Error::Io {
            path: "the dmaflow binary".into(),
            source: e,
        })?;
        let child = Command::new(exe)
            .args(["net-peer", "--point", point, "--endpoint", &endpoint])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Io {
                path: "dmaflow net-peer".into(),
                source: e,
            })?;
        send(point, &endpoint, size, cfg.bytes_for(size)).map_err(fail)?;
        let out = child.wait_with_output().map_err(|e| Error::Io {
            path: "dmaflow net-peer".into(),
            source: e,
        })?;
        if !out.status.success() {
            return Err(fail(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        let line = out
            .stdout
            .lines()
            .next()
            .and_then(Result::ok)
            .unwrap_or_default();
        parse_received(&line).ok_or_else(|| fail(format!("net-peer said {line:?}")))?
    };
    let items = (cfg.bytes_for(size) / 4) as u64;
    let expected = (0..items).fold(0u32, |a, i| a.wrapping_add(i as u32));
    if got.items != items || got.checksum != expected {
        return Err(Error::Corrupted {
            what: format!("net {point} {size} B: {} of {items} items", got.items),
            got: got.checksum,
            expected,
        });
    }
    Ok(got)
}

/// The line `dmaflow net-peer` prints.
pub fn received_line(r: &Received) -> String {
    format!("{} {} {} {}", r.items, r.checksum, r.seconds, r.cpu)
}

fn parse_received(line: &str) -> Option<Received> {
    let f: Vec<&str> = line.split_whitespace().collect();
    Some(Received {
        items: f.first()?.parse().ok()?,
        checksum: f.get(1)?.parse().ok()?,
        seconds: f.get(2)?.parse().ok()?,
        cpu: f.get(3)?.parse().ok()?,
    })
}

/// Runs the experiment.
pub fn run(cfg: &Config, progress: &mut dyn FnMut(&str)) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    let points = points(cfg);
    for &size in &cfg.sizes {
        let mut cpu = vec![Vec::new(); points.len()];
        let seconds = in_turns(points.len(), cfg.rounds, |i, round| {
            progress(&format!(
                "net: {size} B messages, {} round {}",
                points[i],
                round + 1
            ));
            let got = measure(cfg, points[i], size)?;
            cpu[i].push(got.cpu);
            Ok::<_, Error>(got.seconds)
        })?;
        rows.extend(points.iter().zip(seconds.into_iter().zip(cpu)).map(
            |(&point, (seconds, cpu))| Row {
                size,
                point,
                bytes: cfg.bytes_for(size),
                seconds,
                cpu,
            },
        ));
    }
    Ok(rows)
}

/// Point `mine`'s throughput over point `other`'s per size: the median of
/// the rounds' ratios (each round measures both), with their min..max.
fn shares(rows: &[Row], mine: &str, other: &str) -> Vec<(usize, f64, f64, f64)> {
    rows.iter()
        .filter(|d| d.point == mine)
        .filter_map(|d| {
            let r = rows.iter().find(|r| r.size == d.size && r.point == other)?;
            // Throughput ratio = the other's time over this one's, per round.
            let Ratio(s) = Ratio::of(&r.seconds, &d.seconds);
            Some((d.size, s.median, s.min, s.max))
        })
        .collect()
}

/// The report.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let mut cells = Vec::new();
    for r in rows {
        let (m, lo, hi) = r.mbps();
        let items = r.bytes as f64 / 4.0;
        cells.push(vec![
            super::bytes_label(r.size),
            r.point.to_string(),
            format!("{m:.0}"),
            format!("{lo:.0}..{hi:.0}"),
            format!("{:.1}", items / median(&r.seconds) / 1e6),
            format!("{:.2}", median(&r.cpu) / median(&r.seconds)),
        ]);
    }
    let mut text = table(
        &[
            "message",
            "point",
            "MB/s",
            "range",
            "Mitems/s",
            "rx_cpu_share",
        ],
        &cells,
    );
    let vs_gr = shares(rows, "dmaflow-batched", "gnuradio");
    for &(size, m, lo, hi) in &vs_gr {
        text += &format!(
            "{}: dmaflow, items batched, at {:.2}x GNU Radio's push_sink -> pull_source \
             ({:.2}..{:.2}x)\n",
            super::bytes_label(size),
            m,
            lo,
            hi
        );
    }
    let shares = shares(rows, "dmaflow", "raw");
    let mut targets = Vec::new();
    for &(size, m, _, _) in &vs_gr {
        targets.push(Target::new(
            format!("{} items: >= GNU Radio", super::bytes_label(size)),
            format!("{m:.2}x"),
            m >= 1.0,
        ));
    }
    for &(size, m, lo, hi) in &shares {
        text += &format!(
            "{}: dmaflow at {:.0} % of the raw ceiling ({:.0}..{:.0} %)\n",
            super::bytes_label(size),
            m * 100.0,
            lo * 100.0,
            hi * 100.0
        );
        if size >= 64 << 10 {
            targets.push(Target::new(
                format!(
                    "{} messages: >= 90 % of raw ZeroMQ",
                    super::bytes_label(size)
                ),
                format!("{:.0} %", m * 100.0),
                m >= 0.9,
            ));
        }
    }
    text += &Target::lines(&targets);
    let answer = shares
        .iter()
        .map(|(s, m, _, _)| format!("{} {:.0} %", super::bytes_label(*s), m * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    Report {
        experiment: "net",
        heading: format!(
            "net: a dmaflow ZeroMQ edge between two processes{} over loopback TCP vs bare \
             PUSH/PULL of the same libzmq, 100 000 messages ({}..{} MiB) per measurement, {} \
             rounds, interleaved",
            if cfg.in_process {
                " (threads, in process)"
            } else {
                ""
            },
            cfg.bytes.0 >> 20,
            cfg.bytes.1 >> 20,
            cfg.rounds
        ),
        answer: format!("dmaflow's share of the raw ZeroMQ throughput: {answer}."),
        text,
        targets,
        json: json!({
            "experiment": "net",
            "rows": rows.iter().map(|r| {
                let (m, lo, hi) = r.mbps();
                json!({
                    "message_bytes": r.size,
                    "point": r.point,
                    "mb_per_s": m,
                    "mb_per_s_min": lo,
                    "mb_per_s_max": hi,
                    "rounds": r.seconds.len(),
                    "rx_cpu_share": median(&r.cpu) / median(&r.seconds),
                })
            }).collect::<Vec<_>>(),
        }),
        plots: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways deliver every byte (the checksum is checked inside) and the
    /// report names each size's share.
    #[test]
    fn both_points_deliver_every_item() {
        let cfg = Config {
            sizes: vec![64, 4096],
            bytes: (1 << 20, 1 << 20),
            rounds: 2,
            in_process: true,
        };
        let rows = run(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 6);
        assert!(
            rows.iter()
                .all(|r| r.seconds.len() == 2 && r.seconds.iter().all(|s| *s > 0.0))
        );
        let rep = report(&cfg, &rows);
        assert!(rep.text.contains("64 B: dmaflow at"), "{}", rep.text);
        // Batched, 64-byte items go many to a message.
        assert!(rep.text.contains("dmaflow-batched"), "{}", rep.text);
        assert_eq!(
            parse_received(&received_line(&Received {
                items: 3,
                checksum: 7,
                seconds: 0.5,
                cpu: 0.25
            }))
            .unwrap()
            .checksum,
            7
        );
    }
}
