//! `dmaflow bench net`: a dmaflow ZeroMQ edge between two processes against
//! the binding's own ceiling and against GNU Radio's gr-zeromq, each point
//! saying what its ends do (`does`, in the report and the JSON).
//!
//! For each size, the same bytes of `u32` counters cross loopback TCP once
//! per point per round, every checksum verified: dmaflow's ends
//! (`dmaflow_net`'s sink and source, the receiver in a child process
//! `dmaflow net-peer`), bare PUSH/PULL of the same libzmq (the ceiling),
//! dmaflow batching whole items into messages (up to the sink's default, or
//! capped at the mean size GNU Radio's `push_sink` sent in this run at this
//! item size), GNU Radio's lean ends and the two crossed edges; what each
//! point's ends do is [`Point::does`].
//!
//! Points take turns in each round and the order reverses every other
//! round; medians and the min..max of the rounds. Time is the receiver's,
//! from its first data to its last; CPU is the receiving process's.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dmaflow::graph::Graph;

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::harness::{OnBoard, Progress, Setup, Spec, Tier, bytes_label, median};
use super::peers::{Peer, ScratchDir, first_of_each, gnuradio_here, series, tmpfs};
use super::report::{Report, Target};
use super::spread::{Ratio, Spread, Timed, in_turns};

/// `dmaflow bench net`.
pub static EXPERIMENT: Spec<Config, [Row]> = Spec {
    name: "net",
    board: OnBoard::EmulatorOnly("it measures network edges on this machine, not a DMA device"),
    question: "A dmaflow ZeroMQ edge between two processes against bare PUSH/PULL.",
    keys: "message_bytes (message or item size), point (dmaflow|\n\
          dmaflow-queue|raw|dmaflow-batched|dmaflow-capped|gnuradio|dmaflow->gnuradio|\n\
          gnuradio->dmaflow), does (what its ends do), mb_per_s (median\n\
          over rounds), mb_per_s_min, mb_per_s_max, mb_per_s_spread,\n\
          rounds, rx_cpu_share (receiving process's CPU over its time),\n\
          rx_cpu_us_per_mb, sent_message_bytes (mean message size where\n\
          known), copied_per_byte (payload bytes both ends copied per\n\
          byte delivered; dmaflow and raw points); against_gnuradio: per item size, the round-by-round\n\
          ratios capped/gnuradio, batched/gnuradio, batched/capped and\n\
          the crossed edges over gnuradio",
    conditions: Conditions {
        timed: "the receiver from its first data to its last (GNU Radio's receiver: its \
                sink's count looked at every 0.5 ms); CPU the receiving process's",
        against: "bare PUSH/PULL of the same libzmq (the ceiling), and GNU Radio's \
                  push_sink -> pull_source, lean (what each point does is in its row), at \
                  GNU Radio's own message size, with both crossed edges",
        model: "none",
        paper: "gr-zeromq over loopback TCP on one two-core machine, every process sharing \
                the two cores",
    },
    ..Spec::new(Config::at, run, report)
};

/// The experiment's size.
#[derive(Debug, Clone)]
pub struct Config {
    /// Message sizes in bytes (multiples of 4: the items are `u32`).
    pub sizes: Vec<usize>,
    /// Bytes per measurement: 100 000 messages, within these bounds.
    pub bytes: (usize, usize),
    /// Rounds per point.
    pub rounds: usize,
    /// Run dmaflow's and the raw receiver on a thread of this process
    /// instead of a child process (tests, where the binary is not
    /// `dmaflow`); GNU Radio's ends are processes of their own either way.
    pub in_process: bool,
}

impl Config {
    /// Bytes per measurement with messages of `size` bytes.
    pub fn bytes_for(&self, size: usize) -> usize {
        (size.saturating_mul(100_000)).clamp(self.bytes.0, self.bytes.1) / size.max(4) * size.max(4)
    }

    /// The size `setup` asks for.
    pub fn at(setup: &Setup) -> Self {
        let (sizes, bytes, rounds) = match setup.tier {
            Tier::Full => (
                vec![64, 1 << 10, 16 << 10, 64 << 10, 1 << 20],
                (16 << 20, 256 << 20),
                5,
            ),
            Tier::Quick => (vec![64, 64 << 10, 1 << 20], (4 << 20, 32 << 20), 3),
            Tier::Tiny => (vec![64, 4096], (1 << 20, 1 << 20), 2),
        };
        Config {
            sizes,
            bytes,
            rounds,
            in_process: false,
        }
    }
}

/// GNU Radio's ends, run by Debian's Python where GNU Radio is installed.
const GNURADIO_SCRIPT: &str = include_str!("../../peers/gnuradio_zmq_bench.py");

/// The longest a measurement's peer process may take.
const PEER_LIMIT: Duration = Duration::from_secs(120);

/// The longest GNU Radio's receiver may take (256 MiB at 50 MB/s is 5 s, its
/// start about 1 s): past it the round counts as a stall of GNU Radio's
/// receiver, reported in its row, and the run goes on.
const GR_RX_LIMIT: Duration = Duration::from_secs(30);

/// The `peer` of the error a stalled GNU Radio receiver gives.
const STALLED: &str = "stalled GNU Radio receiver";

