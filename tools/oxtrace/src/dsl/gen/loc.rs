//! Locations: where a variable, member, element or pointed-to object lives, found
//! before its keys or indices are evaluated ([`Loc`]).

use super::super::error::Span;
use super::super::syntax::ast::*;
use super::super::types::{builtin, Ty, I64};
use super::ustack;
use super::{GResult, Gen};
use oxtrace_core::action::{Builtin, Op, Scope};
use oxtrace_core::program::ProbeKind;

impl Gen<'_> {
    /// The storage of a variable, member or element, or of kernel memory, without reading it.
    pub(super) fn loc<'e>(&mut self, e: &'e Expr) -> GResult<Loc<'e>> {
        let var = |class, name: &str, ty: Option<Ty>| Loc::Var {
            class,
            name: name.to_string(),
            keys: Vec::new(),
            ty,
            span: e.span,
        };
        match &e.kind {
            ExprKind::Ident(name) if name.contains('`') => {
                let (addr, ty) = match self.t.env.kvar(name) {
                    Ok((a, Some(t))) => (a, t),
                    Ok((_, None)) => return self.err(e.span, self.t.env.kvar_untyped(name)),
                    Err(m) => return self.err(e.span, m),
                };
                let r = self.reg(e.span)?;
                self.load_const(r, addr);
                Ok(Loc::Mem { addr: r, ty })
            }
            ExprKind::Ident(name) => {
                if builtin(name).is_some()
                    || ustack::is_ident(name)
                    || self.t.env.enums.contains_key(name)
                {
                    return self.err(
                        e.span,
                        format!(
                            "[D_OP_WRITE] operator requires a writable variable: {name} is not one"
                        ),
                    );
                }
                if self.t.inlines.contains_key(name) {
                    return self.err(
                        e.span,
                        format!("[D_OP_WRITE] inline {name} cannot be assigned"),
                    );
                }
                let ty = self.vty(DeclClass::Global, name);
                Ok(var(DeclClass::Global, name, ty))
            }
            ExprKind::SelfVar(name) => {
                let ty = self.vty(DeclClass::Thread, name);
                Ok(var(DeclClass::Thread, name, ty))
            }
            ExprKind::This(name) => {
                let ty = self.vty(DeclClass::Local, name);
                match ty {
                    Some(t @ (Ty::Array(..) | Ty::Sou(..)))
                        if self.t.memvars.contains(&(DeclClass::Local, name.clone())) =>
                    {
                        let addr = self.local_mem(name, &t, e.span)?;
                        Ok(Loc::Mem { addr, ty: t })
                    }
                    ty => Ok(var(DeclClass::Local, name, ty)),
                }
            }
            ExprKind::Index(name, keys) if name == "args" => self.args(keys, e.span),
            ExprKind::Index(name, keys) if name == "uregs" => self.uregs(keys, e.span),
            // `execname[0]`, `s[1]` of a string scalar: one of its characters.
            ExprKind::Index(name, keys) if keys.len() == 1 && self.is_string_scalar(name) => {
                let (r, _) = self.expr(&Expr {
                    kind: ExprKind::Ident(name.clone()),
                    span: e.span,
                })?;
                self.string_char(r, &keys[0], e.span)
            }
            ExprKind::Index(name, keys) => {
                let ty = self.vty(DeclClass::Global, name);
                let scalar = self
                    .t
                    .var_idx
                    .contains_key(&(Scope::Global as u32, name.clone()));
                let base = Loc::Var {
                    class: DeclClass::Global,
                    name: name.clone(),
                    keys: Vec::new(),
                    ty: ty.clone(),
                    span: e.span,
                };
                match ty {
                    Some(Ty::Array(..)) => self.subscript(base, keys, e.span),
                    Some(Ty::Ptr(_)) if scalar => self.subscript(base, keys, e.span),
                    _ => self.assoc_keys(base, keys, e.span),
                }
            }
            ExprKind::Subscript(b, keys) => {
                let base = if b.is_place() {
                    self.loc(b)?
                } else {
                    let (r, ty) = self.expr(b)?;
                    Loc::Val { reg: r, ty }
                };
                // An array of a D variable kept in memory: its subscript is checked as
                // that of one kept in slots.
                self.check_index = self.in_memory(b);
                // A thread-local or clause-local variable used as an associative array
                // keeps that shape whatever type its values have.
                let var = match &b.kind {
                    ExprKind::SelfVar(n) => Some((DeclClass::Thread, n.clone())),
                    ExprKind::This(n) => Some((DeclClass::Local, n.clone())),
                    _ => None,
                };
                let assoc = var.is_some_and(|v| matches!(self.t.shapes.get(&v), Some(&(true, _))));
                match base.ty() {
                    Ty::Array(..) | Ty::Ptr(_) if !assoc => self.subscript(base, keys, e.span),
                    Ty::Str if keys.len() == 1 => {
                        let (r, _) = self.load_loc(base, e.span)?;
                        self.string_char(r, &keys[0], e.span)
                    }
                    _ => self.assoc_keys(base, keys, e.span),
                }
            }
            ExprKind::Member(..) | ExprKind::Arrow(..) if self.is_xlate_member(e) => self.err(
                e.span,
                "[D_OP_LVAL] a translated member is a value, not storage: it cannot be assigned or have its address taken",
            ),
            ExprKind::Member(b, m) => {
                let base = self.loc(b)?;
                self.member(base, m, e.span)
            }
            ExprKind::Arrow(b, m) => {
                // As DTrace: a struct itself is not a pointer (D_OP_PTR), a pointer to
                // something else has no members (D_OP_SOU); a struct is refused before
                // its value would be read.
                if self.is_storage(b) {
                    let bt = self.type_of(b)?;
                    if matches!(bt, Ty::Sou(..)) {
                        return self.err(
                            e.span,
                            format!("[D_OP_PTR] operator -> must be applied to a pointer, not {}: use . for a member", bt.name()),
                        );
                    }
                }
                let (r, ty) = self.expr(b)?;
                let pointee = match &ty {
                    Ty::Ptr(p) if matches!(**p, Ty::Sou(..)) => (**p).clone(),
                    Ty::Ptr(p) if !matches!(**p, Ty::Void) => {
                        return self.err(
                            e.span,
                            format!(
                                "[D_OP_SOU] operator -> must be applied to a pointer to a struct or union, not {}",
                                ty.name()
                            ),
                        );
                    }
                    _ => {
                        let mut msg = format!(
                            "[D_OP_PTR] operator -> must be applied to a pointer to a struct or union, not {}",
                            ty.name()
                        );
                        if matches!(&b.kind, ExprKind::Index(n, _) if n == "args") {
                            if let Some(why) = &self.t.env.btf.untyped {
                                msg = format!("{msg} ({why})");
                            }
                        }
                        return self.err(e.span, msg);
                    }
                };
                self.member(
                    Loc::Mem {
                        addr: r,
                        ty: pointee,
                    },
                    m,
                    e.span,
                )
            }
            ExprKind::Unary(UnOp::Deref, p) => {
                let (r, ty) = self.expr(p)?;
                match ty {
                    Ty::Ptr(t) if *t == Ty::Void => {
                        self.err(e.span, "[D_DEREF_VOID] cannot dereference a void pointer")
                    }
                    Ty::Ptr(t) => Ok(Loc::Mem { addr: r, ty: *t }),
                    _ => self.err(
                        e.span,
                        format!(
                            "[D_DEREF_NONPTR] cannot dereference a {}: cast it to a pointer type",
                            ty.name()
                        ),
                    ),
                }
            }
            // `(struct s) x` of an `x` of that very type (C's cast to the same type, which
            // translators over struct inputs write): `x` itself.
            ExprKind::Cast(tn, a) if matches!(self.resolve(tn, e.span)?, Ty::Sou(..)) => {
                let to = self.resolve(tn, e.span)?;
                let from = self.type_of(a)?;
                if from != to {
                    return self.err(
                        e.span,
                        format!(
                            "[D_CAST_INVAL] invalid cast expression: \"{}\" to \"{}\"",
                            from.name(),
                            to.name()
                        ),
                    );
                }
                self.loc(a)
            }
            _ => self.err(
                e.span,
                "[D_OP_LVAL] operator requires a modifiable lvalue as an operand",
            ),
        }
    }

    /// The address of clause-local `this->name` kept in memory (`passes/addr.rs`): the
    /// clause's scratch memory, taken at the first use in the clause and kept in a hidden
    /// `this->` slot (`&name`) for the others, so the predicate and the actions share it.
    /// `begin_clause` zeroes the slot and frees the memory, as it does any `alloca()`.
    fn local_mem(&mut self, name: &str, ty: &Ty, span: Span) -> GResult<u8> {
        let size = self.t.env.size(ty, self.t.strsize as u64);
        let slot = self.local(&format!("&{name}"));
        let r = self.reg(span)?;
        self.emit(Op::Ldls, r, 0, 0, slot);
        let j = self.emit(Op::Bnz, 0, r, 0, 0);
        self.load_const(r, size);
        self.emit(Op::Alloca, r, r, 0, 0);
        self.emit(Op::Stls, 0, r, 0, slot);
        self.patch(j);
        Ok(r)
    }

    /// Whether `e` is a clause-local variable kept in memory, or a member or element of
    /// one (`this->s.a`).
    fn in_memory(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::This(n) => self.t.memvars.contains(&(DeclClass::Local, n.clone())),
            ExprKind::Member(b, _) | ExprKind::Subscript(b, _) => self.in_memory(b),
            _ => false,
        }
    }

    /// `args[i]`: argument `i` of the probe, typed from the kernel's BTF where it knows the
    /// function (`btf_types.rs`), else an untyped 64-bit integer.
    pub(super) fn args<'e>(&mut self, keys: &[Expr], span: Span) -> GResult<Loc<'e>> {
        let i = match args_index(keys) {
            Ok(i) => i,
            Err(m) => return self.err(span, m),
        };
        if let Some((k, _)) = (self.t.env.btf.clause.iter())
            .find(|(k, _)| matches!(k, ProbeKind::Begin | ProbeKind::End))
        {
            let which = if *k == ProbeKind::Begin {
                "BEGIN"
            } else {
                "END"
            };
            return self.err(
                span,
                format!("[D_ARGS_IDX] args[{i}] is not available: {which} has no arguments"),
            );
        }
        let ty = match self.t.env.btf_arg(i) {
            Ok(t) => t,
            Err(m) => return self.err(span, m),
        };
        let r = self.reg(span)?;
        use Builtin::*;
        let arg = [Arg0, Arg1, Arg2, Arg3, Arg4, Arg5, Arg6, Arg7, Arg8, Arg9][i];
        self.emit(Op::Ldb, r, 0, 0, arg as u32);
        self.normalize(r, &ty);
        Ok(Loc::Val { reg: r, ty })
    }

    /// The declared or learned type of a variable path; `None` (and `assumed` noted) when
    /// nothing fixed it yet.
    pub(super) fn vty(&mut self, class: DeclClass, name: &str) -> Option<Ty> {
        self.t.vty.get(&(class, name.to_string())).cloned()
    }

    /// `base[keys]` of an array or a pointer.
    pub(super) fn subscript<'e>(
        &mut self,
        base: Loc<'e>,
        keys: &'e [Expr],
        span: Span,
    ) -> GResult<Loc<'e>> {
        if keys.len() != 1 {
            return self.err(
                span,
                "[D_ARR_BADREF] an array or pointer takes exactly one subscript",
            );
        }
        let k = &keys[0];
        let check = std::mem::take(&mut self.check_index);
        match base.ty().clone() {
            Ty::Array(elem, n) => {
                if let Some(v) = const_eval(k) {
                    if v < 0 || v as u64 >= n {
                        return self.err(
                            k.span,
                            format!("[D_ARR_BOUNDS] index {v} is out of bounds of an array of {n} elements"),
                        );
                    }
                }
                match base {
                    Loc::Var {
                        class,
                        name,
                        mut keys,
                        span: _,
                        ..
                    } => {
                        keys.push(KeyPart::Index(k, n));
                        Ok(Loc::Var {
                            class,
                            name,
                            keys,
                            ty: Some(*elem),
                            span,
                        })
                    }
                    Loc::Mem { addr, .. } => {
                        let size = self.t.env.size(&elem, self.t.strsize as u64);
                        let (ri, ti) = self.expr(k)?;
                        self.need_int(&ti, k.span, "an array subscript")?;
                        if check && const_eval(k).is_none() {
                            self.emit(Op::Chkb, 0, ri, 0, n as u32);
                        }
                        self.scale_add(addr, ri, size, span)?;
                        Ok(Loc::Mem { addr, ty: *elem })
                    }
                    Loc::Val { .. } | Loc::MemBits { .. } => {
                        self.err(span, "internal error: array value")
                    }
                }
            }
            Ty::Ptr(p) => {
                let (addr, _) = self.load_loc(base, span)?;
                if *p == Ty::Void {
                    return self.err(span, "[D_DEREF_VOID] cannot dereference a void pointer");
                }
                let size = self.t.env.size(&p, self.t.strsize as u64);
                let (ri, ti) = self.expr(k)?;
                self.need_int(&ti, k.span, "a pointer subscript")?;
                self.scale_add(addr, ri, size, span)?;
                Ok(Loc::Mem { addr, ty: *p })
            }
            _ => self.err(span, "internal error: subscript of a non-array"),
        }
    }

    /// What `ty` steps by in `+`, `-`, `++`, `--`: the pointee's size for a pointer.
    pub(super) fn stride(&self, ty: &Ty) -> u64 {
        match ty {
            Ty::Ptr(pt) => self.t.env.size(pt, self.t.strsize as u64).max(1),
            _ => 1,
        }
    }

    /// `ptr ± int` and `int + ptr`, the integer scaled by the pointee's size, and `ptr -
    /// ptr` of one pointee type, the number of elements between them (C's `ptrdiff_t`, a
    /// `long`); `None` for any other operands. Leaves `rb` to the caller.
    pub(super) fn ptr_arith(
        &mut self,
        op: BinOp,
        ra: u8,
        ta: &Ty,
        rb: u8,
        tb: &Ty,
        span: Span,
    ) -> GResult<Option<(u8, Ty)>> {
        match (ta, op, tb) {
            // A void pointer has no stride: DTrace refuses its arithmetic (C's GNU
            // extension counts bytes; D asks for a cast that says so).
            (Ty::Ptr(p), BinOp::Add | BinOp::Sub, Ty::Int { .. })
            | (Ty::Int { .. }, BinOp::Add, Ty::Ptr(p))
                if **p == Ty::Void =>
            {
                self.err(
                    span,
                    format!(
                        "[D_OP_INCOMPAT] operands have incompatible types: \"{}\" {} \"{}\"",
                        ta.name(),
                        if op == BinOp::Add { "+" } else { "-" },
                        tb.name()
                    ),
                )
            }
            (Ty::Ptr(_), BinOp::Add | BinOp::Sub, Ty::Int { .. }) => {
                self.mul_const(rb, self.stride(ta), span)?;
                let o = if op == BinOp::Add { Op::Add } else { Op::Sub };
                self.emit(o, ra, ra, rb, 0);
                Ok(Some((ra, ta.clone())))
            }
            (Ty::Int { .. }, BinOp::Add, Ty::Ptr(_)) => {
                self.mul_const(ra, self.stride(tb), span)?;
                self.emit(Op::Add, ra, ra, rb, 0);
                Ok(Some((ra, tb.clone())))
            }
            (Ty::Ptr(pa), BinOp::Sub, Ty::Ptr(pb)) => {
                if pa != pb {
                    return self.err(
                        span,
                        format!(
                            "[D_OP_INCOMPAT] operands have incompatible types: \"{}\" - \"{}\"",
                            ta.name(),
                            tb.name()
                        ),
                    );
                }
                self.emit(Op::Sub, ra, ra, rb, 0);
                let k = self.stride(ta);
                if k != 1 {
                    let rs = self.reg(span)?;
                    self.load_const(rs, k);
                    self.emit(Op::Sdiv, ra, ra, rs, 0);
                    self.release(rs);
                }
                Ok(Some((ra, I64)))
            }
            _ => Ok(None),
        }
    }

    /// `r *= k`, skipped for `k == 1`.
    pub(super) fn mul_const(&mut self, r: u8, k: u64, span: Span) -> GResult<()> {
        if k != 1 {
            let rs = self.reg(span)?;
            self.load_const(rs, k);
            self.emit(Op::Mul, r, r, rs, 0);
            self.release(rs);
        }
        Ok(())
    }

    /// `addr += idx * size`; releases `idx`.
    pub(super) fn scale_add(&mut self, addr: u8, idx: u8, size: u64, span: Span) -> GResult<()> {
        self.mul_const(idx, size, span)?;
        self.emit(Op::Add, addr, addr, idx, 0);
        self.release(idx);
        Ok(())
    }

    /// `base[keys]` of an associative array (global, or thread-local `self->a[k]`).
    pub(super) fn assoc_keys<'e>(
        &mut self,
        base: Loc<'e>,
        keys: &'e [Expr],
        span: Span,
    ) -> GResult<Loc<'e>> {
        match base {
            Loc::Var {
                class,
                name,
                keys: mut ks,
                ..
            } if ks.is_empty() => {
                if class == DeclClass::Local {
                    return self.err(
                        span,
                        "[D_ARR_LOCAL] clause-local variables cannot be associative arrays",
                    );
                }
                let decl = self.t.decl_keys.get(&(class, name.clone())).cloned();
                if let Some(want) = &decl {
                    if want.len() != keys.len() {
                        return self.err(
                            span,
                            format!(
                                "[D_ARR_BADREF] {name}[] is declared with {} key(s), used with {}",
                                want.len(),
                                keys.len()
                            ),
                        );
                    }
                }
                for (i, k) in keys.iter().enumerate() {
                    ks.push(KeyPart::Key(k, decl.as_ref().map(|d| d[i].clone())));
                }
                let ty = self.vty(class, &name);
                Ok(Loc::Var {
                    class,
                    name,
                    keys: ks,
                    ty,
                    span,
                })
            }
            b => self.err(
                span,
                format!(
                    "[D_ARR_BADREF] cannot subscript a {}: it is not an array, a pointer or an associative array",
                    b.ty().name()
                ),
            ),
        }
    }

    /// `base.member`.
    pub(super) fn member<'e>(&mut self, base: Loc<'e>, m: &str, span: Span) -> GResult<Loc<'e>> {
        let bty = base.ty().clone();
        let mem = match &bty {
            Ty::Sou(..) => match self.t.env.member(&bty, m) {
                Some(x) => x.clone(),
                None => {
                    if let Some(msg) = self.t.env.btf_no_member(&bty, m) {
                        return self.err(span, msg);
                    }
                    if let Ty::Sou(i, n) = &bty {
                        if !self.t.env.sous[*i].complete {
                            let op = if matches!(base, Loc::Var { .. }) {
                                "."
                            } else {
                                "->"
                            };
                            return self.err(
                                span,
                                format!("[D_OP_INCOMPLETE] operator {op} cannot be applied to a forward declaration: no {n} definition is available"),
                            );
                        }
                    }
                    return self.err(
                        span,
                        format!("[D_TYPE_MEMBER] {m} is not a member of {}", bty.name()),
                    );
                }
            },
            _ => {
                return self.err(
                    span,
                    format!(
                        "[D_OP_SOU] operator . must be applied to a struct or union, not {}",
                        bty.name()
                    ),
                )
            }
        };
        match base {
            Loc::Var {
                class, name, keys, ..
            } => {
                let path = format!("{name}.{m}");
                if let Some((_, w)) = mem.bits {
                    let signed = mem.ty.signed();
                    self.t.bitfields.insert((class, path.clone()), (w, signed));
                }
                Ok(Loc::Var {
                    class,
                    name: path,
                    keys,
                    ty: Some(mem.ty),
                    span,
                })
            }
            Loc::Mem { addr, .. } | Loc::MemBits { addr, .. } => {
                if mem.off != 0 {
                    let r = self.reg(span)?;
                    self.load_const(r, mem.off);
                    self.emit(Op::Add, addr, addr, r, 0);
                    self.release(r);
                }
                Ok(match mem.bits {
                    Some((shift, width)) => Loc::MemBits {
                        addr,
                        ty: mem.ty,
                        shift,
                        width,
                    },
                    None => Loc::Mem { addr, ty: mem.ty },
                })
            }
            Loc::Val { .. } => self.err(span, "internal error: member of a value"),
        }
    }
}

