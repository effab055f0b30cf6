//! The kernel's BPF Type Format (BTF): the C types of `/sys/kernel/btf/vmlinux`, for typed
//! `args[]` and kernel struct member access in D.
//!
//! Our own parser rather than a crate: the format is small and fixed (one header, one
//! record per type), the maintained pure-Rust crate (btf-rs) is LGPL, which the static tool
//! would have to carry, and libbpf is C. The layout is `include/uapi/linux/btf.h`;
//! `Documentation/providers.rst` says what D does with it.

pub mod build;
mod header;
mod kind;

pub use header::Header;
pub use kind::{Kind, Member, Param, Type};
use std::collections::HashMap;

/// Where the running kernel exports its BTF.
pub const KERNEL_PATH: &str = "/sys/kernel/btf/vmlinux";

/// The longest chain of pointers, arrays, typedefs, qualifiers, variables and functions a
/// blob may hold (the kernel's BTF check allows 32 modifiers in a row).
pub const MAX_CHAIN: u8 = 32;

/// The namespace a name is looked up in, as in C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// `struct NAME`.
    Struct,
    /// `union NAME`.
    Union,
    /// `enum NAME`.
    Enum,
    /// A typedef name.
    Typedef,
    /// A function.
    Func,
    /// A global variable.
    Var,
}

/// A parsed BTF blob.
#[derive(Debug)]
pub struct Btf {
    /// The string section.
    strings: Vec<u8>,
    /// Types by id; id 0 is `void`.
    types: Vec<Type>,
    /// Named types by namespace and name: the first complete definition (a struct's
    /// forward declaration only when there is no definition).
    names: HashMap<(NameKind, String), u32>,
    /// The variables of the per-CPU data section (one copy per CPU, no single address).
    percpu: std::collections::HashSet<u32>,
}

impl Btf {
    /// Parse a whole BTF blob.
    pub fn parse(b: &[u8]) -> Result<Btf, String> {
        let h = Header::parse(b)?;
        let strings = b[h.strings.clone()].to_vec();
        if strings.first().is_some_and(|&c| c != 0) {
            return Err("BTF string section does not start with the empty name".into());
        }
        let sec = &b[h.types.clone()];
        let mut types = vec![Type {
            name: 0,
            kind: Kind::Other,
        }];
        let mut off = 0;
        while off < sec.len() {
            let (t, next) = kind::decode(sec, off)?;
            types.push(t);
            off = next;
        }
        let mut btf = Btf {
            strings,
            types,
            names: HashMap::new(),
            percpu: Default::default(),
        };
        btf.check()?;
        btf.index();
        Ok(btf)
    }

    /// Read and parse the file at `path`.
    pub fn load(path: &str) -> Result<Btf, String> {
        let b = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        Btf::parse(&b).map_err(|e| format!("{path}: {e}"))
    }

    /// The running kernel's BTF, `None` when it has none (no `CONFIG_DEBUG_INFO_BTF`).
    pub fn kernel() -> Option<Result<Btf, String>> {
        std::path::Path::new(KERNEL_PATH)
            .exists()
            .then(|| Btf::load(KERNEL_PATH))
    }

    /// Every id and name offset points inside the blob, so lookups need no checks; no
    /// chain of references loops or runs deeper than [`MAX_CHAIN`].
    fn check(&self) -> Result<(), String> {
        let n = self.types.len() as u32;
        let id_ok = |id: u32| id < n;
        let name_ok = |off: u32| (off as usize) < self.strings.len().max(1);
        for (id, t) in self.types.iter().enumerate() {
            let bad = |what: &str| Err(format!("BTF type {id} has a bad {what}"));
            if !name_ok(t.name) {
                return bad("name");
            }
            let ok = match &t.kind {
                Kind::Ptr(x) | Kind::Typedef(x) | Kind::Qual(x) | Kind::Func(x) | Kind::Var(x) => {
                    id_ok(*x)
                }
                Kind::Datasec(vars) => vars.iter().all(|&v| id_ok(v)),
                Kind::Array { elem, .. } => id_ok(*elem),
                Kind::Sou { members, .. } => members.iter().all(|m| id_ok(m.ty) && name_ok(m.name)),
                Kind::Proto { ret, params } => {
                    id_ok(*ret) && params.iter().all(|p| id_ok(p.ty) && name_ok(p.name))
                }
                _ => true,
            };
            if !ok {
                return bad("reference");
            }
        }
        self.check_chains()
    }

    /// No chain of pointers, arrays, typedefs, qualifiers, variables and functions is
    /// longer than [`MAX_CHAIN`] links (a loop is an endless one): what follows such a
    /// chain ([`Btf::type_name`], the compiler's types) may recurse along it. The kernel's
    /// own BTF check refuses these chains too.
    fn check_chains(&self) -> Result<(), String> {
        let next = |id: u32| match self.types[id as usize].kind {
            Kind::Ptr(x) | Kind::Typedef(x) | Kind::Qual(x) | Kind::Func(x) | Kind::Var(x) => {
                Some(x)
            }
            Kind::Array { elem, .. } => Some(elem),
            _ => None,
        };
        let mut depth: Vec<Option<u8>> = vec![None; self.types.len()];
        let mut path = Vec::new();
        for id in 0..self.types.len() as u32 {
            let deep = || {
                Err(format!(
                    "BTF type {id} starts a chain of more than {MAX_CHAIN} pointers, arrays, \
                     typedefs or qualifiers (or a loop)"
                ))
            };
            path.clear();
            let mut cur = id;
            let mut d = loop {
                if let Some(d) = depth[cur as usize] {
                    break d;
                }
                match next(cur) {
                    None => {
                        depth[cur as usize] = Some(0);
                        break 0;
                    }
                    Some(x) => {
                        path.push(cur);
                        if path.len() > MAX_CHAIN as usize {
                            return deep();
                        }
                        cur = x;
                    }
                }
            };
            for &p in path.iter().rev() {
                d += 1;
                if d > MAX_CHAIN {
                    return deep();
                }
                depth[p as usize] = Some(d);
            }
        }
        Ok(())
    }