/// A way through the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// dmaflow's ends, one message per `size` bytes.
    Dmaflow,
    /// dmaflow's ends, the receiver copying into a queue a node reads.
    Queued,
    /// Bare PUSH/PULL loops, one message per `size` bytes.
    Raw,
    /// dmaflow's ends, `size`-byte items batched up to 256 KiB a message.
    Batched,
    /// dmaflow's ends, `size`-byte items batched up to GNU Radio's mean
    /// message size.
    Capped,
    /// GNU Radio's lean ends.
    Gnuradio,
    /// dmaflow's capped sender into GNU Radio's receiver.
    DmaflowToGnuradio,
    /// GNU Radio's sender into dmaflow's receiver.
    GnuradioToDmaflow,
}

impl Point {
    /// Its name in tables and JSON, and what its ends do in their own words
    /// (sender | receiver).
    fn texts(self) -> (&'static str, &'static str) {
        match self {
            Point::Dmaflow => (
                "dmaflow",
                "dmaflow: a generator node writes u32 counters into a queue; the dmaflow_net sink \
                 sends one message per size bytes from the queue's slots (no copy; the slots \
                 held until ZeroMQ lets go; a message under 512 B is copied, the sink's default \
                 Edge::COPY_BELOW) | the dmaflow_net source (another process) runs the \
                 checksum on each message where it landed (add_source_with: no queue, no copy)",
            ),
            Point::Queued => (
                "dmaflow-queue",
                "the same sender as dmaflow | the dmaflow_net source (another process) copies \
                 each message into a queue; a node sums every u32 (checksum verified)",
            ),
            Point::Raw => (
                "raw",
                "bare libzmq PUSH/PULL: a loop writes u32 counters into each message and sends \
                 it | a loop (another process) receives each message and sums every u32 \
                 (checksum verified)",
            ),
            Point::Batched => (
                "dmaflow-batched",
                "dmaflow, size-byte items, every whole item readable in one message up to 256 KiB \
                 (the sink's default) | the same receiver as dmaflow",
            ),
            Point::Capped => (
                "dmaflow-capped",
                "dmaflow, size-byte items, messages capped at the mean size GNU Radio's push_sink \
                 sent at this item size in this run (message_bytes) | the same receiver as \
                 dmaflow",
            ),
            Point::Gnuradio => (
                "gnuradio",
                "GNU Radio 3.10, lean: file_source (the same u32 counters from a tmpfs file, \
                 read() into its buffer) -> push_sink | pull_source (another process) -> \
                 file_sink into tmpfs (every byte written once), compared byte for byte after \
                 the timed span; blocks' poll timeout 1 ms (gr-zeromq's default 100 ms stalled \
                 GNU Radio into GNU Radio by about one timeout in some runs); its time polled \
                 every 0.5 ms",
            ),
            Point::DmaflowToGnuradio => (
                "dmaflow->gnuradio",
                "dmaflow's capped sender (a generator node, the dmaflow_net sink sending from \
                 the queue's slots) -> GNU Radio's receiver (pull_source -> file_sink, compared byte \
                 for byte)",
            ),
            Point::GnuradioToDmaflow => (
                "gnuradio->dmaflow",
                "GNU Radio's sender (file_source -> push_sink) -> dmaflow's receiver (the \
                 dmaflow_net source summing every u32 where each message landed, checksum \
                 verified; it counts the messages: GNU Radio's message size)",
            ),
        }
    }

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        self.texts().0
    }

    /// What its ends do, in their own words.
    pub fn does(self) -> &'static str {
        self.texts().1
    }

    /// Whether a GNU Radio end takes part.
    fn gnuradio(self) -> bool {
        matches!(
            self,
            Point::Gnuradio | Point::DmaflowToGnuradio | Point::GnuradioToDmaflow
        )
    }
}

/// The ways through the network measured: dmaflow, raw and batched always;
/// with GNU Radio installed, GNU Radio's, the crossed edges and dmaflow
/// capped at GNU Radio's message size.
fn points() -> Vec<Point> {
    let mut p = vec![Point::Dmaflow, Point::Queued, Point::Raw, Point::Batched];
    if gnuradio_here() {
        p.extend([
            Point::Capped,
            Point::Gnuradio,
            Point::DmaflowToGnuradio,
            Point::GnuradioToDmaflow,
        ]);
    }
    p
}

/// One point at one size: per round, seconds and receiver CPU seconds.
#[derive(Debug, Clone)]
pub struct Row {
    /// Message (or item) size in bytes.
    pub size: usize,
    /// The way through.
    pub point: Point,
    /// Bytes per round.
    pub bytes: usize,
    /// Receiver's seconds and CPU seconds, per round.
    pub timed: Timed,
    /// Mean message bytes per round where known (the messages dmaflow's
    /// receiver counted, or the cap dmaflow's sender used).
    pub message_bytes: Vec<f64>,
    /// Rounds in which GNU Radio's receiver stalled (its seconds `NaN`,
    /// left out of the medians and ratios).
    pub stalls: usize,
    /// Payload bytes copied (by both ends) per byte delivered, per round,
    /// where both ends are dmaflow's or the raw loops.
    pub copies: Vec<f64>,
}

impl Row {
    /// Throughput in MB/s over the rounds that did not stall.
    pub fn mbps(&self) -> Spread {
        Spread::of(&finite(&self.per_round()))
    }

