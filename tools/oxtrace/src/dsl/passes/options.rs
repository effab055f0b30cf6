//! Setting options on a program being compiled: `-x name=value` and `#pragma D option`
//! lines, checked against the kernel's ranges (`crate::options` has the value syntax).

use super::super::error::{CompileError, GResult, Span};
use super::super::Compiled;
use crate::options::{
    frames_bound, parse_interval, parse_size, range_error, runtime_value, CPP_OPTIONS,
    FLAG_OPTIONS, TOOL_OPTIONS,
};
use oxtrace_core::program::OptKey;

/// Where a kernel option was set, for errors found once the whole image is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionAt {
    /// `-x TEXT`.
    X(String),
    /// `#pragma D option`, the span of its `name=value`.
    Pragma(Span),
}

/// Apply option `name[=value]` set `at`; `checked` false keeps an out-of-range value (for
/// tests that compare the compiler's verdict with the kernel's).
pub(crate) fn set_option(
    c: &mut Compiled,
    name: &str,
    value: Option<&str>,
    checked: bool,
    at: OptionAt,
) -> Result<(), String> {
    if let Some(key) = OptKey::from_name(name) {
        let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
        let parsed = match key {
            OptKey::Switchrate | OptKey::Cleanrate | OptKey::Aggrate => parse_interval(v),
            OptKey::Bufpolicy => crate::options::parse_bufpolicy(v),
            _ => parse_size(v),
        }
        .ok_or_else(|| match key {
            OptKey::Bufpolicy => {
                format!("invalid value '{v}' for option '{name}': one of switch, fill, ring")
            }
            _ => format!("invalid value '{v}' for option '{name}'"),
        })?;
        // Sizes below the smallest block are rounded up, as DTrace does.
        let parsed = key.round_up(parsed);
        let (lo, hi) = key.range();
        let parsed = if key == OptKey::Cleanrate && !(lo..=hi).contains(&parsed) {
            // DTrace clamps the cleaning rate instead of refusing it.
            let clamped = parsed.clamp(lo, hi);
            c.warnings.push(format!(
                "cleanrate {v} is out of range: clamped to {} Hz",
                1_000_000_000 / clamped
            ));
            clamped
        } else if checked && !(lo..=hi).contains(&parsed) {
            return Err(range_error(key, name, v, parsed));
        } else {
            parsed
        };
        c.options.set(key, parsed);
        if !c.set_options.contains(&key) {
            c.set_options.push(key);
        }
        c.option_at.retain(|(k, _)| *k != key);
        c.option_at.push((key, at));
        return Ok(());
    }
    if CPP_OPTIONS.contains(&name) {
        value.ok_or_else(|| format!("option '{name}' requires a value"))?;
        if matches!(at, OptionAt::Pragma(_)) {
            return Err(format!(
                "option '{name}' cannot be set from a D program: give -x {name}= on the command line, with -C"
            ));
        }
        return Ok(());
    }
    if FLAG_OPTIONS.contains(&name) {
        runtime_value(name, value)?;
    }
    if TOOL_OPTIONS.contains(&name) {
        if let Some(max) = frames_bound(name) {
            let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
            match v.parse::<u32>() {
                Ok(n) if (1..=max).contains(&n) => {}
                _ => {
                    return Err(format!(
                        "invalid value '{v}' for option '{name}': a frame count from 1 to {max}"
                    ))
                }
            }
        }
        if name == "statusrate" {
            let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
            if parse_interval(v).is_none() {
                return Err(format!("invalid value '{v}' for option '{name}'"));
            }
        }
        if name == "maxuprobes" {
            let max = oxtrace_core::limits::MAX_UATTACH;
            let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
            match v.parse::<usize>() {
                Ok(n) if (1..=max).contains(&n) => {}
                _ => {
                    return Err(format!(
                        "invalid value '{v}' for option '{name}': a probe count from 1 to {max}"
                    ))
                }
            }
        }
        if name == "oformat" {
            let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
            if !crate::cli::OUTPUT_FORMATS.contains(&v) {
                return Err(format!(
                    "invalid value '{v}' for option '{name}': one of {}",
                    crate::cli::OUTPUT_FORMATS.join(", ")
                ));
            }
        }
        if name == "quiet" {
            c.quiet = true;
        }
        c.tool_options
            .insert(name.to_string(), value.unwrap_or("").to_string());
        return Ok(());
    }
    Err(format!("unknown option '{name}'"))
}

/// DTrace's stability levels and dependency classes, the words of `#pragma D attributes`.
const STABILITY: &[&str] = &[
    "Internal", "Private", "Obsolete", "External", "Unstable", "Evolving", "Stable", "Standard",
];
const DEP_CLASS: &[&str] = &["Unknown", "CPU", "Platform", "Group", "ISA", "Common"];

/// Whether `a` is an attribute triple `Name/Data/Class` (`Stable/Evolving/Common`).
fn is_attributes(a: &str) -> bool {
    let p: Vec<&str> = a.split('/').collect();
    matches!(p[..], [n, d, c] if STABILITY.contains(&n) && STABILITY.contains(&d) && DEP_CLASS.contains(&c))
}

