//! Running compiled programs: the subcommands, the device client, the attach table and the EPIDs of a loaded
//! program, LOAD's refusals in words, the run loop, the traced child, the dynamic-variable
//! statistics, the `--listen` exporter, and the simulator the tests run programs on.

mod attach;
pub mod child;
pub mod commands;
pub mod device;
pub mod dynstat;
pub mod exporter;
pub mod progress;
mod refusals;
mod run;
pub mod sim;

pub use attach::{attach_table, AttachTable, EnabledIds};
pub use child::{catch_signals, split_words, Held};
pub use refusals::{clause_at, error_line, load_error};
pub use run::{dictionary, Run};

use device::DeviceError;
use std::io;

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutFmt {
    /// Text like dtrace(1M).
    Text,
    /// One JSON object a line; aggregations as one JSON document at the end.
    Json,
    /// Aggregations in the OpenMetrics text format at the end.
    OpenMetrics,
    /// Aggregations keyed by stacks as folded stacks at the end (flame graphs).
    Folded,
    /// Aggregations keyed by stacks as one SVG flame graph at the end.
    FlameGraph,
}

/// What the run watches besides the program.
pub struct Target {
    /// A command started by `-c`, held until the probes are enabled.
    pub child: Option<Held>,
    /// A process given with `-p`: the run ends when it exits.
    pub pid: Option<u32>,
}

/// An error of the run, already worded for the user.
#[derive(Debug)]
pub struct RunError(pub String);

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunError {}

impl From<DeviceError> for RunError {
    fn from(e: DeviceError) -> Self {
        RunError(e.to_string())
    }
}

impl From<io::Error> for RunError {
    fn from(e: io::Error) -> Self {
        RunError(e.to_string())
    }
}

/// The program's source text and its name (`-e` or a file).
#[derive(Clone, Copy)]
pub struct Source<'a> {
    /// The text.
    pub text: &'a str,
    /// Its name in messages.
    pub name: &'a str,
}
