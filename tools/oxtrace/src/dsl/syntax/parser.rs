//! The D parser: recursive descent with C precedence.

use super::super::error::{CompileError, Span};
use super::ast::*;
use super::lexer::{Tok, Token};
use std::collections::{HashMap, HashSet};

mod decl;

/// Macro variables: `$1`.. `$n`, `$target`, `$pid`... by name.
pub type Macros = HashMap<String, String>;

/// How deep an expression may be.  Each parenthesis, unary operator, cast, `?:` branch,
/// assignment, argument or key list and subscript adds a level, and so does each operator
/// of a chain like `a + b + c`, whose tree is as deep as the chain is long.  Parser, code
/// generator and the drop of the tree recurse over it; the bound keeps them far from the
/// end of the stack.
pub const MAX_DEPTH: usize = 256;

/// Most elements of one array dimension (the run-time bounds check compares with a 32-bit
/// bound).
pub const MAX_ARRAY: u64 = 1 << 24;

/// The parser state.
pub struct Parser<'a> {
    toks: Vec<Token>,
    pos: usize,
    src: &'a str,
    input: &'a str,
    macros: &'a Macros,
    in_pred: bool,
    depth: usize,
    /// Names declared by `typedef` so far (a cast or declaration may start with one).
    typedefs: HashSet<String>,
    /// The structs, unions and enums defined so far (`struct foo`).
    sou_defs: HashSet<String>,
    /// Option `defaultargs`: an unset `$N` is 0, an unset `$$N` "".
    default_args: bool,
    /// Aggregations assigned so far, in text order.
    aggs: HashSet<String>,
    /// The `#pragma` lines, out of the token stream (DTrace reads them wherever they
    /// stand, even inside a clause or a declaration), each with the index of the token
    /// that follows it.
    pragmas: Vec<(usize, String, Span)>,
    /// How many of `pragmas` the parse has passed.
    pragmas_passed: usize,
}

type PResult<T> = Result<T, CompileError>;

/// Parse an integer literal with C prefixes and `u`/`l` suffixes; returns (value, unsigned).
pub fn parse_int(text: &str) -> Option<(u64, IntForm)> {
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
    let form = IntForm {
        unsigned: suffix.contains('u'),
        long: suffix.contains('l'),
        radix: body.len() > 1 && body.starts_with('0'),
    };
    Some((v, form))
}

/// Why `text`, which [`parse_int`] refused, is no integer constant, in DTrace's words: a
/// digit its base does not have, or a value past 64 bits.
fn int_error(text: &str) -> String {
    let t = text.to_ascii_lowercase();
    let body = t.trim_end_matches(['u', 'l']);
    let suffix = &text[body.len()..];
    let (digits, radix) = if let Some(h) = body.strip_prefix("0x") {
        (h, 16)
    } else if body.len() > 1 && body.starts_with('0') {
        (&body[1..], 8)
    } else {
        (body, 10)
    };
    if let Some(bad) = digits.chars().find(|c| !c.is_digit(radix)) {
        return format!("[D_INT_DIGIT] constant {text} contains invalid digit {bad}");
    }
    if digits.is_empty() {
        return format!("[D_INT_DIGIT] constant {text} has no digits");
    }
    if !matches!(
        suffix.to_ascii_lowercase().as_str(),
        "" | "u" | "l" | "ul" | "lu" | "ll" | "ull" | "llu"
    ) {
        return format!("[D_INT_DIGIT] constant {text} has an invalid suffix {suffix}");
    }
    format!("[D_INT_OFLOW] constant {text} results in integer overflow")
}

const TYPE_WORDS: &[&str] = &[
    "char",
    "short",
    "int",
    "long",
    "signed",
    "unsigned",
    "float",
    "double",
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
    "uchar_t",
    "ushort_t",
    "uint_t",
    "ulong_t",
    "u_longlong_t",
    "longlong_t",
    "u_char",
    "u_short",
    "u_int",
    "u_long",
    "uint",
    "ulong",
    "u_int8_t",
    "u_int16_t",
    "u_int32_t",
    "u_int64_t",
    "time_t",
    "clock_t",
    "id_t",
    "mode_t",
    "dev_t",
    "ino_t",
    "nlink_t",
    "ipaddr_t",
    "caddr_t",
    "bool",
    "_Bool",
    "boolean_t",
    "struct",
    "union",
    "enum",
];

