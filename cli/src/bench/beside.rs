//! What the experiments of an application beside the driver (`contention`,
//! `memory`) share: their sizes, measured over a time per point in rounds,
//! and the back-to-back transfers whose data is checked.

use std::time::Duration;

use dmaflow::dma::Completion;
use dmaflow::mem::{CachePolicy, DmaBuf};
use dmaflow::rig::{Placement, Rig, SimEngine};
use dmaflow::sim::{Clock, Loopback, Profile};

use super::app::App;
use super::error::Error;
use super::harness::{Setup, Tier};
use super::meter::{Meter, Tally};
use super::peers::{check, mark};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Transfer sizes in bytes (each way).
    pub sizes: Vec<usize>,
    /// How long each measurement (and each of the application alone) runs
    /// in each round.
    pub duration: Duration,
    /// Rounds.
    pub rounds: usize,
    /// The board whose port clocks the link.
    pub profile: Profile,
}

impl Config {
    /// The size `setup` asks for, on its board: `full` sizes for 150 ms per
    /// point in 5 rounds; the quick run for `quick` in 3 rounds; the tiny run
    /// `tiny` sizes for 20 ms in 2 rounds.
    pub fn at(setup: &Setup, full: Vec<usize>, quick: Duration, tiny: Vec<usize>) -> Self {
        let (sizes, duration, rounds) = match setup.tier {
            Tier::Full => (full, Duration::from_millis(150), 5),
            Tier::Quick => (full, quick, 3),
            Tier::Tiny => (tiny, Duration::from_millis(20), 2),
        };
        Config {
            sizes,
            duration,
            rounds,
            profile: setup.profile,
        }
    }

    /// A loopback board at `clock` for transfers of these sizes, its device
    /// thread on a core of its own, this thread pinned to the first core
    /// left (the driver's): the board, the placement and that core.
    pub fn board(&self, clock: Clock) -> Result<(Rig, Placement, usize), Error> {
        let largest = self.sizes.iter().copied().max().unwrap_or(64);
        let rig = Rig::new(
            (4 * largest + (1 << 20)).next_power_of_two(),
            clock,
            false,
            CachePolicy::Coherent,
            Box::new(Loopback),
        )?;
        let placed = rig.dedicate_core()?;
        let driver = placed.host_cores[0];
        dmaflow::platform::cpu::pin(None, &[driver])?;
        Ok((rig, placed, driver))
    }
}

/// One two-way transfer of `bytes` from `tx` into `rx` on `engine`, waited
/// for by `mode`: its data marked with the transfer's number in `tally`, its
/// cost added to `tally`, what came back checked.
pub fn two_way(
    engine: &SimEngine,
    (tx, rx): (&mut DmaBuf<u8>, &mut DmaBuf<u8>),
    bytes: usize,
    mode: Completion,
    tally: &mut Tally,
    what: &str,
) -> Result<(), Error> {
    let seq = tally.n as u8;
    mark(tx.as_mut_slice(), seq);
    let m = Meter::start(None);
    let n = engine.two_way(tx, bytes, rx, mode)?;
    tally.add(m.stop());
    check(what, &rx.as_slice()[..n], bytes, seq)
}

/// The application's rate alone for `d`, measured first: the driver's
/// thread sleeps while it is.
pub fn alone(app: &App, d: Duration) -> Result<f64, Error> {
    app.rate(d, || {
        std::thread::sleep(Duration::from_millis(5));
        Ok(())
    })
}
