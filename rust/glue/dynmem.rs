// SPDX-License-Identifier: GPL-2.0

//! A session's dynamic variables in the kernel: the dynamic memory (one vmalloc area carved
//! into the regions of [`Layout::regions`]), the [`Dstate`] view over it that probe context
//! uses, and the cleaner thread. The mechanism itself is the pure `dynvar` module;
//! `Documentation/dynvar.rst` ("Kernel wiring") describes this part.

use crate::abi;
use crate::action::{Dict, Key, KeyBuf, Scope};
use crate::dynvar::{
    self, array_key, thread_tuple, Audit, AuditError, Bucket, CpuState, Dstate, Header, IntPair,
    Layout, LayoutError, Word, MAX_KEYS,
};
use crate::program::{Image, OptKey, Options};
use crate::sys::clean::{self, AllCpus, Periodic, PeriodicThread};
use crate::sys::cpu;
use crate::sys::gfp_load;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;

/// Audits of released dynamic memories, module-wide.
static AUDITS: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones that found a chunk lost, duplicated or miscounted.
static AUDIT_FAILURES: AtomicU64 = AtomicU64::new(0);
/// Source of cleaner thread names.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The cleaner period in force for a requested `cleanrate` (ns; 0 means the default): within
/// the option's range, 200 µs (5000 Hz, as illumos clamps it) to one minute, whatever the
/// image says.
pub(crate) fn clamp_cleanrate(ns: u64) -> u64 {
    if ns == 0 {
        return Options::default().cleanrate;
    }
    let (lo, hi) = OptKey::Cleanrate.range();
    ns.clamp(lo, hi)
}

fn layout_errno(e: LayoutError) -> Error {
    match e {
        LayoutError::ChunkTooLarge => E2BIG,
        _ => EINVAL,
    }
}

/// The ABI code of an audit failure (`struct oxt_dynstat.audit_error`).
fn audit_code(e: &AuditError) -> u32 {
    match e {
        AuditError::Bitmap => abi::DYN_AUDIT_BITMAP,
        AuditError::Duplicate(_) => abi::DYN_AUDIT_DUPLICATE,
        AuditError::BadIndex(_) => abi::DYN_AUDIT_BAD_INDEX,
        AuditError::BadHash(_) => abi::DYN_AUDIT_BAD_HASH,
        AuditError::Lost(_) => abi::DYN_AUDIT_LOST,
        AuditError::Counters => abi::DYN_AUDIT_COUNTERS,
    }
}

/// What a CPU's firings keep for the dynamic variables outside the stack: room for a
/// tuple (`DynMem::tuple`), and the chunk where the last lookup found its variable.
pub(crate) struct DynRoom {
    keys: KeyBuf<MAX_KEYS>,
    found: Option<u32>,
}

impl DynRoom {
    pub(crate) const fn new() -> Self {
        Self {
            keys: KeyBuf::new(),
            found: None,
        }
    }
}

/// The dynamic memory and its view.
///
/// # Invariants
///
/// `dstate` borrows the regions of `_mem`, a vmalloc area that is never accessed otherwise,
/// never resized, and dropped last (declared last). Its bytes were zero when the view was
/// made, a valid content for every region.
pub(crate) struct DynMem {
    dstate: Dstate<'static>,
    /// Scope of every variable id (the image's dictionary, resolved once at LOAD).
    scopes: KVec<Scope>,
    cleanrate_ns: u64,
    bytes: u64,
    /// Value bytes of a string-valued variable (`strsize` in whole words).
    str_bytes: usize,
    /// Set at GO by `reset`: the memory holds lists from then on.
    started: AtomicBool,
    /// Result of the audit made at STOP: `u32::MAX` none yet, 0 passed, else the error code.
    audit_error: AtomicU32,
    audit: [AtomicU64; 5],
    _mem: VVec<u8>,
}

