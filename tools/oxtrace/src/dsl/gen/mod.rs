//! The code generator: one clause's statements and expressions to bytecode, filling the
//! program-wide tables (`passes::Tables`: variables, aggregations, strings, formats).

use super::error::{CompileError, Span};
// options.rs names GResult here.
pub(super) use super::error::GResult;
use super::format::{self, ArgKind};
use super::passes::{Tables, Var};
use super::syntax::ast::*;
use super::types::{arith, builtin, resolve_type, Ty, TypeEnv, ACTIONS, I32, I64, U32, U64};
use super::KeyKind;
use crate::options;
use crate::providers::tracepoints::FieldKind;
use oxtrace_core::action::{self as act, insn, Builtin, Op, Scope};
use oxtrace_core::agg::{check_params, AggKind};

mod subr;

mod ustack;

pub(super) mod mem;
pub(super) mod xlate;

pub(super) struct Gen<'a> {
    pub(super) t: &'a mut Tables,
    pub(super) src: &'a str,
    pub(super) input: &'a str,
    pub(super) code: Vec<u64>,
    pub(super) free: Vec<u8>,
    /// The inputs of the translations being compiled: name, register, type (`xlate.rs`).
    pub(super) xbind: Vec<(String, u8, Ty)>,
    /// Inlines being expanded.
    inline_depth: usize,
}

impl<'a> Gen<'a> {
    pub(super) fn new(t: &'a mut Tables, src: &'a str, input: &'a str) -> Self {
        Gen {
            t,
            src,
            input,
            code: Vec::new(),
            free: (1..act::NREGS as u8).rev().collect(),
            xbind: Vec::new(),
            inline_depth: 0,
        }
    }

    pub(super) fn err<T>(&self, span: Span, msg: impl Into<String>) -> GResult<T> {
        Err(CompileError::at(self.src, self.input, span, msg))
    }

    fn reg(&mut self, span: Span) -> GResult<u8> {
        match self.free.pop() {
            Some(r) => Ok(r),
            None => self.err(span, "expression too complex: out of registers"),
        }
    }

    fn release(&mut self, r: u8) {
        if r != 0 && !self.free.contains(&r) {
            self.free.push(r);
        }
    }

    pub(super) fn emit(&mut self, op: Op, rd: u8, r1: u8, r2: u8, imm: u32) -> usize {
        self.code.push(insn(op, rd, r1, r2, imm));
        self.code.len() - 1
    }

    fn patch(&mut self, at: usize) {
        let target = self.code.len() as u32;
        let mut i = act::Insn::decode(self.code[at]);
        i.imm = target;
        self.code[at] = i.encode();
    }

    pub(super) fn load_const(&mut self, rd: u8, v: u64) {
        if v as i64 >= i32::MIN as i64 && v as i64 <= i32::MAX as i64 {
            self.emit(Op::Ldi, rd, 0, 0, v as u32);
        } else {
            let i = self.t.int(v);
            self.emit(Op::Setx, rd, 0, 0, i);
        }
    }

    /// Narrow a 64-bit register to the representation of `ty`.
    fn normalize(&mut self, r: u8, ty: &Ty) {
        if let Ty::Int { size, signed } = ty {
            if *size < 8 {
                let op = if *signed { Op::Sext } else { Op::Zext };
                self.emit(op, r, r, 0, *size as u32 * 8);
            }
        }
    }

    fn var(&mut self, scope: Scope, name: &str) -> u32 {
        let key = (scope as u32, name.to_string());
        if let Some(&i) = self.t.var_idx.get(&key) {
            return i;
        }
        let i = self.t.vars.len() as u32;
        self.t.vars.push(Var {
            name: name.to_string(),
            scope,
            keys: None,
            string: false,
        });
        self.t.var_idx.insert(key, i);
        i
    }

    fn local(&mut self, name: &str) -> u32 {
        let n = self.t.locals.len() as u32;
        self.t.locals.entry(name.to_string()).or_insert((n, None)).0
    }

    // ---- expressions -------------------------------------------------------------------

