//! Aggregations: `@name[keys] = func(args)`, their keys, functions and parameters.

use super::super::error::{CompileError, Span};
use super::super::syntax::ast::*;
use super::super::KeyKind;
use super::{arity_error, float_key, kinds_text, GResult, Gen};
use oxtrace_core::action::{self as act, Op};
use oxtrace_core::agg::{check_params, AggKind};

impl Gen<'_> {
    pub(super) fn agg_ref(&self, e: &Expr) -> GResult<u32> {
        match &e.kind {
            ExprKind::AggRef(n) => match self.t.agg_idx.get(n) {
                Some(&i) => Ok(i),
                None => self.err(e.span, format!("unknown aggregation @{n}")),
            },
            _ => self.err(e.span, "expected an aggregation (@name)"),
        }
    }

    pub(super) fn const_int(&self, e: &Expr) -> GResult<i64> {
        match const_eval(e) {
            Some(v) => Ok(v),
            None => self.err(e.span, "expected an integer constant"),
        }
    }

    pub(super) fn agg_stmt(
        &mut self,
        name: &str,
        name_span: Span,
        keys: &[Expr],
        call: &AggCall,
    ) -> GResult<()> {
        let func = match AggKind::from_name(&call.func) {
            Some(f) => f,
            None => {
                return self.err(
                    call.func_span,
                    format!("[D_AGG_FUNC] unknown aggregating function '{}'", call.func),
                )
            }
        };
        let cspan = call.func_span;
        let (min, max) = match func {
            AggKind::Count => (0, 0),
            AggKind::Quantize => (1, 2),
            AggKind::Lquantize => (3, 5),
            AggKind::Llquantize => (5, 6),
            _ => (1, 1),
        };
        if let Some(m) = arity_error(&call.func, call.args.len(), min, max) {
            return self.err(cspan, m);
        }
        let mut params = [0i64; 4];
        let mut incr: Option<&Expr> = None;
        match func {
            AggKind::Quantize => incr = call.args.get(1),
            AggKind::Lquantize => {
                params[0] = self.const_int(&call.args[1])?;
                params[1] = self.const_int(&call.args[2])?;
                params[2] = match call.args.get(3) {
                    Some(e) => self.const_int(e)?,
                    None => 1,
                };
                incr = call.args.get(4);
            }
            AggKind::Llquantize => {
                for (i, p) in params.iter_mut().enumerate() {
                    *p = self.const_int(&call.args[i + 1])?;
                }
                incr = call.args.get(5);
            }
            _ => {}
        }
        // The one validator the image check and the kernel use too, at the argument it
        // names.
        if self.t.checked {
            if let Err(e) = check_params(func, &params) {
                let span = e
                    .argument()
                    .and_then(|n| call.args.get(n as usize))
                    .map_or(cspan, |a| a.span);
                return self.err(span, e.to_string());
            }
        }
        // One function and parameter set per aggregation, program-wide.
        let id = match self.t.agg_idx.get(name) {
            Some(&i) => i,
            None => return self.err(name_span, "internal error: undeclared aggregation"),
        };
        let a = &mut self.t.aggs[id as usize];
        if !a.defined {
            a.func = func;
            a.params = params;
            a.first = cspan;
            a.defined = true;
        } else if a.func != func || a.params != params {
            let (afunc, afirst) = (a.func, a.first);
            let first = CompileError::at(self.src, self.input, afirst, "");
            return self.err(
                cspan,
                format!(
                    "[D_AGG_REDEF] @{name} is used with {}() at {}:{}; it cannot change function or parameters",
                    afunc.name(),
                    first.line,
                    first.col
                ),
            );
        }
        if keys.len() > act::MAX_KEYS {
            return self.err(
                name_span,
                format!("too many keys (at most {})", act::MAX_KEYS),
            );
        }
        let mut kr = Vec::new();
        for k in keys {
            let (r, t) = self.value(k, "D_KEY_TYPE", "D_KEY_TYPE")?;
            if t.is_float() {
                return self.err(k.span, float_key(&t));
            }
            kr.push((r, t));
        }
        let kinds: Vec<KeyKind> = kr.iter().map(|(_, t)| t.key_kind()).collect();
        match &self.t.aggs[id as usize].keys {
            None => {
                self.t.aggs[id as usize].keys = Some(kinds);
                self.t.aggs[id as usize].key_u64 = kr
                    .iter()
                    .map(|(_, t)| *t == super::super::types::U64)
                    .collect();
                self.t.aggs[id as usize].key_names = keys
                    .iter()
                    .map(|k| {
                        let end = (k.span.start + k.span.len).min(self.src.len());
                        let text = self.src.get(k.span.start..end).unwrap_or("");
                        text.split_whitespace().collect::<Vec<_>>().join(" ")
                    })
                    .collect();
            }
            Some(want) if *want != kinds => {
                return self.err(
                    name_span,
                    format!(
                        "@{name} has keys ({}) elsewhere, ({}) here",
                        kinds_text(want),
                        kinds_text(&kinds)
                    ),
                )
            }
            _ => {}
        }
        let rv = if func == AggKind::Count {
            0
        } else {
            let (r, ty) = self.expr(&call.args[0])?;
            self.need_scalar(
                &ty,
                call.args[0].span,
                &format!("{}()", call.func),
                "D_AGG_SCALAR",
            )?;
            r
        };
        let rw = match incr {
            Some(e) => {
                let (r, ty) = self.expr(e)?;
                self.need_scalar(&ty, e.span, "an increment", "D_PROTO_ARG")?;
                r
            }
            None => {
                let r = self.reg(cspan)?;
                self.emit(Op::Ldi, r, 0, 0, 1);
                r
            }
        };
        self.push_keys(&kr);
        self.emit(Op::Agg, 0, rv, rw, id);
        self.release(rv);
        self.release(rw);
        self.release_all(&kr);
        Ok(())
    }
}
