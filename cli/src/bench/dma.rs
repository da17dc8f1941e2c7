//! What the DMA experiments share: an emulated board with its device thread
//! on a core of its own, and the kernel-style proxy driver taking engines over.

use dmaflow::dma::{Engine, Proxy};
use dmaflow::platform::{IrqLine, MemoryModel, RegisterSpace};
use dmaflow::rig::{Placement, Rig, policy_for};
use dmaflow::sim::{Clock, StreamProcessor};

use super::error::Error;

/// An emulated board in direct register mode around `processor`, with room
/// for `bytes` of buffers (and a MiB more, rounded up to a power of two), its
/// fabric clocked at `clock`, its memory `model` with the cache policy that
/// needs; the emulated device runs on a core of its own while the placement
/// lives.
pub fn rig(
    bytes: usize,
    clock: Clock,
    model: MemoryModel,
    processor: Box<dyn StreamProcessor>,
) -> Result<(Rig, Placement), Error> {
    let ddr = (bytes + (1 << 20)).next_power_of_two();
    let rig = Rig::with_model(ddr, clock, false, policy_for(model), model, processor)?;
    let placed = rig.dedicate_core()?;
    Ok((rig, placed))
}

/// The kernel-style driver thread, taking `engines` over (one per stream).
pub fn proxy<R, I>(engines: Vec<Engine<R, I>>) -> Result<Proxy, Error>
where
    R: RegisterSpace + Send + 'static,
    I: IrqLine + Send + 'static,
{
    Proxy::start_all(engines).map_err(|source| Error::Io {
        path: "proxy driver thread".into(),
        source,
    })
}
