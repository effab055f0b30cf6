//! The oxtrace tool's library: everything but argument handling, so that it is unit-tested
//! and shared by the subcommands.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod agg;
pub mod btf;
pub mod dsl;
pub mod options;
pub mod output;
pub mod providers;
pub mod pt;
pub mod runtime;
pub mod sym;
