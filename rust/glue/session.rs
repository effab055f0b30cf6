// SPDX-License-Identifier: GPL-2.0

//! A loaded program: its verified clauses, probes and per-CPU state, the data types probe
//! context works on. What runs when a probe fires is in `glue::fire`.
//!
//! A [`Session`] is built at LOAD and never changes afterwards except through per-CPU state
//! (reached with an [`ActionCtx`]) and atomics, so probe context uses it through `&Session`
//! without locks. The consumer owns it; the probes that point into it are dropped first.

use crate::abi;
use crate::action::{VmParams, VmState};
use crate::agg::{self, AggBuffer};
use crate::buffer;
use crate::diag::{self, Refusal};
use crate::glue::budget::MemCharge;
use crate::glue::dynmem::{DynRoom, DynVars};
use crate::glue::image::OwnedImage;
use crate::glue::provider::SyscallSlots;
use crate::glue::pt::Pt;
use crate::glue::spec::{SpecCpu, Specs};
use crate::limits::LoadMemory;
use crate::probe;
use crate::probesafe;
use crate::program::ProbeKind;
use crate::stack;
use crate::sys::cpu;
use crate::sys::gfp_load;
use crate::sys::kprobe::ProbeSet;
use crate::sys::percpu::{ActionCtx, PerCpu};
use crate::sys::provider::Providers;
use crate::sys::switchbuf::{Halves, HalvesMem, Switcher};
use crate::sys::uprobe::UprobeAt;
use crate::sys::xcall;
use crate::uprobe;
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::Arc;

/// One attached probe: a kprobe, a kretprobe, a tick, BEGIN or END, a system call's entry
/// or return, a profile or a tracepoint probe.
pub(crate) struct ProbeSlot {
    /// Enabled probe id (`id`): index in [`Session::slots`], numbered as
    /// [`probe::other_probe_id`] says.
    pub(super) id: u32,
    /// Index of the probe description in the image.
    pub(super) desc: u32,
    pub(super) kind: ProbeKind,
    pub(super) func: [u8; abi::PROBE_FUNC_LEN],
    pub(super) func_len: usize,
    /// Its enabled probe IDs (`epid`) follow this one, a clause's being this plus one
    /// more than its index in the description's clauses ([`probe::EpidBases`]).
    pub(super) epid_base: u32,
    /// Its description's clauses: the range `start..end` of [`Session::desc_clauses`],
    /// found at LOAD so that a firing does not look the description up.
    pub(super) clauses: (u32, u32),
}

impl ProbeSlot {
    pub(super) fn func(&self) -> &[u8] {
        &self.func[..self.func_len]
    }
}

/// What a user-space probe's slot keeps beyond a [`ProbeSlot`] (slot `nattach + i` has
/// [`Session::users`]`[i]`): its whole name, which PROBES cuts to `PROBE_FUNC_LEN` but
/// `probeprov` and friends read in full, the return offset and the USDT operands.
pub(crate) struct UserSlot {
    /// `provider:module:function:name`: the range in [`Session::user_names`].
    pub(super) name: (u32, u32),
    /// Pid return probes' `arg0`.
    pub(super) roff: u64,
    /// USDT operands: the range in [`Session::usdt_args`].
    pub(super) args: (u32, u32),
}

/// Adds `n` to a counter that only this CPU writes, without a locked instruction.
pub(super) fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Counters of one probe on one CPU; written only by that CPU.
#[derive(Default)]
pub(crate) struct SlotCounters {
    pub(super) fired: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) recursion: AtomicU64,
}

/// The counters of two probes on one CPU, on a cache line of their own: every firing
/// bumps its probe's `fired`, and a line shared with another CPU's counters would bounce
/// between the two at every firing of either.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct CounterLine([SlotCounters; 2]);

