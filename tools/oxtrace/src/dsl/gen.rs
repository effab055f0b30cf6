//! The code generator: one clause's statements and expressions to bytecode, with the
//! program-wide tables (variables, aggregations, strings, formats) they fill.

use super::ast::*;
use super::error::{CompileError, Span};
use super::format::{self, ArgKind};
use super::types::{arith, builtin, Ty, ACTIONS, I32, I64, U32, U64};
use super::KeyKind;
use crate::tracepoints::FieldKind;
use oxtrace_core::action::{self as act, insn, Builtin, Op, Scope};
use oxtrace_core::agg::{check_params, AggKind};
use std::collections::HashMap;

pub(super) struct Var {
    pub(super) name: String,
    pub(super) scope: Scope,
    pub(super) keys: Option<Vec<KeyKind>>,
    pub(super) ty: Option<Ty>,
}

pub(super) struct Agg {
    pub(super) name: String,
    pub(super) func: AggKind,
    pub(super) params: [i64; 4],
    pub(super) keys: Option<Vec<KeyKind>>,
    /// The D text of each key expression at its first use (`execname`), for output.
    pub(super) key_names: Vec<String>,
    pub(super) first: Span,
    /// Whether an update was compiled (else only declared by the pre-pass).
    pub(super) defined: bool,
}

/// Program-wide tables shared by every clause.
pub(super) struct Tables {
    pub(super) ints: Vec<u64>,
    pub(super) int_idx: HashMap<u64, u32>,
    pub(super) strtab: Vec<u8>,
    pub(super) str_idx: HashMap<Vec<u8>, u32>,
    pub(super) vars: Vec<Var>,
    pub(super) var_idx: HashMap<(u32, String), u32>,
    pub(super) aggs: Vec<Agg>,
    pub(super) agg_idx: HashMap<String, u32>,
    pub(super) fmts: Vec<u32>,
    pub(super) fmt_idx: HashMap<Vec<u8>, u32>,
    pub(super) fmt_text: Vec<String>,
    pub(super) locals: HashMap<String, (u32, Option<Ty>)>,
    pub(super) strsize: u32,
    /// Whether to check what the kernel's limits refuse (see `compile_unchecked`).
    pub(super) checked: bool,
}

impl Tables {
    pub(super) fn string(&mut self, s: &[u8]) -> u32 {
        if let Some(&o) = self.str_idx.get(s) {
            return o;
        }
        let o = self.strtab.len() as u32;
        self.strtab.extend_from_slice(s);
        self.strtab.push(0);
        self.str_idx.insert(s.to_vec(), o);
        o
    }

    fn int(&mut self, v: u64) -> u32 {
        if let Some(&i) = self.int_idx.get(&v) {
            return i;
        }
        let i = self.ints.len() as u32;
        self.ints.push(v);
        self.int_idx.insert(v, i);
        i
    }

    fn fmt(&mut self, s: &[u8]) -> u32 {
        if let Some(&i) = self.fmt_idx.get(s) {
            return i;
        }
        let off = self.string(s);
        let i = self.fmts.len() as u32;
        self.fmts.push(off);
        self.fmt_idx.insert(s.to_vec(), i);
        self.fmt_text.push(String::from_utf8_lossy(s).into_owned());
        i
    }
}

pub(super) struct Gen<'a> {
    pub(super) t: &'a mut Tables,
    pub(super) src: &'a str,
    pub(super) input: &'a str,
    pub(super) code: Vec<u64>,
    pub(super) free: Vec<u8>,
}

pub(super) type GResult<T> = Result<T, CompileError>;

