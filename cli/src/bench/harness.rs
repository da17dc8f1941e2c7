//! The frame every experiment runs in: the sizes it comes in ([`Tier`]), the
//! board it runs on ([`Setup`]), what it says of itself ([`Experiment`]: its
//! name, question and conditions, its run to a [`Report`]), its errors, and
//! the helpers its tables share. `bench/mod.rs` holds the registry.

use std::borrow::Borrow;

use dmaflow::platform::MemoryModel;
use dmaflow::sim::{Clock, Profile};

use super::conditions::Conditions;
pub use super::error::Error;
use super::on_board::{BoardRig, Mode};
use super::report::Report;
use super::spread;

/// Where the DMA experiments put their threads on this machine, for a report's
/// header (see [`dmaflow::rig::Rig::dedicate_core`]).
pub fn placement_here() -> String {
    match dmaflow::platform::cpu::allowed_cores(None) {
        Ok(cores) => match cores.split_last() {
            Some((d, host)) if !host.is_empty() => format!(
                "DMA experiments run the emulated device thread on core {d} and the driver and \
                 application threads on core(s) {}",
                host.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            _ => "one core: the emulated device thread takes turns with the driver".into(),
        },
        Err(e) => format!("cores unknown ({e})"),
    }
}

/// Says in a report's heading which board memory it ran on, when not coherent.
pub fn on_board(heading: String, model: MemoryModel) -> String {
    match model {
        MemoryModel::Coherent => heading,
        MemoryModel::NonCoherent => {
            format!("{heading} [non-coherent board, explicit cache maintenance]")
        }
    }
}

/// Median of a non-empty set of samples (mean of the middle two for even counts);
/// `NaN` for an empty set.
pub fn median(samples: &[f64]) -> f64 {
    spread::Spread::of(samples).median
}

/// A duration in whole milliseconds: `150 ms`.
pub fn ms_label(d: std::time::Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// A link's rate as the tables name it: `1200MB/s`, or `unlimited`.
pub fn clock_label(clock: Clock) -> String {
    match clock.bytes_per_s() {
        Some(b) => format!("{:.0}MB/s", b / 1e6),
        None => "unlimited".into(),
    }
}

/// Human-readable byte count: `64 B`, `4 KiB`, `6 MiB`.
pub fn bytes_label(b: usize) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{} KiB", b >> 10)
    } else if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / f64::from(1 << 20))
    } else {
        format!("{b} B")
    }
}

/// Which of an experiment's sizes runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// The recorded run.
    Full,
    /// Shorter runs with fewer rounds (`--quick`).
    Quick,
    /// The smallest run, for tests (`--tiny`): every table, key and file.
    Tiny,
}

impl Tier {
    /// What this size takes of the three: the full run's, the quick one's,
    /// the tiny one's.
    pub fn pick<T>(self, full: T, quick: T, tiny: T) -> T {
        match self {
            Tier::Full => full,
            Tier::Quick => quick,
            Tier::Tiny => tiny,
        }
    }
}

/// Which of an experiment's tables run: all of them, or those it names
/// (the experiment states the names and what each table is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tables(Option<&'static [&'static str]>);

impl Tables {
    /// Every table.
    pub const ALL: Tables = Tables(None);

    /// Only the tables named.
    pub const fn only(names: &'static [&'static str]) -> Tables {
        Tables(Some(names))
    }

    /// Whether the table named `name` runs.
    pub fn has(self, name: &str) -> bool {
        self.0.is_none_or(|names| names.contains(&name))
    }
}

/// What `bench NAME --device cuda:N` runs for an experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnGpu {
    /// The experiment itself, on the GPU.
    Itself,
    /// The tables that answer this one's question of the experiment that
    /// runs itself on the GPU.
    Gpu(Tables),
}

/// The board and device every experiment of a run shares, and the size.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Which size.
    pub tier: Tier,
    /// The emulated board's memory (`--memory`).
    pub memory: MemoryModel,
    /// The board the fabric stands in for (`--board`).
    pub profile: Profile,
    /// The CUDA device and the tables asked for (`--device cuda:N`).
    pub gpu: Option<(usize, Tables)>,
}

impl Setup {
    /// The tiny size on the default board: a coherent Zynq-7000, no GPU.
    pub const TINY: Setup = Setup {
        tier: Tier::Tiny,
        memory: MemoryModel::Coherent,
        profile: Profile::ZYNQ7000,
        gpu: None,
    };
}

