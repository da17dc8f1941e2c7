//! The copy engines' ceiling, measured the way nvbandwidth measures it: a kernel
//! that spins on a host flag holds the stream, `copies` copies are queued behind
//! it, the flag is released, and events around the copies time them back to back,
//! with no host launch gap between them.

use super::context::Gpu;
use super::host::{HostBuf, HostKind};
use super::kernels::Kernels;
use super::{Error, check};
use cudarc::driver::sys;
use std::time::Duration;

/// Which way the copies go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Host to device (the GPU's MM2S).
    H2D,
    /// Device to host (the GPU's S2MM).
    D2H,
}

impl Direction {
    /// `h2d` or `d2h`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::H2D => "h2d",
            Direction::D2H => "d2h",
        }
    }
}

/// Bytes per second of `copies` back-to-back copies of `len` bytes between pinned
/// host memory and the device, in direction `dir`.
pub fn measure(
    gpu: &Gpu,
    kernels: &Kernels,
    dir: Direction,
    len: usize,
    copies: usize,
) -> Result<f64, Error> {
    if len == 0 || copies == 0 {
        return Err(Error::Empty);
    }
    let mut host = HostBuf::new(gpu, HostKind::Pinned, len)?;
    host.as_mut_slice().fill(0x5a);
    let dev = gpu.alloc(len)?;
    let mut flag = HostBuf::new(gpu, HostKind::Mapped, 8)?;
    let flag_dev = flag.device_ptr()?.ok_or(Error::Stopped)?;
    let stream = gpu.stream()?;
    let (start, end) = (gpu.event(false, true)?, gpu.event(false, true)?);
    kernels.hold(&stream, flag_dev, Duration::from_secs(10))?;
    start.record(&stream)?;
    let hp = host.host_ptr().ok_or(Error::Stopped)?;
    for _ in 0..copies {
        // SAFETY: `len` bytes of `host` and of `dev`, both alive until the stream
        // is synchronised below.
        let r = unsafe {
            match dir {
                Direction::H2D => {
                    sys::cuMemcpyHtoDAsync_v2(dev.ptr(), hp.cast(), len, stream.raw())
                }
                Direction::D2H => {
                    sys::cuMemcpyDtoHAsync_v2(hp.cast(), dev.ptr(), len, stream.raw())
                }
            }
        };
        if let Err(e) = check("cuMemcpyAsync", r) {
            release(&mut flag);
            let _ = stream.synchronize();
            return Err(e);
        }
    }
    end.record(&stream)?;
    release(&mut flag);
    stream.synchronize()?;
    if flag.as_slice()[4..8] != [0, 0, 0, 0] {
        return Err(Error::Timeout {
            what: "the copies queued behind the holding kernel (it gave up waiting for its flag)",
            waited: Duration::from_secs(10),
        });
    }
    let ms = end.since(&start)?;
    Ok((len * copies) as f64 / (ms / 1e3))
}

/// Writes the flag that releases the holding kernel.
fn release(flag: &mut HostBuf) {
    set_flag(flag, 0, 1);
}

/// Writes `value` into word `word` (0 or 1) of a holding kernel's flag (word
/// 0: let go; word 1: the kernel gave up), a volatile store, so it reaches
/// the mapped memory the kernel polls now. Takes the buffer shared: the
/// device reads it while the host writes, as a register.
pub(crate) fn set_flag(flag: &HostBuf, word: usize, value: u32) {
    let Some(base) = flag.host_ptr() else {
        return;
    };
    if flag.len() < 8 || word > 1 {
        return;
    }
    // SAFETY: the buffer's own raw address (not derived from a reference),
    // four bytes inside it (checked above), aligned (a page-aligned buffer,
    // offset 0 or 4). The memory is mapped host memory shared with the
    // device, which only reads word 0 and writes word 1; the host writes it
    // only through these volatile stores while a kernel may run.
    unsafe { std::ptr::write_volatile(base.add(word * 4).cast::<u32>(), value) };
}
