//! `dmaflow bgsub`: the fabric and the CPU give identical masks; bad input is
//! refused with exit status 2 and leaves no output.

use std::process::Command;

fn dmaflow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dmaflow"))
}

fn frames(w: usize, h: usize, n: usize) -> Vec<u8> {
    let p = dmaflow::dsp::bgsub::Params::new(w, h, 25, true).unwrap();
    dmaflow::dsp::bgsub::synthetic_frames(&p, n, 3)
}

#[test]
fn sim_and_cpu_write_identical_masks() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gray");
    std::fs::write(&input, frames(48, 36, 5)).unwrap();
    for filter in [true, false] {
        let mut outs = Vec::new();
        for device in ["sim", "cpu"] {
            let out = dir.path().join(format!("{device}-{filter}.gray"));
            let mut cmd = dmaflow();
            cmd.args([
                "bgsub",
                "--width",
                "48",
                "--height",
                "36",
                "--threshold",
                "20",
            ])
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .args(["--device", device]);
            if !filter {
                cmd.arg("--no-filter");
            }
            let st = cmd.status().unwrap();
            assert!(st.success(), "{device}");
            outs.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(outs[0].len(), 48 * 36 * 5);
        assert_eq!(outs[0], outs[1], "filter={filter}");
        assert!(outs[0].iter().all(|&m| m == 0 || m == 255));
        assert!(outs[0].contains(&255), "the moving objects show");
    }
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gray");
    std::fs::write(&input, frames(10, 10, 2)).unwrap();
    let out = dir.path().join("out.gray");
    let cases: [(&[&str], &str); 4] = [
        (&["--width", "11", "--height", "10"], "whole number"),
        (&["--width", "0", "--height", "10"], "not usable"),
        (
            &[
                "--width",
                "10",
                "--height",
                "10",
                "--input",
                "/nonexistent/x.gray",
            ],
            "x.gray",
        ),
        (
            &["--width", "10", "--height", "10", "--device", "gpu"],
            "gpu",
        ),
    ];
    for (args, needle) in cases {
        let mut cmd = dmaflow();
        cmd.arg("bgsub").arg("--output").arg(&out);
        if !args.contains(&"--input") {
            cmd.arg("--input").arg(&input);
        }
        let o = cmd.args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?} left output");
    }
}

#[test]
fn an_overflowing_frame_size_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gray");
    std::fs::write(&input, [0u8; 16]).unwrap();
    let output = dir.path().join("out.gray");
    let out = dmaflow()
        .args([
            "bgsub",
            "--width",
            "4294967296",
            "--height",
            "4294967296",
            "--input",
        ])
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("overflows"), "{err}");
    assert!(!output.exists());
}

#[test]
fn a_frame_too_large_for_the_coprocessor_is_refused_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gray");
    let n = 3000 * 3000;
    std::fs::write(&input, vec![7u8; n]).unwrap();
    let run = |device: &str, output: &std::path::Path| {
        dmaflow()
            .args([
                "bgsub", "--width", "3000", "--height", "3000", "--device", device,
            ])
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(output)
            .output()
            .unwrap()
    };
    // The software path takes it.
    let cpu = dir.path().join("cpu.gray");
    assert!(run("cpu", &cpu).status.success());
    assert_eq!(std::fs::metadata(&cpu).unwrap().len(), n as u64);
    // The coprocessor refuses by name, before any transfer, and writes nothing.
    let sim = dir.path().join("sim.gray");
    let out = run("sim", &sim);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("9000000 bytes") && err.contains("8388607") && err.contains("--device cpu"),
        "{err}"
    );
    assert!(!sim.exists());
}
