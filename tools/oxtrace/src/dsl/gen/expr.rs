//! Expressions: operators, casts, `sizeof`, inlines and the checks of operand types;
//! each expression gives a register and its type.

use super::super::error::Span;
use super::super::syntax::ast::*;
use super::super::types::{
    arith, builtin, int_const_type, resolve_type, unary_type, Ty, ACTIONS, I32, U64,
};
use super::loc::{KeyPart, Loc};
use super::{ustack, GResult, Gen, STACK_USE};
use oxtrace_core::action::{Builtin, Op};

impl Gen<'_> {
    /// Compile `e` into a new register.
    pub(super) fn expr(&mut self, e: &Expr) -> GResult<(u8, Ty)> {
        match &e.kind {
            ExprKind::Int(v, form) => {
                let ty = int_const_type(*v, *form);
                let r = self.reg(e.span)?;
                self.load_const(r, *v);
                Ok((r, ty))
            }
            ExprKind::Str(s) => {
                // As DTrace: a literal longer than strsize is truncated to it.
                let s = &s[..s.len().min(self.t.strsize as usize)];
                if s.contains(&0) {
                    return self.err(e.span, "string literal contains a NUL byte");
                }
                let off = self.t.string(s);
                let r = self.reg(e.span)?;
                self.emit(Op::Sets, r, 0, 0, off);
                Ok((r, Ty::Str))
            }
            ExprKind::Ident(name) => {
                if let Some(r) = self.xlate_ident(name, e.span) {
                    return r;
                }
                if let Some(r) = self.stack_ident(name, e.span) {
                    return r;
                }
                if let Some((b, ty)) = builtin(name) {
                    let r = self.reg(e.span)?;
                    let op = if b.is_string() { Op::Ldbs } else { Op::Ldb };
                    self.emit(op, r, 0, 0, b as u32);
                    if b == Builtin::Curthread {
                        return Ok((r, self.t.env.btf_curthread().unwrap_or(ty)));
                    }
                    return Ok((r, ty));
                }
                if let Some((ty, ie)) = self.t.inlines.get(name).cloned() {
                    // The prelude's inlines (the stable probes' arguments) compile in the
                    // prelude, and fail at their use, naming the prelude's line.
                    if self.t.xlate.prelude_inlines.contains(name) {
                        let r = self.in_source(true, |g| g.nested_inline(&ie, e.span));
                        let (r, from) = match r {
                            Err(pe) => {
                                return self.err(
                                    e.span,
                                    format!(
                                        "{} (in {name} at {}:{}:{})",
                                        pe.msg,
                                        super::super::syntax::prelude::PRELUDE_NAME,
                                        pe.line,
                                        pe.col
                                    ),
                                )
                            }
                            Ok(v) => v,
                        };
                        return self.convert(r, &from, &ty, e.span);
                    }
                    let (r, from) = self.nested_inline(&ie, e.span)?;
                    return self.convert(r, &from, &ty, e.span);
                }
                if let Some(&v) = self.t.env.enums.get(name) {
                    let r = self.reg(e.span)?;
                    self.load_const(r, v as u64);
                    return Ok((r, I32));
                }
                if name.starts_with("arg") && name[3..].parse::<u32>().is_ok() {
                    return self.err(
                        e.span,
                        format!("[D_IDENT_UNDEF] {name} is not available (arg0..arg9 are)"),
                    );
                }
                self.rvalue(e)
            }
            ExprKind::Member(..) | ExprKind::Arrow(..) if self.is_xlate_member(e) => {
                self.xlate_member(e)
            }
            ExprKind::Xlate(..) => self.xlate_whole(e.span),
            ExprKind::SelfVar(_)
            | ExprKind::This(_)
            | ExprKind::Index(..)
            | ExprKind::Subscript(..)
            | ExprKind::Member(..)
            | ExprKind::Arrow(..) => self.rvalue(e),
            ExprKind::SizeofType(tn) => {
                let ty = self.resolve(tn, e.span)?;
                let n = self.sizeof(&ty, e.span)?;
                let r = self.reg(e.span)?;
                self.load_const(r, n);
                Ok((r, U64))
            }
            ExprKind::SizeofExpr(a) => {
                let array = match &a.kind {
                    ExprKind::Ident(n) => Some((DeclClass::Global, n.clone(), n.clone())),
                    ExprKind::SelfVar(n) => Some((DeclClass::Thread, n.clone(), format!("self->{n}"))),
                    ExprKind::This(n) => Some((DeclClass::Local, n.clone(), format!("this->{n}"))),
                    _ => None,
                };
                if let Some((class, n, shown)) = array {
                    if matches!(self.t.shapes.get(&(class, n)), Some(&(true, _))) {
                        return self.err(
                            a.span,
                            format!("[D_IDENT_BADREF] associative array {shown} has no size: only its elements have one"),
                        );
                    }
                }
                if matches!(a.kind, ExprKind::Member(..) | ExprKind::Arrow(..)) {
                    let mark = self.code.len();
                    let free = self.free.clone();
                    let bits = match self.loc(a)? {
                        Loc::MemBits { .. } => true,
                        Loc::Var { class, name, .. } => {
                            self.t.bitfields.contains_key(&(class, name))
                        }
                        _ => false,
                    };
                    self.code.truncate(mark);
                    self.free = free;
                    if bits {
                        return self.err(
                            e.span,
                            "[D_SIZEOF_BITFIELD] cannot apply sizeof to a bit-field",
                        );
                    }
                }
                let ty = self.type_of(a)?;
                let n = self.sizeof(&ty, e.span)?;
                let r = self.reg(e.span)?;
                self.load_const(r, n);
                Ok((r, U64))
            }
            ExprKind::Offsetof(tn, m) => {
                // A struct or union nobody defined is no operand offsetof can take.
                let ty = self.resolve(tn, e.span).map_err(|mut err| {
                    if let Some(m) = err.msg.strip_prefix("[D_TYPE_ERR]") {
                        err.msg = format!("[D_OFFSETOF_TYPE]{m}");
                    }
                    err
                })?;
                if !matches!(ty, Ty::Sou(..)) {
                    return self.err(
                        e.span,
                        format!(
                            "[D_OFFSETOF_TYPE] offsetof operand must be a struct or union type, not {}",
                            ty.name()
                        ),
                    );
                }
                let off = match self.t.env.member(&ty, m) {
                    Some(mm) if mm.bits.is_some() => {
                        return self.err(
                            e.span,
                            format!("[D_OFFSETOF_BITFIELD] cannot take offsetof of bit-field {m}"),
                        )
                    }
                    Some(mm) => mm.off,
                    None => {
                        if let Some(msg) = self.t.env.btf_no_member(&ty, m) {
                            return self.err(e.span, msg);
                        }
                        // As DTrace, which has no tag of its own for offsetof's.
                        return self.err(
                            e.span,
                            format!("[D_UNKNOWN] failed to determine offset of {m}: {m} is not a member of {}", ty.name()),
                        );
                    }
                };
                let r = self.reg(e.span)?;
                self.load_const(r, off);
                Ok((r, U64))
            }
            ExprKind::Unary(UnOp::Deref, _) => self.rvalue(e),
            ExprKind::Unary(UnOp::AddrOf, a) => {
                // The address of an external variable of unknown type: a void *.
                if let ExprKind::Ident(n) = &a.kind {
                    if let (true, Ok((addr, None))) = (n.contains('`'), self.t.env.kvar(n)) {
                        let r = self.reg(e.span)?;
                        self.load_const(r, addr);
                        return Ok((r, Ty::Ptr(Box::new(Ty::Void))));
                    }
                    // A per-CPU variable's symbol value: its offset in each CPU's area.
                    if let Some(off) = n
                        .contains('`')
                        .then(|| self.t.env.kvar_percpu(n))
                        .flatten()
                    {
                        let r = self.reg(e.span)?;
                        self.load_const(r, off);
                        return Ok((r, Ty::Ptr(Box::new(Ty::Void))));
                    }
                }
                // A variable itself, as DTrace refuses it (its storage may move between
                // firings); its members and elements are objects with addresses.
                let dvar = match &a.kind {
                    ExprKind::Ident(n) => !n.contains('`'),
                    ExprKind::This(_) | ExprKind::SelfVar(_) | ExprKind::AggRef(_) => true,
                    _ => false,
                };
                if dvar {
                    return self.err(
                        e.span,
                        "[D_ADDROF_VAR] cannot take address of dynamic variable",
                    );
                }
                if !self.is_storage(a) {
                    return self.err(
                        e.span,
                        "[D_ADDROF_LVAL] unary & requires an lvalue as its operand",
                    );
                }
                if self.is_bitfield(a)? {
                    return self.err(
                        e.span,
                        "[D_ADDROF_BITFIELD] cannot take the address of a bit-field",
                    );
                }
                match self.loc(a)? {
                    Loc::Mem { addr, ty } => Ok((addr, Ty::Ptr(Box::new(ty)))),
                    Loc::MemBits { .. } => self.err(
                        e.span,
                        "[D_ADDROF_BITFIELD] cannot take the address of a bit-field",
                    ),
                    Loc::Var { class, keys, .. }
                        if keys.iter().any(|k| matches!(k, KeyPart::Key(..))) || class == DeclClass::Local =>
                    {
                        self.err(e.span, "[D_ADDROF_VAR] cannot take address of dynamic variable")
                    }
                    _ => self.err(
                        e.span,
                        "[D_ADDROF_VAR] cannot take the address of a global or thread-local variable's member or element: only of clause-local ones (this->) and of memory",
                    ),
                }
            }
            ExprKind::Unary(op, a) => self.unary(*op, a, e.span),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, e.span),
            ExprKind::Ternary(c, a, b) => {
                // NULL on one side of a string: the empty string.
                let e0 = empty_string(e.span);
                let null_for = |g: &mut Self, x: &Expr, y: &Expr| -> GResult<bool> {
                    Ok(is_null(x) && !is_null(y) && g.type_of(y)? == Ty::Str)
                };
                let a: &Expr = if null_for(self, a, b)? { &e0 } else { a };
                let b: &Expr = if null_for(self, b, a)? { &e0 } else { b };
                let (rc, tc) = self.expr(c)?;
                if !tc.is_scalar() {
                    return self.err(
                        c.span,
                        "[D_OP_SCALAR] operator ?: expression must be of scalar type",
                    );
                }
                let rd = self.reg(e.span)?;
                let j_else = self.emit(Op::Bz, 0, rc, 0, 0);
                self.release(rc);
                let (ra, ta) = self.value(a, "D_OP_ACT", "D_OP_INCOMPAT")?;
                self.emit(Op::Mov, rd, ra, 0, 0);
                self.release(ra);
                let j_end = self.emit(Op::Ba, 0, 0, 0, 0);
                self.patch(j_else);
                let (rb, tb) = self.value(b, "D_OP_ACT", "D_OP_INCOMPAT")?;
                self.emit(Op::Mov, rd, rb, 0, 0);
                self.release(rb);
                self.patch(j_end);
                let ty = match (&ta, &tb) {
                    (Ty::Str, Ty::Str) => Ty::Str,
                    (Ty::Float(x), Ty::Float(y)) if x == y => ta.clone(),
                    (Ty::Str | Ty::Float(_), _) | (_, Ty::Str | Ty::Float(_)) => {
                        return self.err(
                            e.span,
                            format!(
                                "?: operands have incompatible types: {} and {}",
                                ta.name(),
                                tb.name()
                            ),
                        )
                    }
                    (Ty::Ptr(_), _) => ta,
                    (_, Ty::Ptr(_)) => tb,
                    _ => arith(&ta, &tb),
                };
                Ok((rd, ty))
            }
            ExprKind::Assign(op, lhs, rhs) => self.assign(*op, lhs, rhs, e.span),
            ExprKind::IncDec { pre, inc, target } => self.incdec(*pre, *inc, target, e.span),
            ExprKind::Comma(a, b) => {
                let (ra, _) = self.expr(a)?;
                self.release(ra);
                self.expr(b)
            }
            ExprKind::Cast(tn, a) => {
                let to = self.resolve(tn, e.span)?;
                if let Some(what) = self.xlate_data(a) {
                    return self.err(
                        e.span,
                        format!(
                            "[D_CAST_INVAL] invalid cast expression: \"{what}\" to \"{}\"",
                            to.name()
                        ),
                    );
                }
                let (r, from) = self.value(a, "D_CAST_INVAL", "D_CAST_INVAL")?;
                if matches!(to, Ty::Sou(..) | Ty::Array(..)) {
                    return self.err(
                        e.span,
                        format!("[D_CAST_INVAL] invalid cast expression: cannot cast to {}", to.name()),
                    );
                }
                match (&to, &from) {
                    (Ty::Str, Ty::Str) => Ok((r, to)),
                    (Ty::Float(x), Ty::Float(y)) if x == y => Ok((r, to)),
                    (Ty::Float(_), _) | (_, Ty::Float(_)) => self.err(
                        e.span,
                        format!(
                            "[D_CAST_INVAL] invalid cast expression: \"{}\" to \"{}\"",
                            from.name(),
                            to.name()
                        ),
                    ),
                    (Ty::Str, _) => {
                        // (string) of an address reads a kernel string, like stringof().
                        let rd = self.reg(e.span)?;
                        self.emit(Op::Kstr, rd, r, 0, 0);
                        self.release(r);
                        Ok((rd, Ty::Str))
                    }
                    (_, Ty::Str) => self.err(
                        e.span,
                        format!("invalid cast from string to {}", to.name()),
                    ),
                    (Ty::Void, _) => self.err(e.span, "cannot cast to void"),
                    (Ty::Int { .. }, _) => {
                        self.normalize(r, &to);
                        Ok((r, to))
                    }
                    _ => Ok((r, to)),
                }
            }
            ExprKind::Call(name, args) => self.call(name, args, e.span),
            ExprKind::AggRef(name) => self.err(
                e.span,
                format!("aggregation @{name} can only be used as an argument of printa, clear, trunc or normalize"),
            ),
        }
    }

    /// A predicate or `if` condition, which must be scalar; `what` begins the error.
    pub(crate) fn condition(&mut self, e: &Expr, what: &str) -> GResult<u8> {
        // An array or struct variable is refused as a condition before it is read (a
        // read of it has its own error).
        let stored = if self.is_storage(e) {
            Some(self.type_of(e)?)
        } else {
            None
        };
        let (r, ty) = match stored {
            Some(ty) if !ty.is_scalar() => (0, ty),
            _ => self.expr(e)?,
        };
        if !ty.is_scalar() {
            return self.err(
                e.span,
                format!("{what} must be of scalar type, not {}", ty.name()),
            );
        }
        Ok(r)
    }

    pub(super) fn unary(&mut self, op: UnOp, a: &Expr, span: Span) -> GResult<(u8, Ty)> {
        let m = match op {
            UnOp::Neg => "[D_OP_ARITH] operator - requires an operand of arithmetic type",
            UnOp::Plus => "[D_OP_ARITH] operator + requires an operand of arithmetic type",
            UnOp::BitNot => "[D_OP_INT] operator ~ requires an operand of integral type",
            _ => "[D_OP_SCALAR] operator ! requires an operand of scalar type",
        };
        // An action's value is void: the operator refuses it, as DTrace's does.
        if matches!(&a.kind, ExprKind::Call(n, _) if ACTIONS.contains(&n.as_str())) {
            return self.err(span, m);
        }
        let (r, ty) = self.expr(a)?;
        if ty.is_float() || !ty.is_scalar() {
            return self.err(span, m);
        }
        match op {
            UnOp::Plus => {
                self.need_scalar(&ty, a.span, "unary +", "D_OP_ARITH")?;
                Ok((r, ty))
            }
            UnOp::Neg | UnOp::BitNot => {
                self.need_scalar(&ty, a.span, "this operator", "D_OP_ARITH")?;
                let rt = unary_type(&ty);
                let o = if op == UnOp::Neg { Op::Neg } else { Op::Not };
                self.emit(o, r, r, 0, 0);
                self.normalize(r, &rt);
                Ok((r, rt))
            }
            UnOp::Not => {
                self.need_scalar(&ty, a.span, "operator !", "D_OP_SCALAR")?;
                self.emit(Op::Lnot, r, r, 0, 0);
                Ok((r, I32))
            }
            UnOp::Deref | UnOp::AddrOf => {
                self.err(span, "internal error: dereference outside rvalue")
            }
        }
    }

    pub(super) fn binary(
        &mut self,
        op: BinOp,
        a: &Expr,
        b: &Expr,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        // An operand with no value, in DTrace's words for the operator.
        let void_tag = match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => "D_OP_ARITH",
            BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => "D_OP_INT",
            BinOp::LAnd | BinOp::LOr | BinOp::LXor => "D_OP_SCALAR",
            _ => "D_OP_INCOMPAT",
        };
        self.need_value(a, void_tag, "D_OP_INCOMPAT")?;
        self.need_value(b, void_tag, "D_OP_INCOMPAT")?;
        match op {
            BinOp::LAnd | BinOp::LOr => {
                let (ra, ta) = self.expr(a)?;
                if ta.is_float() || !ta.is_scalar() {
                    return self.err(span, float_binop_error(op, &ta, &ta));
                }
                let j = self.emit(
                    if op == BinOp::LAnd { Op::Bz } else { Op::Bnz },
                    0,
                    ra,
                    0,
                    0,
                );
                let (rb, tb) = self.expr(b)?;
                if tb.is_float() || !tb.is_scalar() {
                    return self.err(span, float_binop_error(op, &tb, &tb));
                }
                self.emit(Op::Ne, ra, rb, 0, 0);
                self.release(rb);
                let j_end = if op == BinOp::LOr {
                    Some(self.emit(Op::Ba, 0, 0, 0, 0))
                } else {
                    None
                };
                self.patch(j);
                if let Some(je) = j_end {
                    // a was true: the result is 1.
                    self.emit(Op::Ldi, ra, 0, 0, 1);
                    self.patch(je);
                }
                return Ok((ra, I32));
            }
            BinOp::LXor => {
                let (ra, ta) = self.expr(a)?;
                let (rb, tb) = self.expr(b)?;
                if !(ta.is_scalar() && tb.is_scalar()) {
                    return self.err(span, float_binop_error(op, &ta, &tb));
                }
                self.emit(Op::Ne, ra, ra, 0, 0);
                self.emit(Op::Ne, rb, rb, 0, 0);
                self.emit(Op::Xor, ra, ra, rb, 0);
                self.release(rb);
                return Ok((ra, I32));
            }
            _ => {}
        }
        if matches!(op, BinOp::Div | BinOp::Mod) && const_eval(b) == Some(0) {
            return self.err(b.span, "[D_DIV_ZERO] expression contains division by zero");
        }
        let (mark, free) = (self.code.len(), self.free.clone());
        let (ra, ta) = self.expr(a)?;
        let (rb, tb) = self.expr(b)?;
        if ta == Ty::Stack || tb == Ty::Stack {
            return self.err(span, STACK_USE);
        }
        if ta.is_float() || tb.is_float() {
            return self.err(span, float_binop_error(op, &ta, &tb));
        }
        let cmp = matches!(
            op,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        );
        if ta == Ty::Str || tb == Ty::Str {
            if cmp && (is_null(a) || is_null(b)) {
                // A string compared with NULL (the constant 0): with the empty string.
                self.code.truncate(mark);
                self.free = free;
                let e = empty_string(span);
                let (a, b) = if is_null(a) { (&e, b) } else { (a, &e) };
                return self.binary(op, a, b, span);
            }
            if !(cmp && ta == tb) {
                // In DTrace's words: those of its operator, or of incompatible types.
                return self.err(span, float_binop_error(op, &ta, &tb));
            }
            self.emit(Op::Scmp, ra, ra, rb, 0);
            self.release(rb);
            let o = cmp_op(op, true);
            self.emit(o, ra, ra, 0, 0);
            return Ok((ra, I32));
        }
        if cmp {
            let signed = !matches!((&ta, &tb), (Ty::Ptr(_), _) | (_, Ty::Ptr(_)))
                && arith(&ta, &tb).signed();
            self.emit(cmp_op(op, signed), ra, ra, rb, 0);
            self.release(rb);
            return Ok((ra, I32));
        }
        if let Some(res) = self.ptr_arith(op, ra, &ta, rb, &tb, span)? {
            self.release(rb);
            return Ok(res);
        }
        let rt = match op {
            BinOp::Shl | BinOp::Shr => unary_type(&ta),
            _ => arith(&ta, &tb),
        };
        let Some(o) = arith_op(op, rt.signed()) else {
            return self.err(span, "internal error: unexpected operator");
        };
        self.emit(o, ra, ra, rb, 0);
        self.release(rb);
        self.normalize(ra, &rt);
        Ok((ra, rt))
    }

    /// `ra op rb` on registers already holding values of types `ta`, `tb`.
    pub(super) fn binary_regs(
        &mut self,
        op: BinOp,
        ra: u8,
        ta: &Ty,
        rb: u8,
        tb: &Ty,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        if *ta == Ty::Stack || *tb == Ty::Stack {
            return self.err(span, STACK_USE);
        }
        if *ta == Ty::Str || *tb == Ty::Str {
            return self.err(
                span,
                format!(
                    "[D_OP_INCOMPAT] operands have incompatible types: \"{}\" {}= \"{}\"",
                    ta.name(),
                    binop_text(op),
                    tb.name()
                ),
            );
        }
        if ta.is_float() || tb.is_float() {
            return self.err(span, float_binop_error(op, ta, tb));
        }
        if let Some(res) = self.ptr_arith(op, ra, ta, rb, tb, span)? {
            return Ok(res);
        }
        let rt = match op {
            BinOp::Shl | BinOp::Shr => unary_type(ta),
            _ => arith(ta, tb),
        };
        let rt = if let Ty::Ptr(_) = ta { ta.clone() } else { rt };
        let Some(o) = arith_op(op, rt.signed()) else {
            return self.err(span, "invalid compound assignment");
        };
        self.emit(o, ra, ra, rb, 0);
        self.normalize(ra, &rt);
        Ok((ra, rt))
    }

    /// Resolve a written type to a value type.
    pub(super) fn resolve(&mut self, tn: &TypeName, span: Span) -> GResult<Ty> {
        self.t.env.btf_prepare(tn);
        resolve_type(&self.t.env, tn).or_else(|m| {
            let kernel = matches!(tn, TypeName::Sou(..) | TypeName::Ptr(_));
            if kernel && self.t.env.btf.btf.is_none() && m.contains(" is not defined") {
                return self.err(
                    span,
                    format!("{m}: {}", super::super::types::btf_types::NO_BTF),
                );
            }
            self.err(span, m)
        })
    }

    pub(super) fn sizeof(&self, ty: &Ty, span: Span) -> GResult<u64> {
        match ty {
            Ty::Void => self.err(span, "[D_SIZEOF_TYPE] cannot apply sizeof to a void type"),
            Ty::Sou(i, n) if !self.t.env.sous[*i].complete => self.err(
                span,
                format!("[D_SIZEOF_TYPE] cannot apply sizeof to an incomplete type ({n})"),
            ),
            _ => Ok(self.t.env.size(ty, self.t.strsize as u64)),
        }
    }

    /// Whether `e` is a bit-field member (of a variable as of memory: DTrace refuses its
    /// address before asking where the struct lives).
    fn is_bitfield(&mut self, e: &Expr) -> GResult<bool> {
        let (b, m) = match &e.kind {
            ExprKind::Member(b, m) => (b, m),
            ExprKind::Arrow(b, m) => (b, m),
            _ => return Ok(false),
        };
        let bt = match (&e.kind, self.type_of(b)?) {
            (ExprKind::Arrow(..), Ty::Ptr(p)) => *p,
            (_, t) => t,
        };
        Ok(self.t.env.member(&bt, m).is_some_and(|x| x.bits.is_some()))
    }

    /// The type of `e` without keeping its code.
    pub(super) fn type_of(&mut self, e: &Expr) -> GResult<Ty> {
        // A translation's type is its output's (the input of a struct input's translator).
        if let Some(out) = self.xlate_type(e) {
            return out;
        }
        let mark = self.code.len();
        let free = self.free.clone();
        // A translated member is a value its translator computes, not storage.
        let ty = if self.is_storage(e) && !self.is_xlate_member(e) {
            self.loc(e)?.ty().clone()
        } else {
            self.expr(e)?.1
        };
        self.code.truncate(mark);
        self.free = free;
        Ok(ty)
    }

    /// Whether `e` names storage rather than a built-in, inline or enumerator.
    pub(super) fn is_storage(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Ident(n) => {
                builtin(n).is_none()
                    && !ustack::is_ident(n)
                    && !self.t.inlines.contains_key(n)
                    && !self.t.env.enums.contains_key(n)
            }
            _ => e.is_place(),
        }
    }

    pub(super) fn nested_inline(&mut self, e: &Expr, at: Span) -> GResult<(u8, Ty)> {
        // An inline's expression reports errors at its own definition. One defined in terms
        // of itself would expand forever.
        const MAX_INLINE: usize = 64;
        if self.inline_depth >= MAX_INLINE {
            return self.err(
                at,
                format!("inlines nested more than {MAX_INLINE} deep (an inline defined in terms of itself?)"),
            );
        }
        self.inline_depth += 1;
        let r = self.expr(e);
        self.inline_depth -= 1;
        r
    }

    /// Check inline `name` where it is declared, as DTrace does: its expression may not
    /// name the inline itself (`D_IDENT_UNDEF`) and its type must suit the declared one
    /// (`D_OP_INCOMPAT`). Other errors (a probe's argument, outside any clause) wait for a
    /// use of the inline, which compiles it in its clause.
    pub(in super::super) fn check_inline(&mut self, name: &str) -> GResult<()> {
        let Some((ty, e)) = self.t.inlines.remove(name) else {
            return Ok(());
        };
        let r = self.expr(&e);
        self.t
            .inlines
            .insert(name.to_string(), (ty.clone(), e.clone()));
        match r {
            Ok((_, from)) => {
                if self
                    .check_compat(&ty, &from, e.span, Some(is_null(&e)))
                    .is_err()
                {
                    return self.err(
                        e.span,
                        format!(
                            "[D_OP_INCOMPAT] inline {name} definition uses incompatible types: \"{}\" = \"{}\"",
                            ty.name(),
                            from.name()
                        ),
                    );
                }
                Ok(())
            }
            Err(err) if err.msg.contains(&format!("failed to resolve {name}:")) => Err(err),
            Err(_) => Ok(()),
        }
    }

    /// Convert register `r` of type `from` to `to` (an inline's declared type).
    pub(super) fn convert(&mut self, r: u8, from: &Ty, to: &Ty, span: Span) -> GResult<(u8, Ty)> {
        self.check_compat(to, from, span, None)?;
        self.normalize(r, to);
        Ok((r, to.clone()))
    }

    /// Whether a value of type `from` may be stored in a variable of type `to`; `lit0`
    /// holds whether the value is the constant 0 (which any pointer takes).
    pub(super) fn check_compat(
        &self,
        to: &Ty,
        from: &Ty,
        span: Span,
        lit0: Option<bool>,
    ) -> GResult<()> {
        let ok = match (to, from) {
            (Ty::Int { .. }, Ty::Int { .. }) => true,
            (Ty::Str, Ty::Str) => true,
            (Ty::Float(a), Ty::Float(b)) => a == b,
            (Ty::Ptr(a), Ty::Ptr(b)) => a == b || **a == Ty::Void || **b == Ty::Void,
            (Ty::Ptr(_), Ty::Int { .. }) => lit0 == Some(true),
            (Ty::Sou(a, _), Ty::Sou(b, _)) => a == b,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            self.err(
                span,
                format!(
                    "[D_OP_INCOMPAT] operands have incompatible types: \"{}\" = \"{}\"",
                    to.name(),
                    from.name()
                ),
            )
        }
    }
}

