//! `-C`: the program text through the C preprocessor, as dtrace -C does.
//!
//! The text goes to `cpp` on its standard input; its line markers stay in the text, where
//! the lexer skips them and compile errors read line numbers from them (so an error names
//! the program's own line, or an `#include`d file and its line), and its diagnostics name
//! the program (a file, or `-e`) instead of `<stdin>`.

use std::io::Write;
use std::process::{Command, Stdio};

/// The preprocessor run for `-C` (Debian's `cpp`, found in PATH).
pub const CPP: &str = "cpp";

/// A `-D NAME[=VAL]`, `-U NAME` or `-I DIR` for the preprocessor, in command-line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CppArg {
    /// `-D NAME[=VAL]`.
    Define(String),
    /// `-U NAME`.
    Undef(String),
    /// `-I DIR`.
    Include(String),
}

impl CppArg {
    /// A `-DNAME[=VAL]`, `-UNAME` or `-IDIR` as cpp takes it.
    pub fn parse(a: &str) -> Option<CppArg> {
        if let Some(d) = a.strip_prefix("-D") {
            Some(CppArg::Define(d.to_string()))
        } else if let Some(u) = a.strip_prefix("-U") {
            Some(CppArg::Undef(u.to_string()))
        } else {
            a.strip_prefix("-I").map(|i| CppArg::Include(i.to_string()))
        }
    }
}

/// What DTrace passes the preprocessor before the user's arguments.
const BUILTIN: &[&str] = &[
    "-std=c99",
    "-D__linux",
    "-D__unix",
    "-D__SVR4",
    "-D__SUNW_D=1",
    "-D__SUNW_D_64",
    "-D__Linux",
    "-U__GNUC__",
];

/// Run `text` (named `input` in messages) through [`CPP`] with `args`.
pub fn preprocess(text: &str, input: &str, args: &[CppArg]) -> Result<String, String> {
    preprocess_with(CPP, text, input, args)
}

/// Run `text` (named `input` in messages) through the preprocessor `cpp` (`-x cpppath=`)
/// with `args`, in their order (a `-U` after a `-D` of the same name wins, and the other
/// way round).
pub fn preprocess_with(
    cpp: &str,
    text: &str,
    input: &str,
    args: &[CppArg],
) -> Result<String, String> {
    let mut cmd = Command::new(cpp);
    // DTrace's preprocessor: ISO C (no `linux`, `unix` that D programs may use as words),
    // the system's headers as a 64-bit Linux program sees them (`#include <endian.h>`), and
    // DTrace's names of the system; the user's -D/-U/-I after them.
    cmd.args(BUILTIN);
    if cfg!(target_arch = "x86_64") {
        cmd.arg("-D__amd64");
    }
    for a in args {
        match a {
            CppArg::Define(d) => cmd.arg(format!("-D{d}")),
            CppArg::Undef(u) => cmd.arg(format!("-U{u}")),
            CppArg::Include(i) => cmd.arg(format!("-I{i}")),
        };
    }
    cmd.arg("-");
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            format!(
                "-C needs the C preprocessor '{cpp}', which is not installed (not found in PATH)"
            )
        }
        _ => format!("-C: cannot run '{cpp}': {e}"),
    })?;
    let mut stdin = child.stdin.take().ok_or("-C: no pipe to cpp")?;
    let owned = text.to_string();
    // Written from a thread: a large program would fill the pipe while cpp's output waits.
    let writer = std::thread::spawn(move || stdin.write_all(owned.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("-C: '{cpp}': {e}"))?;
    let _ = writer.join();
    let err = String::from_utf8_lossy(&out.stderr).replace("<stdin>", input);
    if !out.status.success() {
        let msg = err.trim_end();
        return Err(if msg.is_empty() {
            format!(
                "-C: '{cpp}' failed ({}): the preprocessor could not process the program",
                out.status
            )
        } else {
            format!("{msg}\n-C: the preprocessor '{cpp}' could not process the program")
        });
    }
    if !err.trim().is_empty() {
        eprint!("{err}");
    }
    Ok(rename_stdin(&String::from_utf8_lossy(&out.stdout), input))
}

/// cpp's output with its line markers (`# N "file" flags`) kept, for the compiler to number
/// lines by (an error after an `#include` names the program's line, one inside the header
/// the header's), and those of the program itself naming `input` instead of `<stdin>`.
fn rename_stdin(out: &str, input: &str) -> String {
    let quoted = format!("\"{}\"", input.replace('\\', "\\\\").replace('"', "\\\""));
    let mut text = String::with_capacity(out.len());
    for l in out.split_inclusive('\n') {
        if l.starts_with('#') && crate::dsl::error::line_marker(l.trim_end()).is_some() {
            text.push_str(&l.replacen("\"<stdin>\"", &quoted, 1));
        } else {
            text.push_str(l);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::error::{line_marker, CompileError, Span};

    #[test]
    fn markers_name_the_program() {
        let out =
            "# 1 \"<stdin>\"\n# 1 \"<built-in>\"\n# 1 \"<stdin>\"\n\n\n# 5 \"<stdin>\"\nBEGIN\n";
        let t = rename_stdin(out, "a \"b\".d");
        assert!(t.ends_with("# 5 \"a \\\"b\\\".d\"\nBEGIN\n"), "{t}");
        assert_eq!(
            line_marker("# 5 \"a \\\"b\\\".d\" 2"),
            Some((5, Some("a \"b\".d".into())))
        );
        let e = CompileError::at(&t, "x", Span::new(t.len() - 6, t.len() - 1), "m");
        assert_eq!((e.input.as_str(), e.line, e.col), ("a \"b\".d", 5, 1));
    }
}
