//! The emulated board's designs, as a block design describes them: each
//! design's name, its IP with their register windows in the board's physical
//! address map, each AXI DMA's PG021 parameters as the fabric builds it, the
//! interrupt lines, and the register maps (names, offsets, bit fields) of the
//! IP that have one. [`crate::rig::Rig::emulate`] builds a design;
//! the Python package's board, `ip_dict` and `register_map`, and whatever
//! describes a design to PYNQ's tools (a `.hwh` file), read it from here.
//!
//! The address map follows PYNQ's designs: the first AXI DMA at
//! [`REGISTER_BASE`], each IP's window [`REGISTER_RANGE`] bytes after the
//! previous one (the engines' first, then the core's), and the DMA memory at
//! [`MEMORY_BASE`].

use crate::accel::fir::{FIR_REG_ID, FIR_REG_NTAPS, FIR_REG_TAPS, MAX_TAPS};
use crate::axi::Channel;
use crate::axi::regs::*;
use crate::dsp::bgsub::Params as FrameParams;
use crate::platform::sim::{DEFAULT_DDR_BASE, DEFAULT_DDR_BYTES, REGISTER_WINDOW};
use crate::sim::{BgSubCore, FirCore, Loopback, StreamProcessor, irq_line};

/// Physical address of the first register window (`axi_dma_0`, where PYNQ's
/// designs put it).
pub const REGISTER_BASE: u64 = 0x4040_0000;
/// Bytes of each IP's register window (the AXI DMA IP's 64 KiB range).
pub const REGISTER_RANGE: u64 = REGISTER_WINDOW as u64;
/// Physical address of the emulated board's DMA memory.
pub const MEMORY_BASE: u64 = DEFAULT_DDR_BASE;
/// Bytes of DMA memory a design's board has.
pub const MEMORY_BYTES: usize = DEFAULT_DDR_BYTES;
/// The interrupt controller the DMA channels' interrupt pins go to; pin `k`
/// of the controller is the board's interrupt line `k`.
pub const INTERRUPT_CONTROLLER: &str = "axi_intc_0";
/// Width of the engines' buffer-length register (`c_sg_length_width`) a
/// design is built with unless told otherwise: PG021's widest, transfers up
/// to 64 MiB - 1.
pub const LENGTH_WIDTH: u32 = 26;
/// The AXI DMA IP's VLNV.
pub const AXI_DMA_VLNV: &str = "xilinx.com:ip:axi_dma:7.1";

/// A design that cannot be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No design of that name.
    #[error("no design called {name:?} on the emulated board ({known})", known = names().join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The design's core is built for a frame size, and none was given.
    #[error("the {design:?} design needs the frames' width, height and threshold")]
    NoFrames {
        /// The design.
        design: &'static str,
    },
}

/// The stream processor a design runs between its engines: engine i's MM2S
/// stream (`M_AXIS_MM2S`) feeds the core's input i, and the core's output i
/// goes to engine i's S2MM stream (`S_AXIS_S2MM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Core {
    /// Every packet back unchanged ([`Loopback`]).
    Loopback,
    /// The FIR filter ([`FirCore`]), its taps in a register window of its own.
    Fir,
    /// Background subtraction ([`BgSubCore`]) for frames of a size fixed when
    /// the board is made: engine 0 takes the frame and gives the new
    /// background, engine 1 takes the background and gives the mask.
    BgSub,
}

/// One design of the emulated board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Design {
    /// Its name (`"loopback"`).
    pub name: &'static str,
    /// What it is, in a sentence.
    pub summary: &'static str,
    /// AXI DMA engines, `axi_dma_0` onwards.
    pub engines: usize,
    /// Whether the engines have their scatter-gather engine (`c_include_sg`).
    pub sg: bool,
    /// The core between the engines.
    pub core: Core,
}

