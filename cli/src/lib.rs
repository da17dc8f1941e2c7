//! The dmaflow tool's library half: the experiments behind `dmaflow bench`, their
//! reports, and the file tools behind `dmaflow fir` and `dmaflow bgsub`. The
//! `dmaflow` library itself depends on none of this.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod bench;
pub mod board_check;
pub mod files;
pub mod serve;

use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// How a command ends: `ok` given what it made, or `dmaflow TOOL: ERROR` on
/// standard error with the error's exit status (2 for bad input, 1 for a
/// failure while running).
pub fn finish<T>(tool: &str, done: Result<T, (u8, String)>, ok: impl FnOnce(T)) -> ExitCode {
    let Err((code, e)) = done.map(ok) else {
        return ExitCode::SUCCESS;
    };
    eprintln!("dmaflow {tool}: {e}");
    ExitCode::from(code)
}

/// An error as [`finish`] takes it, with exit status `code`:
/// `.map_err(status(2))`.
pub fn status<E: std::fmt::Display>(code: u8) -> impl Fn(E) -> (u8, String) {
    move |e| (code, e.to_string())
}

/// A command-line value from a list of `(name, help, value)`: the names with
/// their help (none where empty) as `--help` lists them, each parsed to its
/// value.
pub fn choice<T: Copy + Send + Sync + 'static>(
    list: &'static [(&'static str, &'static str, T)],
) -> impl TypedValueParser<Value = T> {
    let names = list.iter().map(|&(name, help, _)| match help {
        "" => PossibleValue::new(name),
        help => PossibleValue::new(name).help(help),
    });
    let value = |s: String| list.iter().find(|c| c.0 == s).map_or(list[0].2, |c| c.2);
    PossibleValuesParser::new(names).map(value)
}
