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
pub(crate) mod uprobe;
pub(crate) mod xcall;

use kernel::alloc::Flags;

// `gfp_load` builds a `Flags` from the shim's mask: `Flags` is a newtype over the `u32` gfp
// mask (6.12's `pub struct Flags(u32)`) with no constructor for the bits it lacks.
const _: () = assert!(core::mem::size_of::<Flags>() == core::mem::size_of::<u32>());

/// Flags of every allocation a user's request makes (LOAD, GO, PT_CONFIG and the other
/// ioctls): the shim's `OXT_GFP_LOAD`, charged to the caller's memory cgroup
/// (`__GFP_ACCOUNT`), failing with `ENOMEM` instead of calling the OOM killer
/// (`__GFP_RETRY_MAYFAIL`) and without a warning in the log (`__GFP_NOWARN`).
// TODO: build it from kernel::alloc::flags once they have __GFP_RETRY_MAYFAIL.
pub(crate) fn gfp_load() -> Flags {
    // SAFETY: a plain function returning a constant.
    let raw = unsafe { shim::oxt_gfp_load() };
    // SAFETY: `Flags` has one field, a `u32`, and the size of a `u32` (asserted above), so
    // that field spans all of it at offset 0 and every `u32` is a valid `Flags`.
    unsafe { core::mem::transmute::<u32, Flags>(raw) }
}
