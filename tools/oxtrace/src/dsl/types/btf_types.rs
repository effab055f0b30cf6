//! Kernel types from BTF in the compiler's type table: `struct`, `union`, typedef and enum
//! names a program does not declare, the C types of fbt's `args[]`, and `curthread`.
//!
//! A kernel type becomes an ordinary entry of [`TypeEnv`], as if the program had declared
//! it, so member access, casts, `sizeof`, `offsetof` and the fault-free loads are the D
//! compiler's own. A struct is imported with everything it reaches, through pointers too
//! (a worklist, no recursion through pointers), the first time a program names it.

use super::super::syntax::ast::TypeName;
use super::{Member, SouDef, Ty, TypeEnv, I64};
use crate::btf::{Btf, Kind, NameKind};
use oxtrace_core::program::ProbeKind;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The kernel's BTF and what the compiler imported from it.
#[derive(Clone, Debug, Default)]
pub struct BtfTypes {
    /// The kernel's types, if it has BTF.
    pub btf: Option<Arc<Btf>>,
    /// Imported structs and unions: index in [`TypeEnv::sous`] by BTF id.
    sou_ids: HashMap<u32, usize>,
    /// Indexes of imported structs and unions (their errors use C's words).
    pub(crate) imported: HashSet<usize>,
    /// Imported structs whose members are not filled yet.
    todo: Vec<(usize, u32)>,
    /// The probes of the clause being compiled: kind and function (or glob).
    pub(crate) clause: Vec<(ProbeKind, String)>,
    /// Why the last `args[i]` compiled is untyped, for the errors of its uses.
    pub(crate) untyped: Option<String>,
    /// The kernel's symbols for external variables; `None`: the running kernel's.
    pub(crate) ksyms: Option<Arc<crate::sym::ksym::Ksyms>>,
}

impl BtfTypes {
    /// Nothing imported yet from `btf`.
    pub fn new(btf: Option<Arc<Btf>>, ksyms: Option<Arc<crate::sym::ksym::Ksyms>>) -> BtfTypes {
        BtfTypes {
            btf,
            ksyms,
            ..BtfTypes::default()
        }
    }
}

/// Deepest chain of pointers, arrays and qualifiers followed (a hostile blob could loop).
const MAX_DEPTH: u32 = 32;

/// What a program sees when the kernel has no BTF, for errors about kernel types.
pub(crate) const NO_BTF: &str = "the kernel has no BTF (/sys/kernel/btf/vmlinux: \
    CONFIG_DEBUG_INFO_BTF), so kernel types are unknown: declare it in D";

impl TypeEnv {
    /// Import the kernel types `tn` names that the program does not declare.
    pub(crate) fn btf_prepare(&mut self, tn: &TypeName) {
        match tn {
            TypeName::Ptr(t) | TypeName::Array(t, _) => self.btf_prepare(t),
            _ => {
                if let Some(t) = self.scope_prepare(tn) {
                    self.btf_import(&t);
                }
            }
        }
    }

    /// Import kernel type `tn` (a struct, union, typedef or enum name) if the program does
    /// not declare it.
    pub(super) fn btf_import(&mut self, tn: &TypeName) {
        let Some(btf) = self.btf.btf.clone() else {
            return;
        };
        match tn {
            TypeName::Sou(n, union) if self.sou(n, *union).is_none() => {
                let ns = if *union {
                    NameKind::Union
                } else {
                    NameKind::Struct
                };
                if let Some(id) = btf.find(ns, n) {
                    self.btf_ty(&btf, id);
                }
            }
            TypeName::Named(n) if !self.typedefs.contains_key(n) => {
                if let Some(id) = btf.find(NameKind::Typedef, n) {
                    let ty = self.btf_ty(&btf, id);
                    self.typedefs.insert(n.clone(), ty);
                }
            }
            TypeName::Enum(n)
                if !self.enum_tags.contains(n) && btf.find(NameKind::Enum, n).is_some() =>
            {
                self.enum_tags.insert(n.clone());
            }
            _ => {}
        }
    }

