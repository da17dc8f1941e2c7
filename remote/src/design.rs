//! A design as PYNQ sees it: its IP blocks with register windows, each at a
//! base address with an address range, and for each AXI DMA the PG021
//! parameters its driver reads. The emulated board's designs come from the
//! library's table ([`dmaflow::designs`]); a user's design from its `.hwh`
//! ([`crate::hwh::parse`]).

use dmaflow::designs::{self, AxiDmaParams, IpKind, LENGTH_WIDTH};
use dmaflow::dsp::bgsub::Params as FrameParams;
use dmaflow::sim::StreamProcessor;

/// An AXI DMA: its PG021 parameters and the interrupt lines its channels'
/// pins (`mm2s_introut`, `s2mm_introut`) drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dma {
    /// Its configuration.
    pub params: AxiDmaParams,
    /// The interrupt lines of MM2S and S2MM.
    pub lines: [usize; 2],
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
    /// What an AXI DMA is built with; `None` for other IP.
    pub dma: Option<Dma>,
    /// The register map, for the emulated designs' IP (empty otherwise).
    pub registers: &'static [designs::Register],
    /// Its parameters besides an AXI DMA's, as Vivado writes them.
    pub parameters: Vec<(String, String)>,
}

/// A design: a name and its IP blocks with registers, in address order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Design {
    /// The design's name (the bitstream's stem).
    pub name: String,
    /// IP blocks, in address order.
    pub ips: Vec<Ip>,
}

/// The frames the emulated `bgsub` design is built for (what the Python
/// package's board defaults to: 320 x 240, threshold 25, filtered).
fn frames() -> Option<FrameParams> {
    FrameParams::new(320, 240, 25, true).ok()
}

impl Design {
    /// The emulated board's design called `name` (one of
    /// [`dmaflow::designs::names`]).
    pub fn builtin(name: &str) -> Option<Design> {
        let d = designs::find(name).ok()?;
        let ips = d
            .ips(LENGTH_WIDTH)
            .into_iter()
            .filter_map(|ip| {
                let w = ip.window?;
                Some(Ip {
                    name: ip.name,
                    vlnv: ip.vlnv.to_string(),
                    base: w.base,
                    range: w.range,
                    dma: match ip.kind {
                        IpKind::AxiDma {
                            params, interrupts, ..
                        } => Some(Dma {
                            params,
                            lines: [interrupts[0].line, interrupts[1].line],
                        }),
                        IpKind::Core(_) => None,
                    },
                    registers: ip.registers,
                    parameters: ip
                        .parameters
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                })
            })
            .collect();
        Some(Design {
            name: d.name.to_string(),
            ips,
        })
    }

    /// The stream processor behind a built-in design's engines, `None` for
    /// another design.
    pub(crate) fn builtin_core(&self) -> Option<Box<dyn StreamProcessor>> {
        designs::find(&self.name).ok()?.processor(frames()).ok()
    }

    /// The design's AXI DMA engines, in address order.
    pub fn dmas(&self) -> impl Iterator<Item = (&Ip, Dma)> {
        self.ips.iter().filter_map(|ip| ip.dma.map(|d| (ip, d)))
    }
}
