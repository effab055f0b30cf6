//! A user-space environment that runs a compiled program's clauses on simulated probe
//! firings: the interpreter of `oxtrace_core::action` with plain maps behind the `Env` calls.
//! Used by the tests and by `--dry-run`-style checks.

use super::attach::EnabledIds;
use crate::dsl::compile::SCRATCH_LIMIT;
use crate::dsl::Compiled;
use crate::providers::fbt::glob_match;
use crate::sym::stacks::Stack;
use oxtrace_core::action::{
    Builtin, Dict, Env, Fault, Item, Items, Key, Record, RecordKind, Vm, VmState, AGG_NARGS,
};
use oxtrace_core::probe::{self, ArgSource, ClauseEnv};
use oxtrace_core::program::{Image, ProbeKind};
use std::collections::HashMap;

/// An owned key component.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OwnedKey {
    /// An integer.
    Int(u64),
    /// A string.
    Str(Vec<u8>),
}

fn own(keys: &[Key<'_>]) -> Vec<OwnedKey> {
    keys.iter()
        .map(|k| match k {
            Key::Int(v) => OwnedKey::Int(*v),
            Key::Str(s) => OwnedKey::Str(s.to_vec()),
        })
        .collect()
}

/// An owned record item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedItem {
    /// An integer and its type code.
    Int(u64, u8),
    /// A string.
    Str(Vec<u8>),
    /// Raw memory.
    Mem(Vec<u8>),
}

impl OwnedItem {
    /// Borrow as an [`Item`].
    pub fn as_item(&self) -> Item<'_> {
        match self {
            OwnedItem::Int(v, t) => Item::Int(*v, oxtrace_core::action::IntType(*t)),
            OwnedItem::Str(s) => Item::Str(s),
            OwnedItem::Mem(s) => Item::Mem(s),
        }
    }
}

/// A record the simulated buffer received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRecord {
    /// Clause that emitted it.
    pub clause: usize,
    /// Kind.
    pub kind: RecordKind,
    /// Format or aggregation id.
    pub id: u32,
    /// Items.
    pub items: Vec<OwnedItem>,
}

/// One simulated probe firing.
#[derive(Clone, Debug)]
pub struct Firing {
    /// Kind of probe that fires.
    pub kind: ProbeKind,
    /// Function (fbt).
    pub func: String,
    /// Period of the tick that fires, in ns; 0: every tick probe fires.
    pub period_ns: u64,
    /// arg0..arg5.
    pub args: [u64; 6],
    /// arg6..arg9 (on the stack at an x86-64 function entry).
    pub stack_args: [u64; 4],
    /// Return value (return probes).
    pub retval: u64,
    /// Process id.
    pub pid: u64,
    /// Thread id.
    pub tid: u64,
    /// CPU.
    pub cpu: u64,
    /// Timestamp, ns.
    pub timestamp: u64,
    /// User id.
    pub uid: u64,
    /// Process name.
    pub execname: String,
    /// The process's ancestors, parent first (`progenyof()`).
    pub ancestors: Vec<u64>,
    /// Kernel stack (`stack()`), the probed function's caller first.
    pub kstack: Vec<u64>,
    /// User PC and frame pointer (`ustack()` walks from them through `Sim::user_mem`);
    /// `None` for a kernel thread.
    pub uregs: Option<(u64, u64)>,
}

impl Default for Firing {
    fn default() -> Self {
        Firing {
            kind: ProbeKind::Begin,
            func: String::new(),
            period_ns: 0,
            args: [0; 6],
            stack_args: [0; 4],
            retval: 0,
            pid: 1000,
            tid: 1000,
            cpu: 0,
            timestamp: 1_000_000,
            uid: 0,
            execname: "test".into(),
            ancestors: vec![1],
            kstack: Vec::new(),
            uregs: None,
        }
    }
}