/// Whether `e` is NULL, the constant 0, which a string takes as the empty string.
pub(super) fn is_null(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Int(0, _))
}

/// The empty string literal, which stands for NULL where a string is expected.
pub(super) fn empty_string(span: Span) -> Expr {
    Expr {
        kind: ExprKind::Str(Vec::new()),
        span,
    }
}

/// The error for binary operator `op` with a floating-point or string operand (`ta op
/// tb`), in DTrace's words: D has no floating-point arithmetic or comparison, and a string
/// only compares with a string.
pub(super) fn float_binop_error(op: BinOp, ta: &Ty, tb: &Ty) -> String {
    let o = binop_text(op);
    match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
            format!("[D_OP_ARITH] operator {o} requires operands of arithmetic type")
        }
        BinOp::Mod | BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => {
            format!("[D_OP_INT] operator {o} requires operands of integral type")
        }
        BinOp::LAnd | BinOp::LOr | BinOp::LXor => {
            format!("[D_OP_SCALAR] operator {o} requires operands of scalar type")
        }
        _ => format!(
            "[D_OP_INCOMPAT] operands have incompatible types: \"{}\" {o} \"{}\"",
            ta.name(),
            tb.name()
        ),
    }
}

pub(super) fn binop_text(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Eq => "==",
        BinOp::Ne => "!=",
        BinOp::Lt => "<",
        BinOp::Le => "<=",
        BinOp::Gt => ">",
        BinOp::Ge => ">=",
        BinOp::LAnd => "&&",
        BinOp::LOr => "||",
        BinOp::LXor => "^^",
    }
}

