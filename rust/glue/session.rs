// SPDX-License-Identifier: GPL-2.0

//! A loaded program: its verified clauses, probes, per-CPU state and the firing path.
//!
//! A [`Session`] is built at LOAD and never changes afterwards except through per-CPU state
//! (reached with an [`ActionCtx`]) and atomics, so probe context uses it through `&Session`
//! without locks. The consumer owns it; the probes that point into it are dropped first.

use crate::abi;
use crate::action::{self, Builtin, Env, Key, Record, RecordKind, Vm, AGG_NARGS};
use crate::agg::{self, AggBuffer};
use crate::buffer;
use crate::diag::{self, Refusal};
use crate::glue::dynmem::DynVars;
use crate::glue::pt::{Pt, PtCpu};
use crate::limits;
use crate::program::{Image, ProbeKind, VerifiedClause};
use crate::sys::cpu;
use crate::sys::kprobe::{ProbeSet, Regs};
use crate::sys::percpu::{ActionCtx, PerCpu};
use crate::sys::switchbuf::{Halves, HalvesMem, Switcher};
use crate::sys::task;
use crate::sys::xcall;
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

pub(crate) use crate::limits::MAX_ATTACH;

/// One attached probe: a kprobe, a kretprobe, a tick, BEGIN or END.
pub(crate) struct ProbeSlot {
    session: *const Session,
    /// Enabled probe id: index in [`Session::slots`].
    id: u32,
    /// Index of the probe description in the image.
    desc: u32,
    kind: ProbeKind,
    func: [u8; abi::PROBE_FUNC_LEN],
    func_len: usize,
}

// SAFETY: `session` points to the session that owns the slot; it is only read.
unsafe impl Send for ProbeSlot {}
// SAFETY: as above.
unsafe impl Sync for ProbeSlot {}

impl ProbeSlot {
    /// Counts a hit that was not run because an action was running on this CPU.
    pub(crate) fn count_recursion(&self) {
        // SAFETY: a registered probe's session outlives the registration.
        let s = unsafe { &*self.session };
        let cpu = cpu::this_cpu();
        s.counter(cpu, self.id)
            .recursion
            .fetch_add(1, Ordering::Relaxed);
        if let Some(pt) = s.pt.as_deref() {
            pt.note_missed(cpu);
        }
    }

    fn func(&self) -> &[u8] {
        &self.func[..self.func_len]
    }
}

/// Counters of one probe on one CPU; written only by that CPU.
#[derive(Default)]
pub(crate) struct SlotCounters {
    fired: AtomicU64,
    errors: AtomicU64,
    recursion: AtomicU64,
}

/// Counters of one CPU; written only by that CPU.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct CpuCounters {
    records: AtomicU64,
    drops: AtomicU64,
}

/// Adds one to a counter that only this CPU writes, without a locked instruction.
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// What one CPU's actions use.
struct CpuState {
    scratch: VVec<u8>,
    pbuf: Halves<u8>,
    pbuf_off: usize,
    pbuf_drops: u64,
    agg: Option<Halves<u64>>,
}

/// The consumer-side handles of a session's switched buffers.
pub(crate) struct Drain {
    pbuf: Switcher,
    agg: Option<Switcher>,
    /// Per CPU, an aggregation half taken by a switch but not yet delivered (the user's
    /// buffer was too small): the next AGGSNAP delivers it without switching again.
    agg_pending: KVec<Option<usize>>,
    /// Kernel bounce buffer for serialising an aggregation snapshot.
    bounce: KVVec<u8>,
}

