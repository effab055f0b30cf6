//! Translator declarations: `translator OUT < IN NAME > { member = expr; ... };` checked
//! and recorded for the code generator, which substitutes them (`gen/xlate.rs`).

use super::super::error::Span;
use super::super::syntax::ast::{Expr, Translator, TypeName};
use super::super::types::{resolve_type, SouDef, Ty};
use super::Tables;
use std::collections::HashSet;

/// A declared translator.
#[derive(Clone, Debug)]
pub(crate) struct Xlator {
    /// The output struct or union.
    pub(crate) out: Ty,
    /// The input type as written, and resolved (the prelude's on first use: resolving
    /// `struct task_struct *` imports much of the kernel's BTF).
    pub(crate) inp_tn: TypeName,
    pub(crate) inp: Option<Ty>,
    /// The input's name in the member expressions.
    pub(crate) name: String,
    /// Member translations.
    pub(crate) members: Vec<(String, Expr, Span)>,
    /// Whether it comes from the prelude (its spans are the prelude's).
    pub(crate) prelude: bool,
}

/// The program's translators.
#[derive(Clone, Debug, Default)]
pub(crate) struct Xlators {
    pub(crate) list: Vec<Xlator>,
    /// Inlines declared by the prelude (their expressions' spans are the prelude's).
    pub(crate) prelude_inlines: HashSet<String>,
}

impl Xlators {
    /// Note that inline `name` comes from the prelude.
    pub(crate) fn prelude_inline(&mut self, name: &str) {
        self.prelude_inlines.insert(name.to_string());
    }
}

/// Declare translator `tr` (from the prelude when `prelude`).
pub(crate) fn declare(
    t: &mut Tables,
    tr: &Translator,
    prelude: bool,
) -> Result<(), (Span, String)> {
    t.env.btf_prepare(&tr.out);
    forward(t, &tr.out);
    let out = resolve_type(&t.env, &tr.out).map_err(|m| (tr.span, m))?;
    let Ty::Sou(i, _) = &out else {
        return Err((
            tr.span,
            "[D_XLATE_SOU] translator output type must be a struct or union".to_string(),
        ));
    };
    if !t.env.sous[*i].complete {
        return Err((
            tr.span,
            format!("[D_XLATE_SOU] incomplete struct/union/enum {}", out.name()),
        ));
    }
    let inp = if prelude {
        None
    } else {
        t.env.btf_prepare(&tr.inp);
        forward(t, &tr.inp);
        Some(resolve_type(&t.env, &tr.inp).map_err(|m| (tr.span, m))?)
    };
    if let Some(inp) = &inp {
        // A struct or union input is translated in place: its name stands for the
        // translated expression (`gen/xlate.rs`), so it must have members to read.
        if matches!(inp, Ty::Void | Ty::Array(..) | Ty::Stack) {
            return Err((
                tr.span,
                format!(
                    "[D_XLATE_INCOMPAT] translator input type must be an integer, pointer, string, struct or union, not {}",
                    inp.name()
                ),
            ));
        }
        if t.xlate
            .list
            .iter()
            .any(|x| x.out == out && x.inp.as_ref() == Some(inp))
        {
            return Err((
                tr.span,
                format!(
                    "[D_XLATE_REDECL] translator from {} to {} has already been declared",
                    inp.name(),
                    out.name()
                ),
            ));
        }
    }
    // A member defined twice is accepted, as DTrace does: the first definition is used.
    for (m, _, span) in &tr.members {
        if t.env.member(&out, m).is_none() {
            return Err((
                *span,
                format!(
                    "[D_XLATE_MEMB] translator member {m} is not a member of {}",
                    out.name()
                ),
            ));
        }
    }
    t.xlate.list.push(Xlator {
        out,
        inp_tn: tr.inp.clone(),
        inp,
        name: tr.name.clone(),
        members: tr.members.clone(),
        prelude,
    });
    Ok(())
}

/// Declare the struct or union `tn` names (through pointers) as a forward tag if nothing
/// defines it, as C and D do for a tag first met in a translator's types: the translator
/// is declared, and only a read of the missing definition's members fails.
pub(super) fn forward(t: &mut Tables, tn: &TypeName) {
    match tn {
        TypeName::Ptr(p) => forward(t, p),
        TypeName::Sou(n, u) if t.env.scoped_sou(n, *u).is_none() => {
            t.env.sous.push(SouDef {
                name: format!("{} {n}", if *u { "union" } else { "struct" }),
                members: vec![],
                size: 0,
                align: 1,
                complete: false,
            });
        }
        _ => {}
    }
}
