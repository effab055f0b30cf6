// SPDX-License-Identifier: GPL-2.0

//! oxtrace's pure logic: the host crate `oxtrace-core`, and the module's `oxcore`.
//!
//! The kernel module compiles this very file as a module of its crate root
//! (`rust/oxtrace_main.rs`), so the list below is the one list of the pure floor: no kernel
//! dependency, `no_std`, no allocation. Host unit, property and loom tests run these files
//! under `cargo test`; the tool uses them for the ABI, the image format and the limits.

// In the kernel (`CONFIG_RUST`) this file is a module, where `no_std` has no place.
#![cfg_attr(not(any(test, CONFIG_RUST)), no_std)]
// `is_multiple_of` is newer than the kernel's rustc (1.85), which compiles these files too;
// that rustc's clippy does not know the lint that suggests it.
#![allow(unknown_lints)]
#![allow(clippy::manual_is_multiple_of)]
// Every unsafe block says why it is sound, here as in the kernel's clippy.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod action;
pub mod agg;
pub mod buffer;
pub mod diag;
pub mod dynvar;
pub mod limits;
pub mod load;
pub mod probe;
pub mod probesafe;
pub mod program;
pub mod stack;
pub mod topa;
pub mod uprobe;
pub mod ustack;
