//! `dmaflow info` lists what a board offers.

use std::process::Command;

#[test]
fn lists_uio_devices_udmabufs_and_the_sim() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let uio = root.join("sys/class/uio/uio2");
    std::fs::create_dir_all(uio.join("maps/map0")).unwrap();
    std::fs::write(uio.join("name"), "axi_dma_0\n").unwrap();
    std::fs::write(uio.join("maps/map0/size"), "0x10000\n").unwrap();
    std::fs::write(uio.join("maps/map0/addr"), "0x40400000\n").unwrap();
    let ub = root.join("sys/class/u-dma-buf/udmabuf0");
    std::fs::create_dir_all(&ub).unwrap();
    std::fs::write(ub.join("phys_addr"), "0x3f000000\n").unwrap();
    std::fs::write(ub.join("size"), "4194304\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(["info", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("/dev/uio2 (axi_dma_0), registers 0x10000 bytes at physical 0x40400000"),
        "{text}"
    );
    assert!(
        text.contains("/dev/udmabuf0, 4194304 bytes at physical 0x3f000000"),
        "{text}"
    );
    assert!(text.contains("sim: emulated AXI DMA"), "{text}");
}

#[test]
fn a_malformed_sysfs_file_is_named_not_read_as_zero() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let uio = root.join("sys/class/uio/uio0");
    std::fs::create_dir_all(uio.join("maps/map0")).unwrap();
    std::fs::write(uio.join("name"), "axi_dma\n").unwrap();
    std::fs::write(uio.join("maps/map0/size"), "lots\n").unwrap();
    let ub = root.join("sys/class/u-dma-buf/udmabuf0");
    std::fs::create_dir_all(&ub).unwrap();
    std::fs::write(ub.join("size"), "4096\n").unwrap(); // phys_addr missing
    let out = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(["info", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("0 bytes at physical 0x0"), "{text}");
    assert!(!text.contains("registers 0x0 bytes"), "{text}");
    assert!(
        err.contains("map0/size") && err.contains("not a number"),
        "{err}"
    );
    assert!(err.contains("udmabuf0/phys_addr"), "{err}");
}

