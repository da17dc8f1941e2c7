//! A real board: its AXI DMA engines through UIO, found by the names the
//! device tree gives them, and its DMA memory through u-dma-buf.
//!
//! What the board's device tree overlay provides (the names are the block
//! design's instance names, so they are PYNQ's names too):
//! - each IP's register window is a UIO device named as its instance
//!   (`axi_dma_0`, `fir_0`), `generic-uio` or `uio_pdrv_genirq`;
//! - each DMA channel's interrupt, where Linux receives it, is a UIO device of
//!   its own named `<engine>_mm2s_introut` / `<engine>_s2mm_introut` (PG021's
//!   pin names, the keys of PYNQ's `ip_dict` interrupts); a channel without
//!   one has a [`NoIrq`] line and is completed by polling;
//! - the DMA memory is a u-dma-buf (`udmabuf0` by default).
//!
//! Every path is taken under a root directory (normally `/`), so tests can
//! point it at a fake tree.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Error;
use crate::axi::{AxiDma, Config as AxiConfig};
use crate::dma::{DynEngine, Engine};
use crate::mem::{CachePolicy, DmaPool};
use crate::platform::uio::{
    Inventory, UioRegisters, inventory, open_udmabuf, open_uio, open_uio_irq,
};
use crate::platform::{DmaMemory, IrqLine, NoIrq, RegisterSpace};

/// A real board: what its UIO devices are, and a pool over its u-dma-buf.
pub struct Board {
    root: PathBuf,
    inventory: Inventory,
    pool: DmaPool,
}

impl Board {
    /// The board under `root` with the u-dma-buf `memory` (`udmabuf0`) as its
    /// DMA memory: coherent buffers where u-dma-buf says the device is
    /// (`dma_coherent`), explicit cache maintenance otherwise.
    pub fn open(root: &Path, memory: &str) -> Result<Self, Error> {
        let inventory = inventory(root);
        let buf = open_udmabuf(root, memory)?;
        let policy = if buf.coherent() {
            CachePolicy::Coherent
        } else {
            CachePolicy::Explicit
        };
        let pool = DmaPool::new(Arc::new(buf), policy)?;
        Ok(Board {
            root: root.to_path_buf(),
            inventory,
            pool,
        })
    }

    /// The board's UIO devices and u-dma-bufs.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// The pool over the board's DMA memory.
    pub fn pool(&self) -> &DmaPool {
        &self.pool
    }

    /// The register window of the IP called `name` (for register access by
    /// hand, PYNQ's MMIO).
    pub fn registers(&self, name: &str) -> Result<UioRegisters, Error> {
        let dev = self.inventory.uio_named(name)?;
        Ok(open_uio(&self.root, dev.index)?.0)
    }

    /// The interrupt line `name`, or a [`NoIrq`] naming it where the board
    /// has no UIO device of that name.
    fn irq(&self, name: &str) -> Result<Box<dyn IrqLine>, Error> {
        match self.inventory.uio_named(name) {
            Ok(dev) => Ok(Box::new(open_uio_irq(&self.root, dev.index)?)),
            Err(_) => Ok(Box::new(NoIrq(name.to_string()))),
        }
    }

