//! Module-scoped type names (``struct vmlinux`task_struct``, ``D`dqstr_t``): the scope
//! picks the program's own types (`D`, `C`) or the kernel's (a module name).

use super::super::syntax::ast::TypeName;
use super::super::syntax::scope;
use super::{SouDef, TypeEnv};

impl TypeEnv {
    /// Index of struct or union `n` (`union` when set), which may be scoped.
    pub fn scoped_sou(&self, n: &str, union: bool) -> Option<usize> {
        let kernel = |b: &str| self.sou(b, union).filter(|i| self.btf.imported.contains(i));
        match scope::split(n) {
            None => self.sou(n, union),
            Some(("", b)) => self.sou(b, union),
            Some((m, b)) if scope::is_d(m) => self
                .sou(b, union)
                .filter(|i| !self.btf.imported.contains(i)),
            // Not in the kernel's BTF: the forward tag `scope_prepare` made.
            Some((_, b)) => kernel(b).or_else(|| self.sou(n, union)),
        }
    }

    /// What a scoped name of `tn` needs before it resolves: a kernel module's type imported
    /// from BTF under its own name, else (a module without BTF here, or a struct it does
    /// not have) a forward tag under the scoped name, as DTrace makes one. `tn` itself when
    /// it is not scoped, for the unscoped import.
    pub(super) fn scope_prepare(&mut self, tn: &TypeName) -> Option<TypeName> {
        let (n, base) = match tn {
            TypeName::Sou(n, u) => (n, TypeName::Sou(String::new(), *u)),
            TypeName::Named(n) => (n, TypeName::Named(String::new())),
            TypeName::Enum(n) => (n, TypeName::Enum(String::new())),
            _ => return Some(tn.clone()),
        };
        let Some((m, b)) = scope::split(n) else {
            return Some(tn.clone());
        };
        if scope::is_d(m) {
            return None;
        }
        let base = match base {
            TypeName::Sou(_, u) => TypeName::Sou(b.to_string(), u),
            TypeName::Named(_) => TypeName::Named(b.to_string()),
            _ => TypeName::Enum(b.to_string()),
        };
        self.btf_import(&base);
        if let TypeName::Sou(_, u) = tn {
            if self.scoped_sou(n, *u).is_none() {
                self.sous.push(SouDef {
                    name: format!("{} {n}", if *u { "union" } else { "struct" }),
                    members: vec![],
                    size: 0,
                    align: 1,
                    complete: false,
                });
            }
        }
        None
    }

    /// The type typedef or enum tag `n` (scoped or not) names, or why none.
    pub(super) fn scoped_name(&self, n: &str, kind: &str) -> Result<String, String> {
        let Some((m, b)) = scope::split(n) else {
            return Ok(n.to_string());
        };
        if !scope::is_known(m) {
            return Err(format!(
                "[D_UNKNOWN] failed to resolve type {kind}{n}: Unknown module name"
            ));
        }
        Ok(b.to_string())
    }
}
