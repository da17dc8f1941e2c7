//! `dmaflow fir`: files in, files out, clear errors with exit status 2.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use dmaflow::dsp::fir::direct;

fn write_f32(path: &Path, v: &[f32]) {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn run(args: &[OsString]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .arg("fir")
        .args(args)
        .output()
        .unwrap()
}

fn args(taps: &Path, input: &Path, output: &Path) -> Vec<OsString> {
    vec![
        "--taps".into(),
        taps.into(),
        "--input".into(),
        input.into(),
        "--output".into(),
        output.into(),
    ]
}

#[test]
fn filters_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, y) = (
        dir.path().join("t.f32"),
        dir.path().join("x.f32"),
        dir.path().join("y.f32"),
    );
    let taps: Vec<f32> = (0..21).map(|i| ((i as f32) * 0.3).cos() / 10.0).collect();
    let input: Vec<f32> = (0..200_001)
        .map(|i| ((i as f32) * 0.01).sin() + ((i * 7919 % 13) as f32 - 6.0) / 6.0)
        .collect();
    write_f32(&t, &taps);
    write_f32(&x, &input);
    let mut a = args(&t, &x, &y);
    a.extend(os(&["--fft", "256"]));
    let out = run(&a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&y).unwrap();
    assert_eq!(bytes.len(), input.len() * 4);
    let got: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let want = direct(&taps, &input);
    let rms = (want.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / want.len() as f64).sqrt();
    let worst = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs() as f64)
        .fold(0.0, f64::max);
    assert!(worst < 1e-4 * rms, "error {worst}, rms {rms}");
}

fn expect_bad(a: &[OsString], output: &Path, needle: &str) {
    let out = run(a);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "message {err:?} should mention {needle:?}"
    );
    assert!(!output.exists(), "no output file may be left behind");
    let leftovers: Vec<_> = std::fs::read_dir(output.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "partial files left: {leftovers:?}");
}

#[test]
fn bad_inputs_exit_2_and_leave_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    write_f32(&p("taps.f32"), &[0.5, 0.5]);
    write_f32(&p("x.f32"), &[1.0, 2.0, 3.0]);
    std::fs::write(p("odd.f32"), [0u8; 7]).unwrap();
    std::fs::write(p("empty.f32"), []).unwrap();
    let y = p("y.f32");

    expect_bad(&args(&p("missing.f32"), &p("x.f32"), &y), &y, "missing.f32");
    expect_bad(&args(&p("taps.f32"), &p("nope.f32"), &y), &y, "nope.f32");
    expect_bad(&args(&p("taps.f32"), &p("odd.f32"), &y), &y, "odd.f32");
    expect_bad(
        &args(&p("odd.f32"), &p("x.f32"), &y),
        &y,
        "not a whole number",
    );
    expect_bad(&args(&p("empty.f32"), &p("x.f32"), &y), &y, "no taps");
    let mut a = args(&p("taps.f32"), &p("x.f32"), &y);
    a.extend(os(&["--fft", "1"]));
    expect_bad(&a, &y, "power of two");
    write_f32(&p("long.f32"), &[0.1; 100]);
    let mut a = args(&p("long.f32"), &p("x.f32"), &y);
    a.extend(os(&["--fft", "64"]));
    expect_bad(&a, &y, "shorter than the filter");
}

#[test]
fn empty_input_gives_empty_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, y) = (
        dir.path().join("t"),
        dir.path().join("x"),
        dir.path().join("y"),
    );
    write_f32(&t, &[1.0]);
    std::fs::write(&x, []).unwrap();
    let out = run(&args(&t, &x, &y));
    assert!(out.status.success());
    assert_eq!(std::fs::read(&y).unwrap().len(), 0);
}

/// Files in `dir` other than `keep` (no temporary or partial output left).
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

fn taps_and_input(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, Vec<f32>) {
    let (t, x) = (dir.join("t.f32"), dir.join("x.f32"));
    write_f32(&t, &[0.5, 0.25, 0.25]);
    let input: Vec<f32> = (0..50_000).map(|i| (i as f32 * 0.37).sin()).collect();
    write_f32(&x, &input);
    (t, x, input)
}

#[test]
fn a_directory_as_input_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (t, _, _) = taps_and_input(dir.path());
    let y = dir.path().join("y.f32");
    let out = run(&args(&t, dir.path(), &y));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a directory"), "{err}");
    assert_eq!(
        leftovers(dir.path(), &["t.f32", "x.f32"]),
        Vec::<String>::new()
    );
}