/// The simulated world.
#[derive(Default)]
pub struct Sim {
    /// Global scalars.
    pub globals: HashMap<u32, u64>,
    /// Dynamic variables.
    pub dynvars: HashMap<(u32, Vec<OwnedKey>), u64>,
    /// String-valued dynamic variables.
    pub dynstrs: HashMap<(u32, Vec<OwnedKey>), Vec<u8>>,
    /// Aggregation updates in order: (aggregation, keys, [value, weight]).
    pub agg_updates: Vec<(u32, Vec<OwnedKey>, [u64; AGG_NARGS])>,
    /// Records.
    pub records: Vec<SimRecord>,
    /// Faults: (clause, fault).
    pub faults: Vec<(usize, Fault)>,
    /// Readable kernel memory.
    pub mem: Vec<(u64, Vec<u8>)>,
    /// User memory of the firing's process, read by `copyinstr` and written by `copyout`.
    pub user_mem: Vec<(u64, Vec<u8>)>,
    /// `ptwrite()` values in order: (clause, value).
    pub ptwrites: Vec<(usize, u64)>,
    /// The kernel's probeable functions, which fbt globs expand to; empty: only the
    /// firing's function.
    pub functions: Vec<String>,
    /// Speculations by id - 1 (`None`: free): their records and the buffer bytes used.
    pub specs: Vec<Option<(Vec<SimRecord>, usize)>>,
    /// Records that did not fit their speculative buffer (`specsize`).
    pub spec_drops: u64,
    /// `speculation()` calls that found every speculation active.
    pub spec_unavail: u64,
    /// Signals `raise()` sent, in order.
    pub raised: Vec<u64>,
    /// Nanoseconds `chill()` would have spun.
    pub chilled: u64,
    /// The simulated CPU's scratch, kept from firing to firing as the kernel keeps each
    /// CPU's (its strtok slot lives on).
    pub scratch: Vec<u8>,
    /// The stacks `stack()` and `ustack()` defined, by id (also kept in the run's table,
    /// `crate::sym::stacks`, so that they render).
    pub stacks: HashMap<u64, Stack>,
}

fn owned_items(rec: &Record<'_>) -> Vec<OwnedItem> {
    Items::new(rec.data)
        .map(|i| match i {
            Item::Int(v, t) => OwnedItem::Int(v, t.0),
            Item::Str(s) => OwnedItem::Str(s.to_vec()),
            Item::Mem(s) => OwnedItem::Mem(s.to_vec()),
        })
        .collect()
}

/// One simulated probe: a description, its enabled probe id and (ticks) period.
struct FiringEnv<'s> {
    sim: &'s mut Sim,
    f: &'s Firing,
    clause: usize,
    probe_id: u32,
    period_ns: u64,
    /// The enabled probe id of each ERROR description: (description, id).
    error_ids: &'s [(u32, u32)],
    /// While ERROR's clauses run: the faulting probe's id.
    err: Option<u32>,
    /// ERROR's arguments (`ClauseEnv::error_args`).
    err_args: [u64; 6],
    /// Option `specsize`.
    specsize: usize,
    /// The EPIDs of the probes (for `epid`), numbered as LOAD numbers them.
    epids: &'s EnabledIds,
}

impl FiringEnv<'_> {
    fn kind(&self) -> ProbeKind {
        if self.err.is_some() {
            ProbeKind::Error
        } else {
            self.f.kind
        }
    }
}

