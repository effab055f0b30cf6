//! Probe descriptions: `provider:module:function:name` text to the probes it enables.

use super::options::parse_interval;
use super::ProbeSpec;
use oxtrace_core::limits;
use oxtrace_core::program::{self as prog, ProbeKind};

pub(super) fn probe_spec(text: &str) -> Result<Vec<ProbeSpec>, String> {
    let fbt = |kind, func: &str| -> Result<ProbeSpec, String> {
        let func = if func.is_empty() { "*" } else { func };
        if func.len() > limits::MAX_FUNC_LEN
            || !func
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_.*?".contains(&c))
        {
            return Err(format!("invalid function pattern '{func}'"));
        }
        // A glob is expanded to names that fit; a plain name is attached as written.
        if !crate::probes::is_glob(func) && func.len() > limits::MAX_PROBE_NAME {
            return Err(format!(
                "function name '{func}' is longer than {} bytes",
                limits::MAX_PROBE_NAME
            ));
        }
        Ok(ProbeSpec {
            kind,
            func: func.to_string(),
            period_ns: 0,
            text: text.to_string(),
        })
    };
    let other = |kind, period_ns| ProbeSpec {
        kind,
        func: String::new(),
        period_ns,
        text: text.to_string(),
    };
    let tick = |name: &str| -> Option<Result<ProbeSpec, String>> {
        let rest = name.strip_prefix("tick-")?;
        Some(match parse_interval(rest) {
            Some(ns) if (prog::TICK_MIN_NS..=prog::TICK_MAX_NS).contains(&ns) => {
                Ok(other(ProbeKind::Tick, ns))
            }
            Some(_) => Err(format!(
                "tick interval out of range ({} µs to 1 hour)",
                prog::TICK_MIN_NS / 1000
            )),
            None => Err(format!(
                "invalid tick interval '{rest}' (use e.g. tick-1s, tick-10ms, tick-100hz)"
            )),
        })
    };
    let fields: Vec<&str> = text.split(':').collect();
    match fields.as_slice() {
        ["BEGIN"] | ["dtrace", "", "", "BEGIN"] => Ok(vec![other(ProbeKind::Begin, 0)]),
        ["END"] | ["dtrace", "", "", "END"] => Ok(vec![other(ProbeKind::End, 0)]),
        ["ERROR"] | ["dtrace", "", "", "ERROR"] => Ok(vec![other(ProbeKind::Error, 0)]),
        [name] | ["profile", "", "", name] if tick(name).is_some() => {
            tick(name).expect("checked").map(|p| vec![p])
        }
        ["kprobe", func] | ["kprobe", "", func] => Ok(vec![fbt(ProbeKind::FbtEntry, func)?]),
        ["kretprobe", func] | ["kretprobe", "", func] => Ok(vec![fbt(ProbeKind::FbtReturn, func)?]),
        ["fbt", module, func, name] => {
            if !matches!(*module, "" | "*" | "vmlinux" | "kernel") {
                return Err(format!("module-specific probes are not supported (module '{module}')"));
            }
            match *name {
                "entry" => Ok(vec![fbt(ProbeKind::FbtEntry, func)?]),
                "return" => Ok(vec![fbt(ProbeKind::FbtReturn, func)?]),
                "" | "*" => Ok(vec![
                    fbt(ProbeKind::FbtEntry, func)?,
                    fbt(ProbeKind::FbtReturn, func)?,
                ]),
                _ => Err(format!("fbt probes are named 'entry' or 'return', not '{name}'")),
            }
        }
        [prov, ..] if !["fbt", "kprobe", "kretprobe", "dtrace", "profile"].contains(prov) => Err(format!(
            "unknown provider '{prov}' (supported: fbt, kprobe, kretprobe, BEGIN, END, tick-N)"
        )),
        _ => Err(format!(
            "invalid probe description '{text}' (expected fbt::FUNC:entry, fbt::FUNC:return, kprobe:FUNC, kretprobe:FUNC, BEGIN, END or tick-N)"
        )),
    }
}
