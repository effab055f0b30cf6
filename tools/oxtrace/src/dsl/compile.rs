//! The compiler: D syntax tree to the program image of `oxtrace_core::program`.

use super::ast::*;
use super::error::{CompileError, Span};
use super::format::{self, ArgKind};
use super::{AggInfo, Compiled, KeyKind, ProbeSpec, VarSummary};
use oxtrace_core::action::{self as act, insn, Builtin, IntType, KeyLayout, Op, Scope};
use oxtrace_core::program::{self as prog, AggFunc, OptKey, ProbeKind};
use std::collections::HashMap;

/// Scratch bytes the kernel allows one clause (the compiler checks against the same bound).
pub const SCRATCH_LIMIT: usize = 1 << 20;

/// A value type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    /// An integer.
    Int {
        /// Size in bytes (1, 2, 4, 8).
        size: u8,
        /// Signedness.
        signed: bool,
    },
    /// A string.
    Str,
    /// A pointer into kernel memory, with its pointee.
    Ptr(Box<Ty>),
    /// `void` (only as a pointee).
    Void,
}

const I64: Ty = Ty::Int {
    size: 8,
    signed: true,
};
const U64: Ty = Ty::Int {
    size: 8,
    signed: false,
};
const I32: Ty = Ty::Int {
    size: 4,
    signed: true,
};
const U32: Ty = Ty::Int {
    size: 4,
    signed: false,
};

impl Ty {
    fn name(&self) -> String {
        match self {
            Ty::Int { size, signed } => {
                let base = match size {
                    1 => "char",
                    2 => "short",
                    4 => "int",
                    _ => "int64_t",
                };
                match (signed, size) {
                    (true, _) => base.to_string(),
                    (false, 8) => "uint64_t".to_string(),
                    (false, _) => format!("unsigned {base}"),
                }
            }
            Ty::Str => "string".into(),
            Ty::Ptr(t) => format!("{} *", t.name()),
            Ty::Void => "void".into(),
        }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Ty::Int { .. } | Ty::Ptr(_))
    }

    fn int_type(&self) -> IntType {
        match self {
            Ty::Int { size, signed } => IntType::new(*size, *signed),
            _ => IntType::U64,
        }
    }

    fn signed(&self) -> bool {
        matches!(self, Ty::Int { signed: true, .. })
    }

    fn from_name(t: &TypeName) -> Ty {
        match t {
            TypeName::Int { size, signed } => Ty::Int {
                size: *size,
                signed: *signed,
            },
            TypeName::Str => Ty::Str,
            TypeName::Void => Ty::Void,
            TypeName::Ptr(p) => Ty::Ptr(Box::new(Ty::from_name(p))),
        }
    }

    fn key_kind(&self) -> KeyKind {
        if *self == Ty::Str {
            KeyKind::Str
        } else {
            KeyKind::Int
        }
    }
}

/// C's usual arithmetic conversions on promoted operands.
fn arith(a: &Ty, b: &Ty) -> Ty {
    let prom = |t: &Ty| match t {
        Ty::Int { size, .. } if *size < 4 => I32,
        Ty::Int { .. } => t.clone(),
        _ => U64,
    };
    let (a, b) = (prom(a), prom(b));
    match (&a, &b) {
        (
            Ty::Int {
                size: sa,
                signed: ga,
            },
            Ty::Int {
                size: sb,
                signed: gb,
            },
        ) => {
            if sa > sb {
                a
            } else if sb > sa {
                b
            } else {
                Ty::Int {
                    size: *sa,
                    signed: *ga && *gb,
                }
            }
        }
        _ => U64,
    }
}