    /// The D type of BTF type `id`, importing the structs it reaches.
    pub(crate) fn btf_ty(&mut self, btf: &Btf, id: u32) -> Ty {
        let ty = self.convert(btf, id, 0);
        while let Some((i, id)) = self.btf.todo.pop() {
            let members = self.members(btf, id);
            self.sous[i].members = members;
        }
        ty
    }

    fn convert(&mut self, btf: &Btf, id: u32, depth: u32) -> Ty {
        if id == 0 || depth > MAX_DEPTH {
            return Ty::Void;
        }
        let Some(t) = btf.ty(id) else {
            return Ty::Void;
        };
        let bytes = |size: u32| {
            Ty::Array(
                Box::new(Ty::Int {
                    size: 1,
                    signed: false,
                }),
                size.into(),
            )
        };
        match &t.kind {
            Kind::Int { size, signed, .. } | Kind::Enum { size, signed } => match size {
                1 | 2 | 4 | 8 => Ty::Int {
                    size: *size as u8,
                    signed: *signed,
                },
                n => bytes(*n),
            },
            Kind::Float(n @ (4 | 8 | 16)) => Ty::Float(*n as u8),
            Kind::Float(n) => bytes(*n),
            Kind::Ptr(p) => match self.convert(btf, *p, depth + 1) {
                // Functions are reached only through pointers: a code address.
                Ty::Void => Ty::Ptr(Box::new(Ty::Void)),
                t => Ty::Ptr(Box::new(t)),
            },
            Kind::Array { elem, n } => {
                Ty::Array(Box::new(self.convert(btf, *elem, depth + 1)), (*n).into())
            }
            Kind::Typedef(t) | Kind::Qual(t) => self.convert(btf, *t, depth + 1),
            Kind::Sou { .. } | Kind::Fwd { .. } => self.btf_sou(btf, id),
            Kind::Func(_) | Kind::Proto { .. } | Kind::Var(_) | Kind::Datasec(_) | Kind::Other => {
                Ty::Void
            }
        }
    }

    /// The entry of struct or union `id` (a forward declaration: its definition), created
    /// without members, which [`TypeEnv::btf_ty`] fills.
    fn btf_sou(&mut self, btf: &Btf, mut id: u32) -> Ty {
        let t = btf.ty(id).expect("checked id");
        let (union, name) = match &t.kind {
            Kind::Sou { union, .. } | Kind::Fwd { union } => (*union, btf.str(t.name)),
            _ => unreachable!("btf_sou() of a struct or union"),
        };
        if let Kind::Fwd { .. } = t.kind {
            let ns = if union {
                NameKind::Union
            } else {
                NameKind::Struct
            };
            id = btf.find(ns, name).unwrap_or(id);
        }
        let kw = if union { "union" } else { "struct" };
        let full = if name.is_empty() {
            format!("{kw} (anon)")
        } else {
            format!("{kw} {name}")
        };
        if let Some(&i) = self.btf.sou_ids.get(&id) {
            return Ty::Sou(i, full);
        }
        let (size, complete) = match &btf.ty(id).expect("checked id").kind {
            Kind::Sou { size, .. } => (u64::from(*size), true),
            _ => (0, false),
        };
        let i = self.sous.len();
        self.sous.push(SouDef {
            name: full.clone(),
            members: Vec::new(),
            size,
            // BTF has no alignment: the largest power of two (up to 8) dividing the size.
            align: 1 << size.trailing_zeros().min(3),
            complete,
        });
        self.btf.sou_ids.insert(id, i);
        self.btf.imported.insert(i);
        if complete {
            self.btf.todo.push((i, id));
        }
        Ty::Sou(i, full)
    }

