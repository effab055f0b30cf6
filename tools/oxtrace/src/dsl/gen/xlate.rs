//! Translations: `xlate <OUT> (e)` and the members of the prelude's process views
//! (`curpsinfo`, `curlwpsinfo`), compiled with the translators `passes/xlate.rs` declared.
//!
//! As in DTrace, a translation is a compile-time substitution: `xlate <T *> (e)->m`
//! compiles to the translator's expression for `m` with `NAME` bound to the value of `e`;
//! no translated struct exists at run time, so only the members a program reads cost
//! anything. A child of `gen`, so it uses the generator's helpers.

use super::super::error::Span;
use super::super::passes::xlate::Xlator;
use super::super::syntax::ast::{DeclClass, Expr, ExprKind, TypeName, UnOp};
use super::super::syntax::prelude::{PRELUDE, PRELUDE_NAME, PRELUDE_NAMES};
use super::super::types::{resolve_type, Ty};
use super::loc::Loc;
use super::{GResult, Gen, I64};
use oxtrace_core::action::{Op, Scope};

/// `pr_psargs`'s size in DTrace's `psinfo_t`, its NUL included.
const PRARGSZ: u32 = 80;

/// Deepest nesting of translations (a translator's member may translate again).
const MAX_NEST: usize = 16;

/// A translation a member access applies to.
struct XBase {
    /// The output type as written (without the `*` of the pointer form).
    out: TypeName,
    /// The input expression.
    input: Expr,
    /// The pointer form (`xlate <T *>`).
    ptr: bool,
    /// Whether the expression comes from the prelude (an inline of it).
    prelude: bool,
}

