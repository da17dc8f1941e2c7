//! What `dmaflow info` tells a board's user: from the board's sysfs and `/dev`,
//! whether dmaflow finds what it drives a design with (each AXI DMA's registers
//! as a UIO device, each channel's interrupt line, a u-dma-buf for buffers, and
//! access to their device files), and for each thing missing, what to add. The
//! conventions are those of `dmaflow::board::Board::open` and Python's
//! `Overlay(<bitstream>)`; the guide's "DMA on a board" (docs/board.md) has the
//! device-tree fragment and the module parameters this advice points at.

use std::path::Path;

use dmaflow::platform::uio::{Inventory, UioDevice};

/// One line of the check: what was found (`ok`), or what is missing and what
/// to add: `missing` where dmaflow cannot drive a design without it,
/// `warning` where it can (a channel without its interrupt is driven by
/// polling).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `ok`, `warning` or `missing`.
    pub mark: &'static str,
    /// What was found, or what is missing and what to add.
    pub text: String,
}

/// A finding marked `mark`.
fn finding(mark: &'static str, text: impl Into<String>) -> Finding {
    let text = text.into();
    Finding { mark, text }
}

/// `found` when the device file `dev` under `root` opens for reading and
/// writing; else, missing, why not (`who: why`).
fn reach(root: &Path, dev: &str, who: &str, found: String) -> Finding {
    let path = root.join("dev").join(dev);
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path);
    let why = match opened {
        Ok(_) => return finding("ok", found),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "does not exist (udev did not make it: is the driver bound?)".to_string()
        }
        Err(e) => format!(
            "cannot be opened for reading and writing ({e}): run as root, or give your user \
             access with a udev rule (see docs/board.md, \"What a board needs\")"
        ),
    };
    finding("missing", format!("{who}: {} {why}", path.display()))
}

/// The AXI DMA engines' register windows among a board's UIO devices.
pub fn engines(inv: &Inventory) -> impl Iterator<Item = &UioDevice> {
    inv.uio
        .iter()
        .filter(|d| d.name.starts_with("axi_dma") && d.size > 0)
}

/// Checks a board's inventory (read under `root`) against what dmaflow needs.
pub fn check(inv: &Inventory, root: &Path) -> Vec<Finding> {
    let mut out = Vec::new();
    if engines(inv).next().is_none() {
        out.push(finding(
            "missing",
            "no AXI DMA engine: dmaflow finds each engine as a UIO device named as its \
             block-design instance (axi_dma_0): add a device-tree node with \
             compatible = \"generic-uio\" for it and load uio_pdrv_genirq with \
             of_id=generic-uio (docs/board.md, \"What a board needs\")",
        ));
    }
    for e in engines(inv) {
        let found = format!(
            "{}: registers at physical {:#x} through /dev/uio{}",
            e.name, e.addr, e.index
        );
        out.push(reach(root, &format!("uio{}", e.index), &e.name, found));
        for ch in ["mm2s", "s2mm"] {
            let line = format!("{}_{ch}_introut", e.name);
            let channel = format!("{} {}", e.name, ch.to_uppercase());
            out.push(match inv.uio.iter().find(|d| d.name == line) {
                Some(d) => {
                    let found =
                        format!("{channel}: interrupt through /dev/uio{} ({line})", d.index);
                    reach(root, &format!("uio{}", d.index), &line, found)
                }
                None => finding(
                    "warning",
                    format!(
                        "{channel}: no interrupt line (no UIO device named {line}): its waits \
                         poll DMASR instead of sleeping; to wait on the interrupt, add a \
                         generic-uio node named {line} with the channel's interrupt \
                         (docs/board.md, \"What a board needs\")"
                    ),
                ),
            });
        }
    }
    if inv.udmabuf.is_empty() {
        out.push(finding(
            "missing",
            "no u-dma-buf: DMA buffers come from one; load the u-dma-buf module with a \
             buffer, e.g. `modprobe u-dma-buf udmabuf0=67108864` (64 MiB), or add a \
             u-dma-buf device-tree node (docs/board.md, \"What a board needs\")",
        ));
    }
    for (name, phys, size) in &inv.udmabuf {
        let found = format!(
            "{name}: {} MiB of DMA memory at physical {phys:#x}",
            size >> 20
        );
        out.push(reach(root, name, name, found));
    }
    out
}

/// The one-line verdict after the findings.
pub fn verdict(findings: &[Finding]) -> String {
    let count = |mark| findings.iter().filter(|f| f.mark == mark).count();
    let ready = "board: ready for Overlay(<bitstream>) and Board::open";
    match (count("missing"), count("warning")) {
        (0, 0) => ready.to_string(),
        (0, warnings) => format!("{ready}, with {warnings} warning(s) (above)"),
        (blocking, _) => {
            format!("board: not ready for a design: {blocking} thing(s) to add (above)")
        }
    }
}