/// Every design of the emulated board.
pub const DESIGNS: [Design; 4] = [
    Design {
        name: "loopback",
        summary: "an AXI DMA in direct register mode around a loopback stream",
        engines: 1,
        sg: false,
        core: Core::Loopback,
    },
    Design {
        name: "loopback-sg",
        summary: "an AXI DMA with its scatter-gather engine around a loopback stream",
        engines: 1,
        sg: true,
        core: Core::Loopback,
    },
    Design {
        name: "fir",
        summary: "a FIR filter core (fir_0) behind a scatter-gather AXI DMA, its taps in a \
                  register window of its own",
        engines: 1,
        sg: true,
        core: Core::Fir,
    },
    Design {
        name: "bgsub",
        summary: "the background-subtraction core (bgsub_0) behind two scatter-gather AXI DMA \
                  engines",
        engines: 2,
        sg: true,
        core: Core::BgSub,
    },
];

/// The designs' names, in [`DESIGNS`]' order.
pub fn names() -> Vec<&'static str> {
    DESIGNS.iter().map(|d| d.name).collect()
}

/// The design called `name`.
pub fn find(name: &str) -> Result<&'static Design, Error> {
    DESIGNS
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| Error::Unknown {
            name: name.to_string(),
        })
}

/// A register window in the board's physical address map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The emulated board's register window index
    /// ([`crate::platform::sim::SimBoard::registers`]).
    pub index: usize,
    /// Physical address of its first byte.
    pub base: u64,
    /// Bytes it spans.
    pub range: u64,
}

impl Window {
    /// The window at index `index`.
    pub const fn at(index: usize) -> Self {
        Window {
            index,
            base: REGISTER_BASE + index as u64 * REGISTER_RANGE,
            range: REGISTER_RANGE,
        }
    }
}

/// A DMA channel's interrupt pin and the controller line it is wired to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupt {
    /// The channel.
    pub channel: Channel,
    /// The IP's pin (PG021's `mm2s_introut` / `s2mm_introut`).
    pub pin: &'static str,
    /// The line of [`INTERRUPT_CONTROLLER`] (and of the emulated board).
    pub line: usize,
}

/// The interrupt pins of engine `engine`, MM2S's first.
pub const fn interrupts(engine: usize) -> [Interrupt; 2] {
    [
        Interrupt {
            channel: Channel::Mm2s,
            pin: "mm2s_introut",
            line: irq_line(engine, Channel::Mm2s as usize),
        },
        Interrupt {
            channel: Channel::S2mm,
            pin: "s2mm_introut",
            line: irq_line(engine, Channel::S2mm as usize),
        },
    ]
}

/// An AXI DMA's configuration, in PG021's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxiDmaParams {
    /// `c_include_sg`: the scatter-gather engine (else direct register mode).
    pub include_sg: bool,
    /// `c_sg_length_width`: bits of the buffer-length register (8..=26).
    pub sg_length_width: u32,
    /// `c_include_mm2s`.
    pub include_mm2s: bool,
    /// `c_include_s2mm`.
    pub include_s2mm: bool,
    /// `c_m_axi_mm2s_data_width`: the MM2S memory-mapped port, in bits.
    pub mm2s_data_width: u32,
    /// `c_m_axi_s2mm_data_width`: the S2MM memory-mapped port, in bits.
    pub s2mm_data_width: u32,
    /// `c_m_axis_mm2s_tdata_width`: the MM2S stream, in bits.
    pub mm2s_stream_width: u32,
    /// `c_s_axis_s2mm_tdata_width`: the S2MM stream, in bits.
    pub s2mm_stream_width: u32,
    /// `c_addr_width`: address bits.
    pub addr_width: u32,
    /// `c_mm2s_burst_size`: beats per burst.
    pub mm2s_burst_size: u32,
    /// `c_s2mm_burst_size`: beats per burst.
    pub s2mm_burst_size: u32,
    /// `c_sg_include_stscntrl_strm`: the control and status streams (none
    /// of the designs' cores has one).
    pub include_stscntrl_strm: bool,
    /// `c_micro_dma`.
    pub micro_dma: bool,
}