fn builtin(name: &str) -> Option<(Builtin, Ty)> {
    use Builtin::*;
    Some(match name {
        "pid" => (Pid, I32),
        "tid" => (Tid, I32),
        "ppid" => (Ppid, I32),
        "cpu" => (Cpu, I32),
        "timestamp" => (Timestamp, U64),
        "walltimestamp" => (Walltimestamp, U64),
        "arg0" => (Arg0, I64),
        "arg1" => (Arg1, I64),
        "arg2" => (Arg2, I64),
        "arg3" => (Arg3, I64),
        "arg4" => (Arg4, I64),
        "arg5" => (Arg5, I64),
        "retval" => (Retval, I64),
        "uid" => (Uid, U32),
        "gid" => (Gid, U32),
        "id" => (Id, U32),
        "curthread" => (Curthread, Ty::Ptr(Box::new(Ty::Void))),
        "execname" => (Execname, Ty::Str),
        "probeprov" => (Probeprov, Ty::Str),
        "probemod" => (Probemod, Ty::Str),
        "probefunc" => (Probefunc, Ty::Str),
        "probename" => (Probename, Ty::Str),
        _ => return None,
    })
}

const ACTIONS: &[&str] = &[
    "trace",
    "printf",
    "exit",
    "ptwrite",
    "printa",
    "clear",
    "trunc",
    "normalize",
    "denormalize",
];

struct Var {
    name: String,
    scope: Scope,
    keys: Option<Vec<KeyKind>>,
    ty: Option<Ty>,
}

struct Agg {
    name: String,
    func: AggFunc,
    params: [i64; 4],
    keys: Option<Vec<KeyKind>>,
    first: Span,
    /// Whether an update was compiled (else only declared by the pre-pass).
    defined: bool,
}

/// Program-wide tables shared by every clause.
struct Tables {
    ints: Vec<u64>,
    int_idx: HashMap<u64, u32>,
    strtab: Vec<u8>,
    str_idx: HashMap<Vec<u8>, u32>,
    vars: Vec<Var>,
    var_idx: HashMap<(u32, String), u32>,
    aggs: Vec<Agg>,
    agg_idx: HashMap<String, u32>,
    fmts: Vec<u32>,
    fmt_idx: HashMap<Vec<u8>, u32>,
    fmt_text: Vec<String>,
    locals: HashMap<String, (u32, Option<Ty>)>,
    strsize: u32,
}

impl Tables {
    fn string(&mut self, s: &[u8]) -> u32 {
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

struct Gen<'a> {
    t: &'a mut Tables,
    src: &'a str,
    input: &'a str,
    code: Vec<u64>,
    free: Vec<u8>,
}

type GResult<T> = Result<T, CompileError>;

impl<'a> Gen<'a> {
    fn new(t: &'a mut Tables, src: &'a str, input: &'a str) -> Self {
        Gen {
            t,
            src,
            input,
            code: Vec::new(),
            free: (1..act::NREGS as u8).rev().collect(),
        }
    }

