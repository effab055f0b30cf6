//! Probe descriptions: `provider:module:function:name` text to the probes it enables.

use super::super::ProbeSpec;
use crate::options::parse_interval;
use crate::providers::tracepoints::{self, FieldKind, Format};
use oxtrace_core::limits;
use oxtrace_core::program::{self as prog, ProbeKind};
use std::cell::RefCell;

pub(crate) fn probe_spec(text: &str) -> Result<Vec<ProbeSpec>, String> {
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
        if !crate::providers::fbt::is_glob(func) && func.len() > limits::MAX_PROBE_NAME {
            return Err(format!(
                "function name '{func}' is longer than {} bytes",
                limits::MAX_PROBE_NAME
            ));
        }
        if let Some(why) =
            oxtrace_core::probesafe::refusal(func).filter(|_| !crate::providers::fbt::is_glob(func))
        {
            return Err(format!(
                "function {func} is unsafe to probe: {}",
                why.text()
            ));
        }
        Ok(ProbeSpec {
            kind,
            func: func.to_string(),
            period_ns: 0,
            text: text.to_string(),
            uprobes: Vec::new(),
            uskipped: 0,
            module: String::new(),
        })
    };
    let other = |kind, period_ns| ProbeSpec {
        kind,
        func: String::new(),
        period_ns,
        text: text.to_string(),
        uprobes: Vec::new(),
        uskipped: 0,
        module: String::new(),
    };
    // A `tick-N` or `profile-N` period; `what` and `eg` word the errors.
    let periodic = |kind, n: &str, what: [&str; 2], eg: &str| match parse_interval(n) {
        Some(ns) if (prog::TICK_MIN_NS..=prog::TICK_MAX_NS).contains(&ns) => Ok(other(kind, ns)),
        Some(_) => Err(format!(
            "[D_PDESC_ZERO] {} interval out of range ({} µs to 1 hour)",
            what[0],
            prog::TICK_MIN_NS / 1000
        )),
        None => Err(format!(
            "[D_PDESC_ZERO] invalid {} {} '{n}' (use e.g. {eg})",
            what[0], what[1]
        )),
    };
    let tick = |name: &str| -> Option<Result<ProbeSpec, String>> {
        let rest = name.strip_prefix("tick-")?;
        let eg = "tick-1s, tick-10ms, tick-100hz";
        Some(periodic(ProbeKind::Tick, rest, ["tick", "interval"], eg))
    };
    // profile-N: on every CPU; N in hertz unless it has a unit (DTrace's profile provider).
    let profile = |n: &str| {
        let eg = "profile-997, profile-1ms, profile-100hz";
        periodic(ProbeKind::Profile, n, ["profile", "rate"], eg)
    };
    // bpftrace's `profile:UNIT:N` and `interval:UNIT:N`.
    let with_unit = |unit: &str, n: &str| -> Result<String, String> {
        match unit {
            "hz" | "s" | "ms" | "us" => Ok(format!("{n}{unit}")),
            _ => Err(format!("invalid unit '{unit}' (hz, s, ms or us)")),
        }
    };
    let fields: Vec<&str> = text.split(':').collect();
    match fields.as_slice() {
        [name] | ["profile", "", "", name] if name.starts_with("profile-") => {
            profile(&name["profile-".len()..]).map(|p| vec![p])
        }
        ["profile", unit, n] => profile(&with_unit(unit, n)?).map(|p| vec![p]),
        ["interval", unit, n] => {
            let name = format!("tick-{}", with_unit(unit, n)?);
            tick(&name).expect("a tick").map(|p| vec![p])
        }
        ["syscall", module, func, name] => syscall(text, module, func, name),
        ["tracepoint", subsys, event] | ["sdt", subsys, "", event] => {
            tracepoint(text, subsys, event)
        }
        ["BEGIN"] | ["dtrace", "", "", "BEGIN"] => Ok(vec![other(ProbeKind::Begin, 0)]),
        ["END"] | ["dtrace", "", "", "END"] => Ok(vec![other(ProbeKind::End, 0)]),
        ["ERROR"] | ["dtrace", "", "", "ERROR"] => Ok(vec![other(ProbeKind::Error, 0)]),
        [name] | ["profile", "", "", name] if tick(name).is_some() => {
            tick(name).expect("checked").map(|p| vec![p])
        }
        ["kprobe", func] => Ok(vec![fbt(ProbeKind::FbtEntry, func)?]),
        ["kretprobe", func] => Ok(vec![fbt(ProbeKind::FbtReturn, func)?]),
        // bpftrace's kprobe:MODULE:FUNC.
        ["kprobe", module, func] => in_module(module, vec![fbt(ProbeKind::FbtEntry, func)?]),
        ["kretprobe", module, func] => in_module(module, vec![fbt(ProbeKind::FbtReturn, func)?]),
        ["fbt", module, func, name] => {
            let specs = match *name {
                "entry" => vec![fbt(ProbeKind::FbtEntry, func)?],
                "return" => vec![fbt(ProbeKind::FbtReturn, func)?],
                "" | "*" => vec![
                    fbt(ProbeKind::FbtEntry, func)?,
                    fbt(ProbeKind::FbtReturn, func)?,
                ],
                _ => {
                    return Err(format!(
                        "[D_PDESC_ZERO] fbt probes are named 'entry' or 'return', not '{name}'"
                    ))
                }
            };
            in_module(module, specs)
        }
        [prov, _, _, _] if crate::providers::stable::is_provider(prov) => {
            let groups = super::stable::expand(text, probe_spec)?;
            Ok(groups.into_iter().flat_map(|g| g.specs).collect())
        }
        [prov, module, func, name] if !PROVIDERS.contains(prov) => {
            match super::user_spec::user_spec(text, prov, module, func, name) {
                Some(r) => r,
                None => Err(unknown(prov)),
            }
        }
        [prov, ..] if !PROVIDERS.contains(prov) => Err(unknown(prov)),
        _ => Err(format!(
            "invalid probe description '{text}' (expected fbt::FUNC:entry, fbt::FUNC:return, syscall::NAME:entry, syscall::NAME:return, kprobe:FUNC, kretprobe:FUNC, BEGIN, END, tick-N or profile-N)"
        )),
    }
}

