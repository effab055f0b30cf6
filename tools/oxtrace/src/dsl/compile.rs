//! The compiler driver: options, probes, the pre-pass and the code generator of every clause,
//! then the image, checked with the kernel's own verifier before it is sent.

use super::error::GResult;
use super::error::{CompileError, Span};
use super::gen::Gen;
use super::pragma::{pragma, set_option, OptionAt};
use super::passes::{self, probe_spec::probe_spec};
use super::passes::{Agg, Tables, Var};
use super::syntax::ast::*;
use super::syntax::prelude;
use super::types::{builtin, resolve_type, Member, SouDef};
use super::{AggInfo, Compiled, KeyKind, ProbeSpec, VarSummary};
use crate::options::size_text;
use oxtrace_core::abi;
use oxtrace_core::action::{self as act, KeyLayout, Op, Scope};
use oxtrace_core::agg::AggKind;
use oxtrace_core::diag::{ImageMsg, ReasonMsg, Refusal};
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
        let r = match it {
            Item::Sou {
                name,
                union,
                members,
                span,
            } => declare_sou(&mut t, name, *union, members, *span),
            Item::Enum { name, items } => declare_enum(&mut t, name, items),
            Item::Typedef(tn, name, span) => declare_typedef(&mut t, tn, name, *span),
            Item::Inline(tn, name, e, span) => {
                if pre {
                    t.xlate.prelude_inline(name);
                }
                declare_inline(&mut t, tn, name, e, *span)
            }
            Item::Translator(tr) => passes::xlate::declare(&mut t, tr, pre),
            Item::Decl(d) => declare_var(&mut t, d),
            Item::Clause(cl) => {
                let mut r = Ok(());
                walk_stmts(&cl.body, &mut |s| {
                    if let (Stmt::Decl(d), Ok(())) = (s, &r) {
                        r = declare_var(&mut t, d);
                    }
                });
                r
            }
            Item::Pragma(..) => Ok(()),
        };
        r.map_err(|(span, m)| CompileError::at(src, input, span, m))?;
        if let Item::Translator(_) = it {
            Gen::new(&mut t, src, input).check_last_xlator()?;
        }
    }
    // Pre-pass: every variable that is assigned anywhere exists, so that a return clause may
    // test a variable its entry clause (later in the text) sets; aggregations likewise.
    for cl in &clauses {
        walk_stmts(&cl.body, &mut |s| declare_stmt(&mut t, s));
        if let Some(p) = &cl.pred {
            declare_expr(&mut t, p);
        }
    }
    // Types of variables fixed by a later clause's assignment than their first read are
    // learned by a pass and used by the next (at most a few passes: each adds types).
    let base = t.clone();
    let mut seeds = base.vty.clone();
    let mut pass = 0;
    let (probes, clause_descs, code) = loop {
        pass += 1;
        t = base.clone();
        t.vty = seeds.clone();
        let r = gen_clauses(&mut t, &clauses, src, input, &mut c);
        let learned = t.vty != seeds;
        match r {
            Ok(out) if !(learned && t.assumed) || pass >= 4 => break out,
            Err(e) if !learned || pass >= 4 => return Err(e),
            _ => {
                seeds = t.vty.clone();
                c.clause_spans.clear();
            }
        }
    };
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
    c.printa_aggs = t.printa_groups.iter().cloned().collect();
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
    let first = probes.len();
    for p in &cl.probes {
        let specs = probe_spec(&p.text).map_err(|m| CompileError::at(src, input, p.span, m))?;
        probes.extend(specs);
    }
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

/// Call `f` on every statement, into `if` branches.
fn walk_stmts(body: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for s in body {
        f(s);
        if let Stmt::If { then, els, .. } = s {
            walk_stmts(then, f);
            walk_stmts(els, f);
        }
    }
}

type DResult = Result<(), (Span, String)>;

fn class_text(class: DeclClass, name: &str) -> String {
    match class {
        DeclClass::Global => name.to_string(),
        DeclClass::Thread => format!("self->{name}"),
        DeclClass::Local => format!("this->{name}"),
    }
}

