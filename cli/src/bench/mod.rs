//! The experiments behind `dmaflow bench`: each measures dmaflow and its comparison
//! point in the same run and reports medians.

pub mod app;
pub mod baseline;
pub mod beside;
pub mod columns;
pub mod conditions;
pub mod dma;
pub mod error;
pub mod frame;
pub mod harness;
pub mod meter;
pub mod on_board;
pub mod peers;
pub mod phases;
pub mod plot;
pub mod queues;
pub mod report;
pub mod spread;

pub use dmaflow::rig::{Rig, SimEngine, policy_for};
pub use error::Error;
pub use harness::{
    Experiment, Setup, Tier, bytes_label, median, ms_label, on_board, placement_here,
};

// The experiments, one module each (declared here, where `cargo fmt` sees them),
// then listed once in the registry below.
pub mod bgsub;
pub mod cnn;
pub mod contention;
pub mod faults;
pub mod fir;
pub mod gpu;
pub mod loopback;
pub mod memory;
pub mod net;
pub mod pipeline;
pub mod python;
pub mod readers;
pub mod remote;
pub mod ring;
pub mod sched;
pub mod transfer;
pub mod twoway;
pub mod windows;

/// The registry: lists each experiment's [`Experiment`] in [`EXPERIMENTS`], in
/// the order `bench all` runs them and the Targets table lists them. The
/// command line, `bench all`, that order and each experiment's conditions all
/// come from this one list: an experiment is its file (or folder) under
/// `bench/`, whose `EXPERIMENT` states its [`harness::Spec`], declared with
/// `pub mod` above and named once here.
macro_rules! registry {
    ($($module:ident,)*) => {
        /// Every experiment, in the order `bench all` runs them.
        pub static EXPERIMENTS: &[&dyn Experiment] = &[$(&$module::EXPERIMENT),*];
    };
}

registry! {
    ring,
    readers,
    windows,
    fir,
    sched,
    transfer,
    twoway,
    loopback,
    bgsub,
    cnn,
    contention,
    memory,
    pipeline,
    faults,
    net,
    remote,
    python,
    gpu,
}

/// The experiment named `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    EXPERIMENTS.iter().copied().find(|e| e.name() == name)
}

/// Every experiment's JSON keys as `bench --help` lists them: the name, then
/// its lines indented under the first.
pub fn keys_help() -> String {
    EXPERIMENTS
        .iter()
        .map(|e| {
            let name = format!("{}:", e.name());
            let body = e.keys().replace('\n', &format!("\n{:12}", ""));
            format!(
                "  {name:<10}{}{body}\n",
                if name.len() < 10 { "" } else { " " }
            )
        })
        .collect()
}

/// The experiments' names in the registry's order.
pub fn names() -> Vec<&'static str> {
    EXPERIMENTS.iter().map(|e| e.name()).collect()
}

#[cfg(test)]
mod on_boards {
    use super::*;
    use dmaflow::platform::MemoryModel;

    /// The DMA experiments on the non-coherent board, with explicit cache
    /// maintenance: every transfer's data is checked by the run (a missing cache
    /// operation fails it with stale data), and no row says otherwise.
    #[test]
    fn dma_experiments_run_on_the_non_coherent_board_with_their_data_checked() {
        macro_rules! on_noncoherent {
            ($m:ident) => {{
                let setup = Setup {
                    memory: MemoryModel::NonCoherent,
                    ..Setup::TINY
                };
                let json = $m::EXPERIMENT.run(&setup, &mut |_| {}).unwrap().json;
                let rows = json["rows"].as_array().cloned().unwrap_or_default();
                assert!(!rows.is_empty(), stringify!($m));
                for r in rows {
                    assert_ne!(
                        r.get("verified"),
                        Some(&serde_json::Value::Bool(false)),
                        "{r}"
                    );
                }
            }};
        }
        on_noncoherent!(loopback);
        on_noncoherent!(twoway);
        on_noncoherent!(bgsub);
        on_noncoherent!(cnn);
    }
}

#[cfg(test)]
mod registry {
    use super::*;

    #[test]
    fn every_experiment_says_what_its_numbers_are() {
        for e in EXPERIMENTS {
            assert!(
                keys_help().contains(&format!("  {}: ", e.name())),
                "{}",
                e.name()
            );
            assert!(!e.keys().is_empty(), "{}", e.name());
            assert!(!e.question().is_empty(), "{}", e.name());
            let c = e.conditions();
            for part in [c.timed, c.against, c.model, c.paper] {
                assert!(!part.is_empty(), "{}", e.name());
            }
            let text = c.lines();
            assert_eq!(text.lines().count(), 4, "{}", e.name());
            assert!(
                text.contains("timed: ") && text.contains("the model's: "),
                "{}",
                e.name()
            );
        }
    }

    #[test]
    fn names_are_unique_and_found() {
        let mut n = names();
        for name in &n {
            assert_eq!(find(name).map(|e| e.name()), Some(*name));
        }
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), EXPERIMENTS.len());
        assert!(find("nothing").is_none());
        assert_eq!(find("ring").and_then(|e| e.then()), Some("readers"));
    }
}
