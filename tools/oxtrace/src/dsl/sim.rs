//! A user-space environment that runs a compiled program's clauses on simulated probe
//! firings: the interpreter of `oxtrace_core::action` with plain maps behind the `Env` calls.
//! Used by the tests and by `--dry-run`-style checks.

use super::Compiled;
use oxtrace_core::action::{
    Builtin, Dict, Env, Fault, Item, Items, Key, Record, RecordKind, Vm, AGG_NARGS,
};
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
}

impl OwnedItem {
    /// Borrow as an [`Item`].
    pub fn as_item(&self) -> Item<'_> {
        match self {
            OwnedItem::Int(v, t) => Item::Int(*v, oxtrace_core::action::IntType(*t)),
            OwnedItem::Str(s) => Item::Str(s),
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
    /// arg0..arg5.
    pub args: [u64; 6],
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
}

impl Default for Firing {
    fn default() -> Self {
        Firing {
            kind: ProbeKind::Begin,
            func: String::new(),
            args: [0; 6],
            retval: 0,
            pid: 1000,
            tid: 1000,
            cpu: 0,
            timestamp: 1_000_000,
            uid: 0,
            execname: "test".into(),
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
    /// Aggregation updates in order: (aggregation, keys, [value, weight]).
    pub agg_updates: Vec<(u32, Vec<OwnedKey>, [u64; AGG_NARGS])>,
    /// Records.
    pub records: Vec<SimRecord>,
    /// Faults: (clause, fault).
    pub faults: Vec<(usize, Fault)>,
    /// Readable kernel memory.
    pub mem: Vec<(u64, Vec<u8>)>,
    /// `ptwrite()` values in order: (clause, value).
    pub ptwrites: Vec<(usize, u64)>,
}

struct FiringEnv<'s> {
    sim: &'s mut Sim,
    f: &'s Firing,
    clause: usize,
    probe_id: u64,
}

impl Env for FiringEnv<'_> {
    fn builtin(&mut self, b: Builtin) -> u64 {
        let f = self.f;
        let ret = f.kind == ProbeKind::FbtReturn;
        match b {
            Builtin::Pid => f.pid,
            Builtin::Tid => f.tid,
            Builtin::Cpu => f.cpu,
            Builtin::Timestamp => f.timestamp,
            Builtin::Walltimestamp => 1_700_000_000_000_000_000 + f.timestamp,
            Builtin::Arg0 => f.args[0],
            // fbt return probes: arg1 is the return value, as in DTrace.
            Builtin::Arg1 if ret => f.retval,
            Builtin::Arg1 => f.args[1],
            Builtin::Arg2 => f.args[2],
            Builtin::Arg3 => f.args[3],
            Builtin::Arg4 => f.args[4],
            Builtin::Arg5 => f.args[5],
            Builtin::Retval if ret => f.retval,
            Builtin::Uid => f.uid,
            Builtin::Id => self.probe_id,
            _ => 0,
        }
    }

    fn builtin_str(&mut self, b: Builtin, out: &mut [u8]) -> usize {
        let f = self.f;
        let s: &[u8] = match b {
            Builtin::Execname => f.execname.as_bytes(),
            Builtin::Probeprov => match f.kind {
                ProbeKind::FbtEntry | ProbeKind::FbtReturn => b"fbt",
                ProbeKind::Tick => b"profile",
                _ => b"dtrace",
            },
            Builtin::Probemod => b"vmlinux",
            Builtin::Probefunc => f.func.as_bytes(),
            Builtin::Probename => match f.kind {
                ProbeKind::FbtEntry => b"entry",
                ProbeKind::FbtReturn => b"return",
                ProbeKind::Begin => b"BEGIN",
                ProbeKind::End => b"END",
                ProbeKind::Tick => b"tick",
            },
            _ => b"",
        };
        let n = s.len().min(out.len());
        out[..n].copy_from_slice(&s[..n]);
        n
    }

    fn read_kernel(&mut self, addr: u64, out: &mut [u8]) -> bool {
        for (base, bytes) in &self.sim.mem {
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

    fn agg_update(&mut self, agg: u32, keys: &[Key<'_>], args: &[u64; AGG_NARGS]) -> bool {
        self.sim.agg_updates.push((agg, own(keys), *args));
        true
    }

    fn emit(&mut self, rec: &Record<'_>) -> bool {
        let items = Items::new(rec.data)
            .map(|i| match i {
                Item::Int(v, t) => OwnedItem::Int(v, t.0),
                Item::Str(s) => OwnedItem::Str(s.to_vec()),
            })
            .collect();
        self.sim.records.push(SimRecord {
            clause: self.clause,
            kind: rec.kind,
            id: rec.id,
            items,
        });
        true
    }

    fn ptwrite(&mut self, value: u64) -> bool {
        self.sim.ptwrites.push((self.clause, value));
        true
    }
}

/// Whether `name` matches the glob `pat` (`*` and `?`).
pub fn glob_match(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while n < name.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == name[n]) {
            p += 1;
            n += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = Some(p);
            mark = n;
            p += 1;
        } else if let Some(s) = star {
            p = s + 1;
            mark += 1;
            n = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

impl Sim {
    /// Fire a probe: run, in order, every clause enabled on a matching probe description.
    pub fn fire(&mut self, c: &Compiled, f: &Firing) {
        let img = Image::parse(&c.image).expect("compiled images parse");
        let need = img
            .verify(super::compile::SCRATCH_LIMIT)
            .expect("compiled images verify");
        let mut scratch = vec![0u8; need];
        let mut vm = Vm::new(&mut scratch, img.nlocals(), img.strsize()).expect("valid VM");
        for ci in 0..img.clause_count() {
            let cl = img.clause(ci).expect("clause in range");
            let first = cl.probe_first as usize;
            let hit = (first..first + cl.probe_count as usize).find(|&pi| {
                let p = img.probe(pi).expect("probe in range");
                p.kind == f.kind
                    && match p.kind {
                        ProbeKind::FbtEntry | ProbeKind::FbtReturn => {
                            glob_match(img.probe_func(pi).unwrap_or(b""), f.func.as_bytes())
                        }
                        _ => true,
                    }
            });
            let Some(pi) = hit else { continue };
            let v = img
                .verify_clause(ci, super::compile::SCRATCH_LIMIT)
                .expect("verified");
            let mut env = FiringEnv {
                sim: self,
                f,
                clause: ci,
                probe_id: pi as u64 + 1,
            };
            vm.begin_clause();
            if let Some(p) = v.pred {
                match vm.run(&p, &img, &mut env) {
                    Ok(0) => continue,
                    Ok(_) => {}
                    Err(e) => {
                        self.faults.push((ci, e));
                        continue;
                    }
                }
            }
            let mut env = FiringEnv {
                sim: self,
                f,
                clause: ci,
                probe_id: pi as u64 + 1,
            };
            if let Err(e) = vm.run(&v.act, &img, &mut env) {
                self.faults.push((ci, e));
            }
        }
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
