//! Option values: the syntax of `-x name=value` and `#pragma D option` values (sizes,
//! intervals), the kernel's range of each, and the options only the tool reads. A leaf: the
//! compiler, the run loop and the aggregation sort all read these.

use oxtrace_core::program::OptKey;

/// A size as the options write it: `64m`, `4k`, or bytes.
pub fn size_text(n: u64) -> String {
    for (shift, suffix) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

/// An interval as the options write it: `1ms`, `60s`, `200us`, or ns.
pub fn interval_text(ns: u64) -> String {
    for (unit, suffix) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns >= unit && ns.is_multiple_of(unit) {
            return format!("{}{suffix}", ns / unit);
        }
    }
    format!("{ns}ns")
}

/// Why `name=v` (parsed to `parsed`) is outside the kernel's range, in the limit's words.
pub fn range_error(key: OptKey, name: &str, v: &str, parsed: u64) -> String {
    let (lo, hi) = key.range();
    let what = match key {
        OptKey::Bufsize => "buffer",
        OptKey::Aggsize => "aggregation buffer",
        OptKey::Dynvarsize => "dynamic variable space",
        OptKey::Strsize => "string size",
        OptKey::Switchrate => "switch rate",
        OptKey::Aggrate => "aggregation rate",
        OptKey::Cleanrate => "cleaning rate",
        OptKey::Nspec => "number of speculations",
        OptKey::Specsize => "speculative buffer",
        OptKey::Scratchsize => "scratch memory",
        OptKey::Bufpolicy => return format!("invalid value '{v}' for option '{name}'"),
    };
    match key {
        OptKey::Switchrate | OptKey::Aggrate | OptKey::Cleanrate if parsed < lo => format!(
            "option {name}={v} is faster than the fastest {what}, {}",
            interval_text(lo)
        ),
        OptKey::Switchrate | OptKey::Aggrate | OptKey::Cleanrate => format!(
            "option {name}={v} is slower than the slowest {what}, {}",
            interval_text(hi)
        ),
        OptKey::Strsize | OptKey::Nspec if parsed < lo => {
            format!("option {name}={v} is below the smallest {what}, {lo}")
        }
        OptKey::Strsize | OptKey::Nspec => {
            format!("option {name}={v} exceeds the largest {what}, {hi}")
        }
        _ if parsed < lo => format!(
            "option {name}={v} is below the smallest {what}, {}",
            size_text(lo)
        ),
        _ => format!(
            "option {name}={v} exceeds the largest {what}, {}",
            size_text(hi)
        ),
    }
}

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

/// The value of option `bufpolicy` named `s` (`switch`, `fill` or `ring`).
pub fn parse_bufpolicy(s: &str) -> Option<u64> {
    use oxtrace_core::buffer::{POLICY_FILL, POLICY_RING, POLICY_SWITCH};
    match s {
        "switch" => Some(POLICY_SWITCH),
        "fill" => Some(POLICY_FILL),
        "ring" => Some(POLICY_RING),
        _ => None,
    }
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
    "destructive",
    "stackframes",
    "ustackframes",
    "maxframes",
    "rawbytes",
    "maxuprobes",
    "oformat",
    "defaultargs",
    "argref",
    "statusrate",
    "define",
    "undef",
    "incdir",
    "cpppath",
];

/// The preprocessor's options (`-x define=NAME[=VAL]`, `undef=NAME`, `incdir=DIR`,
/// `cpppath=PATH`): read with `-C` from the command line, never from the program.
pub const CPP_OPTIONS: &[&str] = &["define", "undef", "incdir", "cpppath"];

/// Options that are flags (`-x argref`, `-x defaultargs`): no value sets them, and so do
/// `yes`, `on`, ...; `no`, `off`, ... unset them again.
pub const FLAG_OPTIONS: &[&str] = &["argref", "defaultargs"];

