//! Declarations: structs, unions, enums, typedefs, inlines and variables in text order,
//! then the pre-pass that makes every variable a statement assigns exist, all before any
//! code is generated.

use super::super::error::Span;
use super::super::syntax::ast::const_eval;
use super::super::syntax::ast::*;
use super::super::types::{builtin, resolve_type, Member, SouDef, Ty, ACTIONS};
use super::super::KeyKind;
use super::{Agg, Tables, Var};
use oxtrace_core::action::{self as act, Scope};
use oxtrace_core::agg::AggKind;

/// Declare item `it` (from the prelude when `pre`): types, inlines, translators and
/// variables take effect in text order, before any code.
pub(crate) fn item(t: &mut Tables, it: &Item, pre: bool) -> DResult {
    match it {
        Item::Sou {
            name,
            union,
            members,
            span,
        } => declare_sou(t, name, *union, members, *span),
        Item::Enum { name, items } => declare_enum(t, name, items),
        Item::Typedef(tn, name, span) => declare_typedef(t, tn, name, *span),
        Item::Inline(tn, name, e, span) => {
            if pre {
                t.xlate.prelude_inline(name);
            }
            declare_inline(t, tn, name, e, *span)
        }
        Item::Translator(tr) => super::xlate::declare(t, tr, pre),
        Item::Decl(d) => declare_var(t, d),
        Item::Clause(cl) => {
            let mut r = Ok(());
            walk_stmts(&cl.body, &mut |s| {
                if let (Stmt::Decl(d), Ok(())) = (s, &r) {
                    r = declare_var(t, d);
                }
            });
            r
        }
        Item::Pragma(..) => Ok(()),
    }
}

/// The pre-pass: every variable that is assigned anywhere exists, so that a return clause
/// may test a variable its entry clause (later in the text) sets; aggregations likewise.
pub(crate) fn assigned(t: &mut Tables, clauses: &[&Clause]) {
    for cl in clauses {
        walk_stmts(&cl.body, &mut |s| declare_stmt(t, s));
        if let Some(p) = &cl.pred {
            declare_expr(t, p);
        }
    }
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
        || ACTIONS.contains(&name)
}

/// Largest struct, union or array type (bytes): keeps every size and offset far from
/// overflowing.
const MAX_TYPE_SIZE: u64 = 1 << 32;

/// `struct foo` names its tag as C does: one never defined is incomplete, not unknown, when
/// an object (not a pointer) of it is declared. The error of `m` for written type `tn` of
/// `what`, in those words.
fn incomplete(tn: &TypeName, what: &str, m: String) -> String {
    let mut base = tn;
    while let TypeName::Array(t, _) = base {
        base = t;
    }
    match base {
        TypeName::Sou(n, u) if m.starts_with("[D_TYPE_ERR]") => format!(
            "[D_DECL_INCOMPLETE] {what} uses incomplete type {} {n}",
            if *u { "union" } else { "struct" }
        ),
        _ => m,
    }
}

/// A struct or union first named behind a pointer (`struct node *next`) is declared by it,
/// as in C: the pointer is complete, only what it points to is not (yet).
fn forward_pointees(t: &mut Tables, tn: &TypeName) {
    match tn {
        TypeName::Ptr(p) => super::xlate::forward(t, p),
        TypeName::Array(e, _) => forward_pointees(t, e),
        _ => {}
    }
}

fn declare_var(t: &mut Tables, d: &Decl) -> DResult {
    t.env.btf_prepare(&d.ty);
    forward_pointees(t, &d.ty);
    let what = class_text(d.class, &d.name);
    let ty = resolve_type(&t.env, &d.ty).map_err(|m| {
        (
            d.span,
            incomplete(&d.ty, &format!("declaration of {what}"), m),
        )
    })?;
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
                if kt == Ty::Void {
                    // As in a function's prototype, void is no parameter's type.
                    return Err((
                        d.span,
                        format!("[D_DECL_PROTO_TYPE] a key of {what} cannot have type void"),
                    ));
                }
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
        forward_pointees(t, &m.ty);
        let ty = resolve_type(&t.env, &m.ty)
            .map_err(|e| (m.span, incomplete(&m.ty, &format!("member {}", m.name), e)))?;
        if let Some(w) = &m.bits {
            // DTrace's words; an unnamed bit-field is `(anon)` in them.
            let shown = if m.name.is_empty() { "(anon)" } else { &m.name };
            let unit = match ty {
                Ty::Int { size, .. } => size as u64 * 8,
                _ => {
                    return Err((
                        m.span,
                        format!("[D_DECL_BFTYPE] invalid type for bit-field: {shown}"),
                    ))
                }
            };
            // Only an unnamed bit-field may be 0 wide (it ends the storage unit).
            let width = match const_eval_env(t, w) {
                Some(v) if v > 0 && (v as u64) <= unit => v as u64,
                Some(0) if m.name.is_empty() => 0,
                Some(v) if v > 0 => {
                    return Err((
                        w.span,
                        format!("[D_DECL_BFSIZE] bit-field too big for type: {shown}"),
                    ))
                }
                _ => {
                    return Err((
                        w.span,
                        "[D_DECL_BFCONST] positive integral constant expression expected as bit-field size".to_string(),
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
            // As GCC on x86-64: an unnamed bit-field's type does not align the struct.
            if !m.name.is_empty() {
                align = align.max(unit / 8);
            }
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
                // DTrace has no tag of its own for this one.
                format!("[D_UNKNOWN] failed to define member '{}': a member of that name is declared before", m.name),
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
    if !name.is_empty() && !t.env.enum_tags.insert(name.to_string()) {
        let at = items.first().map_or(Span::new(0, 0), |i| i.2);
        return Err((at, format!("[D_DECL_TYPERED] type redeclared: enum {name}")));
    }
    let mut next: i64 = 0;
    for (i, (n, e, span)) in items.iter().enumerate() {
        // DTrace's type library refuses a name twice in one enum, in its own words.
        if items[..i].iter().any(|x| &x.0 == n) {
            return Err((
                *span,
                format!("[D_UNKNOWN] failed to define enumerator '{n}': Duplicate member or variable name"),
            ));
        }
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
                    "[D_DECL_ENOFLOW] enumerator '{n}' value overflows INT_MAX ({})",
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
                    kind: ExprKind::Int(a as u64, IntForm::default()),
                    span: e.span,
                }),
                Box::new(Expr {
                    kind: ExprKind::Int(b as u64, IntForm::default()),
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
            kind: ExprKind::Int(v as u64, IntForm::default()),
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
                    key_u64: Vec::new(),
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