impl Env for FiringEnv<'_> {
    fn builtin(&mut self, b: Builtin) -> u64 {
        let f = self.f;
        if let Some(src) = probe::arg_source(self.kind(), b) {
            return match src {
                ArgSource::Arg(n) => match &self.err {
                    Some(_) => self.err_args.get(n as usize).copied().unwrap_or(0),
                    None => f
                        .args
                        .iter()
                        .chain(&f.stack_args)
                        .nth(n as usize)
                        .copied()
                        .unwrap_or(0),
                },
                ArgSource::Retval => f.retval,
                ArgSource::Zero => 0,
                // The firing's arguments stand for the call's and the sampled PCs.
                ArgSource::SyscallArg(n) => f.args.get(n as usize).copied().unwrap_or(0),
                ArgSource::KernelPc => f.args[0],
                ArgSource::UserPc => f.args[1],
                ArgSource::Record => f.args[0],
                // The firing's arguments stand for the return offset and the operands.
                ArgSource::ReturnOffset => f.args[0],
                ArgSource::UsdtArg(n) => f.args.get(n as usize).copied().unwrap_or(0),
            };
        }
        match b {
            Builtin::Pid => f.pid,
            Builtin::Tid => f.tid,
            Builtin::Cpu => f.cpu,
            Builtin::Timestamp => f.timestamp,
            // The simulated thread has run since the clock started.
            Builtin::Vtimestamp => f.timestamp,
            Builtin::Errno => probe::errno(f.kind, self.builtin(Builtin::Retval)),
            Builtin::Walltimestamp => 1_700_000_000_000_000_000 + f.timestamp,
            Builtin::Uid => f.uid,
            Builtin::Id => self.probe_id.into(),
            Builtin::Epid => self.epids.epid(self.probe_id, self.clause as u32),
            _ => 0,
        }
    }

    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize {
        let f = self.f;
        let kind = self.kind();
        let func = if self.err.is_some() { "" } else { &f.func };
        match b {
            Builtin::Execname => probe::copy(out, f.execname.as_bytes()),
            Builtin::Probeprov | Builtin::Probemod | Builtin::Probefunc | Builtin::Probename => {
                probe::describe(kind, func.as_bytes(), self.period_ns, b, out).unwrap_or(0)
            }
            _ => 0,
        }
    }

    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool {
        read_in(&self.sim.mem, addr, out)
    }

    fn read_user(&mut self, addr: u64, out: &mut [u8]) -> bool {
        read_in(&self.sim.user_mem, addr, out)
    }

    fn write_user(&mut self, addr: u64, data: &[u8]) -> bool {
        let Some(dst) = find_in(&mut self.sim.user_mem, addr, data.len()) else {
            return false;
        };
        dst.copy_from_slice(data);
        true
    }

    fn global_load(&mut self, id: u32) -> u64 {
        self.sim.globals.get(&id).copied().unwrap_or(0)
    }

    fn global_store(&mut self, id: u32, value: u64) {
        self.sim.globals.insert(id, value);
    }

    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64 {
        self.sim
            .dynvars
            .get(&(var, own(keys)))
            .copied()
            .unwrap_or(0)
    }

    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool {
        if value == 0 {
            self.sim.dynvars.remove(&(var, own(keys)));
        } else {
            self.sim.dynvars.insert((var, own(keys)), value);
        }
        true
    }

    fn dynvar_load_str(&mut self, var: u32, keys: &[Key<'_>], out: &mut [u8]) -> usize {
        match self.sim.dynstrs.get(&(var, own(keys))) {
            Some(s) => probe::copy(out, s),
            None => 0,
        }
    }

    fn dynvar_store_str(&mut self, var: u32, keys: &[Key<'_>], s: &[u8]) -> bool {
        if s.is_empty() {
            self.sim.dynstrs.remove(&(var, own(keys)));
        } else {
            self.sim.dynstrs.insert((var, own(keys)), s.to_vec());
        }
        true
    }

    fn agg_update(&mut self, agg: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool {
        self.sim.agg_updates.push((agg, own(keys), *args));
        true
    }

    fn emit(&mut self, rec: &Record<'_>) -> bool {
        self.sim.records.push(SimRecord {
            clause: self.clause,
            kind: rec.kind,
            id: rec.id,
            items: owned_items(rec),
        });
        true
    }

    fn ptwrite(&mut self, value: u64) -> bool {
        self.sim.ptwrites.push((self.clause, value));
        true
    }

    fn progenyof(&mut self, pid: u64) -> bool {
        self.f.pid == pid || self.f.ancestors.contains(&pid)
    }

    fn raise(&mut self, sig: u64) -> bool {
        if !(1..=64).contains(&sig) {
            return false;
        }
        self.sim.raised.push(sig);
        true
    }

    fn chill(&mut self, ns: u64) -> bool {
        // One firing's worth of DTrace's budget (the simulator has no clock to refill it).
        if self.sim.chilled.saturating_add(ns) > oxtrace_core::limits::CHILL_MAX_NS {
            return false;
        }
        self.sim.chilled += ns;
        true
    }

    fn speculation(&mut self) -> u64 {
        match self.sim.specs.iter().position(|s| s.is_none()) {
            Some(i) => {
                self.sim.specs[i] = Some((vec![], 0));
                i as u64 + 1
            }
            None => {
                self.sim.spec_unavail += 1;
                0
            }
        }
    }

    fn emit_spec(&mut self, id: u64, rec: &Record<'_>) -> bool {
        let specsize = self.specsize;
        let clause = self.clause;
        let sim = &mut *self.sim;
        let Some(Some((recs, used))) = (id as usize)
            .checked_sub(1)
            .and_then(|i| sim.specs.get_mut(i))
        else {
            return false;
        };
        let len = oxtrace_core::buffer::record_len(rec.data.len()).unwrap_or(usize::MAX);
        if used.saturating_add(len) > specsize {
            sim.spec_drops += 1;
            return false;
        }
        *used += len;
        recs.push(SimRecord {
            clause,
            kind: rec.kind,
            id: rec.id,
            items: owned_items(rec),
        });
        true
    }

    fn spec_end(&mut self, id: u64, commit: bool) -> bool {
        let Some(slot) = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.sim.specs.get_mut(i))
        else {
            return false;
        };
        if let Some((recs, _)) = slot.take() {
            if commit {
                self.sim.records.extend(recs);
            }
        }
        true
    }

    fn kernel_stack(&mut self, out: &mut [u64]) -> usize {
        let n = self.f.kstack.len().min(out.len());
        out[..n].copy_from_slice(&self.f.kstack[..n]);
        n
    }

    fn kernel_stack_depth(&mut self) -> usize {
        self.f.kstack.len()
    }

    fn stack_def(&mut self, user: bool, id: u64, pid: u64, pcs: &[u64]) -> bool {
        use oxtrace_core::stack::{write_def, Def, DEF_KERNEL, DEF_MAX_BYTES, DEF_USER};
        let mut b = [0u8; DEF_MAX_BYTES];
        let n = write_def(id, pid, pcs, &mut b);
        let kind = if user { DEF_USER } else { DEF_KERNEL };
        if let Some(d) = Def::parse(kind, &b[..n]) {
            crate::sym::stacks::define(&d);
        }
        self.sim.stacks.insert(
            id,
            Stack {
                user,
                pid,
                pcs: pcs.to_vec(),
            },
        );
        true
    }

    fn user_regs(&mut self) -> Option<oxtrace_core::ustack::UserRegs> {
        self.f
            .uregs
            .map(|(pc, fp)| oxtrace_core::ustack::UserRegs { pc, fp })
    }

    // The simulated thread has a PC and a frame pointer; its other registers read 0.
    fn user_reg(&mut self, idx: u64) -> Option<u64> {
        self.f.uregs.map(|(pc, fp)| match idx {
            16 => pc,
            4 => fp,
            _ => 0,
        })
    }
}

impl ClauseEnv for FiringEnv<'_> {
    fn enter_clause(&mut self, clause: u32) {
        self.clause = clause as usize;
    }

    fn fault(&mut self, clause: u32, fault: Fault) {
        self.sim.faults.push((clause as usize, fault));
    }

    fn error_args(&mut self) -> &mut [u64; 6] {
        &mut self.err_args
    }

    fn enter_error(&mut self, desc: u32) -> bool {
        if self.err.is_some() || self.f.kind == ProbeKind::Error {
            return false;
        }
        let Some(&(_, id)) = self.error_ids.iter().find(|e| e.0 == desc) else {
            return false;
        };
        self.err = Some(self.probe_id);
        self.probe_id = id;
        true
    }

    fn leave_error(&mut self) {
        if let Some(id) = self.err.take() {
            self.probe_id = id;
        }
    }
}

