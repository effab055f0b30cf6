//! Compile errors with `line:column`, the source line and a caret under the problem.

use std::fmt;

/// A span in the source: byte offset and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Length in bytes (at least 1 for the caret).
    pub len: usize,
}

impl Span {
    /// A span from `start` to `end` (exclusive).
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start,
            len: end.saturating_sub(start),
        }
    }

    /// The span covering `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        let s = self.start.min(other.start);
        let e = (self.start + self.len).max(other.start + other.len);
        Span::new(s, e)
    }
}

/// A compile error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// Name of the input (`-e`, a file name).
    pub input: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What is wrong.
    pub msg: String,
    /// The source line.
    pub src_line: String,
    /// Caret length in characters.
    pub width: usize,
}

impl CompileError {
    /// Build an error for `span` of `src`.
    pub fn at(src: &str, input: &str, span: Span, msg: impl Into<String>) -> CompileError {
        // A span's ends may fall inside a multi-byte character (a byte-wise scan that
        // stopped there): widen it to whole characters.
        let start = src.floor_char_boundary(span.start.min(src.len()));
        let line_start = src[..start].rfind('\n').map_or(0, |p| p + 1);
        let line_end = src[start..].find('\n').map_or(src.len(), |p| start + p);
        let (file, line) = source_line(src, line_start);
        let col = src[line_start..start].chars().count() + 1;
        let end =
            src.ceil_char_boundary(span.start.saturating_add(span.len).min(line_end).max(start));
        let width = src[start..end].chars().count().max(1);
        CompileError {
            input: file.unwrap_or_else(|| input.to_string()),
            line,
            col,
            msg: msg.into(),
            src_line: src[line_start..line_end].to_string(),
            width,
        }
    }

    /// The `line:column` position.
    pub fn position(&self) -> String {
        format!("{}:{}", self.line, self.col)
    }

    /// The source line and the caret line, without the header.
    pub fn snippet(&self) -> String {
        let ln = self.line.to_string();
        let pad = " ".repeat(ln.len());
        // Tabs keep their width so that the caret lines up under them.
        let lead: String = self
            .src_line
            .chars()
            .take(self.col - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!(
            "{pad} |\n{ln} | {}\n{pad} | {lead}{}",
            self.src_line,
            "^".repeat(self.width)
        )
    }
}

/// The line a line marker gives the line after it, and the file it names, if any: cpp's
/// `# N "file" flags` and C's `#line N "file"`, which D honours as C does (so that an error
/// in a program run through `-C` names its own line, or an `#include`d file's).
pub fn line_marker(l: &str) -> Option<(usize, Option<String>)> {
    let rest = l.trim_start().strip_prefix('#')?.trim_start();
    let rest = match rest.strip_prefix("line") {
        Some(r) if r.starts_with([' ', '\t']) => r.trim_start(),
        _ => rest,
    };
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let d = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let n = rest[..d].parse().ok()?;
    let rest = rest[d..].trim_start();
    if rest.is_empty() {
        return Some((n, None));
    }
    // A C string: `\\` and `\"` are the escapes cpp writes in file names.
    let mut chars = rest.strip_prefix('"')?.chars();
    let mut file = String::new();
    loop {
        match chars.next()? {
            '"' => break,
            '\\' => file.push(chars.next()?),
            c => file.push(c),
        }
    }
    Some((n, Some(file)))
}

/// The file (if a line marker named one) and line number of the line starting at byte
/// `line_start` of `src`: its count of lines, reset by each line marker before it.
fn source_line(src: &str, line_start: usize) -> (Option<String>, usize) {
    let mut file = None;
    let mut line = 1;
    if !src[..line_start].contains('#') {
        return (None, src[..line_start].matches('\n').count() + 1);
    }
    for l in src[..line_start].split_inclusive('\n') {
        match line_marker(l.trim_end_matches('\n')) {
            Some((n, f)) => {
                line = n;
                if f.is_some() {
                    file = f;
                }
            }
            None => line += 1,
        }
    }
    (file, line)
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "error: {}\n{}--> {}:{}:{}\n{}",
            self.msg,
            " ".repeat(self.line.to_string().len()),
            self.input,
            self.line,
            self.col,
            self.snippet()
        )
    }
}

impl std::error::Error for CompileError {}

/// The result of a compiler step that fails with a [`CompileError`].
pub(crate) type GResult<T> = Result<T, CompileError>;
