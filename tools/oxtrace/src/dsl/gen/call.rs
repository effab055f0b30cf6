//! Calls in expressions: the built-in functions, handing subroutines to `subr.rs`,
//! `ustack.rs`, `mem.rs` and `xlate.rs`.

use super::super::error::Span;
use super::super::syntax::ast::*;
use super::super::types::{Ty, ACTIONS, I32, U64};
use super::{arity_error, mem, subr, ustack, GResult, Gen, Want};
use crate::providers::tracepoints::FieldKind;
use oxtrace_core::action::{Builtin, Op};
use oxtrace_core::agg::AggKind;

impl Gen<'_> {
    pub(super) fn call(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        let nargs = |g: &Self, n: usize| match arity_error(name, args.len(), n, n) {
            Some(m) => g.err(span, m),
            None => Ok(()),
        };
        if let Some(r) = self.xlate_call(name, args, span) {
            return r;
        }
        // A subroutine's argument has a value: not an action's, not an aggregation.
        if !ACTIONS.contains(&name) {
            let tag = if name == "stringof" {
                "D_STRINGOF_TYPE"
            } else {
                "D_PROTO_ARG"
            };
            for a in args {
                self.need_value(a, tag, tag)?;
            }
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
                let r = self.char_ptr_string(r, &ty, &args[0])?;
                if ty != Ty::Str && !subr::is_str_ptr(&ty) && !super::expr::is_null(&args[0]) {
                    return self.err(
                        args[0].span,
                        format!(
                            "[D_PROTO_ARG] strlen( ) argument #1 is incompatible with prototype: prototype: char *, argument: {}",
                            ty.name()
                        ),
                    );
                }
                self.emit(Op::Strlen, r, r, 0, 0);
                Ok((r, U64))
            }
            "strjoin" => {
                nargs(self, 2)?;
                let (a, ta) = self.expr(&args[0])?;
                let a = self.char_ptr_string(a, &ta, &args[0])?;
                let (b, tb) = self.expr(&args[1])?;
                let b = self.char_ptr_string(b, &tb, &args[1])?;
                for (i, (t, e)) in [(&ta, &args[0]), (&tb, &args[1])].into_iter().enumerate() {
                    if *t != Ty::Str && !subr::is_str_ptr(t) && !super::expr::is_null(e) {
                        return self.err(
                            e.span,
                            format!(
                                "[D_PROTO_ARG] strjoin( ) argument #{} is incompatible with prototype: prototype: char *, argument: {}",
                                i + 1,
                                t.name()
                            ),
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
                    [e] => {
                        self.proto_arg(name, 0, e, Want::Int)?;
                        self.const_upto(
                            e,
                            MAX_FRAMES.min(self.t.maxframes),
                            "[D_STACK_SIZE] stack()'s frame count",
                        )?
                    }
                    _ => {
                        return self.err(
                            span,
                            "[D_PROTO_LEN] stack() takes an optional frame count",
                        )
                    }
                };
                let rd = self.reg(span)?;
                self.emit(Op::Kstack, rd, 0, 0, n);
                Ok((rd, Ty::Stack))
            }
            "copyinstr" => {
                if args.is_empty() || args.len() > 2 {
                    return self.err(
                        span,
                        "[D_PROTO_LEN] copyinstr() takes an address and an optional size",
                    );
                }
                self.proto_arg(name, 0, &args[0], Want::Scalar)?;
                if let Some(e) = args.get(1) {
                    self.proto_arg(name, 1, e, Want::Int)?;
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
                    match super::super::passes::probe_spec::tracepoint_field(&field) {
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
                        let sou_ptr = super::super::passes::probe_spec::tracepoint_ctype(&field)
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
                format!("[D_CG_EXPR] {name}() is an aggregating function: use it as @name[keys] = {name}(...)"),
            ),
            n if is_unimplemented(n) => self.unimplemented_call(n, args, span),
            _ => self.err(span, format!("[D_FUNC_UNDEF] unknown function '{name}'")),
        }
    }

    /// A DTrace action oxtrace does not implement: checked against its prototype as DTrace
    /// checks it, so that a wrong call has DTrace's tag, then refused.
    fn unimplemented_call(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        let Some((params, why)) = unimplemented(name) else {
            return self.err(span, format!("[D_FUNC_UNDEF] unknown function '{name}'"));
        };
        if let Some(m) = arity_error(name, args.len(), params.len(), params.len()) {
            return self.err(span, m);
        }
        for (i, (a, want)) in args.iter().zip(params).enumerate() {
            if let Some(w) = want {
                self.proto_arg(name, i, a, *w)?;
            }
        }
        self.err(
            span,
            format!("{name}() is a destructive DTrace action oxtrace does not implement: it {why}"),
        )
    }

    // ---- statements --------------------------------------------------------------------
}

/// The prototype (`None`: any type, as DTrace's `void *` takes a string) of DTrace action
/// `name` if oxtrace does not implement it, and what the action would do.
fn unimplemented(name: &str) -> Option<(&'static [Option<Want>], &'static str)> {
    Some(match name {
        "breakpoint" => (&[], "would stop the kernel in a debugger"),
        "panic" => (&[], "would panic the kernel"),
        _ => return None,
    })
}

/// Whether `name` is a DTrace action oxtrace knows but does not implement.
pub(super) fn is_unimplemented(name: &str) -> bool {
    unimplemented(name).is_some()
}
