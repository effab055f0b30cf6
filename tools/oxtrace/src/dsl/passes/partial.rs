//! Descriptions that name no provider, as DTrace reads them: the fields given are the
//! rightmost ones (`write:entry` is `::write:entry`, `entry` is `:::entry`), and an empty
//! or glob provider matches every kernel provider. Such a description becomes the full
//! descriptions of the providers that have a matching probe; the probe description pass
//! then reads each as if written so.
//!
//! bpftrace's short forms (`kprobe:f`, `tracepoint:s:e`, `interval:s:1`, `BEGIN`,
//! `tick-1s`) keep their meaning: they are not partial.

use crate::providers::{fbt, stable, syscalls, tracepoints};
use std::sync::OnceLock;

/// What the kernel has to match against.
pub(crate) struct Kernel<'a> {
    pub(crate) syscalls: Vec<&'a str>,
    /// The probeable functions and their module (`None`: the kernel's own).
    pub(crate) functions: Vec<(&'a str, Option<&'a str>)>,
    /// Tracepoints as (subsystem, event).
    pub(crate) events: &'a [(String, String)],
}

/// The full descriptions that `text` stands for, if it is a partial one (else `None`: the
/// probe description pass reads it as it is). An error if it matches no probe.
pub(crate) fn resolve(text: &str) -> Option<Result<Vec<String>, String>> {
    let fields = fill(text)?;
    static FUNCS: OnceLock<Vec<String>> = OnceLock::new();
    static EVENTS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    let funcs = FUNCS.get_or_init(|| fbt::functions().map(|f| f.0).unwrap_or_default());
    let modules = fbt::modules();
    let k = Kernel {
        syscalls: syscalls::list().iter().map(|s| s.name).collect(),
        functions: funcs
            .iter()
            .map(|f| (f.as_str(), modules.get(f).map(String::as_str)))
            .collect(),
        events: EVENTS.get_or_init(tracepoints::events),
    };
    Some(expand(&fields, &k))
}

/// `text` as four fields, if it is a partial description: fewer than four fields that are
/// not a bpftrace short form, or four with an empty or glob provider.
pub(crate) fn fill(text: &str) -> Option<[&str; 4]> {
    let f: Vec<&str> = text.split(':').collect();
    let short = match f.as_slice() {
        [name] => {
            matches!(*name, "BEGIN" | "END" | "ERROR")
                || (!fbt::is_glob(name)
                    && (name.starts_with("tick-") || name.starts_with("profile-")))
        }
        [prov, _] => matches!(*prov, "kprobe" | "kretprobe"),
        [prov, _, _] => matches!(
            *prov,
            "kprobe" | "kretprobe" | "tracepoint" | "profile" | "interval"
        ),
        [prov, _, _, _] => !prov.is_empty() && !fbt::is_glob(prov),
        _ => true,
    };
    if short {
        return None;
    }
    let mut out = [""; 4];
    out[4 - f.len()..].copy_from_slice(&f);
    Some(out)
}