impl Sim {
    /// Fire a probe: every probe a run of `c` would have on `f`'s function (or of `f`'s
    /// kind) fires, in the order of their enabled probe ids, and runs the clauses of its
    /// description as the kernel does (`oxtrace_core::probe`).
    ///
    /// The probes are numbered as LOAD numbers them: the attach list holds, for each fbt
    /// description in image order, the [`Sim::functions`] its glob matches, as a run sends it.
    pub fn fire(&mut self, c: &Compiled, f: &Firing) {
        let img = Image::parse(&c.image).expect("compiled images parse");
        let need = img.verify(SCRATCH_LIMIT).expect("compiled images verify");
        let clauses: Vec<_> = (0..img.clause_count())
            .map(|ci| img.verify_clause(ci, SCRATCH_LIMIT).expect("verified"))
            .collect();
        let mut scratch = std::mem::take(&mut self.scratch);
        if scratch.len() != need {
            scratch = vec![0u8; need];
        }
        let nspec = img.options().nspec as usize;
        if self.specs.len() != nspec {
            self.specs.resize(nspec, None);
        }
        let mut vmst = VmState::new();
        let mut vm =
            Vm::new(&mut vmst, &mut scratch, img.nlocals(), img.strsize()).expect("valid VM");
        let world = if self.functions.is_empty() {
            std::slice::from_ref(&f.func)
        } else {
            &self.functions[..]
        };
        let descs = (0..img.probe_count()).filter_map(|pi| img.probe(pi).map(|p| (pi, p)));
        let mut attach: Vec<(usize, &str)> = Vec::new();
        for (pi, p) in descs.clone() {
            if probe::by_attach_list(p.kind) {
                let pat = String::from_utf8_lossy(img.probe_func(pi).unwrap_or(b"")).into_owned();
                attach.extend(
                    world
                        .iter()
                        .filter(|name| glob_match(&pat, name))
                        .map(|name| (pi, name.as_str())),
                );
            }
        }
        let mut probes: Vec<(u32, usize)> = Vec::new();
        for (pi, p) in descs {
            if p.kind != f.kind
                || (matches!(p.kind, ProbeKind::Tick | ProbeKind::Profile)
                    && f.period_ns != 0
                    && p.arg != f.period_ns)
                || (matches!(
                    p.kind,
                    ProbeKind::SyscallEntry | ProbeKind::SyscallReturn | ProbeKind::Tracepoint
                ) && img.probe_func(pi) != Some(f.func.as_bytes()))
            {
                continue;
            }
            let id = if probe::by_attach_list(p.kind) {
                match attach.iter().position(|&a| a == (pi, f.func.as_str())) {
                    Some(i) => i as u32,
                    None => continue,
                }
            } else {
                probe::other_probe_id(&img, attach.len(), pi).expect("not attached")
            };
            probes.push((id, pi));
        }
        probes.sort_unstable();
        // LOAD's slots: the attach list's, then one per other description.
        let slot_descs: Vec<u32> = attach
            .iter()
            .map(|&(pi, _)| pi as u32)
            .chain(
                (0..img.probe_count())
                    .filter(|&pi| {
                        img.probe(pi)
                            .is_some_and(|p| !probe::by_attach_list(p.kind))
                    })
                    .map(|pi| pi as u32),
            )
            .collect();
        let epids = EnabledIds::new(&img, &slot_descs);
        let error_ids: Vec<(u32, u32)> = (0..img.probe_count())
            .filter(|&pi| img.probe(pi).map(|p| p.kind) == Some(ProbeKind::Error))
            .filter_map(|pi| Some((pi as u32, probe::other_probe_id(&img, attach.len(), pi)?)))
            .collect();
        for (id, pi) in probes {
            let mut env = FiringEnv {
                sim: self,
                f,
                clause: 0,
                probe_id: id,
                period_ns: img.probe(pi).map_or(0, |p| p.arg),
                error_ids: &error_ids,
                err: None,
                err_args: [0; 6],
                specsize: img.options().specsize as usize,
                epids: &epids,
            };
            let order = probe::clauses_of(&img, pi as u32);
            probe::run_clauses(&mut vm, &img, &clauses, order, &mut env);
        }
        self.scratch = scratch;
    }

