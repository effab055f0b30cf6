//! The compiler's user stack and symbol built-ins: `ustack()`, `ustackdepth`,
//! `stackdepth`, `ucaller`, `usym()`, `ufunc()`, `umod()`, `uaddr()`, `sym()`, `func()`,
//! `mod()`, and printf's `%A`. Each gives a value the kernel encodes
//! (`oxtrace_core::ustack`) and the tool prints symbolized; the symbol values are stack
//! typed, so they are keys and `trace()`/`printf("%k")` items like `stack()`.

use super::{Expr, GResult, Gen, Span, Ty, U64};
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
    name == "ustack" || sym_style(name).is_some()
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
        if name == "ustack" {
            let n = match args {
                [] => self.t.ustackframes,
                [e] => self.const_upto(
                    e,
                    MAX_FRAMES.min(self.t.maxframes),
                    "ustack()'s frame count",
                )?,
                [_, e, ..] => {
                    return self.err(
                        e.span,
                        "ustack() takes an optional frame count (no string space)",
                    )
                }
            };
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
