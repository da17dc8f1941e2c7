//! `dmaflow bench`: JSON on stdout (one document per experiment, the documented
//! keys), and the report files in --out.

use std::process::Command;

#[test]
fn bgsub_and_cnn_print_json_and_write_their_report() {
    let dir = tempfile::tempdir().unwrap();
    for (experiment, keys) in [
        (
            "bgsub",
            &[
                "device",
                "width",
                "height",
                "frames",
                "frames_per_s",
                "verified",
                "cpu_us",
                "model_us",
                "overhead_us",
            ][..],
        ),
        (
            "cnn",
            &[
                "completion",
                "layer",
                "tx_bytes",
                "rx_bytes",
                "tx_us_per_byte",
                "rx_us_per_byte",
                "frame_ms",
                "verified",
                "cpu_us",
                "model_us",
                "overhead_us",
            ][..],
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
            .args(["bench", experiment, "--quick", "--json", "--out"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // --json is quiet on stderr: no progress bar.
        assert!(
            o.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["experiment"], experiment);
        let rows = doc["rows"].as_array().unwrap();
        assert!(!rows.is_empty());
        for r in rows {
            for k in keys {
                assert!(r.get(*k).is_some(), "{experiment}: no {k} in {r}");
            }
            assert_eq!(r["verified"], true, "{r}");
        }
        let csv = std::fs::read_to_string(dir.path().join(format!("{experiment}.csv"))).unwrap();
        assert_eq!(csv.lines().count(), rows.len() + 1);
        // bgsub's two rows are a table, not a plot.
        assert_eq!(
            dir.path().join(format!("{experiment}.svg")).exists(),
            experiment == "cnn"
        );
    }
    // The Targets table is made from the JSON documents the runs wrote.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("cnn.json")).unwrap())
            .unwrap();
    assert!(doc["targets"].is_array() && doc["answer"].is_string());
    let t = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .arg("targets")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let md = String::from_utf8_lossy(&t.stdout);
    assert!(
        md.starts_with("| experiment | target | found | |\n|---|"),
        "{md}"
    );
    let rows = doc["targets"].as_array().unwrap().len();
    assert_eq!(
        md.lines().filter(|l| l.starts_with("| cnn |")).count(),
        rows
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .arg("targets")
        .arg(dir.path().join("cnn.csv"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a dmaflow bench JSON document"));
    let index = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    assert!(index.contains("Machine:") && index.contains("bench cnn"));
    // The answers come first: the last run's (cnn) sentence before any section.
    let answers = index.find("What this run found").unwrap();
    let first_section = index.find("<section id=").unwrap();
    assert!(answers < first_section);
    for needle in ["convolution layers", "equal to the software reference"] {
        let at = index.find(needle).unwrap_or_else(|| panic!("no {needle}"));
        assert!(at < first_section, "{needle} is not among the answers");
    }
}

#[test]
fn an_unwritable_report_directory_is_refused_before_any_experiment() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(["bench", "cnn", "--out", "/proc/dmaflow-report"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/dmaflow-report"), "{err}");
    // Nothing ran: no table was printed.
    assert!(String::from_utf8_lossy(&out.stdout).is_empty());
}

#[test]
fn bench_help_documents_the_cost_keys_of_every_dma_experiment() {
    let o = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(["bench", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "model_us",
        "overhead_us",
        "cpu_us",
        "cpu_share",
        "contention:",
        "memory:",
        "pipeline:",
        "copied_per_byte",
        "--board",
    ] {
        assert!(
            help.contains(needle),
            "bench --help does not mention {needle}"
        );
    }
}

#[test]
fn the_cross_process_row_reads_every_item_in_another_process() {
    use dmaflow_cli::bench::Setup;
    use dmaflow_cli::bench::ring::{Config, EXPERIMENT};
    let cfg = Config {
        reader: Some(std::path::PathBuf::from(env!("CARGO_BIN_EXE_dmaflow"))),
        ..Config::at(&Setup::TINY)
    };
    // Every row's checksum is verified inside the measurement: the child
    // process summed every item the writer here wrote.
    let rows = EXPERIMENT.rows(&cfg, &mut |_| {}).unwrap();
    let across: Vec<_> = rows
        .iter()
        .filter(|r| r.point.series == "dmaflow-process")
        .collect();
    assert_eq!(across.len(), cfg.batches.len());
    assert!(across.iter().all(|r| r.typical(|s| s.gbytes_per_s) > 0.0));
    // The child reported how many of its looks found items: every one found
    // at least a whole batch (4-byte items).
    for r in &across {
        let batch = (r.point.at.0 / 4) as f64;
        assert!(r.typical(|s| s.items_per_look) >= batch, "{r:?}");
    }
    let text = EXPERIMENT.report(&cfg, &rows).text;
    assert!(text.contains("other process / other thread"), "{text}");
}