impl AxiDmaParams {
    /// An engine as the fabric builds it: both channels, 32-bit ports and
    /// streams and addresses (the DMA memory lies below 4 GiB), bursts of 16,
    /// no control or status stream; scatter-gather if `sg`, its length
    /// register `length_width` bits wide. The fabric models the timing of a
    /// port through its clock, not these widths.
    pub const fn emulated(sg: bool, length_width: u32) -> Self {
        AxiDmaParams {
            include_sg: sg,
            sg_length_width: length_width,
            include_mm2s: true,
            include_s2mm: true,
            mm2s_data_width: 32,
            s2mm_data_width: 32,
            mm2s_stream_width: 32,
            s2mm_stream_width: 32,
            addr_width: 32,
            mm2s_burst_size: 16,
            s2mm_burst_size: 16,
            include_stscntrl_strm: false,
            micro_dma: false,
        }
    }

    /// The parameters as Vivado names and writes them (`C_INCLUDE_SG`, `"1"`).
    pub fn vivado(&self) -> Vec<(&'static str, String)> {
        let flag = |b: bool| u32::from(b).to_string();
        vec![
            ("C_INCLUDE_SG", flag(self.include_sg)),
            ("C_SG_LENGTH_WIDTH", self.sg_length_width.to_string()),
            ("C_INCLUDE_MM2S", flag(self.include_mm2s)),
            ("C_INCLUDE_S2MM", flag(self.include_s2mm)),
            ("C_M_AXI_MM2S_DATA_WIDTH", self.mm2s_data_width.to_string()),
            ("C_M_AXI_S2MM_DATA_WIDTH", self.s2mm_data_width.to_string()),
            (
                "C_M_AXIS_MM2S_TDATA_WIDTH",
                self.mm2s_stream_width.to_string(),
            ),
            (
                "C_S_AXIS_S2MM_TDATA_WIDTH",
                self.s2mm_stream_width.to_string(),
            ),
            ("C_ADDR_WIDTH", self.addr_width.to_string()),
            ("C_MM2S_BURST_SIZE", self.mm2s_burst_size.to_string()),
            ("C_S2MM_BURST_SIZE", self.s2mm_burst_size.to_string()),
            (
                "C_SG_INCLUDE_STSCNTRL_STRM",
                flag(self.include_stscntrl_strm),
            ),
            ("C_MICRO_DMA", flag(self.micro_dma)),
        ]
    }
}

/// Who may write a bit field (IP-XACT's access, as a `.hwh` and PYNQ's
/// `ip_dict` spell it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read and written by the CPU (`read-write`).
    ReadWrite,
    /// Set by the IP only (`read-only`): a write leaves it as it is.
    ReadOnly,
}

impl Access {
    /// The IP-XACT word: `read-write` or `read-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadWrite => "read-write",
            Access::ReadOnly => "read-only",
        }
    }
}

/// A bit field of a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Its name, as Vivado's register description of the IP gives it
    /// (PG021's: `IOC_IrqEn`, `Source_Address`).
    pub name: &'static str,
    /// Its lowest bit.
    pub lsb: u32,
    /// Its width in bits.
    pub width: u32,
    /// Whether the CPU may write it.
    pub access: Access,
}

impl Field {
    /// The field `name` covering the (contiguous) bits of `mask`.
    const fn of(name: &'static str, mask: u32) -> Self {
        Field {
            name,
            lsb: mask.trailing_zeros(),
            width: mask.count_ones(),
            access: Access::ReadWrite,
        }
    }

    /// The field `name` covering the bits of `mask`, set by the IP only.
    const fn read_only(name: &'static str, mask: u32) -> Self {
        Field {
            access: Access::ReadOnly,
            ..Field::of(name, mask)
        }
    }
}

/// A 32-bit register of an IP (or `words` of them in a row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    /// Its name (`MM2S_DMACR`).
    pub name: &'static str,
    /// Its offset in the IP's register window.
    pub offset: usize,
    /// Consecutive 32-bit words it spans (1 but for an array such as the FIR
    /// core's taps).
    pub words: usize,
    /// Its named bit fields (none: a plain word).
    pub fields: &'static [Field],
}

impl Register {
    const fn word(name: &'static str, offset: usize, fields: &'static [Field]) -> Self {
        Register {
            name,
            offset,
            words: 1,
            fields,
        }
    }
}

