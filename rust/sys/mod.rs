// SPDX-License-Identifier: GPL-2.0

//! Thin safe wrappers over the C shim (`shim/`): the only callers of `shim::`.
//!
//! Each file wraps one kernel concept and states its safety contract once, so the floors
//! above hold no `unsafe` block of their own except in small owned types with documented
//! invariants.

pub(crate) mod clean;
pub(crate) mod cpu;
pub(crate) mod kprobe;
pub(crate) mod miscdev;
pub(crate) mod msr;
pub(crate) mod pages;
pub(crate) mod percpu;
pub(crate) mod shim;
pub(crate) mod switchbuf;
pub(crate) mod task;
pub(crate) mod xcall;