/// Whether flag option `name` is set by the last of `xopts` that names it (an invalid value
/// counts as unset: the option check refuses it).
pub fn flag_set(xopts: &[(String, Option<String>)], name: &str) -> bool {
    xopts
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .is_some_and(|(_, v)| matches!(runtime_value(name, v.as_deref()), Ok(Some(_))))
}

/// The default of option `maxuprobes`: most user-space probes (uprobes) a program may
/// place; up to `oxtrace_core::limits::MAX_UATTACH`.
pub const DEFAULT_MAX_UPROBES: usize = 10_000;

/// The options `setopt()` may change while tracing: those the consumer uses.
pub const RUNTIME_OPTIONS: &[&str] = &[
    "quiet",
    "aggsortkey",
    "aggsortrev",
    "aggsortpos",
    "aggsortkeypos",
];

/// Why `setopt()` could not set an option, in dtrace's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetoptError {
    /// No such option.
    BadName,
    /// A value the option does not take.
    BadValue,
    /// The option cannot change while tracing.
    Active,
}

impl SetoptError {
    /// dtrace's message.
    pub fn text(self) -> &'static str {
        match self {
            SetoptError::BadName => "Invalid option name",
            SetoptError::BadValue => "Invalid value for specified option",
            SetoptError::Active => "Operation illegal when tracing is active",
        }
    }
}

/// What `setopt(name, value)` meets while tracing, before the value is read: an unknown
/// option, or one the consumer cannot change now. The rates (`switchrate`, `aggrate`) have
/// their value checked first, as dtrace's dynamic options do.
pub fn setopt_check(name: &str, value: Option<&str>) -> Result<(), SetoptError> {
    if RUNTIME_OPTIONS.contains(&name) {
        return Ok(());
    }
    match OptKey::from_name(name) {
        Some(OptKey::Switchrate | OptKey::Aggrate) => {
            value
                .and_then(parse_interval)
                .ok_or(SetoptError::BadValue)?;
            Err(SetoptError::Active)
        }
        Some(_) => Err(SetoptError::Active),
        None if TOOL_OPTIONS.contains(&name) => Err(SetoptError::Active),
        None => Err(SetoptError::BadName),
    }
}

/// The value of runtime option `name` set to `value`, as dtrace reads it: no value, `yes`,
/// `on`, `true`, `set`, `enable(d)` set it (1); `""`, `no`, `off`, `false`, `unset`,
/// `disable(d)` unset it (`None`); else it is a non-negative number (C's bases), which sets
/// it too, 0 included.
pub fn runtime_value(name: &str, value: Option<&str>) -> Result<Option<u64>, String> {
    const COUPLES: [(&str, &str); 6] = [
        ("yes", "no"),
        ("enable", "disable"),
        ("enabled", "disabled"),
        ("true", "false"),
        ("on", "off"),
        ("set", "unset"),
    ];
    let Some(v) = value else {
        return Ok(Some(1));
    };
    if v.is_empty() {
        return Ok(None);
    }
    for (yes, no) in COUPLES {
        if v.eq_ignore_ascii_case(yes) {
            return Ok(Some(1));
        }
        if v.eq_ignore_ascii_case(no) {
            return Ok(None);
        }
    }
    let n = if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if v.len() > 1 && v.starts_with('0') {
        u64::from_str_radix(&v[1..], 8).ok()
    } else {
        v.parse().ok()
    };
    n.map(Some)
        .ok_or_else(|| format!("invalid value '{v}' for option '{name}'"))
}

/// The depth bound of option `stackframes` or `ustackframes` (the compiler's default
/// frame count of `stack()`, `ustack()`), from rust/core's limits.
pub fn frames_bound(name: &str) -> Option<u32> {
    match name {
        "stackframes" => Some(oxtrace_core::limits::MAX_STACKFRAMES),
        "ustackframes" => Some(oxtrace_core::limits::MAX_USTACKFRAMES),
        "maxframes" => {
            Some(oxtrace_core::limits::MAX_STACKFRAMES.max(oxtrace_core::limits::MAX_USTACKFRAMES))
        }
        _ => None,
    }
}