    /// The members of struct or union `id`, those of anonymous members lifted into it as C
    /// does.
    fn members(&mut self, btf: &Btf, id: u32) -> Vec<Member> {
        let mut flat = Vec::new();
        flatten(btf, id, 0, 0, &mut flat);
        let mut out = Vec::with_capacity(flat.len());
        for (name, ty, bit_off, bits) in flat {
            let ty = self.convert(btf, ty, 0);
            let unit = self.size(&ty, 0).max(1) * 8;
            let (off, bits) = if bits == 0 {
                (u64::from(bit_off / 8), None)
            } else {
                let b = u64::from(bit_off);
                // The storage unit is the member's type, as in a D declaration.
                (b / unit * (unit / 8), Some(((b % unit) as u8, bits)))
            };
            out.push(Member {
                name,
                ty,
                off,
                bits,
            });
        }
        out
    }

    /// `curthread`'s type: `struct task_struct *`.
    pub(crate) fn btf_curthread(&mut self) -> Option<Ty> {
        let btf = self.btf.btf.clone()?;
        let id = btf.find(NameKind::Struct, "task_struct")?;
        Some(Ty::Ptr(Box::new(self.btf_ty(&btf, id))))
    }

    /// The type of `args[i]` in the clause being compiled: the function's parameter on fbt
    /// entry (its return type for `args[1]` on return), where BTF knows the function and
    /// every probe of the clause agrees; else an untyped 64-bit integer, and why is kept
    /// for the errors of its uses.
    pub(crate) fn btf_arg(&mut self, i: usize) -> Result<Ty, String> {
        let t = self.arg_type(i)?;
        self.btf.untyped = t
            .as_ref()
            .err()
            .map(|why| format!("args[{i}] is untyped: {why}"));
        Ok(t.unwrap_or(I64))
    }

    fn arg_type(&mut self, i: usize) -> Result<Result<Ty, String>, String> {
        let clause = self.btf.clause.clone();
        if clause.iter().any(|(k, _)| *k == ProbeKind::Tracepoint) {
            return Err("a tracepoint's arguments are named by its format: use args->FIELD".into());
        }
        let typed = |k: &ProbeKind| {
            matches!(
                k,
                ProbeKind::FbtEntry
                    | ProbeKind::FbtReturn
                    | ProbeKind::SyscallEntry
                    | ProbeKind::SyscallReturn
            )
        };
        if clause.is_empty() || !clause.iter().all(|(k, _)| typed(k)) {
            return Ok(Err(
                "only fbt and syscall probes have typed arguments".into()
            ));
        }
        let btf = self.btf.btf.clone();
        let single = clause.len() == 1;
        let mut found: Option<(Ty, String)> = None;
        for (kind, pat) in &clause {
            let funcs: Vec<String> = match (&btf, crate::providers::fbt::is_glob(pat)) {
                (Some(btf), true) => btf
                    .names(NameKind::Func)
                    .filter(|f| crate::providers::fbt::glob_match(pat, f))
                    .map(str::to_string)
                    .collect(),
                _ => vec![pat.clone()],
            };
            let single = single && !crate::providers::fbt::is_glob(pat);
            for f in funcs {
                let ty = match kind {
                    ProbeKind::SyscallEntry | ProbeKind::SyscallReturn => {
                        self.syscall_arg(*kind, &f, i, single)?
                    }
                    _ => match &btf {
                        Some(btf) => self.fbt_arg(btf, *kind, &f, i, single)?,
                        None => Err("the kernel has no BTF".into()),
                    },
                };
                let ty = match ty {
                    Ok(t) => t,
                    Err(why) => return Ok(Err(why)),
                };
                match &found {
                    Some((t, other)) if *t != ty => {
                        return Ok(Err(format!(
                            "{other}() and {f}() have different types there ({} and {}): cast it",
                            t.name(),
                            ty.name()
                        )))
                    }
                    Some(_) => {}
                    None => found = Some((ty, f)),
                }
            }
        }
        Ok(found
            .map(|f| f.0)
            .ok_or_else(|| "no function matches".to_string()))
    }

