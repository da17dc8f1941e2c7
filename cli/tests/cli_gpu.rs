//! `--device cuda[:N]` from the command line: where this machine has no GPU the
//! GPU experiment says it skipped (and writes its report), `bgsub` names the
//! missing driver without leaving an output file, and device words that name
//! nothing are refused with exit status 2.

use std::process::Command;

fn dmaflow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(args)
        .output()
        .unwrap()
}

fn has_gpu() -> bool {
    dmaflow::gpu::driver::count() > 0
}

#[test]
fn without_a_gpu_the_gpu_experiment_skips_and_reports_it() {
    if has_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for args in [
        &["bench", "gpu", "--json", "--out", out][..],
        &[
            "bench", "transfer", "--device", "cuda", "--json", "--out", out,
        ][..],
    ] {
        let o = dmaflow(args);
        assert!(o.status.success(), "{args:?}: {o:?}");
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
        let experiment = if args[1] == "cnn" { "cnn" } else { "gpu" };
        assert_eq!(doc["experiment"], experiment);
        assert!(
            doc["skipped"]
                .as_str()
                .is_some_and(|s| s.starts_with("no CUDA device: skipped")),
            "{doc}"
        );
        assert_eq!(doc["rows"].as_array().map(Vec::len), Some(0));
    }
    assert!(dir.path().join("index.html").exists());
}

#[test]
fn device_words_that_name_nothing_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for (args, says) in [
        (
            &["bench", "cnn", "--device", "cuda:x", "--out", out][..],
            "cuda:x",
        ),
        (
            &["bench", "cnn", "--device", "gpu", "--out", out][..],
            "\"gpu\"",
        ),
        (
            &["bench", "ring", "--device", "cuda", "--out", out][..],
            "`bench ring` has no GPU form",
        ),
    ] {
        let o = dmaflow(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} ran something");
    }
}

#[test]
fn bgsub_on_a_missing_gpu_names_it_and_writes_nothing() {
    if has_gpu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("frames.raw");
    let output = dir.path().join("masks.raw");
    std::fs::write(&input, vec![7u8; 16 * 8 * 3]).unwrap();
    let o = dmaflow(&[
        "bgsub",
        "--width",
        "16",
        "--height",
        "8",
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
        "--device",
        "cuda",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no CUDA driver"));
    assert!(!output.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
