//! The stable providers (`proc`, `sched`, `io`; `providers/stable.rs`): a clause's probe
//! descriptions to groups of underlying probes, and the clause as each group compiles it.
//!
//! A clause that names stable probes is compiled once per (stable probe, hook) it names,
//! plus once for its other probes: every copy is enabled on disjoint probes, so each
//! firing still runs the clause once, in program order. In the copy of a stable probe's
//! hook, `probeprov`, `probemod`, `probefunc` and `probename` are the stable probe's names
//! (string constants: no run-time cost, no kernel change), `args[N]` is the hook's D
//! expression for it and the hook's condition comes before the clause's predicate.

use super::super::error::Span;
use super::super::syntax::ast::{BinOp, Clause, Expr, ExprKind, Stmt};
use super::super::syntax::{lexer, parser, prelude};
use super::super::ProbeSpec;
use crate::providers::stable::{self, Hook, Probe};

/// Probes of a clause compiled alike: a stable probe's hook, or (`None`) every other.
#[derive(Debug)]
pub(crate) struct Group {
    /// The stable probe and which of its hooks.
    pub(crate) stable: Option<(&'static Probe, usize)>,
    /// The underlying probes.
    pub(crate) specs: Vec<ProbeSpec>,
}

/// Whether description `text` names stable probes (its provider is `proc`, `sched`, `io`).
pub(crate) fn is_stable(text: &str) -> bool {
    let f: Vec<&str> = text.split(':').collect();
    f.len() == 4 && stable::is_provider(f[0])
}

/// The groups of stable description `text`: one per hook of each stable probe it matches,
/// each with the underlying probes `under` (the probe description pass) gives its hook.
pub(crate) fn expand(
    text: &str,
    under: impl Fn(&str) -> Result<Vec<ProbeSpec>, String>,
) -> Result<Vec<Group>, String> {
    let f: Vec<&str> = text.split(':').collect();
    let [prov, module, func, name] = f[..] else {
        return Err(format!("invalid probe description '{text}'"));
    };
    let probes = stable::matching(prov, module, func, name);
    if probes.is_empty() {
        let names: Vec<&str> = stable::PROBES
            .iter()
            .filter(|p| p.prov == prov)
            .map(|p| p.name)
            .collect();
        let near = crate::providers::syscalls::nearby(name, names.iter().copied());
        return Err(
            if !func.is_empty() && !crate::providers::fbt::glob_match(func, "") {
                format!("{prov} probes have no function: write {prov}:::NAME, not '{text}'")
            } else {
                format!(
                    "no {prov} probe matches '{text}'{} ({prov} probes: {})",
                    crate::providers::syscalls::did_you_mean(&near),
                    names.join(", ")
                )
            },
        );
    }
    let mut v = Vec::new();
    for p in probes {
        for (i, h) in p.hooks.iter().enumerate() {
            let mut specs = under(h.under)
                .map_err(|e| format!("{}:::{} (on {}): {e}", p.prov, p.name, h.under))?;
            for s in &mut specs {
                s.text = p.full();
            }
            v.push(Group {
                stable: Some((p, i)),
                specs,
            });
        }
    }
    Ok(v)
}

/// Clause `cl` as the hook `h` of stable probe `p` compiles it.
pub(crate) fn rewrite(cl: &Clause, p: &Probe, h: &Hook) -> Result<Clause, (Span, String)> {
    let mut out = cl.clone();
    for s in &mut out.body {
        stmt(s, p, h)?;
    }
    if let Some(e) = &mut out.pred {
        expr(e, p, h)?;
    }
    if let Some(w) = h.when {
        let when = parse(w, cl.span)?;
        out.pred = Some(match out.pred.take() {
            Some(e) => Expr {
                span: e.span,
                kind: ExprKind::Binary(BinOp::LAnd, Box::new(when), Box::new(e)),
            },
            None => when,
        });
    }
    Ok(out)
}

fn stmt(s: &mut Stmt, p: &Probe, h: &Hook) -> Result<(), (Span, String)> {
    match s {
        Stmt::Expr(e) => expr(e, p, h),
        Stmt::Agg { keys, call, .. } => keys
            .iter_mut()
            .chain(call.args.iter_mut())
            .try_for_each(|e| expr(e, p, h)),
        Stmt::If { cond, then, els } => {
            expr(cond, p, h)?;
            then.iter_mut()
                .chain(els.iter_mut())
                .try_for_each(|s| stmt(s, p, h))
        }
        Stmt::Decl(_) => Ok(()),
    }
}

/// Replaces in `e` what a stable probe defines.
fn expr(e: &mut Expr, p: &Probe, h: &Hook) -> Result<(), (Span, String)> {
    let span = e.span;
    let new = match &mut e.kind {
        ExprKind::Ident(n) => match n.as_str() {
            "probeprov" => Some(str_expr(p.prov, span)),
            "probemod" => Some(str_expr(stable::MODULE, span)),
            "probefunc" => Some(str_expr("", span)),
            "probename" => Some(str_expr(p.name, span)),
            a if a.starts_with("arg") && a[3..].parse::<u8>().is_ok_and(|i| i < 10) => {
                return Err((
                    span,
                    format!(
                        "{a} is not available on stable probe {}:::{}: use args[{}] ({})",
                        p.prov,
                        p.name,
                        &a[3..],
                        arg_list(p)
                    ),
                ));
            }
            _ => None,
        },
        ExprKind::Index(n, keys) if n == "args" => {
            let k = super::super::syntax::ast::args_index(keys).map_err(|m| (span, m))?;
            match h.args.get(k) {
                Some(text) => Some(parse(text, span)?),
                None => {
                    return Err((
                        span,
                        format!(
                            "[D_ARGS_IDX] {}:::{} has no args[{k}] ({})",
                            p.prov,
                            p.name,
                            arg_list(p)
                        ),
                    ))
                }
            }
        }
        ExprKind::Call(f, _) if f == "args->" => {
            return Err((
                span,
                format!(
                "args-> reads a tracepoint's record: not available on stable probe {}:::{} ({})",
                p.prov,
                p.name,
                arg_list(p)
            ),
            ))
        }
        _ => None,
    };
    if let Some(n) = new {
        *e = n;
        return Ok(());
    }
    e.try_for_each_child_mut(|x| expr(x, p, h))
}

/// `args[0]: psinfo_t *, ...` or `no arguments`.
fn arg_list(p: &Probe) -> String {
    if p.types.is_empty() {
        return "it has no arguments".into();
    }
    let v: Vec<String> = p
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("args[{i}]: {t}"))
        .collect();
    v.join(", ")
}