    /// `args[i]` of fbt function `f`: its parameter on entry, its return type as `args[1]`
    /// on return.
    fn fbt_arg(
        &mut self,
        btf: &Btf,
        kind: ProbeKind,
        f: &str,
        i: usize,
        single: bool,
    ) -> Result<Result<Ty, String>, String> {
        let Some((ret, params)) = btf.func(f) else {
            return Ok(Err(format!("{f}() is not in the kernel's BTF")));
        };
        let id = match kind {
            ProbeKind::FbtReturn if i == 1 => ret,
            ProbeKind::FbtReturn => {
                return Ok(Err(
                    "on return only args[1], the return value, is typed".into()
                ))
            }
            _ => match params.get(i) {
                Some(p) if p.ty != 0 => p.ty,
                _ if single => return Err(no_arg(f, i, params.len())),
                _ => return Ok(Err(format!("{f}() has no args[{i}]"))),
            },
        };
        Ok(match self.btf_ty(btf, id) {
            t @ (Ty::Int { .. } | Ty::Ptr(_)) => Ok(t),
            // A struct passed by value, or void: its register, untyped.
            _ => Err(format!("{f}() passes a {} there", btf.type_name(id))),
        })
    }

    /// `args[i]` of system call `f`: its argument on entry, its return value as `args[0]`
    /// on return; the C types of its prototype (`syscalls::proto`) resolved against BTF.
    fn syscall_arg(
        &mut self,
        kind: ProbeKind,
        f: &str,
        i: usize,
        single: bool,
    ) -> Result<Result<Ty, String>, String> {
        let Some(p) = crate::providers::syscalls::proto(f) else {
            return Ok(Err(format!("the prototype of {f}() is unknown")));
        };
        let ct = match kind {
            ProbeKind::SyscallReturn if i == 0 => p.ret.clone(),
            ProbeKind::SyscallReturn => {
                return Ok(Err(
                    "on return only args[0], the return value, is typed".into()
                ))
            }
            _ => match p.args.get(i) {
                Some(a) => a.0.clone(),
                None if single => return Err(no_arg(f, i, p.args.len())),
                None => return Ok(Err(format!("{f}() has no args[{i}]"))),
            },
        };
        Ok(match self.btf_ctype(&ct) {
            Ok(t @ (Ty::Int { .. } | Ty::Ptr(_))) => Ok(t),
            Ok(t) => Err(format!("{f}() passes a {} there", t.name())),
            Err(why) => Err(why),
        })
    }

    /// The D type of C type text `ct` as prototypes and trace event formats write it
    /// (`const char __user *`, `umode_t`, `struct open_how *`): C's integer types, and the
    /// struct, union, enum and typedef names of the kernel's BTF (or of the program).
    pub(crate) fn btf_ctype(&mut self, ct: &str) -> Result<Ty, String> {
        let spaced = ct.replace('*', " * ");
        let words: Vec<&str> = spaced
            .split_whitespace()
            .filter(|w| {
                !matches!(
                    *w,
                    "const" | "volatile" | "restrict" | "__restrict" | "__user"
                )
            })
            .collect();
        let stars = words.iter().filter(|w| **w == "*").count();
        let base = &words[..words.len() - stars];
        if base.is_empty() || base.contains(&"*") || ct.contains('[') || ct.contains('(') {
            return Err(format!("cannot read the C type '{ct}'"));
        }
        let kbtf = self.btf.btf.clone();
        let kernel = |ns: NameKind, n: &str| -> Result<(Arc<Btf>, u32), String> {
            let btf = kbtf.clone().ok_or_else(|| format!("{ct}: {NO_BTF}"))?;
            let id = btf
                .find(ns, n)
                .ok_or_else(|| format!("{ct}: '{n}' is not in the kernel's BTF"))?;
            Ok((btf, id))
        };
        let mut ty = match base {
            ["void"] => Ty::Void,
            ["float"] => Ty::Float(4),
            ["double"] => Ty::Float(8),
            ["long", "double"] => Ty::Float(16),
            ["struct", n] | ["union", n] => {
                let union = base[0] == "union";
                match self.sou(n, union) {
                    Some(i) => Ty::Sou(i, format!("{} {n}", base[0])),
                    None => {
                        let ns = if union {
                            NameKind::Union
                        } else {
                            NameKind::Struct
                        };
                        let (btf, id) = kernel(ns, n)?;
                        self.btf_ty(&btf, id)
                    }
                }
            }
            ["enum", n] => match kernel(NameKind::Enum, n) {
                Ok((btf, id)) => self.btf_ty(&btf, id),
                Err(_) => super::I32,
            },
            [n] if self.typedefs.contains_key(*n) => self.typedefs[*n].clone(),
            _ if base.iter().all(|w| C_INT_WORDS.contains(w)) => c_int(base),
            [n] => {
                let (btf, id) = kernel(NameKind::Typedef, n)?;
                self.btf_ty(&btf, id)
            }
            _ => return Err(format!("cannot read the C type '{ct}'")),
        };
        for _ in 0..stars {
            ty = Ty::Ptr(Box::new(ty));
        }
        Ok(ty)
    }