/// A loaded program.
///
/// # Invariants
///
/// `image` and `clauses` borrow `_image_buf`, which is never modified and is
/// dropped last (it is declared last). Every slot's `session` points to this session, which
/// is boxed and never moved. `dynvars` owns its own memory (and stops its cleaner when
/// dropped); probe context reaches it only through registered probes, dropped before.
pub(crate) struct Session {
    image: Image<'static>,
    clauses: KVec<VerifiedClause<'static>>,
    /// For each probe description, its range in `desc_clauses`.
    desc_range: KVec<(u32, u32)>,
    /// Clause indices, grouped by probe description.
    desc_clauses: KVec<u32>,
    slots: KVec<ProbeSlot>,
    counters: KVec<SlotCounters>,
    cpu_counters: KVec<CpuCounters>,
    cpus: PerCpu<CpuState>,
    pbuf_mem: HalvesMem<u8>,
    agg_mem: Option<HalvesMem<u64>>,
    agg_funcs: KVec<agg::AggFunc>,
    globals: KVec<AtomicU64>,
    nlocals: u32,
    strsize: u32,
    exited: AtomicBool,
    exit_status: AtomicI64,
    /// Thread-local and associative variables, if the program has any.
    dynvars: Option<DynVars>,
    /// The consumer's Intel PT buffers, written by `ptwrite()`.
    pt: Option<Arc<Pt>>,
    _image_buf: VVec<u8>,
}

/// Why a LOAD failed, for `struct oxt_load`.
pub(crate) struct LoadFail {
    pub(crate) err: Error,
    pub(crate) kind: u32,
    pub(crate) index: u32,
    pub(crate) part: u32,
    pub(crate) insn: u32,
    pub(crate) code: u32,
    pub(crate) arg: u32,
}

impl LoadFail {
    fn plain(err: Error) -> Self {
        Self {
            err,
            kind: abi::LOADERR_NONE,
            index: 0,
            part: 0,
            insn: 0,
            code: 0,
            arg: 0,
        }
    }
}

impl From<Error> for LoadFail {
    fn from(e: Error) -> Self {
        Self::plain(e)
    }
}

impl From<Refusal> for LoadFail {
    fn from(r: Refusal) -> Self {
        Self {
            err: match r.errno {
                diag::Errno::Inval => EINVAL,
                diag::Errno::NoEnt => ENOENT,
            },
            kind: r.kind,
            index: r.index,
            part: r.part,
            insn: r.insn,
            code: r.code,
            arg: r.arg,
        }
    }
}

impl From<kernel::alloc::AllocError> for LoadFail {
    fn from(_: kernel::alloc::AllocError) -> Self {
        Self::plain(ENOMEM)
    }
}

/// An attach entry as LOAD received it, checked.
pub(crate) struct AttachReq<'a> {
    pub(crate) desc: u32,
    pub(crate) optional: bool,
    pub(crate) name: &'a CStr,
}

/// The result of a LOAD.
pub(crate) struct Loaded {
    pub(crate) session: KBox<Session>,
    pub(crate) probes: ProbeSet,
    pub(crate) drain: Drain,
    pub(crate) nprobes: u32,
    pub(crate) nskipped: u32,
}

