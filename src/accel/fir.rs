//! The driver of the FIR filter coprocessor: its AXI-Lite register map and the
//! loading of its taps. The samples themselves go through an AXI DMA engine
//! (see [`super::stage`]).
//!
//! The core filters each packet of little-endian f32 samples on its own (no
//! state between packets): `n` samples in give the `n - T + 1` outputs of the
//! "valid" convolution `y[i] = sum_k taps[k] * x[i + T - 1 - k]`, so windows of
//! a stream that overlap by `T - 1` samples give the stream filtered.

use crate::platform::RegisterSpace;

/// What the ID register reads: "FIR1".
pub const FIR_ID: u32 = u32::from_be_bytes(*b"FIR1");
/// Offset of the read-only ID register.
pub const FIR_REG_ID: usize = 0x00;
/// Offset of NTAPS: the taps in use, 1 to [`MAX_TAPS`] (other values are not
/// taken: the register keeps its value).
pub const FIR_REG_NTAPS: usize = 0x04;
/// Offset of tap 0, the bits of an f32; tap k is at `FIR_REG_TAPS + 4 k`.
pub const FIR_REG_TAPS: usize = 0x100;
/// The most taps the core holds.
pub const MAX_TAPS: usize = 512;

/// Why the core could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The register window does not hold a FIR core.
    #[error("no FIR core at this register window: ID reads {0:#010x}, expected {FIR_ID:#010x}")]
    NotFir(u32),
    /// No taps, or more than the core holds.
    #[error("{taps} taps: the FIR core takes 1 to {MAX_TAPS}")]
    Taps {
        /// Taps given.
        taps: usize,
    },
    /// A tap is NaN or infinite.
    #[error("tap {0} is not a finite number")]
    NonFiniteTap(usize),
    /// The core did not take the tap count (it reads back something else).
    #[error("the FIR core reads back {got} taps after {wanted} were loaded")]
    NotTaken {
        /// Taps written.
        wanted: usize,
        /// What NTAPS reads.
        got: u32,
    },
    /// A register access failed.
    #[error(transparent)]
    Platform(#[from] crate::platform::Error),
}

/// Checks that `regs` is a FIR core and loads `taps` into it (taps first, then
/// the count, which the core reads back).
pub fn load_taps<R: RegisterSpace>(regs: &R, taps: &[f32]) -> Result<(), Error> {
    let id = regs.read(FIR_REG_ID)?;
    if id != FIR_ID {
        return Err(Error::NotFir(id));
    }
    if taps.is_empty() || taps.len() > MAX_TAPS {
        return Err(Error::Taps { taps: taps.len() });
    }
    if let Some(k) = taps.iter().position(|t| !t.is_finite()) {
        return Err(Error::NonFiniteTap(k));
    }
    for (k, t) in taps.iter().enumerate() {
        // SAFETY: the window identified itself as the FIR core's (its ID
        // register, checked above), whose registers hold taps and their count
        // only: no write to it starts a transfer or names an address.
        unsafe { regs.write(FIR_REG_TAPS + 4 * k, t.to_bits()) }?;
    }
    // SAFETY: as above.
    unsafe { regs.write(FIR_REG_NTAPS, taps.len() as u32) }?;
    let got = regs.read(FIR_REG_NTAPS)?;
    if got as usize != taps.len() {
        return Err(Error::NotTaken {
            wanted: taps.len(),
            got,
        });
    }
    Ok(())
}
