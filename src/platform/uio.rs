//! Real boards: register windows and interrupts through UIO (`/dev/uioN`), DMA
//! memory through u-dma-buf (`/dev/udmabufN`). Every path is taken under a root
//! directory (normally `/`), so tests can point it at a fake tree.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::map::Mapping;
use super::{DmaMemory, Error, IrqLine, RegisterSpace, check_range, wait_readable};

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Reads a one-line sysfs attribute.
fn attr(path: &Path) -> Result<String, Error> {
    let s = std::fs::read_to_string(path).map_err(io_error(path))?;
    Ok(s.trim().to_string())
}

/// Parses a sysfs number: hexadecimal with `0x`, decimal otherwise.
fn number(path: &Path) -> Result<u64, Error> {
    let s = attr(path)?;
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| Error::Malformed {
        path: path.display().to_string(),
        reason: format!("{s:?} is not a number"),
    })
}

/// A size from sysfs as a `usize`, refused (not truncated) where it does not fit
/// the address space (32-bit boards).
fn size_of(path: &Path, size: u64) -> Result<usize, Error> {
    usize::try_from(size).map_err(|_| Error::Malformed {
        path: path.display().to_string(),
        reason: format!("{size:#x} bytes do not fit this CPU's address space"),
    })
}

fn open_rw(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_error(path))
}

/// A UIO device's first memory map (its registers).
pub struct UioRegisters {
    map: Mapping,
}

/// A UIO device's interrupt: reading 4 bytes blocks for the next interrupt and
/// returns the count; writing 1 re-enables it.
///
/// The line remembers whether this program armed it since the last interrupt
/// it read: [`enable`](IrqLine::enable) on a line armed already makes no
/// system call, so a driver that drains completions without sleeping keeps
/// the line armed across them at no cost. (An interrupt that fired and was
/// not read yet leaves the line masked but its event pending: the next wait
/// returns at once, reads it, and the enable after that is a real one.)
pub struct UioIrq {
    file: File,
    path: PathBuf,
    armed: std::sync::atomic::AtomicBool,
    syscalls: std::sync::atomic::AtomicU64,
}