/// The instruction of an arithmetic or bitwise operator.
pub(super) fn arith_op(op: BinOp, signed: bool) -> Option<Op> {
    Some(match op {
        BinOp::Add => Op::Add,
        BinOp::Sub => Op::Sub,
        BinOp::Mul => Op::Mul,
        BinOp::Div if signed => Op::Sdiv,
        BinOp::Div => Op::Udiv,
        BinOp::Mod if signed => Op::Srem,
        BinOp::Mod => Op::Urem,
        BinOp::And => Op::And,
        BinOp::Or => Op::Or,
        BinOp::Xor => Op::Xor,
        BinOp::Shl => Op::Sll,
        BinOp::Shr if signed => Op::Sra,
        BinOp::Shr => Op::Srl,
        _ => return None,
    })
}

pub(super) fn cmp_op(op: BinOp, signed: bool) -> Op {
    match (op, signed) {
        (BinOp::Eq, _) => Op::Eq,
        (BinOp::Ne, _) => Op::Ne,
        (BinOp::Lt, true) => Op::Lt,
        (BinOp::Le, true) => Op::Le,
        (BinOp::Gt, true) => Op::Gt,
        (BinOp::Ge, true) => Op::Ge,
        (BinOp::Lt, false) => Op::Ltu,
        (BinOp::Le, false) => Op::Leu,
        (BinOp::Gt, false) => Op::Gtu,
        _ => Op::Geu,
    }
}