/// A variable's whole tuple, as [`DynMem::tuple`] builds it.
enum Tup<'k, 'b> {
    /// `self->x`: held as its words, so the engine's walk for it has no loop over keys
    /// (`dynvar::IntPair`); the running thread's own, so a load may start at the chunk the
    /// room noted (`Dstate::load_own`).
    Own(IntPair),
    /// `a[k]` of an integer `k`, held as `Own` is.
    Pair(IntPair),
    /// Any other, in the room's key buffer.
    Keys(&'k [Key<'b>]),
}

impl DynMem {
    /// The whole tuple of variable `var` as the interpreter names it (`keys` = `[tid]` for
    /// `self->x`, the array keys otherwise): a pair of integers in registers, any other in
    /// `room` ([`DynMem::tuple_keys`]); `None` for a global or a bad key.
    #[inline(always)]
    fn tuple<'k, 'b: 'k>(
        &self,
        var: u32,
        keys: &[Key<'b>],
        room: &'k mut KeyBuf<MAX_KEYS>,
    ) -> Option<Tup<'k, 'b>> {
        match (self.scopes.get(var as usize)?, keys) {
            (Scope::Thread, [Key::Int(tid)]) => Some(Tup::Own(IntPair::thread(*tid, var))),
            (Scope::Assoc, [Key::Int(k)]) => Some(Tup::Pair(IntPair::element(var, *k))),
            _ => self.tuple_keys(var, keys, room).map(Tup::Keys),
        }
    }

    /// [`DynMem::tuple`] as a slice of keys, built in `room`. The string-valued variables
    /// take this form alone: one walk of the engine's under their store, whose chain on the
    /// probe's stack is the deepest (`scripts/stackcheck.py`). A thread-local's tuple is two
    /// keys built in place, not a `MAX_KEYS` array. A slice, not a callback, so that no
    /// closure frame sits between the interpreter and the chunk allocator.
    #[inline(always)]
    fn tuple_keys<'k, 'b: 'k>(
        &self,
        var: u32,
        keys: &[Key<'b>],
        room: &'k mut KeyBuf<MAX_KEYS>,
    ) -> Option<&'k [Key<'b>]> {
        match self.scopes.get(var as usize)? {
            Scope::Thread => {
                let Some(&Key::Int(tid)) = keys.first() else {
                    return None;
                };
                let [k0, k1] = thread_tuple(tid, var);
                room.fill(2, |i| Ok::<_, ()>(if i == 0 { k0 } else { k1 }))?
                    .ok()
            }
            // The array's own key, then the element's.
            Scope::Assoc => room
                .fill(keys.len() + 1, |i| match i.checked_sub(1) {
                    None => Ok(array_key(var)),
                    Some(j) => keys.get(j).copied().ok_or(()),
                })?
                .ok(),
            Scope::Global => None,
        }
    }

    fn audit_now(&self) -> Result<Audit, AuditError> {
        let words = self.dstate.layout().audit_bitmap_words();
        let mut seen = KVVec::from_elem(0u64, words, gfp_load()).map_err(|_| AuditError::Bitmap)?;
        self.dstate.audit(&mut seen)
    }

    fn record_audit(&self) -> bool {
        let r = self.audit_now();
        let (code, a) = match &r {
            Ok(a) => (0, *a),
            Err(e) => (audit_code(e), Audit::default()),
        };
        for (slot, v) in self
            .audit
            .iter()
            .zip([a.free, a.clean, a.rinsing, a.dirty, a.in_use])
        {
            slot.store(v, Ordering::Relaxed);
        }
        self.audit_error.store(code, Ordering::Release);
        r.is_ok()
    }
}

impl Periodic for DynMem {
    fn run(&self) {
        // `Busy` is impossible (one cleaner thread per memory) and a pass reports through
        // the memory's own counters.
        let _ = self.dstate.clean(&AllCpus);
    }
}

