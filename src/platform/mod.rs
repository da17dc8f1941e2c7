//! What a DMA-capable device offers a program, as three traits: a register window
//! ([`RegisterSpace`]), a region of DMA-able memory with bus addresses
//! ([`DmaMemory`]) and an interrupt line ([`IrqLine`]). Two implementations of
//! each: [`uio`] for real boards (UIO and u-dma-buf) and [`sim`] for the emulated
//! fabric. Drivers are written against the traits only, and keep the CPU/device
//! ordering contract written down in [`order`].

pub mod cache;
pub mod cpu;
mod map;
pub mod order;
pub(crate) mod shared_copy;
pub mod sim;
mod sim_cache;
pub mod uio;

pub(crate) use map::{Mapping, replace_with_private, replace_with_private_copy};
pub use order::{dma_rmb, dma_wmb};
pub use sim_cache::MemoryModel;

use std::time::Duration;

/// What went wrong talking to a device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A device or sysfs file could not be opened, read, written or mapped.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A sysfs file holds something that is not what it should.
    #[error("{path}: {reason}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A register offset outside the window or not 32-bit aligned.
    #[error("register offset {offset:#x} is outside the {len:#x}-byte window or unaligned")]
    BadOffset {
        /// Offset asked for.
        offset: usize,
        /// Window length.
        len: usize,
    },
    /// A memory range outside the DMA region.
    #[error("range {offset:#x}+{len:#x} is outside the {size:#x}-byte DMA region")]
    BadRange {
        /// Start of the range.
        offset: usize,
        /// Its length.
        len: usize,
        /// Region size.
        size: usize,
    },
    /// A register access the AXI DMA protocol (PG021) leaves undefined, refused
    /// by the emulated fabric's strict checker.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// No interrupt arrived in time.
    #[error("no interrupt within {0:?}")]
    Timeout(Duration),
    /// A device the board should have is not there.
    #[error("{0}")]
    Missing(String),
    /// A wait on an interrupt line the board does not wire to this program.
    #[error("{0} has no interrupt line here: complete its transfers by polling")]
    NoInterrupt(String),
}

/// A window of 32-bit device registers, accessed with volatile reads and writes.
///
/// Reading is safe; writing is not: a register write can start a transfer
/// (an AXI DMA's LENGTH or TAILDESC) that reads or writes any memory the
/// addresses in other registers name, so only a driver that owns that memory
/// may write. Drivers built on a window ([`crate::axi::AxiDma`]) offer safe
/// operations that keep this promise.
///
/// Writing a register from safe code does not compile:
///
/// ```compile_fail
/// use dmaflow::platform::{sim::SimBoard, RegisterSpace};
/// let board = SimBoard::new(1, 1 << 20, 0x1000_0000, 2).unwrap();
/// let regs = board.registers(0).unwrap();
/// regs.write(0x58, 4096).unwrap(); // S2MM LENGTH: a transfer to wherever ADDR says
/// ```
pub trait RegisterSpace: Send + Sync {
    /// Reads the register at byte `offset`.
    fn read(&self, offset: usize) -> Result<u32, Error>;
    /// Writes the register at byte `offset`.
    ///
    /// # Safety
    ///
    /// The write may start the device: every address the device is pointed at
    /// when it does (an AXI DMA's ADDR, CURDESC and TAILDESC, its descriptors'
    /// buffer addresses) must be DMA memory that the caller owns and that no
    /// other code reads or writes until the transfer is collected or the engine
    /// is confirmed halted.
    unsafe fn write(&self, offset: usize, value: u32) -> Result<(), Error>;
    /// Window length in bytes.
    fn len(&self) -> usize;
    /// Whether the window is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A region of memory both the CPU and the device can reach: a CPU mapping and the
/// bus (physical) address the device uses for the same bytes.
///
/// # Safety
///
/// An implementation promises that, for as long as it lives:
/// - `cpu_base()..cpu_base() + size()` is one mapping, readable and writable,
///   that stays mapped and is used by nothing but the region's owner
///   ([`crate::mem::DmaPool`] hands out disjoint ranges of it);
/// - `bus_base() + k` is the address at which the device reaches byte `k` of it;
/// - [`domain`](DmaMemory::domain) and `bus_base()` name the memory: two regions
///   with the same domain and overlapping bus ranges are the same bytes, and
///   regions of different domains never are;
/// - the maintenance calls do what they say for any range inside the region.
///
/// An implementation without that promise does not compile:
///
/// ```compile_fail
/// struct Bogus;
/// impl dmaflow::platform::DmaMemory for Bogus {
///     fn cpu_base(&self) -> *mut u8 { 0x1000 as *mut u8 }
///     fn size(&self) -> usize { 4096 }
///     fn bus_base(&self) -> u64 { 0 }
///     fn domain(&self) -> u64 { 0 }
///     fn name(&self) -> String { "bogus".into() }
///     fn coherent(&self) -> bool { true }
///     fn sync_for_device(&self, _: usize, _: usize) -> Result<(), dmaflow::platform::Error> { Ok(()) }
///     fn sync_for_cpu(&self, _: usize, _: usize) -> Result<(), dmaflow::platform::Error> { Ok(()) }
/// }
/// ```
pub unsafe trait DmaMemory: Send + Sync {
    /// CPU address of the first byte. Accesses must be arbitrated by the owner of
    /// each range (see [`crate::mem::DmaPool`]).
    fn cpu_base(&self) -> *mut u8;
    /// Size in bytes.
    fn size(&self) -> usize;
    /// Bus address of the first byte.
    fn bus_base(&self) -> u64;
    /// The address space `bus_base` is in: [`PHYSICAL`] for the machine's
    /// own physical memory (u-dma-buf), a number of its own for each emulated
    /// board. With the bus range it names the memory, so that no two pools
    /// carve the same bytes.
    fn domain(&self) -> u64;
    /// A name for the region in errors (a device path, an emulated board).
    fn name(&self) -> String;
    /// Whether device and CPU caches are coherent (no maintenance needed).
    fn coherent(&self) -> bool;
    /// Makes CPU writes to the range visible to the device (clean caches).
    fn sync_for_device(&self, offset: usize, len: usize) -> Result<(), Error>;
    /// Makes device writes to the range visible to the CPU (invalidate caches).
    fn sync_for_cpu(&self, offset: usize, len: usize) -> Result<(), Error>;
    /// The file behind the CPU mapping and the file offset of its first byte,
    /// when there is one (a u-dma-buf device, the emulated board's memory
    /// object): a range of it can then be mapped again, twice and mirrored, for
    /// a queue the device reads and writes ([`crate::mem::DmaPool::queue_memory`]).
    fn file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        None
    }
}

