//! `dmaflow bench ring`: single-producer, single-consumer throughput of the
//! mirrored queue against other Rust queues, and of a sliding-window reader
//! with and without the overlap copy.
//!
//! Items are `f32`, each written in place with its sequence number as its
//! bits; the consumer folds every item into a wrapping sum of the bits (it
//! vectorises: the queue, not the per-item work, is measured), verified.
//! Every queue runs on the same terms: the same batches, the consumer taking
//! whatever is readable as soon as anything is, both sides waiting on one
//! schedule (dmaflow's `Wait::Yield`: spin as long as a `sched_yield` costs on
//! this machine, [`dmaflow::ring::Calibration`], then yield; the peers through
//! [`dmaflow::ring::Backoff`], the same code), no allocation per batch
//! (crossbeam's batches are buffers passed back and forth), the threads pinned
//! as [`queues::together`] pins them, implementations taking turns with the
//! order reversed every other round. Apart from those rows, so that the table
//! says what the queue costs and what the wait costs: dmaflow under each wait
//! it offers (`dmaflow-spin`, `dmaflow-block`: its default), and each peer
//! as a user gets it out of the box (`-own`: see [`queues::Waits::Own`]).
//! The `bound` row does the same work with no queue (each thread on a private
//! buffer of the queue's size): a row faster than it by more than the
//! run-to-run spread is flagged as implausible. Beside each stream's rate,
//! the items its reader took per look that found any: one batch when the
//! reader reads each batch as it lands (the two cores then hand the cursor's
//! and the data's cache lines back and forth every batch), many when it reads
//! behind the writer; rows of one queue at one batch size that differ in rate
//! differ there too.

use std::fmt;
use std::time::{Duration, Instant};

use dmaflow::ring::{Builder, Calibration, Reader, Wait};

use super::columns::Columns;
use super::conditions::Conditions;
use super::error::Error;
use super::frame::{Bench, Findings, Plot, Point, Row};
use super::harness::{Setup, Tier, bytes_label};
use super::peers::{Peer, checksum, fill, series};
use super::plot::XAxis;
use super::queues::{self, Shape, first, pin_to, two_threads};
use super::report::{Target, within};
use super::spread::Ratio;

/// `dmaflow bench ring`.
pub static EXPERIMENT: Bench<Config, Batch, Sample> = Bench {
    name: "ring",
    // The queue's experiment: the peer table with its cross-process rows,
    // then the readers' table in GNU Radio 4's shape.
    then: Some("readers"),
    emulator_only: "it measures queues on this machine, not a DMA device",
    question: "Mirrored queue vs other queues, the sliding-window reader and the queue shared \
               between processes; then `readers`.",
    conditions: Conditions {
        timed: "from the first worker thread's start to the last one's end, each \
                instant read on its own thread",
        against: "rtrb, ringbuf, vmcircbuffer (lock-free) and crossbeam-channel on equal \
                  terms (one wait schedule for every queue: dmaflow's Wait::Yield, spin as \
                  long as a sched_yield costs here, then yield), again each with its own \
                  default wait (-own rows; dmaflow's is Wait::Block), and a no-queue bound \
                  (the same work, no hand-over)",
        model: "none: every figure is the queues' own",
        paper: "paper 001 measured its queue inside an FFT filter, not alone; threads are \
                pinned to this VM's two cores",
    },
    // The wait costs measured before the first round, on this unpinned
    // thread, as the reading process measures its own: not in a pinned
    // thread's first wait, timed.
    prepare: |_, _| {
        let _ = Calibration::get();
        Ok(())
    },
    turns_within: Some((group, "batch size and case")),
    plots: &[Plot {
        title: "Queue throughput against batch size",
        x: "batch_bytes",
        y: "gbytes_per_s",
        interval: None,
        y_scale: 1.0,
        lines: &["impl", "case"],
        axis: XAxis::Bytes,
        log_y: true,
    }],
    heading,
    findings,
    ..Bench::new(Config::at, |c| c.rounds, points, measure, columns)
};

/// Size of one item in bytes.
const ITEM: usize = std::mem::size_of::<f32>();

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Bytes streamed per measurement.
    pub total_bytes: usize,
    /// Rounds: every point is measured once a round.
    pub rounds: usize,
    /// Producer batch sizes in bytes (each a multiple of 4 and a divisor of
    /// `total_bytes` and `queue_bytes`).
    pub batches: Vec<usize>,
    /// Capacity of every queue under test, in bytes.
    pub queue_bytes: usize,
    /// The `dmaflow` program to run as the reading process of the
    /// cross-process row (`dmaflow shm-reader`); `None` leaves the row out.
    pub reader: Option<std::path::PathBuf>,
}

impl Config {
    /// The size `setup` asks for: the full run, or the quick or tiny one
    /// made from it.
    pub fn at(setup: &Setup) -> Self {
        let full = Config {
            total_bytes: 512 << 20,
            rounds: 11,
            batches: vec![64, 4 << 10, 64 << 10],
            queue_bytes: 256 << 10,
            reader: std::env::current_exe().ok(),
        };
        match setup.tier {
            Tier::Full => full,
            Tier::Quick => Config {
                total_bytes: 128 << 20,
                rounds: 7,
                ..full
            },
            Tier::Tiny => Config {
                total_bytes: 1 << 20,
                rounds: 1,
                batches: vec![64, 4 << 10],
                queue_bytes: 64 << 10,
                // A test binary is not `dmaflow`: the cross-process row needs
                // the program's path (the CLI's tests give it).
                reader: None,
            },
        }
    }
}