impl Session {
    /// Parses and verifies `image_buf`, builds the per-CPU state, and registers every probe
    /// (disabled). `attach` says where the fbt descriptions go.
    pub(crate) fn load(
        image_buf: VVec<u8>,
        attach: &[AttachReq<'_>],
        pt: Option<Arc<Pt>>,
    ) -> Result<Loaded, LoadFail> {
        let (ptr, len) = (image_buf.as_ptr(), image_buf.len());
        // SAFETY: `image_buf` moves into the boxed session below and is never modified or
        // dropped before the session's other fields (type invariant); its heap memory does
        // not move with it.
        let bytes: &'static [u8] = unsafe { core::slice::from_raw_parts(ptr, len) };
        let image = Image::parse(bytes).map_err(|e| Refusal::image(&e))?;
        let mut clauses = KVec::with_capacity(image.clause_count(), GFP_KERNEL)?;
        let plan = limits::check_load(&image, |c| {
            clauses.push(c, GFP_KERNEL)?;
            Ok::<(), LoadFail>(())
        })?;
        let scratch = plan.scratch;

        // Clauses by probe description.
        let ndesc = image.probe_count();
        let mut desc_range = KVec::with_capacity(ndesc, GFP_KERNEL)?;
        let mut desc_clauses = KVec::new();
        for d in 0..ndesc as u32 {
            let start = desc_clauses.len() as u32;
            for c in 0..image.clause_count() {
                let cd = image.clause(c).ok_or(EINVAL)?;
                if d >= cd.probe_first && d - cd.probe_first < cd.probe_count {
                    desc_clauses.push(c as u32, GFP_KERNEL)?;
                }
            }
            desc_range.push((start, desc_clauses.len() as u32 - start), GFP_KERNEL)?;
        }

        // Aggregations.
        let mut agg_funcs = KVec::with_capacity(image.agg_count(), GFP_KERNEL)?;
        for id in 0..image.agg_count() as u32 {
            let a = image.agg_desc(id).ok_or(EINVAL)?;
            let f = agg::check_params(a.func, &a.params).map_err(|e| Refusal::agg_params(id, e))?;
            agg_funcs.push(f, GFP_KERNEL)?;
        }

        // Image::parse held bufsize and aggsize to limits::option_range.
        let opts = image.options();
        let ncpus = cpu::nr_cpu_ids();
        let (pbuf_mem, pbuf_sw) = HalvesMem::new(ncpus, opts.bufsize as usize, 0u8)?;
        let (mut agg_mem, agg_sw) = if agg_funcs.is_empty() {
            (None, None)
        } else {
            let words = (opts.aggsize as usize / 8).max(AggBuffer::MIN_BYTES / 8);
            let (m, sw) = HalvesMem::new(ncpus, words, 0u64)?;
            (Some(m), Some(sw))
        };
        if let Some(m) = agg_mem.as_mut() {
            m.for_each_mut(|h| AggBuffer::format(h).map(|_| ()).map_err(|_| EINVAL))?;
        }
        let cpus = PerCpu::new(|c| {
            Ok(CpuState {
                scratch: VVec::from_elem(0u8, scratch, GFP_KERNEL)?,
                pbuf: pbuf_mem.halves(c).ok_or(EINVAL)?,
                pbuf_off: 0,
                pbuf_drops: 0,
                agg: agg_mem.as_ref().and_then(|m| m.halves(c)),
            })
        })?;
        let mut globals = KVec::with_capacity(image.var_count(), GFP_KERNEL)?;
        for _ in 0..image.var_count() {
            globals.push(AtomicU64::new(0), GFP_KERNEL)?;
        }
        let dynvars = DynVars::new(&image)?;
        let mut cpu_counters = KVec::with_capacity(ncpus as usize, GFP_KERNEL)?;
        for _ in 0..ncpus {
            cpu_counters.push(CpuCounters::default(), GFP_KERNEL)?;
        }

        // Slots: fbt ones from the attach list, one for each other description.
        let mut nslots = attach.len();
        for d in 0..ndesc {
            let p = image.probe(d).ok_or(EINVAL)?;
            if !matches!(p.kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn) {
                nslots += 1;
            }
        }
        let mut slots = KVec::with_capacity(nslots, GFP_KERNEL)?;
        let mut counters = KVec::with_capacity(nslots * ncpus as usize, GFP_KERNEL)?;
        for _ in 0..nslots * ncpus as usize {
            counters.push(SlotCounters::default(), GFP_KERNEL)?;
        }
        let mut s = KBox::new(
            Session {
                image,
                clauses,
                desc_range,
                desc_clauses,
                slots: KVec::new(),
                counters,
                cpu_counters,
                cpus,
                pbuf_mem,
                agg_mem,
                agg_funcs,
                globals,
                nlocals: image.nlocals(),
                strsize: opts.strsize as u32,
                exited: AtomicBool::new(false),
                exit_status: AtomicI64::new(0),
                dynvars,
                pt,
                _image_buf: image_buf,
            },
            GFP_KERNEL,
        )?;
        let sp: *const Session = &*s;
        let slot = |desc: u32, kind: ProbeKind, func: &[u8]| -> ProbeSlot {
            let mut f = [0u8; abi::PROBE_FUNC_LEN];
            let n = func.len().min(f.len() - 1);
            f[..n].copy_from_slice(&func[..n]);
            ProbeSlot {
                session: sp,
                id: 0,
                desc,
                kind,
                func: f,
                func_len: n,
            }
        };
        for a in attach {
            let p = image.probe(a.desc as usize).ok_or(EINVAL)?;
            slots.push(slot(a.desc, p.kind, a.name.as_bytes()), GFP_KERNEL)?;
        }
        for d in 0..ndesc as u32 {
            let p = image.probe(d as usize).ok_or(EINVAL)?;
            if !matches!(p.kind, ProbeKind::FbtEntry | ProbeKind::FbtReturn) {
                slots.push(slot(d, p.kind, b""), GFP_KERNEL)?;
            }
        }
        for (i, sl) in slots.iter_mut().enumerate() {
            sl.id = i as u32;
        }
        // The slots' memory does not move from here on: cookies point into it.
        s.slots = slots;

        let mut probes = ProbeSet::new();
        let mut nskipped = 0u32;
        let mut attached = KVec::from_elem(false, ndesc, GFP_KERNEL)?;
        for (i, a) in attach.iter().enumerate() {
            let sl = &s.slots[i];
            let ret = sl.kind == ProbeKind::FbtReturn;
            // SAFETY: the slot lives in the boxed session, which outlives `probes` (the
            // consumer drops the probes first).
            match unsafe { probes.add_kprobe(a.name, ret, sl as *const ProbeSlot as *const _) } {
                Ok(()) => attached[a.desc as usize] = true,
                Err(_) if a.optional => nskipped += 1,
                Err(e) => {
                    return Err(LoadFail {
                        kind: abi::LOADERR_ATTACH,
                        index: i as u32,
                        ..LoadFail::plain(e)
                    })
                }
            }
        }
        for sl in s.slots[attach.len()..].iter() {
            attached[sl.desc as usize] = true;
            if sl.kind == ProbeKind::Tick {
                let period = s.image.probe(sl.desc as usize).ok_or(EINVAL)?.arg;
                // SAFETY: as for kprobes.
                unsafe { probes.add_tick(period, sl as *const ProbeSlot as *const _)? };
            }
        }
        if let Some(d) = attached.iter().position(|&a| !a) {
            return Err(Refusal::probe_missing(d as u32).into());
        }
        let nprobes = probes.kprobes() as u32;
        let mut agg_pending = KVec::with_capacity(ncpus as usize, GFP_KERNEL)?;
        for _ in 0..ncpus {
            agg_pending.push(None, GFP_KERNEL)?;
        }
        let drain = Drain {
            pbuf: pbuf_sw,
            agg: agg_sw,
            agg_pending,
            bounce: KVVec::from_elem(0u8, 64 << 10, GFP_KERNEL)?,
        };
        Ok(Loaded {
            session: s,
            probes,
            drain,
            nprobes,
            nskipped,
        })
    }

    fn counter(&self, cpu: u32, slot: u32) -> &SlotCounters {
        &self.counters[cpu as usize * self.slots.len() + slot as usize]
    }

    /// Runs the BEGIN or END clauses on this CPU, as a probe would.
    pub(crate) fn fire_special(&self, kind: ProbeKind) {
        for sl in self.slots.iter().filter(|s| s.kind == kind) {
            xcall::as_action(|ctx| fire(sl, ctx, &Regs::none(), false));
        }
    }

    /// GO, before BEGIN and the probes: initialises the dynamic memory and starts its
    /// cleaner.
    pub(crate) fn dyn_go(&self) -> Result {
        self.dynvars.as_ref().map_or(Ok(()), DynVars::go)
    }

    /// STOP, after the probes were disabled and END ran: stops the cleaner and audits the
    /// dynamic memory once the last handler has returned.
    pub(crate) fn dyn_stop(&self) {
        if let Some(d) = self.dynvars.as_ref() {
            d.stop();
        }
    }

    /// Fills `OXT_IOC_DYNSTAT` (see [`DynVars::stat`]); returns the CPU entries written.
    pub(crate) fn dyn_stat(
        &self,
        st: &mut abi::Dynstat,
        cpus: &mut [abi::DynCpu],
        vars: &mut [u64],
    ) -> usize {
        self.dynvars.as_ref().map_or(0, |d| d.stat(st, cpus, vars))
    }

    /// Whether an `exit()` action ran, and its status.
    pub(crate) fn exit_status(&self) -> Option<i64> {
        self.exited
            .load(Ordering::Acquire)
            .then(|| self.exit_status.load(Ordering::Relaxed))
    }

    /// Fills the per-CPU counters (`out.len()` CPUs at most); returns how many.
    pub(crate) fn cpu_status(&self, out: &mut [abi::CpuStatus]) -> usize {
        let n = out.len().min(self.cpu_counters.len());
        for (c, st) in out.iter_mut().enumerate().take(n) {
            *st = abi::CpuStatus::default();
            for sl in 0..self.slots.len() {
                let k = self.counter(c as u32, sl as u32);
                st.fired += k.fired.load(Ordering::Relaxed);
                st.errors += k.errors.load(Ordering::Relaxed);
                st.recursion += k.recursion.load(Ordering::Relaxed);
            }
            st.records = self.cpu_counters[c].records.load(Ordering::Relaxed);
            st.drops = self.cpu_counters[c].drops.load(Ordering::Relaxed);
        }
        n
    }

    /// Number of attached probes (slots).
    pub(crate) fn nslots(&self) -> usize {
        self.slots.len()
    }

    /// Fills the description of slot `i`.
    pub(crate) fn probe_info(&self, i: usize, out: &mut abi::ProbeInfo) {
        let sl = &self.slots[i];
        *out = abi::ProbeInfo {
            probe: sl.desc,
            ..Default::default()
        };
        if sl.kind == ProbeKind::FbtReturn {
            out.flags |= abi::PROBE_RETURN;
        }
        out.func[..sl.func_len].copy_from_slice(sl.func());
        for c in 0..self.cpu_counters.len() {
            let k = self.counter(c as u32, i as u32);
            out.fired += k.fired.load(Ordering::Relaxed);
            out.errors += k.errors.load(Ordering::Relaxed);
            out.recursion += k.recursion.load(Ordering::Relaxed);
        }
    }

    /// Bytes of a principal buffer half (option `bufsize`).
    pub(crate) fn bufsize(&self) -> usize {
        self.pbuf_mem.len()
    }

    /// Switches `cpu`'s principal buffer; `f` gets the records and the drops.
    pub(crate) fn take_pbuf<R>(
        &self,
        d: &mut Drain,
        cpu: u32,
        f: impl FnOnce(&[u8], u64) -> R,
    ) -> Result<R> {
        let got = AtomicU64::new(0);
        let off = AtomicU64::new(0);
        let drops = AtomicU64::new(0);
        xcall::on_cpu(cpu, &|ctx: &mut ActionCtx| {
            let st = self.cpus.local(ctx);
            got.store(st.pbuf.switch() as u64, Ordering::Relaxed);
            off.store(st.pbuf_off as u64, Ordering::Relaxed);
            drops.store(st.pbuf_drops, Ordering::Relaxed);
            st.pbuf_off = 0;
            st.pbuf_drops = 0;
        })?;
        let half = self
            .pbuf_mem
            .taken(&mut d.pbuf, cpu, got.load(Ordering::Relaxed) as usize)?;
        let len = (off.load(Ordering::Relaxed) as usize).min(half.len());
        Ok(f(&half[..len], drops.load(Ordering::Relaxed)))
    }

    /// Switches `cpu`'s aggregation buffer and serialises what it took through `sink`
    /// (chunks of whole records), then empties that half. If the data sets need more than
    /// `limit` bytes, nothing is copied and the half is kept aside: the next call delivers it
    /// before anything is switched again, so nothing is lost or counted twice.
    pub(crate) fn take_agg(
        &self,
        d: &mut Drain,
        cpu: u32,
        limit: usize,
        mut sink: impl FnMut(&[u8]) -> Result,
    ) -> Result<AggTaken> {
        let (Some(mem), Some(sw)) = (self.agg_mem.as_ref(), d.agg.as_mut()) else {
            return Ok(AggTaken::Data { len: 0, drops: 0 });
        };
        let pending = d.agg_pending.get_mut(cpu as usize).ok_or(EINVAL)?;
        let which = match *pending {
            Some(h) => h,
            None => {
                let got = AtomicU64::new(0);
                xcall::on_cpu(cpu, &|ctx: &mut ActionCtx| {
                    if let Some(h) = self.cpus.local(ctx).agg.as_mut() {
                        got.store(h.switch() as u64, Ordering::Relaxed);
                    }
                })?;
                got.load(Ordering::Relaxed) as usize
            }
        };
        let half = mem.taken(sw, cpu, which)?;
        let mut buf = AggBuffer::attach(half).map_err(|_| EINVAL)?;
        let need = buf.snapshot_len();
        if need > limit {
            *pending = Some(which);
            return Ok(AggTaken::TooSmall { need });
        }
        *pending = None;
        let drops = buf.drops();
        let mut cur = agg::SnapshotCursor::new();
        let mut len = 0;
        while !cur.is_done() {
            let n = buf
                .serialize(cpu, &mut d.bounce, &mut cur)
                .map_err(|_| EINVAL)?;
            sink(&d.bounce[..n])?;
            len += n;
        }
        buf.reset();
        Ok(AggTaken::Data { len, drops })
    }
}

/// What an aggregation snapshot of one CPU gave.
pub(crate) enum AggTaken {
    /// `len` bytes of data sets were copied; `drops` updates did not fit the buffer.
    Data { len: usize, drops: u64 },
    /// The data sets need `need` bytes: nothing copied, nothing lost.
    TooSmall { need: usize },
}

/// Runs the clauses of `slot`'s probe description; called by the shim in probe context.
pub(crate) fn fire(slot: &ProbeSlot, ctx: &mut ActionCtx, regs: &Regs, ret: bool) {
    // SAFETY: a registered probe's session outlives the registration (slot invariant).
    let s = unsafe { &*slot.session };
    let cpu = ctx.cpu();
    bump(&s.counter(cpu, slot.id).fired);
    let (start, n) = s.desc_range[slot.desc as usize];
    if n == 0 {
        return;
    }
    let (st, pt) = match s.pt.as_deref() {
        Some(pt) => {
            let Some((st, c)) = s.cpus.local_with(pt.cpus(), ctx) else {
                return;
            };
            (st, Some((pt, c)))
        }
        None => (s.cpus.local(ctx), None),
    };
    let Ok(mut vm) = Vm::new(&mut st.scratch, s.nlocals, s.strsize) else {
        return;
    };
    let mut env = KernelEnv {
        s,
        slot,
        regs,
        ret,
        ts: None,
        cpu,
        pbuf: &mut st.pbuf,
        pbuf_off: &mut st.pbuf_off,
        pbuf_drops: &mut st.pbuf_drops,
        agg: st.agg.as_mut(),
        pt,
    };
    for &c in &s.desc_clauses[start as usize..(start + n) as usize] {
        let clause = &s.clauses[c as usize];
        vm.begin_clause();
        if let Some(pred) = &clause.pred {
            match vm.run(pred, &s.image, &mut env) {
                Ok(0) => continue,
                Ok(_) => {}
                Err(f) => {
                    env.fault(c, f);
                    continue;
                }
            }
        }
        if let Err(f) = vm.run(&clause.act, &s.image, &mut env) {
            env.fault(c, f);
        }
    }
}

/// What the interpreter sees of the kernel during one firing.
struct KernelEnv<'a> {
    s: &'a Session,
    slot: &'a ProbeSlot,
    regs: &'a Regs,
    ret: bool,
    /// When the probe fired: read at first use, then the same for the whole firing.
    ts: Option<u64>,
    cpu: u32,
    pbuf: &'a mut Halves<u8>,
    pbuf_off: &'a mut usize,
    pbuf_drops: &'a mut u64,
    agg: Option<&'a mut Halves<u64>>,
    pt: Option<(&'a Pt, &'a mut PtCpu)>,
}