/// DMACR's fields (PG021).
pub const DMACR_FIELDS: [Field; 9] = [
    Field::of("RS", DMACR_RS),
    Field::of("Reset", DMACR_RESET),
    Field::of("Keyhole", DMACR_KEYHOLE),
    Field::of("Cyclic_BD_Enable", DMACR_CYCLIC),
    Field::of("IOC_IrqEn", DMACR_IOC_IRQ_EN),
    Field::of("Dly_IrqEn", DMACR_DLY_IRQ_EN),
    Field::of("Err_IrqEn", DMACR_ERR_IRQ_EN),
    Field::of("IRQThreshold", DMACR_IRQ_THRESHOLD_MASK),
    Field::of("IRQDelay", DMACR_IRQ_DELAY_MASK),
];

/// DMASR's fields (PG021): the status bits are the IP's, the interrupt
/// bits are cleared by writing 1.
pub const DMASR_FIELDS: [Field; 14] = [
    Field::read_only("Halted", DMASR_HALTED),
    Field::read_only("Idle", DMASR_IDLE),
    Field::read_only("SGIncld", DMASR_SG_INCLD),
    Field::read_only("DMAIntErr", DMASR_DMA_INT_ERR),
    Field::read_only("DMASlvErr", DMASR_DMA_SLV_ERR),
    Field::read_only("DMADecErr", DMASR_DMA_DEC_ERR),
    Field::read_only("SGIntErr", DMASR_SG_INT_ERR),
    Field::read_only("SGSlvErr", DMASR_SG_SLV_ERR),
    Field::read_only("SGDecErr", DMASR_SG_DEC_ERR),
    Field::of("IOC_Irq", DMASR_IOC_IRQ),
    Field::of("Dly_Irq", DMASR_DLY_IRQ),
    Field::of("Err_Irq", DMASR_ERR_IRQ),
    Field::read_only("IRQThresholdSts", DMASR_IRQ_THRESHOLD_STS_MASK),
    Field::read_only("IRQDelaySts", DMASR_IRQ_DELAY_STS_MASK),
];

/// A descriptor pointer's low word: bits [5:0] are zero (64-byte aligned
/// descriptors), the field is bits [31:6].
const fn pointer(name: &'static str) -> [Field; 1] {
    [Field::of(name, !(DESC_ALIGN as u32 - 1))]
}

/// A whole 32-bit word as one field (an address or an address's high word).
const fn word(name: &'static str) -> [Field; 1] {
    [Field::of(name, u32::MAX)]
}

/// CURDESC's, TAILDESC's, their high words', SA's, DA's and LENGTH's one
/// field each, and SG_CTL's two, as Vivado's register description of the IP
/// names them. LENGTH's field is PG021's widest (26 bits) whatever
/// `c_sg_length_width` the IP is built with: the bits above it read 0.
pub const CURDESC_FIELDS: [Field; 1] = pointer("Current_Descriptor_Pointer");
/// See [`CURDESC_FIELDS`].
pub const CURDESC_MSB_FIELDS: [Field; 1] = word("Current_Descriptor_Pointer");
/// See [`CURDESC_FIELDS`].
pub const TAILDESC_FIELDS: [Field; 1] = pointer("Tail_Descriptor_Pointer");
/// See [`CURDESC_FIELDS`].
pub const TAILDESC_MSB_FIELDS: [Field; 1] = word("Tail_Descriptor_Pointer");
/// See [`CURDESC_FIELDS`].
pub const SA_FIELDS: [Field; 1] = word("Source_Address");
/// See [`CURDESC_FIELDS`].
pub const DA_FIELDS: [Field; 1] = word("Destination_Address");
/// See [`CURDESC_FIELDS`].
pub const LENGTH_FIELDS: [Field; 1] = [Field::of("Length", DESC_LENGTH_MASK)];
/// SG_CTL's fields (PG021): the descriptor fetches' AxCACHE and AxUSER.
pub const SG_CTL_FIELDS: [Field; 2] = [Field::of("SG_CACHE", 0xF), Field::of("SG_USER", 0xF00)];