/// Where a point is: the producer's batch (and, for the window cases, the
/// hop) in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Batch(pub usize);

impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} batches", bytes_label(self.0))
    }
}

/// What one measurement of a point gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Throughput in 10^9 bytes of stream per second.
    pub gbytes_per_s: f64,
    /// Items the reader took per look at the queue that found any (the
    /// stream cases; `NaN` where no reader looks: `bound`, the windows).
    pub items_per_look: f64,
}

/// A sample's items per look.
fn per_look(s: &Sample) -> f64 {
    s.items_per_look
}

/// A sample's throughput: the figure every column and finding reads.
fn gbps(s: &Sample) -> f64 {
    s.gbytes_per_s
}

/// The series of dmaflow's reader taking sliding windows in place.
const WINDOW: &str = "dmaflow window";

/// The series of the reader that copies each window's overlap out.
const WINDOW_COPY: &str = "dmaflow window-copy";

/// A series' implementation (the JSON's `impl`): its first word.
fn implementation(series: &'static str) -> &'static str {
    series.split_once(' ').map_or(series, |(i, _)| i)
}

/// A series' case (the JSON's `case`): its second word, `stream` without one.
fn case(series: &'static str) -> &'static str {
    series.split_once(' ').map_or("stream", |(_, c)| c)
}

/// How far above the no-queue bound (as a share of it) a typical figure may lie
/// before it is flagged: the rounds' spread on this kind of machine.
const IMPLAUSIBLE: f64 = 1.25;

/// Whether the row beats the no-queue bound of its batch by more than the
/// spread allows: a measurement error, not a queue.
fn implausible(r: &Row<Batch, Sample>) -> bool {
    r.point.series != "bound"
        && r.typical_of("bound", gbps)
            .is_some_and(|b| r.typical(gbps) > IMPLAUSIBLE * b)
}

/// The producer of every dmaflow case: takes dmaflow's writer `w` (in this
/// process or shared between processes: the same calls) and writes the
/// batches of [`Shape`] `sh` into it, each filled in place; the writer is
/// dropped (the end of the stream) when it is done.
macro_rules! batches_into {
    ($w:ident, $sh:ident) => {{
        let (nb, bi) = ($sh.batches, $sh.batch);
        move || -> Result<(), Error> {
            let mut w = $w;
            for b in 0..nb {
                fill(w.reserve(bi)?, (b * bi) as u32);
                w.commit(bi)?;
            }
            Ok(())
        }
    }};
}

/// The checksum of everything dmaflow's reader `r` reads until the end of
/// the stream, whatever is readable as soon as anything is (as every peer
/// takes it); how many of its looks found items is added to `looks` (an
/// `AtomicU64`) at the end.
macro_rules! sum_readable {
    ($r:expr, $looks:expr) => {{
        let (mut sum, mut found) = (0u32, 0u64);
        loop {
            let s = $r.peek(1)?;
            if s.is_empty() {
                $looks.fetch_add(found, std::sync::atomic::Ordering::Relaxed);
                break sum;
            }
            found += 1;
            sum = sum.wrapping_add(checksum(s));
            let n = s.len();
            $r.consume(n)?;
        }
    }};
}

/// dmaflow's queue with the writer every dmaflow case shares (batches of
/// `sh.batch` items, filled in place), and `read` on the reader's side; both
/// sides wait as `wait` says.
fn dmaflow_case<C>(sh: &Shape, wait: Wait, read: C) -> Result<(f64, u32), Error>
where
    C: FnOnce(Reader<f32>) -> Result<u32, Error> + Send,
{
    let (w, r) = Builder::<f32>::new(sh.queue).wait(wait).build()?;
    two_threads("dmaflow", batches_into!(w, sh), move || read(r))
}

/// The stream with both sides waiting as `wait` says, the reader taking
/// whatever is readable and counting its looks into `sh.looks`.
fn dmaflow_sum(sh: &Shape, wait: Wait) -> Result<(f64, u32), Error> {
    let looks = &sh.looks;
    dmaflow_case(sh, wait, move |mut r| Ok(sum_readable!(r, looks)))
}

/// The stream on the wait schedule every queue shares (`Wait::Yield`).
fn dmaflow_stream(sh: &Shape) -> Result<(f64, u32), Error> {
    dmaflow_sum(sh, Wait::Yield)
}

/// The stream with both sides spinning.
fn dmaflow_spin(sh: &Shape) -> Result<(f64, u32), Error> {
    dmaflow_sum(sh, Wait::Spin)
}

/// The stream with both sides sleeping when they must wait (the default).
fn dmaflow_block(sh: &Shape) -> Result<(f64, u32), Error> {
    dmaflow_sum(sh, Wait::Block)
}

/// Sliding windows of `2 * hop` items, `hop` apart, read in place.
fn dmaflow_window(sh: &Shape) -> Result<(f64, u32), Error> {
    let hop = sh.batch;
    dmaflow_case(sh, Wait::Yield, move |mut r| {
        let mut sum = 0u32;
        loop {
            let s = r.peek(2 * hop)?;
            if s.len() < 2 * hop {
                return Ok(sum);
            }
            sum = sum.wrapping_add(checksum(&s[..2 * hop]));
            r.consume(hop)?;
        }
    })
}

/// The same windows, built by a reader that copies the overlap to the front of a
/// private buffer and the new hop after it (paper 001, §II).
fn copying_window(sh: &Shape) -> Result<(f64, u32), Error> {
    let hop = sh.batch;
    dmaflow_case(sh, Wait::Yield, move |mut r| {
        let mut buf = vec![0f32; 2 * hop];
        let mut sum = 0u32;
        let mut primed = false;
        loop {
            let s = r.peek(hop)?;
            if s.len() < hop {
                return Ok(sum);
            }
            buf.copy_within(hop.., 0);
            buf[hop..].copy_from_slice(&s[..hop]);
            r.consume(hop)?;
            if primed {
                sum = sum.wrapping_add(checksum(&buf));
            }
            primed = true;
        }
    })
}

/// Expected checksum of the window cases: every window `[k hop, k hop + 2 hop)`.
fn window_series(items: usize, hop: usize) -> u32 {
    let windows = (items / hop).saturating_sub(1);
    (0..windows).fold(0u32, |a, k| {
        a.wrapping_add(series((k * hop) as u64, (2 * hop) as u64))
    })
}

/// vmcircbuffer's queue, its reader taking whatever is readable, its sides
/// waiting as `waits` says.
#[cfg(feature = "peers")]
fn vmcircbuffer_stream(sh: &Shape, waits: queues::Waits) -> Result<(f64, u32), Error> {
    let stream = (sh.batches, sh.batch);
    let take = (None, &sh.looks);
    first(queues::vmcircbuffer(waits, sh.queue, 1, stream, take))
}

/// The same work with no queue: the producer fills and the consumer sums
/// batches of their own private buffer of the queue's size, on two threads
/// started together. What a queue adds (hand-over, shared cache lines, the
/// consumer reading what the producer wrote) only slows this down.
fn bound_stream(sh: &Shape) -> Result<(f64, u32), Error> {
    let (nb, bi, q) = (sh.batches, sh.batch, sh.queue);
    let mut src = vec![0f32; q];
    let mut dst = vec![0f32; q];
    // The consumer's buffer holds the stream's items where the queue would:
    // its sums are those of the stream, one queue-full at a time.
    two_threads(
        "bound",
        move || {
            for b in 0..nb {
                let off = (b * bi) % q;
                fill(&mut src[off..off + bi], (b * bi) as u32);
                std::hint::black_box(&mut src);
            }
            Ok(())
        },
        move || {
            fill(&mut dst, 0);
            let mut sum = 0u32;
            for b in 0..nb {
                let off = (b * bi) % q;
                sum = sum.wrapping_add(checksum(std::hint::black_box(&dst[off..off + bi])));
            }
            Ok(sum)
        },
    )
}

/// Now on the system-wide monotonic clock, in nanoseconds: comparable
/// between processes.
fn monotonic_ns() -> u64 {
    dmaflow::platform::cpu::monotonic().as_nanos() as u64
}

/// The queue shared between processes ([`dmaflow::ring::shm`]), both ends in
/// this process on two threads: the same protocol as between processes.
fn shm_threads(sh: &Shape) -> Result<(f64, u32), Error> {
    use dmaflow::ring::shm::{ShmConfig, ShmReader, ShmWriter};
    let w = ShmWriter::<f32>::create(sh.queue, &ShmConfig::default())?;
    let fd = w.fd().try_clone_to_owned();
    let fd = fd.map_err(Error::io("shared queue descriptor"))?;
    // SAFETY: only `w` writes the object.
    let mut r = unsafe { ShmReader::<f32>::from_fd(fd)? };
    let looks = &sh.looks;
    two_threads("dmaflow-shm", batches_into!(w, sh), move || {
        Ok(sum_readable!(r, looks))
    })
}

/// The reading end of the cross-process row, in a child process: attaches to
/// the queue at `path` on the second core, sums the stream and answers
/// `sum SUM end NS looks N` (the instant of its last item on the monotonic
/// clock; how many of its looks found items).
pub fn shm_reader(path: &std::path::Path) -> Result<String, Error> {
    // The wait costs measured before the pinning and the attach, as the
    // parent measures its own (`run`): on an unpinned thread, outside the
    // timed span.
    let _ = dmaflow::ring::Calibration::get();
    pin_to(1);
    // SAFETY: only the parent's writer writes the object.
    let mut r = unsafe { dmaflow::ring::shm::ShmReader::<f32>::open(path)? };
    let looks = std::sync::atomic::AtomicU64::new(0);
    let sum = sum_readable!(r, looks);
    let end = monotonic_ns();
    Ok(format!("sum {sum} end {end} looks {}", looks.into_inner()))
}

/// How many times the cross-process row starts its reading process before
/// it gives up: a process that never attaches, is evicted or never ends is
/// stopped and started again (each failure printed). Under user-mode
/// emulation (the ARM runs in CI) one has been seen never to attach; the
/// figure comes only from a start that ran to its end.
const PROCESS_STARTS: usize = 3;

/// The same queue with its reader in another process (this program run as
/// `dmaflow shm-reader`): time from the writer's start to the child's last
/// item, both on the monotonic clock.
fn shm_process(sh: &Shape) -> Result<(f64, u32), Error> {
    let mut failed = Vec::new();
    for start in 1..=PROCESS_STARTS {
        match shm_process_once(sh) {
            Ok(v) => return Ok(v),
            Err(e) => {
                eprintln!("dmaflow shm-reader, start {start} of {PROCESS_STARTS}: {e}");
                failed.push(e.to_string());
            }
        }
    }
    Err(Error::peer::<String>("dmaflow shm-reader")(format!(
        "{PROCESS_STARTS} starts failed: {}",
        failed.join("; ")
    )))
}

/// One start of the cross-process row's reading process.
fn shm_process_once(sh: &Shape) -> Result<(f64, u32), Error> {
    use dmaflow::ring::shm::{ShmConfig, ShmWriter};
    let path = super::peers::tmpfs().join(format!("dmaflow-bench-ring-{}", std::process::id()));
    let cfg = ShmConfig {
        path: Some(path.clone()),
        ..ShmConfig::default()
    };
    let w = ShmWriter::<f32>::create(sh.queue, &cfg)?;
    let fail = Error::peer::<String>("dmaflow shm-reader");
    let exe = sh
        .reader
        .as_ref()
        .ok_or_else(|| fail("no program to run as the reading process".into()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("shm-reader").arg("--path").arg(&path);
    let mut child = Peer::spawn(&mut cmd, std::process::Stdio::null(), "dmaflow shm-reader")?;
    // Attached within 20 s, looking every 50 ms whether the child ended
    // first (then what it said is the error).
    let t = Instant::now();
    let attached = loop {
        match w.wait_for_readers(1, Duration::from_millis(50)) {
            Ok(()) => break Ok(()),
            Err(e) if t.elapsed() >= Duration::from_secs(20) => break Err(Error::from(e)),
            Err(_) if !child.running()? => {
                let out = child.wait_within(Duration::from_secs(5))?;
                return Err(fail(format!(
                    "ended before attaching ({}; it said {:?})",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            Err(_) => {}
        }
    };
    let start = std::thread::scope(|s| {
        s.spawn(|| {
            pin_to(0);
            attached?;
            let t0 = monotonic_ns();
            batches_into!(w, sh)()?;
            Ok::<u64, Error>(t0)
        })
        .join()
        .map_err(|_| Error::Panicked("dmaflow-process"))?
    });
    // A reader that never attached is stopped now (dropping `child`), not
    // waited for. One that did has at most a queue's worth left to read once
    // the writer is done.
    let t0 = start?;
    let out = child.wait_within(Duration::from_secs(30))?;
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.split_whitespace()
            .skip_while(|w| *w != key)
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (out.status.success(), field("sum"), field("end")) {
        (true, Some(sum), Some(end)) => {
            sh.looked(field("looks").unwrap_or(0));
            Ok((end.saturating_sub(t0) as f64 / 1e9, sum as u32))
        }
        _ => Err(fail(format!(
            "answered {:?} ({}; it said {:?})",
            text.trim(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

type Measure = fn(&Shape) -> Result<(f64, u32), Error>;

/// Every series measured at one batch size, in the table's order: the
/// stream on dmaflow's queues (the reader in another process where
/// `process`), on each peer's, and with no queue; then the window cases.
fn contenders(process: bool) -> Vec<(&'static str, Measure)> {
    let mut v: Vec<(&'static str, Measure)> = vec![
        ("dmaflow", dmaflow_stream),
        ("dmaflow-spin", dmaflow_spin),
        ("dmaflow-block", dmaflow_block),
        ("dmaflow-shm", shm_threads),
    ];
    if process {
        v.push(("dmaflow-process", shm_process));
    }
    #[cfg(feature = "peers")]
    {
        use queues::Waits::{Own, Shared};
        v.extend([
            ("rtrb", (|sh| queues::rtrb(sh, Shared)) as Measure),
            ("ringbuf", |sh| queues::ringbuf(sh, Shared)),
            ("vmcircbuffer", |sh| vmcircbuffer_stream(sh, Shared)),
            ("crossbeam", |sh| queues::crossbeam(sh, Shared)),
            ("rtrb-own", |sh| queues::rtrb(sh, Own)),
            ("ringbuf-own", |sh| queues::ringbuf(sh, Own)),
            ("vmcircbuffer-own", |sh| vmcircbuffer_stream(sh, Own)),
            ("crossbeam-own", |sh| queues::crossbeam(sh, Own)),
        ]);
    }
    v.push(("bound", bound_stream));
    v.push((WINDOW, dmaflow_window));
    v.push((WINDOW_COPY, copying_window));
    v
}

/// Every series at every batch size.
fn points(cfg: &Config) -> Vec<Point<Batch>> {
    let mut v = Vec::new();
    for &b in &cfg.batches {
        for (series, _) in contenders(cfg.reader.is_some()) {
            v.push(Point {
                series,
                at: Batch(b),
            });
        }
    }
    v
}

/// The group a point takes turns in: its batch size and case (the
/// implementations of one case at one batch size take turns).
fn group(p: &Point<Batch>) -> String {
    format!("{} {}", p.at, case(p.series))
}

/// The stream one measurement at `batch_bytes` moves.
fn shape(cfg: &Config, batch_bytes: usize) -> Shape {
    let batch = batch_bytes / ITEM;
    let batches = cfg.total_bytes / ITEM / batch;
    Shape {
        items: batches * batch,
        batches,
        batch,
        queue: cfg.queue_bytes / ITEM,
        reader: cfg.reader.clone(),
        looks: Default::default(),
    }
}

/// One run of one point: its throughput, its checksum verified.
fn measure(cfg: &Config, p: &Point<Batch>) -> Result<Sample, Error> {
    let (_, run) = contenders(cfg.reader.is_some())
        .into_iter()
        .find(|(s, _)| *s == p.series)
        .ok_or_else(|| Error::Peer {
            peer: p.series,
            reason: "not built into this tool".into(),
        })?;
    let sh = shape(cfg, p.at.0);
    let (secs, sum) = run(&sh)?;
    let expected = match (case(p.series), p.series) {
        (_, "bound") => bound_series(&sh),
        ("stream", _) => series(0, sh.items as u64),
        _ => window_series(sh.items, sh.batch),
    };
    if sum != expected {
        return Err(Error::Corrupted {
            what: format!(
                "ring {} {} batch {} B",
                case(p.series),
                implementation(p.series),
                p.at.0
            ),
            got: sum,
            expected,
        });
    }
    let looks = sh.looks.into_inner();
    Ok(Sample {
        gbytes_per_s: (sh.items * ITEM) as f64 / secs / 1e9,
        items_per_look: match looks {
            0 => f64::NAN,
            n => sh.items as f64 / n as f64,
        },
    })
}

/// The no-queue bound's checksum: the consumer sums its queue-sized buffer
/// (items `0..queue`) batch by batch, wrapping around it.
fn bound_series(sh: &Shape) -> u32 {
    (0..sh.batches).fold(0u32, |a, b| {
        let off = (b * sh.batch) % sh.queue;
        a.wrapping_add(series(off as u64, sh.batch as u64))
    })
}

/// The row of `imp` in `case_` at `batch` bytes.
fn row_of<'a>(
    rows: &'a [Row<Batch, Sample>],
    imp: &str,
    case_: &str,
    batch: usize,
) -> Option<&'a Row<Batch, Sample>> {
    rows.iter().find(|r| {
        let s = r.point.series;
        implementation(s) == imp && case(s) == case_ && r.point.at.0 == batch
    })
}

/// The typical throughput of `imp` in `case_` at `batch` bytes.
fn gbytes(rows: &[Row<Batch, Sample>], imp: &str, case_: &str, batch: usize) -> Option<f64> {
    row_of(rows, imp, case_, batch).map(|r| r.typical(gbps))
}

/// The row's typical throughput over dmaflow's in the same case (the
/// `window` case for `window-copy`).
fn to_dmaflow(r: &Row<Batch, Sample>) -> Option<f64> {
    let base = match case(r.point.series) {
        "stream" => "dmaflow",
        _ => WINDOW,
    };
    Some(r.typical(gbps) / r.typical_of(base, gbps)?)
}

/// The rows' columns, with each row's ratio to dmaflow in the same case.
fn columns() -> Columns<'static, Row<Batch, Sample>> {
    let check = |v| {
        if v {
            "implausible: above the no-queue bound"
        } else {
            ""
        }
        .into()
    };
    Columns::new()
        .plain("impl", "impl", |r: &Row<Batch, Sample>| {
            implementation(r.point.series)
        })
        .doc(
            "dmaflow, dmaflow-spin, dmaflow-block, dmaflow-shm, dmaflow-process, rtrb, \
             ringbuf, vmcircbuffer, crossbeam, each peer again as <peer>-own, or bound",
        )
        .plain("case", "case", |r| case(r.point.series))
        .doc("stream, window or window-copy")
        .shown_as("batch", "batch_bytes", |r| r.point.at.0, bytes_label)
        .doc("the producer's batch in bytes, the window cases' hop")
        .measured_apart(
            ("GB/s (median)", "range"),
            "gbytes_per_s",
            "10^9 B of stream per second",
            (1.0, 2),
            gbps,
        )
        .kept("runs", |r| r.rounds())
        .doc("rounds measured")
        .typical(
            "items/look",
            "items_per_look",
            "items the reader took per look at the queue that found any: the \
             writer's batch when it reads each batch as it lands, more when it \
             reads behind the writer and takes many at once",
            (1.0, 0),
            per_look,
        )
        .shown("x dmaflow", |r| {
            to_dmaflow(r).map_or("-".into(), |x| format!("{x:.2}"))
        })
        .shown_as("check", "implausible", implausible, check)
        .doc("bool: above the no-queue bound by more than the rounds' spread")
}

/// The fastest peer's stream at one batch size, its name and typical
/// throughput: on the shared wait schedule, or (`own`) each with its own
/// default wait.
fn fastest_peer(rows: &[Row<Batch, Sample>], batch: usize, own: bool) -> Option<(&str, f64)> {
    rows.iter()
        .filter(|r| r.point.at.0 == batch && case(r.point.series) == "stream")
        .map(|r| (implementation(r.point.series), r.typical(gbps)))
        .filter(|(i, _)| !i.starts_with("dmaflow") && *i != "bound")
        .filter(|(i, _)| i.ends_with("-own") == own)
        .max_by(|x, y| x.1.total_cmp(&y.1))
}

/// One stream against another at one batch size: the first's typical
/// throughput, the second's name and typical throughput, and the first over
/// the second round by round (the two take turns in every round).
struct Versus<'a> {
    mine: f64,
    peer: &'a str,
    theirs: f64,
    ratio: Ratio,
}

impl Versus<'_> {
    /// `series` against `peer` at `batch` bytes.
    fn of<'a>(
        rows: &'a [Row<Batch, Sample>],
        series: &str,
        (peer, theirs): (&'a str, f64),
        batch: usize,
    ) -> Option<Versus<'a>> {
        let row = row_of(rows, series, "stream", batch)?;
        Some(Versus {
            mine: row.typical(gbps),
            peer,
            theirs,
            ratio: row.ratio_to(peer, gbps)?,
        })
    }

    /// `1.17x (1.05..1.30 over 11 rounds, faster; 13.42 GB/s against rtrb
    /// 11.46)` (the verdict says "faster" or "slower" only where every round
    /// agrees), and the note that the rounds straddle `target` where they do.
    fn text(&self, target: f64) -> String {
        let r = &self.ratio.0;
        format!(
            "{:.2}x ({:.2}..{:.2} over {} rounds, {}; {:.2} GB/s against {} {:.2}){}",
            r.median,
            r.min,
            r.max,
            r.n,
            self.ratio.verdict(),
            self.mine,
            self.peer,
            self.theirs,
            r.straddle_note(target)
        )
    }
}

/// dmaflow against the fastest peer at one batch size, on the shared wait
/// schedule, and reading windows in place over copying them out.
fn compare(rows: &[Row<Batch, Sample>], batch: usize) -> Option<(Versus<'_>, Option<f64>)> {
    let get = |case| gbytes(rows, "dmaflow", case, batch);
    let peer = fastest_peer(rows, batch, false)?;
    let window = get("window").zip(get("window-copy")).map(|(w, c)| w / c);
    Some((Versus::of(rows, "dmaflow", peer, batch)?, window))
}

/// dmaflow with its default wait (`Wait::Block`) against the fastest peer
/// with its own, at one batch size.
fn compare_own(rows: &[Row<Batch, Sample>], batch: usize) -> Option<Versus<'_>> {
    Versus::of(
        rows,
        "dmaflow-block",
        fastest_peer(rows, batch, true)?,
        batch,
    )
}

/// The shared queue with its reader in another process over the same queue
/// with its reader on another thread, at one batch size, round by round.
fn across(rows: &[Row<Batch, Sample>], batch: usize) -> Option<Ratio> {
    row_of(rows, "dmaflow-process", "stream", batch)?.ratio_to("dmaflow-shm", gbps)
}

/// The batch sizes of the rows, in order.
fn batches(rows: &[Row<Batch, Sample>]) -> Vec<usize> {
    let mut batches: Vec<usize> = rows.iter().map(|r| r.point.at.0).collect();
    batches.dedup();
    batches
}

/// How dmaflow compares with the best peer and the copying reader, per batch
/// size: the ratios round by round (median and range).
fn summary(rows: &[Row<Batch, Sample>]) -> String {
    let mut out = String::new();
    for b in batches(rows) {
        let Some((v, window)) = compare(rows, b) else {
            continue;
        };
        out += &format!(
            "{}: dmaflow / best peer ({}) = {}",
            bytes_label(b),
            v.peer,
            v.ratio.text()
        );
        if let Some(v) = compare_own(rows, b) {
            out += &format!(
                "; own default waits: dmaflow-block / best peer ({}) = {}",
                v.peer,
                v.ratio.text()
            );
        }
        if let Some(ratio) = window {
            out += &format!("; window / window-copy = {ratio:.2}x");
        }
        if let Some(p) = across(rows, b) {
            out += &format!(
                "; shared queue, other process / other thread = {}",
                p.text()
            );
        }
        out.push('\n');
    }
    out
}

/// The queue's targets: against the fastest peer at 64 B, 4 KiB and 64 KiB,
/// and between processes against between threads. Each is judged on the
/// median of the rounds' ratios, with their range and whether they straddle
/// it.
fn targets(rows: &[Row<Batch, Sample>]) -> Vec<Target> {
    let peers = [(64, 1.2), (4 << 10, 1.0), (64 << 10, 1.0)].map(|(batch, want)| {
        let (v, _) = compare(rows, batch)?;
        Some(Target::new(
            format!(
                "{} batches, equal waits: dmaflow >= {want:.1}x the fastest peer",
                bytes_label(batch)
            ),
            v.text(want),
            v.ratio.typical() >= want,
        ))
    });
    let own = batches(rows).into_iter().filter_map(|b| {
        let v = compare_own(rows, b)?;
        Some(Target::new(
            format!(
                "{} batches, each queue's own default wait: dmaflow >= 1.0x the fastest peer",
                bytes_label(b)
            ),
            v.text(1.0),
            v.ratio.typical() >= 1.0,
        ))
    });
    let across = batches(rows).into_iter().filter_map(|b| {
        let p = across(rows, b)?;
        let s = &p.0;
        Some(Target::new(
            format!(
                "{} batches: the shared queue between processes within 10 % of it between \
                 threads",
                bytes_label(b)
            ),
            format!(
                "{:.0} % ({:.0}..{:.0} % over {} rounds){}",
                100.0 * s.median,
                100.0 * s.min,
                100.0 * s.max,
                s.n,
                s.band_note(0.9, 1.1)
            ),
            within(s.median, 0.9, 1.1),
        ))
    });
    peers
        .into_iter()
        .flatten()
        .chain(own)
        .chain(across)
        .collect()
}

/// The answer's clauses: dmaflow against the fastest peer at the smallest
/// and largest batch, and what reading windows in place saves.
fn answer(rows: &[Row<Batch, Sample>]) -> Vec<String> {
    let lo = rows.iter().map(|r| r.point.at.0).min();
    let hi = rows.iter().map(|r| r.point.at.0).max();
    (lo.into_iter().chain(hi.filter(|h| Some(*h) != lo)))
        .filter_map(|b| {
            let (v, window) = compare(rows, b)?;
            let window = window.map_or(String::new(), |r| {
                format!(", and reading windows in place is {r:.2}x copying them out")
            });
            Some(format!(
                "at {} batches dmaflow's queue moves {:.2} GB/s, {:.2}x the fastest peer \
                 ({}, the median of the rounds' ratios){window}",
                bytes_label(b),
                v.mine,
                v.ratio.typical(),
                v.peer,
            ))
        })
        .collect()
}

/// What the rows say: the answer, the comparisons under the table, the
/// targets.
fn findings(_: &Config, rows: &[Row<Batch, Sample>]) -> Findings {
    Findings {
        clauses: answer(rows),
        notes: summary(rows),
        targets: targets(rows),
        ..Findings::default()
    }
}

/// What was measured, with the wait costs calibrated at start-up.
fn heading(cfg: &Config) -> String {
    let cal = Calibration::get();
    format!(
        "{} per measurement, queue {}; every queue's consumer takes whatever is readable; \
         one wait for every queue (dmaflow, its shared queue and each peer): spin as long \
         as a sched_yield costs on this machine ({:.2} us, calibrated at start-up), then \
         yield; dmaflow-spin and dmaflow-block: dmaflow's other waits (block, its default, \
         spins as long as a sched_yield costs, then yields until a wake-up's cost, {:.2} us, \
         has passed, then sleeps); -own: each peer's own default wait (rtrb, ringbuf, \
         vmcircbuffer: none, a retry with a pause between looks; crossbeam: send/recv); \
         `bound`: the same work on two threads with no queue between them",
        bytes_label(cfg.total_bytes),
        bytes_label(cfg.queue_bytes),
        cal.yield_cost.as_secs_f64() * 1e6,
        cal.spin_before_sleep().as_secs_f64() * 1e6,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row at 64 B batches over several rounds, beside `others` in the
    /// same rounds.
    fn rounds(
        series: &'static str,
        mine: &[f64],
        others: &[(&'static str, &[f64])],
    ) -> Row<Batch, Sample> {
        let of = |v: &[f64]| -> Vec<Sample> {
            v.iter()
                .map(|&gbytes_per_s| Sample {
                    gbytes_per_s,
                    items_per_look: f64::NAN,
                })
                .collect()
        };
        Row {
            point: Point {
                series,
                at: Batch(64),
            },
            samples: of(mine),
            baseline: None,
            others: others.iter().map(|&(s, v)| (s, of(v))).collect(),
        }
    }

    /// A row of one round at 64 B batches beside `others` in the same round.
    fn row(
        series: &'static str,
        gbytes_per_s: f64,
        others: &[(&'static str, f64)],
    ) -> Row<Batch, Sample> {
        let others: Vec<(&'static str, &[f64])> = others
            .iter()
            .map(|(s, v)| (*s, std::slice::from_ref(v)))
            .collect();
        rounds(series, &[gbytes_per_s], &others)
    }

    /// Two stream rows at 64 B over the same rounds, each beside the other.
    fn pair(
        (a, a_rounds): (&'static str, &[f64]),
        (b, b_rounds): (&'static str, &[f64]),
    ) -> Vec<Row<Batch, Sample>> {
        vec![
            rounds(a, a_rounds, &[(b, b_rounds)]),
            rounds(b, b_rounds, &[(a, a_rounds)]),
        ]
    }

    /// The targets judge the rounds' ratios (each round's dmaflow over the
    /// same round's peer), not one median over another, and say their range
    /// and when the rounds fall on both sides of the target.
    #[test]
    fn targets_judge_the_rounds_ratios_and_say_their_range() {
        // Medians 12 against 10 (1.2x), but round by round 1.5, 1.0, 1.1:
        // the rounds' median is 1.1x, short of 1.2x, and they straddle it.
        let dmaflow = [12.0, 10.0, 13.2];
        let rtrb = [8.0, 10.0, 12.0];
        let rows = pair(("dmaflow", &dmaflow), ("rtrb", &rtrb));
        let t = targets(&rows);
        let first = &t[0];
        assert!(
            first.what.contains("64 B") && first.what.contains("1.2x"),
            "{first:?}"
        );
        assert!(!first.met, "{first:?}");
        assert!(
            first.found.starts_with("1.10x (1.00..1.50 over 3 rounds"),
            "{first:?}"
        );
        assert!(first.found.contains("against rtrb 10.00"), "{first:?}");
        assert!(first.found.contains("straddle"), "{first:?}");
        // Every round ahead by 1.25x or more: met, and said to be so.
        let dmaflow = [12.5, 13.0, 15.0];
        let rows = pair(("dmaflow", &dmaflow), ("rtrb", &[10.0, 10.0, 12.0]));
        let t = targets(&rows);
        assert!(t[0].met, "{:?}", t[0]);
        assert!(t[0].found.contains("faster"), "{:?}", t[0]);
        assert!(!t[0].found.contains("straddle"), "{:?}", t[0]);
        // The shared queue between processes: the band, judged the same way.
        let thread = [10.0, 10.0, 10.0];
        let process = [9.5, 8.5, 10.5];
        let rows = pair(("dmaflow-process", &process), ("dmaflow-shm", &thread));
        let t = targets(&rows);
        let band = t.iter().find(|t| t.what.contains("within 10 %")).unwrap();
        assert!(band.met, "{band:?}");
        assert!(
            band.found.starts_with("95 % (85..105 % over 3 rounds"),
            "{band:?}"
        );
        assert!(band.found.contains("straddle"), "{band:?}");
    }

    /// A reading process that ends without attaching is reported with what
    /// it said, after every start, without waiting out the attach limit.
    #[test]
    fn a_reading_process_that_never_attaches_is_started_again_then_named() {
        let sh = Shape {
            items: 1024,
            batches: 64,
            batch: 16,
            queue: 4096,
            // `sh shm-reader --path P`: sh finds no script `shm-reader`.
            reader: Some("/bin/sh".into()),
            looks: Default::default(),
        };
        let t0 = Instant::now();
        let e = shm_process(&sh).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{PROCESS_STARTS} starts failed")),
            "{e}"
        );
        assert_eq!(
            e.matches("ended before attaching").count(),
            PROCESS_STARTS,
            "{e}"
        );
        assert!(e.contains("shm-reader"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    }

    /// The checksums, the no-queue bound's flag, the ratio to dmaflow, and
    /// a tiny run that verifies every implementation and reports every case.
    #[test]
    fn checksums_the_bound_and_a_tiny_run() {
        let direct = (10u32..10 + 1000).fold(0u32, |a, b| a.wrapping_add(b));
        assert_eq!(series(10, 1000), direct);
        assert_eq!(series(0, 0), 0);
        let mut v = vec![0f32; 1000];
        fill(&mut v, 10);
        assert_eq!(checksum(&v), direct);
        let ringbuf = row("ringbuf", 9000.0, &[("bound", 10.0), ("dmaflow", 11.0)]);
        let dmaflow = row("dmaflow", 11.0, &[("bound", 10.0), ("ringbuf", 9000.0)]);
        let copy = row(WINDOW_COPY, 2.0, &[(WINDOW, 8.0), ("dmaflow", 11.0)]);
        assert!(implausible(&ringbuf));
        assert!(!implausible(&dmaflow));
        assert_eq!(to_dmaflow(&dmaflow), Some(1.0));
        assert_eq!(to_dmaflow(&copy), Some(0.25));
        let table = columns().table([&ringbuf, &dmaflow, &copy]);
        assert!(table.contains("implausible"), "{table}");
        assert!(table.contains("window-copy"), "{table}");

        let cfg = Config::at(&Setup::TINY);
        let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
        assert_eq!(rows.len(), 2 * contenders(false).len());
        for r in &rows {
            let (typical, s) = (r.typical(gbps), r.spread(gbps));
            assert!(typical.is_finite() && typical > 0.0, "{r:?}");
            assert!(s.min <= typical && typical <= s.max, "{r:?}");
        }
        assert!(rows.iter().any(|r| r.point.series == "bound"));
        // Every look that found items found at least one whole batch (the
        // writer commits batches, the reader takes all it finds); no reader
        // looks in the bound, and the windows are not counted.
        for r in &rows {
            let per = r.typical(per_look);
            let batch = (r.point.at.0 / ITEM) as f64;
            match (r.point.series, case(r.point.series)) {
                ("bound", _) | (_, "window" | "window-copy") => {
                    assert!(per.is_nan(), "{r:?}")
                }
                _ => assert!(per >= batch, "{r:?}"),
            }
        }
        let rep = EXPERIMENT.report(&cfg, &rows);
        assert_eq!(rep.json["experiment"], "ring");
        let json = rep.json["rows"].as_array().unwrap();
        assert_eq!(json.len(), rows.len());
        assert!(json[0]["items_per_look"].as_f64().unwrap() >= 16.0);
        let bound = json.iter().find(|r| r["impl"] == "bound").unwrap();
        assert!(bound["items_per_look"].is_null(), "{bound}");
        let last = &json[rows.len() - 1];
        assert_eq!(
            (&last["impl"], &last["case"]),
            (&"dmaflow".into(), &"window-copy".into())
        );
        assert!(rep.text.contains("window-copy"));
        assert!(rep.text.contains("window / window-copy"));
        assert!(
            rep.heading
                .contains("one batch size and case after another")
        );
        assert_eq!(rep.plots.len(), 1);
    }
}