/// Whether `name` already names something other than a variable.
fn taken(t: &Tables, name: &str) -> bool {
    builtin(name).is_some()
        || t.env.enums.contains_key(name)
        || t.inlines.contains_key(name)
        || super::types::ACTIONS.contains(&name)
}

/// Largest struct, union or array type (bytes): keeps every size and offset far from
/// overflowing.
const MAX_TYPE_SIZE: u64 = 1 << 32;

fn declare_var(t: &mut Tables, d: &Decl) -> DResult {
    t.env.btf_prepare(&d.ty);
    let ty = resolve_type(&t.env, &d.ty).map_err(|m| (d.span, m))?;
    let what = class_text(d.class, &d.name);
    if t.env.size(&ty, t.strsize as u64) > MAX_TYPE_SIZE {
        return Err((
            d.span,
            format!("[D_DECL_ARRBIG] {what} is too big (more than {MAX_TYPE_SIZE} bytes)"),
        ));
    }
    if ty == Ty::Void {
        return Err((
            d.span,
            format!("[D_DECL_VOIDOBJ] cannot have void object: {what}"),
        ));
    }
    if let Ty::Sou(i, n) = &ty {
        if !t.env.sous[*i].complete {
            return Err((
                d.span,
                format!("[D_DECL_INCOMPLETE] declaration of {what} uses incomplete type {n}"),
            ));
        }
    }
    if d.class == DeclClass::Global && taken(t, &d.name) {
        return Err((
            d.span,
            format!("[D_DECL_IDRED] identifier redeclared: {}", d.name),
        ));
    }
    let keys = match &d.keys {
        None => None,
        Some(ks) => {
            if d.class == DeclClass::Local {
                return Err((
                    d.span,
                    format!("[D_DECL_LOCASSC] local variables may not be used as associative arrays: {what}"),
                ));
            }
            let mut v = Vec::new();
            for k in ks {
                let kt = resolve_type(&t.env, k).map_err(|m| (d.span, m))?;
                if !matches!(kt, Ty::Int { .. } | Ty::Str | Ty::Ptr(_)) {
                    return Err((
                        d.span,
                        format!("[D_KEY_TYPE] invalid key type {} of {what}", kt.name()),
                    ));
                }
                v.push(kt);
            }
            if v.len() > act::MAX_KEYS {
                return Err((d.span, format!("too many keys (at most {})", act::MAX_KEYS)));
            }
            Some(v)
        }
    };
    let key = (d.class, d.name.clone());
    if let Some(prev) = t.vty.get(&key) {
        if *prev != ty || t.decl_keys.get(&key) != keys.as_ref() {
            return Err((
                d.span,
                format!(
                    "[D_DECL_IDRED] identifier redeclared: {what} (was {}, now {})",
                    prev.name(),
                    ty.name()
                ),
            ));
        }
    }
    t.vty.insert(key.clone(), ty.clone());
    t.declared.insert(key.clone(), d.span);
    // Fixed arrays of globals and thread-locals live in the dynamic memory, keyed by
    // their indices (and the thread); declared associative arrays have their keys now.
    let mut dims = Vec::new();
    let mut elem = &ty;
    while let Ty::Array(e, _) = elem {
        dims.push(KeyKind::Int);
        elem = e;
    }
    let kinds: Option<Vec<KeyKind>> = match (&keys, dims.is_empty()) {
        (Some(ks), _) => Some(ks.iter().map(|k| k.key_kind()).collect()),
        (None, false) => Some(dims),
        (None, true) => None,
    };
    if let Some(k) = &kinds {
        t.decl_keys.insert(key, keys.unwrap_or_default());
        if d.class == DeclClass::Local {
            return Ok(());
        }
        if matches!(elem, Ty::Sou(..)) {
            // Each member is its own array, created at its first use.
            return Ok(());
        }
        let (vname, mut layout) = match d.class {
            DeclClass::Thread => (format!("self->{}", d.name), vec![KeyKind::Int]),
            _ => (d.name.clone(), vec![]),
        };
        layout.extend(k.iter().copied());
        let id = assoc_var(t, &vname);
        t.vars[id as usize].keys = Some(layout);
    }
    Ok(())
}

