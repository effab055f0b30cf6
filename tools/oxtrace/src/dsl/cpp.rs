//! `-C`: the program text through the C preprocessor, as dtrace -C does.
//!
//! The text goes to `cpp` on its standard input; its line markers are turned back into
//! blank lines so that every line of the program keeps its number in compile errors, and
//! its diagnostics name the program (a file, or `-e`) instead of `<stdin>`.

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

/// Run `text` (named `input` in messages) through [`CPP`] with `args`.
pub fn preprocess(text: &str, input: &str, args: &[CppArg]) -> Result<String, String> {
    let mut cmd = Command::new(CPP);
    // No builtin Linux/GCC names (`linux`, `unix`) that D programs may use as words.
    cmd.arg("-undef");
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
                "-C needs the C preprocessor '{CPP}', which is not installed (not found in PATH)"
            )
        }
        _ => format!("-C: cannot run '{CPP}': {e}"),
    })?;
    let mut stdin = child.stdin.take().ok_or("-C: no pipe to cpp")?;
    let owned = text.to_string();
    // Written from a thread: a large program would fill the pipe while cpp's output waits.
    let writer = std::thread::spawn(move || stdin.write_all(owned.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("-C: '{CPP}': {e}"))?;
    let _ = writer.join();
    let err = String::from_utf8_lossy(&out.stderr).replace("<stdin>", input);
    if !out.status.success() {
        let msg = err.trim_end();
        return Err(if msg.is_empty() {
            format!("-C: '{CPP}' failed ({})", out.status)
        } else {
            msg.to_string()
        });
    }
    if !err.trim().is_empty() {
        eprint!("{err}");
    }
    Ok(unmark(&String::from_utf8_lossy(&out.stdout)))
}

/// cpp's output without its line markers (`# N "file" flags`): a marker for the program
/// itself pads with blank lines up to line N, so the program's lines keep their numbers
/// (lines an `#include` brings in come between them).
fn unmark(out: &str) -> String {
    let mut text = String::with_capacity(out.len());
    let mut line = 1usize;
    let mut main = true;
    for l in out.lines() {
        if let Some((n, file)) = marker(l) {
            main = file == "<stdin>";
            if main {
                while line < n {
                    text.push('\n');
                    line += 1;
                }
            }
            continue;
        }
        text.push_str(l);
        text.push('\n');
        if main {
            line += 1;
        }
    }
    text
}

/// A line marker's line number and file name.
fn marker(l: &str) -> Option<(usize, &str)> {
    let rest = l.strip_prefix("# ")?;
    let (n, rest) = rest.split_once(' ')?;
    let n = n.parse().ok()?;
    let file = rest.strip_prefix('"')?.split('"').next()?;
    Some((n, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_keep_line_numbers() {
        let out =
            "# 1 \"<stdin>\"\n# 1 \"<built-in>\"\n# 1 \"<stdin>\"\n\n\n# 5 \"<stdin>\"\nBEGIN\n";
        assert_eq!(unmark(out), "\n\n\n\nBEGIN\n");
    }
}
