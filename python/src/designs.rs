//! The emulated board's designs ([`dmaflow::designs`]) as Python reads them:
//! their names, their IP with addresses, parameters and interrupt pins, and
//! the AXI DMA's register map, for the PYNQ facade's `ip_dict` and
//! `register_map`.

use dmaflow::designs::{self, AXI_DMA_REGISTERS, AxiDmaParams, IpKind};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::value;

/// The emulated board's designs, by name.
#[pyfunction]
pub(crate) fn emulated_designs() -> Vec<&'static str> {
    designs::names()
}

/// A register's fields: `(name, lsb, width, access)` each.
type Fields = Vec<(&'static str, u32, u32, &'static str)>;

/// The AXI DMA's registers (PG021): `(name, offset, [(field, lsb, width,
/// access)])` each, in address order, the fields as Vivado names them and
/// `access` `"read-write"` or `"read-only"`.
#[pyfunction]
pub(crate) fn axi_dma_registers() -> Vec<(&'static str, usize, Fields)> {
    AXI_DMA_REGISTERS
        .iter()
        .map(|r| {
            (
                r.name,
                r.offset,
                r.fields
                    .iter()
                    .map(|f| (f.name, f.lsb, f.width, f.access.as_str()))
                    .collect(),
            )
        })
        .collect()
}

/// An AXI DMA's PG021 parameters as Vivado names them, for an engine with
/// its scatter-gather engine or not (`sg`) and a length register
/// `length_width` bits wide, built as the emulated designs build it.
#[pyfunction]
pub(crate) fn axi_dma_parameters(sg: bool, length_width: u32) -> Vec<(&'static str, String)> {
    AxiDmaParams::emulated(sg, length_width).vivado()
}

/// The IP of the emulated design `design`, engines' length register
/// `length_width` bits wide: a dict each with `name`, `type` (its VLNV),
/// `phys_addr` and `addr_range` (`None` and 0 without registers),
/// `parameters` (`(name, value)` pairs) and `interrupts` (`(pin,
/// controller, line)` triples).
#[pyfunction]
pub(crate) fn design_ips<'py>(
    py: Python<'py>,
    design: &str,
    length_width: u32,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let design = designs::find(design).map_err(value)?;
    design
        .ips(length_width)
        .into_iter()
        .map(|ip| {
            let d = PyDict::new(py);
            d.set_item("name", &ip.name)?;
            d.set_item("type", ip.vlnv)?;
            d.set_item("phys_addr", ip.window.map(|w| w.base))?;
            d.set_item("addr_range", ip.window.map_or(0, |w| w.range))?;
            let (parameters, interrupts) = match ip.kind {
                IpKind::AxiDma {
                    params, interrupts, ..
                } => (
                    params.vivado(),
                    interrupts
                        .iter()
                        .map(|i| (i.pin, designs::INTERRUPT_CONTROLLER, i.line))
                        .collect(),
                ),
                IpKind::Core(_) => (ip.parameters, Vec::new()),
            };
            d.set_item("parameters", parameters)?;
            d.set_item("interrupts", interrupts)?;
            Ok(d)
        })
        .collect()
}
