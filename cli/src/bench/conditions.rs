//! What each experiment's numbers are, in four lines: what is timed, what
//! the comparison point is, which figures are the model's (a number the
//! emulator's configuration guarantees is never a target), and where the
//! conditions differ from the paper the experiment follows, and why. Each
//! experiment states its own (`Experiment::conditions`); the report
//! prints them under its heading.

/// The four lines of one experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conditions {
    /// What is timed, from where to where.
    pub timed: &'static str,
    /// What it is compared with.
    pub against: &'static str,
    /// Which figures are the model's, not dmaflow's.
    pub model: &'static str,
    /// Where this run's conditions differ from the paper's, and why.
    pub paper: &'static str,
}

impl Conditions {
    /// The lines as text, one per line, each with its label.
    pub fn lines(&self) -> String {
        format!(
            "timed: {}\ncompared with: {}\nthe model's: {}\nagainst the paper: {}\n",
            self.timed, self.against, self.model, self.paper
        )
    }
}

/// The conditions every DMA experiment shares.
pub const USER_X86: &str = "a user-space driver on an x86-64 VM with two cores (the papers ran \
    bare metal or a Linux kernel driver on a Zynq-7000's Cortex-A9), and a coherent emulated \
    board unless --memory noncoherent";
