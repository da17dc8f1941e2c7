//! A real board as the device of the DMA experiments: an AXI DMA whose MM2S
//! stream feeds its own S2MM (the loopback design every DMA tutorial starts
//! from), driven through UIO and u-dma-buf by [`dmaflow::board::Board`], in
//! place of the emulated rig. The measurement code is the one the emulated runs
//! use; only where the engine comes from differs.
//!
//! Before anything is opened the board is checked as `dmaflow info` checks it;
//! what the experiments need and the board lacks comes back as that advice.
//! The experiments wait on interrupts as well as polling, so a channel without
//! its interrupt line, only a warning for `dmaflow info`, is missing here.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::board_check::{check, engines};
use dmaflow::axi::Config as AxiConfig;
use dmaflow::board::Board;
use dmaflow::dma::DynEngine;
use dmaflow::platform::uio::{UioRegisters, inventory};

use super::Error;

/// The u-dma-buf the experiments take their buffers from.
pub const MEMORY: &str = "udmabuf0";

/// Which of PG021's two builds of the engine an experiment drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Direct register mode (`C_INCLUDE_SG = 0`): two-way transfers.
    Direct,
    /// Scatter-gather (`C_INCLUDE_SG = 1`): descriptor rings.
    ScatterGather,
}

impl Mode {
    /// The mode of an engine built with scatter-gather (`sg`) or without,
    /// as PG021 names it.
    fn name_of(sg: bool) -> &'static str {
        if sg {
            "scatter-gather (C_INCLUDE_SG = 1)"
        } else {
            "direct register mode (C_INCLUDE_SG = 0)"
        }
    }
}

/// A board opened for an experiment: its pool and the engine measured.
pub struct BoardRig {
    /// The board (its UIO devices and u-dma-buf pool).
    pub board: Board,
    /// The engine measured, in loopback, reset and ready.
    pub engine: DynEngine,
    /// The engine's block-design name (`axi_dma_0`).
    pub engine_name: String,
    /// The engine's register window once more, for the bare baseline (a spin
    /// on DMASR, the thinnest driver there is).
    pub registers: UioRegisters,
    /// Where the board was found.
    pub root: PathBuf,
}

impl BoardRig {
    /// One line for a report's header: which board and design was measured.
    pub fn describe(&self) -> String {
        let pool = self.board.pool();
        format!(
            "a real board under {}: {} in {} with its MM2S stream looped back to its S2MM, \
             buffers from /dev/{MEMORY} ({} MiB, {:?} cache policy); nothing modelled \
             (model_us is 0, overhead_us is the whole time)",
            self.root.display(),
            self.engine_name,
            Mode::name_of(self.engine.dma().sg_included()),
            pool.bus_range().1 >> 20,
            pool.policy(),
        )
    }
}

/// A board kept for a whole run: its engine lent to each measurement, and
/// opened again (a reset, as an emulated measurement's fresh board) after a
/// driver that keeps it (the kernel-style proxy) took it over.
pub struct KeptBoard {
    board: Board,
    engine_name: String,
    registers: UioRegisters,
    root: PathBuf,
    spare: RefCell<Option<DynEngine>>,
}

impl KeptBoard {
    /// Keeps `rig`'s board, and its engine for the first measurement.
    pub fn new(rig: BoardRig) -> Self {
        KeptBoard {
            board: rig.board,
            engine_name: rig.engine_name,
            registers: rig.registers,
            root: rig.root,
            spare: RefCell::new(Some(rig.engine)),
        }
    }

    /// The engine: the one given back last (at first the rig's), or the
    /// engine opened anew.
    pub fn take(&self) -> Result<DynEngine, Error> {
        if let Some(e) = self.spare.take() {
            return Ok(e);
        }
        self.board
            .engine(&self.engine_name, AxiConfig::default())
            .map_err(|e| Error::Board {
                root: self.root.display().to_string(),
                advice: vec![e.to_string()],
            })
    }

    /// Keeps `engine` for the next measurement.
    pub fn give_back(&self, engine: DynEngine) {
        self.spare.replace(Some(engine));
    }

    /// The engine's register window, for the bare baseline.
    pub fn registers(&self) -> &UioRegisters {
        &self.registers
    }
}

/// Opens the board under `root` for an experiment driving an engine in
/// `mode`: the first AXI DMA engine (by name) built that way. A board that
/// lacks something the experiments need is [`Error::Board`] with `dmaflow
/// info`'s advice for each thing missing.
pub fn open(root: &Path, mode: Mode) -> Result<BoardRig, Error> {
    let refuse = |advice: Vec<String>| Error::Board {
        root: root.display().to_string(),
        advice,
    };
    if !root.is_dir() {
        return Err(refuse(vec![format!(
            "{} is not a directory: --board takes the root the board's /sys and /dev are \
             under (`/` on the board itself)",
            root.display()
        )]));
    }
    let inv = inventory(root);
    let gaps: Vec<String> = check(&inv, root)
        .into_iter()
        .filter(|f| f.mark != "ok")
        .map(|f| f.text)
        .collect();
    if !gaps.is_empty() {
        return Err(refuse(gaps));
    }
    let one = |e: dmaflow::Error| refuse(vec![e.to_string()]);
    let board = Board::open(root, MEMORY).map_err(one)?;
    let mut names: Vec<&String> = engines(&inv).map(|d| &d.name).collect();
    names.sort();
    let mut seen = Vec::new();
    for name in names {
        let engine = board.engine(name, AxiConfig::default()).map_err(one)?;
        let sg = engine.dma().sg_included();
        if sg == (mode == Mode::ScatterGather) {
            return Ok(BoardRig {
                registers: board.registers(name).map_err(one)?,
                board,
                engine,
                engine_name: name.clone(),
                root: root.to_path_buf(),
            });
        }
        seen.push(format!("{name} is built in {}", Mode::name_of(sg)));
    }
    Err(refuse(vec![format!(
        "this experiment drives an AXI DMA in {} with its MM2S stream looped back to its \
         S2MM, and the board has none: {}",
        Mode::name_of(mode == Mode::ScatterGather),
        seen.join("; ")
    )]))
}

// Tested from the outside: `cli/tests/cli_info.rs` runs `dmaflow bench
// --board` against fake board roots (the layout `dmaflow info` reads).
