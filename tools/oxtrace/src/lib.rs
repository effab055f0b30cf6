//! The oxtrace tool's library: everything but `main`, so that it is unit-tested and shared
//! by the subcommands and the bench and test binaries.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod agg;
pub mod btf;
pub mod cli;
pub mod dsl;
pub mod options;
pub mod output;
pub mod providers;
pub mod pt;
pub mod runtime;
pub mod sym;