    /// A driver for the AXI DMA engine called `name` (`axi_dma_0`), with its
    /// channels' interrupt lines where the board has them, reset and ready;
    /// its transfers use this board's pool.
    pub fn engine(&self, name: &str, cfg: AxiConfig) -> Result<DynEngine, Error> {
        let open = || -> Result<DynEngine, Error> {
            let regs: Box<dyn RegisterSpace> = Box::new(self.registers(name)?);
            let dma = AxiDma::new(regs, cfg)?;
            Ok(Engine::new(
                dma,
                self.irq(&format!("{name}_mm2s_introut"))?,
                self.irq(&format!("{name}_s2mm_introut"))?,
                self.pool.clone(),
            ))
        };
        open().map_err(|e| Error::Device {
            name: name.to_string(),
            source: Box::new(e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A board tree of plain files: `axi_dma_0` and `fir_0` with register
    /// windows, `axi_dma_0`'s S2MM interrupt as a device of its own, and a
    /// u-dma-buf at `phys`.
    fn fake_board(root: &Path, phys: u64) {
        for (i, name, addr) in [
            (0, "axi_dma_0", Some(crate::designs::REGISTER_BASE)),
            (1, "axi_dma_0_s2mm_introut", None),
            (
                2,
                "fir_0",
                Some(crate::designs::REGISTER_BASE + crate::designs::REGISTER_RANGE),
            ),
        ] {
            let uio = root.join(format!("sys/class/uio/uio{i}"));
            std::fs::create_dir_all(&uio).unwrap();
            std::fs::write(uio.join("name"), format!("{name}\n")).unwrap();
            if let Some(addr) = addr {
                std::fs::create_dir_all(uio.join("maps/map0")).unwrap();
                std::fs::write(uio.join("maps/map0/size"), "0x10000\n").unwrap();
                std::fs::write(uio.join("maps/map0/addr"), format!("{addr:#x}\n")).unwrap();
            }
            std::fs::create_dir_all(root.join("dev")).unwrap();
            std::fs::write(root.join(format!("dev/uio{i}")), vec![0u8; 0x10000]).unwrap();
        }
        let ub = root.join("sys/class/u-dma-buf/udmabuf0");
        std::fs::create_dir_all(&ub).unwrap();
        std::fs::write(ub.join("phys_addr"), format!("{phys:#x}\n")).unwrap();
        std::fs::write(ub.join("size"), "1048576\n").unwrap();
        std::fs::write(ub.join("dma_coherent"), "1\n").unwrap();
        std::fs::write(root.join("dev/udmabuf0"), vec![0u8; 1 << 20]).unwrap();
    }

    #[test]
    fn a_board_is_found_by_its_device_tree_names() {
        let dir = tempfile::tempdir().unwrap();
        fake_board(dir.path(), 0x5100_0000);
        let board = Board::open(dir.path(), "udmabuf0").unwrap();
        let names: Vec<&str> = board
            .inventory()
            .uio
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["axi_dma_0", "axi_dma_0_s2mm_introut", "fir_0"]);
        assert!(
            board.inventory().malformed.is_empty(),
            "{:?}",
            board.inventory().malformed
        );
        // The interrupt-only device has no window.
        assert_eq!(board.inventory().uio[1].size, 0);
        // Buffers come from the u-dma-buf, at its physical addresses.
        let buf = board.pool().alloc::<u8>(4096).unwrap();
        assert!((0x5100_0000..0x5110_0000).contains(&buf.bus_addr()));
        assert_eq!(board.pool().policy(), CachePolicy::Coherent);
        // Registers by name reach the device file.
        let fir = board.registers("fir_0").unwrap();
        // SAFETY: a plain file stands in for the core: nothing is started.
        unsafe { fir.write(0x10, 0xabcd) }.unwrap();
        let bytes = std::fs::read(dir.path().join("dev/uio2")).unwrap();
        assert_eq!(&bytes[0x10..0x14], &0xabcdu32.to_ne_bytes());
        // Interrupt lines by name; a channel without one polls.
        assert!(!board.irq("axi_dma_0_mm2s_introut").unwrap().wired());
        assert!(board.irq("axi_dma_0_s2mm_introut").unwrap().wired());
        let e = NoIrq("axi_dma_0_mm2s_introut".into())
            .wait(Duration::from_millis(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("axi_dma_0_mm2s_introut") && e.contains("polling"),
            "{e}"
        );
    }

    #[test]
    fn an_engine_that_does_not_answer_is_named() {
        let dir = tempfile::tempdir().unwrap();
        fake_board(dir.path(), 0x5200_0000);
        let board = Board::open(dir.path(), "udmabuf0").unwrap();
        let cfg = AxiConfig {
            timeout: Duration::from_millis(20),
            ..AxiConfig::default()
        };
        // A plain file never clears DMACR.Reset: the reset times out, named.
        let e = board.engine("axi_dma_0", cfg).err().unwrap().to_string();
        assert!(
            e.starts_with("axi_dma_0: ") && e.contains("no completion"),
            "{e}"
        );
        let e = board.engine("axi_dma_3", cfg).err().unwrap().to_string();
        assert!(e.contains("\"axi_dma_3\"") && e.contains("fir_0"), "{e}");
        let e = Board::open(dir.path(), "udmabuf9")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("udmabuf9"), "{e}");
    }
}
