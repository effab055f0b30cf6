// SPDX-License-Identifier: GPL-2.0

//! The dynamic-variable cleaner's kernel side: a periodic kernel thread (process context,
//! never a timer or an interrupt) that probe context may also wake at once, and the
//! cross-call the cleaner waits on.
//!
//! The thread is the shim's `struct oxt_periodic`: a kthread sleeping on an absolute hrtimer
//! schedule, so the cleaner runs at its rate without drift and with sub-jiffy periods.
//!
// TODO: replace with kernel::task::KThread and kernel::workqueue's delayed work when
// available.

use crate::dynvar::CrossCall;
use crate::sys::percpu::ActionCtx;
use crate::sys::shim;
use crate::sys::xcall;
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::ffi::c_void;
use kernel::prelude::*;

/// Work a [`PeriodicThread`] runs.
pub(crate) trait Periodic: Sync {
    /// Called in process context (may sleep), from one thread, every period.
    fn run(&self);
}

/// # Safety
///
/// `info` is the `*const T` given to [`PeriodicThread::new`], still valid.
unsafe extern "C" fn trampoline<T: Periodic>(info: *mut c_void) {
    // SAFETY: `info` is the `*const T` given to `PeriodicThread::new`, valid while the thread
    // runs (that function's contract); `run` only needs a shared reference.
    let data = unsafe { &*(info as *const T) };
    data.run();
}

/// A kernel thread calling [`Periodic::run`] at a fixed period between `start` and `stop`.
///
/// # Invariants
///
/// `raw` was returned by `oxt_periodic_alloc` and is owned by this object; the data it calls
/// stays valid until `drop` has returned (constructor's contract).
pub(crate) struct PeriodicThread {
    raw: NonNull<shim::Periodic>,
}

// SAFETY: the shim object serialises `start` and `stop` with its own mutex and is otherwise
// only read (`runs`); the thread calls `Periodic::run`, which requires `T: Sync`.
unsafe impl Send for PeriodicThread {}
// SAFETY: as above.
unsafe impl Sync for PeriodicThread {}

impl PeriodicThread {
    /// A stopped thread object that will call `data.run()`.
    ///
    /// # Safety
    ///
    /// `data` must stay valid until the returned object has been dropped (dropping it stops
    /// the thread and waits for `run` to return).
    pub(crate) unsafe fn new<T: Periodic>(data: *const T) -> Result<Self> {
        // SAFETY: `trampoline::<T>` matches `data`'s type; validity is the caller's promise.
        let raw = unsafe { shim::oxt_periodic_alloc(trampoline::<T>, data as *mut c_void) };
        // INVARIANT: owned from here on.
        Ok(Self {
            raw: NonNull::new(raw).ok_or(ENOMEM)?,
        })
    }

    /// Starts the thread, named `oxtrace-clean/<id>`, running every `period_ns`; `EBUSY` if
    /// it already runs.
    pub(crate) fn start(&self, period_ns: u64, id: u64) -> Result {
        // SAFETY: `raw` is live (type invariant); the shim serialises with `stop`.
        to_result(unsafe { shim::oxt_periodic_start(self.raw.as_ptr(), period_ns, id) })
    }

    /// Stops the thread and waits until it has exited (a running `run` finishes first).
    /// Does nothing if it does not run.
    pub(crate) fn stop(&self) {
        // SAFETY: `raw` is live (type invariant); the shim serialises with `start`.
        unsafe { shim::oxt_periodic_stop(self.raw.as_ptr()) }
    }

    /// Asks for a run now, besides the period: an irq_work wakes the thread, which runs at
    /// `SCHED_FIFO` priority. Kicks before that run starts are folded into it. Any context,
    /// interrupts off included (probe context).
    pub(crate) fn kick(&self) {
        // SAFETY: `raw` is live (type invariant); the shim's kick only reads and sets a flag
        // and queues the object's irq_work, which `stop` and `drop` wait for.
        unsafe { shim::oxt_periodic_kick(self.raw.as_ptr()) }
    }

    /// Times `run` was called.
    pub(crate) fn runs(&self) -> u64 {
        // SAFETY: `raw` is live (type invariant); a plain read of a counter.
        unsafe { shim::oxt_periodic_runs(self.raw.as_ptr()) }
    }
}

impl Drop for PeriodicThread {
    fn drop(&mut self) {
        // SAFETY: `raw` is owned (type invariant) and never used again; the shim stops the
        // thread synchronously before freeing it.
        unsafe { shim::oxt_periodic_free(self.raw.as_ptr()) }
    }
}

/// The cleaner's cross-call: an empty function run on every online CPU inside the action
/// guard with interrupts off, waited for. Actions run with interrupts off, so a CPU answers
/// only between actions: when it returns, no CPU is inside an action that started before.
pub(crate) struct AllCpus;

impl CrossCall for AllCpus {
    fn sync_all_cpus(&self) {
        xcall::on_each_cpu(&|_: &mut ActionCtx| {});
    }
}

/// Waits until every probe handler that may have started before the call has returned (they
/// run with preemption or interrupts off, so an RCU grace period covers them).
pub(crate) fn wait_for_handlers() {
    // SAFETY: `synchronize_rcu()` may sleep; this is only called from process context
    // (ioctls and release).
    unsafe { shim::oxt_synchronize_rcu() }
}
