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
fn a_frame_longer_than_one_transfer_goes_through_the_coprocessor_node() {
    // 3000 x 3000 = 9 000 000 bytes per frame, more than the engine's length
    // register carries (8 388 607): the node cuts each frame, background and
    // mask into several descriptors, and the masks are the CPU's.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.gray");
    std::fs::write(&input, frames(3000, 3000, 2)).unwrap();
    let run = |device: &str| {
        let out = dir.path().join(format!("{device}.gray"));
        let o = dmaflow()
            .args([
                "bgsub", "--width", "3000", "--height", "3000", "--device", device,
            ])
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            std::fs::read(&out).unwrap(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let (cpu, _) = run("cpu");
    let (sim, said) = run("sim");
    assert_eq!(sim.len(), 2 * 9_000_000);
    assert!(sim == cpu, "the coprocessor's masks differ from the CPU's");
    assert!(sim.contains(&255), "the moving objects show");
    // Frames and masks stayed in DMA memory: nothing was copied on the way.
    assert!(
        said.contains("2 frames") && said.contains("copied 0 bytes"),
        "{said}"
    );
}
