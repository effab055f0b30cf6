// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers for small kernel facts: capabilities, CPUs, clocks.
//!
// TODO: replace with kernel::cred / kernel::cpu when available.

use crate::shim;

/// Whether the current task may trace: `CAP_PERFMON` or `CAP_SYS_ADMIN`.
pub(crate) fn perfmon_capable() -> bool {
    // SAFETY: `perfmon_capable()` only inspects the current task's credentials.
    unsafe { shim::oxt_perfmon_capable() }
}

/// Number of possible CPUs: the length of every per-CPU array.
pub(crate) fn num_possible() -> u32 {
    // SAFETY: reads the constant-after-boot possible mask.
    unsafe { shim::oxt_num_possible_cpus() }
}

/// Whether the boot CPU reports Intel PT.
pub(crate) fn has_intel_pt() -> bool {
    // SAFETY: reads the boot CPU's feature bits, constant after boot.
    unsafe { shim::oxt_cpu_has_intel_pt() }
}

/// `CLOCK_MONOTONIC` in ns.
pub(crate) fn ktime_ns() -> u64 {
    // SAFETY: `ktime_get_ns()` may be called from any context but NMI.
    unsafe { shim::oxt_ktime_get_ns() }
}
