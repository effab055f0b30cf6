//! The compiler's user stack and symbol built-ins: `ustack()`, `ustackdepth`,
//! `stackdepth`, `ucaller`, `usym()`, `ufunc()`, `umod()`, `uaddr()`, `sym()`, `func()`,
//! `mod()`, and printf's `%A`. Each gives a value the kernel encodes
//! (`oxtrace_core::ustack`) and the tool prints symbolized; the symbol values are stack
//! typed, so they are keys and `trace()`/`printf("%k")` items like `stack()`.

use super::{const_eval, Expr, GResult, Gen, Span, Ty, Want, U64};
use oxtrace_core::action::Op;
use oxtrace_core::ustack::{Style, MAX_FRAMES};

/// Whether `name` is one of the integer built-ins here.
pub(super) fn is_ident(name: &str) -> bool {
    matches!(name, "ustackdepth" | "stackdepth" | "ucaller")
}

/// The style of symbol function `name`.
fn sym_style(name: &str) -> Option<Style> {
    Some(match name {
        "usym" => Style::Usym,
        "ufunc" => Style::Ufunc,
        "umod" => Style::Umod,
        "uaddr" => Style::Uaddr,
        "sym" => Style::Ksym,
        "func" => Style::Kfunc,
        "mod" => Style::Kmod,
        _ => return None,
    })
}

/// Whether `name` is one of the functions here.
pub(super) fn is_call(name: &str) -> bool {
    matches!(name, "ustack" | "jstack") || sym_style(name).is_some()
}

impl Gen<'_> {
    /// `ustackdepth`, `stackdepth` or `ucaller`; `None` for any other name.
    pub(super) fn stack_ident(&mut self, name: &str, span: Span) -> Option<GResult<(u8, Ty)>> {
        let op = match name {
            "ustackdepth" => Op::Ustackdepth,
            "stackdepth" => Op::Kstackdepth,
            "ucaller" => Op::Ucaller,
            _ => return None,
        };
        Some(self.reg(span).map(|rd| {
            self.emit(op, rd, 0, 0, 0);
            (rd, U64)
        }))
    }

    /// A call of `ustack()` or a symbol function.
    pub(super) fn stack_call(
        &mut self,
        name: &str,
        args: &[Expr],
        span: Span,
    ) -> GResult<(u8, Ty)> {
        // jstack() is ustack() with the frames a Java VM's ustack helper would name;
        // Linux has no such helpers, so it is ustack() itself, as in Oracle's DTrace.
        if matches!(name, "ustack" | "jstack") {
            if args.len() > 2 {
                return self.err(
                    span,
                    format!(
                        "[D_PROTO_LEN] {name}() takes an optional frame count and string space"
                    ),
                );
            }
            for (i, a) in args.iter().enumerate() {
                self.proto_arg(name, i, a, Want::Int)?;
            }
            let n = match args.first() {
                None => self.t.ustackframes,
                Some(e) => self.const_upto(
                    e,
                    MAX_FRAMES.min(self.t.maxframes),
                    &format!("[D_USTACK_FRAMES] {name}()'s frame count"),
                )?,
            };
            // The string space is where helpers put their frame names: checked, unused.
            if let Some(e) = args.get(1) {
                if const_eval(e).is_none_or(|v| v < 0) {
                    return self.err(
                        e.span,
                        format!("[D_USTACK_STRSIZE] {name}()'s string space must be a non-negative integer constant"),
                    );
                }
            }
            let rd = self.reg(span)?;
            self.emit(Op::Ustack, rd, 0, 0, n);
            return Ok((rd, Ty::Stack));
        }
        let style = sym_style(name).unwrap_or(Style::Uaddr);
        let [a] = args else {
            return self.err(span, format!("{name}() takes one address"));
        };
        let (r, ty) = self.expr(a)?;
        if !ty.is_scalar() {
            return self.err(
                a.span,
                format!("{name}() requires an address, not {}", ty.name()),
            );
        }
        self.emit(Op::Symval, r, r, 0, style as u32);
        Ok((r, Ty::Stack))
    }

    /// Register `r`, an integer, made a `uaddr()` value in place (printf's `%A`).
    pub(super) fn user_addr(&mut self, r: u8) -> Ty {
        self.emit(Op::Symval, r, r, 0, Style::Uaddr as u32);
        Ty::Stack
    }
}
