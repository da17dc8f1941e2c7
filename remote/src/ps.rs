//! The Zynq UltraScale+ PS registers PYNQ's client touches through MMIO when
//! it loads an overlay: the clock controllers (CRF_APB, CRL_APB), whose PLL
//! and PL clock registers it reads and read-modify-writes, and the AXI port
//! width registers (FPD_SLCR, LPD_SLCR, AFIFM) it sets from the `.hwh`. On the
//! emulated board they are plain memory holding what a board reads after
//! boot: IOPLL at 1500 MHz from the 33.333 MHz reference, PL0 at 100 MHz.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One block of PS registers (a register module of the TRM).
pub(crate) struct Block {
    /// Physical base address.
    pub(crate) base: u64,
    /// Bytes the block spans.
    pub(crate) len: u64,
}

/// The blocks served (64 KiB each, as the TRM's register modules).
pub(crate) const BLOCKS: [Block; 10] = [
    Block {
        base: 0xFD1A_0000,
        len: 0x1_0000,
    }, // CRF_APB
    Block {
        base: 0xFF5E_0000,
        len: 0x1_0000,
    }, // CRL_APB
    Block {
        base: 0xFD61_0000,
        len: 0x1_0000,
    }, // FPD_SLCR
    Block {
        base: 0xFF41_0000,
        len: 0x1_0000,
    }, // LPD_SLCR
    Block {
        base: 0xFD36_0000,
        len: 0x1_0000,
    }, // AFIFM0
    Block {
        base: 0xFD37_0000,
        len: 0x1_0000,
    }, // AFIFM1
    Block {
        base: 0xFD38_0000,
        len: 0x1_0000,
    }, // AFIFM2
    Block {
        base: 0xFD39_0000,
        len: 0x1_0000,
    }, // AFIFM3
    Block {
        base: 0xFD3A_0000,
        len: 0x1_0000,
    }, // AFIFM4
    Block {
        base: 0xFD3B_0000,
        len: 0x1_0000,
    }, // AFIFM5
];

/// A PLL control word: feedback divider `fbdiv`, output halved (DIV2),
/// source PS_REF_CLK (PRE_SRC 0).
const fn pll(fbdiv: u32) -> u32 {
    (1 << 16) | (fbdiv << 8)
}

/// A PL clock control word: clock active, IOPLL source, divisors
/// `div0` x `div1`.
const fn pl_clk(active: bool, div0: u32, div1: u32) -> u32 {
    ((active as u32) << 24) | (div1 << 16) | (div0 << 8)
}

/// What the registers read after boot, where not zero.
const RESET: [(u64, u32); 11] = [
    (0xFD1A_0020, pll(72)),              // APLL_CTRL: 1200 MHz
    (0xFD1A_002C, pll(64)),              // DPLL_CTRL: 1066 MHz
    (0xFD1A_0038, pll(90)),              // VPLL_CTRL
    (0xFD1A_0060, 0x0300_0100),          // ACPU_CTRL: APLL / 1
    (0xFF5E_0020, pll(90)),              // IOPLL_CTRL: 1500 MHz
    (0xFF5E_0030, pll(72)),              // RPLL_CTRL
    (0xFF5E_00C0, pl_clk(true, 15, 1)),  // PL0_REF_CTRL: 100 MHz
    (0xFF5E_00C4, pl_clk(false, 15, 1)), // PL1_REF_CTRL
    (0xFF5E_00C8, pl_clk(false, 15, 1)), // PL2_REF_CTRL
    (0xFF5E_00CC, pl_clk(false, 15, 1)), // PL3_REF_CTRL
    (0xFD61_5000, 0x0000_0A00),          // FPD_SLCR AXI_FS: HPM0/1 128-bit
];

/// The PS registers' contents: what was written, over the boot values.
pub(crate) struct PsRegisters {
    written: Mutex<BTreeMap<u64, u32>>,
}

impl PsRegisters {
    /// The registers as after boot.
    pub(crate) fn new() -> Self {
        PsRegisters {
            written: Mutex::new(BTreeMap::new()),
        }
    }

    /// The block holding `addr..addr + len`.
    pub(crate) fn block(addr: u64, len: u64) -> Option<&'static Block> {
        BLOCKS
            .iter()
            .find(|b| addr >= b.base && addr.checked_add(len).is_some_and(|e| e <= b.base + b.len))
    }

    /// The word at `addr` (4-byte aligned, inside a block).
    pub(crate) fn read(&self, addr: u64) -> u32 {
        let w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        w.get(&addr)
            .copied()
            .or_else(|| RESET.iter().find(|(a, _)| *a == addr).map(|(_, v)| *v))
            .unwrap_or(0)
    }

    /// Writes the word at `addr` (4-byte aligned, inside a block; at most
    /// one entry per word of the blocks is ever kept).
    pub(crate) fn write(&self, addr: u64, value: u32) {
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        w.insert(addr, value);
    }
}
