// SPDX-License-Identifier: GPL-2.0

//! Safe wrappers for small kernel facts: capabilities, CPUs, clocks.
//!
// TODO: replace with kernel::cred / kernel::cpu when available.

use crate::sys::shim;

/// Whether the current task may trace: `CAP_PERFMON` or `CAP_SYS_ADMIN`.
pub(crate) fn perfmon_capable() -> bool {
    // SAFETY: `perfmon_capable()` only inspects the current task's credentials.
    unsafe { shim::oxt_perfmon_capable() }
}

/// Bytes all consumers' LOADs may hold together (module parameter `mem_budget_pct`).
pub(crate) fn mem_budget() -> u64 {
    // SAFETY: reads a module parameter and `totalram_pages()`.
    unsafe { shim::oxt_mem_budget() }
}

/// Bytes one consumer's LOAD may hold (module parameter `consumer_mem_pct`).
pub(crate) fn consumer_mem_cap() -> u64 {
    // SAFETY: reads a module parameter and `totalram_pages()`.
    unsafe { shim::oxt_consumer_mem_cap() }
}

/// Most consumers open at once (module parameter `max_consumers`).
pub(crate) fn max_consumers() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { shim::oxt_max_consumers() }
}

/// Highest possible CPU id + 1: the length of every per-CPU array.
pub(crate) fn nr_cpu_ids() -> u32 {
    // SAFETY: reads a constant-after-boot variable.
    unsafe { shim::oxt_nr_cpu_ids() }
}

/// Whether `cpu` is online now.
pub(crate) fn online(cpu: u32) -> bool {
    // SAFETY: reads the online mask; any CPU id is accepted.
    unsafe { shim::oxt_cpu_online(cpu) }
}

/// The CPU the caller runs on; stable only with preemption or interrupts off.
pub(crate) fn this_cpu() -> u32 {
    // SAFETY: `raw_smp_processor_id()` may be called from any context.
    unsafe { shim::oxt_this_cpu() }
}

/// Whether the boot CPU reports Intel PT.
pub(crate) fn has_intel_pt() -> bool {
    // SAFETY: reads the boot CPU's feature bits, constant after boot.
    unsafe { shim::oxt_cpu_has_intel_pt() }
}

/// `CLOCK_MONOTONIC` in ns, safe from any context including NMI.
pub(crate) fn mono_fast_ns() -> u64 {
    // SAFETY: `ktime_get_mono_fast_ns()` is NMI-safe.
    unsafe { shim::oxt_mono_fast_ns() }
}

/// `CLOCK_REALTIME` in ns, safe from any context including NMI.
pub(crate) fn real_fast_ns() -> u64 {
    // SAFETY: `ktime_get_real_fast_ns()` is NMI-safe.
    unsafe { shim::oxt_real_fast_ns() }
}

/// `CLOCK_MONOTONIC` in ns.
pub(crate) fn ktime_ns() -> u64 {
    // SAFETY: `ktime_get_ns()` may be called from any context but NMI.
    unsafe { shim::oxt_ktime_get_ns() }
}
