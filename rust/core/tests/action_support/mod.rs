// SPDX-License-Identifier: GPL-2.0

//! Test doubles for the action VM: a dictionary and an environment.

#![allow(dead_code)]

use oxtrace_core::action::*;
use std::collections::HashMap;

/// An owned key component.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OKey {
    I(u64),
    S(Vec<u8>),
}

pub fn own(keys: &[Key<'_>]) -> Vec<OKey> {
    keys.iter()
        .map(|k| match k {
            Key::Int(v) => OKey::I(*v),
            Key::Str(s) => OKey::S(s.to_vec()),
        })
        .collect()
}

/// An owned record item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OItem {
    I(u64, u8),
    S(Vec<u8>),
    M(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ORecord {
    pub kind: RecordKind,
    pub id: u32,
    pub items: Vec<OItem>,
}

pub struct TDict {
    pub ints: Vec<u64>,
    pub strtab: Vec<u8>,
    pub vars: Vec<VarInfo>,
    pub aggs: Vec<KeyLayout>,
    pub nfmts: u32,
    pub nlocals: u32,
    pub strsize: u32,
}

impl Default for TDict {
    fn default() -> Self {
        TDict {
            ints: vec![0x1122_3344_5566_7788, u64::MAX],
            strtab: b"\0hello\0world\0".to_vec(),
            vars: vec![
                VarInfo {
                    scope: Scope::Global,
                    keys: KeyLayout::NONE,
                    string: false,
                },
                VarInfo {
                    scope: Scope::Thread,
                    keys: KeyLayout::NONE,
                    string: false,
                },
                VarInfo {
                    scope: Scope::Assoc,
                    keys: KeyLayout::new(2, 0b01),
                    string: false,
                },
            ],
            aggs: vec![KeyLayout::NONE, KeyLayout::new(1, 0b1)],
            nfmts: 2,
            nlocals: 4,
            strsize: 32,
        }
    }
}

impl Dict for TDict {
    fn int_count(&self) -> u32 {
        self.ints.len() as u32
    }
    fn int_at(&self, idx: u32) -> Option<u64> {
        self.ints.get(idx as usize).copied()
    }
    fn strtab(&self) -> &[u8] {
        &self.strtab
    }
    fn var(&self, id: u32) -> Option<VarInfo> {
        self.vars.get(id as usize).copied()
    }
    fn agg(&self, id: u32) -> Option<KeyLayout> {
        self.aggs.get(id as usize).copied()
    }
    fn fmt_count(&self) -> u32 {
        self.nfmts
    }
    fn nlocals(&self) -> u32 {
        self.nlocals
    }
    fn strsize(&self) -> u32 {
        self.strsize
    }
}

pub struct TEnv {
    pub builtins: HashMap<u32, u64>,
    pub strs: HashMap<u32, Vec<u8>>,
    /// Readable kernel memory: base address and bytes.
    pub mem: Vec<(u64, Vec<u8>)>,
    pub globals: HashMap<u32, u64>,
    pub dyn_: HashMap<(u32, Vec<OKey>), u64>,
    /// Integer dynamic-variable loads the interpreter asked for.
    pub dyn_loads: usize,
    /// Refuse dynvar stores of new keys once this many exist.
    pub dyn_cap: usize,
    /// String-valued dynamic variables.
    pub dyn_str: HashMap<(u32, Vec<OKey>), Vec<u8>>,
    pub aggs: Vec<(u32, Vec<OKey>, [u64; 2])>,
    pub agg_fail: bool,
    pub records: Vec<ORecord>,
    /// Accept at most this many records.
    pub rec_cap: usize,
    /// `ptwrite()` values taken, in order.
    pub ptw: Vec<u64>,
    /// Accept at most this many `ptwrite()` values.
    pub ptw_cap: usize,
    /// Speculations (`None`: free) with their records.
    pub specs: Vec<Option<Vec<ORecord>>>,
    /// Records one speculation holds.
    pub spec_cap: usize,
    pub spec_drops: u64,
    pub spec_unavail: u64,
    /// Signals `raise()` sent.
    pub raised: Vec<u64>,
    /// Built-ins whose reading faults (`builtin_fallible`) with `BadAddr` at this address.
    pub faulting: HashMap<u32, u64>,
}

impl Default for TEnv {
    fn default() -> Self {
        let mut builtins = HashMap::new();
        for (i, v) in [
            (Builtin::Pid, 4242u64),
            (Builtin::Tid, 4243),
            (Builtin::Cpu, 3),
            (Builtin::Timestamp, 1_000_000_123),
            (Builtin::Walltimestamp, 1_700_000_000_000_000_000),
            (Builtin::Arg0, 10),
            (Builtin::Arg1, 11),
            (Builtin::Arg2, 12),
            (Builtin::Arg3, 13),
            (Builtin::Arg4, 14),
            (Builtin::Arg5, 15),
            (Builtin::Retval, (-5i64) as u64),
            (Builtin::Uid, 1000),
            (Builtin::Gid, 100),
            (Builtin::Ppid, 1),
            (Builtin::Id, 77),
            (Builtin::Curthread, 0xffff_8880_0000_1000),
        ] {
            builtins.insert(i as u32, v);
        }
        let mut strs = HashMap::new();
        strs.insert(Builtin::Execname as u32, b"bash".to_vec());
        strs.insert(Builtin::Probeprov as u32, b"fbt".to_vec());
        strs.insert(Builtin::Probemod as u32, b"vmlinux".to_vec());
        strs.insert(Builtin::Probefunc as u32, b"do_sys_open".to_vec());
        strs.insert(Builtin::Probename as u32, b"entry".to_vec());
        TEnv {
            builtins,
            strs,
            mem: vec![(0x1000, (0u8..=255).collect())],
            globals: HashMap::new(),
            dyn_: HashMap::new(),
            dyn_loads: 0,
            dyn_cap: usize::MAX,
            dyn_str: HashMap::new(),
            aggs: vec![],
            agg_fail: false,
            records: vec![],
            rec_cap: usize::MAX,
            ptw: vec![],
            ptw_cap: usize::MAX,
            specs: vec![None, None],
            spec_cap: 2,
            spec_drops: 0,
            spec_unavail: 0,
            raised: vec![],
            faulting: HashMap::new(),
        }
    }
}

impl Env for TEnv {
    fn builtin(&mut self, b: Builtin) -> u64 {
        self.builtins.get(&(b as u32)).copied().unwrap_or(0)
    }
    fn builtin_fallible(&mut self, b: Builtin) -> Result<u64, FaultKind> {
        match self.faulting.get(&(b as u32)) {
            Some(&addr) => Err(FaultKind::BadAddr(addr)),
            None => Ok(self.builtin(b)),
        }
    }
    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize {
        let s = self.strs.get(&(b as u32)).cloned().unwrap_or_default();
        let n = s.len().min(out.len());
        out[..n].copy_from_slice(&s[..n]);
        n
    }
    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool {
        for (base, bytes) in &self.mem {
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
    fn global_load(&mut self, id: u32) -> u64 {
        self.globals.get(&id).copied().unwrap_or(0)
    }
    fn global_store(&mut self, id: u32, value: u64) {
        self.globals.insert(id, value);
    }
    fn dynvar_load(&mut self, var: u32, keys: &[Key<'_>]) -> u64 {
        self.dyn_loads += 1;
        self.dyn_.get(&(var, own(keys))).copied().unwrap_or(0)
    }
    fn dynvar_store(&mut self, var: u32, keys: &[Key<'_>], value: u64) -> bool {
        let k = (var, own(keys));
        if value == 0 {
            self.dyn_.remove(&k);
            return true;
        }
        if !self.dyn_.contains_key(&k) && self.dyn_.len() >= self.dyn_cap {
            return false;
        }
        self.dyn_.insert(k, value);
        true
    }
    fn dynvar_load_str(&mut self, var: u32, keys: &[Key<'_>], out: &mut [u8]) -> usize {
        let s = self
            .dyn_str
            .get(&(var, own(keys)))
            .cloned()
            .unwrap_or_default();
        let n = s.len().min(out.len());
        out[..n].copy_from_slice(&s[..n]);
        n
    }
    fn dynvar_store_str(&mut self, var: u32, keys: &[Key<'_>], s: &[u8]) -> bool {
        let k = (var, own(keys));
        if s.is_empty() {
            self.dyn_str.remove(&k);
            return true;
        }
        if !self.dyn_str.contains_key(&k) && self.dyn_str.len() >= self.dyn_cap {
            return false;
        }
        self.dyn_str.insert(k, s.to_vec());
        true
    }
    fn agg_update(&mut self, agg: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool {
        if self.agg_fail {
            return false;
        }
        self.aggs.push((agg, own(keys), *args));
        true
    }
    fn emit(&mut self, rec: &Record<'_>) -> bool {
        if self.records.len() >= self.rec_cap {
            return false;
        }
        let mut it = Items::new(rec.data);
        let items: Vec<OItem> = it
            .by_ref()
            .map(|i| match i {
                Item::Int(v, t) => OItem::I(v, t.0),
                Item::Str(s) => OItem::S(s.to_vec()),
                Item::Mem(s) => OItem::M(s.to_vec()),
            })
            .collect();
        assert!(!it.bad, "malformed record data");
        self.records.push(ORecord {
            kind: rec.kind,
            id: rec.id,
            items,
        });
        true
    }
    fn ptwrite(&mut self, value: u64) -> bool {
        if self.ptw.len() >= self.ptw_cap {
            return false;
        }
        self.ptw.push(value);
        true
    }
    fn speculation(&mut self) -> u64 {
        match self.specs.iter().position(|s| s.is_none()) {
            Some(i) => {
                self.specs[i] = Some(vec![]);
                i as u64 + 1
            }
            None => {
                self.spec_unavail += 1;
                0
            }
        }
    }
    fn emit_spec(&mut self, id: u64, rec: &Record<'_>) -> bool {
        let Some(Some(buf)) = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.specs.get_mut(i))
        else {
            return false;
        };
        if buf.len() >= self.spec_cap {
            self.spec_drops += 1;
            return false;
        }
        let items = Items::new(rec.data)
            .map(|i| match i {
                Item::Int(v, t) => OItem::I(v, t.0),
                Item::Str(s) => OItem::S(s.to_vec()),
                Item::Mem(s) => OItem::M(s.to_vec()),
            })
            .collect();
        buf.push(ORecord {
            kind: rec.kind,
            id: rec.id,
            items,
        });
        true
    }
    fn spec_end(&mut self, id: u64, commit: bool) -> bool {
        let Some(slot) = (id as usize)
            .checked_sub(1)
            .and_then(|i| self.specs.get_mut(i))
        else {
            return false;
        };
        if let Some(recs) = slot.take() {
            if commit {
                self.records.extend(recs);
            }
        }
        true
    }
    fn raise(&mut self, sig: u64) -> bool {
        self.raised.push(sig);
        (1..=64).contains(&sig)
    }
    fn chill(&mut self, ns: u64) -> bool {
        ns <= oxtrace_core::limits::CHILL_MAX_NS
    }
    fn progenyof(&mut self, pid: u64) -> bool {
        // The process, its parent and init.
        [Builtin::Pid, Builtin::Ppid]
            .iter()
            .any(|&b| self.builtin(b) == pid)
            || pid == 1
    }
}

pub fn code_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

pub const LIMIT: usize = 1 << 20;

/// Verify `words` against `dict`.
pub fn check(words: &[u64], dict: &TDict) -> Result<(), VerifyError> {
    let b = code_bytes(words);
    verify(Code::new(&b).unwrap(), dict, LIMIT).map(|_| ())
}

/// Runs verified (or verified and decoded) `v` once, as one clause's actions, on a fresh
/// VM with the scratch it needs; the result and the losses.
pub fn run_verified(
    v: &Verified<'_>,
    dict: &TDict,
    env: &mut TEnv,
) -> (Result<u64, Fault>, Losses) {
    run_verified_as(v, dict, env, true)
}

/// [`run_verified`], as a firing whose arguments can't fault (`infallible`) or may
/// (`Vm::with_fallible_args`).
pub fn run_verified_as(
    v: &Verified<'_>,
    dict: &TDict,
    env: &mut TEnv,
    infallible: bool,
) -> (Result<u64, Fault>, Losses) {
    let mut scratch = vec![0u8; scratch_size(dict.nlocals, dict.strsize, v.string_allocs())];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, dict.nlocals, dict.strsize).unwrap();
    dirty_registers(&mut vm, dict);
    if !infallible {
        vm.with_fallible_args();
    }
    vm.begin_clause();
    let r = vm.run(v, dict, env);
    (r, vm.losses())
}

/// Leaves a distinct value in every register, as an earlier clause on the CPU may: the
/// program run next must not read a register it did not set (a shape sets only its
/// constants' slots, an instruction run only the registers its program uses).
fn dirty_registers(vm: &mut Vm<'_>, dict: &TDict) {
    let mut p: Vec<u64> = (1..NREGS as u8)
        .map(|r| insn(Op::Ldi, r, 0, 0, 0x5a5a_0000 | u32::from(r)))
        .collect();
    p.push(insn(Op::Ret, 0, 0, 0, 0));
    let b = code_bytes(&p);
    let v = verify(Code::new(&b).unwrap(), dict, LIMIT).expect("the register filler verifies");
    vm.begin_clause();
    assert_eq!(vm.run(&v, dict, &mut TEnv::default()), Ok(0));
}

/// Verifies `words` and runs them in the form the kernel runs (decoded: `decoded_runs_as_raw`
/// checks it against the raw code); whether the program runs in one step, the result and
/// the losses.
pub fn run_decoded(
    words: &[u64],
    dict: &TDict,
    env: &mut TEnv,
) -> (bool, Result<u64, Fault>, Losses) {
    let b = code_bytes(words);
    let v = verify(Code::new(&b).unwrap(), dict, LIMIT).expect("program must verify");
    let mut buf = vec![DInsn::NOP; words.len()];
    let v = v
        .decode_into(dict, &mut buf)
        .expect("verified code decodes");
    let (r, losses) = run_verified(&v, dict, env);
    (v.shaped(), r, losses)
}

/// Verify and run `words` (decoded, as the kernel runs them); the result.
pub fn run_with(words: &[u64], dict: &TDict, env: &mut TEnv) -> Result<u64, Fault> {
    run_decoded(words, dict, env).1
}

pub fn run(words: &[u64]) -> (Result<u64, Fault>, TEnv) {
    let mut env = TEnv::default();
    let r = run_with(words, &TDict::default(), &mut env);
    (r, env)
}
