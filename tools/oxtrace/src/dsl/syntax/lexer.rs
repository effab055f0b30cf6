//! The D lexer: tokens with their spans.

use super::super::error::{line_marker, Span};

/// A token kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An integer literal's text (suffixes included; parsed later).
    Int(String),
    /// A floating-point constant's text, which D does not permit in expressions.
    Float(String),
    /// A string literal, escapes resolved.
    Str(Vec<u8>),
    /// A character literal's value.
    Char(u8),
    /// `$name` or `$N` (`dollar2` set for `$$N`).
    Macro {
        /// The name after the `$`.
        name: String,
        /// `$$`: force a string.
        string: bool,
    },
    /// `@name` (empty name for `@`).
    Agg(String),
    /// A `#pragma` line: its text after `#`.
    Pragma(String),
    /// Punctuation or operator.
    Punct(&'static str),
    /// End of input.
    Eof,
}

/// A token and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its span.
    pub span: Span,
}

/// Longest first, so that `<<=` wins over `<<` and `<`.
const PUNCTS: &[&str] = &[
    "...", "<<=", ">>=", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "^^",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::", "+", "-", "*", "/", "%", "<", ">", "=",
    "!", "~", "&", "|", "^", "?", ":", ";", ",", "(", ")", "{", "}", "[", "]", ".",
];

/// A lexing error: span and message.
pub type LexError = (Span, String);

/// Split `src` into tokens.
pub fn lex(src: &str) -> Result<Vec<Token>, LexError> {
    let b = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            match src[i + 2..].find("*/") {
                Some(p) => i = i + 2 + p + 2,
                None => {
                    return Err((
                        Span::new(start, start + 2),
                        "end-of-file encountered before matching */".into(),
                    ))
                }
            }
            continue;
        }
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        if c == b'#' && line_start {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            // A line marker (`# N "file"`, `#line N`) only renumbers the lines that follow,
            // which error positions read from the text itself.
            if line_marker(&src[start..i]).is_some() {
                continue;
            }
            out.push(Token {
                tok: Tok::Pragma(src[start + 1..i].to_string()),
                span: Span::new(start, i),
            });
            continue;
        }
        line_start = false;
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let quoted = c == b'`'
            && b.get(i + 1)
                .is_some_and(|&c| ident(c) && !c.is_ascii_digit());
        if c.is_ascii_alphabetic() || c == b'_' || quoted {
            i += 1;
            while i < b.len() && ident(b[i]) {
                i += 1;
            }
            // An external kernel symbol: `name, or module`name.
            if !quoted && b.get(i) == Some(&b'`') && b.get(i + 1).is_some_and(|&c| ident(c)) {
                i += 1;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Ident(src[start..i].to_string()),
                span: Span::new(start, i),
            });
            continue;
        }
        // A floating-point constant (`1.5`, `.5`, `1e3`): a token of its own, which an
        // expression refuses and a probe description (`libc.so.6`) keeps as text.
        let word_end = |mut j: usize| {
            while j < b.len() && ident(b[j]) {
                j += 1;
            }
            j
        };
        if c == b'.' && b.get(i + 1).is_some_and(|c| c.is_ascii_digit()) {
            i = word_end(i + 1);
            out.push(Token {
                tok: Tok::Float(src[start..i].to_string()),
                span: Span::new(start, i),
            });
            continue;
        }
        if c.is_ascii_digit() {
            i = word_end(i);
            let text = &src[start..i];
            let hex = text.starts_with("0x") || text.starts_with("0X");
            if b.get(i) == Some(&b'.') || (!hex && text.contains(['e', 'E'])) {
                if b.get(i) == Some(&b'.') {
                    i = word_end(i + 1);
                }
                out.push(Token {
                    tok: Tok::Float(src[start..i].to_string()),
                    span: Span::new(start, i),
                });
                continue;
            }
            out.push(Token {
                tok: Tok::Int(src[start..i].to_string()),
                span: Span::new(start, i),
            });
            continue;
        }
        if c == b'"' {
            let (mut s, end) =
                literal(b, start, "[D_STR_NL] newline encountered in string literal")?;
            i = end;
            // A NUL (`\0`) ends the string, as it ends DTrace's C string.
            if let Some(n) = s.iter().position(|&c| c == 0) {
                s.truncate(n);
            }
            out.push(Token {
                tok: Tok::Str(s),
                span: Span::new(start, i),
            });
            continue;
        }
        if c == b'\'' {
            // A character constant: one character is a char; up to eight are an int whose
            // bytes they are, the first the most significant (as C's multi-character
            // constants and DTrace's).
            let (bytes, end) = literal(
                b,
                start,
                "[D_CHR_NL] newline encountered in character constant",
            )?;
            i = end;
            let span = Span::new(start, i);
            let tok = match bytes.as_slice() {
                [] => return Err((span, "[D_CHR_NULL] empty character constant".into())),
                [v] => Tok::Char(*v),
                m if m.len() > 8 => {
                    return Err((span, "[D_CHR_OFLOW] character constant is too long".into()))
                }
                m => Tok::Int(
                    m.iter()
                        .fold(0u64, |v, &c| (v << 8) | u64::from(c))
                        .to_string(),
                ),
            };
            out.push(Token { tok, span });
            continue;
        }
        if c == b'$' {
            i += 1;
            let string = b.get(i) == Some(&b'$');
            if string {
                i += 1;
            }
            let ns = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if ns == i {
                return Err((
                    Span::new(start, i),
                    "expected a macro name after '$'".into(),
                ));
            }
            out.push(Token {
                tok: Tok::Macro {
                    name: src[ns..i].to_string(),
                    string,
                },
                span: Span::new(start, i),
            });
            continue;
        }
        if c == b'@' {
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Agg(src[start + 1..i].to_string()),
                span: Span::new(start, i),
            });
            continue;
        }
        match PUNCTS.iter().find(|p| src[i..].starts_with(**p)) {
            Some(p) => {
                i += p.len();
                out.push(Token {
                    tok: Tok::Punct(p),
                    span: Span::new(start, i),
                });
            }
            None if c == b'`' => {
                // D's scoping operator with no name after it: a symbol no one has.
                return Err((
                    Span::new(start, start + 1),
                    "[D_IDENT_UNDEF] failed to resolve `: Unknown symbol name".into(),
                ));
            }
            None => {
                let ch = src[i..].chars().next().unwrap_or('?');
                return Err((
                    Span::new(start, start + ch.len_utf8()),
                    format!("invalid character '{}'", ch.escape_default()),
                ));
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(b.len(), b.len()),
    });
    Ok(out)
}

