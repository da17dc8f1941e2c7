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