pub(super) static I64_TY: Ty = I64;

/// A key or an index of a variable path.
#[derive(Clone)]
pub(super) enum KeyPart<'e> {
    /// An associative-array key, with its declared type if any.
    Key(&'e Expr, Option<Ty>),
    /// An index into a fixed array of the given length.
    Index(&'e Expr, u64),
}

/// Where an lvalue is, before its keys are evaluated.
pub(super) enum Loc<'e> {
    /// A variable, or a member (`x.a.b`) or element of one: storage class, path, keys,
    /// type (`None`: not fixed yet).
    Var {
        class: DeclClass,
        name: String,
        keys: Vec<KeyPart<'e>>,
        ty: Option<Ty>,
        span: Span,
    },
    /// Kernel memory at the address in a register.
    Mem { addr: u8, ty: Ty },
    /// A bit-field in kernel memory: the storage unit (of type `ty`) at `addr`.
    MemBits {
        addr: u8,
        ty: Ty,
        shift: u8,
        width: u8,
    },
    /// A value in a register (the base of `p[i]` when `p` is not a variable).
    Val { reg: u8, ty: Ty },
}

impl<'e> Loc<'e> {
    pub(super) fn ty(&self) -> &Ty {
        match self {
            Loc::Var { ty, .. } => ty.as_ref().unwrap_or(&I64_TY),
            Loc::Mem { ty, .. } | Loc::MemBits { ty, .. } | Loc::Val { ty, .. } => ty,
        }
    }

    pub(super) fn ty_opt(&self) -> Option<Ty> {
        match self {
            Loc::Var { ty, .. } => ty.clone(),
            Loc::Mem { ty, .. } | Loc::MemBits { ty, .. } | Loc::Val { ty, .. } => Some(ty.clone()),
        }
    }

    pub(super) fn clone_shallow(&self) -> Loc<'e> {
        match self {
            Loc::Var {
                class,
                name,
                keys,
                ty,
                span,
            } => Loc::Var {
                class: *class,
                name: name.clone(),
                keys: keys.clone(),
                ty: ty.clone(),
                span: *span,
            },
            Loc::Mem { addr, ty } => Loc::Mem {
                addr: *addr,
                ty: ty.clone(),
            },
            Loc::Val { reg, ty } => Loc::Val {
                reg: *reg,
                ty: ty.clone(),
            },
            Loc::MemBits {
                addr,
                ty,
                shift,
                width,
            } => Loc::MemBits {
                addr: *addr,
                ty: ty.clone(),
                shift: *shift,
                width: *width,
            },
        }
    }
}
