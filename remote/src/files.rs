//! The files PYNQ's client reads and writes on the board through the
//! protocol, served from a set the server owns (never the host's file
//! system): the kernel's version (the architecture), the board's name in
//! the device tree, the FPGA manager's attributes, and the bitstreams the
//! client puts in `/lib/firmware`.

use std::collections::BTreeMap;

/// The FPGA manager's attributes.
pub(crate) const FPGA_FIRMWARE: &str = "/sys/class/fpga_manager/fpga0/firmware";
/// The FPGA manager's flags (0 full, 1 partial).
pub(crate) const FPGA_FLAGS: &str = "/sys/class/fpga_manager/fpga0/flags";
/// The FPGA manager's state.
pub(crate) const FPGA_STATE: &str = "/sys/class/fpga_manager/fpga0/state";
/// Where bitstreams are put for the FPGA manager.
pub(crate) const FIRMWARE_DIR: &str = "/lib/firmware/";
/// The kernel's version string.
const PROC_VERSION: &str = "/proc/version";
/// The board's name, as PYNQ's images put it in the device tree.
const BOARD_NAME: &str = "/proc/device-tree/chosen/pynq_board";

/// Largest bitstream accepted in `/lib/firmware` (a Zynq UltraScale+ ZU19EG's
/// full bitstream is under 40 MiB).
pub(crate) const MAX_FIRMWARE: usize = 64 << 20;
/// Most bitstreams kept in `/lib/firmware` at once (the oldest goes).
const MAX_FIRMWARE_FILES: usize = 4;

/// What a path names in the set.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A file with fixed contents.
    Fixed(&'static [u8]),
    /// One of the FPGA manager's attributes.
    Attribute(&'static str),
    /// A bitstream in `/lib/firmware` (by file name).
    Firmware(String),
}

/// Why a path is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PathError {
    /// Not one of the files the server provides.
    #[error(
        "{0:?} is not a file this board serves (the kernel version, the board name, the FPGA manager's firmware/flags/state and /lib/firmware/NAME.bin)"
    )]
    Outside(String),
    /// A firmware name with a directory or a character a file name can't have.
    #[error("{0:?} is not a plain file name in /lib/firmware")]
    BadName(String),
}

/// Resolves a path of the set.
pub(crate) fn entry(path: &str) -> Result<Entry, PathError> {
    match path {
        PROC_VERSION => Ok(Entry::Fixed(
            b"Linux version 6.6.10-xilinx (dmaflow emulated board) #1 SMP aarch64 GNU/Linux\n",
        )),
        BOARD_NAME => Ok(Entry::Fixed(b"dmaflow-emulated\0")),
        FPGA_FIRMWARE => Ok(Entry::Attribute(FPGA_FIRMWARE)),
        FPGA_FLAGS => Ok(Entry::Attribute(FPGA_FLAGS)),
        FPGA_STATE => Ok(Entry::Attribute(FPGA_STATE)),
        _ => match path.strip_prefix(FIRMWARE_DIR) {
            Some(name) => {
                let ok = !name.is_empty()
                    && name.len() <= 255
                    && name != "."
                    && name != ".."
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b));
                if ok {
                    Ok(Entry::Firmware(name.to_string()))
                } else {
                    Err(PathError::BadName(path.to_string()))
                }
            }
            None => Err(PathError::Outside(path.to_string())),
        },
    }
}

/// The writable part of the set: `/lib/firmware` and the FPGA manager.
#[derive(Default)]
pub(crate) struct Files {
    /// Bitstreams by file name, oldest first.
    firmware: BTreeMap<String, (u64, Vec<u8>)>,
    /// Order of the next firmware write.
    next: u64,
    /// The FPGA manager's `flags`.
    pub(crate) flags: String,
    /// The FPGA manager's `firmware`: the bitstream programmed last.
    pub(crate) programmed: String,
}

impl Files {
    /// Whether `path` exists.
    pub(crate) fn exists(&self, path: &str) -> bool {
        match entry(path) {
            Ok(Entry::Firmware(name)) => self.firmware.contains_key(&name),
            Ok(_) => true,
            Err(_) => false,
        }
    }

    /// The contents of `path`.
    pub(crate) fn read(&self, path: &str) -> Result<Vec<u8>, String> {
        match entry(path).map_err(|e| e.to_string())? {
            Entry::Fixed(b) => Ok(b.to_vec()),
            Entry::Attribute(FPGA_FLAGS) => Ok(format!("{}\n", self.flags).into_bytes()),
            Entry::Attribute(FPGA_FIRMWARE) => Ok(format!("{}\n", self.programmed).into_bytes()),
            Entry::Attribute(_) => Ok(b"operating\n".to_vec()),
            Entry::Firmware(name) => self
                .firmware
                .get(&name)
                .map(|(_, b)| b.clone())
                .ok_or_else(|| format!("{path:?} does not exist")),
        }
    }

    /// Stores a bitstream (at most [`MAX_FIRMWARE_FILES`] are kept).
    pub(crate) fn put_firmware(&mut self, name: String, bytes: Vec<u8>) {
        if !self.firmware.contains_key(&name) && self.firmware.len() >= MAX_FIRMWARE_FILES {
            let oldest = self
                .firmware
                .iter()
                .min_by_key(|(_, (order, _))| *order)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.firmware.remove(&k);
            }
        }
        self.next += 1;
        self.firmware.insert(name, (self.next, bytes));
    }

    /// Forgets a bitstream: PYNQ's client sends one only when the name is
    /// missing, so a changed bitstream under the same name must be asked for
    /// again when its attributes are set.
    pub(crate) fn forget_firmware(&mut self, name: &str) {
        self.firmware.remove(name);
    }

    /// A stored bitstream.
    pub(crate) fn firmware(&self, name: &str) -> Option<&[u8]> {
        self.firmware.get(name).map(|(_, b)| b.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_outside_the_set_are_refused() {
        for p in [
            "/etc/passwd",
            "/lib/firmware/../../etc/passwd",
            "/lib/firmware/a/b.bin",
            "/lib/firmware/",
            "/proc/version/..",
            "",
            "/lib/firmware/..",
        ] {
            assert!(entry(p).is_err(), "{p}");
            assert!(!Files::default().exists(p), "{p}");
        }
        assert_eq!(
            entry("/lib/firmware/loopback.bin"),
            Ok(Entry::Firmware("loopback.bin".into()))
        );
    }

    #[test]
    fn firmware_is_bounded_and_forgotten() {
        let mut f = Files::default();
        for i in 0..10 {
            f.put_firmware(format!("{i}.bin"), vec![i as u8]);
        }
        assert_eq!(f.firmware.len(), MAX_FIRMWARE_FILES);
        assert!(f.exists("/lib/firmware/9.bin"));
        assert!(!f.exists("/lib/firmware/0.bin"));
        f.forget_firmware("9.bin");
        assert!(!f.exists("/lib/firmware/9.bin"));
    }
}
