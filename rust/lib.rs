// SPDX-License-Identifier: GPL-2.0

//! oxtrace's pure logic as a host crate.
//!
//! The files listed here are the very files the kernel module compiles (see
//! `oxtrace_main.rs` in this directory): no kernel dependency, `no_std`, no allocation. Host
//! unit, property and loom tests run them under `cargo test`; the tool uses them for the ABI.

#![cfg_attr(not(test), no_std)]
// `is_multiple_of` is newer than the kernel's rustc (1.85), which compiles these files too.
#![allow(clippy::manual_is_multiple_of)]

pub mod abi;
pub mod action;
pub mod agg;
pub mod buffer;
pub mod diag;
pub mod dynvar;
pub mod program;
pub mod topa;