impl<'a> Gen<'a> {
    pub(super) fn new(t: &'a mut Tables, src: &'a str, input: &'a str) -> Self {
        Gen {
            t,
            src,
            input,
            code: Vec::new(),
            free: (1..act::NREGS as u8).rev().collect(),
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

    fn load_const(&mut self, rd: u8, v: u64) {
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
            ty: None,
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
                if s.len() > self.t.strsize as usize {
                    return self.err(
                        e.span,
                        format!(
                            "string literal of {} bytes is longer than strsize ({})",
                            s.len(),
                            self.t.strsize
                        ),
                    );
                }
                if s.contains(&0) {
                    return self.err(e.span, "string literal contains a NUL byte");
                }
                let off = self.t.string(s);
                let r = self.reg(e.span)?;
                self.emit(Op::Sets, r, 0, 0, off);
                Ok((r, Ty::Str))
            }
            ExprKind::Ident(name) => {
                if let Some((b, ty)) = builtin(name) {
                    let r = self.reg(e.span)?;
                    let op = if b.is_string() { Op::Ldbs } else { Op::Ldb };
                    self.emit(op, r, 0, 0, b as u32);
                    return Ok((r, ty));
                }
                if name.starts_with("arg") && name[3..].parse::<u32>().is_ok() {
                    return self.err(e.span, format!("{name} is not available (arg0..arg5 are)"));
                }
                let id = self.lookup_var(Scope::Global, name, e.span)?;
                let r = self.reg(e.span)?;
                self.emit(Op::Ldgs, r, 0, 0, id);
                Ok((r, self.t.vars[id as usize].ty.clone().unwrap_or(I64)))
            }
            ExprKind::SelfVar(name) => {
                let id = self.lookup_var(Scope::Thread, name, e.span)?;
                let r = self.reg(e.span)?;
                self.emit(Op::Ldts, r, 0, 0, id);
                Ok((r, self.t.vars[id as usize].ty.clone().unwrap_or(I64)))
            }
            ExprKind::This(name) => {
                let (slot, ty) = match self.t.locals.get(name) {
                    Some((s, Some(ty))) => (*s, ty.clone()),
                    _ => {
                        return self.err(
                            e.span,
                            format!("this->{name} is used before it is assigned a value"),
                        )
                    }
                };
                let r = self.reg(e.span)?;
                self.emit(Op::Ldls, r, 0, 0, slot);
                Ok((r, ty))
            }
            ExprKind::Index(name, keys) => {
                let id = self.lookup_var(Scope::Assoc, name, e.span)?;
                let kr = self.keys(id, keys, e.span)?;
                self.push_keys(&kr);
                let r = self.reg(e.span)?;
                self.emit(Op::Ldgaa, r, 0, 0, id);
                Ok((r, self.t.vars[id as usize].ty.clone().unwrap_or(I64)))
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
                    (Ty::Str, _) | (_, Ty::Str) => {
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
            ExprKind::IncDec { pre, inc, target } => {
                let one = Expr {
                    kind: ExprKind::Int(1, false),
                    span: e.span,
                };
                let op = if *inc { BinOp::Add } else { BinOp::Sub };
                if *pre {
                    self.assign(Some(op), target, &one, e.span)
                } else {
                    let (old, ty) = self.expr(target)?;
                    self.need_scalar(&ty, target.span, "++/--")?;
                    let (nr, _) = self.assign(Some(op), target, &one, e.span)?;
                    self.release(nr);
                    Ok((old, ty))
                }
            }
            ExprKind::Cast(tn, a) => {
                let to = Ty::from_name(tn);
                let (r, from) = self.expr(a)?;
                match (&to, &from) {
                    (Ty::Str, Ty::Str) => Ok((r, to)),
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

    fn lookup_var(&mut self, scope: Scope, name: &str, span: Span) -> GResult<u32> {
        let key = (scope as u32, name.to_string());
        match self.t.var_idx.get(&key) {
            Some(&i) => Ok(i),
            None => {
                let what = match scope {
                    Scope::Global => format!("unknown variable '{name}'"),
                    Scope::Thread => format!("self->{name} is never assigned a value"),
                    Scope::Assoc => format!("unknown associative array '{name}'"),
                };
                self.err(span, what)
            }
        }
    }

    fn unary(&mut self, op: UnOp, a: &Expr, span: Span) -> GResult<(u8, Ty)> {
        let (r, ty) = self.expr(a)?;
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
            UnOp::Deref => {
                let pointee = match ty {
                    Ty::Ptr(p) => *p,
                    _ => {
                        return self.err(
                            span,
                            format!(
                                "cannot dereference a {}: cast it to a pointer type",
                                ty.name()
                            ),
                        )
                    }
                };
                let o = match &pointee {
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
                    Ty::Int { size: 4, .. } => Op::Lduw,
                    Ty::Int { .. } | Ty::Ptr(_) => Op::Ldx,
                    Ty::Void => return self.err(span, "cannot dereference a void pointer"),
                    Ty::Stack => return self.err(span, "cannot dereference a stack"),
                    Ty::Str => {
                        return self
                            .err(span, "cannot dereference a string pointer: use stringof()")
                    }
                };
                self.emit(o, r, r, 0, 0);
                Ok((r, pointee))
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr, span: Span) -> GResult<(u8, Ty)> {
        match op {
            BinOp::LAnd | BinOp::LOr => {
                let (ra, ta) = self.expr(a)?;
                self.need_scalar(&ta, a.span, "a logical operator")?;
                let j = self.emit(
                    if op == BinOp::LAnd { Op::Bz } else { Op::Bnz },
                    0,
                    ra,
                    0,
                    0,
                );
                let (rb, tb) = self.expr(b)?;
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
        let (ra, ta) = self.expr(a)?;
        let (rb, tb) = self.expr(b)?;
        if ta == Ty::Stack || tb == Ty::Stack {
            return self.err(span, STACK_USE);
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
        // Pointer arithmetic scales by the pointee's size.
        let scale = |t: &Ty| match t {
            Ty::Ptr(p) => match **p {
                Ty::Int { size, .. } => size as u64,
                Ty::Ptr(_) => 8,
                _ => 1,
            },
            _ => 1,
        };
        if let (Ty::Ptr(_), BinOp::Add | BinOp::Sub, Ty::Int { .. }) = (&ta, op, &tb) {
            let s = scale(&ta);
            if s > 1 {
                let rs = self.reg(span)?;
                self.load_const(rs, s);
                self.emit(Op::Mul, rb, rb, rs, 0);
                self.release(rs);
            }
            self.emit(
                if op == BinOp::Add { Op::Add } else { Op::Sub },
                ra,
                ra,
                rb,
                0,
            );
            self.release(rb);
            return Ok((ra, ta));
        }
        if let (Ty::Int { .. }, BinOp::Add, Ty::Ptr(_)) = (&ta, op, &tb) {
            let s = scale(&tb);
            if s > 1 {
                let rs = self.reg(span)?;
                self.load_const(rs, s);
                self.emit(Op::Mul, ra, ra, rs, 0);
                self.release(rs);
            }
            self.emit(Op::Add, ra, ra, rb, 0);
            self.release(rb);
            return Ok((ra, tb));
        }
        let rt = match op {
            BinOp::Shl | BinOp::Shr => arith(&ta, &I32),
            _ => arith(&ta, &tb),
        };
        let signed = rt.signed();
        let o = match op {
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
            _ => return self.err(span, "internal error: unexpected operator"),
        };
        self.emit(o, ra, ra, rb, 0);
        self.release(rb);
        self.normalize(ra, &rt);
        Ok((ra, rt))
    }

    /// Evaluate key expressions of array `id` into registers, checking the key layout.
    fn keys(&mut self, id: u32, keys: &[Expr], span: Span) -> GResult<Vec<(u8, Ty)>> {
        if keys.len() > act::MAX_KEYS {
            return self.err(span, format!("too many keys (at most {})", act::MAX_KEYS));
        }
        let mut regs = Vec::new();
        for k in keys {
            let (r, ty) = self.expr(k)?;
            if matches!(ty, Ty::Void) {
                return self.err(k.span, "invalid key type");
            }
            regs.push((r, ty));
        }
        let kinds: Vec<KeyKind> = regs.iter().map(|(_, t)| t.key_kind()).collect();
        let name = self.t.vars[id as usize].name.clone();
        match &self.t.vars[id as usize].keys {
            None => self.t.vars[id as usize].keys = Some(kinds),
            Some(want) => {
                if want.len() != kinds.len() {
                    return self.err(
                        span,
                        format!(
                            "{name}[] has {} key(s) elsewhere, {} here",
                            want.len(),
                            kinds.len()
                        ),
                    );
                }
                for (i, (w, k)) in want.iter().zip(&kinds).enumerate() {
                    if w != k {
                        return self.err(
                            keys[i].span,
                            format!(
                                "key {} of {name}[] is {} elsewhere, {} here",
                                i + 1,
                                w.name(),
                                k.name()
                            ),
                        );
                    }
                }
            }
        }
        Ok(regs)
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

    fn release_all(&mut self, regs: &[(u8, Ty)]) {
        for (r, _) in regs {
            self.release(*r);
        }
    }

    fn assign(
        &mut self,
        op: Option<BinOp>,
        lhs: &Expr,
        rhs: &Expr,
        span: Span,
    ) -> GResult<(u8, Ty)> {
        // Keys are evaluated once, before the value.
        let (id, keyregs) = match &lhs.kind {
            ExprKind::Index(name, keys) => {
                let id = self.var(Scope::Assoc, name);
                if self
                    .t
                    .var_idx
                    .contains_key(&(Scope::Global as u32, name.clone()))
                {
                    return self.err(
                        lhs.span,
                        format!("'{name}' is a scalar elsewhere, an array here"),
                    );
                }
                (id, self.keys(id, keys, lhs.span)?)
            }
            _ => (0, vec![]),
        };
        let (rv, tv) = match op {
            None => self.expr(rhs)?,
            Some(bop) => {
                let cur = Expr {
                    kind: lhs.kind.clone(),
                    span: lhs.span,
                };
                // Re-reading an array element needs the keys pushed again: load by hand.
                let (rc, tc) = if let ExprKind::Index(..) = lhs.kind {
                    self.push_keys(&keyregs);
                    let r = self.reg(lhs.span)?;
                    self.emit(Op::Ldgaa, r, 0, 0, id);
                    (r, self.t.vars[id as usize].ty.clone().unwrap_or(I64))
                } else {
                    if let ExprKind::Ident(n) | ExprKind::SelfVar(n) = &lhs.kind {
                        // A compound assignment to a never-assigned variable starts at 0.
                        let scope = if matches!(lhs.kind, ExprKind::Ident(_)) {
                            Scope::Global
                        } else {
                            Scope::Thread
                        };
                        if builtin(n).is_none() {
                            self.var(scope, n);
                        }
                    }
                    self.expr(&cur)?
                };
                let (rr, tr) = self.expr(rhs)?;
                let res = self.binary_regs(bop, rc, &tc, rr, &tr, span);
                self.release(rr);
                res?
            }
        };
        if tv == Ty::Stack {
            return self.err(rhs.span, STACK_USE);
        }
        let store_ty = |v: &Option<Ty>| v.clone();
        match &lhs.kind {
            ExprKind::Ident(name) => {
                if builtin(name).is_some() {
                    return self.err(
                        lhs.span,
                        format!("cannot assign to built-in variable '{name}'"),
                    );
                }
                if self
                    .t
                    .var_idx
                    .contains_key(&(Scope::Assoc as u32, name.clone()))
                {
                    return self.err(
                        lhs.span,
                        format!("'{name}' is an array elsewhere, a scalar here"),
                    );
                }
                if tv == Ty::Str {
                    return self.err(
                        rhs.span,
                        "global variables hold integers only: string values are not supported (use this-> for strings)",
                    );
                }
                let id = self.var(Scope::Global, name);
                let ty = store_ty(&self.t.vars[id as usize].ty).unwrap_or_else(|| tv.clone());
                self.t.vars[id as usize].ty = Some(ty.clone());
                self.normalize(rv, &ty);
                self.emit(Op::Stgs, 0, rv, 0, id);
                Ok((rv, ty))
            }
            ExprKind::SelfVar(name) => {
                if tv == Ty::Str {
                    return self.err(
                        rhs.span,
                        "thread-local variables hold integers only: string values are not supported",
                    );
                }
                let id = self.var(Scope::Thread, name);
                let ty = store_ty(&self.t.vars[id as usize].ty).unwrap_or_else(|| tv.clone());
                self.t.vars[id as usize].ty = Some(ty.clone());
                self.normalize(rv, &ty);
                self.emit(Op::Stts, 0, rv, 0, id);
                Ok((rv, ty))
            }
            ExprKind::This(name) => {
                let slot = self.local(name);
                let cur = self.t.locals[name].1.clone();
                let ty = match cur {
                    None => tv.clone(),
                    Some(t) => {
                        if (t == Ty::Str) != (tv == Ty::Str) {
                            return self.err(
                                rhs.span,
                                format!(
                                    "this->{name} is {}, assigned a {} here",
                                    t.name(),
                                    tv.name()
                                ),
                            );
                        }
                        t
                    }
                };
                self.t
                    .locals
                    .get_mut(name)
                    .expect("local was just created")
                    .1 = Some(ty.clone());
                self.normalize(rv, &ty);
                self.emit(Op::Stls, 0, rv, 0, slot);
                Ok((rv, ty))
            }
            ExprKind::Index(name, _) => {
                if tv == Ty::Str {
                    return self.err(
                        rhs.span,
                        format!("{name}[] holds integers only: string values are not supported"),
                    );
                }
                let ty = store_ty(&self.t.vars[id as usize].ty).unwrap_or_else(|| tv.clone());
                self.t.vars[id as usize].ty = Some(ty.clone());
                self.normalize(rv, &ty);
                self.push_keys(&keyregs);
                self.emit(Op::Stgaa, 0, rv, 0, id);
                self.release_all(&keyregs);
                Ok((rv, ty))
            }
            _ => self.err(lhs.span, "cannot assign to this expression"),
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
        let rt = match op {
            BinOp::Shl | BinOp::Shr => arith(ta, &I32),
            _ => arith(ta, tb),
        };
        let rt = if let Ty::Ptr(_) = ta { ta.clone() } else { rt };
        let signed = rt.signed();
        let o = match op {
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
            _ => return self.err(span, "invalid compound assignment"),
        };
        self.emit(o, ra, ra, rb, 0);
        self.normalize(ra, &rt);
        Ok((ra, rt))
    }

    fn call(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        let nargs = |g: &Self, n: usize| -> GResult<()> {
            if args.len() != n {
                g.err(
                    span,
                    format!("{name}() takes {n} argument(s), {} given", args.len()),
                )
            } else {
                Ok(())
            }
        };
        match name {
            "stringof" => {
                nargs(self, 1)?;
                let (r, ty) = self.expr(&args[0])?;
                if ty == Ty::Str {
                    return Ok((r, ty));
                }
                let rd = self.reg(span)?;
                self.emit(Op::Kstr, rd, r, 0, 0);
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
            "stack" => {
                use oxtrace_core::stack::{DEFAULT_FRAMES, MAX_FRAMES};
                let n = match args {
                    [] => DEFAULT_FRAMES,
                    [e] => match const_eval(e) {
                        Some(v) if (1..=i64::from(MAX_FRAMES)).contains(&v) => v as u32,
                        _ => {
                            return self.err(
                                e.span,
                                format!(
                                "stack()'s frame count must be a constant from 1 to {MAX_FRAMES}"
                            ),
                            )
                        }
                    },
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
                    Some(e) => match const_eval(e) {
                        Some(v)
                            if (1..=i64::from(oxtrace_core::limits::MAX_STRSIZE)).contains(&v) =>
                        {
                            v as u32
                        }
                        _ => {
                            return self.err(
                                e.span,
                                format!(
                                    "copyinstr()'s size must be a constant from 1 to {}",
                                    oxtrace_core::limits::MAX_STRSIZE
                                ),
                            )
                        }
                    },
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
                let (off, size, signed, kind) = match super::probe_spec::tracepoint_field(&field) {
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
                        ty
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
            "copyin" | "copyinto" => self.err(
                span,
                format!("{name}(): user-memory reads are not supported"),
            ),
            n if ACTIONS.contains(&n) => self.err(
                span,
                format!("{name}() is an action: it cannot be used in an expression"),
            ),
            n if AggKind::from_name(n).is_some() => self.err(
                span,
                format!("{name}() is an aggregating function: use it as @name[keys] = {name}(...)"),
            ),
            _ => self.err(span, format!("unknown function '{name}'")),
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
            } => self.agg_stmt(name, *name_span, keys, call),
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
        match name {
            "trace" => {
                if args.len() != 1 {
                    return self.err(
                        span,
                        format!("trace() takes 1 argument, {} given", args.len()),
                    );
                }
                let (r, ty) = self.expr(&args[0])?;
                // The tool prints a stack symbolized: a printf record of format `%k`.
                let stack = ty == Ty::Stack;
                self.push_keys(&[(r, ty)]);
                self.release(r);
                if stack {
                    let id = self.t.fmt(b"%k");
                    self.emit(Op::Printf, 0, 0, 0, id);
                } else {
                    self.emit(Op::Trace, 0, 0, 0, 0);
                }
            }
            "exit" => {
                if args.len() != 1 {
                    return self.err(
                        span,
                        format!("exit() takes 1 argument, {} given", args.len()),
                    );
                }
                let (r, ty) = self.expr(&args[0])?;
                self.need_scalar(&ty, args[0].span, "exit()")?;
                self.emit(Op::Exit, 0, r, 0, 0);
                self.release(r);
            }
            "ptwrite" => {
                if args.len() != 1 {
                    return self.err(
                        span,
                        format!("ptwrite() takes 1 argument, {} given", args.len()),
                    );
                }
                let (r, ty) = self.expr(&args[0])?;
                self.need_scalar(&ty, args[0].span, "ptwrite()")?;
                self.emit(Op::Ptwrite, 0, r, 0, 0);
                self.release(r);
            }
            "printf" => self.printf(args, span)?,
            "printa" => {
                let (fmt, agg_arg) = match args {
                    [a] => (None, a),
                    [f, a] => (Some(f), a),
                    _ => {
                        return self.err(
                            span,
                            "printa() takes an aggregation, optionally after a format string",
                        )
                    }
                };
                let agg = self.agg_ref(agg_arg)?;
                let mut imm = agg;
                if let Some(f) = fmt {
                    let text = match &f.kind {
                        ExprKind::Str(s) => s.clone(),
                        _ => return self.err(f.span, "printa() format must be a string literal"),
                    };
                    if let Err((off, msg)) = format::parse(&text, true) {
                        return self
                            .err(fmt_span(self.src, f.span, off), format!("printa(): {msg}"));
                    }
                    let id = self.t.fmt(&text);
                    imm |= (id + 1) << 16;
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

    fn printf(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        let Some(f) = args.first() else {
            return self.err(span, "printf() requires a format string");
        };
        let text = match &f.kind {
            ExprKind::Str(s) => s.clone(),
            _ => return self.err(f.span, "printf() format must be a string literal"),
        };
        let pieces = match format::parse(&text, false) {
            Ok(p) => p,
            Err((off, msg)) => {
                return self.err(fmt_span(self.src, f.span, off), format!("printf(): {msg}"))
            }
        };
        let convs: Vec<&format::Conv> = format::convs(&pieces).collect();
        let given = &args[1..];
        if given.len() > act::MAX_TUPLE {
            return self.err(
                given[act::MAX_TUPLE].span,
                format!("printf(): too many arguments (at most {})", act::MAX_TUPLE),
            );
        }
        if convs.len() != given.len() {
            let at = if given.len() > convs.len() {
                given[convs.len()].span
            } else {
                f.span
            };
            return self.err(
                at,
                format!(
                    "printf(): format has {} conversion(s) but {} argument(s) are given",
                    convs.len(),
                    given.len()
                ),
            );
        }
        let mut regs = Vec::new();
        for (i, (a, c)) in given.iter().zip(&convs).enumerate() {
            let (r, ty) = self.expr(a)?;
            let ok = match c.arg_kind() {
                ArgKind::Str => ty == Ty::Str,
                ArgKind::Stack => ty == Ty::Stack,
                ArgKind::Int => ty.is_scalar(),
            };
            if !ok {
                let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                return self.err(
                    a.span,
                    format!(
                        "printf(): {conv} requires {}, argument {} is {}",
                        match c.arg_kind() {
                            ArgKind::Str => "a string",
                            ArgKind::Stack => "a stack()",
                            ArgKind::Int => "an integer",
                        },
                        i + 2,
                        ty.name()
                    ),
                );
            }
            regs.push((r, ty));
        }
        self.push_keys(&regs);
        self.release_all(&regs);
        let id = self.t.fmt(&text);
        self.emit(Op::Printf, 0, 0, 0, id);
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
                    format!("unknown aggregating function '{}'", call.func),
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
        let n = call.args.len();
        if n < min || n > max {
            let want = if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            };
            return self.err(
                cspan,
                format!("{}() takes {want} argument(s), {n} given", call.func),
            );
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
                    "@{name} is used with {}() at {}:{}; it cannot change function or parameters",
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
            kr.push(self.expr(k)?);
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

/// Evaluate a constant integer expression.
pub fn const_eval(e: &Expr) -> Option<i64> {
    Some(match &e.kind {
        ExprKind::Int(v, _) => *v as i64,
        ExprKind::Unary(UnOp::Neg, a) => const_eval(a)?.wrapping_neg(),
        ExprKind::Unary(UnOp::Plus, a) => const_eval(a)?,
        ExprKind::Unary(UnOp::BitNot, a) => !const_eval(a)?,
        ExprKind::Cast(_, a) => const_eval(a)?,
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (const_eval(a)?, const_eval(b)?);
            match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => a.checked_div(b)?,
                BinOp::Mod => a.checked_rem(b)?,
                BinOp::Shl => a.wrapping_shl(b as u32),
                BinOp::Shr => a.wrapping_shr(b as u32),
                BinOp::And => a & b,
                BinOp::Or => a | b,
                BinOp::Xor => a ^ b,
                _ => return None,
            }
        }
        _ => return None,
    })
}