/// A board's sysfs and /dev under a temporary root: an AXI DMA engine's
/// registers, each channel's interrupt line if `interrupts`, a u-dma-buf if
/// `udmabuf`, and their device files.
fn board_tree(interrupts: bool, udmabuf: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("dev")).unwrap();
    let uio = |index: usize, name: &str, regs: bool| {
        let d = root.join(format!("sys/class/uio/uio{index}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("name"), format!("{name}\n")).unwrap();
        if regs {
            std::fs::create_dir_all(d.join("maps/map0")).unwrap();
            std::fs::write(d.join("maps/map0/size"), "0x10000\n").unwrap();
            std::fs::write(d.join("maps/map0/addr"), "0x40400000\n").unwrap();
        }
        std::fs::write(root.join(format!("dev/uio{index}")), "").unwrap();
    };
    uio(0, "axi_dma_0", true);
    if interrupts {
        uio(1, "axi_dma_0_mm2s_introut", false);
        uio(2, "axi_dma_0_s2mm_introut", false);
    }
    if udmabuf {
        let ub = root.join("sys/class/u-dma-buf/udmabuf0");
        std::fs::create_dir_all(&ub).unwrap();
        std::fs::write(ub.join("phys_addr"), "0x3f000000\n").unwrap();
        std::fs::write(ub.join("size"), "67108864\n").unwrap();
        std::fs::write(root.join("dev/udmabuf0"), "").unwrap();
    }
    dir
}

fn info(root: &std::path::Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .args(["info", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_complete_board_is_ready_with_nothing_to_add() {
    let dir = board_tree(true, true);
    let text = info(dir.path());
    assert!(
        text.contains("ok: axi_dma_0 MM2S: interrupt through /dev/uio1 (axi_dma_0_mm2s_introut)"),
        "{text}"
    );
    assert!(
        text.contains("ok: axi_dma_0 S2MM: interrupt through /dev/uio2"),
        "{text}"
    );
    assert!(
        text.contains("ok: udmabuf0: 64 MiB of DMA memory at physical 0x3f000000"),
        "{text}"
    );
    assert!(
        !text.contains("missing:") && !text.contains("warning:"),
        "{text}"
    );
    assert!(
        text.contains("board: ready for Overlay(<bitstream>) and Board::open\n"),
        "{text}"
    );
}

#[test]
fn a_board_without_interrupt_lines_is_told_it_polls_and_what_to_add() {
    let dir = board_tree(false, true);
    let text = info(dir.path());
    for ch in ["MM2S", "S2MM"] {
        assert!(
            text.contains(&format!("warning: axi_dma_0 {ch}: no interrupt line")),
            "{text}"
        );
    }
    assert!(text.contains("named axi_dma_0_s2mm_introut"), "{text}");
    assert!(text.contains("poll DMASR"), "{text}");
    assert!(
        text.contains("board: ready") && text.contains("2 warning(s)"),
        "{text}"
    );
}

#[test]
fn a_board_without_u_dma_buf_is_not_ready_and_told_how_to_add_one() {
    let dir = board_tree(true, false);
    let text = info(dir.path());
    assert!(text.contains("missing: no u-dma-buf"), "{text}");
    assert!(text.contains("modprobe u-dma-buf udmabuf0="), "{text}");
    assert!(
        text.contains("board: not ready for a design: 1 thing(s) to add"),
        "{text}"
    );
}

#[test]
fn a_device_file_that_is_missing_is_named() {
    let dir = board_tree(true, true);
    std::fs::remove_file(dir.path().join("dev/uio2")).unwrap();
    let text = info(dir.path());
    assert!(
        text.contains("missing: axi_dma_0_s2mm_introut:")
            && text.contains("dev/uio2 does not exist"),
        "{text}"
    );
    assert!(text.contains("board: not ready"), "{text}");
}

/// `dmaflow bench NAME --board ROOT` with its report directory: status,
/// stderr, and whether any report file was written.
fn bench_on_board(args: &[&str], root: &std::path::Path) -> (Option<i32>, String, bool) {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_dmaflow"))
        .arg("bench")
        .args(args)
        .arg("--board")
        .arg(root)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let written = std::fs::read_dir(out.path()).unwrap().next().is_some();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        written,
    )
}

#[test]
fn bench_on_a_board_that_is_not_there_exits_2_saying_what_to_give() {
    let (code, err, written) = bench_on_board(&["transfer"], std::path::Path::new("/nonexistent"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent is not a directory"), "{err}");
    assert!(!written);
}

#[test]
fn bench_on_a_board_without_interrupt_lines_exits_2_with_infos_advice() {
    // `dmaflow info` calls these warnings (its waits would poll); the
    // experiments measure interrupt completion, so here they are missing.
    let dir = board_tree(false, true);
    for e in ["transfer", "twoway", "loopback"] {
        let (code, err, written) = bench_on_board(&[e], dir.path());
        assert_eq!(code, Some(2), "{e}: {err}");
        for line in ["axi_dma_0_mm2s_introut", "axi_dma_0_s2mm_introut"] {
            assert!(
                err.contains(&format!("no UIO device named {line}")),
                "{e}: {err}"
            );
        }
        assert!(!written, "{e}: a report was written");
    }
}

#[test]
fn bench_on_a_board_without_u_dma_buf_exits_2_with_infos_advice() {
    let dir = board_tree(true, false);
    let (code, err, written) = bench_on_board(&["loopback"], dir.path());
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("no u-dma-buf") && err.contains("modprobe u-dma-buf udmabuf0="),
        "{err}"
    );
    assert!(!written);
}

#[test]
fn experiments_that_need_the_emulator_refuse_a_board() {
    let dir = board_tree(true, true);
    for e in ["faults", "bgsub", "contention", "ring"] {
        let (code, err, written) = bench_on_board(&[e], dir.path());
        assert_eq!(code, Some(2), "{e}: {err}");
        assert!(
            err.contains(&format!("`bench {e}` needs the emulated fabric")),
            "{e}: {err}"
        );
        assert!(!written);
    }
}
