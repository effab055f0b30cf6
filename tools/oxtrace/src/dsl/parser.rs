//! The D parser: recursive descent with C precedence.

use super::ast::*;
use super::error::{CompileError, Span};
use super::lexer::{Tok, Token};
use std::collections::HashMap;

/// Macro variables: `$1`.. `$n`, `$target`, `$pid`... by name.
pub type Macros = HashMap<String, String>;

/// How deep an expression may be.  Each parenthesis, unary operator, cast, `?:` branch,
/// assignment, argument or key list and subscript adds a level, and so does each operator
/// of a chain like `a + b + c`, whose tree is as deep as the chain is long.  Parser, code
/// generator and the drop of the tree recurse over it; the bound keeps them far from the
/// end of the stack.
pub const MAX_DEPTH: usize = 256;

/// The parser state.
pub struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    src: &'a str,
    input: &'a str,
    macros: &'a Macros,
    in_pred: bool,
    depth: usize,
}

type PResult<T> = Result<T, CompileError>;

/// Parse an integer literal with C prefixes and `u`/`l` suffixes; returns (value, unsigned).
pub fn parse_int(text: &str) -> Option<(u64, bool)> {
    let t = text.to_ascii_lowercase();
    let body = t.trim_end_matches(['u', 'l']);
    let suffix = &t[body.len()..];
    if !matches!(suffix, "" | "u" | "l" | "ul" | "lu" | "ll" | "ull" | "llu") {
        return None;
    }
    let v = if let Some(h) = body.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()?
    } else if body.len() > 1 && body.starts_with('0') {
        u64::from_str_radix(&body[1..], 8).ok()?
    } else {
        body.parse::<u64>().ok()?
    };
    Some((v, suffix.contains('u')))
}

const TYPE_WORDS: &[&str] = &[
    "char",
    "short",
    "int",
    "long",
    "signed",
    "unsigned",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
    "ssize_t",
    "uintptr_t",
    "intptr_t",
    "string",
    "void",
    "pid_t",
    "uid_t",
    "gid_t",
    "off_t",
];

impl<'a> Parser<'a> {
    /// A parser over `toks` of `src`.
    pub fn new(toks: Vec<Token>, src: &'a str, input: &'a str, macros: &'a Macros) -> Self {
        Parser {
            toks,
            pos: 0,
            src,
            input,
            macros,
            in_pred: false,
            depth: 0,
        }
    }

