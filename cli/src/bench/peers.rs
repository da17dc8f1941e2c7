//! What the experiments share to run their comparison points on equal terms:
//! peers' programs run with a bound on their time (GNU Radio's Python,
//! FutureSDR's build), their scratch directories, the items, checksums and
//! backoff every queue comparison uses, and the marks that check a DMA
//! packet came back whole.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::error::Error;

/// Where scratch files go that should stay in memory: tmpfs (`/dev/shm`)
/// where there is one, else the temporary directory.
pub fn tmpfs() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A directory of this process's own, removed when dropped (also when a run
/// fails half way).
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// `PREFIX-PID` under the temporary directory, created.
    pub fn new(prefix: &str) -> Result<Self, Error> {
        Self::under(&std::env::temp_dir(), prefix)
    }

    /// `PREFIX-PID` under `dir`, created.
    pub fn under(dir: &Path, prefix: &str) -> Result<Self, Error> {
        let p = dir.join(format!("{prefix}-{}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(Error::io(p.display()))?;
        Ok(ScratchDir(p))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `v` to `path` as little-endian f32, as the peers' programs read it.
pub fn write_f32(path: &Path, v: &[f32]) -> Result<(), Error> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).map_err(Error::io(path.display()))
}

/// Whether GNU Radio's Python API with gr-zeromq is here.
pub fn gnuradio_here() -> bool {
    Command::new("/usr/bin/python3")
        .args(["-c", "import gnuradio.zeromq"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A peer process, its output piped and read as it comes (a peer that says
/// more than a pipe holds never stalls on it), killed if it is still running
/// when dropped (a measurement that failed half way leaves no process
/// behind).
pub struct Peer {
    child: Option<Child>,
    who: String,
    stdout: Option<Drain>,
    stderr: Option<Drain>,
}

/// A thread reading one of a peer's pipes to its end.
type Drain = std::thread::JoinHandle<std::io::Result<Vec<u8>>>;

/// Reads `pipe` to its end on a thread of its own.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> Option<Drain> {
    pipe.map(|mut p| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            p.read_to_end(&mut v).map(|_| v)
        })
    })
}

impl Peer {
    /// Starts `cmd` with `stdin`, `who` naming it in an error.
    pub fn spawn(cmd: &mut Command, stdin: Stdio, who: &str) -> Result<Peer, Error> {
        let mut child = cmd
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Error::io(who))?;
        Ok(Peer {
            stdout: drain(child.stdout.take()),
            stderr: drain(child.stderr.take()),
            child: Some(child),
            who: who.into(),
        })
    }

    /// The process's standard input, if piped.
    pub fn stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.as_mut().and_then(|c| c.stdin.take())
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> Result<bool, Error> {
        match &mut self.child {
            Some(c) => Ok(c.try_wait().map_err(Error::io(&self.who))?.is_none()),
            None => Ok(false),
        }
    }

    /// Waits for the process to end, its output collected, for at most
    /// `limit`: past that it is killed and the wait is an error.
    pub fn wait_within(mut self, limit: Duration) -> Result<std::process::Output, Error> {
        let what = std::mem::take(&mut self.who);
        let io = Error::io(&what);
        let t0 = Instant::now();
        let status = loop {
            let child = self
                .child
                .as_mut()
                .ok_or_else(|| io(std::io::ErrorKind::NotFound.into()))?;
            if let Some(status) = child.try_wait().map_err(&io)? {
                break status;
            }
            if t0.elapsed() > limit {
                return Err(Error::Peer {
                    peer: "peer process",
                    reason: format!("{what} still running after {limit:?}: stopped"),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        self.child = None;
        // The process has ended: its pipes close unless a process it started
        // still holds them, which the same limit bounds.
        let collect = |d: Option<Drain>| -> Result<Vec<u8>, Error> {
            let Some(d) = d else { return Ok(Vec::new()) };
            while !d.is_finished() {
                if t0.elapsed() > limit {
                    return Err(Error::Peer {
                        peer: "peer process",
                        reason: format!("{what} ended, but its output still open after {limit:?}"),
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            d.join()
                .map_err(|_| Error::Panicked("peer output reader"))?
                .map_err(&io)
        };
        let stdout = collect(self.stdout.take())?;
        let stderr = collect(self.stderr.take())?;
        Ok(std::process::Output {
            status,
            stdout,
            stderr,
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `cmd` to its end, its output collected, for at most `limit`: past
/// that it is killed and the wait is an error.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Result<std::process::Output, Error> {
    let what = format!("{:?}", cmd.get_program());
    Peer::spawn(cmd, Stdio::null(), &what)?.wait_within(limit)
}

/// What `peer`'s program `cmd` printed, run to its end within `limit` and read
/// by `parse`: a failed run, or output `parse` refuses, is `peer`'s error
/// quoting what it said.
pub fn said<T>(
    peer: &'static str,
    cmd: &mut Command,
    limit: Duration,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<T, Error> {
    let run = output_within(cmd, limit)?;
    let said = String::from_utf8_lossy(&run.stdout);
    match parse(&said) {
        Some(v) if run.status.success() => Ok(v),
        _ => Err(Error::peer(peer)(format!(
            "({}) said {said:?}; {}",
            run.status,
            String::from_utf8_lossy(&run.stderr).trim()
        ))),
    }
}

/// The first row of each kind (`key`), in the order the rows first name it.
pub fn first_of_each<R, K: PartialEq>(rows: &[R], key: impl Fn(&R) -> K) -> Vec<&R> {
    let new = |(i, r): &(usize, &R)| rows[..*i].iter().all(|o| key(o) != key(r));
    rows.iter()
        .enumerate()
        .filter(new)
        .map(|(_, r)| r)
        .collect()
}

/// The FutureSDR program, built if it is not (and `build`) from its own
/// package into its own target directory: `Err` says why there is none.
pub fn futuresdr_exe(build: bool, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, String> {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = cli.join("peers/futuresdr-sched/Cargo.toml");
    let target = cli.join("../target/futuresdr");
    let exe = target.join("release/futuresdr-sched");
    if !manifest.exists() {
        return Err(format!("{} is not here", manifest.display()));
    }
    if !build {
        return if exe.exists() {
            Ok(exe)
        } else {
            Err("not built (the full `dmaflow bench sched` builds it)".into())
        };
    }
    progress("sched: building FutureSDR 0.8.0 in target/futuresdr (minutes the first time)");
    // Its DSP crate uses one unstable float feature: enabled for this build
    // only, on the stable compiler.
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "--release", "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("RUSTFLAGS", "-Zcrate-attr=feature(float_algebraic)")
        .output()
        .map_err(|e| format!("cargo could not be run: {e}"))?;
    if !out.status.success() || !exe.exists() {
        return Err(format!(
            "its build failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    Ok(exe)
}

/// xorshift64 (13, 7, 17): the next draw from state `s` (the generator of
/// the experiments' pseudo-random signals and of FutureSDR's random copies).
pub fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// Sets every item to the float whose bits are its sequence number.
pub fn fill(s: &mut [f32], first: u32) {
    for (k, x) in s.iter_mut().enumerate() {
        *x = f32::from_bits(first.wrapping_add(k as u32));
    }
}

/// Wrapping sum of the items' bits; vectorises.
pub fn checksum(s: &[f32]) -> u32 {
    bytemuck::cast_slice::<f32, u32>(s)
        .iter()
        .fold(0u32, |a, &b| a.wrapping_add(b))
}

/// Checksum of the sequence numbers `first .. first + n`.
pub fn series(first: u64, n: u64) -> u32 {
    if n == 0 {
        return 0;
    }
    // Sum of an arithmetic series, reduced mod 2^32 (all terms fit in u128).
    let s = (n as u128) * (2 * first as u128 + n as u128 - 1) / 2;
    s as u32
}

/// Marks a transfer's data as transfer `seq`'s: its first and last bytes (the
/// driver-side thread does no more work per byte than a real producer that
/// hands over a buffer it already filled; loopback and transfer check every
/// byte).
pub fn mark(p: &mut [u8], seq: u8) {
    let n = p.len();
    if n > 0 {
        p[0] = seq;
        p[n - 1] = seq;
    }
}

/// Checks that a packet came back whole as number `seq`.
pub fn check(what: &str, got: &[u8], len: usize, seq: u8) -> Result<(), Error> {
    if got.len() == len && got.first() == Some(&seq) && got.last() == Some(&seq) {
        Ok(())
    } else {
        Err(Error::Corrupted {
            what: what.to_string(),
            got: got.first().copied().unwrap_or(0).into(),
            expected: seq.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_that_says_more_than_a_pipe_holds_is_read_to_its_end() {
        // 1 MiB on stdout and 256 KiB on stderr: a pipe holds 64 KiB, so a
        // wait that read only after the end would never see this one end.
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "head -c 1048576 /dev/zero; head -c 262144 /dev/zero >&2; echo end",
        ]);
        let out = output_within(&mut cmd, Duration::from_secs(20)).expect("the peer ends");
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), 1_048_576 + 4);
        assert!(out.stdout.ends_with(b"end\n"));
        assert_eq!(out.stderr.len(), 262_144);
    }

    #[test]
    fn a_peer_past_its_limit_is_stopped_and_named() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let t0 = Instant::now();
        let e = output_within(&mut cmd, Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("still running"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(20));
    }
}