impl KernelEnv<'_> {
    /// The firing's timestamp; the clock is read only by programs that use it.
    fn ts(&mut self) -> u64 {
        *self.ts.get_or_insert_with(cpu::mono_fast_ns)
    }

    fn write(&mut self, kind: u32, id: u32, data: &[u8]) -> bool {
        let ts = self.ts();
        let buf = self.pbuf.active();
        let ok = buffer::write(buf, self.pbuf_off, kind, self.slot.id, id, ts, data);
        let c = &self.s.cpu_counters[self.cpu as usize];
        if ok {
            bump(&c.records);
        } else {
            *self.pbuf_drops += 1;
            bump(&c.drops);
        }
        ok
    }

    /// Counts a fault and records where it happened (clause, instruction, what, address).
    fn fault(&mut self, clause: u32, f: action::Fault) {
        bump(&self.s.counter(self.cpu, self.slot.id).errors);
        let (code, addr) = diag::fault_code(&f.kind);
        let mut data = [0u8; 16];
        data[0..4].copy_from_slice(&clause.to_le_bytes());
        data[4..8].copy_from_slice(&f.pc.to_le_bytes());
        data[8..16].copy_from_slice(&addr.to_le_bytes());
        self.write(buffer::KIND_ERROR, code, &data);
    }
}

