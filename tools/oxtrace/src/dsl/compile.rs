//! The compiler driver: options, probes, the pre-pass and the code generator of every clause,
//! then the image, checked with the kernel's own verifier before it is sent.

use super::ast::*;
use super::error::{CompileError, Span};
use super::gen::{Agg, GResult, Gen, Tables, Var};
use super::options::{pragma, set_option, size_text, OptionAt};
use super::probe_spec::probe_spec;
use super::types::builtin;
use super::{AggInfo, Compiled, KeyKind, ProbeSpec, VarSummary};
use oxtrace_core::abi;
use oxtrace_core::action::{self as act, KeyLayout, Op, Scope};
use oxtrace_core::agg::AggKind;
use oxtrace_core::diag::{ImageMsg, ReasonMsg, Refusal};
use oxtrace_core::limits;
use oxtrace_core::program::{self as prog, OptKey};
use std::collections::HashMap;

pub use super::gen::const_eval;
pub use super::options::{parse_interval, parse_size, TOOL_OPTIONS};
pub use super::types::Ty;

/// Scratch bytes the kernel allows one clause (the compiler checks against the same bound).
pub const SCRATCH_LIMIT: usize = limits::MAX_SCRATCH;

/// Compile a parsed program.
pub fn compile_items(
    items: &[Item],
    src: &str,
    input: &str,
    xopts: &[(String, Option<String>)],
    checked: bool,
) -> GResult<Compiled> {
    let mut c = Compiled::default();
    for (name, value) in xopts {
        let text = match value {
            Some(v) => format!("{name}={v}"),
            None => name.clone(),
        };
        let at = OptionAt::X(text.clone());
        if let Err(m) = set_option(&mut c, name, value.as_deref(), checked, at) {
            return Err(CompileError::at(&text, "-x", Span::new(0, text.len()), m));
        }
    }
    for it in items {
        if let Item::Pragma(text, span) = it {
            pragma(&mut c, src, input, text, *span, checked)?;
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
        checked,
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
        super::probe_spec::set_clause_probes(&probes[first..]);
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
            .filter(|(_, k)| matches!(**k, KeyKind::Str | KeyKind::Stack))
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
    // LOAD will run the kernel's checks on the image; run them here first so that errors
    // point at the source and nothing reaches the device that LOAD would refuse.
    if checked {
        let refused = match prog::Image::parse(&image) {
            Ok(img) => limits::check_load(&img, |_| Ok::<(), Refusal>(())).err(),
            Err(e) => Some(Refusal::image(&e)),
        };
        if let Some(r) = refused {
            return Err(refusal_error(&c, &t, src, input, &r));
        }
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
            key_names: a.key_names.clone(),
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
                    func: AggKind::Count,
                    params: [0; 4],
                    keys: None,
                    key_names: Vec::new(),
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

/// The compile error for a refusal of the kernel's LOAD check, at the clause, aggregation or
/// option it is about.
fn refusal_error(c: &Compiled, t: &Tables, src: &str, input: &str, r: &Refusal) -> CompileError {
    let at = |span: Span, msg: String| CompileError::at(src, input, span, msg);
    let option_at = |key: OptKey, msg: String| match c.option_at.iter().find(|(k, _)| *k == key) {
        Some((_, OptionAt::X(text))) => CompileError::at(text, "-x", Span::new(0, text.len()), msg),
        Some((_, OptionAt::Pragma(span))) => at(*span, msg),
        None => at(Span::new(0, 0), msg),
    };
    match r.kind {
        abi::LOADERR_VERIFY => {
            let span = c
                .clause_spans
                .get(r.index as usize)
                .map_or(Span::new(0, 0), |s| s.0);
            let reason = ReasonMsg {
                code: r.code,
                arg: r.arg,
            };
            if r.code == oxtrace_core::diag::reason_code(&act::Reason::ScratchTooLarge).0 {
                let msg = format!(
                    "clause needs more than {} bytes of scratch space (lower strsize or use fewer strings)",
                    limits::MAX_SCRATCH
                );
                if c.option_at.iter().any(|(k, _)| *k == OptKey::Strsize) {
                    return option_at(OptKey::Strsize, msg);
                }
                return at(span, msg);
            }
            at(
                span,
                format!("internal error: the verifier rejects this clause: {reason}"),
            )
        }
        _ => {
            let words = ImageMsg {
                code: r.code,
                arg: r.arg,
            }
            .to_string();
            if r.code == Refusal::dynvarsize(0).code || r.code == Refusal::dynvar_chunk(0).code {
                let have = size_text(c.options.dynvarsize);
                return option_at(
                    OptKey::Dynvarsize,
                    format!("{words} (dynvarsize is {have})"),
                );
            }
            if r.code & 0xffff == ImageMsg::AGG_PARAMS {
                if let Some(a) = t.aggs.get(r.arg as usize) {
                    return at(a.first, format!("@{}: {words}", a.name));
                }
            }
            at(
                Span::new(0, 0),
                format!("internal error: invalid image: {words}"),
            )
        }
    }
}