/// Counters of one CPU; written only by that CPU.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct CpuCounters {
    pub(super) records: AtomicU64,
    pub(super) drops: AtomicU64,
    /// Records that did not fit a speculative buffer.
    pub(super) spec_drops: AtomicU64,
    /// `speculation()` that found only busy speculations.
    pub(super) spec_busy: AtomicU64,
    /// `speculation()` that found every speculation active.
    pub(super) spec_unavail: AtomicU64,
    /// `chill()`: start of the current window, and nanoseconds spun in it.
    pub(super) chill_start: AtomicU64,
    pub(super) chill_used: AtomicU64,
}

impl CpuCounters {
    /// Counts records written to and dropped from the principal buffer; only this CPU calls
    /// it.
    pub(super) fn count_records(&self, written: u64, dropped: u64) {
        add(&self.records, written);
        add(&self.drops, dropped);
    }
}

/// What one CPU's actions use.
pub(super) struct CpuState {
    /// The interpreter's registers and tuple stack (kept off the probe's stack).
    pub(super) vm: KBox<VmState>,
    pub(super) scratch: VVec<u8>,
    /// The CPU's buffers and what a firing's environment keeps off the probe's stack: one
    /// reference in the environment instead of one per field.
    pub(super) room: KBox<EnvCpu>,
}

/// What a firing of a session uses per CPU besides the interpreter's state, kept off the
/// stack (built at LOAD) and reached through one reference.
pub(super) struct EnvCpu {
    /// The principal buffer's halves, and where the next record goes in the active one
    /// (under the buffer policy) with what it dropped.
    pub(super) pbuf: Halves<u8>,
    pub(super) pbuf_cur: buffer::Cursor,
    /// The aggregation buffer's halves, if the program aggregates.
    pub(super) agg: Option<Halves<u64>>,
    /// Speculative buffers, if the program speculates.
    pub(super) spec: Option<SpecCpu>,
    /// Room for a dynamic variable's tuple, and where the last lookup found one.
    pub(super) dynv: DynRoom,
    /// While ERROR's clauses run: its `arg0..arg5`.
    pub(super) err_args: [u64; 6],
    /// When the probe fired: read at first use in a firing (0 until then: the clock counts
    /// from boot), then the same for the rest of the slot's clauses (`fire_many` reads it
    /// afresh for each slot).
    pub(super) ts: u64,
    /// Room for the stacks `stack()` and `ustack()` take, off the probe's stack.
    pub(super) stk: KBox<StackRoom>,
}

/// Slots of [`StackRoom::sent`].
pub(super) const STACKS_SENT: usize = 64;

/// A CPU's room for taking a stack (`KernelEnv::stack_id`): its frames, the definition
/// record made of them, and the ids of the stacks whose definitions this CPU wrote.
pub(super) struct StackRoom {
    /// The frames of the stack being taken.
    pub(super) pcs: [u64; stack::MAX_FRAMES as usize],
    /// Its definition's payload.
    pub(super) def: [u8; stack::DEF_MAX_BYTES],
    /// Ids whose definitions went into the principal buffer, one slot per `id %
    /// STACKS_SENT`: a hit skips the definition. A record written is never lost (the
    /// switch policy), so the consumer has each one; an id pushed out of its slot by
    /// another is written again, which the consumer takes as the same stack.
    pub(super) sent: [u64; STACKS_SENT],
}

// SAFETY: every field is an array of integers, for which all zero bytes are a valid value.
unsafe impl kernel::init::Zeroable for StackRoom {}

