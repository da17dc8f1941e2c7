//! A queue shared with another process: the writer here, the reader in a
//! child process (this test binary run again with `DMAFLOW_SHM_CHILD` set,
//! running only the `child` test).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dmaflow::ring::shm::{EvictReason, ReaderEvent, ShmConfig, ShmReader, ShmWriter};

/// Items the child expects: 0, 1, 2, ... as u64.
const ITEMS: u64 = 3_000_000;

fn unique(name: &str) -> PathBuf {
    let dir = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    dir.join(format!("dmaflow-test-{}-{name}", std::process::id()))
}

/// Starts this binary's `child` test as a child process in `mode`, with
/// `arg`; its stdout is piped.
fn spawn(mode: &str, arg: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("DMAFLOW_SHM_CHILD", mode)
        .env("DMAFLOW_SHM_ARG", arg)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child's report from `key` to the end of its line (the test harness
/// prints its own words before it on the line).
fn report(child: Child, key: &str) -> String {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "child failed: {text}");
    text.lines()
        .find_map(|l| l.find(key).map(|at| l[at..].to_string()))
        .unwrap_or_else(|| panic!("no {key} line in: {text}"))
}

/// Reads the sequence 0, 1, 2, ... in windows of up to 4096 until the end of
/// the stream; returns how many items, or the first wrong one.
fn read_sequence(r: &mut ShmReader<u64>) -> Result<u64, String> {
    let mut expect = 0u64;
    loop {
        let w = r.peek(1).map_err(|e| e.to_string())?;
        if w.is_empty() {
            return Ok(expect);
        }
        let n = w.len().min(4096);
        for &x in &w[..n] {
            if x != expect {
                return Err(format!("item {expect} was {x}"));
            }
            expect += 1;
        }
        r.consume(n).map_err(|e| e.to_string())?;
    }
}

/// Writes the sequence 0..ITEMS in batches of `batch`.
fn write_sequence(w: &mut ShmWriter<u64>, batch: usize) {
    let mut next = 0u64;
    while next < ITEMS {
        let n = batch.min((ITEMS - next) as usize);
        let s = w.reserve(n).unwrap();
        for x in s.iter_mut() {
            *x = next;
            next += 1;
        }
        w.commit(n).unwrap();
    }
}

/// The child's side; does nothing in an ordinary test run.
#[test]
fn child() {
    let Ok(mode) = std::env::var("DMAFLOW_SHM_CHILD") else {
        return;
    };
    let arg = PathBuf::from(std::env::var("DMAFLOW_SHM_ARG").unwrap());
    let mut out = std::io::stdout();
    match mode.as_str() {
        "path" => {
            // SAFETY: only the parent's writer writes the object.
            let mut r = unsafe { ShmReader::<u64>::open(&arg) }.unwrap();
            writeln!(out, "count {:?}", read_sequence(&mut r)).unwrap();
        }
        "socket" => {
            let s = UnixStream::connect(&arg).unwrap();
            // SAFETY: only the parent's writer writes the object.
            let mut r = unsafe { ShmReader::<u64>::receive(&s) }.unwrap();
            writeln!(out, "count {:?}", read_sequence(&mut r)).unwrap();
        }
        "die" => {
            // SAFETY: only the parent's writer writes the object.
            let mut r = unsafe { ShmReader::<u64>::open(&arg) }.unwrap();
            let w = r.peek(10).unwrap();
            writeln!(out, "first {}", w[0]).unwrap();
            out.flush().unwrap();
            // Gone without detaching, as a crashed reader would be.
            std::process::exit(0);
        }
        m => panic!("unknown child mode {m}"),
    }
}

#[test]
fn a_child_process_reads_every_item_in_order_by_path() {
    let path = unique("path");
    let cfg = ShmConfig {
        path: Some(path.clone()),
        ..ShmConfig::default()
    };
    let mut w = ShmWriter::<u64>::create(1 << 14, &cfg).unwrap();
    let child = spawn("path", &path);
    w.wait_for_readers(1, Duration::from_secs(20)).unwrap();
    write_sequence(&mut w, 1000);
    drop(w);
    assert!(!path.exists(), "the writer removes its file");
    assert_eq!(report(child, "count"), format!("count Ok({ITEMS})"));
}

#[test]
fn the_descriptor_passes_over_a_unix_socket() {
    let sock = unique("sock");
    let listener = UnixListener::bind(&sock).unwrap();
    let mut w = ShmWriter::<u64>::create(1 << 12, &ShmConfig::default()).unwrap();
    let child = spawn("socket", &sock);
    let (conn, _) = listener.accept().unwrap();
    w.send(&conn).unwrap();
    w.wait_for_readers(1, Duration::from_secs(20)).unwrap();
    write_sequence(&mut w, 777);
    drop(w);
    let _ = std::fs::remove_file(&sock);
    assert_eq!(report(child, "count"), format!("count Ok({ITEMS})"));
}

#[test]
fn a_reader_process_that_dies_does_not_wedge_the_writer() {
    let path = unique("die");
    let cfg = ShmConfig {
        path: Some(path.clone()),
        // Long: the eviction must come from the process being gone.
        evict_after: Duration::from_secs(30),
        ..ShmConfig::default()
    };
    let mut w = ShmWriter::<u64>::create(1 << 12, &cfg).unwrap();
    let cap = w.capacity();
    let mut child = spawn("die", &path);
    w.wait_for_readers(1, Duration::from_secs(20)).unwrap();
    w.write(&(0..100).collect::<Vec<u64>>()).unwrap();
    // The child's report, after the test harness's own lines.
    let line = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap)
        .find_map(|l| l.find("first").map(|at| l[at..].to_string()))
        .unwrap();
    assert_eq!(line.trim(), "first 0");
    assert!(child.wait().unwrap().success());
    // The dead reader still holds its slot: writing four queues' worth must
    // evict it rather than wait for it.
    let t0 = std::time::Instant::now();
    for _ in 0..4 {
        w.write(&vec![1u64; cap]).unwrap();
    }
    assert!(t0.elapsed() < Duration::from_secs(10));
    match w.take_events().as_slice() {
        [
            ReaderEvent::Evicted {
                reason: EvictReason::ProcessGone,
                position: 0,
                ..
            },
        ] => {}
        e => panic!("{e:?}"),
    }
    assert_eq!(w.readers(), 0);
}
