//! A design as PYNQ sees it: its IP blocks, each at a base address with an
//! address range, and for each AXI DMA the PG021 parameters its driver reads.
//! Built in for the emulated board's designs, or read from a user's `.hwh`
//! ([`crate::hwh::parse`]).

use dmaflow::dsp::bgsub::Params as BgParams;
use dmaflow::sim::{BgSubCore, FirCore, Loopback, StreamProcessor};

/// The IP type of Xilinx's AXI DMA, as a `.hwh` names it.
pub const AXI_DMA_VLNV: &str = "xilinx.com:ip:axi_dma:7.1";

/// Where PYNQ's designs put the first IP, and the AXI DMA's address range.
const FIRST_BASE: u64 = 0x4040_0000;
/// The AXI DMA IP's address range (64 KiB).
pub const DMA_RANGE: u64 = 0x1_0000;

/// The parameters of one AXI DMA (PG021) that PYNQ's driver and dmaflow's
/// emulated engine depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaParams {
    /// `c_include_sg`: the scatter-gather engine is included.
    pub sg: bool,
    /// `c_sg_length_width`: bits of the buffer-length register (8..=26).
    pub length_width: u32,
    /// `c_m_axi_mm2s_data_width`: MM2S memory-map data width in bits.
    pub mm2s_data_width: u32,
    /// `c_m_axi_s2mm_data_width`: S2MM memory-map data width in bits.
    pub s2mm_data_width: u32,
    /// The PS interrupt line (`pl_ps_irq0` bit) `mm2s_introut` drives.
    pub mm2s_irq: u32,
    /// The PS interrupt line `s2mm_introut` drives.
    pub s2mm_irq: u32,
}

/// One IP block of a design with an AXI-Lite register window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip {
    /// Block-design instance name (`axi_dma_0`), the key of PYNQ's `ip_dict`.
    pub name: String,
    /// IP type (`xilinx.com:ip:axi_dma:7.1`).
    pub vlnv: String,
    /// Physical base address of its register window.
    pub base: u64,
    /// Bytes of its register window.
    pub range: u64,
    /// Its PG021 parameters, for an AXI DMA.
    pub dma: Option<DmaParams>,
}

/// A design: a name and its IP blocks with registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Design {
    /// The design's name (the bitstream's stem).
    pub name: String,
    /// IP blocks, in address order.
    pub ips: Vec<Ip>,
}

/// The emulated board's designs, by name.
pub const BUILTIN: [&str; 4] = ["loopback", "loopback-sg", "fir", "bgsub"];

/// The widths and lines of the emulated designs' DMA engines (32-bit data).
fn dma(i: u32, sg: bool) -> DmaParams {
    DmaParams {
        sg,
        length_width: 26,
        mm2s_data_width: 32,
        s2mm_data_width: 32,
        mm2s_irq: 2 * i,
        s2mm_irq: 2 * i + 1,
    }
}

impl Design {
    /// The emulated board's design called `name` (one of [`BUILTIN`]).
    pub fn builtin(name: &str) -> Option<Design> {
        let (engines, sg, core): (u32, bool, Option<&str>) = match name {
            "loopback" => (1, false, None),
            "loopback-sg" => (1, true, None),
            "fir" => (1, true, Some("fir_0")),
            "bgsub" => (2, true, None),
            _ => return None,
        };
        let mut ips: Vec<Ip> = (0..engines)
            .map(|i| Ip {
                name: format!("axi_dma_{i}"),
                vlnv: AXI_DMA_VLNV.to_string(),
                base: FIRST_BASE + u64::from(i) * DMA_RANGE,
                range: DMA_RANGE,
                dma: Some(dma(i, sg)),
            })
            .collect();
        if let Some(core) = core {
            ips.push(Ip {
                name: core.to_string(),
                vlnv: format!("dmaflow:emulated:{core}:1.0"),
                base: FIRST_BASE + u64::from(engines) * DMA_RANGE,
                range: DMA_RANGE,
                dma: None,
            });
        }
        Some(Design {
            name: name.to_string(),
            ips,
        })
    }

    /// The stream processor behind a built-in design's engines, `None` for
    /// another design.
    pub(crate) fn builtin_core(&self) -> Option<Box<dyn StreamProcessor>> {
        match self.name.as_str() {
            "loopback" | "loopback-sg" => Some(Box::new(Loopback)),
            "fir" => Some(Box::new(FirCore::new())),
            // The facade's default frame (320 x 240, threshold 25).
            "bgsub" => BgParams::new(320, 240, 25, true)
                .ok()
                .map(|p| Box::new(BgSubCore::new(p)) as Box<dyn StreamProcessor>),
            _ => None,
        }
    }

    /// The design's AXI DMA engines, in address order.
    pub fn dmas(&self) -> impl Iterator<Item = (&Ip, DmaParams)> {
        self.ips.iter().filter_map(|ip| ip.dma.map(|d| (ip, d)))
    }

    /// The IP whose window holds `base..base + len`.
    pub fn ip_at(&self, base: u64, len: u64) -> Option<&Ip> {
        self.ips.iter().find(|ip| {
            base >= ip.base
                && base
                    .checked_add(len)
                    .is_some_and(|end| end <= ip.base + ip.range)
        })
    }
}