impl Env for KernelEnv<'_> {
    fn builtin(&mut self, b: Builtin) -> u64 {
        let arg = |n: u32| -> u64 {
            match self.slot.kind {
                ProbeKind::FbtEntry => self.regs.arg(n),
                // fbt return probes: arg0 is the offset (unknown here, 0), arg1 the value.
                ProbeKind::FbtReturn if n == 1 => self.regs.retval(),
                _ => 0,
            }
        };
        match b {
            Builtin::Pid => task::pid() as u64,
            Builtin::Tid => task::tid() as u64,
            Builtin::Cpu => self.cpu as u64,
            Builtin::Timestamp => self.ts(),
            Builtin::Walltimestamp => cpu::real_fast_ns(),
            Builtin::Arg0 => arg(0),
            Builtin::Arg1 => arg(1),
            Builtin::Arg2 => arg(2),
            Builtin::Arg3 => arg(3),
            Builtin::Arg4 => arg(4),
            Builtin::Arg5 => arg(5),
            Builtin::Retval if self.ret => self.regs.retval(),
            Builtin::Retval => 0,
            Builtin::Uid => task::uid() as u64,
            Builtin::Gid => task::gid() as u64,
            Builtin::Ppid => task::ppid() as u64,
            Builtin::Id => self.slot.id as u64,
            Builtin::Curthread => task::current_addr(),
            _ => 0,
        }
    }

    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize {
        let copy = |out: &mut [u8], s: &[u8]| {
            let n = s.len().min(out.len());
            out[..n].copy_from_slice(&s[..n]);
            n
        };
        match b {
            Builtin::Execname => task::comm(out),
            Builtin::Probeprov => copy(
                out,
                match self.slot.kind {
                    ProbeKind::FbtEntry | ProbeKind::FbtReturn => b"fbt",
                    ProbeKind::Tick => b"profile",
                    ProbeKind::Begin | ProbeKind::End => b"dtrace",
                },
            ),
            Builtin::Probemod => copy(
                out,
                match self.slot.kind {
                    ProbeKind::FbtEntry | ProbeKind::FbtReturn => b"kernel",
                    _ => b"",
                },
            ),
            Builtin::Probefunc => copy(out, self.slot.func()),
            Builtin::Probename => match self.slot.kind {
                ProbeKind::FbtEntry => copy(out, b"entry"),
                ProbeKind::FbtReturn => copy(out, b"return"),
                ProbeKind::Begin => copy(out, b"BEGIN"),
                ProbeKind::End => copy(out, b"END"),
                ProbeKind::Tick => {
                    let name = self
                        .s
                        .image
                        .probe(self.slot.desc as usize)
                        .map(|p| p.arg)
                        .unwrap_or(0);
                    tick_name(name, out)
                }
            },
            _ => 0,
        }
    }

    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool {
        task::read_kernel(addr, out)
    }

    fn global_load(&mut self, id: u32) -> u64 {
        self.s
            .globals
            .get(id as usize)
            .map_or(0, |g| g.load(Ordering::Relaxed))
    }

    fn global_store(&mut self, id: u32, value: u64) {
        if let Some(g) = self.s.globals.get(id as usize) {
            g.store(value, Ordering::Relaxed);
        }
    }

    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64 {
        self.s.dynvars.as_ref().map_or(0, |d| d.load(var, keys))
    }

    // A dropped store is counted by the dynamic memory (by state and by variable).
    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool {
        self.s
            .dynvars
            .as_ref()
            .is_some_and(|d| d.store(self.cpu, var, keys, value))
    }

    fn agg_update(&mut self, id: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool {
        let (Some(h), Some(func)) = (self.agg.as_deref_mut(), self.s.agg_funcs.get(id as usize))
        else {
            return false;
        };
        let Ok(mut buf) = AggBuffer::attach(h.active()) else {
            return false;
        };
        buf.apply(id, func, keys, args[0] as i64, args[1] as i64)
            .is_ok()
    }

    fn emit(&mut self, rec: &Record<'_>) -> bool {
        if rec.kind == RecordKind::Exit && !self.s.exited.load(Ordering::Relaxed) {
            let status = action::Items::new(rec.data)
                .next()
                .map_or(0, |it| match it {
                    action::Item::Int(v, _) => v as i64,
                    action::Item::Str(_) => 0,
                });
            if self
                .s
                .exited
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.s.exit_status.store(status, Ordering::Release);
            }
        }
        self.write(rec.kind as u32, rec.id, rec.data)
    }

    fn ptwrite(&mut self, value: u64) -> bool {
        match self.pt.as_mut() {
            Some((pt, c)) => pt.ptwrite(c, self.cpu, value),
            None => false,
        }
    }
}

/// `tick-<n><unit>` for a period in ns, as the probe was named.
fn tick_name(ns: u64, out: &mut [u8]) -> usize {
    use core::fmt::Write;
    let (n, unit) = match ns {
        _ if ns % 1_000_000_000 == 0 => (ns / 1_000_000_000, "s"),
        _ if ns % 1_000_000 == 0 => (ns / 1_000_000, "ms"),
        _ if ns % 1_000 == 0 => (ns / 1_000, "us"),
        _ => (ns, "ns"),
    };
    let mut w = SliceWriter { buf: out, len: 0 };
    // Truncation is all that can go wrong, and a truncated name is what the caller wants.
    let _ = write!(w, "tick-{n}{unit}");
    w.len
}

/// `fmt::Write` into a byte slice, truncating.
struct SliceWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl core::fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}
