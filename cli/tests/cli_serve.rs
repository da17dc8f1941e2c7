//! `dmaflow serve` and `dmaflow overlay export` on bad input: each refusal
//! names what was wrong and exits with status 2; a served board answers
//! until stopped.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn dmaflow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dmaflow"))
}

#[test]
fn export_writes_the_pair_and_refuses_an_unknown_design() {
    let dir = tempfile::tempdir().unwrap();
    let out = dmaflow()
        .args(["overlay", "export", "loopback-sg"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let hwh = std::fs::read_to_string(dir.path().join("loopback-sg.hwh")).unwrap();
    assert!(hwh.contains("NAME=\"c_include_sg\" VALUE=\"1\""));
    assert!(hwh.contains("MODTYPE=\"zynq_ultra_ps_e\""));
    let bit = std::fs::read(dir.path().join("loopback-sg.bit")).unwrap();
    assert!(bit.len() > 64);
    let out = dmaflow()
        .args(["overlay", "export", "nosuch"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"nosuch\"") && err.contains("loopback"),
        "{err}"
    );
}

#[test]
fn serve_refuses_a_bad_hwh_and_a_taken_address() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.hwh");
    let out = dmaflow()
        .args(["serve", "--listen", "127.0.0.1:0", "--hwh"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.hwh"));
    let bad = dir.path().join("bad.hwh");
    std::fs::write(&bad, "<EDKSYSTEM><MODULES/></EDKSYSTEM>").unwrap();
    let out = dmaflow()
        .args(["serve", "--listen", "127.0.0.1:0", "--hwh"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.hwh") && err.contains("processing system"),
        "{err}"
    );
    // An address another socket holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = dmaflow()
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&addr));
}

#[test]
fn serve_says_where_it_listens_and_serves_until_stopped() {
    let mut child = dmaflow()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    assert!(line.contains("PYNQ.remote on 127.0.0.1:"), "{line}");
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    // It accepts connections until it is stopped.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}