fn str_expr(s: &str, span: Span) -> Expr {
    Expr {
        kind: ExprKind::Str(s.as_bytes().to_vec()),
        span,
    }
}

/// The D expression `text` of the table, every part of it at `span` (where the clause
/// uses it: errors and aggregation key names point there).
fn parse(text: &str, span: Span) -> Result<Expr, (Span, String)> {
    let bad = |m: String| {
        (
            span,
            format!("internal error in stable probe text '{text}': {m}"),
        )
    };
    let toks = lexer::lex(text).map_err(|(_, m)| bad(m))?;
    let macros = parser::Macros::new();
    let mut ps = parser::Parser::new(toks, text, "<stable>", &macros);
    for ty in prelude::PRELUDE_TYPES {
        ps.add_typedef(ty);
    }
    let mut e = ps.expr().map_err(|m| bad(m.msg))?;
    respan(&mut e, span);
    Ok(e)
}

fn respan(e: &mut Expr, span: Span) {
    e.span = span;
    let Ok(()) = e.try_for_each_child_mut(|x| {
        respan(x, span);
        Ok::<(), std::convert::Infallible>(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::syntax::ast::ProbeText;
    use oxtrace_core::program::ProbeKind;

    /// Underlying probes without a kernel: one fbt entry named as the description.
    fn under(text: &str) -> Result<Vec<ProbeSpec>, String> {
        Ok(vec![ProbeSpec {
            kind: ProbeKind::FbtEntry,
            func: text.to_string(),
            period_ns: 0,
            text: text.to_string(),
            uprobes: Vec::new(),
            uskipped: 0,
            module: String::new(),
        }])
    }

    #[test]
    fn descriptions_expand_to_each_hook() {
        assert!(is_stable("proc:::create") && is_stable("io:::"));
        assert!(!is_stable("fbt::create:entry") && !is_stable("proc::create"));
        let g = expand("sched:::*-cpu", under).unwrap();
        let v: Vec<(&str, &str, &str)> = g
            .iter()
            .map(|g| {
                let (p, h) = g.stable.unwrap();
                (p.name, p.hooks[h].under, g.specs[0].text.as_str())
            })
            .collect();
        assert_eq!(
            v,
            [
                (
                    "off-cpu",
                    "tracepoint:sched:sched_switch",
                    "sched:vmlinux::off-cpu"
                ),
                (
                    "on-cpu",
                    "fbt::finish_task_switch*:entry",
                    "sched:vmlinux::on-cpu"
                ),
                (
                    "remain-cpu",
                    "fbt::pick_next_task_fair:return",
                    "sched:vmlinux::remain-cpu"
                ),
            ]
        );
        assert_eq!(expand("proc:vmlinux::", under).unwrap().len(), 12);
        let e = expand("io:::begin", under).unwrap_err();
        assert_eq!(
            e,
            "no io probe matches 'io:::begin' (io probes: done, start, wait-done, wait-start)"
        );
        let e = expand("io:::start", |_| Err("no such function".into())).unwrap_err();
        assert_eq!(
            e,
            "io:::start (on fbt::blk_mq_start_request:entry): no such function"
        );
    }

    #[test]
    fn the_clause_copy_has_the_names_the_args_and_the_condition() {
        let src = "proc:::signal-send /pid == 1/ { @[probename, args[2]] = count(); }";
        let toks = lexer::lex(src).unwrap();
        let m = parser::Macros::new();
        let mut ps = parser::Parser::new(toks, src, "t", &m);
        let items = ps.program().unwrap();
        let crate::dsl::syntax::ast::Item::Clause(cl) = &items[0] else {
            panic!("not a clause")
        };
        assert_eq!(
            cl.probes,
            [ProbeText {
                text: "proc:::signal-send".into(),
                span: cl.probes[0].span
            }]
        );
        let p = stable::find("proc:::signal-send").unwrap();
        let out = rewrite(cl, p, &p.hooks[0]).unwrap();
        let Stmt::Agg { keys, .. } = &out.body[0] else {
            panic!("not an aggregation")
        };
        assert_eq!(keys[0].kind, ExprKind::Str(b"signal-send".to_vec()));
        assert_eq!(keys[1].kind, ExprKind::Ident("__proc_signal_sig".into()));
        // The argument's expression is where args[2] was written.
        let Stmt::Agg { keys: orig, .. } = &cl.body[0] else {
            panic!("not an aggregation")
        };
        assert_eq!(keys[1].span, orig[1].span);
        assert_eq!(out.pred, cl.pred);
        // signal-handle's hook has a condition: it comes before the predicate.
        let h = stable::find("proc:::signal-handle").unwrap();
        let out = rewrite(cl, h, &h.hooks[0]).unwrap();
        let Some(ExprKind::Binary(BinOp::LAnd, when, pred)) = out.pred.map(|e| e.kind) else {
            panic!("no condition")
        };
        assert_eq!(
            when.kind,
            ExprKind::Ident("__proc_signal_handle_when".into())
        );
        assert_eq!(Some(*pred), cl.pred);
    }
}