/// Words for provider `prov`, which is not one.
fn unknown(prov: &str) -> String {
    let near = crate::providers::syscalls::nearby(prov, PROVIDERS.iter().copied());
    format!(
        "[D_PDESC_ZERO] unknown provider '{prov}'{} (supported: fbt, syscall, proc, sched, io, profile, tracepoint, sdt, kprobe, kretprobe, interval, BEGIN, END, tick-N, profile-N{})",
        crate::providers::syscalls::did_you_mean(&near),
        super::user_spec::unknown_hint()
    )
}

/// `specs` restricted to the functions of module `module` (a glob, as DTrace's module field:
/// empty or `*` for any, `vmlinux` or `kernel` for the kernel's own); the attach table
/// applies it.
fn in_module(module: &str, mut specs: Vec<ProbeSpec>) -> Result<Vec<ProbeSpec>, String> {
    if module.len() > limits::MAX_FUNC_LEN
        || !module
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"_-*?".contains(&c))
    {
        return Err(format!("invalid module name '{module}'"));
    }
    for s in &mut specs {
        s.module = module.to_string();
    }
    Ok(specs)
}

/// The providers a description may name (the man page lists each:
/// tools/oxtrace/tests/manpage.rs).
pub const PROVIDERS: [&str; 13] = [
    "tracepoint",
    "sdt",
    "fbt",
    "kprobe",
    "kretprobe",
    "dtrace",
    "profile",
    "syscall",
    "interval",
    "tick",
    "proc",
    "sched",
    "io",
];

