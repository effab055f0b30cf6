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
            set_option(c, name, value, checked, at).or_else(|m| err(*off, opt.len(), m))
        }
        [(_, "pragma"), (_, "D"), (off, w), ..] => err(
            *off,
            w.len(),
            format!("unsupported #pragma D directive '{w}'"),
        ),
        [(off, w), ..] => err(
            *off,
            w.len(),
            format!("unsupported preprocessor directive '#{w}' (only #pragma D option is)"),
        ),
        [] => err(0, 0, "empty preprocessor directive".into()),
    }
}