/// The full descriptions of the kernel's providers that match `[prov, module, func, name]`.
pub(crate) fn expand(fields: &[&str; 4], k: &Kernel) -> Result<Vec<String>, String> {
    let [prov, module, func, name] = *fields;
    // An empty field matches anything.
    let m = |p: &str, v: &str| p.is_empty() || fbt::glob_match(p, v);
    let plain = |p: &str, extra: &[u8]| {
        p.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"_*?".contains(&c) || extra.contains(&c))
    };
    let kinds: Vec<&str> = ["entry", "return"]
        .into_iter()
        .filter(|n| m(name, n))
        .collect();
    let mut v = Vec::new();
    if m(prov, "dtrace") && m(module, "") && m(func, "") {
        for n in ["BEGIN", "END", "ERROR"] {
            if m(name, n) {
                v.push(format!("dtrace:::{n}"));
            }
        }
    }
    // A timer is made when a description names it: only a plain name makes one.
    if m(prov, "profile")
        && m(module, "")
        && m(func, "")
        && !fbt::is_glob(name)
        && (name.starts_with("tick-") || name.starts_with("profile-"))
    {
        v.push(format!("profile:::{name}"));
    }
    if m(prov, "syscall")
        && m(module, "vmlinux")
        && plain(func, b"")
        && k.syscalls.iter().any(|s| m(func, s))
    {
        v.extend(kinds.iter().map(|n| format!("syscall::{func}:{n}")));
    }
    if (m(prov, "tracepoint") || m(prov, "sdt"))
        && m(func, "")
        && plain(module, b"")
        && plain(name, b"")
        && k.events.iter().any(|(s, e)| m(module, s) && m(name, e))
    {
        let or_all = |p: &str| if p.is_empty() { "*" } else { p }.to_string();
        v.push(format!("sdt:{}::{}", or_all(module), or_all(name)));
    }
    // A function that is unsafe to probe has no probe to match.
    let safe = fbt::is_glob(func) || oxtrace_core::probesafe::refusal(func).is_none();
    if m(prov, "fbt")
        && plain(func, b".")
        && plain(module, b"-")
        && safe
        && k.functions
            .iter()
            .any(|(f, md)| m(func, f) && fbt::module_matches(module, *md))
    {
        v.extend(kinds.iter().map(|n| format!("fbt:{module}:{func}:{n}")));
    }
    for p in stable::PROVIDERS {
        if m(prov, p) && !stable::matching(p, module, func, name).is_empty() {
            v.push(format!("{p}:{module}:{func}:{name}"));
        }
    }
    if v.is_empty() {
        return Err(format!(
            "[D_PDESC_ZERO] probe description {} does not match any probes",
            fields.join(":")
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(events: &[(String, String)]) -> Kernel<'_> {
        Kernel {
            syscalls: vec!["read", "write", "writev", "openat"],
            functions: vec![
                ("vfs_write", None),
                ("ext4_file_write_iter", Some("ext4")),
                ("write", None),
            ],
            events,
        }
    }

    fn resolve(text: &str) -> Result<Vec<String>, String> {
        let events = [("sched".to_string(), "sched_switch".to_string())];
        expand(&fill(text).expect("partial"), &kernel(&events))
    }

    #[test]
    fn fewer_fields_are_the_rightmost() {
        assert_eq!(fill("write:entry"), Some(["", "", "write", "entry"]));
        assert_eq!(
            fill("vmlinux:write:entry"),
            Some(["", "vmlinux", "write", "entry"])
        );
        assert_eq!(fill("entry"), Some(["", "", "", "entry"]));
        assert_eq!(fill("*:::entry"), Some(["*", "", "", "entry"]));
        assert_eq!(fill("::write:entry"), Some(["", "", "write", "entry"]));
    }

    #[test]
    fn short_forms_are_not_partial() {
        for t in [
            "BEGIN",
            "END",
            "ERROR",
            "tick-1s",
            "profile-97",
            "kprobe:vfs_read",
            "kretprobe:vfs_read",
            "kprobe:ext4:ext4_sync_fs",
            "tracepoint:sched:sched_switch",
            "profile:hz:99",
            "interval:s:1",
            "syscall::write:entry",
            "pid123:::entry",
            "a:b:c:d:e",
        ] {
            assert_eq!(fill(t), None, "{t}");
        }
    }

    #[test]
    fn every_provider_with_a_match() {
        assert_eq!(
            resolve("write:entry").unwrap(),
            ["syscall::write:entry", "fbt::write:entry"]
        );
        assert_eq!(
            resolve("::write*:").unwrap(),
            [
                "syscall::write*:entry",
                "syscall::write*:return",
                "fbt::write*:entry",
                "fbt::write*:return"
            ]
        );
        assert_eq!(resolve("ext4:*:return").unwrap(), ["fbt:ext4:*:return"]);
        assert_eq!(resolve("sys*:::entry").unwrap(), ["syscall:::entry"]);
        assert_eq!(resolve(":::BEGIN").unwrap(), ["dtrace:::BEGIN"]);
        assert_eq!(resolve("*:::tick-1s").unwrap(), ["profile:::tick-1s"]);
        assert_eq!(resolve("sched_switch").unwrap(), ["sdt:*::sched_switch"]);
        assert_eq!(resolve("exit").unwrap(), ["proc:::exit"]);
        assert_eq!(resolve("::vfs_write:").unwrap()[0], "fbt::vfs_write:entry");
    }

    #[test]
    fn no_match_is_pdesc_zero() {
        assert_eq!(
            resolve("nosuch:entry").unwrap_err(),
            "[D_PDESC_ZERO] probe description ::nosuch:entry does not match any probes"
        );
        // `read` is in module vmlinux only.
        assert!(resolve("ext4:read:entry").is_err());
        assert!(resolve("write:exit").is_err());
    }
}