fn assoc_var(t: &mut Tables, name: &str) -> u32 {
    let key = (Scope::Assoc as u32, name.to_string());
    if let Some(&i) = t.var_idx.get(&key) {
        return i;
    }
    let i = t.vars.len() as u32;
    t.vars.push(Var {
        name: name.to_string(),
        scope: Scope::Assoc,
        keys: None,
        string: false,
    });
    t.var_idx.insert(key, i);
    i
}

fn declare_sou(
    t: &mut Tables,
    name: &str,
    union: bool,
    members: &[MemberDecl],
    span: Span,
) -> DResult {
    let kw = if union { "union" } else { "struct" };
    let idx = match t.env.sou(name, union) {
        Some(i) if t.env.sous[i].complete => {
            return Err((
                span,
                format!("[D_DECL_TYPERED] type redeclared: {kw} {name}"),
            ))
        }
        Some(i) => i,
        None => {
            t.env.sous.push(SouDef {
                name: format!("{kw} {name}"),
                members: vec![],
                size: 0,
                align: 1,
                complete: false,
            });
            t.env.sous.len() - 1
        }
    };
    let mut out: Vec<Member> = Vec::new();
    let (mut size, mut align) = (0u64, 1u64);
    // Bits used of the struct so far, for bit-fields (C's x86-64 layout: a bit-field goes in
    // the storage unit of its type where it starts, or the next one if it would straddle).
    let mut bitpos = 0u64;
    for m in members {
        t.env.btf_prepare(&m.ty);
        let ty = resolve_type(&t.env, &m.ty).map_err(|e| (m.span, e))?;
        if let Some(w) = &m.bits {
            let unit = match ty {
                Ty::Int { size, .. } => size as u64 * 8,
                _ => {
                    return Err((
                        m.span,
                        format!(
                            "[D_DECL_BFTYPE] bit-field {} must be of an integer type",
                            m.name
                        ),
                    ))
                }
            };
            let width = match const_eval_env(t, w) {
                Some(v) if v >= 0 && (v as u64) <= unit => v as u64,
                Some(_) => {
                    return Err((
                        w.span,
                        format!(
                            "[D_DECL_BFSIZE] bit-field {} is wider than its type",
                            m.name
                        ),
                    ))
                }
                None => {
                    return Err((
                        w.span,
                        format!(
                            "[D_DECL_BFCONST] bit-field {} needs a constant width",
                            m.name
                        ),
                    ))
                }
            };
            if union {
                bitpos = 0;
            }
            if width == 0 || bitpos / unit != (bitpos + width - 1) / unit {
                bitpos = bitpos.div_ceil(unit) * unit;
            }
            if width > 0 {
                let off = bitpos / unit * (unit / 8);
                out.push(Member {
                    name: m.name.clone(),
                    ty: ty.clone(),
                    off,
                    bits: Some(((bitpos % unit) as u8, width as u8)),
                });
            }
            bitpos += width;
            let end = bitpos.div_ceil(8);
            size = if union { size.max(end) } else { end };
            align = align.max(unit / 8);
            continue;
        }
        if !union {
            size = size.max(bitpos.div_ceil(8));
        }
        let mut inner = &ty;
        while let Ty::Array(e, _) = inner {
            inner = e;
        }
        match inner {
            Ty::Void => {
                return Err((
                    m.span,
                    format!("[D_DECL_VOIDOBJ] cannot have void object: {}", m.name),
                ))
            }
            Ty::Sou(i, n) if !t.env.sous[*i].complete => {
                return Err((
                    m.span,
                    format!(
                        "[D_DECL_INCOMPLETE] member {} uses incomplete type {n}",
                        m.name
                    ),
                ))
            }
            _ => {}
        }
        if out.iter().any(|x| x.name == m.name) {
            return Err((
                m.span,
                format!("[D_DECL_IDRED] member redeclared: {}", m.name),
            ));
        }
        let a = t.env.align(&ty);
        let sz = t.env.size(&ty, t.strsize as u64);
        let off = if union { 0 } else { size.div_ceil(a) * a };
        size = if union {
            size.max(sz)
        } else {
            off.saturating_add(sz)
        };
        if size > MAX_TYPE_SIZE {
            return Err((
                m.span,
                format!("[D_DECL_ARRBIG] {kw} {name} is too big (more than {MAX_TYPE_SIZE} bytes)"),
            ));
        }
        align = align.max(a);
        out.push(Member {
            name: m.name.clone(),
            ty,
            off,
            bits: None,
        });
        if !union {
            bitpos = size * 8;
        }
    }
    let def = &mut t.env.sous[idx];
    def.members = out;
    def.size = size.div_ceil(align) * align;
    def.align = align;
    def.complete = true;
    Ok(())
}