    /// Format the printf records received so far, concatenated.
    pub fn printf_output(&self, c: &Compiled) -> String {
        let mut out = Vec::new();
        for r in &self.records {
            if r.kind == RecordKind::Printf {
                let items: Vec<Item<'_>> = r.items.iter().map(|i| i.as_item()).collect();
                out.extend(c.format_printf(r.id, &items).unwrap_or_default());
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// Reads `out.len()` bytes at `addr` from one of the regions of `mem`.
fn read_in(mem: &[(u64, Vec<u8>)], addr: u64, out: &mut [u8]) -> bool {
    for (base, bytes) in mem {
        if addr >= *base {
            let o = (addr - base) as usize;
            if let Some(src) = o.checked_add(out.len()).and_then(|e| bytes.get(o..e)) {
                out.copy_from_slice(src);
                return true;
            }
        }
    }
    false
}

/// The `len` bytes at `addr` of one of `mem`'s regions, to write them.
fn find_in(mem: &mut [(u64, Vec<u8>)], addr: u64, len: usize) -> Option<&mut [u8]> {
    mem.iter_mut().find_map(|(base, bytes)| {
        let o = usize::try_from(addr.checked_sub(*base)?).ok()?;
        bytes.get_mut(o..o.checked_add(len)?)
    })
}