    /// Compile `e` into a new register.
    pub(super) fn expr(&mut self, e: &Expr) -> GResult<(u8, Ty)> {
        match &e.kind {
            ExprKind::Int(v, unsigned) => {
                let ty = if *unsigned {
                    if *v <= u32::MAX as u64 {
                        U32
                    } else {
                        U64
                    }
                } else if *v <= i32::MAX as u64 {
                    I32
                } else if *v <= i64::MAX as u64 {
                    I64
                } else {
                    U64
                };
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
                let ty = self.resolve(tn, e.span)?;
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
                        return self.err(
                            e.span,
                            format!("[D_TYPE_MEMBER] {} is not a member of {}", m, ty.name()),
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
                }
                if !self.is_storage(a) {
                    return self.err(
                        e.span,
                        "[D_ADDROF_LVAL] unary & requires an lvalue as its operand",
                    );
                }
                match self.loc(a)? {
                    Loc::Mem { addr, ty } => Ok((addr, Ty::Ptr(Box::new(ty)))),
                    Loc::MemBits { .. } => self.err(
                        e.span,
                        "[D_ADDROF_BITFIELD] cannot take the address of a bit-field",
                    ),
                    _ => self.err(
                        e.span,
                        "[D_ADDROF_VAR] cannot take the address of a D variable: only of kernel memory",
                    ),
                }
            }
            ExprKind::Unary(op, a) => self.unary(*op, a, e.span),
            ExprKind::Binary(op, a, b) => self.binary(*op, a, b, e.span),
            ExprKind::Ternary(c, a, b) => {
                let (rc, tc) = self.expr(c)?;
                self.need_scalar(&tc, c.span, "the condition of ?:")?;
                let rd = self.reg(e.span)?;
                let j_else = self.emit(Op::Bz, 0, rc, 0, 0);
                self.release(rc);
                let (ra, ta) = self.expr(a)?;
                self.emit(Op::Mov, rd, ra, 0, 0);
                self.release(ra);
                let j_end = self.emit(Op::Ba, 0, 0, 0, 0);
                self.patch(j_else);
                let (rb, tb) = self.expr(b)?;
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
                let (r, from) = self.expr(a)?;
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

    fn need_int(&self, ty: &Ty, span: Span, what: &str) -> GResult<()> {
        if ty.is_int() {
            Ok(())
        } else {
            self.err(
                span,
                format!(
                    "[D_OP_INT] {what} must be of integral type, not {}",
                    ty.name()
                ),
            )
        }
    }

    /// `e` as a constant in `1..=max`; `what` names it in the error.
    fn const_upto(&self, e: &Expr, max: u32, what: &str) -> GResult<u32> {
        match const_eval(e) {
            Some(v) if (1..=i64::from(max)).contains(&v) => Ok(v as u32),
            _ => self.err(e.span, format!("{what} must be a constant from 1 to {max}")),
        }
    }

    /// A predicate or `if` condition, which must be scalar; `what` begins the error.
    pub(super) fn condition(&mut self, e: &Expr, what: &str) -> GResult<u8> {
        let (r, ty) = self.expr(e)?;
        if !ty.is_scalar() {
            return self.err(
                e.span,
                format!("{what} must be of scalar type, not {}", ty.name()),
            );
        }
        Ok(r)
    }

    fn need_scalar(&self, ty: &Ty, span: Span, what: &str) -> GResult<()> {
        if ty.is_scalar() {
            Ok(())
        } else {
            self.err(
                span,
                format!("{what} requires an integer or pointer, not {}", ty.name()),
            )
        }
    }

    fn unary(&mut self, op: UnOp, a: &Expr, span: Span) -> GResult<(u8, Ty)> {
        let (r, ty) = self.expr(a)?;
        if ty.is_float() {
            let m = match op {
                UnOp::Neg => "[D_OP_ARITH] operator - requires an operand of arithmetic type",
                UnOp::Plus => "[D_OP_ARITH] operator + requires an operand of arithmetic type",
                UnOp::BitNot => "[D_OP_INT] operator ~ requires an operand of integral type",
                _ => "[D_OP_SCALAR] operator ! requires an operand of scalar type",
            };
            return self.err(span, m);
        }
        match op {
            UnOp::Plus => {
                self.need_scalar(&ty, a.span, "unary +")?;
                Ok((r, ty))
            }
            UnOp::Neg | UnOp::BitNot => {
                self.need_scalar(&ty, a.span, "this operator")?;
                let rt = arith(&ty, &I32);
                let o = if op == UnOp::Neg { Op::Neg } else { Op::Not };
                self.emit(o, r, r, 0, 0);
                self.normalize(r, &rt);
                Ok((r, rt))
            }
            UnOp::Not => {
                self.need_scalar(&ty, a.span, "operator !")?;
                self.emit(Op::Lnot, r, r, 0, 0);
                Ok((r, I32))
            }
            UnOp::Deref | UnOp::AddrOf => {
                self.err(span, "internal error: dereference outside rvalue")
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, span: Span) -> GResult<(u8, Ty)> {
        match op {
            BinOp::LAnd | BinOp::LOr => {
                let (ra, ta) = self.expr(a)?;
                if ta.is_float() {
                    return self.err(span, float_binop_error(op, &ta, &ta));
                }
                self.need_scalar(&ta, a.span, "a logical operator")?;
                let j = self.emit(
                    if op == BinOp::LAnd { Op::Bz } else { Op::Bnz },
                    0,
                    ra,
                    0,
                    0,
                );
                let (rb, tb) = self.expr(b)?;
                if tb.is_float() {
                    return self.err(span, float_binop_error(op, &tb, &tb));
                }
                self.need_scalar(&tb, b.span, "a logical operator")?;
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
                if ta.is_float() || tb.is_float() {
                    return self.err(span, float_binop_error(op, &ta, &tb));
                }
                self.need_scalar(&ta, a.span, "^^")?;
                self.need_scalar(&tb, b.span, "^^")?;
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
            if !(cmp && ta == tb) {
                return self.err(
                    span,
                    format!(
                        "operands have incompatible types: {} {} {}",
                        ta.name(),
                        binop_text(op),
                        tb.name()
                    ),
                );
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
            BinOp::Shl | BinOp::Shr => arith(&ta, &I32),
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

    fn push_keys(&mut self, regs: &[(u8, Ty)]) {
        for (r, ty) in regs {
            if matches!(ty, Ty::Str | Ty::Stack) {
                self.emit(Op::Pushts, 0, *r, 0, 0);
            } else {
                self.emit(Op::Pushtv, 0, *r, 0, ty.int_type().0 as u32);
            }
        }
    }

    /// The record items of value `r` of type `ty`: a long double (the address of its 16
    /// bytes) becomes its two halves as signed 8-byte integers, low first, which tell it
    /// from a `double` (unsigned) to the formatter; any other value is itself.
    fn record_items(&mut self, r: u8, ty: Ty, span: Span) -> GResult<Vec<(u8, Ty)>> {
        if ty != Ty::Float(16) {
            return Ok(vec![(r, ty)]);
        }
        let lo = self.reg(span)?;
        let hi = self.reg(span)?;
        self.emit(Op::Ldx, lo, r, 0, 0);
        self.load_const(hi, 8);
        self.emit(Op::Add, hi, r, hi, 0);
        self.emit(Op::Ldx, hi, hi, 0, 0);
        self.release(r);
        Ok(vec![(lo, I64), (hi, I64)])
    }

    fn release_all(&mut self, regs: &[(u8, Ty)]) {
        for (r, _) in regs {
            self.release(*r);
        }
    }

    // ---- variables, members and elements ------------------------------------------------

    /// Resolve a written type to a value type.
    pub(super) fn resolve(&mut self, tn: &TypeName, span: Span) -> GResult<Ty> {
        self.t.env.btf_prepare(tn);
        resolve_type(&self.t.env, tn).or_else(|m| {
            let kernel = matches!(tn, TypeName::Sou(..) | TypeName::Ptr(_));
            if kernel && self.t.env.btf.btf.is_none() && m.contains(" is not defined") {
                return self.err(span, format!("{m}: {}", super::types::btf_types::NO_BTF));
            }
            self.err(span, m)
        })
    }

    fn sizeof(&self, ty: &Ty, span: Span) -> GResult<u64> {
        match ty {
            Ty::Void => self.err(span, "[D_SIZEOF_TYPE] cannot apply sizeof to a void type"),
            Ty::Sou(i, n) if !self.t.env.sous[*i].complete => self.err(
                span,
                format!("[D_SIZEOF_TYPE] cannot apply sizeof to an incomplete type ({n})"),
            ),
            _ => Ok(self.t.env.size(ty, self.t.strsize as u64)),
        }
    }

    /// The type of `e` without keeping its code.
    fn type_of(&mut self, e: &Expr) -> GResult<Ty> {
        let mark = self.code.len();
        let free = self.free.clone();
        let ty = if self.is_storage(e) {
            self.loc(e)?.ty().clone()
        } else {
            self.expr(e)?.1
        };
        self.code.truncate(mark);
        self.free = free;
        Ok(ty)
    }

    /// Whether `e` names storage rather than a built-in, inline or enumerator.
    fn is_storage(&self, e: &Expr) -> bool {
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

    fn nested_inline(&mut self, e: &Expr, at: Span) -> GResult<(u8, Ty)> {
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

    /// Convert register `r` of type `from` to `to` (an inline's declared type).
    fn convert(&mut self, r: u8, from: &Ty, to: &Ty, span: Span) -> GResult<(u8, Ty)> {
        self.check_compat(to, from, span, None)?;
        self.normalize(r, to);
        Ok((r, to.clone()))
    }

    /// Whether a value of type `from` may be stored in a variable of type `to`; `lit0`
    /// holds whether the value is the constant 0 (which any pointer takes).
    fn check_compat(&self, to: &Ty, from: &Ty, span: Span, lit0: Option<bool>) -> GResult<()> {
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

    /// The storage of a variable, member or element, or of kernel memory, without reading it.
    fn loc<'e>(&mut self, e: &'e Expr) -> GResult<Loc<'e>> {
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
                Ok(var(DeclClass::Local, name, ty))
            }
            ExprKind::Index(name, keys) if name == "args" => self.args(keys, e.span),
            ExprKind::Index(name, keys) if name == "uregs" => self.uregs(keys, e.span),
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
                match base.ty() {
                    Ty::Array(..) | Ty::Ptr(_) => self.subscript(base, keys, e.span),
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
                let (r, ty) = self.expr(b)?;
                let pointee = match &ty {
                    Ty::Ptr(p) if matches!(**p, Ty::Sou(..)) => (**p).clone(),
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
            _ => self.err(
                e.span,
                "[D_OP_LVAL] operator requires a modifiable lvalue as an operand",
            ),
        }
    }

    /// `args[i]`: argument `i` of the probe, typed from the kernel's BTF where it knows the
    /// function (`btf_types.rs`), else an untyped 64-bit integer.
    fn args<'e>(&mut self, keys: &[Expr], span: Span) -> GResult<Loc<'e>> {
        let i = match keys {
            [k] => const_eval(k),
            _ => None,
        };
        let Some(i) = i.filter(|i| (0..10).contains(i)) else {
            return self.err(span, "args[] takes one constant index from 0 to 9");
        };
        let ty = match self.t.env.btf_arg(i as usize) {
            Ok(t) => t,
            Err(m) => return self.err(span, m),
        };
        let r = self.reg(span)?;
        use Builtin::*;
        let arg = [Arg0, Arg1, Arg2, Arg3, Arg4, Arg5, Arg6, Arg7, Arg8, Arg9][i as usize];
        self.emit(Op::Ldb, r, 0, 0, arg as u32);
        self.normalize(r, &ty);
        Ok(Loc::Val { reg: r, ty })
    }

    /// The declared or learned type of a variable path; `None` (and `assumed` noted) when
    /// nothing fixed it yet.
    fn vty(&mut self, class: DeclClass, name: &str) -> Option<Ty> {
        self.t.vty.get(&(class, name.to_string())).cloned()
    }

    /// `base[keys]` of an array or a pointer.
    fn subscript<'e>(&mut self, base: Loc<'e>, keys: &'e [Expr], span: Span) -> GResult<Loc<'e>> {
        if keys.len() != 1 {
            return self.err(
                span,
                "[D_ARR_BADREF] an array or pointer takes exactly one subscript",
            );
        }
        let k = &keys[0];
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
    fn stride(&self, ty: &Ty) -> u64 {
        match ty {
            Ty::Ptr(pt) => self.t.env.size(pt, self.t.strsize as u64).max(1),
            _ => 1,
        }
    }

    /// `ptr ± int` and `int + ptr`, the integer scaled by the pointee's size, and `ptr -
    /// ptr` of one pointee type, the number of elements between them (C's `ptrdiff_t`, a
    /// `long`); `None` for any other operands. Leaves `rb` to the caller.
    fn ptr_arith(
        &mut self,
        op: BinOp,
        ra: u8,
        ta: &Ty,
        rb: u8,
        tb: &Ty,
        span: Span,
    ) -> GResult<Option<(u8, Ty)>> {
        match (ta, op, tb) {
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
    fn mul_const(&mut self, r: u8, k: u64, span: Span) -> GResult<()> {
        if k != 1 {
            let rs = self.reg(span)?;
            self.load_const(rs, k);
            self.emit(Op::Mul, r, r, rs, 0);
            self.release(rs);
        }
        Ok(())
    }

    /// `addr += idx * size`; releases `idx`.
    fn scale_add(&mut self, addr: u8, idx: u8, size: u64, span: Span) -> GResult<()> {
        self.mul_const(idx, size, span)?;
        self.emit(Op::Add, addr, addr, idx, 0);
        self.release(idx);
        Ok(())
    }

    /// `base[keys]` of an associative array (global, or thread-local `self->a[k]`).
    fn assoc_keys<'e>(&mut self, base: Loc<'e>, keys: &'e [Expr], span: Span) -> GResult<Loc<'e>> {
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
    fn member<'e>(&mut self, base: Loc<'e>, m: &str, span: Span) -> GResult<Loc<'e>> {
        let bty = base.ty().clone();
        let mem = match &bty {
            Ty::Sou(..) => match self.t.env.member(&bty, m) {
                Some(x) => x.clone(),
                None => {
                    if let Some(msg) = self.t.env.btf_no_member(&bty, m) {
                        return self.err(span, msg);
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

    /// Turn a scalar or string location into a place: evaluate its keys and indices.
    fn place(&mut self, l: Loc<'_>, read: bool) -> GResult<(Place, Ty)> {
        match l {
            Loc::Mem { addr, ty } => Ok((Place::Mem(addr), ty)),
            Loc::MemBits {
                addr,
                ty,
                shift,
                width,
            } => Ok((
                Place::Bits {
                    inner: Box::new(Place::Mem(addr)),
                    shift,
                    width,
                    signed: ty.signed(),
                },
                ty,
            )),
            Loc::Val { reg, ty } => Ok((Place::Val(reg), ty)),
            Loc::Var {
                class,
                name,
                keys,
                ty,
                span,
            } => {
                let base = name.split(['.', '[']).next().unwrap_or(&name).to_string();
                if read
                    && !self.t.assigned.contains(&(class, base.clone()))
                    && !self.t.declared.contains_key(&(class, base.clone()))
                {
                    let what = match class {
                        DeclClass::Global => base.to_string(),
                        DeclClass::Thread => format!("self->{base}"),
                        DeclClass::Local => format!("this->{base}"),
                    };
                    return self.err(
                        span,
                        format!("[D_IDENT_UNDEF] failed to resolve {what}: it is never assigned or declared"),
                    );
                }
                let ty = match ty {
                    Some(t) => t,
                    None => {
                        self.t.assumed = true;
                        I64
                    }
                };
                let assoc = keys.iter().any(|k| matches!(k, KeyPart::Key(..)));
                match self.t.shapes.get(&(class, name.clone())) {
                    Some(&(was, at)) if was != assoc => {
                        let first = CompileError::at(self.src, self.input, at, "");
                        let what = if was { "an array" } else { "a scalar" };
                        let now = if assoc { "an array" } else { "a scalar" };
                        return self.err(
                            span,
                            format!(
                                "[D_ARR_BADREF] {} is {what} at {}:{}, {now} here",
                                match class {
                                    DeclClass::Global => name.clone(),
                                    DeclClass::Thread => format!("self->{name}"),
                                    DeclClass::Local => format!("this->{name}"),
                                },
                                first.line,
                                first.col
                            ),
                        );
                    }
                    Some(_) => {}
                    None => {
                        self.t.shapes.insert((class, name.clone()), (assoc, span));
                    }
                }
                // A string global or thread-local lives in the dynamic memory like an array
                // element (the kernel keeps no string space for scalars): `s` is `s[0]`,
                // `self->s` is keyed by the thread.
                if let Some(&(width, signed)) = self.t.bitfields.get(&(class, name.clone())) {
                    let l = Loc::Var {
                        class,
                        name: name.clone(),
                        keys,
                        ty: Some(ty.clone()),
                        span,
                    };
                    self.t.bitfields.remove(&(class, name.clone()));
                    let r = self.place(l, read);
                    self.t.bitfields.insert((class, name), (width, signed));
                    let (inner, ty) = r?;
                    let p = Place::Bits {
                        inner: Box::new(inner),
                        shift: 0,
                        width,
                        signed,
                    };
                    return Ok((p, ty));
                }
                let string_scalar = keys.is_empty() && ty == Ty::Str && class != DeclClass::Local;
                if keys.is_empty() && !string_scalar {
                    let p = match class {
                        DeclClass::Global => {
                            if self
                                .t
                                .var_idx
                                .contains_key(&(Scope::Assoc as u32, name.clone()))
                            {
                                return self.err(
                                    span,
                                    format!("[D_ARR_BADREF] '{name}' is an array elsewhere, a scalar here"),
                                );
                            }
                            Place::Global(self.var(Scope::Global, &name))
                        }
                        DeclClass::Thread => Place::Thread(self.var(Scope::Thread, &name)),
                        DeclClass::Local => Place::Local(self.local(&name)),
                    };
                    return Ok((p, ty));
                }
                if class == DeclClass::Local {
                    return self.local_element(&name, &keys, ty, span);
                }
                let vname = match class {
                    DeclClass::Thread => format!("self->{name}"),
                    _ => name.clone(),
                };
                if class == DeclClass::Global
                    && !string_scalar
                    && self
                        .t
                        .var_idx
                        .contains_key(&(Scope::Global as u32, name.clone()))
                {
                    return self.err(
                        span,
                        format!("[D_ARR_BADREF] '{name}' is a scalar elsewhere, an array here"),
                    );
                }
                let id = self.var(Scope::Assoc, &vname);
                self.t.vars[id as usize].string = ty == Ty::Str;
                let mut regs = Vec::new();
                if class == DeclClass::Thread {
                    let r = self.reg(span)?;
                    self.emit(Op::Ldb, r, 0, 0, act::Builtin::Tid as u32);
                    regs.push((r, I32));
                } else if string_scalar {
                    let r = self.reg(span)?;
                    self.emit(Op::Ldi, r, 0, 0, 0);
                    regs.push((r, I32));
                }
                for k in &keys {
                    let (r, kt) = self.key_part(k)?;
                    regs.push((r, kt));
                }
                self.check_keys(id, &regs, &keys, span)?;
                Ok((Place::Assoc { id, keys: regs }, ty))
            }
        }
    }

    /// Evaluate one key or index (bounds-checked at run time).
    fn key_part(&mut self, k: &KeyPart<'_>) -> GResult<(u8, Ty)> {
        match k {
            KeyPart::Key(e, want) => {
                let (r, t) = self.expr(e)?;
                if matches!(t, Ty::Void | Ty::Sou(..) | Ty::Array(..)) {
                    return self.err(
                        e.span,
                        format!("[D_KEY_TYPE] invalid key type {}", t.name()),
                    );
                }
                if let Some(w) = want {
                    if (*w == Ty::Str) != (t == Ty::Str) {
                        return self.err(
                            e.span,
                            format!(
                                "[D_ARR_BADREF] key is declared {}, used with {}",
                                w.name(),
                                t.name()
                            ),
                        );
                    }
                }
                Ok((r, t))
            }
            KeyPart::Index(e, n) => {
                let (r, t) = self.expr(e)?;
                self.need_int(&t, e.span, "an array subscript")?;
                if const_eval(e).is_none() {
                    self.emit(Op::Chkb, 0, r, 0, *n as u32);
                }
                Ok((r, I64))
            }
        }
    }

    /// An element of a clause-local array: one local per element, chosen by a chain of
    /// compares when the index is not a constant.
    fn local_element(
        &mut self,
        name: &str,
        keys: &[KeyPart<'_>],
        ty: Ty,
        span: Span,
    ) -> GResult<(Place, Ty)> {
        let mut consts = Vec::new();
        let mut dims = Vec::new();
        for k in keys {
            match k {
                KeyPart::Index(e, n) => {
                    consts.push(const_eval(e));
                    dims.push((*e, *n));
                }
                KeyPart::Key(..) => {
                    return self.err(
                        span,
                        "[D_ARR_LOCAL] clause-local variables cannot be associative arrays",
                    )
                }
            }
        }
        if consts.iter().all(|c| c.is_some()) {
            let idx: String = consts
                .iter()
                .map(|c| format!("[{}]", c.unwrap_or(0)))
                .collect();
            return Ok((Place::Local(self.local(&format!("{name}{idx}"))), ty));
        }
        if dims.len() != 1 {
            return self.err(
                span,
                "clause-local arrays of several dimensions take constant subscripts",
            );
        }
        let (e, n) = dims[0];
        if n > 64 {
            return self.err(
                e.span,
                "clause-local arrays of more than 64 elements take constant subscripts",
            );
        }
        let (r, t) = self.expr(e)?;
        self.need_int(&t, e.span, "an array subscript")?;
        self.emit(Op::Chkb, 0, r, 0, n as u32);
        let slots = (0..n)
            .map(|i| self.local(&format!("{name}[{i}]")))
            .collect();
        Ok((Place::LocalArr { slots, idx: r }, ty))
    }

    /// Check the key registers against array `id`'s layout (fixed by its first use).
    fn check_keys(
        &mut self,
        id: u32,
        regs: &[(u8, Ty)],
        keys: &[KeyPart<'_>],
        span: Span,
    ) -> GResult<()> {
        if regs.len() > act::MAX_KEYS {
            return self.err(span, format!("too many keys (at most {})", act::MAX_KEYS));
        }
        if let Some((_, t)) = regs.iter().find(|(_, t)| t.is_float()) {
            return self.err(span, float_key(t));
        }
        let kinds: Vec<KeyKind> = regs.iter().map(|(_, t)| t.key_kind()).collect();
        let name = self.t.vars[id as usize].name.clone();
        let skip = regs.len() - keys.len();
        match &self.t.vars[id as usize].keys {
            None => self.t.vars[id as usize].keys = Some(kinds),
            Some(want) => {
                if want.len() != kinds.len() {
                    return self.err(
                        span,
                        format!(
                            "{name}[] has {} key(s) elsewhere, {} here",
                            want.len() - skip,
                            kinds.len() - skip
                        ),
                    );
                }
                for (i, (w, k)) in want.iter().zip(&kinds).enumerate() {
                    if w != k {
                        let at = match keys.get(i.wrapping_sub(skip)) {
                            Some(KeyPart::Key(e, _)) | Some(KeyPart::Index(e, _)) => e.span,
                            None => span,
                        };
                        return self.err(
                            at,
                            format!(
                                "key {} of {name}[] is {} elsewhere, {} here",
                                i + 1 - skip,
                                w.name(),
                                k.name()
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Read a place into a new register (the place's key registers stay allocated).
    pub(super) fn load_place(&mut self, p: &Place, ty: &Ty, span: Span) -> GResult<u8> {
        if *ty == Ty::Float(16) && !matches!(p, Place::Mem(_) | Place::Val(_)) {
            return self.err(span, LDOUBLE_VAR);
        }
        if matches!(ty, Ty::Sou(..)) {
            return self.err(
                span,
                format!(
                    "[D_OP_SOU] a {} can only be assigned or accessed by member",
                    ty.name()
                ),
            );
        }
        if let Place::Bits {
            inner,
            shift,
            width,
            signed,
        } = p
        {
            let rd = self.load_place(inner, ty, span)?;
            if let Place::Mem(_) = **inner {
                self.extract_bits(rd, *shift, *width, *signed, span)?;
            }
            return Ok(rd);
        }
        let rd = self.reg(span)?;
        match p {
            Place::Bits { .. } => {}
            Place::Global(id) => {
                self.emit(Op::Ldgs, rd, 0, 0, *id);
            }
            Place::Thread(id) => {
                self.emit(Op::Ldts, rd, 0, 0, *id);
            }
            Place::Local(slot) => {
                self.emit(Op::Ldls, rd, 0, 0, *slot);
            }
            Place::Assoc { id, keys } => {
                self.push_keys(keys);
                self.emit(Op::Ldgaa, rd, 0, 0, *id);
            }
            Place::LocalArr { slots, idx } => {
                let rt = self.reg(span)?;
                let mut ends = Vec::new();
                for (i, slot) in slots.iter().enumerate() {
                    self.load_const(rt, i as u64);
                    self.emit(Op::Eq, rt, rt, *idx, 0);
                    let skip = self.emit(Op::Bz, 0, rt, 0, 0);
                    self.emit(Op::Ldls, rd, 0, 0, *slot);
                    ends.push(self.emit(Op::Ba, 0, 0, 0, 0));
                    self.patch(skip);
                }
                // Not reached: the index was bounds-checked.
                self.emit(Op::Ldi, rd, 0, 0, 0);
                for j in ends {
                    self.patch(j);
                }
                self.release(rt);
            }
            Place::Mem(addr) => {
                let o = match ty {
                    Ty::Int {
                        size: 1,
                        signed: true,
                    } => Op::Ldsb,
                    Ty::Int { size: 1, .. } => Op::Ldub,
                    Ty::Int {
                        size: 2,
                        signed: true,
                    } => Op::Ldsh,
                    Ty::Int { size: 2, .. } => Op::Lduh,
                    Ty::Int {
                        size: 4,
                        signed: true,
                    } => Op::Ldsw,
                    Ty::Int { size: 4, .. } | Ty::Float(4) => Op::Lduw,
                    Ty::Int { .. } | Ty::Ptr(_) | Ty::Float(8) => Op::Ldx,
                    Ty::Float(_) => {
                        // A long double is its address: printf() and trace() read its
                        // 16 bytes (`push_float`), a store copies them.
                        self.emit(Op::Mov, rd, *addr, 0, 0);
                        return Ok(rd);
                    }
                    Ty::Array(e, n) if matches!(**e, Ty::Int { size: 1, .. }) => {
                        // A char array in memory is a string, as in D, of at most its length.
                        self.emit(Op::Kstr, rd, *addr, 0, (*n as u32) << 1);
                        return Ok(rd);
                    }
                    Ty::Str => {
                        // A `string` member: its bytes in place, at most `strsize`.
                        self.emit(Op::Kstr, rd, *addr, 0, 0);
                        return Ok(rd);
                    }
                    Ty::Array(..) => {
                        // An array in memory reads as the address of its first element.
                        self.emit(Op::Mov, rd, *addr, 0, 0);
                        return Ok(rd);
                    }
                    _ => {
                        return self.err(
                            span,
                            format!("cannot read a {} from kernel memory", ty.name()),
                        )
                    }
                };
                self.emit(o, rd, *addr, 0, 0);
            }
            Place::Val(r) => {
                self.emit(Op::Mov, rd, *r, 0, 0);
            }
        }
        if ty == &Ty::Str && matches!(p, Place::Local(_) | Place::LocalArr { .. }) {
            // A clause-local string not assigned in this clause is "", not a bad reference.
            let j = self.emit(Op::Bnz, 0, rd, 0, 0);
            self.emit(Op::Sets, rd, 0, 0, 0);
            self.patch(j);
        }
        Ok(rd)
    }

    /// Store register `rv` (already of the place's type) into a place.
    fn store_place(&mut self, p: &Place, rv: u8, span: Span) -> GResult<()> {
        match p {
            Place::Bits {
                inner,
                width,
                signed,
                ..
            } => {
                if !matches!(**inner, Place::Mem(_)) {
                    self.extract_bits(rv, 0, *width, *signed, span)?;
                }
                return self.store_place(inner, rv, span);
            }
            Place::Global(id) => {
                self.emit(Op::Stgs, 0, rv, 0, *id);
            }
            Place::Thread(id) => {
                self.emit(Op::Stts, 0, rv, 0, *id);
            }
            Place::Local(slot) => {
                self.emit(Op::Stls, 0, rv, 0, *slot);
            }
            Place::Assoc { id, keys } => {
                self.push_keys(keys);
                self.emit(Op::Stgaa, 0, rv, 0, *id);
            }
            Place::LocalArr { slots, idx } => {
                let rt = self.reg(span)?;
                let mut ends = Vec::new();
                for (i, slot) in slots.iter().enumerate() {
                    self.load_const(rt, i as u64);
                    self.emit(Op::Eq, rt, rt, *idx, 0);
                    let skip = self.emit(Op::Bz, 0, rt, 0, 0);
                    self.emit(Op::Stls, 0, rv, 0, *slot);
                    ends.push(self.emit(Op::Ba, 0, 0, 0, 0));
                    self.patch(skip);
                }
                self.emit(Op::Nop, 0, 0, 0, 0);
                for j in ends {
                    self.patch(j);
                }
                self.release(rt);
            }
            Place::Mem(_) | Place::Val(_) => {
                return self.err(
                    span,
                    "[D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
                )
            }
        }
        Ok(())
    }

    fn release_place(&mut self, p: &Place) {
        match p {
            Place::Assoc { keys, .. } => {
                let k = keys.clone();
                self.release_all(&k);
            }
            Place::LocalArr { idx, .. } => self.release(*idx),
            Place::Mem(r) | Place::Val(r) => self.release(*r),
            Place::Bits { inner, .. } => self.release_place(inner),
            _ => {}
        }
    }

    /// Narrow `r` to the `width` bits at `shift` (sign-extended when `signed`).
    pub(super) fn extract_bits(
        &mut self,
        r: u8,
        shift: u8,
        width: u8,
        signed: bool,
        span: Span,
    ) -> GResult<()> {
        if width >= 64 {
            return Ok(());
        }
        let t = self.reg(span)?;
        self.load_const(t, 64 - shift as u64 - width as u64);
        self.emit(Op::Sll, r, r, t, 0);
        self.load_const(t, 64 - width as u64);
        self.emit(if signed { Op::Sra } else { Op::Srl }, r, r, t, 0);
        self.release(t);
        Ok(())
    }

    /// Read a location into a register.
    fn load_loc(&mut self, l: Loc<'_>, span: Span) -> GResult<(u8, Ty)> {
        let (p, ty) = self.place(l, true)?;
        let r = self.load_place(&p, &ty, span)?;
        self.release_place(&p);
        let ty = match ty {
            Ty::Array(elem, _) if matches!(*elem, Ty::Int { size: 1, .. }) => Ty::Str,
            Ty::Array(elem, _) => Ty::Ptr(elem),
            t => t,
        };
        Ok((r, ty))
    }

    /// Read a variable, member, element or memory location.
    fn rvalue(&mut self, e: &Expr) -> GResult<(u8, Ty)> {
        let l = self.loc(e)?;
        if let Loc::Var {
            ty: Some(Ty::Array(..)),
            ..
        } = &l
        {
            return self.err(
                e.span,
                "[D_OP_ARRFUN] an array variable can only be used with a subscript",
            );
        }
        self.load_loc(l, e.span)
    }

    /// Fix the type of a variable at its first assignment, or check the assignment against it.
    fn fix_type(&mut self, l: &Loc<'_>, from: &Ty, span: Span, lit0: bool) -> GResult<Ty> {
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

    fn assign(
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
        let (rv, tv) = match op {
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
        let lit0 = matches!(rhs.kind, ExprKind::Int(0, _));
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
    fn assign_sou(&mut self, l: Loc<'_>, ty: &Ty, rhs: &Expr, span: Span) -> GResult<(u8, Ty)> {
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
    fn loc_copy<'e>(&mut self, l: &Loc<'e>, span: Span) -> GResult<Loc<'e>> {
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
    fn incdec(&mut self, pre: bool, inc: bool, target: &Expr, span: Span) -> GResult<(u8, Ty)> {
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

    /// `ra op rb` on registers already holding values of types `ta`, `tb`.
    fn binary_regs(
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
            return self.err(span, "arithmetic on strings is not supported");
        }
        if ta.is_float() || tb.is_float() {
            return self.err(span, float_binop_error(op, ta, tb));
        }
        if let Some(res) = self.ptr_arith(op, ra, ta, rb, tb, span)? {
            return Ok(res);
        }
        let rt = match op {
            BinOp::Shl | BinOp::Shr => arith(ta, &I32),
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

    fn call(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        let nargs = |g: &Self, n: usize| match arity_error(name, args.len(), n, n) {
            Some(m) => g.err(span, format!("[D_PROTO_LEN] {m}")),
            None => Ok(()),
        };
        if let Some(r) = self.xlate_call(name, args, span) {
            return r;
        }
        match name {
            "speculation" => {
                if !args.is_empty() {
                    return self.err(span, "speculation() takes no arguments");
                }
                let rd = self.reg(span)?;
                self.emit(Op::Speculation, rd, 0, 0, 0);
                Ok((rd, I32))
            }
            "stringof" => {
                nargs(self, 1)?;
                let (r, ty) = self.expr(&args[0])?;
                if ty == Ty::Str {
                    return Ok((r, ty));
                }
                // A system call's pointer argument is a user address: read it as
                // copyinstr() does (bpftrace's str() of a syscall argument).
                let user = matches!(&args[0].kind, ExprKind::Index(n, _) if n == "args")
                    && matches!(ty, Ty::Ptr(_))
                    && self.t.env.syscall_clause();
                let imm = if user {
                    oxtrace_core::action::KSTR_USER
                } else {
                    0
                };
                let rd = self.reg(span)?;
                self.emit(Op::Kstr, rd, r, 0, imm);
                self.release(r);
                Ok((rd, Ty::Str))
            }
            "strlen" => {
                nargs(self, 1)?;
                let (r, ty) = self.expr(&args[0])?;
                if ty != Ty::Str {
                    return self.err(
                        args[0].span,
                        format!("strlen() requires a string, not {}", ty.name()),
                    );
                }
                self.emit(Op::Strlen, r, r, 0, 0);
                Ok((r, U64))
            }
            "strjoin" => {
                nargs(self, 2)?;
                let (a, ta) = self.expr(&args[0])?;
                let (b, tb) = self.expr(&args[1])?;
                for (t, e) in [(&ta, &args[0]), (&tb, &args[1])] {
                    if *t != Ty::Str {
                        return self.err(
                            e.span,
                            format!("strjoin() requires strings, not {}", t.name()),
                        );
                    }
                }
                let rd = self.reg(span)?;
                self.emit(Op::Strjoin, rd, a, b, 0);
                self.release(a);
                self.release(b);
                Ok((rd, Ty::Str))
            }
            n if subr::is_subr(n) => self.subr_call(n, args, span),
            n if ustack::is_call(n) => self.stack_call(n, args, span),
            "stack" => {
                use oxtrace_core::stack::MAX_FRAMES;
                let n = match args {
                    [] => self.t.stackframes,
                    [e] => self.const_upto(
                        e,
                        MAX_FRAMES.min(self.t.maxframes),
                        "stack()'s frame count",
                    )?,
                    _ => return self.err(span, "stack() takes an optional frame count"),
                };
                let rd = self.reg(span)?;
                self.emit(Op::Kstack, rd, 0, 0, n);
                Ok((rd, Ty::Stack))
            }
            "copyinstr" => {
                if args.is_empty() || args.len() > 2 {
                    return self.err(span, "copyinstr() takes an address and an optional size");
                }
                let max = match args.get(1) {
                    None => 0,
                    Some(e) => {
                        let most = oxtrace_core::limits::MAX_STRSIZE;
                        self.const_upto(e, most, "copyinstr()'s size")?
                    }
                };
                let (r, ty) = self.expr(&args[0])?;
                if !ty.is_scalar() {
                    return self.err(
                        args[0].span,
                        format!("copyinstr() requires an address, not {}", ty.name()),
                    );
                }
                let rd = self.reg(span)?;
                let imm = oxtrace_core::action::KSTR_USER | (max << 1);
                self.emit(Op::Kstr, rd, r, 0, imm);
                self.release(r);
                Ok((rd, Ty::Str))
            }
            "args->" => {
                let Some(ExprKind::Str(field)) = args.first().map(|a| &a.kind) else {
                    return self.err(span, "args-> needs a field name");
                };
                let field = String::from_utf8_lossy(field).into_owned();
                let (off, size, signed, kind) =
                    match super::passes::probe_spec::tracepoint_field(&field) {
                        Ok(f) => f,
                        Err(m) => return self.err(span, m),
                    };
                // arg0 of a tracepoint is the address of its record.
                let base = self.reg(span)?;
                self.emit(Op::Ldb, base, 0, 0, Builtin::Arg0 as u32);
                let rd = self.reg(span)?;
                let ty = match kind {
                    FieldKind::Int => {
                        let ty = Ty::Int {
                            size: size as u8,
                            signed,
                        };
                        let op = match (size, signed) {
                            (1, true) => Op::Ldsb,
                            (1, false) => Op::Ldub,
                            (2, true) => Op::Ldsh,
                            (2, false) => Op::Lduh,
                            (4, true) => Op::Ldsw,
                            (4, false) => Op::Lduw,
                            _ => Op::Ldx,
                        };
                        self.emit(op, rd, base, 0, off);
                        // A `struct T *` field is typed from BTF, for args->f->member.
                        let sou_ptr = super::passes::probe_spec::tracepoint_ctype(&field)
                            .filter(|_| size == 8)
                            .and_then(|ct| self.t.env.btf_ctype(&ct).ok())
                            .filter(|t| matches!(t, Ty::Ptr(p) if matches!(**p, Ty::Sou(..))));
                        sou_ptr.unwrap_or(ty)
                    }
                    FieldKind::CharArray | FieldKind::DataLoc => {
                        let max = if kind == FieldKind::DataLoc {
                            // The word holds the string's offset (low 16 bits) and length.
                            self.emit(Op::Lduw, rd, base, 0, off);
                            let mask = self.reg(span)?;
                            self.load_const(mask, 0xffff);
                            self.emit(Op::And, rd, rd, mask, 0);
                            self.release(mask);
                            self.emit(Op::Add, rd, rd, base, 0);
                            0
                        } else {
                            self.load_const(rd, u64::from(off));
                            self.emit(Op::Add, rd, rd, base, 0);
                            size.min(oxtrace_core::limits::MAX_STRSIZE)
                        };
                        // A kernel string of at most the array's bytes.
                        self.emit(Op::Kstr, rd, rd, 0, max << 1);
                        Ty::Str
                    }
                    FieldKind::Other => unreachable!("tracepoint_field refuses other fields"),
                };
                self.release(base);
                Ok((rd, ty))
            }
            n if mem::is_call(n) => self.mem_call(n, args, span),
            n if ACTIONS.contains(&n) => self.err(
                span,
                format!("{name}() is an action: it cannot be used in an expression"),
            ),
            n if AggKind::from_name(n).is_some() => self.err(
                span,
                format!("{name}() is an aggregating function: use it as @name[keys] = {name}(...)"),
            ),
            _ => self.err(span, format!("[D_FUNC_UNDEF] unknown function '{name}'")),
        }
    }

    // ---- statements --------------------------------------------------------------------

    pub(super) fn stmt(&mut self, s: &Stmt) -> GResult<()> {
        match s {
            Stmt::Expr(e) => {
                if let ExprKind::Call(name, args) = &e.kind {
                    if ACTIONS.contains(&name.as_str()) {
                        return self.action(name, args, e.span);
                    }
                }
                let (r, _) = self.expr(e)?;
                self.release(r);
                Ok(())
            }
            Stmt::Agg {
                name,
                name_span,
                keys,
                call,
            } => {
                self.not_speculated("an aggregation", *name_span)?;
                self.agg_stmt(name, *name_span, keys, call)
            }
            Stmt::If { cond, then, els } => {
                let rc = self.condition(cond, "[D_OP_SCALAR] the condition of if")?;
                let j_else = self.emit(Op::Bz, 0, rc, 0, 0);
                self.release(rc);
                for s in then {
                    self.stmt(s)?;
                }
                if els.is_empty() {
                    self.patch(j_else);
                } else {
                    let j_end = self.emit(Op::Ba, 0, 0, 0, 0);
                    self.patch(j_else);
                    for s in els {
                        self.stmt(s)?;
                    }
                    self.patch(j_end);
                }
                Ok(())
            }
            // Declarations take effect before code generation (`compile::declare`).
            Stmt::Decl(_) => Ok(()),
        }
    }

    fn agg_ref(&self, e: &Expr) -> GResult<u32> {
        match &e.kind {
            ExprKind::AggRef(n) => match self.t.agg_idx.get(n) {
                Some(&i) => Ok(i),
                None => self.err(e.span, format!("unknown aggregation @{n}")),
            },
            _ => self.err(e.span, "expected an aggregation (@name)"),
        }
    }

    fn action(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<()> {
        self.not_speculated(name, span)?;
        match name {
            "speculate" | "commit" | "discard" => self.spec_action(name, args, span)?,
            "system" | "raise" | "stop" | "chill" => self.destructive_action(name, args, span)?,
            "trace" => {
                if let Some(m) = arity_error(name, args.len(), 1, 1) {
                    return self.err(span, m);
                }
                let (r, ty) = self.expr(&args[0])?;
                // The tool prints a stack symbolized: a printf record of format `%k`.
                let stack = ty == Ty::Stack;
                // A float's bytes, as DTrace traces them: a float or double prints as the
                // integer of its size, a long double (two items) as its bytes.
                let ty = match ty {
                    Ty::Float(4) => I32,
                    Ty::Float(8) => I64,
                    t => t,
                };
                let items = self.record_items(r, ty, args[0].span)?;
                self.push_keys(&items);
                self.release_all(&items);
                if stack {
                    let id = self.t.fmt(b"%k");
                    self.emit(Op::Printf, 0, 0, 0, id);
                } else {
                    self.emit(Op::Trace, 0, 0, 0, 0);
                }
            }
            "exit" => {
                if let Some(m) = arity_error(name, args.len(), 1, 1) {
                    return self.err(span, m);
                }
                let (r, ty) = self.expr(&args[0])?;
                self.need_scalar(&ty, args[0].span, "exit()")?;
                self.emit(Op::Exit, 0, r, 0, 0);
                self.release(r);
            }
            "ptwrite" => {
                if let Some(m) = arity_error(name, args.len(), 1, 1) {
                    return self.err(span, m);
                }
                let (r, ty) = self.expr(&args[0])?;
                self.need_scalar(&ty, args[0].span, "ptwrite()")?;
                self.emit(Op::Ptwrite, 0, r, 0, 0);
                self.release(r);
            }
            "printf" => self.printf(args, span)?,
            "setopt" => self.setopt(args, span)?,
            "printa" => {
                let (fmt, agg_args) = match args {
                    [a] => (None, std::slice::from_ref(a)),
                    [f, rest @ ..] if !rest.is_empty() => (Some(f), rest),
                    _ => {
                        return self.err(
                            span,
                            "printa() takes an aggregation, optionally after a format string",
                        )
                    }
                };
                let aggs = agg_args
                    .iter()
                    .map(|a| self.agg_ref(a))
                    .collect::<GResult<Vec<u32>>>()?;
                // Several aggregations print side by side: their keys must match.
                for (a, &id) in agg_args.iter().zip(&aggs).skip(1) {
                    let (k0, k) = (&self.t.aggs[aggs[0] as usize], &self.t.aggs[id as usize]);
                    if k0.keys.is_some() && k.keys.is_some() && k0.keys != k.keys {
                        return self.err(
                            a.span,
                            format!(
                                "printa(): @{} has keys ({}), @{} has ({})",
                                k.name,
                                kinds_text(k.keys.as_deref().unwrap_or_default()),
                                k0.name,
                                kinds_text(k0.keys.as_deref().unwrap_or_default())
                            ),
                        );
                    }
                }
                let mut imm = aggs[0];
                if let Some(f) = fmt {
                    let text = match &f.kind {
                        ExprKind::Str(s) => s.clone(),
                        _ => return self.err(f.span, "printa() format must be a string literal"),
                    };
                    let pieces = match format::parse(&text, true) {
                        Ok(p) => p,
                        Err((off, msg)) => {
                            return self
                                .err(fmt_span(self.src, f.span, off), format!("printa(): {msg}"))
                        }
                    };
                    // Keys and values of aggregations are never floats.
                    if let Some(c) = format::convs(&pieces).find(|c| c.arg_kind() == ArgKind::Float)
                    {
                        let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                        return self.err(
                            fmt_span(self.src, f.span, c.start),
                            format!("[D_PRINTF_ARG_PROTO] printa( ): conversion {conv} takes a float, double, or long double, and aggregation keys and values are integers or strings"),
                        );
                    }
                    let id = if aggs.len() > 1 {
                        let nagg = format::convs(&pieces).filter(|c| c.flags.agg).count();
                        if nagg != aggs.len() {
                            return self.err(
                                f.span,
                                format!(
                                    "printa(): format has {nagg} %@ conversion(s) for {} aggregations",
                                    aggs.len()
                                ),
                            );
                        }
                        // A format of its own, so that the record finds the group.
                        let id = self.t.fmts.len() as u32;
                        let off = self.t.string(&text);
                        self.t.fmts.push(off);
                        self.t
                            .fmt_text
                            .push(String::from_utf8_lossy(&text).into_owned());
                        self.t.printa_groups.push((id, aggs.clone()));
                        id
                    } else {
                        self.t.fmt(&text)
                    };
                    imm |= (id + 1) << 16;
                } else if aggs.len() > 1 {
                    return self.err(span, "printa() of several aggregations needs a format");
                }
                self.emit(Op::Printa, 0, 0, 0, imm);
            }
            "clear" | "denormalize" => {
                if args.len() != 1 {
                    return self.err(span, format!("{name}() takes 1 argument (an aggregation)"));
                }
                let agg = self.agg_ref(&args[0])?;
                let op = if name == "clear" {
                    Op::Clear
                } else {
                    Op::Denormalize
                };
                self.emit(op, 0, 0, 0, agg);
            }
            "trunc" | "normalize" => {
                let (agg, n) = match (name, args) {
                    ("trunc", [a]) => (self.agg_ref(a)?, None),
                    (_, [a, n]) => (self.agg_ref(a)?, Some(n)),
                    _ => {
                        return self.err(
                            span,
                            format!(
                                "{name}() takes an aggregation and {} count",
                                if name == "trunc" { "an optional" } else { "a" }
                            ),
                        )
                    }
                };
                let r = match n {
                    Some(n) => {
                        let (r, ty) = self.expr(n)?;
                        self.need_scalar(&ty, n.span, name)?;
                        r
                    }
                    None => 0,
                };
                let op = if name == "trunc" {
                    Op::Trunc
                } else {
                    Op::Normalize
                };
                self.emit(op, 0, r, 0, agg);
                self.release(r);
            }
            _ => return self.err(span, format!("unknown action '{name}'")),
        }
        Ok(())
    }

    /// `setopt("name"[, "value"])`: a printf record of a format of its own, which the tool
    /// applies instead of printing (dtrace's consumer does the same with its record). Only
    /// the options the consumer uses can change while tracing.
    fn setopt(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        if let Some(m) = arity_error("setopt", args.len(), 1, 2) {
            return self.err(span, m);
        }
        let mut text = Vec::new();
        for a in args {
            match &a.kind {
                ExprKind::Str(s) => text.push(String::from_utf8_lossy(s).into_owned()),
                _ => {
                    return self.err(
                        a.span,
                        "[D_SETOPT_ARG] setopt( ) arguments must be string constants",
                    )
                }
            }
        }
        let name = text[0].clone();
        let value = text.get(1).cloned();
        if !options::RUNTIME_OPTIONS.contains(&name.as_str()) {
            return self.err(
                args[0].span,
                format!(
                    "setopt( ): option '{name}' cannot be set while tracing (runtime options: {})",
                    options::RUNTIME_OPTIONS.join(", ")
                ),
            );
        }
        if let Err(m) = options::runtime_value(&name, value.as_deref()) {
            return self.err(
                args.get(1).map_or(span, |a| a.span),
                format!("setopt( ): {m}"),
            );
        }
        let id = self
            .t
            .fmt_unique(format!("setopt({})", text.join(", ")).as_bytes());
        self.t.setopts.push((id, name, value));
        self.emit(Op::Printf, 0, 0, 0, id);
        Ok(())
    }

    fn printf(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        self.printf_op(args, span, Op::Printf)
    }

    /// `printf` or `system` (`op`): a format and its arguments, checked, as a record.
    pub(super) fn printf_op(&mut self, args: &[Expr], span: Span, op: Op) -> GResult<()> {
        let name = if op == Op::System { "system" } else { "printf" };
        let Some(f) = args.first() else {
            return self.err(span, format!("{name}() requires a format string"));
        };
        let text = match &f.kind {
            ExprKind::Str(s) => s.clone(),
            _ => {
                return self.err(
                    f.span,
                    format!("[D_PRINTF_ARG_FMT] {name}() format must be a string literal"),
                )
            }
        };
        if text.is_empty() {
            return self.err(
                f.span,
                "[D_PRINTF_FMT_EMPTY] printf( ) format string is empty",
            );
        }
        let pieces = match format::parse(&text, false) {
            Ok(p) => p,
            Err((off, msg)) => {
                return self.err(fmt_span(self.src, f.span, off), format!("{name}(): {msg}"))
            }
        };
        let convs: Vec<&format::Conv> = format::convs(&pieces).collect();
        // What each argument is for: `*` widths and precisions take one each.
        let slots: Vec<(ArgKind, &format::Conv, bool)> = convs
            .iter()
            .flat_map(|c| {
                let n = c.arg_kinds().count();
                c.arg_kinds()
                    .enumerate()
                    .map(move |(i, k)| (k, *c, i + 1 < n))
            })
            .collect();
        let stars = slots.len() != convs.len();
        let given = &args[1..];
        if given.len() > act::MAX_TUPLE {
            return self.err(
                given[act::MAX_TUPLE].span,
                format!("{name}(): too many arguments (at most {})", act::MAX_TUPLE),
            );
        }
        if slots.len() != given.len() {
            let at = if given.len() > slots.len() {
                given[slots.len()].span
            } else {
                f.span
            };
            let has = if stars {
                format!("takes {} argument(s)", slots.len())
            } else {
                format!("has {} conversion(s)", convs.len())
            };
            return self.err(
                at,
                format!(
                    "{name}(): format {has} but {} argument(s) are given",
                    given.len()
                ),
            );
        }
        let mut regs = Vec::new();
        for (i, (a, &(kind, c, star))) in given.iter().zip(&slots).enumerate() {
            let (r, mut ty) = self.expr(a)?;
            let ok = match kind {
                ArgKind::Str => ty == Ty::Str,
                ArgKind::Stack => ty == Ty::Stack,
                ArgKind::Int | ArgKind::Uaddr => ty.is_scalar(),
                ArgKind::Float => ty.is_float(),
            };
            if !ok {
                let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                let what = if star {
                    format!("the * of {conv}")
                } else {
                    conv
                };
                let msg = if kind == ArgKind::Float || ty.is_float() {
                    // DTrace's words for a float where none goes, or none where one does.
                    let n = convs.iter().position(|x| x.start == c.start).unwrap_or(0) + 1;
                    format!(
                        "[D_PRINTF_ARG_PROTO] {name}( ) argument #{} is incompatible with conversion #{n} prototype: conversion: {what}, prototype: {}, argument: {}",
                        i + 2,
                        if star { "int" } else { format::prototype(c.conv) },
                        ty.name()
                    )
                } else {
                    format!(
                        "{name}(): {what} requires {}, argument {} is {}",
                        match kind {
                            ArgKind::Str => "a string",
                            ArgKind::Stack => "a stack()",
                            ArgKind::Int | ArgKind::Uaddr | ArgKind::Float => "an integer",
                        },
                        i + 2,
                        ty.name()
                    )
                };
                return self.err(a.span, msg);
            }
            if kind == ArgKind::Uaddr {
                ty = self.user_addr(r);
            }
            let items = self.record_items(r, ty, a.span)?;
            regs.extend(items);
            if regs.len() > act::MAX_TUPLE {
                return self.err(
                    a.span,
                    format!(
                        "{name}(): too many arguments (at most {} values, a long double counting two)",
                        act::MAX_TUPLE
                    ),
                );
            }
        }
        self.push_keys(&regs);
        self.release_all(&regs);
        let id = self.t.fmt(&text);
        self.emit(op, 0, 0, 0, id);
        Ok(())
    }

    fn const_int(&self, e: &Expr) -> GResult<i64> {
        match const_eval(e) {
            Some(v) => Ok(v),
            None => self.err(e.span, "expected an integer constant"),
        }
    }

    fn agg_stmt(
        &mut self,
        name: &str,
        name_span: Span,
        keys: &[Expr],
        call: &AggCall,
    ) -> GResult<()> {
        let func = match AggKind::from_name(&call.func) {
            Some(f) => f,
            None => {
                return self.err(
                    call.func_span,
                    format!("[D_AGG_FUNC] unknown aggregating function '{}'", call.func),
                )
            }
        };
        let cspan = call.func_span;
        let (min, max) = match func {
            AggKind::Count => (0, 0),
            AggKind::Quantize => (1, 2),
            AggKind::Lquantize => (3, 5),
            AggKind::Llquantize => (5, 6),
            _ => (1, 1),
        };
        if let Some(m) = arity_error(&call.func, call.args.len(), min, max) {
            return self.err(cspan, m);
        }
        let mut params = [0i64; 4];
        let mut incr: Option<&Expr> = None;
        match func {
            AggKind::Quantize => incr = call.args.get(1),
            AggKind::Lquantize => {
                params[0] = self.const_int(&call.args[1])?;
                params[1] = self.const_int(&call.args[2])?;
                params[2] = match call.args.get(3) {
                    Some(e) => self.const_int(e)?,
                    None => 1,
                };
                incr = call.args.get(4);
            }
            AggKind::Llquantize => {
                for (i, p) in params.iter_mut().enumerate() {
                    *p = self.const_int(&call.args[i + 1])?;
                }
                incr = call.args.get(5);
            }
            _ => {}
        }
        // The one validator the image check and the kernel use too, at the argument it
        // names.
        if self.t.checked {
            if let Err(e) = check_params(func, &params) {
                let span = e
                    .argument()
                    .and_then(|n| call.args.get(n as usize))
                    .map_or(cspan, |a| a.span);
                return self.err(span, e.to_string());
            }
        }
        // One function and parameter set per aggregation, program-wide.
        let id = match self.t.agg_idx.get(name) {
            Some(&i) => i,
            None => return self.err(name_span, "internal error: undeclared aggregation"),
        };
        let a = &mut self.t.aggs[id as usize];
        if !a.defined {
            a.func = func;
            a.params = params;
            a.first = cspan;
            a.defined = true;
        } else if a.func != func || a.params != params {
            let (afunc, afirst) = (a.func, a.first);
            let first = CompileError::at(self.src, self.input, afirst, "");
            return self.err(
                cspan,
                format!(
                    "[D_AGG_REDEF] @{name} is used with {}() at {}:{}; it cannot change function or parameters",
                    afunc.name(),
                    first.line,
                    first.col
                ),
            );
        }
        if keys.len() > act::MAX_KEYS {
            return self.err(
                name_span,
                format!("too many keys (at most {})", act::MAX_KEYS),
            );
        }
        let mut kr = Vec::new();
        for k in keys {
            let (r, t) = self.expr(k)?;
            if t.is_float() {
                return self.err(k.span, float_key(&t));
            }
            kr.push((r, t));
        }
        let kinds: Vec<KeyKind> = kr.iter().map(|(_, t)| t.key_kind()).collect();
        match &self.t.aggs[id as usize].keys {
            None => {
                self.t.aggs[id as usize].keys = Some(kinds);
                self.t.aggs[id as usize].key_names = keys
                    .iter()
                    .map(|k| {
                        let end = (k.span.start + k.span.len).min(self.src.len());
                        let text = self.src.get(k.span.start..end).unwrap_or("");
                        text.split_whitespace().collect::<Vec<_>>().join(" ")
                    })
                    .collect();
            }
            Some(want) if *want != kinds => {
                return self.err(
                    name_span,
                    format!(
                        "@{name} has keys ({}) elsewhere, ({}) here",
                        kinds_text(want),
                        kinds_text(&kinds)
                    ),
                )
            }
            _ => {}
        }
        let rv = if func == AggKind::Count {
            0
        } else {
            let (r, ty) = self.expr(&call.args[0])?;
            self.need_scalar(&ty, call.args[0].span, &format!("{}()", call.func))?;
            r
        };
        let rw = match incr {
            Some(e) => {
                let (r, ty) = self.expr(e)?;
                self.need_scalar(&ty, e.span, "an increment")?;
                r
            }
            None => {
                let r = self.reg(cspan)?;
                self.emit(Op::Ldi, r, 0, 0, 1);
                r
            }
        };
        self.push_keys(&kr);
        self.emit(Op::Agg, 0, rv, rw, id);
        self.release(rv);
        self.release(rw);
        self.release_all(&kr);
        Ok(())
    }
}

/// The error for a `stack()` value used as anything but a key.
const STACK_USE: &str = "a stack() value can only be an aggregation key";

fn kinds_text(k: &[KeyKind]) -> String {
    k.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// The error for binary operator `op` with a floating-point operand (`ta op tb`), in
/// DTrace's words: D has no floating-point arithmetic or comparison.
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

/// The error for a key of float type `t`.
fn float_key(t: &Ty) -> String {
    format!(
        "[D_KEY_TYPE] a key of type {} is not supported: D has no floating-point comparison",
        t.name()
    )
}

/// The error for a long double in a D variable, which holds at most 8 bytes.
pub(super) const LDOUBLE_VAR: &str =
    "[D_OP_INCOMPAT] a long double cannot be stored in a D variable: only traced or formatted";

fn binop_text(op: BinOp) -> &'static str {
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

/// The error for `n` arguments to `name()`, which takes `min..=max`; `None` if `n` fits.
fn arity_error(name: &str, n: usize, min: usize, max: usize) -> Option<String> {
    let want = match max - min {
        _ if (min..=max).contains(&n) => return None,
        0 => format!("{min}"),
        1 => format!("{min} or {max}"),
        _ => format!("{min} to {max}"),
    };
    Some(format!("{name}() takes {want} argument(s), {n} given"))
}

/// The instruction of an arithmetic or bitwise operator.
fn arith_op(op: BinOp, signed: bool) -> Option<Op> {
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

fn cmp_op(op: BinOp, signed: bool) -> Op {
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

/// Span inside a string literal at format byte `off` (exact when the literal has no escape
/// before it, else the whole literal).
fn fmt_span(src: &str, lit: Span, off: usize) -> Span {
    let text = &src[lit.start..(lit.start + lit.len).min(src.len())];
    let body = text.get(1..).unwrap_or("");
    if body.as_bytes().iter().take(off).any(|&c| c == b'\\') || off + 1 >= text.len() {
        return lit;
    }
    Span::new(lit.start + 1 + off, lit.start + 2 + off)
}

static I64_TY: Ty = I64;

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
    fn ty(&self) -> &Ty {
        match self {
            Loc::Var { ty, .. } => ty.as_ref().unwrap_or(&I64_TY),
            Loc::Mem { ty, .. } | Loc::MemBits { ty, .. } | Loc::Val { ty, .. } => ty,
        }
    }

    fn ty_opt(&self) -> Option<Ty> {
        match self {
            Loc::Var { ty, .. } => ty.clone(),
            Loc::Mem { ty, .. } | Loc::MemBits { ty, .. } | Loc::Val { ty, .. } => Some(ty.clone()),
        }
    }

    fn clone_shallow(&self) -> Loc<'e> {
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

/// A location with its keys evaluated: what a load or store names.
pub(super) enum Place {
    Global(u32),
    Thread(u32),
    Local(u32),
    Assoc {
        id: u32,
        keys: Vec<(u8, Ty)>,
    },
    LocalArr {
        slots: Vec<u32>,
        idx: u8,
    },
    Mem(u8),
    Val(u8),
    /// A bit-field: in memory, `width` bits at `shift` of the unit; in a variable, a value
    /// kept narrowed to `width` bits.
    Bits {
        inner: Box<Place>,
        shift: u8,
        width: u8,
        signed: bool,
    },
}

/// Whether memory of type `ty` holds a string: a `string` or a `char[N]`, which a string
/// is stored into (`p->name = execname`) and read from as a string.
pub(super) fn is_str_storage(ty: &Ty) -> bool {
    match ty {
        Ty::Str => true,
        Ty::Array(e, _) => matches!(**e, Ty::Int { size: 1, .. }),
        _ => false,
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
