//! The compiler driver: options, then the passes (`passes/`) and the code generator of
//! every clause (`gen/`) in order, then the image, checked with the kernel's own verifier
//! before it is sent.

use super::error::{CompileError, GResult, Span};
use super::gen::{is_function, Gen};
use super::passes::options::{pragma, set_option, OptionAt};
use super::passes::{addr, check, declare, infer, partial, probe_spec::probe_spec, stable, Tables};
use super::syntax::ast::*;
use super::syntax::prelude;
use super::{AggInfo, Compiled, KeyKind, ProbeSpec, VarSummary};
use oxtrace_core::action::{self as act, KeyLayout, Op, Scope};
use oxtrace_core::limits;
use oxtrace_core::program::{self as prog, OptKey};

pub use super::syntax::ast::const_eval;
pub use super::types::Ty;
pub use crate::options::{parse_interval, parse_size, TOOL_OPTIONS};

/// Scratch bytes the kernel allows one clause (the compiler checks against the same bound).
pub const SCRATCH_LIMIT: usize = limits::MAX_SCRATCH;

/// Compile a parsed program.
pub fn compile_items(
    items: &[Item],
    src: &str,
    input: &str,
    xopts: &[(String, Option<String>)],
    checked: bool,
    opts: &super::CompileOptions,
) -> GResult<Compiled> {
    let mut c = Compiled::default();
    let target = opts.macros.get("target").and_then(|t| t.parse().ok());
    super::passes::user_spec::reset(target);
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
    let mut t = Tables::new(&c, opts, checked);
    // DTrace's user register names, the indices of `uregs[]`.
    for &(n, v) in super::gen::mem::UREG_NAMES {
        t.env.enums.insert(n.to_string(), v);
    }
    // The D library's constants (`EPERM`, `SIGKILL`, `DTRACEFLT_BADADDR`, ...).
    t.env.enums.extend(super::types::consts::dlib());
    let clauses: Vec<&Clause> = items
        .iter()
        .filter_map(|i| match i {
            Item::Clause(c) => Some(c),
            _ => None,
        })
        .collect();
    // Declarations take effect in text order, before any code: a clause may use a type
    // or variable declared after it, as in DTrace. The prelude's come first.
    let prelude = prelude::prelude_items(t.env.btf.btf.is_some())?;
    let sources = [
        (&prelude[..], prelude::PRELUDE, prelude::PRELUDE_NAME, true),
        (items, src, input, false),
    ];
    for (it, src, input, pre) in sources
        .iter()
        .flat_map(|(v, s, i, p)| v.iter().map(move |it| (it, *s, *i, *p)))
    {
        // The functions D knows are code generation's: a declaration taking one's name is
        // refused here, as DTrace refuses it (`declare` knows the other names).
        if let Some((name, at)) = global_name(it).filter(|(n, _)| !pre && is_function(n)) {
            return Err(CompileError::at(
                src,
                input,
                at,
                format!("[D_DECL_IDRED] identifier redeclared: {name}"),
            ));
        }
        let r = declare::item(&mut t, it, pre);
        r.map_err(|(span, m)| CompileError::at(src, input, span, m))?;
        match it {
            Item::Translator(_) => Gen::new(&mut t, src, input).check_last_xlator()?,
            Item::Inline(_, name, ..) if !pre => Gen::new(&mut t, src, input).check_inline(name)?,
            _ => {}
        }
    }
    // A wrong declaration is reported before a missing clause, as DTrace does.
    if clauses.is_empty() {
        return Err(CompileError::at(
            src,
            input,
            Span::new(src.len(), src.len()),
            if items.is_empty() {
                "[D_EMPTY] empty D program translation unit"
            } else {
                "the program has no probe clause"
            },
        ));
    }
    declare::assigned(&mut t, &clauses);
    addr::memvars(&mut t, &clauses);
    // Variable types: learned by rounds of code generation until they are stable.
    let (mut t, (probes, clause_descs, code)) = infer::learn_types(&t, |t| {
        c.clause_spans.clear();
        gen_clauses(t, &clauses, src, input, &mut c)
    })?;
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
                string: false,
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
            string: v.string,
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
    // Clause-local variables kept in memory take scratch memory of their own, beyond the
    // `scratchsize` the program's `alloca()`s may take.
    let mem: u64 = t
        .memvars
        .iter()
        .filter_map(|k| t.vty.get(k))
        .map(|ty| (t.env.size(ty, t.strsize as u64) + 7) & !7)
        .sum();
    if mem > 0 {
        c.options.scratchsize = (c.options.scratchsize + mem).min(limits::MAX_SCRATCHSIZE as u64);
        if !c.set_options.contains(&OptKey::Scratchsize) {
            c.set_options.push(OptKey::Scratchsize);
        }
    }
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
        check::load_check(&image, &c, &t, src, input)?;
    }
    c.probes = probes;
    c.formats = t.fmt_text.clone();
    c.printa_aggs = t.printa_groups.iter().cloned().collect();
    c.prints = t.prints.iter().cloned().collect();
    c.freopens = t.freopens.iter().copied().collect();
    c.setopts = t
        .setopts
        .iter()
        .map(|(id, n, v)| (*id, (n.clone(), v.clone())))
        .collect();
    c.aggs = t
        .aggs
        .iter()
        .map(|a| AggInfo {
            name: a.name.clone(),
            func: a.func,
            keys: a.keys.clone().unwrap_or_default(),
            key_names: a.key_names.clone(),
            key_u64: a.key_u64.clone(),
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

type ClauseOut = (Vec<ProbeSpec>, Vec<prog::ClauseDesc>, Vec<u64>);

/// Generate the predicate and actions of every clause.
fn gen_clauses(
    t: &mut Tables,
    clauses: &[&Clause],
    src: &str,
    input: &str,
    c: &mut Compiled,
) -> GResult<ClauseOut> {
    let mut probes = Vec::new();
    let mut clause_descs = Vec::new();
    let mut code = Vec::new();
    // After an error the other clauses are still compiled: what they teach about variable
    // types may make the error go away in the next pass.
    let mut first_err = None;
    for cl in clauses {
        if let Err(e) = gen_clause(
            t,
            cl,
            src,
            input,
            c,
            &mut probes,
            &mut clause_descs,
            &mut code,
        ) {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok((probes, clause_descs, code))
}

/// Generate one clause, appending to the program's probes, clauses and code.
#[allow(clippy::too_many_arguments)]
fn gen_clause(
    t: &mut Tables,
    cl: &Clause,
    src: &str,
    input: &str,
    c: &mut Compiled,
    probes: &mut Vec<ProbeSpec>,
    clause_descs: &mut Vec<prog::ClauseDesc>,
    code: &mut Vec<u64>,
) -> GResult<()> {
    // A clause naming stable probes is compiled once per stable probe's hook as well
    // (`passes/stable.rs`); the copies are enabled on disjoint probes.
    let mut plain = Vec::new();
    let mut groups = Vec::new();
    for p in &cl.probes {
        let at = |m| CompileError::at(src, input, p.span, m);
        // `write:entry` and `*:::entry` stand for the full descriptions that match.
        let texts = match partial::resolve(&p.text) {
            Some(r) => r.map_err(at)?,
            None => vec![p.text.clone()],
        };
        for text in &texts {
            if !stable::is_stable(text) {
                plain.extend(probe_spec(text).map_err(at)?);
                continue;
            }
            if t.env.btf.btf.is_none() {
                return Err(at(format!(
                    "{text}: the stable providers translate the kernel's structs, which needs the kernel's BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)"
                )));
            }
            for g in stable::expand(text, probe_spec).map_err(at)? {
                match groups
                    .iter_mut()
                    .find(|(s, _): &&mut (_, Vec<_>)| same(*s, g.stable))
                {
                    Some((_, v)) => v.extend(g.specs),
                    None => groups.push((g.stable, g.specs)),
                }
            }
        }
    }
    if !plain.is_empty() {
        gen_group(t, cl, src, input, c, plain, probes, clause_descs, code)?;
    }
    for (which, specs) in groups {
        let Some((p, h)) = which else { continue };
        let cl = stable::rewrite(cl, p, &p.hooks[h])
            .map_err(|(span, m)| CompileError::at(src, input, span, m))?;
        gen_group(t, &cl, src, input, c, specs, probes, clause_descs, code)?;
    }
    Ok(())
}

/// Whether two groups are the same stable probe's same hook.
fn same(
    a: Option<(&'static crate::providers::stable::Probe, usize)>,
    b: Option<(&'static crate::providers::stable::Probe, usize)>,
) -> bool {
    match (a, b) {
        (Some((p, i)), Some((q, j))) => std::ptr::eq(p, q) && i == j,
        (None, None) => true,
        _ => false,
    }
}

/// Generate clause `cl` enabled on `specs`, appending to the program's probes, clauses and
/// code.
#[allow(clippy::too_many_arguments)]
fn gen_group(
    t: &mut Tables,
    cl: &Clause,
    src: &str,
    input: &str,
    c: &mut Compiled,
    specs: Vec<ProbeSpec>,
    probes: &mut Vec<ProbeSpec>,
    clause_descs: &mut Vec<prog::ClauseDesc>,
    code: &mut Vec<u64>,
) -> GResult<()> {
    let first = probes.len();
    probes.extend(specs);
    super::passes::probe_spec::set_clause_probes(&probes[first..]);
    t.env.btf.clause = probes[first..]
        .iter()
        .map(|p| (p.kind, p.func.clone()))
        .collect();
    let pred_start = code.len() as u32;
    let pred_len = match &cl.pred {
        Some(e) => {
            let mut g = Gen::new(t, src, input);
            let r = g.condition(e, "[D_PRED_SCALAR] predicate result")?;
            g.emit(Op::Ret, 0, r, 0, 0);
            let n = g.code.len();
            code.extend(g.code);
            n as u32
        }
        None => 0,
    };
    let act_start = code.len() as u32;
    let mut g = Gen::new(t, src, input);
    if cl.body.iter().all(|s| matches!(s, Stmt::Decl(_))) {
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
    Ok(())
}

/// The global name `it` declares, and where: an inline's or a global variable's.
fn global_name(it: &Item) -> Option<(&str, Span)> {
    match it {
        Item::Inline(_, name, _, at) => Some((name, *at)),
        Item::Decl(d) if d.class == DeclClass::Global => Some((&d.name, d.span)),
        _ => None,
    }
}