    /// Whether every probe of the clause is a system call's: its pointer arguments are
    /// user addresses.
    pub(crate) fn syscall_clause(&self) -> bool {
        let c = &self.btf.clause;
        !c.is_empty()
            && c.iter()
                .all(|(k, _)| matches!(k, ProbeKind::SyscallEntry | ProbeKind::SyscallReturn))
    }

    /// The error for member `m` missing from `ty`, in C's words for a kernel type, with the
    /// nearest names.
    pub(crate) fn btf_no_member(&self, ty: &Ty, m: &str) -> Option<String> {
        let Ty::Sou(i, name) = ty else { return None };
        if !self.btf.imported.contains(i) {
            return None;
        }
        let names = self.sous[*i].members.iter().map(|x| x.name.as_str());
        let near = crate::providers::syscalls::nearby(m, names);
        Some(format!(
            "[D_TYPE_MEMBER] {name} has no member '{m}'{}",
            crate::providers::syscalls::did_you_mean(&near)
        ))
    }
}

/// The words of C's integer type names.
const C_INT_WORDS: &[&str] = &[
    "signed", "unsigned", "char", "short", "int", "long", "_Bool", "bool",
];

/// The D type of a C integer type named by `words` (all of [`C_INT_WORDS`]), for x86-64.
fn c_int(words: &[&str]) -> Ty {
    let has = |w: &str| words.contains(&w);
    let size = if has("char") || has("_Bool") || has("bool") {
        1
    } else if has("short") {
        2
    } else if has("long") {
        8
    } else {
        4
    };
    Ty::Int {
        size,
        signed: !has("unsigned") && !has("_Bool") && !has("bool"),
    }
}

/// The error for `args[i]` of `f`, which has `n` arguments.
fn no_arg(f: &str, i: usize, n: usize) -> String {
    format!(
        "[D_ARGS_IDX] args[{i}] does not exist: {f}() has {n} argument{}",
        if n == 1 { "" } else { "s" }
    )
}

/// Members of struct or union `id` at `base` bits, anonymous struct and union members
/// replaced by theirs: (name, type id, bit offset, bit-field width).
fn flatten(btf: &Btf, id: u32, base: u32, depth: u32, out: &mut Vec<(String, u32, u32, u8)>) {
    let Some(Kind::Sou { members, .. }) = btf.ty(id).map(|t| &t.kind) else {
        return;
    };
    for m in members {
        let off = base.saturating_add(m.bit_off);
        let inner = btf.strip(m.ty, true);
        let anon_sou =
            m.name == 0 && matches!(btf.ty(inner).map(|t| &t.kind), Some(Kind::Sou { .. }));
        if anon_sou && depth < MAX_DEPTH {
            flatten(btf, inner, off, depth + 1, out);
        } else if m.name != 0 {
            out.push((btf.str(m.name).to_string(), m.ty, off, m.bits));
        }
    }
}
