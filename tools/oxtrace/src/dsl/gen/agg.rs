//! Aggregations: `@name[keys] = func(args)`, their keys, functions and parameters.

use super::super::error::{CompileError, Span};
use super::super::syntax::ast::*;
use super::super::KeyKind;
use super::{arity_error, float_key, kinds_text, GResult, Gen};
use oxtrace_core::action::{self as act, Op};
use oxtrace_core::agg::{check_params, AggKind, ParamError};

/// DTrace's tags for the parameters of lquantize() and llquantize(), argument #1 first
/// (counted after the value): a parameter that is not a constant, one whose value is
/// wrong, one that differs from the aggregation's other uses.
const LQ_TAGS: [[&str; 3]; 3] = [
    [
        "D_LQUANT_BASETYPE",
        "D_LQUANT_BASEVAL",
        "D_LQUANT_MATCHBASE",
    ],
    ["D_LQUANT_LIMTYPE", "D_LQUANT_LIMVAL", "D_LQUANT_MATCHLIM"],
    [
        "D_LQUANT_STEPTYPE",
        "D_LQUANT_STEPVAL",
        "D_LQUANT_MATCHSTEP",
    ],
];
const LLQ_TAGS: [[&str; 3]; 4] = [
    [
        "D_LLQUANT_FACTORTYPE",
        "D_LLQUANT_FACTORVAL",
        "D_LLQUANT_MATCHFACTOR",
    ],
    [
        "D_LLQUANT_LMAGTYPE",
        "D_LLQUANT_LMAGVAL",
        "D_LLQUANT_MATCHLMAG",
    ],
    [
        "D_LLQUANT_HMAGTYPE",
        "D_LLQUANT_HMAGVAL",
        "D_LLQUANT_MATCHHMAG",
    ],
    [
        "D_LLQUANT_STEPTYPE",
        "D_LLQUANT_STEPVAL",
        "D_LLQUANT_MATCHSTEPS",
    ],
];

/// The tags of `func`'s parameters (see [`LQ_TAGS`]).
fn param_tags(func: AggKind) -> &'static [[&'static str; 3]] {
    match func {
        AggKind::Lquantize => &LQ_TAGS,
        AggKind::Llquantize => &LLQ_TAGS,
        _ => &[],
    }
}

/// DTrace's tag for a parameter error `e` of `func` with parameters `p`.
fn param_error_tag(func: AggKind, e: &ParamError, p: &[i64; 4]) -> &'static str {
    let tags = param_tags(func);
    match e {
        ParamError::LqHighNotAboveLow => "D_LQUANT_MISMATCH",
        ParamError::LqStepNotPositive => "D_LQUANT_STEPTYPE",
        ParamError::LqStepTooLarge => "D_LQUANT_STEPLARGE",
        ParamError::LqStepTooSmall => "D_LQUANT_STEPSMALL",
        // A negative number of steps is of the wrong kind; too many, a wrong value.
        ParamError::LlqRange(4) if p[3] < 0 => "D_LLQUANT_STEPTYPE",
        ParamError::LlqStepsZero => "D_LLQUANT_STEPTYPE",
        ParamError::LlqMagnitudeRange | ParamError::LlqMagnitudeTooBig => "D_LLQUANT_HMAGVAL",
        _ => match e.argument() {
            Some(n) if (1..=tags.len()).contains(&(n as usize)) => tags[n as usize - 1][1],
            _ => "D_AGG_FUNC",
        },
    }
}

impl Gen<'_> {
    /// The aggregation `e` names, as the argument of the action `func`.
    pub(super) fn agg_ref(&self, e: &Expr, func: &str) -> GResult<u32> {
        match &e.kind {
            ExprKind::AggRef(n) => match self.t.agg_idx.get(n) {
                Some(&i) => Ok(i),
                None => self.err(e.span, format!("unknown aggregation @{n}")),
            },
            _ => {
                let tag = match func {
                    "clear" => "D_CLEAR_AGGARG",
                    "trunc" => "D_TRUNC_AGGARG",
                    "normalize" | "denormalize" => "D_NORMALIZE_AGGARG",
                    "printa" => "D_PRINTA_AGGARG",
                    _ => "D_PROTO_ARG",
                };
                self.err(
                    e.span,
                    format!("[{tag}] {func}( ) argument #1 must be an aggregation (@name)"),
                )
            }
        }
    }

    /// Parameter `n` (1 is the first after the value) of `func`: an integer constant.
    pub(super) fn const_int(&self, e: &Expr, func: AggKind, n: usize) -> GResult<i64> {
        match const_eval(e) {
            Some(v) => Ok(v),
            None => {
                let tag = param_tags(func).get(n - 1).map_or("D_AGG_FUNC", |t| t[0]);
                self.err(
                    e.span,
                    format!(
                        "[{tag}] {}( ) argument #{n} must be an integer constant",
                        func.name()
                    ),
                )
            }
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
                // A function D knows but that does not aggregate is misused; a name D does
                // not know at all is an undefined function, as anywhere else.
                let tag = if super::is_function(&call.func) {
                    "D_AGG_FUNC"
                } else {
                    "D_FUNC_UNDEF"
                };
                return self.err(
                    call.func_span,
                    format!("[{tag}] unknown aggregating function '{}'", call.func),
                );
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
                params[0] = self.const_int(&call.args[1], func, 1)?;
                params[1] = self.const_int(&call.args[2], func, 2)?;
                params[2] = match call.args.get(3) {
                    Some(e) => self.const_int(e, func, 3)?,
                    None => 1,
                };
                incr = call.args.get(4);
            }
            AggKind::Llquantize => {
                for (i, p) in params.iter_mut().enumerate() {
                    *p = self.const_int(&call.args[i + 1], func, i + 1)?;
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
                let tag = param_error_tag(func, &e, &params);
                return self.err(span, format!("[{tag}] {e}"));
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
            // The same function with another parameter: DTrace's tag names the parameter.
            let differs = a.params.iter().zip(&params).position(|(x, y)| x != y);
            let tag = match (a.func == func, differs) {
                (true, Some(i)) => param_tags(func).get(i).map_or("D_AGG_REDEF", |t| t[2]),
                _ => "D_AGG_REDEF",
            };
            return self.err(
                cspan,
                format!(
                    "[{tag}] @{name} is used with {}() at {}:{}; it cannot change function or parameters",
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
            // A translation is never built: no key to keep, as DTrace says.
            if let Some(what) = self.xlate_data(k) {
                return self.err(
                    k.span,
                    format!("[D_KEY_TYPE] {what} cannot be an aggregation key: use its members"),
                );
            }
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