/// A session's dynamic variables: the memory and the thread that cleans it.
///
/// # Invariants
///
/// `cleaner` calls into `*mem`, which is boxed (never moves) and dropped after it (field
/// order); the thread runs only between [`DynVars::go`] and [`DynVars::stop`] or drop.
pub(crate) struct DynVars {
    cleaner: PeriodicThread,
    mem: KBox<DynMem>,
    id: u64,
}

impl DynVars {
    /// Bytes [`Self::new`] allocates for `image`: 0 without dynamic variables.
    pub(crate) fn bytes(image: &Image<'_>) -> u64 {
        let opts = image.options();
        let vars = (0..image.var_count() as u32).filter_map(|id| image.var(id));
        dynvar::program_chunk_bytes(vars, opts.strsize as usize).map_or(0, |_| opts.dynvarsize)
    }

    /// The dynamic memory of `image` (option `dynvarsize`, chunks sized by the largest
    /// variable, fixed at LOAD so that probe context never sizes one), or `None` if the
    /// program has no thread-local or associative variable.
    pub(crate) fn new(image: &Image<'_>) -> Result<Option<Self>> {
        let opts = image.options();
        let nvars = image.var_count();
        let vars = (0..nvars as u32).filter_map(|id| image.var(id));
        let Some(chunk) = dynvar::program_chunk_bytes(vars, opts.strsize as usize) else {
            return Ok(None);
        };
        if opts.dynvarsize > OptKey::Dynvarsize.range().1 {
            return Err(E2BIG);
        }
        let mut scopes = KVec::with_capacity(nvars, gfp_load())?;
        for id in 0..nvars as u32 {
            scopes.push(image.var(id).ok_or(EINVAL)?.scope, gfp_load())?;
        }
        let layout = Layout::new(
            opts.dynvarsize as usize,
            cpu::nr_cpu_ids(),
            chunk,
            nvars as u32,
        )
        .map_err(layout_errno)?;
        let r = layout.regions();
        let mut mem = VVec::from_elem(0u8, r.size, crate::sys::gfp_load())?;
        let base = mem.as_mut_ptr();
        // vmalloc memory is page aligned; check rather than assume.
        if base as usize % r.align.max(1) != 0 {
            return Err(EINVAL);
        }
        // SAFETY: every region lies inside the `r.size` bytes of `mem` (`regions()` computes
        // them so) and starts at a multiple of `r.align` from a base aligned to it, which
        // covers the alignment of `Header`, `CpuState`, `Bucket` and `Word`. The regions do
        // not overlap. All four types consist of atomics, for which the zero bytes `mem`
        // holds are valid. The references live as long as `mem`, which `DynMem` keeps, never
        // touches otherwise and drops last (its type invariant).
        let dstate = unsafe {
            let header = &*(base.add(r.header.start) as *const Header);
            let cpus = core::slice::from_raw_parts(
                base.add(r.cpus.start) as *const CpuState,
                layout.ncpus(),
            );
            let buckets = core::slice::from_raw_parts(
                base.add(r.buckets.start) as *const Bucket,
                layout.nchunks(),
            );
            let chunks = core::slice::from_raw_parts(
                base.add(r.chunks.start) as *const Word,
                layout.chunk_word_count(),
            );
            let var_drops = core::slice::from_raw_parts(
                base.add(r.var_drops.start) as *const Word,
                layout.nvars(),
            );
            Dstate::new(layout, header, cpus, buckets, chunks, var_drops)
        }
        .map_err(layout_errno)?;
        // INVARIANT: `dstate` views `mem`, moved into the same object and declared last.
        let mem = KBox::new(
            DynMem {
                dstate,
                scopes,
                cleanrate_ns: clamp_cleanrate(opts.cleanrate),
                bytes: r.size as u64,
                str_bytes: dynvar::string_value_bytes(opts.strsize as usize),
                started: AtomicBool::new(false),
                audit_error: AtomicU32::new(u32::MAX),
                audit: Default::default(),
                _mem: mem,
            },
            gfp_load(),
        )?;
        // SAFETY: `mem` is boxed and stored next to the thread object, which is dropped first
        // (`DynVars` field order); dropping the thread object stops the thread.
        let cleaner = unsafe { PeriodicThread::new(&*mem as *const DynMem)? };
        // INVARIANT: the thread is not started yet.
        Ok(Some(Self {
            cleaner,
            mem,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }))
    }

