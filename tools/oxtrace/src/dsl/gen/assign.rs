//! Assignments: `=`, compound assignment, `++` and `--`, struct copies, and the type a
//! variable takes from its first assignment.

use super::super::error::Span;
use super::super::syntax::ast::*;
use super::super::types::{builtin, Ty, TypeEnv, I64};
use super::expr::empty_string;
use super::loc::Loc;
use super::{is_str_storage, ustack, GResult, Gen, STACK_USE};
use oxtrace_core::action::Op;

impl Gen<'_> {
    /// Fix the type of a variable at its first assignment, or check the assignment against it.
    pub(super) fn fix_type(
        &mut self,
        l: &Loc<'_>,
        from: &Ty,
        span: Span,
        lit0: bool,
    ) -> GResult<Ty> {
        if let Loc::Var {
            class, name, ty, ..
        } = l
        {
            match ty {
                Some(t) => {
                    self.check_compat(t, from, span, Some(lit0))?;
                    Ok(t.clone())
                }
                None => {
                    if matches!(from, Ty::Void) {
                        return self.err(span, "[D_OP_VFPTR] cannot assign a void value");
                    }
                    self.t.vty.insert((*class, name.clone()), from.clone());
                    Ok(from.clone())
                }
            }
        } else {
            Ok(l.ty().clone())
        }
    }

    pub(super) fn assign(
        &mut self,
        op: Option<BinOp>,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        if let ExprKind::Ident(name) = &lhs.kind {
            if builtin(name).is_some() || ustack::is_ident(name) {
                return self.err(
                    lhs.span,
                    format!("[D_OP_WRITE] cannot assign to built-in variable '{name}'"),
                );
            }
        }
        if op.is_none() {
            if let Some(r) = self.xlate_assign(lhs, rhs, span) {
                return r;
            }
        }
        let mut l = self.loc(lhs)?;
        self.check_store(lhs, &l)?;
        if op.is_none() {
            if l.ty_opt().is_none() && self.is_storage(rhs) {
                // `this->p = g` with g a struct: the new variable takes its type.
                if let t @ Ty::Sou(..) = self.type_of(rhs)? {
                    self.fix_type(&l, &t, rhs.span, false)?;
                    if let Loc::Var { ty, .. } = &mut l {
                        *ty = Some(t);
                    }
                }
            }
            if let Some(t @ Ty::Sou(..)) = l.ty_opt() {
                return self.assign_sou(l, &t, rhs, span);
            }
        }
        // A string into memory (`p->name = "abc"`): a `char[N]` or `string` member.
        let str_dest = matches!(&l, Loc::Mem { ty, .. } if is_str_storage(ty));
        if matches!(l.ty_opt(), Some(Ty::Array(..))) && !(str_dest && op.is_none()) {
            return self.err(lhs.span, "[D_OP_ARRFUN] cannot assign to an array");
        }
        // Keys are evaluated once, before the value.
        let (p, cur_ty) = self.place(l.clone_shallow(), op.is_some())?;
        let lit0 = matches!(rhs.kind, ExprKind::Int(0, _));
        let (rv, tv) = match op {
            // A string takes NULL (the constant 0) as DTrace does: the empty string.
            None if lit0 && cur_ty == Ty::Str => self.expr(&empty_string(rhs.span))?,
            None => self.expr(rhs)?,
            Some(bop) => {
                let rc = self.load_place(&p, &cur_ty, lhs.span)?;
                let (rr, tr) = self.expr(rhs)?;
                let res = self.binary_regs(bop, rc, &cur_ty, rr, &tr, span);
                self.release(rr);
                res?
            }
        };
        if tv == Ty::Stack {
            return self.err(rhs.span, STACK_USE);
        }
        // Memory holds a string as its bytes only, and no string reference; a float only
        // the bytes of a float of its type.
        let float_mismatch = (cur_ty.is_float() || tv.is_float()) && cur_ty != tv;
        if matches!(l, Loc::Mem { .. }) && (str_dest != (tv == Ty::Str) || float_mismatch) {
            return self.err(
                rhs.span,
                format!(
                    "[D_OP_INCOMPAT] operands have incompatible types: \"{}\" = \"{}\"",
                    cur_ty.name(),
                    tv.name()
                ),
            );
        }
        // `x += 1` on a never-assigned variable: it starts at 0 of the result's type.
        let ty = self.fix_type(&l, &tv, rhs.span, lit0)?;
        self.normalize(rv, &ty);
        self.store_to(&p, &ty, rv, span)?;
        self.release_place(&p);
        Ok((rv, if str_dest { Ty::Str } else { ty }))
    }

    /// `a = b` of a struct or union: member by member.
    pub(super) fn assign_sou(
        &mut self,
        l: Loc<'_>,
        ty: &Ty,
        rhs: &Expr,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        // `a[k] = 0`, `self->s = 0`: storing 0 deletes a dynamic variable, a struct too
        // (member by member here), as DTrace deletes it. An array member cannot be given
        // 0, so a struct with one keeps the incompatible assignment's error rather than
        // leaving that member stored.
        let dynamic = matches!(&l, Loc::Var { class, keys, .. }
            if *class == DeclClass::Thread || !keys.is_empty());
        let leaves = if dynamic && matches!(rhs.kind, ExprKind::Int(0, _)) {
            sou_leaves(&self.t.env, ty)
        } else {
            Vec::new()
        };
        if !leaves.is_empty() && leaves.iter().all(|(_, _, t)| !matches!(t, Ty::Array(..))) {
            for (path, _off, _) in leaves {
                let mut dst = self.loc_copy(&l, span)?;
                for seg in path.split('.').skip(1) {
                    dst = self.member(dst, seg, span)?;
                }
                let r = self.reg(span)?;
                self.load_const(r, 0);
                self.store_member(dst, r, span)?;
            }
            let r = self.reg(span)?;
            return Ok((r, I64));
        }
        let src_ty = self.type_of(rhs)?;
        self.check_compat(ty, &src_ty, rhs.span, None)?;
        let dst_addr = match &l {
            Loc::Var { .. } => None,
            // Through a pointer (`*p = *q`, `p->s = this->s`): into scratch memory only, as
            // every store through a pointer (the kernel checks it, `check_store` refused
            // what provably is kernel memory).
            Loc::Mem { addr, .. } => Some(*addr),
            _ => {
                return self.err(
                    span,
                    "[D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
                )
            }
        };
        if let Some(dst) = dst_addr {
            if let Loc::Mem { addr: src, .. } = self.loc(rhs)? {
                // Memory to memory: the whole struct, arrays and padding included.
                let n = self.t.env.size(ty, self.t.strsize as u64);
                let rn = self.reg(span)?;
                self.load_const(rn, n);
                self.emit(Op::Bcopy, 0, src, rn, dst as u32);
                self.release(rn);
                self.release(src);
                self.release(dst);
                let r = self.reg(span)?;
                return Ok((r, I64));
            }
        }
        // Member by member: a D struct variable on either side.
        let leaves = sou_leaves(&self.t.env, ty);
        for (path, _off, lty) in leaves {
            if dst_addr.is_some() && matches!(lty, Ty::Array(..)) {
                continue; // not from a D struct variable, which keeps none in memory
            }
            let mut src = self.loc(rhs)?;
            let mut dst = self.loc_copy(&l, span)?;
            for seg in path.split('.').skip(1) {
                src = self.member(src, seg, span)?;
                dst = self.member(dst, seg, span)?;
            }
            let (rv, _) = self.load_loc(src, span)?;
            self.store_member(dst, rv, span)?;
        }
        if let Some(dst) = dst_addr {
            self.release(dst);
        }
        let r = self.reg(span)?;
        Ok((r, I64))
    }

    /// `l` again, for one more member of it: a memory location's address in a register of
    /// its own (`member` moves the address it is given).
    pub(super) fn loc_copy<'e>(&mut self, l: &Loc<'e>, span: Span) -> GResult<Loc<'e>> {
        match l {
            Loc::Mem { addr, ty } => {
                let r = self.reg(span)?;
                self.emit(Op::Mov, r, *addr, 0, 0);
                Ok(Loc::Mem {
                    addr: r,
                    ty: ty.clone(),
                })
            }
            l => Ok(l.clone_shallow()),
        }
    }

    /// Stores `rv` into the member location `dst` (a variable's, or memory through a
    /// pointer), narrowed to its type; releases both. What a whole-struct copy does for
    /// each member (`assign_sou`, and translations copied whole in `xlate.rs`).
    pub(super) fn store_member(&mut self, dst: Loc<'_>, rv: u8, span: Span) -> GResult<()> {
        let (p, t) = self.place(dst, false)?;
        self.normalize(rv, &t);
        self.store_to(&p, &t, rv, span)?;
        self.release_place(&p);
        self.release(rv);
        Ok(())
    }

    /// `++x`, `x++`, `--x`, `x--` on any modifiable lvalue.
    pub(super) fn incdec(
        &mut self,
        pre: bool,
        inc: bool,
        target: &Expr,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        let l = self.loc(target)?;
        self.check_store(target, &l)?;
        let (p, ty) = self.place(l.clone_shallow(), true)?;
        if !ty.is_scalar() {
            return self.err(
                target.span,
                format!(
                    "[D_OP_SCALAR] operator {} requires an operand of scalar type, not {}",
                    if inc { "++" } else { "--" },
                    ty.name()
                ),
            );
        }
        if l.ty_opt().is_none() {
            self.fix_type(&l, &ty, span, false)?;
        }
        let old = self.load_place(&p, &ty, target.span)?;
        let new = self.reg(span)?;
        self.load_const(new, self.stride(&ty));
        self.emit(if inc { Op::Add } else { Op::Sub }, new, old, new, 0);
        self.normalize(new, &ty);
        self.store_to(&p, &ty, new, span)?;
        self.release_place(&p);
        if pre {
            self.release(old);
            Ok((new, ty))
        } else {
            self.release(new);
            Ok((old, ty))
        }
    }
}

/// The scalar and string members of a struct or union, recursively: path (`.a.b`), byte
/// offset, type. Arrays are not leaves (a struct holding one cannot be copied whole).
pub(super) fn sou_leaves(env: &TypeEnv, ty: &Ty) -> Vec<(String, u64, Ty)> {
    let mut out = Vec::new();
    if let Ty::Sou(i, _) = ty {
        for m in &env.sous[*i].members {
            match &m.ty {
                Ty::Sou(..) => {
                    for (p, o, t) in sou_leaves(env, &m.ty) {
                        out.push((format!(".{}{p}", m.name), m.off + o, t));
                    }
                }
                t => out.push((format!(".{}", m.name), m.off, t.clone())),
            }
        }
    }
    out
}