/// The AXI DMA's register map (PG021), by the names PYNQ's `register_map`
/// gives them: the MM2S channel's, SG_CTL, the S2MM channel's.
pub const AXI_DMA_REGISTERS: [Register; 19] = [
    Register::word("MM2S_DMACR", MM2S + DMACR, &DMACR_FIELDS),
    Register::word("MM2S_DMASR", MM2S + DMASR, &DMASR_FIELDS),
    Register::word("MM2S_CURDESC", MM2S + CURDESC, &CURDESC_FIELDS),
    Register::word("MM2S_CURDESC_MSB", MM2S + CURDESC_MSB, &CURDESC_MSB_FIELDS),
    Register::word("MM2S_TAILDESC", MM2S + TAILDESC, &TAILDESC_FIELDS),
    Register::word(
        "MM2S_TAILDESC_MSB",
        MM2S + TAILDESC_MSB,
        &TAILDESC_MSB_FIELDS,
    ),
    Register::word("MM2S_SA", MM2S + ADDR, &SA_FIELDS),
    Register::word("MM2S_SA_MSB", MM2S + ADDR_MSB, &SA_FIELDS),
    Register::word("MM2S_LENGTH", MM2S + LENGTH, &LENGTH_FIELDS),
    Register::word("SG_CTL", SG_CTL, &SG_CTL_FIELDS),
    Register::word("S2MM_DMACR", S2MM + DMACR, &DMACR_FIELDS),
    Register::word("S2MM_DMASR", S2MM + DMASR, &DMASR_FIELDS),
    Register::word("S2MM_CURDESC", S2MM + CURDESC, &CURDESC_FIELDS),
    Register::word("S2MM_CURDESC_MSB", S2MM + CURDESC_MSB, &CURDESC_MSB_FIELDS),
    Register::word("S2MM_TAILDESC", S2MM + TAILDESC, &TAILDESC_FIELDS),
    Register::word(
        "S2MM_TAILDESC_MSB",
        S2MM + TAILDESC_MSB,
        &TAILDESC_MSB_FIELDS,
    ),
    Register::word("S2MM_DA", S2MM + ADDR, &DA_FIELDS),
    Register::word("S2MM_DA_MSB", S2MM + ADDR_MSB, &DA_FIELDS),
    Register::word("S2MM_LENGTH", S2MM + LENGTH, &LENGTH_FIELDS),
];

/// The FIR core's register map ([`crate::accel::fir`]): its ID, the taps in
/// use, and the taps (an f32's bits each).
pub const FIR_REGISTERS: [Register; 3] = [
    Register::word("ID", FIR_REG_ID, &[]),
    Register::word("NTAPS", FIR_REG_NTAPS, &[]),
    Register {
        name: "TAPS",
        offset: FIR_REG_TAPS,
        words: MAX_TAPS,
        fields: &[],
    },
];

/// What an IP of a design is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpKind {
    /// AXI DMA engine `engine`.
    AxiDma {
        /// Its index among the design's engines.
        engine: usize,
        /// Its configuration.
        params: AxiDmaParams,
        /// Its interrupt pins.
        interrupts: [Interrupt; 2],
    },
    /// The design's core.
    Core(Core),
}

/// An IP of a design, as a block design lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ip {
    /// Its instance name (`axi_dma_0`, `fir_0`).
    pub name: String,
    /// Its VLNV (`xilinx.com:ip:axi_dma:7.1`).
    pub vlnv: &'static str,
    /// Its register window; `None` for a core without registers.
    pub window: Option<Window>,
    /// Its register map (empty where it has none).
    pub registers: &'static [Register],
    /// Its parameters besides an AXI DMA's, as Vivado writes them.
    pub parameters: Vec<(&'static str, String)>,
    /// What it is.
    pub kind: IpKind,
}

