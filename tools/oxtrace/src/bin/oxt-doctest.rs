//! oxt-doctest: runs the console examples of a reStructuredText document and compares what
//! they print with what the document shows, so a tutorial never goes stale.
//!
//! Usage: `oxt-doctest FILE.rst` (TAP on stdout, one test per example).
//!
//! An example is a `.. code-block:: console` block. A line starting with `# ` is a command
//! (run with `/bin/sh -c`, stderr merged into stdout, as a terminal shows it; a line ending
//! in `\` or inside an open `'` quote continues on the next one); the lines after it, up to the next command, are what
//! it must print. Comparison ignores what legitimately changes from run to run: every
//! number matches any number, runs of blanks and of histogram `@`s compare as one, and an
//! expected line `...` matches any number of lines. The command must exit 0.
//!
//! An rst comment right before a block changes how it is used:
//!
//! - `.. doctest: skip ...`: the block is not run (say why in the comment's text);
//! - `.. doctest: status N`: its commands must exit with status N instead of 0;
//! - `.. doctest: file PATH`: the block (any literal block, e.g. `.. code-block:: c`) is
//!   not a console example but a file the later examples use: it is written to PATH.

use std::process::{Command, ExitCode};

/// One command of an example and the lines it must print.
enum Example {
    /// Run `cmd`; it must print `expect` and exit with `status`.
    Run {
        line: usize,
        cmd: String,
        expect: Vec<String>,
        status: i32,
    },
    /// Write `text` to `path`.
    File { path: String, text: String },
}

/// What the rst comment before a block said.
#[derive(Default)]
enum Directive {
    #[default]
    None,
    Skip,
    Status(i32),
    File(String),
}

fn examples(text: &str) -> Vec<Example> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut directive = Directive::None;
    while i < lines.len() {
        let l = lines[i].trim_end();
        if let Some(d) = l.strip_prefix(".. doctest: ") {
            let mut w = d.split_whitespace();
            directive = match (w.next(), w.next()) {
                (Some("skip"), _) => Directive::Skip,
                (Some("status"), Some(n)) => Directive::Status(n.parse().unwrap_or(-1)),
                (Some("file"), Some(p)) => Directive::File(p.to_string()),
                _ => Directive::None,
            };
            i += 1;
            continue;
        }
        let t = l.trim_start();
        let literal = t.starts_with(".. code-block::") || (t == "::" || t.ends_with(" ::"));
        let console = t == ".. code-block:: console";
        let file = literal && matches!(directive, Directive::File(_));
        if !(console || file) {
            if !l.is_empty() && !l.starts_with("..") {
                directive = Directive::None;
            }
            i += 1;
            continue;
        }
        let indent = l.len() - l.trim_start().len();
        i += 1;
        // The block: every following line that is blank or indented deeper than the
        // directive.
        let mut block: Vec<(usize, &str)> = Vec::new();
        while i < lines.len() {
            let b = lines[i];
            let deeper = b.len() - b.trim_start().len() > indent;
            if !b.trim().is_empty() && !deeper {
                break;
            }
            block.push((i + 1, b));
            i += 1;
        }
        while block.last().is_some_and(|(_, b)| b.trim().is_empty()) {
            block.pop();
        }
        let body_indent = block
            .iter()
            .filter(|(_, b)| !b.trim().is_empty())
            .map(|(_, b)| b.len() - b.trim_start().len())
            .min()
            .unwrap_or(0);
        let status = match std::mem::take(&mut directive) {
            Directive::Skip => continue,
            Directive::File(path) => {
                let mut text = String::new();
                for (_, b) in &block {
                    text.push_str(b.get(body_indent..).unwrap_or("").trim_end());
                    text.push('\n');
                }
                let text = text.trim_start_matches('\n').to_string();
                out.push(Example::File { path, text });
                continue;
            }
            Directive::Status(n) => n,
            Directive::None => 0,
        };
        let mut j = 0;
        while j < block.len() {
            let (no, raw) = block[j];
            let b = raw.get(body_indent..).unwrap_or("");
            let Some(first) = b.strip_prefix("# ") else {
                j += 1;
                continue;
            };
            // A line ending in `\\`, or inside an open single quote, goes on: the shell
            // gets the text as written.
            let mut cmd = first.to_string();
            while cmd.ends_with('\\') || cmd.matches('\'').count() % 2 == 1 {
                j += 1;
                let Some((_, r)) = block.get(j) else { break };
                cmd.push('\n');
                cmd.push_str(r.get(body_indent..).unwrap_or(""));
            }
            j += 1;
            let mut expect = Vec::new();
            while j < block.len() {
                let b = block[j].1.get(body_indent..).unwrap_or("");
                if b.starts_with("# ") {
                    break;
                }
                expect.push(b.to_string());
                j += 1;
            }
            while expect.last().is_some_and(|e| e.trim().is_empty()) {
                expect.pop();
            }
            out.push(Example::Run {
                line: no,
                cmd,
                expect,
                status,
            });
        }
    }
    out
}

