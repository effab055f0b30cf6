// SPDX-License-Identifier: GPL-2.0

//! Facts about the current task and fault-safe kernel reads, for probe context.
//!
// TODO: replace with kernel::task::Task accessors when they cover these.

use crate::sys::shim;
use kernel::ffi::c_void;

/// Process id (thread group id) of the current task.
pub(crate) fn pid() -> u32 {
    // SAFETY: reads `current`, valid in every context we run in.
    unsafe { shim::oxt_current_pid() }
}

/// Thread id of the current task.
pub(crate) fn tid() -> u32 {
    // SAFETY: as above.
    unsafe { shim::oxt_current_tid() }
}

/// Real uid of the current task, in the initial user namespace.
pub(crate) fn uid() -> u32 {
    // SAFETY: `current_uid()` reads current's credentials, which can't go away under it.
    unsafe { shim::oxt_current_uid() }
}

/// Real gid of the current task, in the initial user namespace.
pub(crate) fn gid() -> u32 {
    // SAFETY: as `uid`.
    unsafe { shim::oxt_current_gid() }
}

/// Process id of the current task's parent.
pub(crate) fn ppid() -> u32 {
    // SAFETY: the shim reads `real_parent` under RCU.
    unsafe { shim::oxt_current_ppid() }
}

/// Whether the current process is `pid` or one of its descendants.
pub(crate) fn progenyof(pid: u32) -> bool {
    // SAFETY: the shim walks `real_parent` from `current` under RCU, a bounded number of
    // steps.
    unsafe { shim::oxt_current_progenyof(pid) }
}

/// Signals the current process with `sig` once the probe has returned (an irq_work);
/// false if `sig` is not a signal or this CPU has one in flight.
pub(crate) fn raise(sig: i32) -> bool {
    // SAFETY: the shim takes a reference on `current` and queues a per-CPU irq_work; it
    // neither sleeps nor takes locks here.
    unsafe { shim::oxt_raise(sig) == 0 }
}

/// Prepares every CPU's `raise()` work (module load, before any probe).
pub(crate) fn raise_init() {
    // SAFETY: process context at load; no probe exists yet to queue the works.
    unsafe { shim::oxt_raise_init() }
}

/// Waits until no `raise()` work is pending on any CPU (module unload).
pub(crate) fn raise_sync() {
    // SAFETY: process context; `irq_work_sync` only waits.
    unsafe { shim::oxt_raise_sync() }
}

/// Spins `ns` nanoseconds (`chill()`): the caller bounds `ns`.
pub(crate) fn spin_ns(ns: u64) {
    // SAFETY: `ndelay`/`mdelay` busy-wait; they never sleep.
    unsafe { shim::oxt_ndelay(ns) }
}

/// Nanoseconds the current thread has run (`vtimestamp`), as of the scheduler's last update.
pub(crate) fn vtime() -> u64 {
    // SAFETY: the shim reads a field of `current`, which is valid in any task context.
    unsafe { shim::oxt_current_vtime() }
}

/// The interrupt level of this context (`ipl`): 0 task, 1 softirq, 2 hardirq, 3 NMI.
pub(crate) fn irq_level() -> u32 {
    // SAFETY: the shim reads this CPU's preempt count; any context may.
    unsafe { shim::oxt_irq_level() }
}

/// Address of the current task (`curthread`).
pub(crate) fn current_addr() -> u64 {
    // SAFETY: reads `current`.
    unsafe { shim::oxt_current_task() as u64 }
}

/// Copies the current task's name into `out` (truncated, no NUL); returns its length.
pub(crate) fn comm(out: &mut [u8]) -> usize {
    // The shim writes a NUL-terminated string: leave room for the NUL.
    let mut buf = [0u8; 17];
    // SAFETY: `buf` is valid for `buf.len()` bytes.
    let n = unsafe { shim::oxt_current_comm(buf.as_mut_ptr(), buf.len()) };
    let n = n.min(out.len()).min(buf.len() - 1);
    out[..n].copy_from_slice(&buf[..n]);
    n
}

/// Reads `out.len()` bytes of kernel memory at `addr` without faulting; false if any byte
/// can't be read.
pub(crate) fn read_kernel(addr: u64, out: &mut [u8]) -> bool {
    // SAFETY: `out` is valid for writes of its length; the source is read with
    // `copy_from_kernel_nofault`, which checks the address and never faults.
    unsafe { shim::oxt_read_nofault(out.as_mut_ptr() as *mut c_void, addr as _, out.len()) == 0 }
}

/// Reads `out.len()` bytes of the current task's user memory at `addr` without faulting;
/// false if any byte can't be read (not mapped, not present, or no user memory at all).
pub(crate) fn read_user(addr: u64, out: &mut [u8]) -> bool {
    // SAFETY: `out` is valid for writes of its length; the source is read with
    // `copy_from_user_nofault`, which checks the address and never faults or sleeps.
    unsafe {
        shim::oxt_read_user_nofault(out.as_mut_ptr() as *mut c_void, addr as _, out.len()) == 0
    }
}

/// Writes `data` into the current task's user memory at `addr` without faulting
/// (`copyout()`); false if any byte can't be written, or the task's user memory is not at
/// hand (an interrupt, a kernel thread, an exiting task, another address space loaded).
pub(crate) fn write_user(addr: u64, data: &[u8]) -> bool {
    // SAFETY: `data` is valid for reads of its length; the destination is written with
    // `copy_to_user_nofault`, which checks the address and never faults or sleeps.
    unsafe {
        shim::oxt_write_user_nofault(addr as _, data.as_ptr() as *const c_void, data.len()) == 0
    }
}