impl EnvCpu {
    pub(super) fn new(
        pbuf: Halves<u8>,
        pbuf_cur: buffer::Cursor,
        agg: Option<Halves<u64>>,
        spec: Option<SpecCpu>,
        stk: KBox<StackRoom>,
    ) -> Self {
        Self {
            pbuf,
            pbuf_cur,
            agg,
            spec,
            dynv: DynRoom::new(),
            err_args: [0; 6],
            ts: 0,
            stk,
        }
    }
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
/// `dynvars` owns its own memory (and stops its cleaner when dropped); probe context reaches
/// the session only through the probes of the [`ProbeSet`] that owns it, unregistered first.
pub(crate) struct Session {
    /// The image and its verified clauses.
    pub(super) prog: OwnedImage,
    /// Clause indices, grouped by probe description ([`ProbeSlot::clauses`]).
    pub(super) desc_clauses: KVec<u32>,
    pub(super) slots: KVec<ProbeSlot>,
    /// Per CPU, the probes' counters in `counter_lines` lines (up to megabytes with a long
    /// attach list: not in one physically contiguous allocation).
    pub(super) counters: KVVec<CounterLine>,
    /// Lines of `counters` per CPU, `slots.len().div_ceil(2)`: kept, not worked out at every
    /// firing.
    pub(super) counter_lines: usize,
    pub(super) cpu_counters: KVec<CpuCounters>,
    pub(super) cpus: PerCpu<CpuState>,
    pub(super) pbuf_mem: HalvesMem<u8>,
    pub(super) agg_mem: Option<HalvesMem<u64>>,
    pub(super) agg_funcs: KVec<agg::AggFunc>,
    pub(super) globals: KVec<AtomicU64>,
    /// The interpreter's parameters, checked at LOAD so that a firing need not.
    pub(super) vm: VmParams,
    pub(super) exited: AtomicBool,
    pub(super) exit_status: AtomicI64,
    /// CPUs whose fill buffer became full (`bufpolicy` fill): the consumer stops then.
    pub(super) filled: AtomicU64,
    /// Thread-local and associative variables, if the program has any.
    pub(super) dynvars: Option<DynVars>,
    /// The consumer's Intel PT buffers, written by `ptwrite()`.
    pub(super) pt: Option<Arc<Pt>>,
    /// The slots of each system call number (syscall provider).
    pub(super) syscalls: SyscallSlots,
    /// The speculations, if the program speculates.
    pub(super) specs: Option<Specs>,
    /// The `nspec` option: speculation ids are 1..=nspec (`commit`/`discard` of another is
    /// an illegal operation, speculating or not).
    pub(super) nspec: u64,
    /// Entries of LOAD's fbt attach list: the user-space probes' slots follow them.
    pub(super) nattach: u32,
    /// The user-space probes' slots, in the order of LOAD's uattach table.
    pub(super) users: KVVec<UserSlot>,
    /// Their names, one after the other (no NULs).
    pub(super) user_names: KVVec<u8>,
    /// Their USDT operands, as LOAD's usdt_args table.
    pub(super) usdt_args: KVVec<abi::UsdtArg>,
    /// The memory budget this session holds, released with it.
    _charge: MemCharge,
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
                diag::Errno::TooBig => E2BIG,
                diag::Errno::Perm => EPERM,
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

/// LOAD's user-space probe tables, as received: checked by [`Session::load`].
pub(crate) struct UserTables<'a> {
    pub(crate) entries: &'a [abi::Uattach],
    pub(crate) args: &'a [abi::UsdtArg],
    /// The names buffer the entries' `name` and `path` point into.
    pub(crate) names: &'a [u8],
}

impl UserTables<'_> {
    /// The bytes a session keeps of them: charged to the memory budget.
    fn bytes(&self) -> u64 {
        let names: usize = self
            .entries
            .iter()
            .map(|e| uprobe::names_str(self.names, e.name).map_or(0, <[u8]>::len))
            .sum();
        (self.entries.len() * core::mem::size_of::<UserSlot>()
            + core::mem::size_of_val(self.args)
            + names) as u64
    }
}

/// The result of a LOAD.
pub(crate) struct Loaded {
    /// The syscall hooks, profile timers and tracepoint counters that call the session;
    /// dropped before `probes`.
    pub(crate) providers: Providers<Session>,
    /// The session and the probes that call it.
    pub(crate) probes: ProbeSet<Session>,
    pub(crate) drain: Drain,
    pub(crate) nprobes: u32,
    pub(crate) nskipped: u32,
    /// User-space probes registered.
    pub(crate) nuprobes: u32,
}