fn declare_enum(t: &mut Tables, name: &str, items: &[(String, Option<Expr>, Span)]) -> DResult {
    if !name.is_empty() {
        t.env.enum_tags.insert(name.to_string());
    }
    let mut next: i64 = 0;
    for (n, e, span) in items {
        let v = match e {
            Some(e) => match const_eval_env(t, e) {
                Some(v) => v,
                None => {
                    return Err((
                        e.span,
                        format!("[D_DECL_ENCONST] enumerator '{n}' must be assigned an integral constant expression"),
                    ))
                }
            },
            None => next,
        };
        if v > i32::MAX as i64 || v < i32::MIN as i64 {
            return Err((
                *span,
                format!(
                    "[D_DECL_ENOFLOW] enumerator '{n}' overflows INT_MAX ({})",
                    i32::MAX
                ),
            ));
        }
        if taken(t, n) || t.vty.contains_key(&(DeclClass::Global, n.clone())) {
            return Err((*span, format!("[D_DECL_IDRED] identifier redeclared: {n}")));
        }
        t.env.enums.insert(n.clone(), v);
        next = v + 1;
    }
    Ok(())
}

/// A constant expression that may name enumerators.
fn const_eval_env(t: &Tables, e: &Expr) -> Option<i64> {
    if let ExprKind::Ident(n) = &e.kind {
        return t.env.enums.get(n).copied();
    }
    if let ExprKind::Binary(op, a, b) = &e.kind {
        let (a, b) = (const_eval_env(t, a)?, const_eval_env(t, b)?);
        let x = Expr {
            kind: ExprKind::Binary(
                *op,
                Box::new(Expr {
                    kind: ExprKind::Int(a as u64, false),
                    span: e.span,
                }),
                Box::new(Expr {
                    kind: ExprKind::Int(b as u64, false),
                    span: e.span,
                }),
            ),
            span: e.span,
        };
        return const_eval(&x);
    }
    const_eval(e)
}

fn declare_typedef(t: &mut Tables, tn: &TypeName, name: &str, span: Span) -> DResult {
    t.env.btf_prepare(tn);
    let ty = resolve_type(&t.env, tn).map_err(|m| (span, m))?;
    if let Some(prev) = t.env.typedefs.get(name) {
        if *prev != ty {
            return Err((
                span,
                format!("[D_DECL_IDRED] identifier redeclared: {name}"),
            ));
        }
    }
    t.env.typedefs.insert(name.to_string(), ty);
    Ok(())
}

fn declare_inline(t: &mut Tables, tn: &TypeName, name: &str, e: &Expr, span: Span) -> DResult {
    t.env.btf_prepare(tn);
    let ty = resolve_type(&t.env, tn).map_err(|m| (span, m))?;
    if taken(t, name) || t.vty.contains_key(&(DeclClass::Global, name.to_string())) {
        return Err((
            span,
            format!("[D_DECL_IDRED] identifier redeclared: {name}"),
        ));
    }
    if matches!(ty, Ty::Void | Ty::Sou(..) | Ty::Array(..)) {
        return Err((
            span,
            format!("[D_DECL_DYNOBJ] inline {name} must be of scalar or string type"),
        ));
    }
    // An inline of a constant is a constant (enum-like); others are expanded at each use.
    let e = match const_eval_env(t, e) {
        Some(v) if ty.is_int() => Expr {
            kind: ExprKind::Int(v as u64, false),
            span: e.span,
        },
        _ => e.clone(),
    };
    t.inlines.insert(name.to_string(), (ty, e));
    Ok(())
}