/// Whether `w` is a word of a type specifier other than a typedef name.
fn is_type_word(w: &str) -> bool {
    TYPE_WORDS.contains(&w)
}

impl<'a> Parser<'a> {
    /// A parser over `toks` of `src`.
    pub fn new(toks: Vec<Token>, src: &'a str, input: &'a str, macros: &'a Macros) -> Self {
        let mut pragmas = Vec::new();
        let mut rest = Vec::with_capacity(toks.len());
        for t in toks {
            match t.tok {
                Tok::Pragma(text) => pragmas.push((rest.len(), text, t.span)),
                _ => rest.push(t),
            }
        }
        Parser {
            toks: rest,
            pragmas,
            pragmas_passed: 0,
            pos: 0,
            src,
            input,
            macros,
            in_pred: false,
            depth: 0,
            typedefs: HashSet::new(),
            sou_defs: HashSet::new(),
            default_args: false,
            aggs: HashSet::new(),
        }
    }

    /// Option `defaultargs` (`-x defaultargs`): an unset positional macro argument `$N` is
    /// 0 and `$$N` is "", as in DTrace, instead of an error. `#pragma D option defaultargs`
    /// sets it for the text after it.
    pub fn set_default_args(&mut self, on: bool) {
        self.default_args = on;
    }