impl UioIrq {
    fn new(file: File, path: PathBuf) -> UioIrq {
        UioIrq {
            file,
            path,
            armed: std::sync::atomic::AtomicBool::new(false),
            syscalls: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// System calls made on the line so far (each enable's `write()`, each
    /// wait's `poll()` and `read()`).
    pub fn syscalls(&self) -> u64 {
        self.syscalls.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count(&self, n: u64) {
        self.syscalls
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Opens `/dev/uio<index>` under `root`: its map0 registers and its interrupt.
pub fn open_uio(root: &Path, index: usize) -> Result<(UioRegisters, UioIrq), Error> {
    let size_path = root.join(format!("sys/class/uio/uio{index}/maps/map0/size"));
    let size = number(&size_path)?;
    if size == 0 || size > 1 << 30 {
        return Err(Error::Malformed {
            path: size_path.display().to_string(),
            reason: format!("map size {size:#x} is not a plausible register window"),
        });
    }
    let dev = root.join(format!("dev/uio{index}"));
    let file = open_rw(&dev)?;
    let map = Mapping::new(
        &file,
        size_of(&size_path, size)?,
        0,
        &dev.display().to_string(),
    )?;
    let irq_file = open_rw(&dev)?;
    Ok((UioRegisters { map }, UioIrq::new(irq_file, dev)))
}

/// Opens the interrupt of `/dev/uio<index>` under `root` alone (a device
/// that is an interrupt line with no register window).
pub fn open_uio_irq(root: &Path, index: usize) -> Result<UioIrq, Error> {
    let dev = root.join(format!("dev/uio{index}"));
    Ok(UioIrq::new(open_rw(&dev)?, dev))
}

impl RegisterSpace for UioRegisters {
    fn read(&self, offset: usize) -> Result<u32, Error> {
        self.map.read_u32(offset)
    }
    unsafe fn write(&self, offset: usize, value: u32) -> Result<(), Error> {
        self.map.write_u32(offset, value)
    }
    fn len(&self) -> usize {
        self.map.len()
    }
}

impl IrqLine for UioIrq {
    fn wait(&self, timeout: Duration) -> Result<u32, Error> {
        use std::sync::atomic::Ordering;
        self.count(1);
        wait_readable(&self.file, timeout, &self.path.display().to_string())?;
        let mut b = [0u8; 4];
        self.count(1);
        (&self.file)
            .read_exact(&mut b)
            .map_err(io_error(&self.path))?;
        // The interrupt handler masked the line.
        self.armed.store(false, Ordering::Release);
        Ok(u32::from_ne_bytes(b))
    }

    fn enable(&self) -> Result<(), Error> {
        use std::sync::atomic::Ordering;
        if self.armed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.count(1);
        (&self.file)
            .write_all(&1u32.to_ne_bytes())
            .map_err(io_error(&self.path))?;
        self.armed.store(true, Ordering::Release);
        Ok(())
    }
}

/// How a u-dma-buf's cache maintenance is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOps {
    /// By the CPU from user space, line by line ([`super::cache`]): no system
    /// call. The default where the CPU allows it (x86-64, AArch64).
    Cpu,
    /// Through u-dma-buf's sysfs `sync_for_cpu` / `sync_for_device` files, in
    /// their command form: offset, size and direction in one write, so two
    /// threads syncing one buffer never mix their ranges. The default
    /// elsewhere (ARMv7).
    Sysfs,
}

/// A u-dma-buf buffer: contiguous DMA memory with its physical address.
pub struct UdmaBuf {
    map: Mapping,
    /// The device file mapped.
    file: File,
    phys: u64,
    coherent: bool,
    sysfs: PathBuf,
    ops: CacheOps,
    /// The two sysfs triggers, opened on first use (`sync_for_device`,
    /// `sync_for_cpu`).
    triggers: [std::sync::OnceLock<File>; 2],
    /// System calls made for cache maintenance through sysfs.
    sysfs_calls: std::sync::atomic::AtomicU64,
}

/// Opens the u-dma-buf `name` (for example `udmabuf0`) under `root`.
pub fn open_udmabuf(root: &Path, name: &str) -> Result<UdmaBuf, Error> {
    let sysfs = root.join(format!("sys/class/u-dma-buf/{name}"));
    let phys = number(&sysfs.join("phys_addr"))?;
    let size_path = sysfs.join("size");
    let size = size_of(&size_path, number(&size_path)?)?;
    if size == 0 {
        return Err(Error::Malformed {
            path: sysfs.join("size").display().to_string(),
            reason: "buffer size is zero".into(),
        });
    }
    if phys.checked_add(size as u64).is_none() {
        return Err(Error::Malformed {
            path: sysfs.join("phys_addr").display().to_string(),
            reason: format!(
                "{phys:#x} plus the buffer's {size:#x} bytes passes the end of the address space"
            ),
        });
    }
    let coherent = match sysfs.join("dma_coherent") {
        p if p.exists() => number(&p)? != 0,
        _ => false,
    };
    let dev = root.join(format!("dev/{name}"));
    let file = open_rw(&dev)?;
    let map = Mapping::new(file.as_fd(), size, 0, &dev.display().to_string())?;
    let ops = if super::cache::available() {
        CacheOps::Cpu
    } else {
        CacheOps::Sysfs
    };
    Ok(UdmaBuf {
        map,
        file,
        phys,
        coherent,
        sysfs,
        ops,
        triggers: Default::default(),
        sysfs_calls: Default::default(),
    })
}

/// u-dma-buf's sync command: one 64-bit number that carries the range and
/// the direction (bits 63:32 offset, 31:4 size in 16-byte units, 3:2
/// direction, bit 0 set), so one write does what the `sync_offset`,
/// `sync_size` and `sync_direction` files would. The range is widened to 16
/// bytes at both ends (cache maintenance works on whole lines anyway);
/// `None` where the offset does not fit the command's 32 bits.
fn sync_command(offset: usize, len: usize, direction: u32) -> Option<u64> {
    let start = offset & !15;
    let end = (offset + len).next_multiple_of(16);
    let start32 = u32::try_from(start).ok()?;
    let size = u32::try_from(end - start).ok()?;
    Some(
        (u64::from(start32) << 32)
            | u64::from(size & 0xFFFF_FFF0)
            | u64::from((direction & 3) << 2)
            | 1,
    )
}

impl UdmaBuf {
    /// Chooses how cache maintenance is done; [`CacheOps::Cpu`] where the CPU does
    /// not allow it from user space falls back to sysfs.
    pub fn with_cache_ops(mut self, ops: CacheOps) -> Self {
        self.ops = if super::cache::available() {
            ops
        } else {
            CacheOps::Sysfs
        };
        self
    }

    /// How cache maintenance is done.
    pub fn cache_ops(&self) -> CacheOps {
        self.ops
    }

    /// One cache operation over a checked range: by the CPU where chosen, else
    /// through sysfs in `direction` (1 to the device, 2 from it).
    fn maintain(
        &self,
        op: super::cache::Op,
        offset: usize,
        len: usize,
        direction: u32,
        trigger: &str,
    ) -> Result<(), Error> {
        check_range(offset, len, self.map.len())?;
        if self.ops == CacheOps::Cpu {
            // Only addresses are used; the range lies inside the mapping (checked).
            let start = self.map.base().wrapping_add(offset);
            if super::cache::maintain(op, start, len) {
                return Ok(());
            }
        }
        self.sync(offset, len, direction, trigger)
    }

    /// u-dma-buf's sync in its command form: one write of [`sync_command`]
    /// to the trigger file (kept open), so it is one system call and atomic
    /// with respect to other threads' syncs.
    fn sync(&self, offset: usize, len: usize, direction: u32, trigger: &str) -> Result<(), Error> {
        use std::os::unix::fs::FileExt;
        check_range(offset, len, self.map.len())?;
        let p = self.sysfs.join(trigger);
        let command = sync_command(offset, len, direction).ok_or_else(|| Error::Malformed {
            path: p.display().to_string(),
            reason: format!("offset {offset:#x} does not fit u-dma-buf's 32-bit sync command"),
        })?;
        let slot = &self.triggers[usize::from(trigger == "sync_for_cpu")];
        let file = match slot.get() {
            Some(f) => f,
            None => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .map_err(io_error(&p))?;
                slot.get_or_init(|| f)
            }
        };
        let text = format!("{command:#018x}");
        self.sysfs_calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = file.write_at(text.as_bytes(), 0).map_err(io_error(&p))?;
        if n != text.len() {
            return Err(Error::Malformed {
                path: p.display().to_string(),
                reason: format!("took {n} of the sync command's {} bytes", text.len()),
            });
        }
        Ok(())
    }

    /// System calls made so far for cache maintenance through sysfs (one per
    /// operation; opening the two trigger files is not counted).
    pub fn sysfs_calls(&self) -> u64 {
        self.sysfs_calls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

// SAFETY: the mapping covers the whole buffer (its sysfs size) and lives as
// long as the value; u-dma-buf's buffer is physically contiguous from
// `phys_addr`, in the machine's physical address space; maintenance checks
// its range.
unsafe impl DmaMemory for UdmaBuf {
    fn domain(&self) -> u64 {
        super::PHYSICAL
    }
    fn name(&self) -> String {
        format!("{} (physical {:#x})", self.sysfs.display(), self.phys)
    }
    fn cpu_base(&self) -> *mut u8 {
        self.map.base()
    }
    fn size(&self) -> usize {
        self.map.len()
    }
    fn bus_base(&self) -> u64 {
        self.phys
    }
    fn coherent(&self) -> bool {
        self.coherent
    }
    fn sync_for_device(&self, offset: usize, len: usize) -> Result<(), Error> {
        self.maintain(super::cache::Op::Clean, offset, len, 1, "sync_for_device")
    }
    fn sync_for_cpu(&self, offset: usize, len: usize) -> Result<(), Error> {
        self.maintain(
            super::cache::Op::CleanInvalidate,
            offset,
            len,
            2,
            "sync_for_cpu",
        )
    }
    fn file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        use std::os::fd::AsFd;
        Some((self.file.as_fd(), 0))
    }
}

/// A UIO device as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct UioDevice {
    /// `N` of `/dev/uioN`.
    pub index: usize,
    /// The device's name: the device tree node's (with `generic-uio` or
    /// `uio_pdrv_genirq`, the block design's instance name, `axi_dma_0`).
    pub name: String,
    /// Physical address of its register window (map0).
    pub addr: u64,
    /// Size of the window in bytes; 0 for a device that is an interrupt
    /// line alone (no maps).
    pub size: u64,
}

impl Inventory {
    /// The UIO device called `name`; an error naming what there is when
    /// there is none.
    pub fn uio_named(&self, name: &str) -> Result<&UioDevice, Error> {
        self.uio.iter().find(|d| d.name == name).ok_or_else(|| {
            let there: Vec<&str> = self.uio.iter().map(|d| d.name.as_str()).collect();
            let left_out = if self.malformed.is_empty() {
                String::new()
            } else {
                format!("; left out as malformed: {}", self.malformed.join("; "))
            };
            Error::Missing(format!(
                "no UIO device named {name:?} (there are: {}{left_out})",
                if there.is_empty() {
                    "none".to_string()
                } else {
                    there.join(", ")
                }
            ))
        })
    }
}

/// What a board offers, as found under `root`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// UIO devices, by index.
    pub uio: Vec<UioDevice>,
    /// u-dma-bufs: (name, physical address, size).
    pub udmabuf: Vec<(String, u64, u64)>,
    /// Devices left out because a sysfs file of theirs is missing or malformed:
    /// each names the file and what is wrong with it.
    pub malformed: Vec<String>,
}

/// Lists the UIO devices and u-dma-bufs under `root` (none is not an error). A
/// device whose sysfs files cannot be read as numbers is left out and named in
/// [`Inventory::malformed`], never listed with invented values.
pub fn inventory(root: &Path) -> Inventory {
    let mut inv = Inventory::default();
    if let Ok(dir) = std::fs::read_dir(root.join("sys/class/uio")) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(index) = name.strip_prefix("uio").and_then(|n| n.parse().ok()) else {
                continue;
            };
            let name = attr(&e.path().join("name")).unwrap_or_default();
            // A device without maps (an interrupt line alone) has no window.
            let (addr, size) = if e.path().join("maps/map0").exists() {
                (
                    number(&e.path().join("maps/map0/addr")),
                    number(&e.path().join("maps/map0/size")),
                )
            } else {
                (Ok(0), Ok(0))
            };
            match (addr, size) {
                (Ok(addr), Ok(size)) => inv.uio.push(UioDevice {
                    index,
                    name,
                    addr,
                    size,
                }),
                (addr, size) => inv.malformed.extend(
                    [addr.err(), size.err()]
                        .into_iter()
                        .flatten()
                        .map(|e| e.to_string()),
                ),
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(root.join("sys/class/u-dma-buf")) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let phys = number(&e.path().join("phys_addr"));
            let size = number(&e.path().join("size"));
            match (phys, size) {
                (Ok(phys), Ok(size)) if phys.checked_add(size).is_none() => {
                    inv.malformed.push(format!(
                        "{}: {phys:#x} plus {size:#x} bytes passes the end of the address space",
                        e.path().join("phys_addr").display()
                    ))
                }
                (Ok(phys), Ok(size)) => inv.udmabuf.push((name, phys, size)),
                (Err(err), _) | (_, Err(err)) => inv.malformed.push(err.to_string()),
            }
        }
    }
    inv.uio.sort();
    inv.udmabuf.sort();
    inv.malformed.sort();
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dmaflow_cache_available() -> bool {
        crate::platform::cache::available()
    }

    fn fake_board(root: &Path) {
        let uio = root.join("sys/class/uio/uio0");
        std::fs::create_dir_all(uio.join("maps/map0")).unwrap();
        std::fs::write(uio.join("name"), "axi_dma\n").unwrap();
        std::fs::write(uio.join("maps/map0/size"), "0x10000\n").unwrap();
        std::fs::write(uio.join("maps/map0/addr"), "0x40400000\n").unwrap();
        std::fs::create_dir_all(root.join("dev")).unwrap();
        std::fs::write(root.join("dev/uio0"), vec![0u8; 0x10000]).unwrap();
        let ub = root.join("sys/class/u-dma-buf/udmabuf0");
        std::fs::create_dir_all(&ub).unwrap();
        std::fs::write(ub.join("phys_addr"), "0x3f000000\n").unwrap();
        std::fs::write(ub.join("size"), "1048576\n").unwrap();
        std::fs::write(ub.join("dma_coherent"), "0\n").unwrap();
        for f in [
            "sync_offset",
            "sync_size",
            "sync_direction",
            "sync_for_cpu",
            "sync_for_device",
        ] {
            std::fs::write(ub.join(f), "").unwrap();
        }
        std::fs::write(root.join("dev/udmabuf0"), vec![0u8; 1 << 20]).unwrap();
    }

    /// The line keeps its armed state: an enable of a line armed already
    /// makes no system call, a wait that reads an interrupt leaves it to be
    /// re-armed once. On the fake board the device file is a plain file
    /// (always readable), so each wait is one `poll()` and one `read()`.
    #[test]
    fn an_armed_line_is_not_re_armed() {
        let dir = tempfile::tempdir().unwrap();
        fake_board(dir.path());
        let (_regs, irq) = open_uio(dir.path(), 0).unwrap();
        assert_eq!(irq.syscalls(), 0);
        irq.enable().unwrap();
        assert_eq!(irq.syscalls(), 1, "the first enable is a write()");
        for _ in 0..5 {
            irq.enable().unwrap();
        }
        assert_eq!(irq.syscalls(), 1, "an armed line was re-armed");
        irq.wait(Duration::from_secs(1)).unwrap();
        assert_eq!(irq.syscalls(), 3, "a wait is a poll() and a read()");
        irq.enable().unwrap();
        irq.enable().unwrap();
        assert_eq!(irq.syscalls(), 4, "after an interrupt, one re-arm");
        // The two re-arms reached the file (writes of 1 around the 4 bytes
        // the wait read).
        let bytes = std::fs::read(dir.path().join("dev/uio0")).unwrap();
        assert_eq!(&bytes[..4], &1u32.to_ne_bytes());
        assert_eq!(&bytes[8..12], &1u32.to_ne_bytes());
    }

    #[test]
    fn opens_and_maps_a_fake_board() {
        let dir = tempfile::tempdir().unwrap();
        fake_board(dir.path());
        let (regs, _irq) = open_uio(dir.path(), 0).unwrap();
        assert_eq!(regs.len(), 0x10000);
        // SAFETY: a plain file stands in for the device: nothing is started.
        unsafe { regs.write(0x30, 0x0001_0003) }.unwrap();
        assert_eq!(regs.read(0x30).unwrap(), 0x0001_0003);
        // The mapping is shared: the "device file" sees the write.
        let bytes = std::fs::read(dir.path().join("dev/uio0")).unwrap();
        assert_eq!(&bytes[0x30..0x34], &0x0001_0003u32.to_ne_bytes());
        assert!(matches!(regs.read(0x10000), Err(Error::BadOffset { .. })));

        let buf = open_udmabuf(dir.path(), "udmabuf0").unwrap();
        // The CPU's own cache operations where it allows them; sysfs otherwise.
        let cpu = if dmaflow_cache_available() {
            CacheOps::Cpu
        } else {
            CacheOps::Sysfs
        };
        assert_eq!(buf.cache_ops(), cpu);
        buf.sync_for_device(0, 4096).unwrap();
        let ub = dir.path().join("sys/class/u-dma-buf/udmabuf0");
        let untouched = std::fs::read_to_string(ub.join("sync_for_device")).unwrap();
        assert_eq!(untouched.is_empty(), cpu == CacheOps::Cpu);
        let buf = buf.with_cache_ops(CacheOps::Sysfs);
        assert_eq!(
            (buf.bus_base(), buf.size(), buf.coherent()),
            (0x3f00_0000, 1 << 20, false)
        );
        let calls = buf.sysfs_calls();
        buf.sync_for_device(4096, 8192).unwrap();
        // One write, in u-dma-buf's command form: offset 4096, 8192 bytes,
        // direction 1 (to the device); the separate range files untouched.
        assert_eq!(buf.sysfs_calls(), calls + 1);
        assert_eq!(
            std::fs::read_to_string(ub.join("sync_for_device")).unwrap(),
            "0x0000100000002005"
        );
        for f in ["sync_offset", "sync_size", "sync_direction"] {
            assert_eq!(std::fs::read_to_string(ub.join(f)).unwrap(), "", "{f}");
        }
        // An unaligned range widens to 16 bytes at both ends; from the device.
        buf.sync_for_cpu(100, 30).unwrap();
        assert_eq!(buf.sysfs_calls(), calls + 2);
        assert_eq!(
            std::fs::read_to_string(ub.join("sync_for_cpu")).unwrap(),
            "0x0000006000000039"
        );
        assert!(matches!(
            buf.sync_for_cpu(1 << 20, 1),
            Err(Error::BadRange { .. })
        ));

        let inv = inventory(dir.path());
        assert_eq!(
            inv.uio,
            vec![UioDevice {
                index: 0,
                name: "axi_dma".to_string(),
                addr: 0x4040_0000,
                size: 0x10000
            }]
        );
        assert_eq!(inv.uio_named("axi_dma").unwrap().index, 0);
        let e = inv.uio_named("axi_dma_1").unwrap_err().to_string();
        assert!(e.contains("\"axi_dma_1\"") && e.contains("axi_dma"), "{e}");
        assert_eq!(
            inv.udmabuf,
            vec![("udmabuf0".to_string(), 0x3f00_0000, 1 << 20)]
        );
    }

    #[test]
    fn missing_and_malformed_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_uio(dir.path(), 3).err().unwrap().to_string();
        assert!(e.contains("uio3/maps/map0/size"), "{e}");
        fake_board(dir.path());
        std::fs::write(
            dir.path().join("sys/class/uio/uio0/maps/map0/size"),
            "lots\n",
        )
        .unwrap();
        let e = open_uio(dir.path(), 0).err().unwrap().to_string();
        assert!(e.contains("map0/size") && e.contains("not a number"), "{e}");
        std::fs::remove_file(dir.path().join("dev/udmabuf0")).unwrap();
        let e = open_udmabuf(dir.path(), "udmabuf0")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("dev/udmabuf0"), "{e}");
        std::fs::write(
            dir.path().join("sys/class/u-dma-buf/udmabuf0/phys_addr"),
            "0xZZ",
        )
        .unwrap();
        let e = open_udmabuf(dir.path(), "udmabuf0")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("phys_addr"), "{e}");
        assert_eq!(inventory(&dir.path().join("nothing")), Inventory::default());
    }

    #[test]
    fn a_buffer_that_would_wrap_the_address_space_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fake_board(dir.path());
        std::fs::write(
            dir.path().join("sys/class/u-dma-buf/udmabuf0/phys_addr"),
            "0xfffffffffffff000\n",
        )
        .unwrap();
        let e = open_udmabuf(dir.path(), "udmabuf0")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("phys_addr") && e.contains("end of the address space"),
            "{e}"
        );
        let inv = inventory(dir.path());
        assert!(inv.udmabuf.is_empty(), "{inv:?}");
        assert!(
            inv.malformed.iter().any(|m| m.contains("phys_addr")),
            "{inv:?}"
        );
    }

    #[test]
    fn a_device_left_out_as_malformed_is_named_when_it_is_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        fake_board(dir.path());
        std::fs::write(
            dir.path().join("sys/class/uio/uio0/maps/map0/size"),
            "lots\n",
        )
        .unwrap();
        let inv = inventory(dir.path());
        let e = inv.uio_named("axi_dma_0").err().unwrap().to_string();
        assert!(e.contains("malformed") && e.contains("map0/size"), "{e}");
    }
}