/// A line as it is compared: numbers, blanks and histogram bars folded.
fn norm(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.trim_end().chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || (c == '-' && chars.peek().is_some_and(|d| d.is_ascii_digit())) {
            while chars
                .peek()
                .is_some_and(|d| d.is_ascii_hexdigit() || *d == 'x' || *d == '.')
            {
                chars.next();
            }
            out.push('N');
        } else if c == ' ' || c == '\t' {
            while chars.peek().is_some_and(|d| *d == ' ' || *d == '\t') {
                chars.next();
            }
            out.push(' ');
        } else if c == '@' && out.ends_with('|') {
            while chars.peek() == Some(&'@') {
                chars.next();
            }
            out.push('@');
        } else {
            out.push(c);
        }
    }
    out.trim().to_string()
}

/// Whether `got` matches `want`, where a `want` line `...` matches any run of lines.
fn matches(want: &[String], got: &[String]) -> bool {
    // m[i][j]: want[i..] matches got[j..].
    let (w, g) = (want.len(), got.len());
    let mut m = vec![vec![false; g + 1]; w + 1];
    m[w][g] = true;
    for i in (0..w).rev() {
        for j in (0..=g).rev() {
            m[i][j] = if want[i] == "..." {
                m[i + 1][j] || (j < g && m[i][j + 1])
            } else {
                j < g && want[i] == got[j] && m[i + 1][j + 1]
            };
        }
    }
    m[0][0]
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: oxt-doctest FILE.rst");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("oxt-doctest: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let ex = examples(&text);
    let runs = ex
        .iter()
        .filter(|e| matches!(e, Example::Run { .. }))
        .count();
    println!("TAP version 13");
    println!("1..{runs}");
    let mut failed = 0;
    let mut n = 0;
    for e in &ex {
        let (line, cmd, expect, status) = match e {
            Example::File { path, text } => {
                if let Err(err) = std::fs::write(path, text) {
                    println!("# cannot write {path}: {err}");
                }
                continue;
            }
            Example::Run {
                line,
                cmd,
                expect,
                status,
            } => (line, cmd, expect, *status),
        };
        n += 1;
        let first = cmd.lines().next().unwrap_or("");
        let name = format!("{path}:{line}: {first}");
        let out = Command::new("/bin/sh")
            .arg("-c")
            .arg(format!("exec 2>&1; {cmd}"))
            .output();
        let got: Vec<String> = match &out {
            Ok(o) => String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect(),
            Err(err) => vec![format!("cannot run: {err}")],
        };
        let mut got_n: Vec<String> = got.iter().map(|l| norm(l)).collect();
        while got_n.last().is_some_and(|l| l.is_empty()) {
            got_n.pop();
        }
        let want_n: Vec<String> = expect
            .iter()
            .map(|l| {
                if l.trim() == "..." {
                    "...".into()
                } else {
                    norm(l)
                }
            })
            .collect();
        let status_ok = out.as_ref().is_ok_and(|o| o.status.code() == Some(status));
        if status_ok && matches(&want_n, &got_n) {
            println!("ok {n} {name}");
        } else {
            failed += 1;
            println!("not ok {n} {name}");
            if let Ok(o) = &out {
                println!("# {} (the document expects status {status})", o.status);
            }
            println!("# the document shows:");
            for l in expect {
                println!("#   {l}");
            }
            println!("# it printed:");
            for l in &got {
                println!("#   {l}");
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_numbers_blanks_and_bars() {
        assert_eq!(norm("  ksys_read    1234"), "ksys_read N");
        assert_eq!(norm("  -5 |@@@@@@   12"), "N |@ N");
        assert_eq!(norm("value 0x1f -3"), "value N N");
    }

    #[test]
    fn ellipsis_matches_any_run() {
        let w: Vec<String> = ["a", "...", "c"].iter().map(|s| s.to_string()).collect();
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(matches(&w, &g(&["a", "c"])));
        assert!(matches(&w, &g(&["a", "b", "b", "c"])));
        assert!(!matches(&w, &g(&["a", "b"])));
    }

    #[test]
    fn extracts_commands_with_continuations_and_skips() {
        let doc = "Intro\n\n.. code-block:: console\n\n   # oxtrace -e 'x' \\\n     -c ls\n   out 1\n\n   # echo 'h\n   i'\n   hi\n\n.. doctest: skip (needs Ctrl-C)\n\n.. code-block:: console\n\n   # oxtrace forever\n\nText\n";
        let ex = examples(doc);
        assert_eq!(ex.len(), 2);
        let Example::Run { cmd, expect, .. } = &ex[0] else {
            panic!("not a command")
        };
        assert_eq!(cmd, "oxtrace -e 'x' \\\n  -c ls");
        assert_eq!(expect, &vec!["out 1".to_string()]);
        let Example::Run { cmd, status, .. } = &ex[1] else {
            panic!("not a command")
        };
        assert_eq!(cmd, "echo 'h\ni'");
        assert_eq!(*status, 0);
    }

    #[test]
    fn file_and_status_directives() {
        let doc = ".. doctest: file /tmp/x.d\n\n.. code-block:: c\n\n   BEGIN { exit(0); }\n\n.. doctest: status 1\n\n.. code-block:: console\n\n   # false\n";
        let ex = examples(doc);
        assert_eq!(ex.len(), 2);
        let Example::File { path, text } = &ex[0] else {
            panic!("not a file")
        };
        assert_eq!(
            (path.as_str(), text.as_str()),
            ("/tmp/x.d", "BEGIN { exit(0); }\n")
        );
        assert!(matches!(&ex[1], Example::Run { status: 1, .. }));
    }
}