/// The variable an assignment or `++` modifies: storage class and base name.
fn target_root(e: &Expr) -> Option<(DeclClass, &str)> {
    match &e.kind {
        ExprKind::Ident(n) | ExprKind::Index(n, _) => Some((DeclClass::Global, n)),
        ExprKind::SelfVar(n) => Some((DeclClass::Thread, n)),
        ExprKind::This(n) => Some((DeclClass::Local, n)),
        ExprKind::Member(b, _) | ExprKind::Subscript(b, _) => target_root(b),
        _ => None,
    }
}

fn declare_stmt(t: &mut Tables, s: &Stmt) {
    match s {
        Stmt::If { cond, .. } => declare_expr(t, cond),
        Stmt::Decl(_) => {}
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

fn declare(t: &mut Tables, scope: Scope, name: &str) {
    let key = (scope as u32, name.to_string());
    if !t.var_idx.contains_key(&key) {
        let i = t.vars.len() as u32;
        t.vars.push(Var {
            name: name.to_string(),
            scope,
            keys: None,
            string: false,
        });
        t.var_idx.insert(key, i);
    }
}

fn declare_expr(t: &mut Tables, e: &Expr) {
    let target = match &e.kind {
        ExprKind::Assign(_, lhs, _) => Some(&**lhs),
        ExprKind::IncDec { target, .. } => Some(&**target),
        _ => None,
    };
    if let Some(lhs) = target {
        if let Some((class, n)) = target_root(lhs) {
            t.assigned.insert((class, n.to_string()));
        }
        // Plain variables exist from here on (their ids are stable across clauses); others
        // (members, elements of declared arrays) at their first use.
        let known = |class: DeclClass, n: &str| t.vty.get(&(class, n.to_string())).cloned();
        match &lhs.kind {
            ExprKind::Ident(n) if !taken(t, n) => match known(DeclClass::Global, n) {
                None | Some(Ty::Int { .. } | Ty::Ptr(_) | Ty::Str)
                    if !t.decl_keys.contains_key(&(DeclClass::Global, n.clone())) =>
                {
                    declare(t, Scope::Global, n)
                }
                _ => {}
            },
            ExprKind::SelfVar(n) => match known(DeclClass::Thread, n) {
                None | Some(Ty::Int { .. } | Ty::Ptr(_) | Ty::Str) => declare(t, Scope::Thread, n),
                _ => {}
            },
            ExprKind::Index(n, _) => match known(DeclClass::Global, n) {
                None if !t.var_idx.contains_key(&(Scope::Global as u32, n.clone())) => {
                    declare(t, Scope::Assoc, n)
                }
                Some(Ty::Array(..)) => {}
                Some(_) if t.decl_keys.contains_key(&(DeclClass::Global, n.clone())) => {
                    declare(t, Scope::Assoc, n)
                }
                _ => {}
            },
            _ => {}
        }
    }
    match &e.kind {
        ExprKind::Assign(_, lhs, rhs) => {
            declare_expr(t, lhs);
            declare_expr(t, rhs);
        }
        ExprKind::IncDec { target, .. } => {
            declare_expr(t, target);
        }
        ExprKind::Index(_, ks) | ExprKind::Call(_, ks) => {
            for k in ks {
                declare_expr(t, k);
            }
        }
        ExprKind::Subscript(b, ks) => {
            declare_expr(t, b);
            for k in ks {
                declare_expr(t, k);
            }
        }
        ExprKind::Member(a, _) | ExprKind::Arrow(a, _) | ExprKind::SizeofExpr(a) => {
            declare_expr(t, a)
        }
        ExprKind::Comma(a, b) => {
            declare_expr(t, a);
            declare_expr(t, b);
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
