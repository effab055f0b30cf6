//! Which D variables live in memory: the clause-local variables of struct, union or array
//! type whose members or elements have their address taken (`&this->s.m`, `&this->a[i]`)
//! or whose array is used as a pointer (`p = this->a`). The code generator keeps them in
//! the clause's scratch memory instead of in `this->` slots, so that a pointer to them is
//! an address the kernel checks as it checks every scratch pointer (`gen/loc.rs`).

use super::super::syntax::ast::{Clause, DeclClass, Expr, ExprKind, Stmt, UnOp};
use super::super::types::Ty;
use super::Tables;

/// Fill `Tables::memvars` from every clause of the program.
pub(crate) fn memvars(t: &mut Tables, clauses: &[&Clause]) {
    let mut found = Vec::new();
    for cl in clauses {
        if let Some(p) = &cl.pred {
            scan(t, p, &mut found);
        }
        scan_stmts(t, &cl.body, &mut found);
    }
    t.memvars
        .extend(found.into_iter().map(|n| (DeclClass::Local, n)));
}

fn scan_stmts(t: &Tables, body: &[Stmt], found: &mut Vec<String>) {
    for s in body {
        match s {
            Stmt::Expr(e) => scan(t, e, found),
            Stmt::Agg { keys, call, .. } => {
                for e in keys.iter().chain(call.args.iter()) {
                    scan(t, e, found);
                }
            }
            Stmt::If { cond, then, els } => {
                scan(t, cond, found);
                scan_stmts(t, then, found);
                scan_stmts(t, els, found);
            }
            Stmt::Decl(_) => {}
        }
    }
}

/// One expression: a copy of it, walked once.
fn scan(t: &Tables, e: &Expr, found: &mut Vec<String>) {
    let mut e = e.clone();
    visit(t, &mut e, false, found);
}

/// `base`: `e` is the object of a member access or a subscript (not a value of its own).
fn visit(t: &Tables, e: &mut Expr, base: bool, found: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Unary(UnOp::AddrOf, a) => {
            if let Some(n) = local_root(a, false) {
                found.push(n.to_string());
            }
        }
        ExprKind::This(n) if !base => {
            if matches!(
                t.vty.get(&(DeclClass::Local, n.clone())),
                Some(Ty::Array(..))
            ) {
                found.push(n.clone());
            }
        }
        _ => {}
    }
    let inner = matches!(e.kind, ExprKind::Member(..) | ExprKind::Subscript(..));
    let mut first = true;
    let _ = e.try_for_each_child_mut(|c| {
        visit(t, c, inner && first, found);
        first = false;
        Ok::<(), ()>(())
    });
}

/// The clause-local variable whose storage `e` names through members and subscripts
/// (`this->s.a[2].b`); not the variable itself (`&this->x` is refused, as DTrace does).
fn local_root(e: &Expr, inner: bool) -> Option<&str> {
    match &e.kind {
        ExprKind::This(n) if inner => Some(n),
        ExprKind::Member(b, _) | ExprKind::Subscript(b, _) => local_root(b, true),
        _ => None,
    }
}