    fn index(&mut self) {
        let mut percpu = std::collections::HashSet::new();
        for (id, t) in self.types.iter().enumerate() {
            let ns = match t.kind {
                Kind::Sou { union: false, .. } | Kind::Fwd { union: false } => NameKind::Struct,
                Kind::Sou { union: true, .. } | Kind::Fwd { union: true } => NameKind::Union,
                Kind::Enum { .. } => NameKind::Enum,
                Kind::Typedef(_) => NameKind::Typedef,
                Kind::Func(_) => NameKind::Func,
                Kind::Var(_) => NameKind::Var,
                Kind::Datasec(ref vars) => {
                    if self.str(t.name) == ".data..percpu" {
                        percpu.extend(vars.iter().copied());
                    }
                    continue;
                }
                _ => continue,
            };
            if t.name == 0 {
                continue;
            }
            let key = (ns, self.str(t.name).to_string());
            let fwd = matches!(t.kind, Kind::Fwd { .. });
            match self.names.get(&key) {
                Some(&old) if !fwd && matches!(self.types[old as usize].kind, Kind::Fwd { .. }) => {
                    self.names.insert(key, id as u32);
                }
                Some(_) => {}
                None => {
                    self.names.insert(key, id as u32);
                }
            }
        }
        self.percpu = percpu;
    }

    /// The string at offset `off` of the string section ("" if it is not UTF-8).
    pub fn str(&self, off: u32) -> &str {
        let rest = self.strings.get(off as usize..).unwrap_or(&[]);
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).unwrap_or("")
    }

    /// The type of id `id` (0: `void`, as [`Kind::Other`]).
    pub fn ty(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize)
    }

    /// Number of type ids, `void` included.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether the blob has no types.
    pub fn is_empty(&self) -> bool {
        self.types.len() <= 1
    }

    /// The id of `name` in namespace `ns`.
    pub fn find(&self, ns: NameKind, name: &str) -> Option<u32> {
        self.names.get(&(ns, name.to_string())).copied()
    }

    /// The names of namespace `ns`, for "did you mean" hints.
    pub fn names(&self, ns: NameKind) -> impl Iterator<Item = &str> {
        self.names
            .keys()
            .filter(move |(k, _)| *k == ns)
            .map(|(_, n)| n.as_str())
    }

    /// `id` with qualifiers (and typedefs when `typedefs`) stripped.
    pub fn strip(&self, mut id: u32, typedefs: bool) -> u32 {
        // A chain longer than the table would be a cycle (a hostile blob).
        for _ in 0..self.types.len() {
            match self.types[id as usize].kind {
                Kind::Qual(t) => id = t,
                Kind::Typedef(t) if typedefs => id = t,
                _ => break,
            }
        }
        id
    }

    /// Return type and parameters of function `name`.
    pub fn func(&self, name: &str) -> Option<(u32, &[Param])> {
        let f = self.find(NameKind::Func, name)?;
        let Kind::Func(p) = self.types[f as usize].kind else {
            return None;
        };
        match &self.types[p as usize].kind {
            Kind::Proto { ret, params } => Some((*ret, params)),
            _ => None,
        }
    }

    /// The type of global variable `name` and whether it is per-CPU.
    pub fn var(&self, name: &str) -> Option<(u32, bool)> {
        let v = self.find(NameKind::Var, name)?;
        match self.types[v as usize].kind {
            Kind::Var(ty) => Some((ty, self.percpu.contains(&v))),
            _ => None,
        }
    }

    /// The C spelling of type `id` (`struct file *`, `const char *`), for messages.
    pub fn type_name(&self, id: u32) -> String {
        let t = &self.types[self.strip(id, false) as usize];
        let named = |kw: &str| format!("{kw} {}", self.str(t.name)).trim_end().to_string();
        match &t.kind {
            _ if id == 0 => "void".into(),
            Kind::Int { .. } | Kind::Float(_) | Kind::Typedef(_) => self.str(t.name).into(),
            Kind::Ptr(p) => format!("{} *", self.type_name(*p)),
            Kind::Array { elem, n } => format!("{} [{n}]", self.type_name(*elem)),
            Kind::Sou { union, .. } | Kind::Fwd { union } => {
                named(if *union { "union" } else { "struct" })
            }
            Kind::Enum { .. } => named("enum"),
            Kind::Proto { .. } | Kind::Func(_) => "function".into(),
            Kind::Qual(_) | Kind::Var(_) | Kind::Datasec(_) | Kind::Other => "?".into(),
        }
    }
}

#[cfg(test)]
mod tests;