/// The bytes of the string or character literal whose opening quote is at `start`, escapes
/// read, and the offset after its closing quote; `nl` is the error of a newline inside it.
fn literal(b: &[u8], start: usize, nl: &str) -> Result<(Vec<u8>, usize), LexError> {
    let quote = b[start];
    let mut i = start + 1;
    let mut out = Vec::new();
    loop {
        match b.get(i) {
            None => {
                return Err((
                    Span::new(start, i),
                    format!("end-of-file encountered before matching {}", quote as char),
                ))
            }
            Some(b'\n') => return Err((Span::new(start, i), nl.into())),
            Some(&c) if c == quote => return Ok((out, i + 1)),
            Some(b'\\') => i += escape(b, i, &mut out),
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// Decode the escape at `b[i] == '\\'` into `out` as DTrace decodes one; returns the bytes
/// consumed. An octal escape takes up to three digits, a hexadecimal one every hex digit
/// after it (none is 0), both truncated to a byte; an escape DTrace does not know (`\?`,
/// `\'`, `\c`) stays a backslash and the character, as DTrace keeps it.
fn escape(b: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    let v = match b.get(i + 1) {
        Some(b'n') => b'\n',
        Some(b't') => b'\t',
        Some(b'r') => b'\r',
        Some(b'a') => 0x07,
        Some(b'b') => 0x08,
        Some(b'f') => 0x0c,
        Some(b'v') => 0x0b,
        Some(b'\\') => b'\\',
        Some(b'"') => b'"',
        Some(b'0'..=b'7') => {
            let mut v: u32 = 0;
            let mut n = 1;
            while n < 4 {
                match b.get(i + n) {
                    Some(d @ b'0'..=b'7') => v = v * 8 + u32::from(d - b'0'),
                    _ => break,
                }
                n += 1;
            }
            out.push(v as u8);
            return n;
        }
        Some(b'x') => {
            let mut v: u8 = 0;
            let mut n = 2;
            while let Some(d) = b.get(i + n).and_then(|c| (*c as char).to_digit(16)) {
                v = v.wrapping_mul(16).wrapping_add(d as u8);
                n += 1;
            }
            out.push(v);
            return n;
        }
        // A newline is the literal's error, at the loop.
        Some(b'\n') | None => {
            out.push(b'\\');
            return 1;
        }
        Some(&c) => {
            out.extend([b'\\', c]);
            return 2;
        }
    };
    out.push(v);
    2
}