impl Session {
    /// Parses and verifies `image_buf`, builds the per-CPU state, and registers every probe
    /// (disabled). `attach` says where the fbt descriptions go, `user` where the user-space
    /// ones do.
    pub(crate) fn load(
        image_buf: VVec<u8>,
        attach: &[AttachReq<'_>],
        user: &UserTables<'_>,
        pt: Option<Arc<Pt>>,
    ) -> Result<Loaded, LoadFail> {
        let prog = OwnedImage::load::<LoadFail>(image_buf)?;
        let image = *prog.image();
        let scratch = prog.scratch();

        // The user-space probe table, entry by entry, before anything is allocated for it.
        for (i, e) in user.entries.iter().enumerate() {
            if let Err((why, arg)) = uprobe::check_uattach(&image, user.names, user.args, e) {
                return Err(Refusal::uattach(i as u32, why, arg).into());
            }
        }

        // Clauses by probe description: for each, its range `start..end` in `desc_clauses`.
        let ndesc = image.probe_count();
        let mut desc_range = KVec::with_capacity(ndesc, gfp_load())?;
        let mut desc_clauses = KVec::new();
        for d in 0..ndesc as u32 {
            let start = desc_clauses.len() as u32;
            for c in probe::clauses_of(&image, d) {
                desc_clauses.push(c, gfp_load())?;
            }
            desc_range.push((start, desc_clauses.len() as u32), gfp_load())?;
        }

        // Aggregations.
        let mut agg_funcs = KVec::with_capacity(image.agg_count(), gfp_load())?;
        for id in 0..image.agg_count() as u32 {
            let a = image.agg_desc(id).ok_or(EINVAL)?;
            let f = agg::check_params(a.func, &a.params).map_err(|e| Refusal::agg_params(id, e))?;
            agg_funcs.push(f, gfp_load())?;
        }

        // Image::parse held bufsize and aggsize to `OptKey::range`.
        let opts = image.options();
        let ncpus = cpu::nr_cpu_ids();
        let agg_words = if agg_funcs.is_empty() {
            0
        } else {
            (opts.aggsize as usize / 8).max(AggBuffer::MIN_BYTES / 8)
        };
        // Everything big is charged before any of it is allocated.
        let spec_bytes = if prog.speculates() {
            opts.nspec.saturating_mul(opts.specsize)
        } else {
            0
        };
        let charge = MemCharge::take(
            &LoadMemory::new(
                ncpus,
                opts.bufsize,
                agg_words as u64 * 8,
                DynVars::bytes(&image),
                scratch as u64,
                // The user-space probe tables count with the image, as part of the program.
                (prog.len() as u64).saturating_add(user.bytes()),
            )
            .with_spec(spec_bytes),
        )?;
        // Image::parse held nspec and specsize to `OptKey::range`.
        let specs = if spec_bytes == 0 {
            None
        } else {
            Some(Specs::new(
                opts.nspec as usize,
                ncpus,
                opts.specsize as usize,
            )?)
        };
        // A fill buffer keeps room for END's records (`check_load` saw that some is left).
        let reserve = if opts.bufpolicy == buffer::POLICY_FILL {
            image.end_reserve().min(opts.bufsize) as usize
        } else {
            0
        };
        let (pbuf_mem, pbuf_sw) = HalvesMem::new(ncpus, opts.bufsize as usize, 0u8)?;
        let (mut agg_mem, agg_sw) = if agg_words == 0 {
            (None, None)
        } else {
            let (m, sw) = HalvesMem::new(ncpus, agg_words, 0u64)?;
            (Some(m), Some(sw))
        };
        if let Some(m) = agg_mem.as_mut() {
            m.for_each_mut(|h| AggBuffer::format(h).map(|_| ()).map_err(|_| EINVAL))?;
        }
        let cpus = PerCpu::new(|c| {
            Ok(CpuState {
                vm: KBox::new(VmState::new(), GFP_KERNEL)?,
                scratch: VVec::from_elem(0u8, scratch, crate::sys::gfp_load())?,
                room: KBox::new(
                    EnvCpu::new(
                        pbuf_mem.halves(c).ok_or(EINVAL)?,
                        buffer::Cursor::new(opts.bufpolicy, reserve),
                        agg_mem.as_ref().and_then(|m| m.halves(c)),
                        specs.as_ref().map(Specs::new_cpu).transpose()?,
                        // Zeroed in place: 2.5 KiB need not pass through LOAD's stack.
                        KBox::init(kernel::init::zeroed(), GFP_KERNEL)?,
                    ),
                    GFP_KERNEL,
                )?,
            })
        })?;
        let mut globals = KVec::with_capacity(image.var_count(), gfp_load())?;
        for _ in 0..image.var_count() {
            globals.push(AtomicU64::new(0), gfp_load())?;
        }
        let dynvars = DynVars::new(&image)?;
        let mut cpu_counters = KVec::with_capacity(ncpus as usize, gfp_load())?;
        for _ in 0..ncpus {
            cpu_counters.push(CpuCounters::default(), gfp_load())?;
        }

        // Slots: fbt ones from the attach list, user-space ones from the uattach table, one
        // for each other description.
        let nlisted = attach.len() + user.entries.len();
        let mut nslots = nlisted;
        for d in 0..ndesc {
            let p = image.probe(d).ok_or(EINVAL)?;
            if !probe::by_attach_list(p.kind) {
                nslots += 1;
            }
        }
        let mut slots = KVec::with_capacity(nslots, gfp_load())?;
        let counter_lines = nslots.div_ceil(2);
        let nlines = counter_lines.checked_mul(ncpus as usize).ok_or(ENOMEM)?;
        let mut counters = KVVec::with_capacity(nlines, gfp_load())?;
        for _ in 0..nlines {
            counters.push(CounterLine::default(), gfp_load())?;
        }
        // EPIDs go in program order (`probe::EpidBases`): by description, then its slots in
        // the order made below (the attach list's, the uattach table's, then one per other
        // description), which the tool reads back from PROBES.
        let others = (0..ndesc as u32).filter(|&d| {
            image
                .probe(d as usize)
                .is_some_and(|p| !probe::by_attach_list(p.kind))
        });
        // `Iterator::` because the kernel's `Init` has a `chain` too.
        let listed = Iterator::chain(
            attach.iter().map(|a| a.desc),
            user.entries.iter().map(|e| e.probe),
        );
        let slot_descs = Iterator::chain(listed, others);
        let mut epid_descs = KVec::from_elem(probe::DescEpids::default(), ndesc, gfp_load())?;
        let mut epids = probe::EpidBases::new(&image, &mut epid_descs, slot_descs);
        let mut slot = |id: usize, desc: u32, kind: ProbeKind, func: &[u8]| -> ProbeSlot {
            let mut f = [0u8; abi::PROBE_FUNC_LEN];
            let n = func.len().min(f.len() - 1);
            f[..n].copy_from_slice(&func[..n]);
            ProbeSlot {
                id: id as u32,
                desc,
                kind,
                func: f,
                func_len: n,
                epid_base: epids.next(desc),
                clauses: desc_range.get(desc as usize).copied().unwrap_or_default(),
            }
        };
        for a in attach {
            let p = image.probe(a.desc as usize).ok_or(EINVAL)?;
            slots.push(
                slot(slots.len(), a.desc, p.kind, a.name.as_bytes()),
                gfp_load(),
            )?;
        }
        let mut users = KVVec::with_capacity(user.entries.len(), gfp_load())?;
        let mut user_names = KVVec::new();
        for e in user.entries {
            let p = image.probe(e.probe as usize).ok_or(EINVAL)?;
            // `check_uattach` found the name.
            let name = uprobe::names_str(user.names, e.name).ok_or(EINVAL)?;
            slots.push(slot(slots.len(), e.probe, p.kind, name), gfp_load())?;
            let start = user_names.len() as u32;
            user_names.extend_from_slice(name, gfp_load())?;
            users.push(
                UserSlot {
                    name: (start, user_names.len() as u32),
                    roff: e.roff,
                    args: (e.arg_first, e.arg_first + e.nargs),
                },
                gfp_load(),
            )?;
        }
        let mut usdt_args = KVVec::with_capacity(user.args.len(), gfp_load())?;
        usdt_args.extend_from_slice(user.args, gfp_load())?;
        for d in 0..ndesc as u32 {
            let p = image.probe(d as usize).ok_or(EINVAL)?;
            if !probe::by_attach_list(p.kind) {
                // Its id is `probe::other_probe_id(&image, nlisted, d)`; a syscall
                // probe's function is the call's name.
                let func = image.probe_func(d as usize).unwrap_or_default();
                slots.push(slot(slots.len(), d, p.kind, func), gfp_load())?;
            }
        }
        let syscalls = SyscallSlots::new(slots.iter().map(|sl| {
            let nr = image.probe(sl.desc as usize).map_or(0, |p| p.arg);
            (sl.id, sl.kind, nr)
        }))?;
        // LOAD's checks admitted these: a failure here is a bug, refused like bad input.
        let vm = VmParams::new(image.nlocals(), opts.strsize as u32).map_err(|_| EINVAL)?;
        let s = KBox::new(
            Session {
                prog,
                desc_clauses,
                slots,
                counters,
                counter_lines,
                cpu_counters,
                cpus,
                pbuf_mem,
                agg_mem,
                agg_funcs,
                globals,
                vm,
                exited: AtomicBool::new(false),
                exit_status: AtomicI64::new(0),
                filled: AtomicU64::new(0),
                dynvars,
                pt,
                syscalls,
                specs,
                nspec: opts.nspec,
                nattach: attach.len() as u32,
                users,
                user_names,
                usdt_args,
                _charge: charge,
            },
            gfp_load(),
        )?;

        let mut probes = ProbeSet::new(s);
        // SAFETY: the handler is boxed in `probes`, which the consumer drops after
        // `providers` (`Loaded` says so and the consumer's `Program` keeps that order).
        let mut providers = unsafe { Providers::new(probes.handler()) };
        let mut nskipped = 0u32;
        let mut attached = KVec::from_elem(false, ndesc, gfp_load())?;
        for (i, a) in attach.iter().enumerate() {
            // Functions probe handling reaches itself are never probed (`probesafe`).
            if let Some(why) = a.name.to_str().ok().and_then(probesafe::refusal) {
                if a.optional {
                    nskipped += 1;
                    continue;
                }
                return Err(Refusal::unsafe_probe(i as u32, why).into());
            }
            let ret = probes.handler().slots[i].kind == ProbeKind::FbtReturn;
            match probes.add_kprobe(a.name, ret, i as u32) {
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
        // User-space probes: registered now, so that the entry that fails is named.
        for (j, e) in user.entries.iter().enumerate() {
            let i = attach.len() + j;
            let Some(path) = uprobe::names_str(user.names, e.path).and_then(|p| {
                CStr::from_bytes_with_nul(user.names.get(e.path as usize..)?.get(..=p.len())?).ok()
            }) else {
                return Err(EINVAL.into());
            };
            let at = UprobeAt {
                path,
                offset: e.offset,
                ref_ctr: e.ref_ctr,
                pid: e.pid,
            };
            match providers.add_uprobe(&at, i as u32) {
                Ok(()) => attached[e.probe as usize] = true,
                Err(_) if e.flags & abi::ATTACH_OPTIONAL != 0 => nskipped += 1,
                Err(err) => {
                    return Err(LoadFail {
                        kind: abi::LOADERR_UATTACH,
                        index: j as u32,
                        ..LoadFail::plain(err)
                    })
                }
            }
        }
        for i in nlisted..nslots {
            let sl = &probes.handler().slots[i];
            let desc = sl.desc as usize;
            attached[desc] = true;
            if sl.kind == ProbeKind::Tick {
                let period = probes.handler().prog.image().probe(desc).ok_or(EINVAL)?.arg;
                probes.add_tick(period, i as u32)?;
            } else if sl.kind == ProbeKind::Profile {
                let period = probes.handler().prog.image().probe(desc).ok_or(EINVAL)?.arg;
                providers.add_profile(period, i as u32)?;
            } else if sl.kind == ProbeKind::Tracepoint {
                let id = probes.handler().prog.image().probe(desc).ok_or(EINVAL)?.arg;
                if let Err(e) = providers.add_tracepoint(id, i as u32) {
                    return Err(LoadFail {
                        kind: abi::LOADERR_PROBE,
                        index: desc as u32,
                        ..LoadFail::plain(e)
                    });
                }
            }
        }
        for ret in [false, true] {
            if probes.handler().syscalls.any(ret) {
                providers.add_syscalls(ret)?;
            }
        }
        if let Some(d) = attached.iter().position(|&a| !a) {
            return Err(Refusal::probe_missing(d as u32).into());
        }
        let nprobes = probes.kprobes() as u32;
        let nuprobes = providers.uprobes() as u32;
        let mut agg_pending = KVec::with_capacity(ncpus as usize, gfp_load())?;
        for _ in 0..ncpus {
            agg_pending.push(None, gfp_load())?;
        }
        let drain = Drain {
            pbuf: pbuf_sw,
            agg: agg_sw,
            agg_pending,
            bounce: KVVec::from_elem(0u8, 64 << 10, gfp_load())?,
        };
        Ok(Loaded {
            providers,
            probes,
            drain,
            nprobes,
            nskipped,
            nuprobes,
        })
    }

    /// The user-space probe data of `slot`, if it is a user-space probe's.
    pub(super) fn user_slot(&self, slot: &ProbeSlot) -> Option<&UserSlot> {
        if !probe::is_user(slot.kind) {
            return None;
        }
        self.users.get(slot.id.wrapping_sub(self.nattach) as usize)
    }

    /// The whole `provider:module:function:name` of a user-space probe's slot.
    pub(super) fn user_name(&self, u: &UserSlot) -> &[u8] {
        self.user_names
            .get(u.name.0 as usize..u.name.1 as usize)
            .unwrap_or_default()
    }

    /// The USDT operands of a user-space probe's slot.
    pub(super) fn user_args(&self, u: &UserSlot) -> &[abi::UsdtArg] {
        self.usdt_args
            .get(u.args.0 as usize..u.args.1 as usize)
            .unwrap_or_default()
    }

    /// The counters of `slot` on `cpu`; `None` if either is out of range (probe context
    /// uses this too: it must not panic).
    pub(super) fn counter(&self, cpu: u32, slot: u32) -> Option<&SlotCounters> {
        let slot = slot as usize;
        if slot >= self.slots.len() {
            return None;
        }
        // Wrapping: a `u32` times a line count LOAD allocated cannot overflow a `usize`, and
        // the lookup bounds the result; no overflow check in every firing.
        let line = self.counters.get(
            (cpu as usize)
                .wrapping_mul(self.counter_lines)
                .wrapping_add(slot / 2),
        )?;
        line.0.get(slot % 2)
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
                let Some(k) = self.counter(c as u32, sl as u32) else {
                    continue;
                };
                st.fired += k.fired.load(Ordering::Relaxed);
                st.errors += k.errors.load(Ordering::Relaxed);
                st.recursion += k.recursion.load(Ordering::Relaxed);
            }
            st.records = self.cpu_counters[c].records.load(Ordering::Relaxed);
            st.drops = self.cpu_counters[c].drops.load(Ordering::Relaxed);
            st.specdrops = self.cpu_counters[c].spec_drops.load(Ordering::Relaxed);
            st.specbusy = self.cpu_counters[c].spec_busy.load(Ordering::Relaxed);
            st.specunavail = self.cpu_counters[c].spec_unavail.load(Ordering::Relaxed);
        }
        n
    }

    /// The clauses of `slot`'s description, in the order they run.
    pub(super) fn clauses_of(&self, slot: &ProbeSlot) -> &[u32] {
        let (start, end) = slot.clauses;
        self.desc_clauses
            .get(start as usize..end as usize)
            .unwrap_or_default()
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
        if matches!(sl.kind, ProbeKind::FbtReturn | ProbeKind::PidReturn) {
            out.flags |= abi::PROBE_RETURN;
        }
        out.func[..sl.func_len].copy_from_slice(sl.func());
        for c in 0..self.cpu_counters.len() {
            let Some(k) = self.counter(c as u32, i as u32) else {
                continue;
            };
            out.fired += k.fired.load(Ordering::Relaxed);
            out.errors += k.errors.load(Ordering::Relaxed);
            out.recursion += k.recursion.load(Ordering::Relaxed);
        }
    }

    /// Bytes of a principal buffer half (option `bufsize`).
    pub(crate) fn bufsize(&self) -> usize {
        self.pbuf_mem.len()
    }

    /// CPUs whose fill buffer is full.
    pub(crate) fn filled(&self) -> u64 {
        self.filled.load(Ordering::Relaxed)
    }

    /// Switches `cpu`'s principal buffer; `f` gets the records, oldest first, and the drops.
    /// A fill or ring buffer is taken only once the consumer is `stopped` (DTrace reads
    /// them then): before, `f` gets nothing and the CPU goes on with its buffer.
    pub(crate) fn take_pbuf<R>(
        &self,
        d: &mut Drain,
        cpu: u32,
        stopped: bool,
        f: impl FnOnce(&[u8], u64) -> R,
    ) -> Result<R> {
        let policy = self.prog.image().options().bufpolicy;
        if policy != buffer::POLICY_SWITCH && !stopped {
            return Ok(f(&[], 0));
        }
        let got = AtomicU64::new(0);
        // The cursor as the switch left it: its fields, for the half it names.
        let off = AtomicU64::new(0);
        let top = AtomicU64::new(0);
        let oldest = AtomicU64::new(0);
        let wrapped = AtomicBool::new(false);
        let drops = AtomicU64::new(0);
        xcall::on_cpu(cpu, &|ctx: &mut ActionCtx| {
            let st = &mut *self.cpus.local(ctx).room;
            // Commits and discards settle here on every CPU but the one that made them.
            self.settle_specs(cpu, st);
            got.store(st.pbuf.switch() as u64, Ordering::Relaxed);
            let c = &mut st.pbuf_cur;
            off.store(c.off as u64, Ordering::Relaxed);
            top.store(c.top as u64, Ordering::Relaxed);
            oldest.store(c.oldest as u64, Ordering::Relaxed);
            wrapped.store(c.wrapped, Ordering::Relaxed);
            drops.store(c.drops, Ordering::Relaxed);
            // The other half is empty; a full fill buffer stays full (nothing more is
            // recorded on this CPU, as in DTrace).
            *c = buffer::Cursor {
                full: c.full,
                ..buffer::Cursor::new(c.policy, c.reserve)
            };
        })?;
        let half = self
            .pbuf_mem
            .taken(&mut d.pbuf, cpu, got.load(Ordering::Relaxed) as usize)?;
        let cur = buffer::Cursor {
            off: off.load(Ordering::Relaxed) as usize,
            top: top.load(Ordering::Relaxed) as usize,
            oldest: oldest.load(Ordering::Relaxed) as usize,
            wrapped: wrapped.load(Ordering::Relaxed),
            ..buffer::Cursor::new(policy, 0)
        };
        let len = cur.order(half);
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
                    if let Some(h) = self.cpus.local(ctx).room.agg.as_mut() {
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