/// Apply a `#pragma` line (`text` is what follows `#`), as DTrace's lexer does wherever the
/// line stands: `option`, `error`, `depends_on`, `attributes` and `binding` of the `D`
/// namespace; other namespaces' pragmas (`#pragma ident`) are ignored, as in C.
pub(crate) fn pragma(
    c: &mut Compiled,
    src: &str,
    input: &str,
    text: &str,
    span: Span,
    checked: bool,
) -> GResult<()> {
    let err = |off: usize, len: usize, msg: String| {
        Err(CompileError::at(
            src,
            input,
            Span {
                start: span.start + 1 + off,
                len: len.max(1),
            },
            msg,
        ))
    };
    let words: Vec<(usize, &str)> = text
        .split_ascii_whitespace()
        .map(|w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
        .collect();
    let end = text.trim_end().len();
    match words.as_slice() {
        [(_, "pragma"), (_, "D"), (_, "option"), (off, opt)] => {
            let (name, value) = match opt.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (*opt, None),
            };
            let at = OptionAt::Pragma(Span {
                start: span.start + 1 + off,
                len: opt.len(),
            });
            set_option(c, name, value, checked, at)
                .or_else(|m| err(*off, opt.len(), format!("[D_PRAGMA_OPTSET] {m}")))
        }
        [(_, "pragma"), (_, "D"), (off, "option"), rest @ ..] => {
            let (at, len) = match rest {
                [_, (o, _), ..] => (*o, end - o),
                _ => (*off, 6),
            };
            err(
                at,
                len,
                "[D_PRAGMA_MALFORM] #pragma D option takes one name or name=value, with no blanks in it"
                    .into(),
            )
        }
        [(_, "pragma"), (_, "D"), (off, "error"), ..] => {
            let msg = text[off + 5..].trim();
            let msg = msg
                .strip_prefix('"')
                .and_then(|m| m.strip_suffix('"'))
                .unwrap_or(msg);
            err(*off, end - off, format!("[D_PRAGERR] #error: {msg}"))
        }
        [(_, "pragma"), (_, "D"), (off, "depends_on"), rest @ ..] => match rest {
            [(_, "library"), (o, _)] => err(
                *o,
                end - o,
                "[D_PRAGMA_DEPEND] a program cannot depend on a D library: only a library can"
                    .into(),
            ),
            [(_, "provider"), (o, p)] => {
                if super::probe_spec::PROVIDERS.contains(p) || *p == "pid" {
                    Ok(())
                } else {
                    err(
                        *o,
                        p.len(),
                        format!("[D_PRAGMA_DEPEND] program requires provider {p}, which is not available"),
                    )
                }
            }
            [(_, "module"), (o, m)] => {
                if module_present(m) {
                    Ok(())
                } else {
                    err(
                        *o,
                        m.len(),
                        format!("[D_PRAGMA_DEPEND] program requires module {m}, which is not loaded"),
                    )
                }
            }
            [(o, class), _] => err(
                *o,
                class.len(),
                format!("[D_PRAGMA_INVAL] invalid class {class}: #pragma D depends_on takes library, module or provider"),
            ),
            _ => err(
                *off,
                end - off,
                "[D_PRAGMA_MALFORM] #pragma D depends_on takes a class and a name".into(),
            ),
        },
        // Of a name, or of a provider's part: `attributes A provider io provider`.
        [(_, "pragma"), (_, "D"), (off, "attributes"), rest @ ..] => match rest {
            [(o, a), name @ ..] if name.len() == 1 || matches!(name, [(_, "provider"), _, _]) => {
                // Stability is reported by nothing here: the attributes are checked, then
                // kept by no one, as a consumer that does not print stability would.
                if is_attributes(a) {
                    Ok(())
                } else {
                    err(
                        *o,
                        a.len(),
                        format!("[D_PRAGMA_INVAL] invalid attributes {a}: want name/data/class stabilities, as Stable/Stable/Common"),
                    )
                }
            }
            _ => err(
                *off,
                end - off,
                "[D_PRAGMA_MALFORM] #pragma D attributes takes attributes and a name".into(),
            ),
        },
        [(_, "pragma"), (_, "D"), (off, "binding"), rest @ ..] => match rest {
            [(o, v), _] if !is_version(v.trim_matches('"')) => err(
                *o,
                v.len(),
                format!("[D_PRAGMA_INVAL] invalid version {v} in #pragma D binding"),
            ),
            [_, _] => Ok(()),
            _ => err(
                *off,
                end - off,
                "[D_PRAGMA_MALFORM] #pragma D binding takes a version and a name".into(),
            ),
        },
        [(_, "pragma"), (_, "D"), (off, w), ..] => err(
            *off,
            w.len(),
            format!("[D_PRAGMA_INVAL] unknown #pragma D directive '{w}'"),
        ),
        [(_, "pragma"), ..] => Ok(()),
        [(off, w), ..] => err(
            *off,
            w.len(),
            format!("[D_PRAGCTL_INVAL] unsupported preprocessor directive '#{w}': run the program through cpp with -C"),
        ),
        [] => err(0, 0, "[D_PRAGCTL_INVAL] empty preprocessor directive".into()),
    }
}

/// Whether `v` is a D version: `major.minor[.micro]`, as `#pragma D binding "1.0"` names.
fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether kernel module `m` is loaded (or built in): `#pragma D depends_on module`.
fn module_present(m: &str) -> bool {
    matches!(m, "vmlinux" | "kernel")
        || (!m.contains('/') && std::path::Path::new("/sys/module").join(m).exists())
}
