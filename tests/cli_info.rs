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
        text.contains("/dev/uio2 (axi_dma_0), registers 0x10000 bytes"),
        "{text}"
    );
    assert!(
        text.contains("/dev/udmabuf0, 4194304 bytes at physical 0x3f000000"),
        "{text}"
    );
    assert!(text.contains("sim: emulated AXI DMA"), "{text}");
}