#[test]
fn a_named_pipe_is_read_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, _) = taps_and_input(dir.path());
    let (fifo, y, want) = (
        dir.path().join("x.fifo"),
        dir.path().join("y.f32"),
        dir.path().join("want.f32"),
    );
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // The same data through a regular file and through the pipe.
    assert!(run(&args(&t, &x, &want)).status.success());
    let data = std::fs::read(&x).unwrap();
    let writer = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            // In pieces that do not fall on sample boundaries.
            for piece in data.chunks(1001) {
                f.write_all(piece).unwrap();
            }
        }
    });
    let out = run(&args(&t, &fifo, &y));
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = std::fs::read(&y).unwrap();
    assert_eq!(got.len(), 50_000 * 4);
    assert_eq!(got, std::fs::read(&want).unwrap());
}

#[test]
fn a_proc_file_is_read_to_its_end_or_refused_by_length() {
    let dir = tempfile::tempdir().unwrap();
    let (t, _, _) = taps_and_input(dir.path());
    let y = dir.path().join("y.f32");
    // The file system says 0 bytes; the contents are not.
    let input = Path::new("/proc/self/status");
    let out = run(&args(&t, input, &y));
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(std::fs::metadata(&y).unwrap().len() > 0, "empty output"),
        Some(2) => {
            assert!(err.contains("not a whole number"), "{err}");
            assert!(!y.exists());
        }
        other => panic!("{other:?}: {err}"),
    }
}

#[test]
fn an_fft_beyond_the_limit_is_refused_with_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, _) = taps_and_input(dir.path());
    let y = dir.path().join("y.f32");
    let mut a = args(&t, &x, &y);
    a.extend(os(&["--fft", "1099511627776"]));
    let out = run(&a);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("more than the limit") && err.contains("2^24"),
        "{err}"
    );
    assert!(!y.exists());
}

#[test]
fn an_output_in_a_missing_directory_names_the_path_given() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, _) = taps_and_input(dir.path());
    let y = dir.path().join("missing").join("y.f32");
    let out = run(&args(&t, &x, &y));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&*y.to_string_lossy()), "{err}");
    assert!(!err.contains(".partial"), "{err}");
}

#[test]
fn a_failure_while_running_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, _) = taps_and_input(dir.path());
    let y = dir.path().join("y.f32");
    // Too little address space for the queues a 2^22-point FFT needs: mapping
    // them fails after the temporary output file was created.
    let cmd = format!(
        "ulimit -v 200000; exec '{}' fir --taps '{}' --input '{}' --output '{}' --fft 4194304",
        env!("CARGO_BIN_EXE_dmaflow"),
        t.display(),
        x.display(),
        y.display()
    );
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mapping") || err.contains("memory"), "{err}");
    assert_eq!(
        leftovers(dir.path(), &["t.f32", "x.f32"]),
        Vec::<String>::new()
    );
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `--device sim`: the FIR coprocessor as an accelerator node gives the CPU
/// filter's output (within float tolerance), for inputs of many lengths.
#[test]
fn the_coprocessor_filters_a_file_as_the_cpu_does() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.f32");
    let taps: Vec<f32> = (0..45).map(|i| ((i as f32) * 0.2).sin() / 20.0).collect();
    write_f32(&t, &taps);
    for len in [1usize, 44, 45, 4096, 100_003] {
        let (x, y) = (dir.path().join("x.f32"), dir.path().join("y.f32"));
        let input: Vec<f32> = (0..len).map(|i| ((i as f32) * 0.07).cos()).collect();
        write_f32(&x, &input);
        let mut a = args(&t, &x, &y);
        a.extend(os(&["--device", "sim"]));
        let out = run(&a);
        assert!(
            out.status.success(),
            "{len}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = read_f32(&y);
        let want = direct(&taps, &input);
        assert_eq!(got.len(), want.len(), "{len} samples");
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-5, "{len}: sample {i}: {a} vs {b}");
        }
        // The samples stayed in DMA memory from the source to the sink.
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains(&format!("{len} samples"))
                && said.contains("copied 0 bytes")
                && said.contains(&format!("{} delivered", 4 * len)),
            "{said}"
        );
    }
}

/// What the coprocessor cannot take is refused with exit status 2, and no
/// output appears.
#[test]
fn the_coprocessor_s_bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (t, x, y) = (
        dir.path().join("t.f32"),
        dir.path().join("x.f32"),
        dir.path().join("y.f32"),
    );
    write_f32(&x, &[1.0; 1000]);
    // More taps than the core holds.
    write_f32(&t, &vec![0.1; 600]);
    let mut a = args(&t, &x, &y);
    a.extend(os(&["--device", "sim"]));
    let out = run(&a);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("600 taps"));
    assert!(!y.exists());
    // An FFT length for a filter that has none.
    write_f32(&t, &[0.5, 0.5]);
    let mut a = args(&t, &x, &y);
    a.extend(os(&["--device", "sim", "--fft", "64"]));
    let out = run(&a);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fft"));
    assert!(!y.exists());
}