    /// The value of macro `$name` (`$$name` when `string`): its argument, or with
    /// `defaultargs` an unset positional argument's default; else a `D_MACRO_UNDEF` error.
    fn macro_value(&self, name: &str, string: bool, span: Span) -> PResult<String> {
        if let Some(v) = self.macros.get(name) {
            return Ok(v.clone());
        }
        if self.default_args && !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(if string { String::new() } else { "0".into() });
        }
        self.err(
            span,
            format!("[D_MACRO_UNDEF] macro argument ${name} is not defined"),
        )
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
        self.pass_pragmas();
        t
    }

    /// Takes note of the pragmas before the current token: `defaultargs` applies to the
    /// text after its line.
    fn pass_pragmas(&mut self) {
        while let Some((at, text, _)) = self.pragmas.get(self.pragmas_passed) {
            if *at > self.pos {
                break;
            }
            let w: Vec<&str> = text.split_whitespace().collect();
            if let ["pragma", "D", "option", o] = w[..] {
                let (k, v) = o.split_once('=').map_or((o, None), |(k, v)| (k, Some(v)));
                if k == "defaultargs" {
                    self.default_args = matches!(crate::options::runtime_value(k, v), Ok(Some(_)));
                }
            }
            self.pragmas_passed += 1;
        }
    }

    /// The pragmas the parse has passed, in text order: after a syntax error, DTrace would
    /// have read each of them before it, and an error of theirs comes first.
    pub fn passed_pragmas(&self) -> impl Iterator<Item = (&str, Span)> {
        self.pragmas[..self.pragmas_passed]
            .iter()
            .map(|(_, t, s)| (t.as_str(), *s))
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
            Tok::Int(s) | Tok::Float(s) => format!("'{s}'"),
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
                    "[D_SYNTAX] syntax error: expected '{p}', found {}",
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
                        "[D_SYNTAX] syntax error: expected a name, found {}",
                        Self::describe(&t)
                    ),
                )
            }
        }
    }

    /// Parse a whole program.
    pub fn program(&mut self) -> PResult<Vec<Item>> {
        let mut items = Vec::new();
        let mut given = 0;
        loop {
            self.pass_pragmas();
            // The pragmas passed so far, before the item they precede or stood in.
            for (_, text, span) in &self.pragmas[given..self.pragmas_passed] {
                items.push(Item::Pragma(text.clone(), *span));
            }
            given = self.pragmas_passed;
            let t = self.peek().clone();
            match t.tok {
                Tok::Eof => break,
                Tok::Punct(";") => {
                    self.bump();
                }
                Tok::Ident(ref w) if w == "translator" => items.push(self.translator()?),
                _ if self.is_decl_start() => self.top_decl(&mut items)?,
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
                    "[D_SYNTAX] syntax error: whitespace inside a probe description",
                );
            }
            match &t.tok {
                Tok::Macro { name, string } => {
                    let v = self.macro_value(name, *string, t.span)?;
                    text.push_str(&v);
                }
                Tok::Str(_) | Tok::Char(_) | Tok::Agg(_) => {
                    return self.err(
                        t.span,
                        format!(
                            "[D_SYNTAX] syntax error: {} in a probe description",
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
                    "[D_SYNTAX] syntax error: expected a probe description, found {}",
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
        let body = self.braced("clause")?;
        Ok(Clause {
            probes,
            pred,
            body,
            span: start.to(head_end),
        })
    }

    /// One statement (and its terminating `;` where one is needed) appended to `out`; a
    /// declaration list may append several.
    fn stmt_into(&mut self, out: &mut Vec<Stmt>) -> PResult<()> {
        if self.is_decl_start() {
            let class = self.decl_class()?;
            let (base, _) = self.type_spec(false)?;
            loop {
                let d = self.declarator(class, &base)?;
                out.push(Stmt::Decl(d));
                if !self.eat(",") {
                    break;
                }
            }
            if !self.is("}") {
                self.expect(";")?;
            }
            return Ok(());
        }
        self.exec_stmt_into(out)
    }

    /// One statement that is not a declaration (as the body of `if` or `else` must be).
    fn exec_stmt_into(&mut self, out: &mut Vec<Stmt>) -> PResult<()> {
        if matches!(&self.peek().tok, Tok::Ident(w) if w == "if") {
            let s = self.nested(Self::if_stmt)?;
            out.push(s);
            return Ok(());
        }
        if self.is("{") {
            let b = self.nested(Self::block)?;
            out.extend(b);
            return Ok(());
        }
        out.push(self.stmt()?);
        if !self.is("}") {
            self.expect(";")?;
        }
        Ok(())
    }

    /// `{ stmts }`.
    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.braced("block")
    }

    /// `{ stmts }` of a clause or block; `what` names it in the error at end of input.
    fn braced(&mut self, what: &str) -> PResult<Vec<Stmt>> {
        self.expect("{")?;
        let mut body = Vec::new();
        loop {
            if self.eat("}") {
                return Ok(body);
            }
            if self.eat(";") {
                continue;
            }
            if matches!(self.peek().tok, Tok::Eof) {
                let sp = self.peek().span;
                return self.err(
                    sp,
                    format!("[D_SYNTAX] syntax error: expected '}}' to close the {what}"),
                );
            }
            self.stmt_into(&mut body)?;
        }
    }

    /// `if (cond) stmt [else stmt]` (DTrace 2).
    fn if_stmt(&mut self) -> PResult<Stmt> {
        self.bump();
        self.expect("(")?;
        let cond = self.expr()?;
        self.expect(")")?;
        let then = self.branch()?;
        let els = if matches!(&self.peek().tok, Tok::Ident(w) if w == "else") {
            self.bump();
            self.branch()?
        } else {
            Vec::new()
        };
        Ok(Stmt::If { cond, then, els })
    }

    /// The body of an `if` or `else`: a block or one statement with its `;`.
    fn branch(&mut self) -> PResult<Vec<Stmt>> {
        let mut v = Vec::new();
        if !self.eat(";") {
            self.exec_stmt_into(&mut v)?;
        }
        Ok(v)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if let Tok::Agg(name) = self.peek().tok.clone() {
            if !matches!(self.peek_at(1).tok, Tok::Punct("(") | Tok::Punct(")")) {
                let name_span = self.bump().span;
                let mut keys = Vec::new();
                if self.eat("[") {
                    keys = self.expr_list("]")?;
                }
                if self.is("[") {
                    let sp = self.peek().span;
                    return self.err(
                        sp,
                        "[D_AGG_MDIM] multi-dimensional indexing is not permitted for aggregations: give the keys in one [ ]",
                    );
                }
                if self.is(";") || self.is("}") {
                    // An aggregation is only ever assigned an aggregating function's value.
                    // As in DTrace, keys make `@a[1]` an aggregation even if nothing
                    // assigns it; a bare `@a` must have been assigned before.
                    let at = name_span.to(self.peek().span);
                    return if self.aggs.contains(&name) || !keys.is_empty() {
                        self.err(
                            at,
                            format!("[D_AGG_NULL] expression has null effect: @{name} is not assigned a function"),
                        )
                    } else {
                        self.err(
                            name_span,
                            format!(
                                "[D_IDENT_UNDEF] failed to resolve @{name}: it is never assigned"
                            ),
                        )
                    };
                }
                self.expect("=")?;
                let (func, func_span) = self.ident()?;
                if !self.is("(") {
                    let sp = self.peek().span;
                    return self.err(
                        func_span.to(sp),
                        format!("[D_FUNC_IDENT] {func} is not an aggregating function: expected {func}( ... )"),
                    );
                }
                self.aggs.insert(name.clone());
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

    /// An expression: assignments separated by the comma operator.
    pub fn expr(&mut self) -> PResult<Expr> {
        let mut e = self.assign()?;
        let base = self.depth;
        while self.is(",") {
            self.enter()?;
            self.bump();
            let rhs = self.assign()?;
            let span = e.span.to(rhs.span);
            e = Expr {
                kind: ExprKind::Comma(Box::new(e), Box::new(rhs)),
                span,
            };
        }
        self.depth = base;
        Ok(e)
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
        if !lhs.is_place() {
            return self.err(
                lhs.span,
                "[D_OP_LVAL] operator = requires a modifiable lvalue as an operand",
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

    /// At `(`: whether `(name)` followed by an operand, or `(name *...)`, is a cast to a
    /// name the program does not declare (no expression has that shape); its `*`s.
    fn unknown_cast(&self) -> Option<usize> {
        if !self.is("(") || !matches!(&self.peek_at(1).tok, Tok::Ident(s) if !s.contains('`')) {
            return None;
        }
        let mut n = 2;
        while matches!(self.peek_at(n).tok, Tok::Punct("*")) {
            n += 1;
        }
        if !matches!(self.peek_at(n).tok, Tok::Punct(")")) {
            return None;
        }
        let operand = matches!(
            self.peek_at(n + 1).tok,
            Tok::Int(_) | Tok::Ident(_) | Tok::Str(_) | Tok::Char(_)
        );
        (n > 2 || operand).then_some(n - 2)
    }

    fn is_type_start(&self, n: usize) -> bool {
        matches!(&self.peek_at(n).tok, Tok::Ident(s)
            if is_type_word(s) || self.typedefs.contains(s) || self.is_scoped_type(s))
    }

    /// Whether ``m`name`` names a type: a typedef or a type word scoped by a module.
    fn is_scoped_type(&self, s: &str) -> bool {
        super::scope::split(s).is_some_and(|(_, b)| {
            self.typedefs.contains(b)
                || (is_type_word(b) && !matches!(b, "struct" | "union" | "enum"))
        })
    }

    /// A type name of a cast, `sizeof` or `offsetof`: a specifier and `*`s.
    fn type_name(&mut self) -> PResult<TypeName> {
        let (mut ty, _) = self.type_spec(false)?;
        let base = self.depth;
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
            Tok::Punct("&") => Some(UnOp::AddrOf),
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
            if !e.is_place() {
                return self.err(
                    e.span,
                    format!("[D_OP_LVAL] operator {p} requires a modifiable lvalue as an operand"),
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
        if let Some(stars) = self.unknown_cast() {
            // `(name)x`, `(name *)x` with a name the program does not declare: a cast to a
            // typedef the compiler looks up in the kernel's BTF (or reports undefined).
            self.bump();
            let Tok::Ident(n) = self.bump().tok.clone() else {
                unreachable!("unknown_cast() saw an identifier");
            };
            let mut ty = TypeName::Named(n);
            for _ in 0..stars {
                self.bump();
                ty = TypeName::Ptr(Box::new(ty));
            }
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
                    if !e.is_place() {
                        return self.err(
                            e.span,
                            format!("[D_OP_LVAL] operator {p} requires a modifiable lvalue as an operand"),
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
                    self.enter()?;
                    self.bump();
                    let keys = self.expr_list("]")?;
                    if keys.is_empty() {
                        return self.err(
                            t.span,
                            "[D_SYNTAX] an array subscript needs at least one key",
                        );
                    }
                    let span = e.span.to(self.toks[self.pos - 1].span);
                    let kind = match &e.kind {
                        ExprKind::Ident(n) => ExprKind::Index(n.clone(), keys),
                        _ => ExprKind::Subscript(Box::new(e), keys),
                    };
                    e = Expr { kind, span };
                }
                Tok::Punct(p @ ("." | "->")) => {
                    self.enter()?;
                    self.bump();
                    let (m, mspan) = self.ident()?;
                    let span = e.span.to(mspan);
                    let kind = if p == "." {
                        ExprKind::Member(Box::new(e), m)
                    } else {
                        ExprKind::Arrow(Box::new(e), m)
                    };
                    e = Expr { kind, span };
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
                None => return self.err(span, int_error(&s)),
            },
            Tok::Float(_) => {
                return self.err(
                    span,
                    "[D_SYNTAX] floating-point constants are not permitted",
                )
            }
            Tok::Char(c) => ExprKind::Int(c as i8 as i64 as u64, IntForm::default()),
            // D's built-in alias for address 0 (the Guide's `x = (int *)NULL;`), the integer
            // constant 0 as C's `#define NULL 0`, so it compares with any pointer or integer.
            Tok::Ident(name) if name == "NULL" => ExprKind::Int(0, IntForm::default()),
            Tok::Str(mut s) => {
                // Adjacent string literals concatenate, as in C.
                while let Tok::Str(more) = self.peek().tok.clone() {
                    self.bump();
                    s.extend(more);
                }
                ExprKind::Str(s)
            }
            Tok::Macro { name, string } => {
                let v = self.macro_value(&name, string, span)?;
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
                    return self.err(
                        sp,
                        format!("[D_SYNTAX] syntax error: expected '->' after '{name}'"),
                    );
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
            Tok::Ident(name) if name == "sizeof" => {
                if self.is("(") && self.is_type_start(1) {
                    self.bump();
                    let ty = self.type_name()?;
                    let close = self.expect(")")?;
                    return Ok(Expr {
                        kind: ExprKind::SizeofType(ty),
                        span: span.to(close),
                    });
                }
                let e = self.nested(Self::unary)?;
                let span = span.to(e.span);
                return Ok(Expr {
                    kind: ExprKind::SizeofExpr(Box::new(e)),
                    span,
                });
            }
            Tok::Ident(name) if name == "offsetof" => {
                self.expect("(")?;
                let ty = self.type_name()?;
                self.expect(",")?;
                let (m, _) = self.ident()?;
                let close = self.expect(")")?;
                return Ok(Expr {
                    kind: ExprKind::Offsetof(ty, m),
                    span: span.to(close),
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
            Tok::Ident(name) if name == "xlate" && self.is("<") => {
                self.bump();
                let ty = self.type_name()?;
                self.expect(">")?;
                self.expect("(")?;
                let e = self.nested(Self::expr)?;
                let close = self.expect(")")?;
                return Ok(Expr {
                    kind: ExprKind::Xlate(ty, Box::new(e)),
                    span: span.to(close),
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
                        "[D_SYNTAX] syntax error: expected an expression, found {}",
                        Self::describe(&tok)
                    ),
                )
            }
        };
        Ok(Expr { kind, span })
    }

    /// Make `name` a type name, as a `typedef` of an earlier part of the program would
    /// (the types of the built-in prelude).
    pub fn add_typedef(&mut self, name: &str) {
        self.typedefs.insert(name.to_string());
    }

    /// `translator OUT < IN NAME > { member = expr; ... };`
    fn translator(&mut self) -> PResult<Item> {
        self.bump();
        let span = self.peek().span;
        let out = self.type_name()?;
        self.expect("<")?;
        let inp = self.type_name()?;
        let (name, _) = self.ident()?;
        self.expect(">")?;
        self.expect("{")?;
        let mut members = Vec::new();
        while !self.eat("}") {
            if self.eat(";") {
                continue;
            }
            let (m, mspan) = self.ident()?;
            self.expect("=")?;
            let e = self.assign()?;
            members.push((m, e, mspan));
            if !self.is("}") {
                self.expect(";")?;
            }
        }
        self.expect(";")?;
        Ok(Item::Translator(Translator {
            out,
            inp,
            name,
            members,
            span,
        }))
    }
}
