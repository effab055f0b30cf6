// SPDX-License-Identifier: GPL-2.0

//! Fault-safe model-specific register access, CPUID and the TSC, for the Intel PT backend.
//!
//! MSR accesses go through `rdmsrl_safe`/`wrmsrl_safe`: an MSR the CPU lacks (every RTIT MSR
//! on a CPU without PT) is an `EIO` error, never a #GP oops.
//!
// TODO: replace with kernel::arch::x86::msr when available.

use crate::sys::shim;
use kernel::error::to_result;
use kernel::prelude::*;

/// Reads `msr` on this CPU; `EIO` if the access faulted.
pub(crate) fn read_safe(msr: u32) -> Result<u64> {
    let mut v = 0u64;
    // SAFETY: `rdmsrl_safe` catches the #GP of a missing MSR; `v` is a valid out-pointer.
    to_result(unsafe { shim::oxt_rdmsr_safe(msr, &mut v) })?;
    Ok(v)
}

/// Writes `val` to `msr` on this CPU; `EIO` if the access faulted.
///
/// Only the RTIT MSRs of the PT backend are written, and only while tracing on this CPU is
/// the module's (TraceEn was clear before it started).
pub(crate) fn write_safe(msr: u32, val: u64) -> Result {
    // SAFETY: `wrmsrl_safe` catches the #GP of a missing MSR or a refused value; the caller
    // only writes the trace-output MSRs, which affect no memory but the buffers it owns.
    to_result(unsafe { shim::oxt_wrmsr_safe(msr, val) })
}

/// `CPUID(leaf, subleaf)` on this CPU: `[eax, ebx, ecx, edx]`.
pub(crate) fn cpuid(leaf: u32, subleaf: u32) -> [u32; 4] {
    let mut r = [0u32; 4];
    // SAFETY: CPUID has no side effects; `r` has room for the four registers.
    unsafe { shim::oxt_cpuid_count(leaf, subleaf, r.as_mut_ptr()) };
    r
}

/// The time-stamp counter of this CPU.
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no side effects and is allowed at CPL 0.
    unsafe { shim::oxt_rdtsc() }
}

/// MAXPHYADDR of the boot CPU.
pub(crate) fn phys_bits() -> u32 {
    // SAFETY: reads `boot_cpu_data`, constant after boot.
    unsafe { shim::oxt_phys_bits() }
}
