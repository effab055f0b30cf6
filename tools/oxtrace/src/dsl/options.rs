//! Options: `-x name=value` and `#pragma D option`, their value syntax (sizes, intervals),
//! and the options only the tool reads.

use super::error::{CompileError, Span};
use super::gen::GResult;
use super::Compiled;
use oxtrace_core::program::OptKey;

fn time_unit_ns(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" | "nsec" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" | "hour" => 3_600_000_000_000,
        "d" | "day" => 86_400_000_000_000,
        _ => return None,
    })
}

/// Parse `N[unit]` as an interval in ns; a bare number or `hz` is a frequency.
pub fn parse_interval(s: &str) -> Option<u64> {
    let d = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..d].parse().ok()?;
    if n == 0 {
        return None;
    }
    let unit = &s[d..];
    if unit.is_empty() || unit == "hz" {
        return Some(1_000_000_000 / n).filter(|&v| v > 0);
    }
    n.checked_mul(time_unit_ns(unit)?)
}

/// Parse a size with an optional k/m/g/t suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    let l = s.to_ascii_lowercase();
    let d = l.find(|c: char| !c.is_ascii_digit()).unwrap_or(l.len());
    let n: u64 = l[..d].parse().ok()?;
    let mul: u64 = match &l[d..] {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Options only the tool uses (never sent to the kernel).
pub const TOOL_OPTIONS: &[&str] = &[
    "quiet",
    "aggsortkey",
    "aggsortrev",
    "aggsortpos",
    "aggsortkeypos",
];

/// Apply option `name[=value]`; errors carry the message.
pub fn apply_option(c: &mut Compiled, name: &str, value: Option<&str>) -> Result<(), String> {
    if let Some(key) = OptKey::from_name(name) {
        let v = value.ok_or_else(|| format!("option '{name}' requires a value"))?;
        let parsed = match key {
            OptKey::Switchrate | OptKey::Cleanrate | OptKey::Aggrate => parse_interval(v),
            _ => parse_size(v),
        }
        .ok_or_else(|| format!("invalid value '{v}' for option '{name}'"))?;
        let (lo, hi) = key.range();
        let parsed = if key == OptKey::Cleanrate && !(lo..=hi).contains(&parsed) {
            let clamped = parsed.clamp(lo, hi);
            c.warnings.push(format!(
                "cleanrate {v} is out of range: clamped to {} Hz",
                1_000_000_000 / clamped
            ));
            clamped
        } else if !(lo..=hi).contains(&parsed) {
            return Err(format!(
                "value '{v}' for option '{name}' is out of range ({lo}..={hi})"
            ));
        } else {
            parsed
        };
        c.options.set(key, parsed);
        if !c.set_options.contains(&key) {
            c.set_options.push(key);
        }
        return Ok(());
    }
    if TOOL_OPTIONS.contains(&name) {
        if name == "quiet" {
            c.quiet = true;
        }
        c.tool_options
            .insert(name.to_string(), value.unwrap_or("").to_string());
        return Ok(());
    }
    Err(format!("unknown option '{name}'"))
}

pub(super) fn pragma(
    c: &mut Compiled,
    src: &str,
    input: &str,
    text: &str,
    span: Span,
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
            apply_option(c, name, value).or_else(|m| err(*off, opt.len(), m))
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