    fn err<T>(&self, span: Span, msg: impl Into<String>) -> GResult<T> {
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

    fn emit(&mut self, op: Op, rd: u8, r1: u8, r2: u8, imm: u32) -> usize {
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
    fn expr(&mut self, e: &Expr) -> GResult<(u8, Ty)> {
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
            if *ty == Ty::Str {
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
            "copyin" | "copyinstr" | "copyinto" => self.err(
                span,
                format!("{name}(): user-memory reads are not supported"),
            ),
            n if ACTIONS.contains(&n) => self.err(
                span,
                format!("{name}() is an action: it cannot be used in an expression"),
            ),
            n if AGG_FUNCS.contains(&n) => self.err(
                span,
                format!("{name}() is an aggregating function: use it as @name[keys] = {name}(...)"),
            ),
            _ => self.err(span, format!("unknown function '{name}'")),
        }
    }

    // ---- statements --------------------------------------------------------------------

    fn stmt(&mut self, s: &Stmt) -> GResult<()> {
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
                self.push_keys(&[(r, ty)]);
                self.release(r);
                self.emit(Op::Trace, 0, 0, 0, 0);
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
                ArgKind::Int => ty.is_scalar(),
            };
            if !ok {
                let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                return self.err(
                    a.span,
                    format!(
                        "printf(): {conv} requires {}, argument {} is {}",
                        if c.arg_kind() == ArgKind::Str {
                            "a string"
                        } else {
                            "an integer"
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
        let func = match agg_func(&call.func) {
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
            AggFunc::Count => (0, 0),
            AggFunc::Quantize => (1, 2),
            AggFunc::Lquantize => (3, 5),
            AggFunc::Llquantize => (5, 6),
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
            AggFunc::Quantize => incr = call.args.get(1),
            AggFunc::Lquantize => {
                params[0] = self.const_int(&call.args[1])?;
                params[1] = self.const_int(&call.args[2])?;
                params[2] = match call.args.get(3) {
                    Some(e) => self.const_int(e)?,
                    None => 1,
                };
                incr = call.args.get(4);
                let (lo, hi, step) = (params[0], params[1], params[2]);
                if step <= 0 {
                    return self.err(
                        call.args.get(3).map_or(cspan, |e| e.span),
                        "lquantize(): step must be positive",
                    );
                }
                if lo >= hi {
                    return self.err(
                        call.args[2].span,
                        "lquantize(): upper bound must be greater than lower bound",
                    );
                }
            }
            AggFunc::Llquantize => {
                for (i, p) in params.iter_mut().enumerate() {
                    *p = self.const_int(&call.args[i + 1])?;
                }
                incr = call.args.get(5);
                if params[0] < 2 {
                    return self.err(call.args[1].span, "llquantize(): factor must be at least 2");
                }
                if params[1] < 0 {
                    return self.err(
                        call.args[2].span,
                        "llquantize(): low magnitude must be non-negative",
                    );
                }
                if params[2] <= params[1] {
                    return self.err(
                        call.args[3].span,
                        "llquantize(): high magnitude must be greater than low magnitude",
                    );
                }
            }
            _ => {}
        }
        if !prog::agg_params_valid(func, &params) {
            return self.err(cspan, format!("{}(): invalid parameters", call.func));
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
            None => self.t.aggs[id as usize].keys = Some(kinds),
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
        let rv = if func == AggFunc::Count {
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

const AGG_FUNCS: &[&str] = &[
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "stddev",
    "quantize",
    "lquantize",
    "llquantize",
];

fn agg_func(name: &str) -> Option<AggFunc> {
    AGG_FUNCS
        .iter()
        .position(|f| *f == name)
        .and_then(|i| AggFunc::from_u32(i as u32))
}

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

// ---- probes and options ----------------------------------------------------------------

fn time_unit_ns(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    })
}

/// Parse `N[unit]` as an interval in ns; a bare number or `hz` is a frequency.
pub fn parse_interval(s: &str) -> Option<u64> {
    let d = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..d].parse().ok()?;
    if n == 0 {
        return None;
    }
    let unit = &s[d..];
    if unit.is_empty() || unit == "hz" {
        return Some(1_000_000_000 / n).filter(|&v| v > 0);
    }
    n.checked_mul(time_unit_ns(unit)?)
}

/// Parse a size with an optional k/m/g/t suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    let l = s.to_ascii_lowercase();
    let d = l.find(|c: char| !c.is_ascii_digit()).unwrap_or(l.len());
    let n: u64 = l[..d].parse().ok()?;
    let mul: u64 = match &l[d..] {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mul)
}

fn probe_spec(text: &str) -> Result<Vec<ProbeSpec>, String> {
    let fbt = |kind, func: &str| -> Result<ProbeSpec, String> {
        let func = if func.is_empty() { "*" } else { func };
        if func.len() > prog::MAX_FUNC_LEN
            || !func
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_.*?".contains(&c))
        {
            return Err(format!("invalid function pattern '{func}'"));
        }
        Ok(ProbeSpec {
            kind,
            func: func.to_string(),
            period_ns: 0,
            text: text.to_string(),
        })
    };
    let other = |kind, period_ns| ProbeSpec {
        kind,
        func: String::new(),
        period_ns,
        text: text.to_string(),
    };
    let tick = |name: &str| -> Option<Result<ProbeSpec, String>> {
        let rest = name.strip_prefix("tick-")?;
        Some(match parse_interval(rest) {
            Some(ns) if (prog::TICK_MIN_NS..=prog::TICK_MAX_NS).contains(&ns) => {
                Ok(other(ProbeKind::Tick, ns))
            }
            Some(_) => Err(format!(
                "tick interval out of range ({} µs to 1 hour)",
                prog::TICK_MIN_NS / 1000
            )),
            None => Err(format!(
                "invalid tick interval '{rest}' (use e.g. tick-1s, tick-10ms, tick-100hz)"
            )),
        })
    };
    let fields: Vec<&str> = text.split(':').collect();
    match fields.as_slice() {
        ["BEGIN"] | ["dtrace", "", "", "BEGIN"] => Ok(vec![other(ProbeKind::Begin, 0)]),
        ["END"] | ["dtrace", "", "", "END"] => Ok(vec![other(ProbeKind::End, 0)]),
        [name] | ["profile", "", "", name] if tick(name).is_some() => {
            tick(name).expect("checked").map(|p| vec![p])
        }
        ["kprobe", func] | ["kprobe", "", func] => Ok(vec![fbt(ProbeKind::FbtEntry, func)?]),
        ["kretprobe", func] | ["kretprobe", "", func] => Ok(vec![fbt(ProbeKind::FbtReturn, func)?]),
        ["fbt", module, func, name] => {
            if !matches!(*module, "" | "*" | "vmlinux" | "kernel") {
                return Err(format!("module-specific probes are not supported (module '{module}')"));
            }
            match *name {
                "entry" => Ok(vec![fbt(ProbeKind::FbtEntry, func)?]),
                "return" => Ok(vec![fbt(ProbeKind::FbtReturn, func)?]),
                "" | "*" => Ok(vec![
                    fbt(ProbeKind::FbtEntry, func)?,
                    fbt(ProbeKind::FbtReturn, func)?,
                ]),
                _ => Err(format!("fbt probes are named 'entry' or 'return', not '{name}'")),
            }
        }
        [prov, ..] if !["fbt", "kprobe", "kretprobe", "dtrace", "profile"].contains(prov) => Err(format!(
            "unknown provider '{prov}' (supported: fbt, kprobe, kretprobe, BEGIN, END, tick-N)"
        )),
        _ => Err(format!(
            "invalid probe description '{text}' (expected fbt::FUNC:entry, fbt::FUNC:return, kprobe:FUNC, kretprobe:FUNC, BEGIN, END or tick-N)"
        )),
    }
}

/// Options only the tool uses (never sent to the kernel).
pub const TOOL_OPTIONS: &[&str] = &[
    "quiet",
    "aggsortkey",
    "aggsortrev",
    "aggsortpos",
    "aggsortkeypos",
];

/// Apply option `name[=value]`; errors carry the message.
pub fn apply_option(c: &mut Compiled, name: &str, value: Option<&str>) -> Result<(), String> {
    if let Some(key) = OptKey::from_name(name) {
        let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
        let parsed = match key {
            OptKey::Switchrate | OptKey::Cleanrate | OptKey::Aggrate => parse_interval(v),
            _ => parse_size(v),
        }
        .ok_or_else(|| format!("invalid value '{v}' for option '{name}'"))?;
        let (lo, hi) = key.range();
        let parsed = if key == OptKey::Cleanrate && !(lo..=hi).contains(&parsed) {
            let clamped = parsed.clamp(lo, hi);
            c.warnings.push(format!(
                "cleanrate {v} is out of range: clamped to {} Hz",
                1_000_000_000 / clamped
            ));
            clamped
        } else if !(lo..=hi).contains(&parsed) {
            return Err(format!(
                "value '{v}' for option '{name}' is out of range ({lo}..={hi})"
            ));
        } else {
            parsed
        };
        c.options.set(key, parsed);
        if !c.set_options.contains(&key) {
            c.set_options.push(key);
        }
        return Ok(());
    }
    if TOOL_OPTIONS.contains(&name) {
        if name == "quiet" {
            c.quiet = true;
        }
        c.tool_options
            .insert(name.to_string(), value.unwrap_or("").to_string());
        return Ok(());
    }
    Err(format!("unknown option '{name}'"))
}

fn pragma(c: &mut Compiled, src: &str, input: &str, text: &str, span: Span) -> GResult<()> {
    let err = |off: usize, len: usize, msg: String| {
        Err(CompileError::at(
            src,
            input,
            Span {
                start: span.start + 1 + off,
                len: len.max(1),
            },
            msg,
        ))
    };
    let words: Vec<(usize, &str)> = text
        .split_ascii_whitespace()
        .map(|w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
        .collect();
    match words.as_slice() {
        [(_, "pragma"), (_, "D"), (_, "option"), (off, opt)] => {
            let (name, value) = match opt.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (*opt, None),
            };
            apply_option(c, name, value).or_else(|m| err(*off, opt.len(), m))
        }
        [(_, "pragma"), (_, "D"), (off, w), ..] => err(
            *off,
            w.len(),
            format!("unsupported #pragma D directive '{w}'"),
        ),
        [(off, w), ..] => err(
            *off,
            w.len(),
            format!("unsupported preprocessor directive '#{w}' (only #pragma D option is)"),
        ),
        [] => err(0, 0, "empty preprocessor directive".into()),
    }
}

/// Compile a parsed program.
pub fn compile_items(
    items: &[Item],
    src: &str,
    input: &str,
    xopts: &[(String, Option<String>)],
) -> GResult<Compiled> {
    let mut c = Compiled::default();
    for (name, value) in xopts {
        if let Err(m) = apply_option(&mut c, name, value.as_deref()) {
            let text = match value {
                Some(v) => format!("{name}={v}"),
                None => name.clone(),
            };
            return Err(CompileError::at(&text, "-x", Span::new(0, text.len()), m));
        }
    }
    for it in items {
        if let Item::Pragma(text, span) = it {
            pragma(&mut c, src, input, text, *span)?;
        }
    }
    let mut t = Tables {
        ints: vec![],
        int_idx: HashMap::new(),
        strtab: vec![0],
        str_idx: HashMap::new(),
        vars: vec![],
        var_idx: HashMap::new(),
        aggs: vec![],
        agg_idx: HashMap::new(),
        fmts: vec![],
        fmt_idx: HashMap::new(),
        fmt_text: vec![],
        locals: HashMap::new(),
        strsize: c.options.strsize as u32,
    };
    t.str_idx.insert(vec![], 0);
    let clauses: Vec<&Clause> = items
        .iter()
        .filter_map(|i| match i {
            Item::Clause(c) => Some(c),
            _ => None,
        })
        .collect();
    if clauses.is_empty() {
        return Err(CompileError::at(
            src,
            input,
            Span::new(src.len(), src.len()),
            "the program has no probe clause",
        ));
    }
    // Pre-pass: every variable that is assigned anywhere exists, so that a return clause may
    // test a variable its entry clause (later in the text) sets; aggregations likewise.
    for cl in &clauses {
        for s in &cl.body {
            declare_stmt(&mut t, s);
        }
        if let Some(p) = &cl.pred {
            declare_expr(&mut t, p);
        }
    }
    let mut probes = Vec::new();
    let mut clause_descs = Vec::new();
    let mut code = Vec::new();
    for cl in &clauses {
        let first = probes.len();
        for p in &cl.probes {
            let specs = probe_spec(&p.text).map_err(|m| CompileError::at(src, input, p.span, m))?;
            probes.extend(specs);
        }
        let pred_start = code.len() as u32;
        let pred_len = match &cl.pred {
            Some(e) => {
                let mut g = Gen::new(&mut t, src, input);
                let (r, ty) = g.expr(e)?;
                if !ty.is_scalar() {
                    return g.err(
                        e.span,
                        format!("predicate must be an integer or pointer, not {}", ty.name()),
                    );
                }
                g.emit(Op::Ret, 0, r, 0, 0);
                let n = g.code.len();
                code.extend(g.code);
                n as u32
            }
            None => 0,
        };
        let act_start = code.len() as u32;
        let mut g = Gen::new(&mut t, src, input);
        if cl.body.is_empty() {
            // DTrace's default action: record that the probe fired.
            g.emit(Op::Trace, 0, 0, 0, 0);
        }
        for s in &cl.body {
            g.stmt(s)?;
        }
        g.emit(Op::Ret, 0, 0, 0, 0);
        if g.code.len() > act::MAX_INSNS {
            return g.err(
                cl.span,
                format!(
                    "clause too long: {} instructions (at most {})",
                    g.code.len(),
                    act::MAX_INSNS
                ),
            );
        }
        let act_len = g.code.len() as u32;
        code.extend(g.code);
        clause_descs.push(prog::ClauseDesc {
            probe_first: first as u32,
            probe_count: (probes.len() - first) as u32,
            pred_start: if pred_len == 0 { 0 } else { pred_start },
            pred_len,
            act_start,
            act_len,
        });
        c.clause_spans.push((cl.span, first..probes.len()));
    }
    // Tables for the image.
    let probe_descs: Vec<prog::ProbeDesc> = probes
        .iter()
        .map(|p: &ProbeSpec| prog::ProbeDesc {
            kind: p.kind,
            func: if p.func.is_empty() {
                0
            } else {
                t.string(p.func.as_bytes())
            },
            arg: p.period_ns,
        })
        .collect();
    let layout = |k: &Option<Vec<KeyKind>>| {
        let k = k.clone().unwrap_or_default();
        let mask = k
            .iter()
            .enumerate()
            .filter(|(_, k)| **k == KeyKind::Str)
            .fold(0u16, |m, (i, _)| m | (1 << i));
        KeyLayout::new(k.len() as u8, mask)
    };
    let names: Vec<String> = t.vars.iter().map(|v| v.name.clone()).collect();
    let var_names: Vec<u32> = names.iter().map(|n| t.string(n.as_bytes())).collect();
    let mut vars = Vec::new();
    for (v, name) in t.vars.iter().zip(var_names) {
        if v.scope == Scope::Assoc && v.keys.is_none() {
            // Declared by the pre-pass but never indexed: give it one integer key.
            vars.push(prog::VarDesc {
                name,
                scope: v.scope,
                keys: KeyLayout::new(1, 0),
            });
            continue;
        }
        vars.push(prog::VarDesc {
            name,
            scope: v.scope,
            keys: if v.scope == Scope::Assoc {
                layout(&v.keys)
            } else {
                KeyLayout::NONE
            },
        });
    }
    let names: Vec<String> = t.aggs.iter().map(|a| a.name.clone()).collect();
    let agg_names: Vec<u32> = names.iter().map(|n| t.string(n.as_bytes())).collect();
    let aggs: Vec<prog::AggDesc> = t
        .aggs
        .iter()
        .zip(agg_names)
        .map(|(a, name)| prog::AggDesc {
            name,
            func: a.func,
            keys: layout(&a.keys),
            params: a.params,
        })
        .collect();
    let fmts: Vec<prog::FmtDesc> = t.fmts.iter().map(|&fmt| prog::FmtDesc { fmt }).collect();
    let options: Vec<(OptKey, u64)> = c
        .set_options
        .iter()
        .map(|&k| (k, c.options.get(k)))
        .collect();
    let parts = prog::Parts {
        probes: &probe_descs,
        clauses: &clause_descs,
        code: &code,
        ints: &t.ints,
        strtab: &t.strtab,
        vars: &vars,
        aggs: &aggs,
        fmts: &fmts,
        options: &options,
        nlocals: t.locals.len() as u32,
    };
    let mut image = vec![0u8; parts.encoded_len()];
    if parts.write(&mut image).is_err() {
        return Err(CompileError::at(
            src,
            input,
            Span::new(0, 0),
            "program too large for an image",
        ));
    }
    // The kernel will verify the image; check it here first so errors point at the source.
    let img = prog::Image::parse(&image).map_err(|e| {
        CompileError::at(
            src,
            input,
            Span::new(0, 0),
            format!("internal error: invalid image: {e:?}"),
        )
    })?;
    if let Err(e) = img.verify(SCRATCH_LIMIT) {
        let span = c
            .clause_spans
            .get(e.clause as usize)
            .map_or(Span::new(0, 0), |s| s.0);
        let msg = if e.error.reason == act::Reason::ScratchTooLarge {
            format!("clause needs more than {SCRATCH_LIMIT} bytes of scratch space (lower strsize or use fewer strings)")
        } else {
            format!("internal error: the verifier rejects this clause: {e:?}")
        };
        return Err(CompileError::at(src, input, span, msg));
    }
    c.probes = probes;
    c.formats = t.fmt_text.clone();
    c.aggs = t
        .aggs
        .iter()
        .map(|a| AggInfo {
            name: a.name.clone(),
            func: a.func,
            keys: a.keys.clone().unwrap_or_default(),
            params: a.params,
        })
        .collect();
    c.vars = t
        .vars
        .iter()
        .map(|v| VarSummary {
            name: v.name.clone(),
            scope: v.scope,
        })
        .collect();
    c.nlocals = t.locals.len() as u32;
    c.image = image;
    Ok(c)
}

fn declare_stmt(t: &mut Tables, s: &Stmt) {
    match s {
        Stmt::Expr(e) => declare_expr(t, e),
        Stmt::Agg {
            name,
            name_span,
            keys,
            call,
        } => {
            if !t.agg_idx.contains_key(name) {
                t.agg_idx.insert(name.clone(), t.aggs.len() as u32);
                t.aggs.push(Agg {
                    name: name.clone(),
                    func: AggFunc::Count,
                    params: [0; 4],
                    keys: None,
                    first: *name_span,
                    defined: false,
                });
            }
            for k in keys {
                declare_expr(t, k);
            }
            for a in &call.args {
                declare_expr(t, a);
            }
        }
    }
}

fn declare_expr(t: &mut Tables, e: &Expr) {
    let mut declare = |scope: Scope, name: &str| {
        let key = (scope as u32, name.to_string());
        if !t.var_idx.contains_key(&key) {
            let i = t.vars.len() as u32;
            t.vars.push(Var {
                name: name.to_string(),
                scope,
                keys: None,
                ty: None,
            });
            t.var_idx.insert(key, i);
        }
    };
    match &e.kind {
        ExprKind::Assign(_, lhs, rhs) => {
            match &lhs.kind {
                ExprKind::Ident(n) if builtin(n).is_none() => declare(Scope::Global, n),
                ExprKind::SelfVar(n) => declare(Scope::Thread, n),
                ExprKind::Index(n, _) => declare(Scope::Assoc, n),
                _ => {}
            }
            declare_expr(t, lhs);
            declare_expr(t, rhs);
        }
        ExprKind::IncDec { target, .. } => {
            match &target.kind {
                ExprKind::Ident(n) if builtin(n).is_none() => declare(Scope::Global, n),
                ExprKind::SelfVar(n) => declare(Scope::Thread, n),
                ExprKind::Index(n, _) => declare(Scope::Assoc, n),
                _ => {}
            }
            declare_expr(t, target);
        }
        ExprKind::Index(_, ks) | ExprKind::Call(_, ks) => {
            for k in ks {
                declare_expr(t, k);
            }
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(_, a) => declare_expr(t, a),
        ExprKind::Binary(_, a, b) => {
            declare_expr(t, a);
            declare_expr(t, b);
        }
        ExprKind::Ternary(a, b, c) => {
            declare_expr(t, a);
            declare_expr(t, b);
            declare_expr(t, c);
        }
        _ => {}
    }
}