    /// MB/s per round (`NaN` for a stalled round).
    fn per_round(&self) -> Vec<f64> {
        let rates = self.timed.rates(self.bytes as f64);
        rates.iter().map(|r| r / 1e6).collect()
    }
}

/// What a receiver found.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Received {
    /// Items received.
    pub items: u64,
    /// Wrapping sum of the items.
    pub checksum: u32,
    /// From the first data to the last.
    pub seconds: f64,
    /// The receiving process's CPU time meanwhile.
    pub cpu: f64,
    /// Messages received (0 where not counted).
    pub messages: u64,
    /// Payload bytes the receiving end copied (its edge's count; 0 for the
    /// raw loop, which reads each message in place).
    pub copied: u64,
}

/// A receiver's count: the items, their wrapping sum and the messages, and
/// the span from the first arrival (data or the end of the stream) to the
/// last data marked, or else to the end, on the wall clock and the process's
/// CPU clock.
#[derive(Default)]
struct Tally {
    got: Received,
    first: Option<(Instant, f64)>,
    last: Option<(Instant, f64)>,
}

impl Tally {
    /// Now on both clocks.
    fn now() -> (Instant, f64) {
        let cpu = dmaflow::platform::cpu::process_cpu_time;
        (Instant::now(), cpu().as_secs_f64())
    }

    /// Something arrived: the span starts, if it has not.
    fn arrived(&mut self) {
        self.first.get_or_insert_with(Self::now);
    }

    /// One more message of `n` items summing to `sum`.
    fn add(&mut self, n: usize, sum: u32) {
        self.got.items += n as u64;
        self.got.checksum = self.got.checksum.wrapping_add(sum);
        self.got.messages += 1;
    }

    /// What was received.
    fn received(self) -> Received {
        let (end, cpu1) = self.last.unwrap_or_else(Self::now);
        let (start, cpu0) = self.first.unwrap_or((end, cpu1));
        let (seconds, cpu) = ((end - start).as_secs_f64(), cpu1 - cpu0);
        Received {
            seconds,
            cpu,
            ..self.got
        }
    }
}

