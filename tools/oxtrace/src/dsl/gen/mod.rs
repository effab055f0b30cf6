//! The code generator: one clause's statements and expressions to bytecode, filling the
//! program-wide tables (`passes::Tables`: variables, aggregations, strings, formats).

use super::error::GResult;
use super::error::{CompileError, Span};
use super::passes::{Tables, Var};
use super::syntax::ast::*;
use super::types::{Ty, I64, U64};
use super::KeyKind;
use oxtrace_core::action::{self as act, insn, Op, Scope};

mod action;
mod agg;
mod assign;
mod call;
mod expr;
mod loc;
pub(super) mod mem;
mod place;
mod print;
mod subr;
mod ustack;
pub(super) mod xlate;

pub(super) struct Gen<'a> {
    pub(super) t: &'a mut Tables,
    pub(super) src: &'a str,
    pub(super) input: &'a str,
    pub(super) code: Vec<u64>,
    pub(super) free: Vec<u8>,
    /// The inputs of the translations being compiled: name, register, type (`xlate.rs`).
    pub(super) xbind: Vec<(String, u8, Ty)>,
    /// How many translations of a struct or union input, substituted in place rather
    /// than bound to a register, are being compiled (`xlate.rs`).
    pub(super) xdepth: usize,
    /// Inlines being expanded.
    inline_depth: usize,
    /// What the clause's actions so far did (`subr::CLS_*`), for DTrace's ordering rules
    /// of `speculate`, `commit` and the actions around them.
    pub(super) clsflags: u8,
    /// Set for the subscript about to be compiled when it is of an array in a D variable
    /// kept in memory: bounds-checked at run time as one kept in `this->` slots.
    pub(super) check_index: bool,
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
            xdepth: 0,
            inline_depth: 0,
            clsflags: 0,
            check_index: false,
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

    /// Refuses a `ty` that is not an integer or pointer with DTrace's `tag` for the place.
    fn need_scalar(&self, ty: &Ty, span: Span, what: &str, tag: &str) -> GResult<()> {
        if ty.is_scalar() {
            Ok(())
        } else {
            self.err(
                span,
                format!(
                    "[{tag}] {what} requires an integer or pointer, not {}",
                    ty.name()
                ),
            )
        }
    }

    /// Checks argument `i` (from 0) of `name()` against its prototype before anything else
    /// is asked of the call, as DTrace does: `D_PROTO_ARG` when `e`'s type is not `want`.
    fn proto_arg(&mut self, name: &str, i: usize, e: &Expr, want: Want) -> GResult<()> {
        let ty = match &e.kind {
            ExprKind::AggRef(_) => None,
            _ => Some(self.type_of(e)?),
        };
        let ok = ty.as_ref().is_some_and(|t| match want {
            Want::Int => t.is_int(),
            Want::Scalar => t.is_scalar() || matches!(t, Ty::Array(..)),
            Want::Ptr => matches!(t, Ty::Ptr(_) | Ty::Array(..)),
            Want::Str => matches!(t, Ty::Str),
        });
        if ok {
            return Ok(());
        }
        let what = match want {
            Want::Int => "an integer",
            Want::Scalar => "an integer or pointer",
            Want::Ptr => "a pointer",
            Want::Str => "a string",
        };
        let got = ty.map_or_else(|| "an aggregation".to_string(), |t| t.name());
        self.err(
            e.span,
            format!(
                "[D_PROTO_ARG] {name}( ) argument #{} requires {what}, not {got}",
                i + 1
            ),
        )
    }

    /// Refuses `e` where a value is needed if it has none: an action (its type is void) or
    /// an aggregation (its value lives in the aggregation buffer). DTrace names the place in
    /// the error's tag: `void_tag` for an action, `agg_tag` for an aggregation.
    fn need_value(&self, e: &Expr, void_tag: &str, agg_tag: &str) -> GResult<()> {
        match &e.kind {
            ExprKind::Call(name, _) if super::types::ACTIONS.contains(&name.as_str()) => self.err(
                e.span,
                format!("[{void_tag}] {name}() is an action: it has no value to use here"),
            ),
            ExprKind::AggRef(name) => self.err(
                e.span,
                format!(
                    "[{agg_tag}] aggregation @{name} has no value to use here: it can only be an \
                     argument of printa, clear, trunc or normalize"
                ),
            ),
            _ => Ok(()),
        }
    }

    /// [`Self::need_value`] then the value of `e`.
    fn value(&mut self, e: &Expr, void_tag: &str, agg_tag: &str) -> GResult<(u8, Ty)> {
        self.need_value(e, void_tag, agg_tag)?;
        self.expr(e)
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
}

/// The error for a `stack()` value used as anything but a key.
const STACK_USE: &str = "a stack() value can only be an aggregation key";

fn kinds_text(k: &[KeyKind]) -> String {
    k.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

/// The error for a key of float type `t`.
fn float_key(t: &Ty) -> String {
    format!(
        "[D_KEY_TYPE] a key of type {} is not supported: D has no floating-point comparison",
        t.name()
    )
}

/// The error for a long double in a D variable, which holds at most 8 bytes.
const LDOUBLE_VAR: &str =
    "[D_OP_INCOMPAT] a long double cannot be stored in a D variable: only traced or formatted";

/// The error for `n` arguments to `name()`, which takes `min..=max`; `None` if `n` fits.
fn arity_error(name: &str, n: usize, min: usize, max: usize) -> Option<String> {
    let want = match max - min {
        _ if (min..=max).contains(&n) => return None,
        0 => format!("{min}"),
        1 => format!("{min} or {max}"),
        _ => format!("{min} to {max}"),
    };
    Some(format!(
        "[D_PROTO_LEN] {name}() takes {want} argument(s), {n} given"
    ))
}

/// Whether memory of type `ty` holds a string: a `string` or a `char[N]`, which a string
/// is stored into (`p->name = execname`) and read from as a string.
fn is_str_storage(ty: &Ty) -> bool {
    match ty {
        Ty::Str => true,
        Ty::Array(e, _) => matches!(**e, Ty::Int { size: 1, .. }),
        _ => false,
    }
}

/// Whether `name` is a function D knows: an action, a subroutine or another built-in call
/// (whether or not oxtrace implements it).
pub(crate) fn is_function(name: &str) -> bool {
    super::types::ACTIONS.contains(&name)
        || subr::is_subr(name)
        || mem::is_call(name)
        || ustack::is_call(name)
        || call::is_unimplemented(name)
        || matches!(
            name,
            "speculation" | "stringof" | "strlen" | "strjoin" | "stack" | "copyinstr"
        )
}

/// What a function's prototype wants of an argument (see [`Gen::proto_arg`]).
#[derive(Clone, Copy)]
pub(super) enum Want {
    /// An integer.
    Int,
    /// An integer or a pointer (an array stands for its address).
    Scalar,
    /// A pointer.
    Ptr,
    /// A string.
    Str,
}
