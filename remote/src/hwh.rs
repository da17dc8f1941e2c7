//! Vivado's hardware handoff (`.hwh`, the XML PYNQ's `pynqmetadata` reads)
//! for a [`Design`]: written for the emulated designs, so that PYNQ's
//! `Overlay` builds its `ip_dict` and binds its own DMA driver, and read from
//! a user's design to emulate it.

use std::fmt::Write as _;
use std::path::Path;

use crate::Error;
use dmaflow::designs::{self, AxiDmaParams};

use crate::design::{Design, Dma, Ip};

/// The PS instance of the written designs.
const PS: &str = "zynq_ultra_ps_e_0";

/// XML-escapes an attribute value.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The `<REGISTERS>` of an IP: its register map, each field with its bits.
fn registers(out: &mut String, regs: &[designs::Register]) {
    out.push_str("          <REGISTERS>\n");
    for r in regs {
        let _ = writeln!(out, "            <REGISTER NAME=\"{}\">", r.name);
        for (k, v) in [
            ("ADDRESS_OFFSET", format!("{:#x}", r.offset)),
            ("SIZE", (32 * r.words).to_string()),
            ("ACCESS", "read-write".into()),
            ("IS_ENABLED", "true".into()),
        ] {
            let _ = writeln!(out, "              <PROPERTY NAME=\"{k}\" VALUE=\"{v}\"/>");
        }
        out.push_str("              <FIELDS>\n");
        for f in r.fields {
            let _ = writeln!(out, "                <FIELD NAME=\"{}\">", f.name);
            for (k, v) in [
                ("ADDRESS_OFFSET", f.lsb.to_string()),
                ("ACCESS", f.access.as_str().to_string()),
                ("BIT_OFFSET", f.lsb.to_string()),
                ("BIT_WIDTH", f.width.to_string()),
            ] {
                let _ = writeln!(
                    out,
                    "                  <PROPERTY NAME=\"{k}\" VALUE=\"{v}\"/>"
                );
            }
            out.push_str("                </FIELD>\n");
        }
        out.push_str("              </FIELDS>\n            </REGISTER>\n");
    }
    out.push_str("          </REGISTERS>\n");
}

/// An IP's parameters as Vivado writes them: an AXI DMA's PG021 parameters
/// twice, as the HDL generics (upper case) and as the IP's user parameters
/// (lower case, which PYNQ's driver reads), and every IP's address range.
fn ip_parameters(ip: &Ip) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    if let Some(d) = ip.dma {
        let p = d.params.vivado();
        out.extend(p.iter().map(|(k, v)| (k.to_string(), v.clone())));
        out.extend(p.iter().map(|(k, v)| (k.to_lowercase(), v.clone())));
    }
    out.extend(ip.parameters.iter().cloned());
    out.push(("C_BASEADDR".into(), format!("{:#010X}", ip.base)));
    out.push((
        "C_HIGHADDR".into(),
        format!("{:#010X}", ip.base + ip.range - 1),
    ));
    out
}

/// The PS's parameters PYNQ reads: the four PL clocks (PL0 at 100 MHz from
/// IOPLL enabled, the others off) and the AXI port widths.
fn ps_parameters() -> Vec<(String, String)> {
    let mut p = vec![
        ("C_MAXIGP0_DATA_WIDTH".to_string(), "128".to_string()),
        ("C_MAXIGP1_DATA_WIDTH".into(), "128".into()),
        ("C_MAXIGP2_DATA_WIDTH".into(), "32".into()),
        ("C_SAXIGP2_DATA_WIDTH".into(), "128".into()),
    ];
    for i in 0..4 {
        p.push((
            format!("PSU__FPGA_PL{i}_ENABLE"),
            u32::from(i == 0).to_string(),
        ));
        let clk = format!("PSU__CRL_APB__PL{i}_REF_CTRL__");
        for (k, v) in [
            ("SRCSEL", "IOPLL"),
            ("DIVISOR0", "15"),
            ("DIVISOR1", "1"),
            ("FREQMHZ", "100"),
            ("ACT_FREQMHZ", "99.999001"),
        ] {
            p.push((format!("{clk}{k}"), v.to_string()));
        }
    }
    p
}