/// `syscall:MODULE:FUNC:NAME`: one description per system call of the running kernel that
/// `func` (a name or glob, empty for all) names, entry and/or return as `name` says.
fn syscall(text: &str, module: &str, func: &str, name: &str) -> Result<Vec<ProbeSpec>, String> {
    if !matches!(module, "" | "*" | "vmlinux") {
        return Err(format!(
            "syscall probes are in module 'vmlinux', not '{module}'"
        ));
    }
    let kinds: &[ProbeKind] = match name {
        "entry" => &[ProbeKind::SyscallEntry],
        "return" => &[ProbeKind::SyscallReturn],
        "" | "*" => &[ProbeKind::SyscallEntry, ProbeKind::SyscallReturn],
        _ => {
            return Err(format!(
                "syscall probes are named 'entry' or 'return', not '{name}'"
            ))
        }
    };
    let func = if func.is_empty() { "*" } else { func };
    if !func
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"_*?".contains(&c))
    {
        return Err(format!("invalid system call pattern '{func}'"));
    }
    let calls = crate::providers::syscalls::list();
    let hit: Vec<_> = calls
        .iter()
        .filter(|s| crate::providers::fbt::glob_match(func, s.name))
        .collect();
    if hit.is_empty() {
        let near = crate::providers::syscalls::nearby(func, calls.iter().map(|s| s.name));
        return Err(if crate::providers::fbt::is_glob(func) {
            format!("no system call matches '{func}'")
        } else {
            format!(
                "unknown system call '{func}'{}",
                crate::providers::syscalls::did_you_mean(&near)
            )
        });
    }
    let mut v = Vec::with_capacity(hit.len() * kinds.len());
    for &kind in kinds {
        for s in &hit {
            v.push(ProbeSpec {
                kind,
                func: s.name.to_string(),
                period_ns: u64::from(s.nr),
                text: text.to_string(),
                uprobes: Vec::new(),
                uskipped: 0,
                module: String::new(),
            });
        }
    }
    Ok(v)
}

thread_local! {
    /// The tracepoints the clause being compiled is enabled on (`args->` reads their records).
    static CLAUSE: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// `tracepoint:SUBSYS:EVENT` (or `sdt:SUBSYS::EVENT`): one description per event of tracefs
/// that the globs name, its format read and parsed now. A named event whose format cannot
/// be parsed is refused with the reason; a glob skips such events.
fn tracepoint(text: &str, subsys: &str, event: &str) -> Result<Vec<ProbeSpec>, String> {
    let ok = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"_*?".contains(&c))
    };
    if !ok(subsys) || !ok(event) {
        return Err(format!(
            "invalid tracepoint '{subsys}:{event}' (expected tracepoint:SUBSYSTEM:EVENT)"
        ));
    }
    let glob = crate::providers::fbt::is_glob(subsys) || crate::providers::fbt::is_glob(event);
    if !glob {
        if let Some(f) = tracepoints::known(&format!("{subsys}:{event}")) {
            return Ok(vec![spec(text, &f)]);
        }
    }
    let events = tracepoints::events();
    if events.is_empty() {
        return Err("no tracepoints: tracefs is not mounted at /sys/kernel/tracing".into());
    }
    let hit: Vec<&(String, String)> = events
        .iter()
        .filter(|(s, e)| {
            crate::providers::fbt::glob_match(subsys, s)
                && crate::providers::fbt::glob_match(event, e)
        })
        .collect();
    if hit.is_empty() {
        let names: Vec<String> = events.iter().map(|(s, e)| format!("{s}:{e}")).collect();
        let want = format!("{subsys}:{event}");
        let near = crate::providers::syscalls::nearby(&want, names.iter().map(String::as_str));
        return Err(if glob {
            format!("no tracepoint matches '{want}'")
        } else if events.iter().any(|(s, _)| s == subsys) {
            format!(
                "unknown tracepoint '{want}'{}",
                crate::providers::syscalls::did_you_mean(&near)
            )
        } else {
            let subs: Vec<&str> = events.iter().map(|(s, _)| s.as_str()).collect();
            let near = crate::providers::syscalls::nearby(subsys, subs);
            format!(
                "unknown tracepoint subsystem '{subsys}'{}",
                crate::providers::syscalls::did_you_mean(&near)
            )
        });
    }
    let mut v = Vec::new();
    for (s, e) in hit {
        let f = match tracepoints::load(s, e) {
            Ok(f) => f,
            Err(_) if glob => continue,
            Err(why) => return Err(why),
        };
        v.push(spec(text, &f));
        tracepoints::remember(f);
    }
    if v.is_empty() {
        return Err(format!(
            "no tracepoint matching '{subsys}:{event}' has a format that can be parsed"
        ));
    }
    Ok(v)
}