    /// One level deeper; past `MAX_DEPTH` an error at the current token.
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth <= MAX_DEPTH {
            return Ok(());
        }
        let sp = self.peek().span;
        self.err(
            sp,
            format!("expression nested more than {MAX_DEPTH} levels deep"),
        )
    }

    /// Parse `f` one level deeper.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        self.enter()?;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn err<T>(&self, span: Span, msg: impl Into<String>) -> PResult<T> {
        Err(CompileError::at(self.src, self.input, span, msg))
    }

    fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, n: usize) -> &Token {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)]
    }

    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is(&self, p: &str) -> bool {
        matches!(&self.peek().tok, Tok::Punct(q) if *q == p)
    }

    fn eat(&mut self, p: &str) -> bool {
        if self.is(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn describe(t: &Tok) -> String {
        match t {
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Int(s) => format!("'{s}'"),
            Tok::Str(_) => "string literal".into(),
            Tok::Char(_) => "character literal".into(),
            Tok::Macro { name, .. } => format!("'${name}'"),
            Tok::Agg(s) => format!("'@{s}'"),
            Tok::Pragma(_) => "'#'".into(),
            Tok::Punct(p) => format!("'{p}'"),
            Tok::Eof => "end of input".into(),
        }
    }

    fn expect(&mut self, p: &str) -> PResult<Span> {
        if self.is(p) {
            Ok(self.bump().span)
        } else {
            let t = self.peek();
            self.err(
                t.span,
                format!(
                    "syntax error: expected '{p}', found {}",
                    Self::describe(&t.tok)
                ),
            )
        }
    }

    fn ident(&mut self) -> PResult<(String, Span)> {
        match self.peek().tok.clone() {
            Tok::Ident(s) => Ok((s, self.bump().span)),
            t => {
                let sp = self.peek().span;
                self.err(
                    sp,
                    format!(
                        "syntax error: expected a name, found {}",
                        Self::describe(&t)
                    ),
                )
            }
        }
    }

    /// Parse a whole program.
    pub fn program(&mut self) -> PResult<Vec<Item>> {
        let mut items = Vec::new();
        loop {
            let t = self.peek().clone();
            match t.tok {
                Tok::Eof => break,
                Tok::Pragma(text) => {
                    self.bump();
                    items.push(Item::Pragma(text, t.span));
                }
                _ => items.push(Item::Clause(self.clause()?)),
            }
        }
        Ok(items)
    }

    fn probe_text(&mut self) -> PResult<ProbeText> {
        let first = self.peek().span;
        let mut text = String::new();
        let mut end = first.start;
        loop {
            let t = self.peek().clone();
            let stop = match &t.tok {
                Tok::Punct(p) => matches!(*p, "," | "/" | "{"),
                Tok::Eof | Tok::Pragma(_) => true,
                _ => false,
            };
            if stop {
                break;
            }
            if !text.is_empty() && t.span.start != end {
                return self.err(
                    Span::new(end, t.span.start),
                    "syntax error: whitespace inside a probe description",
                );
            }
            match &t.tok {
                Tok::Macro { name, .. } => match self.macros.get(name) {
                    Some(v) => text.push_str(v),
                    None => {
                        return self.err(t.span, format!("macro argument ${name} is not defined"))
                    }
                },
                Tok::Str(_) | Tok::Char(_) | Tok::Agg(_) => {
                    return self.err(
                        t.span,
                        format!(
                            "syntax error: {} in a probe description",
                            Self::describe(&t.tok)
                        ),
                    )
                }
                _ => text.push_str(&self.src[t.span.start..t.span.start + t.span.len]),
            }
            end = t.span.start + t.span.len;
            self.bump();
        }
        if text.is_empty() {
            let t = self.peek();
            return self.err(
                t.span,
                format!(
                    "syntax error: expected a probe description, found {}",
                    Self::describe(&t.tok)
                ),
            );
        }
        Ok(ProbeText {
            text,
            span: Span::new(first.start, end),
        })
    }

    fn clause(&mut self) -> PResult<Clause> {
        let start = self.peek().span;
        let mut probes = vec![self.probe_text()?];
        while self.eat(",") {
            probes.push(self.probe_text()?);
        }
        let pred = if self.is("/") {
            self.bump();
            self.in_pred = true;
            let e = self.expr()?;
            self.in_pred = false;
            self.expect("/")?;
            Some(e)
        } else {
            None
        };
        let head_end = self.peek().span;
        self.expect("{")?;
        let mut body = Vec::new();
        loop {
            if self.eat("}") {
                break;
            }
            if self.eat(";") {
                continue;
            }
            if matches!(self.peek().tok, Tok::Eof) {
                let sp = self.peek().span;
                return self.err(sp, "syntax error: expected '}' to close the clause");
            }
            body.push(self.stmt()?);
            if !self.is("}") {
                self.expect(";")?;
            }
        }
        Ok(Clause {
            probes,
            pred,
            body,
            span: start.to(head_end),
        })
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if let Tok::Agg(name) = self.peek().tok.clone() {
            if !matches!(self.peek_at(1).tok, Tok::Punct("(") | Tok::Punct(")")) {
                let name_span = self.bump().span;
                let mut keys = Vec::new();
                if self.eat("[") {
                    keys = self.expr_list("]")?;
                }
                self.expect("=")?;
                let (func, func_span) = self.ident()?;
                self.expect("(")?;
                let args = self.expr_list(")")?;
                return Ok(Stmt::Agg {
                    name,
                    name_span,
                    keys,
                    call: AggCall {
                        func,
                        func_span,
                        args,
                    },
                });
            }
        }
        Ok(Stmt::Expr(self.expr()?))
    }

    /// Comma-separated expressions up to (and consuming) `close`.
    fn expr_list(&mut self, close: &str) -> PResult<Vec<Expr>> {
        self.nested(|p| p.expr_list_inner(close))
    }

    fn expr_list_inner(&mut self, close: &str) -> PResult<Vec<Expr>> {
        let mut v = Vec::new();
        if self.eat(close) {
            return Ok(v);
        }
        loop {
            v.push(self.assign()?);
            if self.eat(close) {
                return Ok(v);
            }
            self.expect(",")?;
        }
    }

    /// An expression (no comma operator in this subset).
    pub fn expr(&mut self) -> PResult<Expr> {
        self.assign()
    }

    fn assign(&mut self) -> PResult<Expr> {
        let lhs = self.ternary()?;
        let op = match &self.peek().tok {
            Tok::Punct("=") => None,
            Tok::Punct("+=") => Some(BinOp::Add),
            Tok::Punct("-=") => Some(BinOp::Sub),
            Tok::Punct("*=") => Some(BinOp::Mul),
            Tok::Punct("/=") => Some(BinOp::Div),
            Tok::Punct("%=") => Some(BinOp::Mod),
            Tok::Punct("&=") => Some(BinOp::And),
            Tok::Punct("|=") => Some(BinOp::Or),
            Tok::Punct("^=") => Some(BinOp::Xor),
            Tok::Punct("<<=") => Some(BinOp::Shl),
            Tok::Punct(">>=") => Some(BinOp::Shr),
            _ => return Ok(lhs),
        };
        let opspan = self.bump().span;
        if !is_lvalue(&lhs) {
            return self.err(
                lhs.span,
                "operator requires a modifiable variable on its left",
            );
        }
        let _ = opspan;
        let rhs = self.nested(Self::assign)?;
        let span = lhs.span.to(rhs.span);
        Ok(Expr {
            kind: ExprKind::Assign(op, Box::new(lhs), Box::new(rhs)),
            span,
        })
    }

    fn ternary(&mut self) -> PResult<Expr> {
        let c = self.binary(0)?;
        if !self.eat("?") {
            return Ok(c);
        }
        let a = self.nested(Self::assign)?;
        self.expect(":")?;
        let b = self.nested(Self::ternary)?;
        let span = c.span.to(b.span);
        Ok(Expr {
            kind: ExprKind::Ternary(Box::new(c), Box::new(a), Box::new(b)),
            span,
        })
    }

    fn binop(&self) -> Option<(BinOp, u8)> {
        let p = match &self.peek().tok {
            Tok::Punct(p) => *p,
            _ => return None,
        };
        Some(match p {
            "||" => (BinOp::LOr, 1),
            "^^" => (BinOp::LXor, 2),
            "&&" => (BinOp::LAnd, 3),
            "|" => (BinOp::Or, 4),
            "^" => (BinOp::Xor, 5),
            "&" => (BinOp::And, 6),
            "==" => (BinOp::Eq, 7),
            "!=" => (BinOp::Ne, 7),
            "<" => (BinOp::Lt, 8),
            "<=" => (BinOp::Le, 8),
            ">" => (BinOp::Gt, 8),
            ">=" => (BinOp::Ge, 8),
            "<<" => (BinOp::Shl, 9),
            ">>" => (BinOp::Shr, 9),
            "+" => (BinOp::Add, 10),
            "-" => (BinOp::Sub, 10),
            "*" => (BinOp::Mul, 11),
            "/" => {
                // In a predicate, a '/' before '{' closes it.
                if self.in_pred && matches!(self.peek_at(1).tok, Tok::Punct("{") | Tok::Eof) {
                    return None;
                }
                (BinOp::Div, 11)
            }
            "%" => (BinOp::Mod, 11),
            _ => return None,
        })
    }

    fn binary(&mut self, min: u8) -> PResult<Expr> {
        let mut lhs = self.unary()?;
        // A chain is parsed in a loop but its tree is as deep as the chain is long.
        let base = self.depth;
        while let Some((op, prec)) = self.binop() {
            if prec <= min {
                break;
            }
            self.enter()?;
            self.bump();
            let rhs = self.binary(prec)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        self.depth = base;
        Ok(lhs)
    }

    fn is_type_start(&self, n: usize) -> bool {
        matches!(&self.peek_at(n).tok, Tok::Ident(s) if TYPE_WORDS.contains(&s.as_str()))
    }

    fn type_name(&mut self) -> PResult<TypeName> {
        let mut words = Vec::new();
        let start = self.peek().span;
        while let Tok::Ident(s) = self.peek().tok.clone() {
            if !TYPE_WORDS.contains(&s.as_str()) {
                break;
            }
            words.push(s);
            self.bump();
        }
        let end = self.peek().span;
        let base = self.depth;
        let w: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
        let int = |size, signed| TypeName::Int { size, signed };
        let mut ty = match w.as_slice() {
            ["char"] | ["signed", "char"] | ["int8_t"] => int(1, true),
            ["unsigned", "char"] | ["uint8_t"] => int(1, false),
            ["short"] | ["short", "int"] | ["signed", "short"] | ["int16_t"] => int(2, true),
            ["unsigned", "short"] | ["unsigned", "short", "int"] | ["uint16_t"] => int(2, false),
            ["int"] | ["signed"] | ["signed", "int"] | ["int32_t"] | ["pid_t"] => int(4, true),
            ["unsigned"] | ["unsigned", "int"] | ["uint32_t"] | ["uid_t"] | ["gid_t"] => {
                int(4, false)
            }
            ["long"]
            | ["long", "int"]
            | ["long", "long"]
            | ["long", "long", "int"]
            | ["signed", "long"]
            | ["signed", "long", "long"]
            | ["int64_t"]
            | ["ssize_t"]
            | ["intptr_t"]
            | ["off_t"] => int(8, true),
            ["unsigned", "long"]
            | ["unsigned", "long", "long"]
            | ["unsigned", "long", "int"]
            | ["unsigned", "long", "long", "int"]
            | ["uint64_t"]
            | ["size_t"]
            | ["uintptr_t"] => int(8, false),
            ["string"] => TypeName::Str,
            ["void"] => TypeName::Void,
            _ => return self.err(start.to(end), format!("unknown type '{}'", w.join(" "))),
        };
        while self.is("*") {
            self.enter()?;
            self.bump();
            ty = TypeName::Ptr(Box::new(ty));
        }
        self.depth = base;
        Ok(ty)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let t = self.peek().clone();
        let op = match &t.tok {
            Tok::Punct("-") => Some(UnOp::Neg),
            Tok::Punct("+") => Some(UnOp::Plus),
            Tok::Punct("!") => Some(UnOp::Not),
            Tok::Punct("~") => Some(UnOp::BitNot),
            Tok::Punct("*") => Some(UnOp::Deref),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let e = self.nested(Self::unary)?;
            let span = t.span.to(e.span);
            return Ok(Expr {
                kind: ExprKind::Unary(op, Box::new(e)),
                span,
            });
        }
        if let Tok::Punct(p @ ("++" | "--")) = t.tok {
            self.bump();
            let e = self.nested(Self::unary)?;
            if !is_lvalue(&e) {
                return self.err(
                    e.span,
                    format!("operator {p} requires a modifiable variable"),
                );
            }
            let span = t.span.to(e.span);
            return Ok(Expr {
                kind: ExprKind::IncDec {
                    pre: true,
                    inc: p == "++",
                    target: Box::new(e),
                },
                span,
            });
        }
        if self.is("(") && self.is_type_start(1) {
            self.bump();
            let ty = self.type_name()?;
            self.expect(")")?;
            let e = self.nested(Self::unary)?;
            let span = t.span.to(e.span);
            return Ok(Expr {
                kind: ExprKind::Cast(ty, Box::new(e)),
                span,
            });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> PResult<Expr> {
        let base = self.depth;
        let r = self.postfix_chain();
        self.depth = base;
        r
    }

    fn postfix_chain(&mut self) -> PResult<Expr> {
        let mut e = self.primary()?;
        loop {
            let t = self.peek().clone();
            match t.tok {
                Tok::Punct(p @ ("++" | "--")) => {
                    self.bump();
                    if !is_lvalue(&e) {
                        return self.err(
                            e.span,
                            format!("operator {p} requires a modifiable variable"),
                        );
                    }
                    let span = e.span.to(t.span);
                    e = Expr {
                        kind: ExprKind::IncDec {
                            pre: false,
                            inc: p == "++",
                            target: Box::new(e),
                        },
                        span,
                    };
                }
                Tok::Punct("[") => {
                    let name = match &e.kind {
                        ExprKind::Ident(n) => n.clone(),
                        _ => {
                            // p[i] on a pointer is *(p + i), a level deeper each time.
                            self.enter()?;
                            self.bump();
                            let idx = self.expr()?;
                            let close = self.expect("]")?;
                            let span = e.span.to(close);
                            let sum = Expr {
                                kind: ExprKind::Binary(BinOp::Add, Box::new(e), Box::new(idx)),
                                span,
                            };
                            e = Expr {
                                kind: ExprKind::Unary(UnOp::Deref, Box::new(sum)),
                                span,
                            };
                            continue;
                        }
                    };
                    self.bump();
                    let keys = self.expr_list("]")?;
                    if keys.is_empty() {
                        return self.err(t.span, "an associative array needs at least one key");
                    }
                    let span = e.span.to(self.toks[self.pos - 1].span);
                    e = Expr {
                        kind: ExprKind::Index(name, keys),
                        span,
                    };
                }
                Tok::Punct("(") => {
                    let name = match &e.kind {
                        ExprKind::Ident(n) => n.clone(),
                        _ => return self.err(t.span, "only functions and actions can be called"),
                    };
                    self.bump();
                    let args = self.expr_list(")")?;
                    let span = e.span.to(self.toks[self.pos - 1].span);
                    e = Expr {
                        kind: ExprKind::Call(name, args),
                        span,
                    };
                }
                _ => return Ok(e),
            }
        }
    }

    fn primary(&mut self) -> PResult<Expr> {
        let t = self.bump();
        let span = t.span;
        let kind = match t.tok {
            Tok::Int(s) => match parse_int(&s) {
                Some((v, u)) => ExprKind::Int(v, u),
                None => return self.err(span, format!("invalid integer constant '{s}'")),
            },
            Tok::Char(c) => ExprKind::Int(c as i8 as i64 as u64, false),
            Tok::Str(mut s) => {
                // Adjacent string literals concatenate, as in C.
                while let Tok::Str(more) = self.peek().tok.clone() {
                    self.bump();
                    s.extend(more);
                }
                ExprKind::Str(s)
            }
            Tok::Macro { name, string } => {
                let v = match self.macros.get(&name) {
                    Some(v) => v.clone(),
                    None => {
                        return self.err(span, format!("macro argument ${name} is not defined"))
                    }
                };
                if string {
                    ExprKind::Str(v.into_bytes())
                } else {
                    match parse_int(&v) {
                        Some((n, u)) => ExprKind::Int(n, u),
                        None => {
                            return self.err(
                                span,
                                format!(
                                    "macro argument ${name} (\"{v}\") is not an integer; use $${name} for a string"
                                ),
                            )
                        }
                    }
                }
            }
            Tok::Agg(name) => ExprKind::AggRef(name),
            Tok::Ident(name) if name == "this" || name == "self" => {
                if !self.eat("->") {
                    let sp = self.peek().span;
                    return self.err(sp, format!("syntax error: expected '->' after '{name}'"));
                }
                let (field, fspan) = self.ident()?;
                let span = span.to(fspan);
                return Ok(Expr {
                    kind: if name == "this" {
                        ExprKind::This(field)
                    } else {
                        ExprKind::SelfVar(field)
                    },
                    span,
                });
            }
            // A tracepoint's `args->FIELD`: a call no program can write, which the code
            // generator resolves against the clause's event formats.
            Tok::Ident(name) if name == "args" && self.eat("->") => {
                let (field, fspan) = self.ident()?;
                let arg = Expr {
                    kind: ExprKind::Str(field.into_bytes()),
                    span: fspan,
                };
                return Ok(Expr {
                    kind: ExprKind::Call("args->".into(), vec![arg]),
                    span: span.to(fspan),
                });
            }
            Tok::Ident(name) => ExprKind::Ident(name),
            Tok::Punct("(") => {
                let e = self.nested(Self::expr)?;
                let close = self.expect(")")?;
                return Ok(Expr {
                    kind: e.kind,
                    span: span.to(close),
                });
            }
            tok => {
                return self.err(
                    span,
                    format!(
                        "syntax error: expected an expression, found {}",
                        Self::describe(&tok)
                    ),
                )
            }
        };
        Ok(Expr { kind, span })
    }
}

/// Whether `e` can be assigned to.
pub fn is_lvalue(e: &Expr) -> bool {
    matches!(
        e.kind,
        ExprKind::Ident(_) | ExprKind::This(_) | ExprKind::SelfVar(_) | ExprKind::Index(..)
    )
}