/// Writes `(name, value)` pairs as `<PARAMETER>`s.
fn parameters(out: &mut String, params: &[(String, String)]) {
    out.push_str("      <PARAMETERS>\n");
    for (k, v) in params {
        let _ = writeln!(
            out,
            "        <PARAMETER NAME=\"{}\" VALUE=\"{}\"/>",
            esc(k),
            esc(v)
        );
    }
    out.push_str("      </PARAMETERS>\n");
}

/// The `.hwh` of `design`: a Zynq UltraScale+ PS whose `M_AXI_HPM0_FPD`
/// reaches every IP's window, each AXI DMA with its PG021 parameters,
/// registers and interrupt outputs wired to the PS's `pl_ps_irq0`.
pub fn write(design: &Design) -> String {
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\" ?>\n");
    out.push_str("<EDKSYSTEM EDWVERSION=\"1.2\" VIVADOVERSION=\"2024.1\">\n");
    let _ = writeln!(
        out,
        "  <SYSTEMINFO ARCH=\"zynquplus\" DEVICE=\"xczu3eg\" NAME=\"{}\" PACKAGE=\"sbva484\" SPEEDGRADE=\"-1\"/>",
        esc(&design.name)
    );
    out.push_str("  <EXTERNALPORTS/>\n  <EXTERNALINTERFACES/>\n  <MODULES>\n");
    let _ = writeln!(
        out,
        "    <MODULE FULLNAME=\"/{PS}\" HWVERSION=\"3.5\" INSTANCE=\"{PS}\" IPTYPE=\"PERIPHERAL\" IS_ENABLE=\"1\" IS_PL=\"FALSE\" MODTYPE=\"zynq_ultra_ps_e\" VLNV=\"xilinx.com:ip:zynq_ultra_ps_e:3.5\">"
    );
    parameters(&mut out, &ps_parameters());
    let lines = design
        .dmas()
        .map(|(_, d)| d.lines[0].max(d.lines[1]) + 1)
        .max()
        .unwrap_or(1);
    let _ = writeln!(
        out,
        "      <PORTS>\n        <PORT DIR=\"I\" LEFT=\"{}\" NAME=\"pl_ps_irq0\" RIGHT=\"0\" SENSITIVITY=\"LEVEL_HIGH\" SIGIS=\"INTERRUPT\"/>\n      </PORTS>",
        lines - 1
    );
    out.push_str("      <BUSINTERFACES>\n        <BUSINTERFACE BUSNAME=\"ps_M_AXI_HPM0_FPD\" DATAWIDTH=\"128\" NAME=\"M_AXI_HPM0_FPD\" TYPE=\"MASTER\" VLNV=\"xilinx.com:interface:aximm:1.0\">\n          <PARAMETER NAME=\"DATA_WIDTH\" VALUE=\"128\"/>\n        </BUSINTERFACE>\n      </BUSINTERFACES>\n");
    out.push_str("      <MEMORYMAP>\n");
    for ip in &design.ips {
        let _ = writeln!(
            out,
            "        <MEMRANGE ADDRESSBLOCK=\"Reg\" BASENAME=\"C_BASEADDR\" BASEVALUE=\"{:#010X}\" HIGHNAME=\"C_HIGHADDR\" HIGHVALUE=\"{:#010X}\" INSTANCE=\"{}\" IS_DATA=\"TRUE\" IS_INSTRUCTION=\"TRUE\" MASTERBUSINTERFACE=\"M_AXI_HPM0_FPD\" MEMTYPE=\"REGISTER\" SLAVEBUSINTERFACE=\"S_AXI_LITE\"/>",
            ip.base,
            ip.base + ip.range - 1,
            esc(&ip.name)
        );
    }
    out.push_str("      </MEMORYMAP>\n    </MODULE>\n");
    for ip in &design.ips {
        let modtype = ip.vlnv.split(':').nth(2).unwrap_or("ip");
        let _ = writeln!(
            out,
            "    <MODULE FULLNAME=\"/{n}\" INSTANCE=\"{n}\" IPTYPE=\"PERIPHERAL\" IS_ENABLE=\"1\" MODCLASS=\"PERIPHERAL\" MODTYPE=\"{t}\" VLNV=\"{v}\">",
            n = esc(&ip.name),
            t = esc(modtype),
            v = esc(&ip.vlnv)
        );
        if !ip.registers.is_empty() {
            let _ = writeln!(
                out,
                "      <ADDRESSBLOCKS>\n        <ADDRESSBLOCK ACCESS=\"read-write\" INTERFACE=\"S_AXI_LITE\" NAME=\"Reg\" RANGE=\"{}\" USAGE=\"register\">",
                ip.range
            );
            registers(&mut out, ip.registers);
            out.push_str("        </ADDRESSBLOCK>\n      </ADDRESSBLOCKS>\n");
        }
        parameters(&mut out, &ip_parameters(ip));
        if let Some(d) = ip.dma {
            out.push_str("      <PORTS>\n");
            for (port, line) in [("mm2s_introut", d.lines[0]), ("s2mm_introut", d.lines[1])] {
                let _ = writeln!(
                    out,
                    "        <PORT DIR=\"O\" NAME=\"{port}\" SENSITIVITY=\"LEVEL_HIGH\" SIGIS=\"INTERRUPT\" SIGNAME=\"{n}_{port}\">\n          <CONNECTIONS>\n            <CONNECTION INSTANCE=\"{PS}\" PORT=\"pl_ps_irq0\" BIT=\"{line}\"/>\n          </CONNECTIONS>\n        </PORT>",
                    n = esc(&ip.name)
                );
            }
            out.push_str("      </PORTS>\n");
        }
        out.push_str("      <BUSINTERFACES>\n        <BUSINTERFACE BUSNAME=\"ps_M_AXI_HPM0_FPD\" DATAWIDTH=\"32\" NAME=\"S_AXI_LITE\" TYPE=\"SLAVE\" VLNV=\"xilinx.com:interface:aximm:1.0\">\n          <PARAMETER NAME=\"DATA_WIDTH\" VALUE=\"32\"/>\n        </BUSINTERFACE>\n      </BUSINTERFACES>\n    </MODULE>\n");
    }
    out.push_str("  </MODULES>\n</EDKSYSTEM>\n");
    out
}