impl Gen<'_> {
    /// The translation `e` is: an `xlate`, an inline of one, or `*` of a pointer one.
    fn xlate_of(&self, e: &Expr) -> Option<XBase> {
        self.xlate_of_at(e, 0)
    }

    fn xlate_of_at(&self, e: &Expr, depth: usize) -> Option<XBase> {
        // An inline defined in terms of itself is no translation (its use is an error).
        if depth > MAX_NEST {
            return None;
        }
        match &e.kind {
            ExprKind::Xlate(tn, a) => {
                let (out, ptr) = match tn {
                    TypeName::Ptr(t) => ((**t).clone(), true),
                    t => (t.clone(), false),
                };
                Some(XBase {
                    out,
                    input: (**a).clone(),
                    ptr,
                    prelude: false,
                })
            }
            ExprKind::Ident(n) if !self.xbind.iter().any(|b| b.0 == *n) => {
                let (_, ie) = self.t.inlines.get(n)?;
                let mut x = self.xlate_of_at(ie, depth + 1)?;
                x.prelude |= self.t.xlate.prelude_inlines.contains(n);
                Some(x)
            }
            ExprKind::Unary(UnOp::Deref, a) => {
                let x = self.xlate_of_at(a, depth + 1)?;
                x.ptr.then_some(XBase { ptr: false, ..x })
            }
            _ => None,
        }
    }

    /// What `e` is if it is a translation used whole (DTrace's words for it in errors).
    pub(super) fn xlate_data(&self, e: &Expr) -> Option<&'static str> {
        let x = self.xlate_of(e)?;
        Some(if x.ptr {
            "pointer to translated data"
        } else {
            "translated data"
        })
    }

    /// The type of `e` if it is a translation used whole: its output type, or a pointer to
    /// it.
    pub(super) fn xlate_type(&mut self, e: &Expr) -> Option<GResult<Ty>> {
        let x = self.xlate_of(e)?;
        Some(self.resolve(&x.out, e.span).map(|t| match x.ptr {
            true => Ty::Ptr(Box::new(t)),
            false => t,
        }))
    }

    /// Whether `e` is a member access (`.`, `->`) of a translation.
    pub(super) fn is_xlate_member(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Member(b, _) | ExprKind::Arrow(b, _) => self.xlate_of(b).is_some(),
            _ => false,
        }
    }

    /// Compile `x.m` or `x->m` of a translation: the translator's expression for `m`.
    pub(super) fn xlate_member(&mut self, e: &Expr) -> GResult<(u8, Ty)> {
        let (b, m, arrow) = match &e.kind {
            ExprKind::Member(b, m) => (b, m, false),
            ExprKind::Arrow(b, m) => (b, m, true),
            _ => return self.err(e.span, "internal error: not a translated member"),
        };
        let Some(x) = self.xlate_of(b) else {
            return self.err(e.span, "internal error: not a translated member");
        };
        let out = self.resolve(&x.out, e.span)?;
        let shown = if x.ptr {
            format!("{} *", out.name())
        } else {
            out.name()
        };
        if !matches!(out, Ty::Sou(..)) {
            return self.err(
                e.span,
                format!(
                    "[D_XLATE_SOU] translator output type must be a struct or union, not {}",
                    out.name()
                ),
            );
        }
        // As DTrace: the translator is looked up where `xlate` is, before the operator
        // applied to its result (the prelude's input fails, if it does, at the read).
        if !x.prelude {
            let ti = self.type_of(&x.input)?;
            self.xlator_for(&x, &out, &ti, b.span)?;
        }
        if arrow && !x.ptr {
            return self.err(
                e.span,
                format!("[D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not {shown}"),
            );
        }
        if !arrow && x.ptr {
            return self.err(
                e.span,
                format!("[D_OP_SOU] operator . must be applied to a struct or union, not {shown}"),
            );
        }
        self.xlate_read(&x, &out, m, e.span)
    }

    /// The translator `x` to `out` (resolved `x.out`) applies, from the input's type `ti`.
    fn xlator_for(&mut self, x: &XBase, out: &Ty, ti: &Ty, span: Span) -> GResult<usize> {
        match self.find_xlator(out, ti) {
            Some(k) => Ok(k),
            None => self.err(
                span,
                format!(
                    "[D_XLATE_NONE] cannot translate from \"{}\" to \"{}{}\"",
                    ti.name(),
                    out.name(),
                    if x.ptr { " *" } else { "" }
                ),
            ),
        }
    }

    /// Member `m` of `out` as translator `k` converts it: the member's type, the
    /// translator, and its expression for the member.
    fn xlate_conversion(
        &mut self,
        k: usize,
        out: &Ty,
        m: &str,
        span: Span,
    ) -> GResult<(Ty, Xlator, Expr)> {
        let Some(mem) = self.t.env.member(out, m).cloned() else {
            return self.err(
                span,
                format!("[D_TYPE_MEMBER] {m} is not a member of {}", out.name()),
            );
        };
        let xl = self.t.xlate.list[k].clone();
        let Some((_, me, _)) = xl.members.iter().find(|(n, _, _)| n == m) else {
            return self.err(
                span,
                format!("[D_XLATE_NOCONV] translator does not define conversion for member: {m}"),
            );
        };
        let me = me.clone();
        Ok((mem.ty, xl, me))
    }

    /// Member `m` of translation `x` to `out`: its translator's expression with the input
    /// bound to the value of `x.input`.
    fn xlate_read(&mut self, x: &XBase, out: &Ty, m: &str, span: Span) -> GResult<(u8, Ty)> {
        if self.xbind.len() + self.xdepth >= MAX_NEST {
            return self.err(
                span,
                format!("translations nested more than {MAX_NEST} deep (a translator that translates itself?)"),
            );
        }
        // A struct or union is no value a register holds: its translation is the
        // member's expression with the input's name replaced by the input expression.
        if !x.prelude {
            let ti = self.type_of(&x.input)?;
            if matches!(ti, Ty::Sou(..)) {
                return self.xlate_read_sou(x, out, &ti, m, span);
            }
        }
        // The input, compiled where it was written; the prelude's failing on this kernel
        // is said at the use.
        let (ri, ti) = match self.in_source(x.prelude, |g| g.expr(&x.input)) {
            Err(pe) if x.prelude => {
                return self.err(
                    span,
                    format!(
                        "{} (translating the input of member {m} at {PRELUDE_NAME}:{}:{})",
                        pe.msg, pe.line, pe.col
                    ),
                )
            }
            r => r?,
        };
        let k = self.xlator_for(x, out, &ti, span)?;
        let (mem_ty, xl, me) = self.xlate_conversion(k, out, m, span)?;
        let me = &me;
        let inp = xl.inp.clone().unwrap_or(ti);
        self.normalize(ri, &inp);
        self.xbind.push((xl.name.clone(), ri, inp));
        let r = self.in_source(xl.prelude, |g| {
            let (r, from) = g.expr(me)?;
            g.xlate_convert(r, &from, &mem_ty, m, me)
        });
        self.xbind.pop();
        self.release(ri);
        match r {
            // The prelude failing on this kernel's types: said at the use.
            Err(pe) if xl.prelude => self.err(
                span,
                format!(
                    "{} (translating member {m} at {PRELUDE_NAME}:{}:{})",
                    pe.msg, pe.line, pe.col
                ),
            ),
            r => r,
        }
    }

    /// Member `m` of translation `x` to `out` of a struct or union input of type `ti`.
    fn xlate_read_sou(
        &mut self,
        x: &XBase,
        out: &Ty,
        ti: &Ty,
        m: &str,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        let k = self.xlator_for(x, out, ti, span)?;
        let (mem_ty, xl, me) = self.xlate_conversion(k, out, m, span)?;
        let me = &me;
        let me = substitute(me, &xl.name, &x.input);
        self.xdepth += 1;
        let r = self
            .expr(&me)
            .and_then(|(r, from)| self.xlate_convert(r, &from, &mem_ty, m, &me));
        self.xdepth -= 1;
        r
    }

    /// Compiles each member of the translator declared last, if the user's, once, its input bound to a register
    /// of the input type, and throws the code away: a member that cannot compile is an
    /// error where the translator is declared, as in D, not at a first use (or never, when
    /// nothing uses it). The prelude's translators are not checked: a kernel without one of
    /// their members' fields fails only the programs that read that member.
    pub(in super::super) fn check_last_xlator(&mut self) -> GResult<()> {
        let Some(xl) = self.t.xlate.list.last().cloned() else {
            return Ok(());
        };
        let (Some(inp), false) = (xl.inp.clone(), xl.prelude) else {
            return Ok(());
        };
        // A struct or union input: some object of its type, `*(IN *)0`.
        let sou = matches!(inp, Ty::Sou(..)).then(|| {
            let at = |kind| Expr {
                kind,
                span: xl.members.first().map_or(Span::default(), |m| m.2),
            };
            let zero = at(ExprKind::Int(0, Default::default()));
            let ptr = at(ExprKind::Cast(
                TypeName::Ptr(Box::new(xl.inp_tn.clone())),
                Box::new(zero),
            ));
            at(ExprKind::Unary(UnOp::Deref, Box::new(ptr)))
        });
        for (m, me, _) in &xl.members {
            let Some(mem) = self.t.env.member(&xl.out, m).cloned() else {
                continue; // refused by `declare`
            };
            if let Some(obj) = &sou {
                let me = substitute(me, &xl.name, obj);
                let (r, from) = self.expr(&me)?;
                let (r, _) = self.xlate_convert(r, &from, &mem.ty, m, &me)?;
                self.release(r);
                continue;
            }
            let ri = self.reg(me.span)?;
            self.xbind.push((xl.name.clone(), ri, inp.clone()));
            let r = self
                .expr(me)
                .and_then(|(r, from)| self.xlate_convert(r, &from, &mem.ty, m, me));
            self.xbind.pop();
            self.release(r?.0);
            self.release(ri);
        }
        Ok(())
    }

    /// `v = xlate <T> (e)` (or `*xlate <T *> (e)`, or an inline of one) with `v` a
    /// variable: each member of `T` translated into `v`'s, those the translator does not
    /// define zero, as in DTrace; `None` when `rhs` is no translated struct.
    pub(super) fn xlate_assign(
        &mut self,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
    ) -> Option<GResult<(u8, Ty)>> {
        let x = self.xlate_of(rhs).filter(|x| !x.ptr)?;
        Some(self.xlate_copy(&x, lhs, rhs.span, span))
    }

    fn xlate_copy(&mut self, x: &XBase, lhs: &Expr, at: Span, span: Span) -> GResult<(u8, Ty)> {
        let out = self.resolve(&x.out, at)?;
        if !matches!(out, Ty::Sou(..)) {
            return self.err(
                at,
                format!(
                    "[D_XLATE_SOU] translator output type must be a struct or union, not {}",
                    out.name()
                ),
            );
        }
        let ti = self.in_source(x.prelude, |g| g.type_of(&x.input))?;
        let k = self.xlator_for(x, &out, &ti, at)?;
        let mut l = self.loc(lhs)?;
        let Loc::Var { .. } = &l else {
            return self.err(
                span,
                "[D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
            );
        };
        match l.ty_opt() {
            Some(t) => self.check_compat(&t, &out, at, None)?,
            None => {
                self.fix_type(&l, &out, at, false)?;
                if let Loc::Var { ty, .. } = &mut l {
                    *ty = Some(out.clone());
                }
            }
        }
        let Ty::Sou(i, _) = &out else {
            unreachable!("checked")
        };
        let members = self.t.env.sous[*i].members.clone();
        for mm in members {
            let defined = self.t.xlate.list[k].members.iter().any(|d| d.0 == mm.name);
            let (rv, _) = match &mm.ty {
                Ty::Int { .. } | Ty::Ptr(_) if defined => self.xlate_read(x, &out, &mm.name, at)?,
                Ty::Int { .. } | Ty::Ptr(_) => {
                    let r = self.reg(span)?;
                    self.emit(Op::Ldi, r, 0, 0, 0);
                    (r, I64)
                }
                // A D struct variable keeps no string in a char array: left as it is.
                Ty::Array(..) => continue,
                t => {
                    return self.err(
                        at,
                        format!(
                            "a translated struct's member {} ({}) cannot be copied: read the members you need",
                            mm.name,
                            t.name()
                        ),
                    )
                }
            };
            let dst = self.member(l.clone_shallow(), &mm.name, span)?;
            self.store_member(dst, rv, span)?;
        }
        let r = self.reg(span)?;
        Ok((r, I64))
    }

    /// Run `f` with errors reported in the prelude when `prelude`.
    pub(super) fn in_source<T>(
        &mut self,
        prelude: bool,
        f: impl FnOnce(&mut Self) -> GResult<T>,
    ) -> GResult<T> {
        if !prelude {
            return f(self);
        }
        let saved = (self.src, self.input);
        self.src = PRELUDE;
        self.input = PRELUDE_NAME;
        let r = f(self);
        (self.src, self.input) = saved;
        r
    }

    /// The translator to `out` from a value of type `from`: the one from exactly that type,
    /// else one from a compatible type (DTrace's order).
    fn find_xlator(&mut self, out: &Ty, from: &Ty) -> Option<usize> {
        for k in 0..self.t.xlate.list.len() {
            if self.t.xlate.list[k].out == *out && self.t.xlate.list[k].inp.is_none() {
                let tn = self.t.xlate.list[k].inp_tn.clone();
                self.t.env.btf_prepare(&tn);
                let ty = resolve_type(&self.t.env, &tn).unwrap_or(Ty::Void);
                self.t.xlate.list[k].inp = Some(ty);
            }
        }
        let list = &self.t.xlate.list;
        let cands = || list.iter().enumerate().filter(|(_, x)| x.out == *out);
        if let Some((k, _)) = cands().find(|(_, x)| x.inp.as_ref() == Some(from)) {
            return Some(k);
        }
        let compat = |to: &Ty| match (to, from) {
            (Ty::Int { .. }, Ty::Int { .. }) => true,
            (Ty::Ptr(a), Ty::Ptr(b)) => **a == Ty::Void || **b == Ty::Void,
            _ => false,
        };
        cands()
            .find(|(_, x)| x.inp.as_ref().is_some_and(compat))
            .map(|(k, _)| k)
    }

    /// The value of a translator member's expression as the member's type.
    fn xlate_convert(
        &mut self,
        r: u8,
        from: &Ty,
        to: &Ty,
        m: &str,
        me: &Expr,
    ) -> GResult<(u8, Ty)> {
        let span = me.span;
        let to = match to {
            Ty::Array(e, _) if matches!(**e, Ty::Int { size: 1, .. }) => Ty::Str,
            t => t.clone(),
        };
        let ok = match (&to, from) {
            (Ty::Str, Ty::Str) => true,
            // As DTrace's assignments: a pointer takes another pointer or the constant 0,
            // an integer only an integer (a cast says that an address is meant).
            (Ty::Int { .. }, Ty::Int { .. }) => true,
            (Ty::Ptr(a), Ty::Ptr(b)) => a == b || **a == Ty::Void || **b == Ty::Void,
            (Ty::Ptr(_), Ty::Int { .. }) => super::expr::is_null(me),
            _ => false,
        };
        if !ok {
            return self.err(
                span,
                format!(
                    "[D_XLATE_INCOMPAT] translator member {m} definition uses incompatible types: \"{}\" = \"{}\"",
                    to.name(),
                    from.name()
                ),
            );
        }
        self.normalize(r, &to);
        Ok((r, to))
    }

    /// A name bound by the translation being compiled (a copy of its register), or the
    /// error of a translation used whole, or of a prelude name without BTF.
    pub(super) fn xlate_ident(&mut self, name: &str, span: Span) -> Option<GResult<(u8, Ty)>> {
        if let Some((_, r, ty)) = self.xbind.iter().rev().find(|b| b.0 == name).cloned() {
            return Some(self.reg(span).map(|rd| {
                self.emit(Op::Mov, rd, r, 0, 0);
                (rd, ty)
            }));
        }
        if let Some((_, ie)) = self.t.inlines.get(name) {
            if matches!(ie.kind, ExprKind::Xlate(..)) {
                return Some(self.err(span, whole(name)));
            }
        }
        let var = self
            .t
            .vty
            .contains_key(&(DeclClass::Global, name.to_string()))
            || self
                .t
                .var_idx
                .contains_key(&(Scope::Global as u32, name.to_string()));
        if PRELUDE_NAMES.contains(&name) && self.t.env.btf.btf.is_none() && !var {
            return Some(self.err(
                span,
                format!(
                    "[D_IDENT_UNDEF] {name} is translated from the kernel's struct task_struct, \
                     which needs the kernel's BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)"
                ),
            ));
        }
        None
    }

    /// The prelude's own subroutine: `__uargs(start, end)`, the current process's user
    /// memory from `start` to `end` as a string of at most `PRARGSZ` - 1 bytes, its NULs
    /// blanks (`pr_psargs`). No program names it: only the prelude compiles it.
    pub(super) fn xlate_call(
        &mut self,
        name: &str,
        args: &[Expr],
        span: Span,
    ) -> Option<GResult<(u8, Ty)>> {
        if name != "__uargs" || !std::ptr::eq(self.src.as_ptr(), PRELUDE.as_ptr()) {
            return None;
        }
        Some((|| {
            let [a, b] = args else {
                return self.err(span, "__uargs() takes two addresses");
            };
            let (ra, _) = self.expr(a)?;
            let (rb, _) = self.expr(b)?;
            let rd = self.reg(span)?;
            self.emit(Op::Uargs, rd, ra, rb, PRARGSZ - 1);
            self.release(ra);
            self.release(rb);
            Ok((rd, Ty::Str))
        })())
    }

    /// The error of an `xlate` used whole.
    pub(super) fn xlate_whole(&self, span: Span) -> GResult<(u8, Ty)> {
        self.err(span, whole("a translation"))
    }
}

/// `e` with each identifier `name` replaced by `with`: a translator's member expression
/// over a struct or union input, read in place.
fn substitute(e: &Expr, name: &str, with: &Expr) -> Expr {
    fn walk(e: &mut Expr, name: &str, with: &Expr) {
        if matches!(&e.kind, ExprKind::Ident(n) if n == name) {
            *e = with.clone();
            return;
        }
        let _ = e.try_for_each_child_mut(|c| {
            walk(c, name, with);
            Ok::<(), ()>(())
        });
    }
    let mut e = e.clone();
    walk(&mut e, name, with);
    e
}

fn whole(what: &str) -> String {
    format!(
        "{what} can only be used through its members (xlate <T *> (e)->member, xlate <T> (e).member): the translated struct is never built"
    )
}
