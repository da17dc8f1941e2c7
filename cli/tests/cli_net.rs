//! `dmaflow fir` with ZeroMQ endpoints: two processes joined by a network
//! edge give what the same filters give through files, and bad endpoints are
//! named with exit status 2.

use std::process::{Command, Stdio};

fn dmaflow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dmaflow"))
}

fn write_f32(path: &std::path::Path, v: &[f32]) {
    std::fs::write(
        path,
        v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn two_processes_over_tcp_give_what_files_give() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let x: Vec<f32> = (0..300_001u64)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    write_f32(&p("x.f32"), &x);
    write_f32(&p("h1.f32"), &[0.5, -0.25, 0.125]);
    write_f32(
        &p("h2.f32"),
        &(0..40).map(|i| (i as f32 * 0.3).sin()).collect::<Vec<_>>(),
    );
    // Through files: x -> h1 -> mid -> h2 -> want.
    for (taps, input, output) in [
        ("h1.f32", "x.f32", "mid.f32"),
        ("h2.f32", "mid.f32", "want.f32"),
    ] {
        let st = dmaflow()
            .args(["fir", "--taps"])
            .arg(p(taps))
            .arg("--input")
            .arg(p(input))
            .arg("--output")
            .arg(p(output))
            .status()
            .unwrap();
        assert!(st.success());
    }
    // The same two filters in two processes, the edge between them over TCP.
    let at = format!("tcp://127.0.0.1:{}", free_port());
    let first = dmaflow()
        .args(["fir", "--taps"])
        .arg(p("h1.f32"))
        .arg("--input")
        .arg(p("x.f32"))
        .args(["--output", &at])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let second = dmaflow()
        .args(["fir", "--taps"])
        .arg(p("h2.f32"))
        .args(["--input", &at, "--output"])
        .arg(p("got.f32"))
        .output()
        .unwrap();
    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success() && second.status.success(),
        "{second:?}"
    );
    assert_eq!(
        std::fs::read(p("got.f32")).unwrap(),
        std::fs::read(p("want.f32")).unwrap()
    );
    let said = String::from_utf8_lossy(&second.stdout);
    assert!(
        said.contains(&format!("{at}: received 300001 samples")),
        "{said}"
    );
}

#[test]
fn bad_endpoints_are_named_with_status_2_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    write_f32(&p("x.f32"), &[1.0; 100]);
    write_f32(&p("h.f32"), &[1.0]);
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = format!("tcp://127.0.0.1:{}", held.local_addr().unwrap().port());
    for (input, output, says) in [
        ("udp://127.0.0.1:5000", "out.f32", "unknown scheme \"udp\""),
        ("tcp://127.0.0.1", "out.f32", "needs a port"),
        ("x.f32", "tcp://127.0.0.1:99999", "not a port"),
        ("x.f32", busy.as_str(), "bind"),
    ] {
        let input = if input.contains("://") {
            input.to_string()
        } else {
            p(input).display().to_string()
        };
        let output = if output.contains("://") {
            output.to_string()
        } else {
            p(output).display().to_string()
        };
        let out = dmaflow()
            .args(["fir", "--taps"])
            .arg(p("h.f32"))
            .args(["--input", &input, "--output", &output])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input} {output}: {err}");
        assert!(err.contains(says), "{err}");
        assert!(!p("out.f32").exists());
    }
}

#[test]
fn bgsub_takes_endpoints_on_either_side_on_both_devices() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let (w, h, frames) = (32usize, 24usize, 12usize);
    let video: Vec<u8> = (0..w * h * frames)
        .map(|i| {
            let (f, px) = (i / (w * h), i % (w * h));
            // A bright square moving over a still gradient.
            let (x, y) = (px % w, px / w);
            if x.abs_diff(4 + f) < 4 && y.abs_diff(10) < 4 {
                250
            } else {
                (x * 3 + y) as u8
            }
        })
        .collect();
    std::fs::write(p("video.raw"), &video).unwrap();
    let dims = ["--width", "32", "--height", "24"];
    for device in ["cpu", "sim"] {
        let want = p(&format!("want-{device}.raw"));
        let st = dmaflow()
            .args(["bgsub", "--device", device])
            .args(dims)
            .arg("--input")
            .arg(p("video.raw"))
            .arg("--output")
            .arg(&want)
            .status()
            .unwrap();
        assert!(st.success());
        let want = std::fs::read(want).unwrap();
        assert_eq!(want.len(), video.len());

        // Masks out over TCP to a plain PULL socket.
        let at = format!("tcp://127.0.0.1:{}", free_port());
        let sender = dmaflow()
            .args(["bgsub", "--device", device])
            .args(dims)
            .arg("--input")
            .arg(p("video.raw"))
            .args(["--output", &at])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let ctx = zmq::Context::new();
        let pull = ctx.socket(zmq::PULL).unwrap();
        pull.connect(&at).unwrap();
        let mut got = Vec::new();
        loop {
            let m = pull.recv_bytes(0).unwrap();
            if m.is_empty() {
                break;
            }
            got.extend(m);
        }
        drop(pull);
        assert!(sender.wait_with_output().unwrap().status.success());
        assert_eq!(got, want, "{device}: masks over the network");

        // Frames in over TCP from a plain PUSH socket.
        let at = format!("tcp://127.0.0.1:{}", free_port());
        let push = ctx.socket(zmq::PUSH).unwrap();
        push.bind(&at).unwrap();
        let receiver = dmaflow()
            .args(["bgsub", "--device", device])
            .args(dims)
            .args(["--input", &at, "--output"])
            .arg(p("got.raw"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        for f in video.chunks(1000) {
            push.send(f, 0).unwrap();
        }
        push.send(Vec::<u8>::new(), 0).unwrap();
        assert!(receiver.wait_with_output().unwrap().status.success());
        assert_eq!(
            std::fs::read(p("got.raw")).unwrap(),
            want,
            "{device}: frames over the network"
        );
    }
}