/// Reads a number as a `.hwh` writes it (`0x40400000` or decimal).
fn number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Reads a design from a `.hwh`'s text: every register window the PS's
/// memory map gives (`MEMTYPE="REGISTER"`), and for each AXI DMA its PG021
/// parameters. `path` names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<Design, Error> {
    let bad = |reason: String| Error::Hwh {
        path: path.to_path_buf(),
        reason,
    };
    let doc = roxmltree::Document::parse(text).map_err(|e| bad(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "EDKSYSTEM" {
        return Err(bad(format!(
            "the root element is <{}>, not <EDKSYSTEM>",
            root.tag_name().name()
        )));
    }
    let name = root
        .descendants()
        .find(|n| n.has_tag_name("SYSTEMINFO"))
        .and_then(|n| n.attribute("NAME"))
        .unwrap_or("design")
        .to_string();
    let modules: Vec<roxmltree::Node> = root
        .descendants()
        .filter(|n| n.has_tag_name("MODULE"))
        .collect();
    let ps = modules
        .iter()
        .find(|m| {
            matches!(
                m.attribute("MODTYPE"),
                Some("zynq_ultra_ps_e" | "processing_system7")
            )
        })
        .ok_or_else(|| bad("no processing system (zynq_ultra_ps_e) module".into()))?;
    let mut ips = Vec::new();
    for r in ps.descendants().filter(|n| n.has_tag_name("MEMRANGE")) {
        if r.attribute("MEMTYPE") != Some("REGISTER") {
            continue;
        }
        let inst = r
            .attribute("INSTANCE")
            .ok_or_else(|| bad("a MEMRANGE without INSTANCE".into()))?;
        let (Some(base), Some(high)) = (
            r.attribute("BASEVALUE").and_then(number),
            r.attribute("HIGHVALUE").and_then(number),
        ) else {
            return Err(bad(format!("{inst}: BASEVALUE/HIGHVALUE are not numbers")));
        };
        if high < base {
            return Err(bad(format!(
                "{inst}: HIGHVALUE {high:#x} below BASEVALUE {base:#x}"
            )));
        }
        let module = modules
            .iter()
            .find(|m| m.attribute("INSTANCE") == Some(inst))
            .ok_or_else(|| bad(format!("{inst} is in the memory map but has no MODULE")))?;
        let vlnv = module.attribute("VLNV").unwrap_or("").to_string();
        let dma = if module.attribute("MODTYPE") == Some("axi_dma") {
            Some(dma_params(module, inst).map_err(bad)?)
        } else {
            None
        };
        ips.push(Ip {
            name: inst.to_string(),
            vlnv,
            base,
            range: high - base + 1,
            dma,
            registers: &[],
            parameters: Vec::new(),
        });
    }
    ips.sort_by_key(|ip| ip.base);
    for w in ips.windows(2) {
        if w[0].base + w[0].range > w[1].base {
            return Err(bad(format!("{} and {} overlap", w[0].name, w[1].name)));
        }
    }
    Ok(Design { name, ips })
}

/// An AXI DMA module's PG021 parameters (the user parameters, lower case,
/// or the HDL generics where those are missing; PG021's defaults where
/// neither is written).
fn dma_params(module: &roxmltree::Node, inst: &str) -> Result<Dma, String> {
    let param = |key: &str| {
        module
            .children()
            .filter(|n| n.has_tag_name("PARAMETERS"))
            .flat_map(|n| n.children())
            .filter(|n| n.has_tag_name("PARAMETER"))
            .find(|n| {
                n.attribute("NAME")
                    .is_some_and(|k| k.eq_ignore_ascii_case(key))
            })
            .and_then(|n| n.attribute("VALUE"))
    };
    let num = |key: &str, default: u64| -> Result<u64, String> {
        match param(key) {
            None => Ok(default),
            Some(v) => number(v).ok_or_else(|| format!("{inst}: {key} = {v:?} is not a number")),
        }
    };
    let flag = |key: &str, default: u64| -> Result<bool, String> { Ok(num(key, default)? != 0) };
    let length_width = num("c_sg_length_width", 14)?;
    if !(8..=26).contains(&length_width) {
        return Err(format!(
            "{inst}: c_sg_length_width {length_width} is outside PG021's 8..=26"
        ));
    }
    if flag("c_micro_dma", 0)? {
        return Err(format!(
            "{inst}: micro DMA mode (c_micro_dma = 1) is not emulated"
        ));
    }
    if flag("c_enable_multi_channel", 0)? {
        return Err(format!(
            "{inst}: multichannel mode (c_enable_multi_channel = 1) is not emulated"
        ));
    }
    let width = |key: &str| -> Result<u32, String> {
        let w = num(key, 32)?;
        if ![8, 16, 32, 64, 128, 256, 512, 1024].contains(&w) {
            return Err(format!("{inst}: {key} = {w} is not a PG021 data width"));
        }
        Ok(w as u32)
    };
    Ok(Dma {
        params: AxiDmaParams {
            include_sg: flag("c_include_sg", 1)?,
            sg_length_width: length_width as u32,
            include_mm2s: flag("c_include_mm2s", 1)?,
            include_s2mm: flag("c_include_s2mm", 1)?,
            mm2s_data_width: width("c_m_axi_mm2s_data_width")?,
            s2mm_data_width: width("c_m_axi_s2mm_data_width")?,
            mm2s_stream_width: width("c_m_axis_mm2s_tdata_width")?,
            s2mm_stream_width: width("c_s_axis_s2mm_tdata_width")?,
            addr_width: num("c_addr_width", 32)? as u32,
            mm2s_burst_size: num("c_mm2s_burst_size", 16)? as u32,
            s2mm_burst_size: num("c_s2mm_burst_size", 16)? as u32,
            include_stscntrl_strm: flag("c_sg_include_stscntrl_strm", 0)?,
            micro_dma: false,
        },
        lines: [0, 1],
    })
}

/// The payload's marker naming the emulated design a bitstream loads.
const MARK: &[u8] = b"dmaflow-design:";

/// A `.bit` for `design`: Vivado's container (a header of length-prefixed
/// fields, then `0x65`, a 32-bit length and the payload in whole 32-bit
/// words), whose payload is a configuration preamble (dummy words, bus-width
/// detection, sync word) followed by the design's name, which the emulated
/// board reads when the bitstream is downloaded.
pub fn bitstream(design: &str) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, key: u8, text: &str) {
        out.push(key);
        out.extend_from_slice(&((text.len() + 1) as u16).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
        out.push(0);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&9u16.to_be_bytes());
    out.extend_from_slice(&[0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x0f, 0xf0, 0x00]);
    out.extend_from_slice(&1u16.to_be_bytes());
    field(
        &mut out,
        0x61,
        &format!("{design};UserID=0XFFFFFFFF;Version=2024.1"),
    );
    field(&mut out, 0x62, "xczu3eg-sbva484-1-e");
    field(&mut out, 0x63, "2026/11/25");
    field(&mut out, 0x64, "12:00:00");
    let mut payload = vec![0xff; 32];
    payload.extend_from_slice(&[0x00, 0x00, 0x00, 0xbb, 0x11, 0x22, 0x00, 0x44]);
    payload.extend_from_slice(&[0xff; 8]);
    payload.extend_from_slice(&[0xaa, 0x99, 0x55, 0x66]);
    payload.extend_from_slice(MARK);
    payload.extend_from_slice(design.as_bytes());
    payload.push(0);
    payload.resize(payload.len().div_ceil(4) * 4, 0);
    out.push(0x65);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The design a `.bin` (what PYNQ's `bit2bin` makes of a [`bitstream`]:
/// the payload with each 32-bit word byte-swapped) names, if it is one of
/// dmaflow's.
pub fn bin_design(bin: &[u8]) -> Option<String> {
    let words: Vec<u8> = bin
        .chunks_exact(4)
        .flat_map(|w| [w[3], w[2], w[1], w[0]])
        .collect();
    let at = words.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    let rest = &words[at..];
    let end = rest.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&rest[..end]).ok().map(str::to_string)
}

/// Writes `DIR/DESIGN.bit` and `DIR/DESIGN.hwh` for the emulated design
/// `design`, the pair PYNQ's `Overlay("DIR/DESIGN.bit")` loads.
pub fn export(design: &str, dir: &Path) -> Result<(), Error> {
    let d = Design::builtin(design).ok_or_else(|| Error::UnknownDesign(design.to_string()))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    for (ext, bytes) in [("bit", bitstream(design)), ("hwh", write(&d).into_bytes())] {
        let path = dir.join(format!("{design}.{ext}"));
        std::fs::write(&path, bytes).map_err(|e| Error::Io { path, source: e })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_design_reads_back_the_same() {
        for name in designs::names() {
            let d = Design::builtin(name).unwrap();
            let back = parse(&write(&d), Path::new("x.hwh")).unwrap();
            assert_eq!(back.ips.len(), d.ips.len(), "{name}");
            for (a, b) in d.ips.iter().zip(&back.ips) {
                assert_eq!((a.base, a.range, &a.name), (b.base, b.range, &b.name));
                assert_eq!(a.dma.map(|x| x.params), b.dma.map(|x| x.params));
            }
        }
    }

    #[test]
    fn a_bitstream_names_its_design_after_bit2bin() {
        let bit = bitstream("loopback-sg");
        // PYNQ's parse_bit_header: a length-prefixed first field, two
        // bytes, then keyed length-prefixed fields up to key 0x65, whose
        // 32-bit length covers the rest; bit2bin swaps each word's bytes.
        let u16_at = |i: usize| usize::from(u16::from_be_bytes([bit[i], bit[i + 1]]));
        let mut at = 2 + u16_at(0) + 2;
        while bit[at] != 0x65 {
            at += 3 + u16_at(at + 1);
        }
        let len = u32::from_be_bytes(bit[at + 1..at + 5].try_into().unwrap()) as usize;
        let payload = &bit[at + 5..];
        assert_eq!(payload.len(), len);
        assert_eq!(len % 4, 0);
        let bin: Vec<u8> = payload
            .chunks_exact(4)
            .flat_map(|w| [w[3], w[2], w[1], w[0]])
            .collect();
        assert_eq!(bin_design(&bin).as_deref(), Some("loopback-sg"));
        assert_eq!(bin_design(&[0u8; 64]), None);
    }

    #[test]
    fn a_malformed_hwh_is_an_error_naming_what() {
        let p = Path::new("bad.hwh");
        let e = parse("<EDKSYSTEM>", p).unwrap_err().to_string();
        assert!(e.contains("bad.hwh"), "{e}");
        let e = parse("<EDKSYSTEM><MODULES/></EDKSYSTEM>", p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("processing system"), "{e}");
    }
}