fn spec(text: &str, f: &Format) -> ProbeSpec {
    ProbeSpec {
        kind: ProbeKind::Tracepoint,
        func: f.name.clone(),
        period_ns: f.id,
        text: text.to_string(),
        uprobes: Vec::new(),
        uskipped: 0,
        module: String::new(),
    }
}

/// Says which probes the next clause is enabled on, for [`tracepoint_field`].
pub(crate) fn set_clause_probes(probes: &[ProbeSpec]) {
    let tps = probes
        .iter()
        .filter(|p| p.kind == ProbeKind::Tracepoint)
        .map(|p| p.func.clone())
        .collect();
    CLAUSE.with(|c| *c.borrow_mut() = tps);
}

/// The C type of field `name` of the clause's tracepoints, when all agree.
pub(crate) fn tracepoint_ctype(name: &str) -> Option<String> {
    let tps = CLAUSE.with(|c| c.borrow().clone());
    let mut types = tps
        .iter()
        .map(|tp| Some(tracepoints::known(tp)?.field(name)?.ctype.clone()));
    let first = types.next()??;
    types.all(|t| t.as_deref() == Some(&first)).then_some(first)
}

/// Where `args->NAME` is in the records of the clause's tracepoints: its offset, size,
/// signedness and kind, the same in every one of them (else the error says where not).
pub(crate) fn tracepoint_field(name: &str) -> Result<(u32, u32, bool, FieldKind), String> {
    let tps = CLAUSE.with(|c| c.borrow().clone());
    if tps.is_empty() {
        return Err("args-> is only available on tracepoint probes".into());
    }
    {
        let mut found: Option<(u32, u32, bool, FieldKind, &str)> = None;
        for tp in &tps {
            let f = tracepoints::known(tp).ok_or_else(|| format!("no format for {tp}"))?;
            let Some(fd) = f.field(name) else {
                let near = crate::providers::syscalls::nearby(
                    name,
                    f.fields.iter().map(|x| x.name.as_str()),
                );
                let all: Vec<&str> = f
                    .fields
                    .iter()
                    .filter(|x| !x.name.starts_with("common_"))
                    .map(|x| x.name.as_str())
                    .collect();
                return Err(format!(
                    "tracepoint {tp} has no field '{name}'{} (fields: {})",
                    crate::providers::syscalls::did_you_mean(&near),
                    all.join(", ")
                ));
            };
            if fd.kind == FieldKind::Other {
                return Err(format!(
                    "field '{name}' of {tp} is a {}: only integers and strings can be read",
                    fd.ctype
                ));
            }
            let this = (fd.offset, fd.size, fd.signed, fd.kind);
            match found {
                Some((o, s, g, k, other)) if (o, s, g, k) != this => {
                    return Err(format!(
                        "field '{name}' is not at the same place in {other} and {tp}"
                    ))
                }
                Some(_) => {}
                None => found = Some((this.0, this.1, this.2, this.3, tp)),
            }
        }
        let (o, s, g, k, _) = found.expect("at least one tracepoint");
        Ok((o, s, g, k))
    }
}