impl<T: RegisterSpace + ?Sized> RegisterSpace for &T {
    fn read(&self, offset: usize) -> Result<u32, Error> {
        (**self).read(offset)
    }
    unsafe fn write(&self, offset: usize, value: u32) -> Result<(), Error> {
        // SAFETY: the caller keeps the promise `T::write` asks for.
        unsafe { (**self).write(offset, value) }
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

impl<T: RegisterSpace + ?Sized> RegisterSpace for Box<T> {
    fn read(&self, offset: usize) -> Result<u32, Error> {
        (**self).read(offset)
    }
    unsafe fn write(&self, offset: usize, value: u32) -> Result<(), Error> {
        // SAFETY: the caller keeps the promise `T::write` asks for.
        unsafe { (**self).write(offset, value) }
    }
    fn len(&self) -> usize {
        (**self).len()
    }
}

/// The [`DmaMemory::domain`] of the machine's own physical memory.
pub const PHYSICAL: u64 = 0;

/// A device interrupt line with UIO semantics: [`wait`](IrqLine::wait) returns the
/// running interrupt count; the line stays masked after each interrupt until
/// [`enable`](IrqLine::enable) re-arms it.
pub trait IrqLine: Send + Sync {
    /// Blocks until the next interrupt or until `timeout` passes.
    fn wait(&self, timeout: Duration) -> Result<u32, Error>;
    /// Re-arms the line. On a line armed already (no interrupt taken since the
    /// last enable) this makes no system call, so a driver may call it before
    /// every sleep.
    fn enable(&self) -> Result<(), Error>;
    /// Whether the line is wired to this program ([`NoIrq`] is not): a
    /// driver completes a channel without one by polling.
    fn wired(&self) -> bool {
        true
    }
}

impl<T: IrqLine + ?Sized> IrqLine for std::sync::Arc<T> {
    fn wait(&self, timeout: Duration) -> Result<u32, Error> {
        (**self).wait(timeout)
    }
    fn enable(&self) -> Result<(), Error> {
        (**self).enable()
    }
    fn wired(&self) -> bool {
        (**self).wired()
    }
}

impl<T: IrqLine + ?Sized> IrqLine for Box<T> {
    fn wait(&self, timeout: Duration) -> Result<u32, Error> {
        (**self).wait(timeout)
    }
    fn enable(&self) -> Result<(), Error> {
        (**self).enable()
    }
    fn wired(&self) -> bool {
        (**self).wired()
    }
}

/// The interrupt line of a channel whose interrupt is not wired to this
/// program (a board that routes it elsewhere): every wait on it is
/// [`Error::NoInterrupt`] naming the line, so such a channel is completed by
/// polling, never by a wait that cannot end.
#[derive(Debug, Clone)]
pub struct NoIrq(pub String);

impl IrqLine for NoIrq {
    fn wait(&self, _timeout: Duration) -> Result<u32, Error> {
        Err(Error::NoInterrupt(self.0.clone()))
    }
    fn enable(&self) -> Result<(), Error> {
        Ok(())
    }
    fn wired(&self) -> bool {
        false
    }
}

/// Waits until `fd` is readable or `timeout` passes (an interrupted wait resumes
/// with what is left of it). `what` names the file in errors.
pub(crate) fn wait_readable(
    fd: impl std::os::fd::AsFd,
    timeout: Duration,
    what: &str,
) -> Result<(), Error> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ts = Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match poll(&mut fds, Some(&ts)) {
            Ok(0) => return Err(Error::Timeout(timeout)),
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                return Err(Error::Io {
                    path: what.to_string(),
                    source: e.into(),
                });
            }
        }
    }
}

/// Checks that `offset..offset + len` lies within a region of `size` bytes.
pub(crate) fn check_range(offset: usize, len: usize, size: usize) -> Result<(), Error> {
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(Error::BadRange { offset, len, size });
    }
    Ok(())
}