impl Design {
    /// The design's IP: its AXI DMA engines (`axi_dma_0` at window 0 onwards,
    /// their length register `length_width` bits wide), then its core, whose
    /// register window, if it has one, follows the engines'.
    pub fn ips(&self, length_width: u32) -> Vec<Ip> {
        let mut ips: Vec<Ip> = (0..self.engines)
            .map(|i| Ip {
                name: format!("axi_dma_{i}"),
                vlnv: AXI_DMA_VLNV,
                window: Some(Window::at(i)),
                registers: &AXI_DMA_REGISTERS,
                parameters: Vec::new(),
                kind: IpKind::AxiDma {
                    engine: i,
                    params: AxiDmaParams::emulated(self.sg, length_width),
                    interrupts: interrupts(i),
                },
            })
            .collect();
        let core = |name: &str, vlnv, window, registers, parameters| Ip {
            name: name.to_string(),
            vlnv,
            window,
            registers,
            parameters,
            kind: IpKind::Core(self.core),
        };
        match self.core {
            Core::Loopback => {}
            Core::Fir => ips.push(core(
                "fir_0",
                "dmaflow:hls:fir:1.0",
                Some(Window::at(self.engines)),
                &FIR_REGISTERS,
                vec![("C_MAX_TAPS", MAX_TAPS.to_string())],
            )),
            Core::BgSub => ips.push(core(
                "bgsub_0",
                "dmaflow:hls:bgsub:1.0",
                None,
                &[],
                Vec::new(),
            )),
        }
        ips
    }

    /// The design's IP called `name`.
    pub fn ip(&self, name: &str, length_width: u32) -> Option<Ip> {
        self.ips(length_width)
            .into_iter()
            .find(|ip| ip.name == name)
    }

