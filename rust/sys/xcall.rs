// SPDX-License-Identifier: GPL-2.0

//! Cross-calls: run a closure on every online CPU (or one) with interrupts off, and wait.
//!
//! When a cross-call returns, every CPU it reached has left any action it was running (actions
//! run with interrupts off, so the IPI is taken only between them): this is what makes a
//! cross-call a proof of quiescence for the buffer switch and the dynamic-variable cleaner.
//!
// TODO: replace with kernel::smp when available.

use crate::sys::percpu::ActionCtx;
use crate::sys::shim;
use kernel::error::to_result;
use kernel::ffi::c_void;
use kernel::prelude::*;

/// # Safety
///
/// Called by the shim inside its action guard with interrupts off, once per entry, with the
/// `&F` given to [`on_each_cpu`] or [`on_cpu`], alive until the cross-call returns.
unsafe extern "C" fn trampoline<F: Fn(&mut ActionCtx) + Sync>(info: *mut c_void) {
    // SAFETY: the shim calls this inside its action guard with interrupts off, once per entry.
    let mut ctx = unsafe { ActionCtx::new() };
    // SAFETY: `info` is the `&F` passed below, alive until the cross-call has returned.
    let f = unsafe { &*(info as *const F) };
    f(&mut ctx);
}

/// Runs `f` on every online CPU (this one included) with interrupts off inside the action
/// guard, and waits until every CPU has run it. Process context only (it may wait).
pub(crate) fn on_each_cpu<F: Fn(&mut ActionCtx) + Sync>(f: &F) {
    // SAFETY: `trampoline::<F>` matches `info`'s type; `f` is borrowed for the whole call and
    // the shim waits (`on_each_cpu(.., wait = 1)`) until every CPU has returned from it.
    unsafe { shim::oxt_xcall_all(trampoline::<F>, f as *const F as *mut c_void) }
}

/// Runs `f` on `cpu` and waits; `ENXIO` if the CPU is offline.
pub(crate) fn on_cpu<F: Fn(&mut ActionCtx) + Sync>(cpu: u32, f: &F) -> Result {
    // SAFETY: as in `on_each_cpu`; `smp_call_function_single(.., wait = 1)` waits too.
    to_result(unsafe { shim::oxt_xcall_cpu(cpu, trampoline::<F>, f as *const F as *mut c_void) })
}

/// # Safety
///
/// Called by the shim inside its action guard with interrupts off, once per entry, with the
/// `&mut F` given to [`as_action`], exclusively borrowed for the call.
unsafe extern "C" fn once_trampoline<F: FnMut(&mut ActionCtx)>(info: *mut c_void) {
    // SAFETY: called inside the action guard with interrupts off, once per entry.
    let mut ctx = unsafe { ActionCtx::new() };
    // SAFETY: `info` is the `&mut F` passed by `as_action`, exclusively borrowed for the call.
    let f = unsafe { &mut *(info as *mut F) };
    f(&mut ctx);
}

/// Runs `f` on this CPU as an action runs: interrupts off, inside the guard (BEGIN, END).
pub(crate) fn as_action<F: FnMut(&mut ActionCtx)>(mut f: F) {
    // SAFETY: `once_trampoline::<F>` matches `info`'s type; `f` lives across the call.
    unsafe { shim::oxt_run_as_action(once_trampoline::<F>, &mut f as *mut F as *mut c_void) };
}