    /// GO: every chunk on its CPU's free list, state FREE, then the cleaner starts.
    /// Called with no probe enabled and no cleaner running (quiescence).
    pub(crate) fn go(&self) -> Result {
        self.mem.dstate.reset();
        self.mem.started.store(true, Ordering::Release);
        self.mem.audit_error.store(u32::MAX, Ordering::Relaxed);
        self.cleaner.start(self.mem.cleanrate_ns, self.id)
    }

    /// STOP, after the probes were disabled: stops the cleaner (waiting for a pass in
    /// progress), waits for probe handlers still running, and audits the memory.
    pub(crate) fn stop(&self) {
        self.cleaner.stop();
        clean::wait_for_handlers();
        if self.mem.started.load(Ordering::Acquire) {
            self.mem.record_audit();
        }
    }

    /// Value of variable `var` at the interpreter's `keys`; 0 if it does not exist.
    /// Probe context.
    pub(crate) fn load(&self, var: u32, keys: &[Key<'_>], room: &mut DynRoom) -> u64 {
        let d = &self.mem.dstate;
        let DynRoom { keys: kb, found } = room;
        match self.mem.tuple(var, keys, kb) {
            Some(Tup::Own(t)) => d.load_own(&t, found),
            Some(Tup::Pair(t)) => d.load_noting(&t, found),
            Some(Tup::Keys(t)) => d.load_noting(t, found),
            None => return 0,
        }
        .unwrap_or(0)
    }

    /// Stores `value` into variable `var` at `keys` on `cpu` (0 deletes); false when the
    /// store was dropped (counted by state and variable in the memory). Probe context.
    pub(crate) fn store(
        &self,
        cpu: u32,
        var: u32,
        keys: &[Key<'_>],
        room: &mut DynRoom,
        value: u64,
    ) -> bool {
        let d = &self.mem.dstate;
        let DynRoom { keys: kb, found } = room;
        let cpu = cpu as usize;
        // `self->ts = 0` after reading `self->ts` deletes where the read found it.
        let ok = match self.mem.tuple(var, keys, kb) {
            Some(Tup::Own(t) | Tup::Pair(t)) => d.store_noted(cpu, var, &t, value, found),
            Some(Tup::Keys(t)) => d.store_noted(cpu, var, t, value, found),
            None => return false,
        }
        .is_ok();
        // Free chunks run short on this CPU: the cleaner runs now, not at its next period
        // (Documentation/dynvar.rst, "On-demand cleaning"). A store of 0 deletes: it only
        // adds to the dirty list, which the CPU's next allocation sees.
        if value != 0 && d.wants_clean(cpu) {
            self.cleaner.kick();
        }
        ok
    }

    /// Copies string-valued variable `var` at `keys` into `out`; its length, 0 if it does
    /// not exist. Probe context.
    pub(crate) fn load_str(
        &self,
        var: u32,
        keys: &[Key<'_>],
        room: &mut DynRoom,
        out: &mut [u8],
    ) -> usize {
        self.mem
            .tuple_keys(var, keys, &mut room.keys)
            .map_or(0, |t| self.mem.dstate.load_bytes(t, out).unwrap_or(0))
    }

    /// Stores string `s` into string-valued variable `var` at `keys` on `cpu` (the empty
    /// string deletes); false when the store was dropped. Probe context.
    pub(crate) fn store_str(
        &self,
        cpu: u32,
        var: u32,
        keys: &[Key<'_>],
        room: &mut DynRoom,
        s: &[u8],
    ) -> bool {
        let d = &self.mem.dstate;
        let bytes = self.mem.str_bytes;
        let cpu = cpu as usize;
        let Some(t) = self.mem.tuple_keys(var, keys, &mut room.keys) else {
            return false;
        };
        let ok = d.store_bytes(cpu, var, t, s, bytes).is_ok();
        if !s.is_empty() && d.wants_clean(cpu) {
            // As for an integer store (`store`).
            self.cleaner.kick();
        }
        ok
    }

    /// Fills `OXT_IOC_DYNSTAT`; per-CPU counters go to `cpus`, per-variable drops to `vars`.
    /// Returns the entries of `cpus` written.
    pub(crate) fn stat(
        &self,
        st: &mut abi::Dynstat,
        cpus: &mut [abi::DynCpu],
        vars: &mut [u64],
    ) -> usize {
        let m = &*self.mem;
        let d = &m.dstate;
        let s = d.stats();
        st.flags = abi::DYN_PRESENT;
        if m.started.load(Ordering::Acquire) {
            st.flags |= abi::DYN_STARTED;
        }
        st.dstate = s.state;
        st.chunk_bytes = s.chunk_bytes as u32;
        st.nchunks = s.nchunks;
        st.dynvarsize = m.bytes;
        st.cleanrate_ns = m.cleanrate_ns;
        st.cleaner_runs = self.cleaner.runs();
        st.in_use = s.in_use;
        st.high_water = s.high_water;
        st.passes = s.passes;
        st.idle_passes = s.idle_passes;
        st.crosscalls = s.crosscalls;
        st.rinsed = s.rinsed;
        st.borrowed = s.borrowed;
        st.failclean = s.failclean;
        let audit = m.audit_error.load(Ordering::Acquire);
        if audit != u32::MAX {
            st.flags |= abi::DYN_AUDITED;
            st.audit_error = audit;
            let a: [u64; 5] = core::array::from_fn(|i| m.audit[i].load(Ordering::Relaxed));
            [
                st.audit_free,
                st.audit_clean,
                st.audit_rinsing,
                st.audit_dirty,
                st.audit_in_use,
            ] = a;
        }
        st.nvars = d.layout().nvars() as u32;
        for (v, out) in vars.iter_mut().enumerate() {
            *out = d.var_drops(v as u32);
        }
        let n = cpus.len().min(d.layout().ncpus());
        for (c, out) in cpus.iter_mut().enumerate().take(n) {
            let k = d.cpu_stats(c).unwrap_or_default();
            *out = abi::DynCpu {
                allocs: k.allocs,
                frees: k.frees,
                steals: k.steals,
                clean_moves: k.clean_moves,
                races: k.races,
                drops_empty: k.drops_empty,
                drops_dirty: k.drops_dirty,
                drops_rinsing: k.drops_rinsing,
                drops_size: k.drops_size,
                contended: k.contended,
                free: k.free,
                clean: k.clean,
                rinsing: k.rinsing,
                dirty: k.dirty,
                ..Default::default()
            };
        }
        n
    }
}

impl Drop for DynVars {
    fn drop(&mut self) {
        // Release: the probes were unregistered before (their handlers have returned), and
        // once the cleaner has stopped nothing else touches the memory: every chunk must be
        // on exactly one list or chain.
        self.cleaner.stop();
        if !self.mem.started.load(Ordering::Acquire) {
            return;
        }
        AUDITS.fetch_add(1, Ordering::Relaxed);
        if !self.mem.record_audit() {
            AUDIT_FAILURES.fetch_add(1, Ordering::Relaxed);
            pr_err!(
                "dynamic variable audit failed at release (code {})\n",
                self.mem.audit_error.load(Ordering::Relaxed)
            );
        }
    }
}

/// Module-wide audit counters for `OXT_IOC_DYNSTAT`: audits made at release, and failures.
pub(crate) fn audit_totals() -> (u64, u64) {
    (
        AUDITS.load(Ordering::Relaxed),
        AUDIT_FAILURES.load(Ordering::Relaxed),
    )
}