/// One experiment of `dmaflow bench`: one file under `bench/` (stating its
/// [`Spec`]) and one line of the registry in `bench/mod.rs`.
pub trait Experiment: Sync {
    /// The name on the command line and of its report files.
    fn name(&self) -> &'static str;
    /// What it asks, one line (the command line's help).
    fn question(&self) -> &'static str;
    /// What its numbers are (printed under its heading and in `index.html`).
    fn conditions(&self) -> Conditions;
    /// The keys of its JSON rows, with what they hold (`bench --help`).
    fn keys(&self) -> String;
    /// Runs it at `setup`'s size on `setup`'s board; `progress` hears what
    /// is being measured.
    fn run(&self, setup: &Setup, progress: &mut dyn FnMut(&str)) -> Result<Report, Error>;
    /// Another experiment `bench NAME` runs after it.
    fn then(&self) -> Option<&'static str>;
    /// Its form with `--device cuda:N`, if it has one.
    fn on_gpu(&self) -> Option<OnGpu>;
    /// How its engine is built if it runs on a real board (`--board`), or
    /// why it needs the emulated fabric.
    fn board_mode(&self) -> Result<Mode, &'static str>;
    /// Runs it at `setup`'s size on a real board's engine (`--board`); an
    /// experiment that needs the emulator says so as [`Error::EmulatorOnly`].
    fn run_on_board(
        &self,
        setup: &Setup,
        rig: BoardRig,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Report, Error>;
}

/// An experiment's form with `--board ROOT`.
pub enum OnBoard<C: 'static, M: ToOwned + ?Sized + 'static> {
    /// It runs on a real board's AXI DMA, its MM2S stream looped back to its
    /// S2MM, built in this mode, with the same measurement code as on the
    /// emulated fabric (and the same report of what it measured).
    Runs(Mode, fn(&C, BoardRig, Progress) -> Result<M::Owned, Error>),
    /// It needs the emulated fabric, for this reason.
    EmulatorOnly(&'static str),
}

/// Where an experiment's run says what it is measuring.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// An experiment as its file states it: what it says of itself, its sizes
/// on the run's board (`C`), its run to what it measured (`M`, owned) and the
/// report of that. The harness makes it an [`Experiment`].
pub struct Spec<C: 'static, M: ToOwned + ?Sized + 'static> {
    /// The name on the command line and of its report files.
    pub name: &'static str,
    /// Measures.
    pub run: fn(&C, Progress) -> Result<M::Owned, Error>,
    /// The report of what was measured.
    pub report: fn(&C, &M) -> Report,
    /// Another experiment `bench NAME` runs after it.
    pub then: Option<&'static str>,
    /// Its form with `--device cuda:N`.
    pub on_gpu: Option<OnGpu>,
    /// Its form with `--board ROOT`.
    pub board: OnBoard<C, M>,
    /// What it asks, one line.
    pub question: &'static str,
    /// The keys of its JSON rows, with what they hold, as `bench --help`
    /// lists them (lines of at most 68 characters).
    pub keys: &'static str,
    /// Its configuration at the setup's tier, with the setup's board.
    pub config: fn(&Setup) -> C,
    /// What its numbers are.
    pub conditions: Conditions,
}

impl<C, M: ToOwned + ?Sized> Spec<C, M> {
    /// The part of a [`Spec`] every experiment shares: its configuration at
    /// the setup's size, its run and its report, nothing run after it, no
    /// form with `--device`. An experiment's literal states the rest (name,
    /// question, keys, conditions, board) and takes these with
    /// `..Spec::new(..)`; the empty texts here are always replaced.
    pub const fn new(
        config: fn(&Setup) -> C,
        run: fn(&C, Progress) -> Result<M::Owned, Error>,
        report: fn(&C, &M) -> Report,
    ) -> Self {
        Spec {
            name: "",
            run,
            report,
            then: None,
            on_gpu: None,
            board: OnBoard::EmulatorOnly(""),
            question: "",
            keys: "",
            config,
            conditions: Conditions {
                timed: "",
                against: "",
                model: "",
                paper: "",
            },
        }
    }
}

/// Trait methods that give a field of the same name.
macro_rules! fields {
    ($($field:ident: $t:ty),*) => {
        $(fn $field(&self) -> $t {
            self.$field
        })*
    };
}

impl<C, M: ToOwned + ?Sized> Experiment for Spec<C, M> {
    fields!(name: &'static str, question: &'static str, conditions: Conditions,
        then: Option<&'static str>, on_gpu: Option<OnGpu>);

    fn keys(&self) -> String {
        self.keys.into()
    }

    fn run(&self, setup: &Setup, progress: &mut dyn FnMut(&str)) -> Result<Report, Error> {
        let config = (self.config)(setup);
        Ok((self.report)(
            &config,
            (self.run)(&config, progress)?.borrow(),
        ))
    }

    fn board_mode(&self) -> Result<Mode, &'static str> {
        match self.board {
            OnBoard::Runs(mode, _) => Ok(mode),
            OnBoard::EmulatorOnly(why) => Err(why),
        }
    }

    fn run_on_board(
        &self,
        setup: &Setup,
        rig: BoardRig,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Report, Error> {
        match self.board {
            OnBoard::Runs(_, run) => {
                let config = (self.config)(setup);
                Ok((self.report)(
                    &config,
                    run(&config, rig, progress)?.borrow(),
                ))
            }
            OnBoard::EmulatorOnly(why) => Err(Error::EmulatorOnly(self.name, why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn tables_all_or_named() {
        assert!(Tables::ALL.has("any"));
        let some = Tables::only(&["a", "b"]);
        assert!(some.has("b") && !some.has("c"));
    }

    #[test]
    fn byte_labels() {
        assert_eq!(bytes_label(64), "64 B");
        assert_eq!(bytes_label(4096), "4 KiB");
        assert_eq!(bytes_label(6 << 20), "6 MiB");
        assert_eq!(bytes_label(1000), "1000 B");
        assert_eq!(
            clock_label(dmaflow::sim::Profile::ZYNQ7000.port),
            "1200MB/s"
        );
        assert_eq!(clock_label(Clock::Unlimited), "unlimited");
    }
}
