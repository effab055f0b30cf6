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
pub(crate) mod provider;
pub(crate) mod shim;
pub(crate) mod switchbuf;
pub(crate) mod task;
pub(crate) mod xcall;

use kernel::alloc::flags::{__GFP_NOWARN, GFP_KERNEL_ACCOUNT};
use kernel::alloc::Flags;

/// Flags of the large allocations a LOAD makes (buffers, dynamic memory, scratch): charged
/// to the caller's memory cgroup, and failing with `ENOMEM` without a warning in the log.
// TODO: add __GFP_RETRY_MAYFAIL when kernel::alloc::flags has it (not in 6.12).
pub(crate) fn gfp_big() -> Flags {
    GFP_KERNEL_ACCOUNT | __GFP_NOWARN
}