/// The receiving end, as `dmaflow net-peer` runs it: `point` is `dmaflow`
/// (a graph: network source -> checksum node), `from-gnuradio` (the same,
/// its stream ending 1 s after the last message, as GNU Radio sends no end
/// of stream) or `raw` (a PULL socket).
pub fn receive(point: &str, endpoint: &str) -> Result<Received, String> {
    let at = dmaflow_net::Endpoint::parse(endpoint).map_err(|e| e.to_string())?;
    if point == "raw" {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::PULL).map_err(|e| e.to_string())?;
        s.set_rcvhwm(16).map_err(|e| e.to_string())?;
        s.connect(at.as_str()).map_err(|e| e.to_string())?;
        let mut tally = Tally::default();
        loop {
            let m = s.recv_msg(0).map_err(|e| e.to_string())?;
            tally.arrived();
            if m.is_empty() {
                break;
            }
            let sum = m.chunks_exact(4).fold(0u32, |a, c| {
                a.wrapping_add(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            });
            tally.add(m.len() / 4, sum);
        }
        return Ok(tally.received());
    }
    let from_gnuradio = point == "from-gnuradio";
    if !from_gnuradio && point != "dmaflow" && point != "dmaflow-queue" {
        return Err(format!(
            "{point:?} is not a receiver: dmaflow, dmaflow-queue, from-gnuradio or raw"
        ));
    }
    if point != "dmaflow-queue" {
        return receive_in_place(at, from_gnuradio);
    }
    let mut g = Graph::new();
    let (out, mut inp) = g
        .connect_with_capacity::<u32>(("net", "out"), ("sum", "in"), 1 << 20)
        .map_err(|e| e.to_string())?;
    let mut edge = dmaflow_net::Edge::source(at);
    if from_gnuradio {
        edge.idle_timeout = Some(Duration::from_secs(1));
    }
    let stats = dmaflow_net::add_source(&mut g, "net", edge, out).map_err(|e| e.to_string())?;
    let (put, result) = std::sync::mpsc::channel();
    g.node("sum", move || {
        let mut tally = Tally::default();
        loop {
            let s = inp.peek(1)?;
            tally.arrived();
            if s.is_empty() {
                break;
            }
            let n = s.len();
            tally.add(n, s.iter().fold(0u32, |a, &x| a.wrapping_add(x)));
            inp.consume(n)?;
            if from_gnuradio {
                // The stream ends a second after this: the last data's
                // instant is the end of the timed span.
                tally.last = Some(Tally::now());
            }
        }
        let _ = put.send(tally.received());
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())?;
    let r = result.try_recv();
    let mut r = r.map_err(|_| "the receiver found nothing".to_string())?;
    r.messages = stats.snapshot().0;
    r.copied = stats.copied.load(std::sync::atomic::Ordering::Relaxed);
    Ok(r)
}

/// dmaflow's receiver whose checksum runs on each message where it landed
/// (`dmaflow_net::add_source_with`): no queue, no copy.
fn receive_in_place(at: dmaflow_net::Endpoint, from_gnuradio: bool) -> Result<Received, String> {
    let mut g = Graph::new();
    let mut edge = dmaflow_net::Edge::source(at);
    if from_gnuradio {
        edge.idle_timeout = Some(Duration::from_secs(1));
    }
    let tally = std::sync::Arc::new(std::sync::Mutex::new(Tally::default()));
    let keep = tally.clone();
    let stats = dmaflow_net::add_source_with::<u32, _>(&mut g, "net", edge, move |s| {
        if s.is_empty() {
            return Ok(());
        }
        let mut t = keep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.arrived();
        t.add(s.len(), s.iter().fold(0u32, |a, &x| a.wrapping_add(x)));
        if from_gnuradio {
            // The stream ends a second after this: the last data's
            // instant is the end of the timed span.
            t.last = Some(Tally::now());
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    g.run().map_err(|e| e.to_string())?;
    let t = std::mem::take(
        &mut *tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let mut r = t.received();
    r.messages = stats.snapshot().0;
    r.copied = stats.copied.load(std::sync::atomic::Ordering::Relaxed);
    Ok(r)
}

/// Sends `bytes` as `u32` counters at `endpoint` (bound), then the end of
/// stream: by bare loops in messages of `size` bytes, or by dmaflow's sink
/// with at most `max_items` `u32` items a message. Returns the payload
/// bytes the sending end copied (the raw loop writes its counters straight
/// into each message: none).
fn send(
    max_items: Option<usize>,
    endpoint: &str,
    size: usize,
    bytes: usize,
) -> Result<u64, String> {
    let at = dmaflow_net::Endpoint::parse(endpoint).map_err(|e| e.to_string())?;
    let items = bytes / 4;
    let Some(max_items) = max_items else {
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
        return Ok(0);
    };
    let mut g = Graph::new();
    // Room for eight whole messages: the sink sends from the queue's slots
    // and gets them back only once ZeroMQ has let go of each message, so
    // the queue bounds what is in flight (raw ZeroMQ has its high-water
    // mark's worth, 16 messages, queued); and a sink whose message is
    // larger than its queue waits for ever (see BENCHMARKS.md, "Net").
    let capacity = (1usize << 18).max(8 * max_items).next_power_of_two();
    let (mut out, inp) = g
        .connect_with_capacity::<u32>(("count", "out"), ("net", "in"), capacity)
        .map_err(|e| e.to_string())?;
    let mut edge = dmaflow_net::Edge::sink(at);
    edge.max_items = max_items.max(1);
    let stats = dmaflow_net::add_sink(&mut g, "net", edge, inp).map_err(|e| e.to_string())?;
    // The producer writes in its own batches; the edge cuts them into
    // messages.
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
    g.run().map_err(|e| e.to_string())?;
    Ok(stats.copied.load(std::sync::atomic::Ordering::Relaxed))
}

/// The largest message of the batched point: the network sink's default
/// (`Edge::max_items` of `u32`s), or one item where an item is larger.
const BATCHED_BYTES: usize = 1 << 18;

/// `u32` items a message of whole `size`-byte items up to `cap` bytes holds
/// (at least one item).
fn items_for(size: usize, cap: usize) -> usize {
    let per_item = (size / 4).max(1);
    (cap / 4 / per_item).max(1) * per_item
}

/// Writes a file of `bytes` bytes of `u32` counters (0, 1, 2, ...) in `dir`,
/// what GNU Radio's sender sends and its receiver's output is compared with.
fn counters(dir: &Path, bytes: usize) -> Result<PathBuf, Error> {
    let path = dir.join(format!("counters-{bytes}.u32"));
    let data: Vec<u8> = (0..(bytes / 4) as u32).flat_map(u32::to_le_bytes).collect();
    std::fs::write(&path, data).map_err(Error::io(path.display()))?;
    Ok(path)
}

/// Waits for GNU Radio's receiver and reads its line.
fn gnuradio_received(rx: Peer, bytes: usize, size: usize) -> Result<Received, Error> {
    let out = rx.wait_within(GR_RX_LIMIT).map_err(|e| match e {
        Error::Peer { reason, .. } => Error::Peer {
            peer: STALLED,
            reason,
        },
        other => other,
    })?;
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let f: Vec<f64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let fail = |why: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr = stderr.trim();
        Error::peer("gnuradio")(format!(
            "receiver {why} ({}): said {line:?}; {stderr}",
            out.status
        ))
    };
    if !out.status.success() || f.len() != 4 {
        return Err(fail("failed"));
    }
    if f[3] != 1.0 || f[2] as usize != bytes / size {
        return Err(fail("received other data than was sent"));
    }
    Ok(Received {
        items: (bytes / 4) as u64,
        checksum: series(0, (bytes / 4) as u64),
        seconds: f[0],
        cpu: f[1],
        messages: 0,
        copied: 0,
    })
}

/// Closes GNU Radio's sender's standard input and waits for it.
fn gnuradio_done(mut tx: Peer) -> Result<(), Error> {
    drop(tx.stdin());
    let out = tx.wait_within(PEER_LIMIT)?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = format!("sender failed ({}): {}", out.status, stderr.trim());
        return Err(Error::peer("gnuradio")(why));
    }
    Ok(())
}

/// A receiver at work: dmaflow's or the raw one ([`receive`]'s `point`) in
/// a child process (`dmaflow net-peer`) or on a thread of this one, or GNU
/// Radio's.
enum Receiver {
    Thread(std::thread::JoinHandle<Result<Received, String>>),
    Child(Peer),
    Gnuradio(Peer),
}

impl Receiver {
    /// Starts the receiver `point` at `endpoint`.
    fn start(cfg: &Config, point: &str, endpoint: &str) -> Result<Receiver, Error> {
        if cfg.in_process {
            let (point, at) = (point.to_string(), endpoint.to_string());
            let thread = std::thread::spawn(move || receive(&point, &at));
            return Ok(Receiver::Thread(thread));
        }
        let exe = std::env::current_exe().map_err(Error::io("the dmaflow binary"))?;
        let mut cmd = Command::new(exe);
        cmd.args(["net-peer", "--point", point, "--endpoint", endpoint]);
        let peer = Peer::spawn(&mut cmd, Stdio::null(), "dmaflow net-peer")?;
        Ok(Receiver::Child(peer))
    }

    /// What it received of `bytes` in `size`-byte messages, `point` naming
    /// it in an error.
    fn received(self, point: Point, bytes: usize, size: usize) -> Result<Received, Error> {
        let fail = Error::peer(point.name());
        let out = match self {
            Receiver::Thread(t) => {
                let got = t.join().map_err(|_| Error::Panicked("net receiver"))?;
                return got.map_err(fail);
            }
            Receiver::Child(child) => child.wait_within(PEER_LIMIT)?,
            Receiver::Gnuradio(rx) => return gnuradio_received(rx, bytes, size),
        };
        if !out.status.success() {
            return Err(fail(String::from_utf8_lossy(&out.stderr).into_owned()));
        }
        let line = out.stdout.lines().next().and_then(Result::ok);
        let line = line.unwrap_or_default();
        parse_received(&line).ok_or_else(|| fail(format!("net-peer said {line:?}")))
    }
}

/// One measurement of `point` at `size`; `cap` is GNU Radio's mean message
/// size at this item size (bytes), `files` the counters file GNU Radio's
/// ends use and the directory its receiver writes in.
fn measure(
    cfg: &Config,
    point: Point,
    size: usize,
    cap: usize,
    files: Option<(&Path, &Path)>,
) -> Result<Received, Error> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(Error::io("a free TCP port"))?
        .port();
    let endpoint = format!("tcp://127.0.0.1:{port}");
    let fail = Error::peer::<String>(point.name());
    let bytes = cfg.bytes_for(size);
    let sender = match point {
        Point::Raw => None,
        Point::Dmaflow | Point::Queued => Some(items_for(size, size)),
        Point::Batched => Some(items_for(size, BATCHED_BYTES)),
        _ => Some(items_for(size, cap)),
    };
    let (data, out) = match (point.gnuradio(), files) {
        (false, _) => (Path::new(""), PathBuf::new()),
        (true, Some((data, dir))) => (data, dir.join("received.bin")),
        (true, None) => return Err(fail("GNU Radio's files are missing".into())),
    };
    // GNU Radio's script: its sender binds and keeps its socket open until
    // its standard input is closed; its receiver connects.
    let gnuradio = |role| {
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args(["-c", GNURADIO_SCRIPT, role, &size.to_string()]);
        if role == "tx" {
            let cmd = cmd.arg(data).arg(&endpoint);
            return Peer::spawn(cmd, Stdio::piped(), "GNU Radio's sender");
        }
        cmd.arg(bytes.to_string())
            .arg(&endpoint)
            .arg(&out)
            .arg(data);
        Peer::spawn(&mut cmd, Stdio::null(), "GNU Radio's receiver")
    };
    let rx = match point {
        Point::Gnuradio | Point::DmaflowToGnuradio => Receiver::Gnuradio(gnuradio("rx")?),
        Point::Raw => Receiver::start(cfg, "raw", &endpoint)?,
        Point::GnuradioToDmaflow => Receiver::start(cfg, "from-gnuradio", &endpoint)?,
        Point::Queued => Receiver::start(cfg, "dmaflow-queue", &endpoint)?,
        _ => Receiver::start(cfg, "dmaflow", &endpoint)?,
    };
    let got = match point {
        Point::Gnuradio | Point::GnuradioToDmaflow => {
            let tx = gnuradio("tx")?;
            // A failed receiver leaves the sender blocked: it is killed.
            let got = rx.received(point, bytes, size)?;
            gnuradio_done(tx)?;
            got
        }
        Point::DmaflowToGnuradio => {
            // The sender on a thread, so that a stalled receiver is waited
            // for with a limit; once it is killed, dmaflow's sink gives up
            // within its grace (5 s), or is left behind.
            let (done, finished) = std::sync::mpsc::channel();
            let at = endpoint.clone();
            std::thread::spawn(move || {
                let _ = done.send(send(sender, &at, size, bytes));
            });
            let got = rx.received(point, bytes, size);
            let sent = finished
                .recv_timeout(Duration::from_secs(15))
                .unwrap_or_else(|_| Err("dmaflow's sender did not finish".into()));
            let mut got = got?;
            got.copied += sent.map_err(fail)?;
            got
        }
        _ => {
            let copied = send(sender, &endpoint, size, bytes).map_err(fail)?;
            let mut got = rx.received(point, bytes, size)?;
            got.copied += copied;
            got
        }
    };
    if point.gnuradio() {
        let _ = std::fs::remove_file(&out);
    }
    let items = (bytes / 4) as u64;
    let expected = series(0, items);
    if got.items != items || got.checksum != expected {
        return Err(Error::Corrupted {
            what: format!(
                "net {} {size} B: {} of {items} items",
                point.name(),
                got.items
            ),
            got: got.checksum,
            expected,
        });
    }
    Ok(got)
}

/// The line `dmaflow net-peer` prints.
pub fn received_line(r: &Received) -> String {
    format!(
        "{} {} {} {} {} {}",
        r.items, r.checksum, r.seconds, r.cpu, r.messages, r.copied
    )
}

fn parse_received(line: &str) -> Option<Received> {
    let f: Vec<&str> = line.split_whitespace().collect();
    Some(Received {
        items: f.first()?.parse().ok()?,
        checksum: f.get(1)?.parse().ok()?,
        seconds: f.get(2)?.parse().ok()?,
        cpu: f.get(3)?.parse().ok()?,
        messages: f.get(4)?.parse().ok()?,
        copied: f.get(5)?.parse().ok()?,
    })
}

/// Runs the experiment.
pub fn run(cfg: &Config, progress: Progress) -> Result<Vec<Row>, Error> {
    let mut rows = Vec::new();
    let points = points();
    let with_gnuradio = points.contains(&Point::Gnuradio);
    for &size in &cfg.sizes {
        let bytes = cfg.bytes_for(size);
        // GNU Radio's ends read the counters from tmpfs and write there.
        let dir = with_gnuradio.then(|| ScratchDir::under(&tmpfs(), "dmaflow-net"));
        let dir = dir.transpose()?;
        let data = dir.as_ref().map(|d| counters(d.path(), bytes));
        let data = data.transpose()?;
        let files = data.as_deref().zip(dir.as_ref().map(ScratchDir::path));
        // GNU Radio's message size at this item size, measured before the
        // rounds (dmaflow's receiver counts the messages), caps dmaflow's.
        let cap = if with_gnuradio {
            progress(&format!("net: {size} B items, GNU Radio's message size"));
            let got = measure(cfg, Point::GnuradioToDmaflow, size, size, files)?;
            (bytes / got.messages.max(1) as usize).max(size)
        } else {
            BATCHED_BYTES
        };
        let mut at: Vec<Row> = points
            .iter()
            .map(|&point| Row {
                size,
                point,
                bytes,
                timed: Timed::default(),
                message_bytes: Vec::new(),
                stalls: 0,
                copies: Vec::new(),
            })
            .collect();
        let seconds = in_turns(points.len(), cfg.rounds, |i, round| {
            let row = &mut at[i];
            let point = row.point;
            progress(&format!(
                "net: {size} B, {} round {}",
                point.name(),
                round + 1
            ));
            let got = match measure(cfg, point, size, cap, files) {
                Err(Error::Peer { peer: STALLED, .. }) => {
                    row.stalls += 1;
                    row.timed.cpu.push(f64::NAN);
                    return Ok(f64::NAN);
                }
                other => other?,
            };
            row.timed.cpu.push(got.cpu);
            let shown = match point {
                Point::Capped | Point::DmaflowToGnuradio => Some((items_for(size, cap) * 4) as f64),
                Point::Batched => Some((items_for(size, BATCHED_BYTES) * 4).min(bytes) as f64),
                Point::Dmaflow | Point::Queued | Point::Raw => Some(size as f64),
                Point::GnuradioToDmaflow => Some(bytes as f64 / got.messages.max(1) as f64),
                Point::Gnuradio => None,
            };
            row.message_bytes.extend(shown);
            if !point.gnuradio() {
                row.copies.push(got.copied as f64 / bytes as f64);
            }
            Ok::<_, Error>(got.seconds)
        })?;
        for (row, seconds) in at.iter_mut().zip(seconds) {
            row.timed.seconds = seconds;
        }
        rows.extend(at);
    }
    Ok(rows)
}

/// Point `mine`'s throughput over point `other`'s per size, round by round.
fn shares(rows: &[Row], mine: Point, other: Point) -> Vec<(usize, Ratio)> {
    rows.iter()
        .filter(|d| d.point == mine)
        .filter_map(|d| {
            let r = rows.iter().find(|r| r.size == d.size && r.point == other)?;
            // Round by round, leaving out rounds where either stalled.
            let (a, b): (Vec<f64>, Vec<f64>) = d
                .per_round()
                .into_iter()
                .zip(r.per_round())
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .unzip();
            Some((d.size, Ratio::of(&a, &b)))
        })
        .collect()
}

/// The finite samples of `v` (a stalled round's are `NaN`).
fn finite(v: &[f64]) -> Vec<f64> {
    v.iter().copied().filter(|x| x.is_finite()).collect()
}

/// The points' columns.
fn row_columns<'a>() -> Columns<'a, Row> {
    let cpu = |r: &Row| median(&finite(&r.timed.cpu));
    let secs = |r: &Row| median(&finite(&r.timed.seconds));
    Columns::new()
        .shown_as("size", "message_bytes", |r: &Row| r.size, bytes_label)
        .plain("point", "point", |r| r.point.name())
        .kept("does", |r| r.point.does())
        .fixed("MB/s", "mb_per_s", 0, |r| r.mbps().median)
        .shown("range", |r| {
            format!("{:.0}..{:.0}", r.mbps().min, r.mbps().max)
        })
        .kept("mb_per_s_min", |r| r.mbps().min)
        .kept("mb_per_s_max", |r| r.mbps().max)
        .kept("mb_per_s_spread", Row::mbps)
        .kept("rounds", |r| r.timed.seconds.len())
        .shown("Mitems/s", move |r| {
            format!("{:.1}", r.bytes as f64 / 4.0 / secs(r) / 1e6)
        })
        .fixed("rx_cpu_share", "rx_cpu_share", 2, move |r| cpu(r) / secs(r))
        .kept("rx_cpu_us_per_mb", move |r| {
            cpu(r) / (r.bytes as f64 / 1e6) * 1e6
        })
        .optional("msg_bytes", "sent_message_bytes", 0, |r| {
            (!r.message_bytes.is_empty()).then(|| median(&r.message_bytes))
        })
        .optional("copies/B", "copied_per_byte", 2, |r| {
            (!r.copies.is_empty()).then(|| median(&r.copies))
        })
        .plain("stalls", "stalled_rounds", |r| r.stalls)
}

/// The comparison with GNU Radio's columns, per item size: capped/gnuradio
/// and the other points' ratios over the same size.
fn against_columns(rows: &[Row]) -> Columns<'_, (usize, Ratio)> {
    let text = |r: Option<Spread>| r.map_or("-".into(), |r| Ratio(r).text());
    let mut cols = Columns::new()
        .shown_as(
            "items",
            "item_bytes",
            |&(s, _): &(usize, Ratio)| s,
            bytes_label,
        )
        .shown_as(
            "capped/gnuradio",
            "capped_over_gnuradio",
            |(_, r)| Some(r.0),
            text,
        )
        .shown("verdict", |(_, r)| r.verdict().to_string())
        .kept("capped_over_gnuradio_measurable", |(_, r)| r.measurable());
    for (header, key, a, b) in [
        (
            "batched/gnuradio",
            "batched_over_gnuradio",
            Point::Batched,
            Point::Gnuradio,
        ),
        (
            "batched/capped",
            "batched_over_capped",
            Point::Batched,
            Point::Capped,
        ),
        (
            "gr->dmaflow / gnuradio",
            "gnuradio_to_dmaflow_over_gnuradio",
            Point::GnuradioToDmaflow,
            Point::Gnuradio,
        ),
        (
            "dmaflow->gr / gnuradio",
            "dmaflow_to_gnuradio_over_gnuradio",
            Point::DmaflowToGnuradio,
            Point::Gnuradio,
        ),
    ] {
        let v = shares(rows, a, b);
        let at = move |&(s, _): &(usize, Ratio)| v.iter().find(|(z, _)| *z == s).map(|(_, r)| r.0);
        cols = cols.shown_as(header, key, at, text);
    }
    cols
}

/// One size against the raw ceiling: dmaflow's and dmaflow-queue's
/// throughput over raw's, round by round, and each point's copies.
struct AgainstRaw {
    size: usize,
    /// The target for dmaflow/raw at this size, in percent.
    goal: Option<u32>,
    dmaflow: Option<Ratio>,
    queued: Option<Ratio>,
    /// Median bytes copied per byte delivered: dmaflow, dmaflow-queue, raw.
    copies: [Option<f64>; 3],
}

/// The target share of raw ZeroMQ at `size`, in percent.
fn raw_goal(size: usize) -> Option<u32> {
    match size {
        s if s >= 1 << 20 => Some(100),
        s if s >= 64 << 10 => Some(95),
        s if s <= 64 => Some(85),
        _ => None,
    }
}

/// Each size's comparison with the raw ceiling.
fn raw_rows(rows: &[Row]) -> Vec<AgainstRaw> {
    let dmaflow = shares(rows, Point::Dmaflow, Point::Raw);
    let queued = shares(rows, Point::Queued, Point::Raw);
    let copies = |size, point| {
        let r = rows.iter().find(|r| r.size == size && r.point == point)?;
        (!r.copies.is_empty()).then(|| median(&r.copies))
    };
    dmaflow
        .iter()
        .map(|&(size, r)| AgainstRaw {
            size,
            goal: raw_goal(size),
            dmaflow: Some(r),
            queued: queued.iter().find(|(s, _)| *s == size).map(|&(_, q)| q),
            copies: [
                copies(size, Point::Dmaflow),
                copies(size, Point::Queued),
                copies(size, Point::Raw),
            ],
        })
        .collect()
}

/// The comparison with the raw ceiling's columns.
fn raw_columns<'a>() -> Columns<'a, AgainstRaw> {
    let pct = |r: Option<Ratio>| {
        r.map_or("-".into(), |r| {
            let s = r.0.scaled(100.0);
            format!("{:.0} % ({:.0}..{:.0})", s.median, s.min, s.max)
        })
    };
    let spread = |r: Option<Ratio>| r.map(|r| r.0);
    let copies = |c: Option<f64>| c.map_or("-".into(), |c| format!("{c:.2}"));
    Columns::new()
        .shown_as(
            "size",
            "message_bytes",
            |r: &AgainstRaw| r.size,
            bytes_label,
        )
        .shown("dmaflow/raw", move |r| pct(r.dmaflow))
        .kept("dmaflow_over_raw", move |r| spread(r.dmaflow))
        .shown("goal", |r| {
            r.goal.map_or("-".into(), |g| format!(">= {g} %"))
        })
        .kept("goal_pct", |r| r.goal)
        .shown("verdict", |r| {
            r.dmaflow.map_or("-", |d| d.verdict()).to_string()
        })
        .shown("dmaflow copies/B", move |r| copies(r.copies[0]))
        .kept("dmaflow_copied_per_byte", |r| r.copies[0])
        .shown("dmaflow-queue/raw", move |r| pct(r.queued))
        .kept("dmaflow_queue_over_raw", move |r| spread(r.queued))
        .shown("dmaflow-queue copies/B", move |r| copies(r.copies[1]))
        .kept("dmaflow_queue_copied_per_byte", |r| r.copies[1])
        .shown("raw copies/B", move |r| copies(r.copies[2]))
        .kept("raw_copied_per_byte", |r| r.copies[2])
}

/// The report.
pub fn report(cfg: &Config, rows: &[Row]) -> Report {
    let columns = row_columns();
    let mut text = columns.table(rows);
    text += "stalls: rounds in which GNU Radio's receiver had not taken every item after 30 s \
             (it was stopped; those rounds are left out of the medians and ratios)\n";
    text += "what each point does (sender | receiver):\n";
    for r in first_of_each(rows, |r| r.point) {
        text += &format!("  {}: {}\n", r.point.name(), r.point.does());
    }
    let mut targets = Vec::new();
    let equal = shares(rows, Point::Capped, Point::Gnuradio);
    if !equal.is_empty() {
        text += "\nagainst GNU Radio (throughput ratios, median and min..max of the rounds; \
                 default/default = batched/capped (message size) x capped/gnuradio (the ends), \
                 round by round; the crossed edges put one dmaflow end in place of GNU Radio's):\n";
        text += &against_columns(rows).table(&equal);
        for (size, r) in &equal {
            let what = "GNU Radio's push_sink -> pull_source at the same message size";
            let what = format!("{} items: dmaflow >= {what}", bytes_label(*size));
            let found = format!("{} ({})", r.text(), r.verdict());
            targets.push(Target::new(what, found, r.0.median >= 1.0));
        }
    }
    let raw = shares(rows, Point::Dmaflow, Point::Raw);
    let against_raw = raw_rows(rows);
    if !against_raw.is_empty() {
        text += "\nagainst the raw ceiling (throughput ratios, median and min..max of the \
                 rounds, round by round; copies/B: payload bytes both ends copied per byte \
                 delivered, median of the rounds; goal: this size's target):\n";
        text += &raw_columns().table(&against_raw);
    }
    for r in &against_raw {
        let (Some(goal), Some(share)) = (r.goal, r.dmaflow) else {
            continue;
        };
        let s = share.0.scaled(100.0);
        let label = bytes_label(r.size);
        let what = format!("{label} messages: dmaflow >= {goal} % of raw ZeroMQ");
        targets.push(Target::new(
            what,
            format!("{:.0} % ({:.0}..{:.0} %)", s.median, s.min, s.max),
            s.median >= goal as f64,
        ));
    }
    let list = |v: &[(usize, Ratio)], f: &dyn Fn(f64) -> String| {
        v.iter()
            .map(|(s, r)| format!("{} {}", bytes_label(*s), f(r.0.median)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut clauses = vec![format!(
        "dmaflow's share of the raw ZeroMQ throughput: {}",
        list(&raw, &|m| format!("{:.0} %", m * 100.0))
    )];
    if !equal.is_empty() {
        clauses.push(format!(
            "against GNU Radio's lean ends at GNU Radio's own message size: {}",
            list(&equal, &|m| format!("{m:.2}x"))
        ));
    }
    let how = if cfg.in_process {
        " (threads, in process)"
    } else {
        ""
    };
    let heading = format!(
        "net: a dmaflow ZeroMQ edge between two processes{how} over loopback TCP vs bare \
         PUSH/PULL of the same libzmq and GNU Radio's gr-zeromq, 100 000 messages ({}..{} \
         MiB) per measurement, {} rounds, interleaved",
        cfg.bytes.0 >> 20,
        cfg.bytes.1 >> 20,
        cfg.rounds
    );
    Report::of("net", heading, &columns, rows)
        .text(text)
        .answer(super::report::sentence(&clauses))
        .targets(targets)
        .kept("against_gnuradio", against_columns(rows).json(&equal))
        .kept("against_raw", raw_columns().json(&against_raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways deliver every byte (the checksum is checked inside) and the
    /// report names each size's share.
    #[test]
    fn both_points_deliver_every_item() {
        let cfg = Config {
            in_process: true,
            ..Config::at(&Setup::TINY)
        };
        let rows = run(&cfg, &mut |m| eprintln!("{m}")).unwrap();
        let gr = gnuradio_here();
        assert_eq!(rows.len(), if gr { 16 } else { 8 });
        assert!(
            rows.iter()
                .all(|r| r.timed.seconds.len() == 2 && r.timed.seconds.iter().all(|s| *s > 0.0))
        );
        let rep = report(&cfg, &rows);
        assert!(rep.text.contains("against the raw ceiling"), "{}", rep.text);
        assert!(rep.text.contains("dmaflow copies/B"), "{}", rep.text);
        // Batched, 64-byte items go many to a message.
        assert!(rep.text.contains("dmaflow-batched"), "{}", rep.text);
        assert_eq!(
            parse_received(&received_line(&Received {
                items: 3,
                checksum: 7,
                seconds: 0.5,
                cpu: 0.25,
                messages: 2,
                copied: 5,
            }))
            .unwrap()
            .checksum,
            7
        );
    }
}
