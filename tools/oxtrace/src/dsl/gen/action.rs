//! Statements and actions: `if`, `trace()`, `printf()`, `printa()`, `setopt()`, `exit()`,
//! speculation, and the records they write.

use super::super::error::Span;
use super::super::format::{self, ArgKind};
use super::super::syntax::ast::*;
use super::super::types::{Ty, ACTIONS, I32, I64};
use super::super::KeyKind;
use super::{arity_error, kinds_text, GResult, Gen, Want};
use oxtrace_core::action::{self as act, Op};

impl Gen<'_> {
    pub(crate) fn stmt(&mut self, s: &Stmt) -> GResult<()> {
        match s {
            Stmt::Expr(e) => {
                if let ExprKind::Call(name, args) = &e.kind {
                    if ACTIONS.contains(&name.as_str()) {
                        return self.action(name, args, e.span);
                    }
                }
                // A translation alone is a value of a type that is never built.
                if let Some(what) = self.xlate_data(e) {
                    return self.err(
                        e.span,
                        format!(
                            "[D_CG_DYN] a statement cannot evaluate to {what}: use its members"
                        ),
                    );
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
                self.clause_order("an aggregation", *name_span)?;
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

    pub(super) fn action(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<()> {
        self.clause_order(name, span)?;
        match name {
            "speculate" | "commit" | "discard" => self.spec_action(name, args, span)?,
            "system" | "raise" | "stop" | "chill" | "freopen" | "copyout" | "copyoutstr" => {
                self.destructive_action(name, args, span)?
            }
            "trace" => {
                if let Some(m) = arity_error(name, args.len(), 1, 1) {
                    return self.err(span, m);
                }
                // A struct or union is traced as its bytes, shown as tracemem() shows
                // them, as DTrace traces one. (A translation is never built: its own
                // error says so.)
                if self
                    .need_value(&args[0], "D_TRACE_VOID", "D_TRACE_DYN")
                    .is_ok()
                    && self.xlate_type(&args[0]).is_none()
                {
                    if let ty @ Ty::Sou(..) = self.type_of(&args[0])? {
                        return self.trace_object(&args[0], &ty);
                    }
                }
                let (r, ty) = self.value(&args[0], "D_TRACE_VOID", "D_TRACE_DYN")?;
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
                let (r, ty) = self.value(&args[0], "D_PROTO_ARG", "D_PROTO_ARG")?;
                self.need_scalar(&ty, args[0].span, "exit()", "D_PROTO_ARG")?;
                self.emit(Op::Exit, 0, r, 0, 0);
                self.release(r);
            }
            "ptwrite" => {
                if let Some(m) = arity_error(name, args.len(), 1, 1) {
                    return self.err(span, m);
                }
                let (r, ty) = self.expr(&args[0])?;
                self.need_scalar(&ty, args[0].span, "ptwrite()", "D_PROTO_ARG")?;
                self.emit(Op::Ptwrite, 0, r, 0, 0);
                self.release(r);
            }
            "printf" => self.printf(args, span)?,
            "tracemem" => self.tracemem(args, span)?,
            "print" => self.print(args, span)?,
            "setopt" => self.setopt(args, span)?,
            "printa" => {
                let (fmt, agg_args) = match args {
                    // A format alone has no aggregation to print.
                    [a] if matches!(a.kind, ExprKind::Str(_)) => {
                        return self.err(
                            span,
                            "[D_PRINTA_PROTO] printa( ) prototype mismatch: a format must be followed by an aggregation",
                        )
                    }
                    [a] => (None, std::slice::from_ref(a)),
                    // Aggregations only, with no format.
                    [a, ..] if matches!(a.kind, ExprKind::AggRef(_)) => (None, args),
                    [f, rest @ ..] if !rest.is_empty() => (Some(f), rest),
                    _ => {
                        return self.err(
                            span,
                            "[D_PROTO_LEN] printa() takes an aggregation, optionally after a format string",
                        )
                    }
                };
                let aggs = agg_args
                    .iter()
                    .map(|a| self.agg_ref(a, "printa"))
                    .collect::<GResult<Vec<u32>>>()?;
                // Several aggregations print side by side: their keys must match, in number
                // (D_PRINTA_AGGKEY) and in type (D_PRINTA_AGGPROTO), as in DTrace.
                for (a, &id) in agg_args.iter().zip(&aggs).skip(1) {
                    let (k0, k) = (&self.t.aggs[aggs[0] as usize], &self.t.aggs[id as usize]);
                    if let (Some(ks0), Some(ks)) = (&k0.keys, &k.keys) {
                        if ks0 == ks {
                            continue;
                        }
                        let tag = if ks0.len() == ks.len() {
                            "D_PRINTA_AGGPROTO"
                        } else {
                            "D_PRINTA_AGGKEY"
                        };
                        return self.err(
                            a.span,
                            format!(
                                "[{tag}] printa( ): @{} has keys ({}), @{} has ({})",
                                k.name,
                                kinds_text(ks),
                                k0.name,
                                kinds_text(ks0)
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
                            // DTrace's tagged errors stand alone.
                            let msg = if msg.starts_with('[') {
                                msg
                            } else {
                                format!("printa(): {msg}")
                            };
                            return self.err(fmt_span(self.src, f.span, off), msg);
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
                    // A stack key prints only through %k, as DTrace's prototypes say.
                    let keys = self.t.aggs[aggs[0] as usize]
                        .keys
                        .clone()
                        .unwrap_or_default();
                    // Each plain conversion prints a key: one past the keys has nothing
                    // (known once a clause before this one assigned the aggregation).
                    let known = self.t.aggs[aggs[0] as usize].keys.is_some();
                    let plain: Vec<_> = format::convs(&pieces).filter(|c| !c.flags.agg).collect();
                    if let Some(c) = plain.get(keys.len()).filter(|_| known) {
                        let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                        return self.err(
                            fmt_span(self.src, f.span, c.start),
                            format!(
                                "[D_PRINTF_ARG_PROTO] printa( ): conversion #{} {conv} has no key to print: @{} has {} key(s)",
                                keys.len() + 1,
                                self.t.aggs[aggs[0] as usize].name,
                                keys.len()
                            ),
                        );
                    }
                    for (n, (c, k)) in plain.iter().zip(&keys).enumerate() {
                        if *k == KeyKind::Stack && c.conv != 'k' {
                            let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                            return self.err(
                                fmt_span(self.src, f.span, c.start),
                                format!(
                                    "[D_PRINTF_ARG_TYPE] printa( ) argument #2 is incompatible with conversion #{} prototype: conversion: {conv}, prototype: {}, argument: stack",
                                    n + 1,
                                    format::prototype(c.conv)
                                ),
                            );
                        }
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
                    return self.err(
                        span,
                        format!("[D_PROTO_LEN] {name}() takes 1 argument (an aggregation)"),
                    );
                }
                let agg = self.agg_ref(&args[0], name)?;
                let op = if name == "clear" {
                    Op::Clear
                } else {
                    Op::Denormalize
                };
                self.emit(op, 0, 0, 0, agg);
            }
            "trunc" | "normalize" => {
                let (agg, n) = match (name, args) {
                    ("trunc", [a]) => (self.agg_ref(a, name)?, None),
                    (_, [a, n]) => (self.agg_ref(a, name)?, Some(n)),
                    _ => {
                        return self.err(
                            span,
                            format!(
                                "[D_PROTO_LEN] {name}() takes an aggregation and {} count",
                                if name == "trunc" { "an optional" } else { "a" }
                            ),
                        )
                    }
                };
                let r = match n {
                    Some(n) => {
                        self.proto_arg(name, 1, n, Want::Scalar)?;
                        let (r, ty) = self.expr(n)?;
                        self.need_scalar(&ty, n.span, name, "D_PROTO_ARG")?;
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
    /// the options the consumer uses can change while tracing: the consumer reports the
    /// others, and unknown options and bad values, as runtime errors.
    pub(super) fn setopt(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        if let Some(m) = arity_error("setopt", args.len(), 1, 2) {
            return self.err(span, m);
        }
        for (i, a) in args.iter().enumerate() {
            self.proto_arg("setopt", i, a, Want::Str)?;
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
        // An unknown option, one that cannot change while tracing or a bad value is the
        // consumer's error when the record comes, as in DTrace.
        let name = text[0].clone();
        let value = text.get(1).cloned();
        let id = self
            .t
            .fmt_unique(format!("setopt({})", text.join(", ")).as_bytes());
        self.t.setopts.push((id, name, value));
        self.emit(Op::Printf, 0, 0, 0, id);
        Ok(())
    }

    pub(super) fn printf(&mut self, args: &[Expr], span: Span) -> GResult<()> {
        self.printf_op(args, span, Op::Printf)
    }

    /// `printf` or `system` (`op`): a format and its arguments, checked, as a record.
    pub(super) fn printf_op(&mut self, args: &[Expr], span: Span, op: Op) -> GResult<()> {
        let name = if op == Op::System { "system" } else { "printf" };
        self.printf_as(args, span, op, name)
    }

    /// [`Gen::printf_op`] for action `name`: `freopen` formats a path, a printf record of a
    /// format of its own (the empty one restores the output).
    pub(super) fn printf_as(
        &mut self,
        args: &[Expr],
        span: Span,
        op: Op,
        name: &str,
    ) -> GResult<()> {
        let freopen = name == "freopen";
        let Some(f) = args.first() else {
            return self.err(
                span,
                format!("[D_PROTO_LEN] {name}() requires a format string"),
            );
        };
        let text = match &f.kind {
            ExprKind::Str(s) => s.clone(),
            // A string that is not a constant breaks the format's rule; anything else is
            // the wrong type for the first argument, as DTrace's prototype says.
            _ => {
                let ty = self.type_of(f)?;
                let msg = if super::is_str_storage(&ty) {
                    format!("[D_PRINTF_ARG_FMT] {name}() format must be a string literal")
                } else {
                    format!(
                        "[D_PROTO_ARG] {name}( ) argument #1 must be a format string, not {}",
                        ty.name()
                    )
                };
                return self.err(f.span, msg);
            }
        };
        // The current or parent directory is no file to write to.
        if freopen && matches!(text.as_slice(), b"." | b"..") {
            return self.err(
                f.span,
                format!(
                    "[D_FREOPEN_INVALID] freopen( ) argument #1 cannot be \"{}\"",
                    String::from_utf8_lossy(&text)
                ),
            );
        }
        if text.is_empty() && !freopen {
            return self.err(
                f.span,
                "[D_PRINTF_FMT_EMPTY] printf( ) format string is empty",
            );
        }
        let pieces = match format::parse(&text, false) {
            Ok(p) => p,
            Err((off, msg)) => {
                // DTrace reads the arguments before the format: an argument's own error
                // comes first.
                for a in &args[1..] {
                    if !matches!(a.kind, ExprKind::AggRef(_)) {
                        self.type_of(a)?;
                    }
                }
                // DTrace's tagged errors stand alone.
                let msg = if msg.starts_with('[') {
                    msg
                } else {
                    format!("{name}(): {msg}")
                };
                return self.err(fmt_span(self.src, f.span, off), msg);
            }
        };
        let convs: Vec<&format::Conv> = format::convs(&pieces).collect();
        // What each argument is for, with its conversion's number: `*` widths and `.*`
        // precisions take one each before the value.
        let slots: Vec<(ArgKind, &format::Conv, usize, Role)> = convs
            .iter()
            .enumerate()
            .flat_map(|(n, c)| {
                let roles = [
                    c.star_width.then_some(Role::Width),
                    c.star_prec.then_some(Role::Prec),
                    Some(Role::Value),
                ];
                roles
                    .into_iter()
                    .flatten()
                    .map(move |r| (r.kind(c), *c, n + 1, r))
            })
            .collect();
        let given = &args[1..];
        if given.len() > act::MAX_TUPLE {
            return self.err(
                given[act::MAX_TUPLE].span,
                format!("{name}(): too many arguments (at most {})", act::MAX_TUPLE),
            );
        }
        if let Some(&(_, c, n, role)) = slots.get(given.len()) {
            // DTrace's words for the first conversion whose argument is missing.
            let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
            let (tag, what) = match role {
                Role::Width => ("D_PRINTF_DYN_PROTO", "\"*\""),
                Role::Prec => ("D_PRINTF_DYN_PROTO", "\".*\""),
                Role::Value => ("D_PRINTF_ARG_PROTO", "value"),
            };
            return self.err(
                f.span,
                format!("[{tag}] {name}( ) prototype mismatch: conversion #{n} ({conv}) is missing a corresponding {what} argument"),
            );
        }
        if given.len() > slots.len() {
            return self.err(
                given[slots.len()].span,
                format!(
                    "[D_PRINTF_ARG_EXTRA] {name}( ) prototype mismatch: only {} arguments required by this format string",
                    slots.len()
                ),
            );
        }
        let mut regs = Vec::new();
        for (i, (a, &(kind, c, n, role))) in given.iter().zip(&slots).enumerate() {
            let (r, mut ty) = self.value(a, "D_PRINTF_ARG_TYPE", "D_PRINTF_ARG_TYPE")?;
            let ok = match kind {
                ArgKind::Str => ty == Ty::Str,
                ArgKind::Stack => ty == Ty::Stack,
                ArgKind::Int | ArgKind::Uaddr => ty.is_scalar(),
                ArgKind::Float => ty.is_float(),
            };
            if !ok {
                let conv = String::from_utf8_lossy(&text[c.start..c.end]).into_owned();
                let (tag, proto) = if role == Role::Value {
                    ("D_PRINTF_ARG_TYPE", format::prototype(c.conv))
                } else {
                    ("D_PRINTF_DYN_TYPE", "int")
                };
                let msg = format!(
                    "[{tag}] {name}( ) argument #{} is incompatible with conversion #{n} prototype: conversion: {conv}, prototype: {proto}, argument: {}",
                    i + 2,
                    ty.name()
                );
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
        let id = if freopen {
            let id = self.t.fmt_unique(&text);
            self.t.freopens.push(id);
            id
        } else {
            self.t.fmt(&text)
        };
        self.emit(op, 0, 0, 0, id);
        Ok(())
    }
}

/// What a printf argument is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A `*` width.
    Width,
    /// A `.*` precision.
    Prec,
    /// The value converted.
    Value,
}

impl Role {
    /// The kind of argument the role takes in conversion `c`.
    fn kind(self, c: &format::Conv) -> ArgKind {
        match self {
            Role::Width | Role::Prec => ArgKind::Int,
            Role::Value => c.arg_kind(),
        }
    }
}

/// Span inside a string literal at format byte `off` (exact when the literal has no escape
/// before it, else the whole literal).
pub(super) fn fmt_span(src: &str, lit: Span, off: usize) -> Span {
    let text = &src[lit.start..(lit.start + lit.len).min(src.len())];
    let body = text.get(1..).unwrap_or("");
    if body.as_bytes().iter().take(off).any(|&c| c == b'\\') || off + 1 >= text.len() {
        return lit;
    }
    Span::new(lit.start + 1 + off, lit.start + 2 + off)
}