    /// The stream processor the design's fabric runs; a background
    /// subtraction core is built for `frames` (needed then, unused else).
    pub fn processor(
        &self,
        frames: Option<FrameParams>,
    ) -> Result<Box<dyn StreamProcessor>, Error> {
        Ok(match self.core {
            Core::Loopback => Box::new(Loopback),
            Core::Fir => Box::new(FirCore::new()),
            Core::BgSub => Box::new(BgSubCore::new(
                frames.ok_or(Error::NoFrames { design: self.name })?,
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::RegisterSpace;

    fn frames() -> FrameParams {
        FrameParams::new(32, 16, 25, true).unwrap()
    }

    #[test]
    fn each_design_is_what_its_fabric_builds() {
        for d in &DESIGNS {
            let p = d.processor(Some(frames())).unwrap();
            assert_eq!(p.streams(), d.engines, "{}", d.name);
            let ips = d.ips(LENGTH_WIDTH);
            let windows: Vec<Window> = ips.iter().filter_map(|ip| ip.window).collect();
            // One window per engine, and one for a core with registers.
            assert_eq!(
                windows.len(),
                d.engines + usize::from(p.control_bytes() > 0),
                "{}",
                d.name
            );
            let rig = crate::rig::Rig::emulate(
                d,
                Some(frames()),
                crate::platform::MemoryModel::Coherent,
                crate::axi::Config::default(),
            )
            .unwrap();
            assert_eq!(rig.engines.len(), d.engines, "{}", d.name);
            for (i, e) in rig.engines.iter().enumerate() {
                assert_eq!(e.dma().sg_included(), d.sg, "{} engine {i}", d.name);
            }
            for w in &windows {
                let regs = rig.board.registers(w.index).unwrap();
                assert_eq!(regs.len() as u64, w.range, "{} window {}", d.name, w.index);
            }
            // Windows in a row from the base, none overlapping.
            for (k, w) in windows.iter().enumerate() {
                assert_eq!(w.index, k);
                assert_eq!(w.base, REGISTER_BASE + k as u64 * REGISTER_RANGE);
            }
        }
    }

    #[test]
    fn the_fir_core_answers_at_its_registers() {
        let d = find("fir").unwrap();
        let fir = d.ip("fir_0", LENGTH_WIDTH).unwrap();
        let rig = crate::rig::Rig::emulate(
            d,
            None,
            crate::platform::MemoryModel::Coherent,
            crate::axi::Config::default(),
        )
        .unwrap();
        let regs = rig.board.registers(fir.window.unwrap().index).unwrap();
        let id = fir.registers.iter().find(|r| r.name == "ID").unwrap();
        assert_eq!(regs.read(id.offset).unwrap(), crate::accel::fir::FIR_ID);
        let taps = fir.registers.iter().find(|r| r.name == "TAPS").unwrap();
        assert!(taps.offset + 4 * taps.words <= fir.window.unwrap().range as usize);
    }

    #[test]
    fn the_axi_dma_map_is_pg021s() {
        let at = |name: &str| {
            AXI_DMA_REGISTERS
                .iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("{name}"))
        };
        // PG021's table of registers, offsets as the datasheet prints them.
        for (name, offset) in [
            ("MM2S_DMACR", 0x00),
            ("MM2S_SA", 0x18),
            ("MM2S_LENGTH", 0x28),
            ("SG_CTL", 0x2C),
            ("S2MM_DMASR", 0x34),
            ("S2MM_DA", 0x48),
            ("S2MM_LENGTH", 0x58),
        ] {
            assert_eq!(at(name).offset, offset, "{name}");
        }
        let field = |r: &str, f: &str| {
            let f = at(r).fields.iter().find(|x| x.name == f).unwrap();
            (f.lsb, f.width)
        };
        assert_eq!(field("S2MM_DMASR", "Idle"), (1, 1));
        assert_eq!(field("MM2S_DMACR", "IRQThreshold"), (16, 8));
        assert_eq!(field("MM2S_DMASR", "IRQDelaySts"), (24, 8));
        // Every register has Vivado's fields, as PYNQ's register_map names
        // them from a `.hwh` (a Vivado 2018.3 `.hwh` of an AXI DMA 7.1).
        assert_eq!(field("MM2S_SA", "Source_Address"), (0, 32));
        assert_eq!(field("S2MM_DA_MSB", "Destination_Address"), (0, 32));
        assert_eq!(field("S2MM_LENGTH", "Length"), (0, 26));
        assert_eq!(field("MM2S_CURDESC", "Current_Descriptor_Pointer"), (6, 26));
        assert_eq!(
            field("S2MM_TAILDESC_MSB", "Tail_Descriptor_Pointer"),
            (0, 32)
        );
        assert_eq!(field("SG_CTL", "SG_USER"), (8, 4));
        assert!(AXI_DMA_REGISTERS.iter().all(|r| !r.fields.is_empty()));
        let access = |r: &str, f: &str| at(r).fields.iter().find(|x| x.name == f).unwrap().access;
        assert_eq!(access("MM2S_DMASR", "Idle"), Access::ReadOnly);
        assert_eq!(access("S2MM_DMASR", "IOC_Irq"), Access::ReadWrite);
        assert_eq!(access("S2MM_DMACR", "RS").as_str(), "read-write");
        // Offsets strictly rising, fields inside 32 bits and apart.
        for pair in AXI_DMA_REGISTERS.windows(2) {
            assert!(pair[0].offset < pair[1].offset, "{}", pair[1].name);
        }
        for fields in AXI_DMA_REGISTERS.iter().map(|r| r.fields) {
            let mut used = 0u64;
            for f in fields {
                let mask = ((1u64 << f.width) - 1) << f.lsb;
                assert!(f.lsb + f.width <= 32 && used & mask == 0, "{}", f.name);
                used |= mask;
            }
        }
    }

    #[test]
    fn a_design_is_found_by_name_or_named_missing() {
        assert!(find("loopback-sg").unwrap().sg);
        let e = find("nope").unwrap_err().to_string();
        assert_eq!(
            e,
            "no design called \"nope\" on the emulated board (loopback, loopback-sg, fir, bgsub)"
        );
        let e = find("bgsub").unwrap().processor(None).err().unwrap();
        assert!(e.to_string().contains("bgsub"), "{e}");
    }

    #[test]
    fn interrupt_pins_go_to_the_lines_the_rig_waits_on() {
        let [mm2s, s2mm] = interrupts(1);
        assert_eq!((mm2s.pin, mm2s.line), ("mm2s_introut", 2));
        assert_eq!((s2mm.pin, s2mm.line), ("s2mm_introut", 3));
        let p = AxiDmaParams::emulated(true, 20).vivado();
        assert!(p.contains(&("C_INCLUDE_SG", "1".to_string())));
        assert!(p.contains(&("C_SG_LENGTH_WIDTH", "20".to_string())));
    }
}
