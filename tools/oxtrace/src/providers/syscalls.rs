//! The system calls of the running kernel, for the syscall provider.
//!
//! Numbers come from the x86-64 table (`syscall_table.rs`, the kernel's own
//! `syscall_64.tbl`: numbers are ABI and never change); which of them the running kernel has
//! comes from tracefs (`events/syscalls/sys_enter_NAME`, when the kernel has
//! `CONFIG_FTRACE_SYSCALLS`) or else from `/proc/kallsyms` (the `__x64_sys_NAME` entry
//! points). If neither can be read, the whole table is used.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::sync::OnceLock;

use super::syscall_protos as protos;
use super::syscall_table as table;

/// A system call of the running kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Syscall {
    /// Its number (`orig_ax` on x86-64).
    pub nr: u32,
    /// Its name as `syscall::NAME:entry` writes it (`read`, `openat`).
    pub name: &'static str,
}

/// The system calls of the running kernel, by number (read once).
pub fn list() -> &'static [Syscall] {
    static LIST: OnceLock<Vec<Syscall>> = OnceLock::new();
    LIST.get_or_init(|| {
        let events = super::tracefs::tracefs().map(|t| format!("{t}/events/syscalls"));
        if let Some(names) = events.and_then(|d| event_names(&d)) {
            return filter(|_, name| names.contains(name));
        }
        match fs::read_to_string("/proc/kallsyms") {
            Ok(s) => {
                let syms = kallsyms_entries(&s);
                if syms.is_empty() {
                    all()
                } else {
                    filter(|entry, _| syms.contains(entry))
                }
            }
            Err(_) => all(),
        }
    })
}

/// Every system call of the table.
pub fn all() -> Vec<Syscall> {
    filter(|_, _| true)
}

/// The table's calls for which `keep(entry point, name)` holds.
pub fn filter(keep: impl Fn(&str, &str) -> bool) -> Vec<Syscall> {
    table::X86_64
        .iter()
        .filter(|(_, name, entry)| keep(entry, name))
        .map(|&(nr, name, _)| Syscall { nr, name })
        .collect()
}

/// The C prototype of a system call: its arguments' types and names, and its return type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proto {
    /// (C type, name) of each argument (`const char __user *`, `filename`).
    pub args: Vec<(String, String)>,
    /// The return type.
    pub ret: String,
}

/// The prototype of system call `name` (as `syscall::NAME:entry` writes it): from the
/// kernel's syscall trace events when it has them (`CONFIG_FTRACE_SYSCALLS`), else from the
/// kernel's `SYSCALL_DEFINEn()` definitions (`syscall_protos.rs`), since BTF has none: the
/// `__do_sys_NAME` bodies are inlined into `__x64_sys_NAME(const struct pt_regs *)`.
pub fn proto(name: &str) -> Option<Proto> {
    // Read once per call: `syscall:::entry` asks for every call at each args[] it compiles.
    static CACHE: std::sync::Mutex<BTreeMap<String, Option<Proto>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(name.to_string())
        .or_insert_with(|| {
            let entry = table::X86_64.iter().find(|s| s.1 == name)?.2;
            let call = entry.strip_prefix("sys_")?;
            traced_proto(call).or_else(|| built_in_proto(call))
        })
        .clone()
}

/// The prototype of entry point `sys_CALL` in the table of `SYSCALL_DEFINEn()`s.
pub fn built_in_proto(call: &str) -> Option<Proto> {
    let (_, args) = protos::PROTOS.iter().find(|p| p.0 == call)?;
    Some(Proto {
        args: args
            .iter()
            .map(|(t, n)| (t.to_string(), n.to_string()))
            .collect(),
        ret: "long".into(),
    })
}

/// The prototype from the formats of `syscalls:sys_enter_CALL` and `sys_exit_CALL`.
fn traced_proto(call: &str) -> Option<Proto> {
    let enter = super::tracepoints::load("syscalls", &format!("sys_enter_{call}")).ok()?;
    let exit = super::tracepoints::load("syscalls", &format!("sys_exit_{call}")).ok()?;
    let args = enter
        .fields
        .iter()
        .filter(|f| !f.name.starts_with("common_") && f.name != "__syscall_nr")
        .map(|f| (f.ctype.clone(), f.name.clone()))
        .collect();
    let ret = exit.field("ret")?.ctype.clone();
    Some(Proto { args, ret })
}

/// Names of `events/syscalls/sys_enter_NAME` directories; `None` if there are none.
fn event_names(dir: &str) -> Option<BTreeSet<String>> {
    let names: BTreeSet<String> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix("sys_enter_").map(str::to_owned))
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The entry points (`sys_read`) of the `__x64_sys_*` symbols of a kallsyms text.
pub fn kallsyms_entries(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter_map(|n| n.strip_prefix("__x64_"))
        .filter(|n| n.starts_with("sys_"))
        .map(str::to_owned)
        .collect()
}

/// Up to three names of `names` close to `want` (an edit distance of at most half its
/// length and 3, or containing it), closest first: for "did you mean".
pub fn nearby<'a>(want: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let limit = (want.len() / 2).clamp(1, 3);
    let mut v: Vec<(usize, &str)> = names
        .into_iter()
        .filter_map(|n| {
            let d = distance(want, n);
            let related = want.len() >= 3 && (n.contains(want) || want.contains(n));
            (d <= limit || related).then_some((d, n))
        })
        .collect();
    v.sort();
    v.dedup();
    v.into_iter().take(3).map(|(_, n)| n).collect()
}

/// Levenshtein distance of two ASCII names.
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// " (did you mean 'a' or 'b'?)" for `nearby`'s answer, or nothing.
pub fn did_you_mean(near: &[&str]) -> String {
    match near {
        [] => String::new(),
        [a] => format!(" (did you mean '{a}'?)"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(|n| format!("'{n}'")).collect();
            format!(" (did you mean {} or '{last}'?)", rest.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_the_kernels() {
        let all = all();
        let nr = |n: &str| all.iter().find(|s| s.name == n).map(|s| s.nr);
        assert_eq!(nr("read"), Some(0));
        assert_eq!(nr("openat"), Some(257));
        assert_eq!(nr("exit_group"), Some(231));
        assert!(all.len() > 350);
        assert!(all
            .iter()
            .all(|s| (s.nr as usize) < oxtrace_core::limits::MAX_SYSCALL_NR));
        let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names are unique");
    }

    #[test]
    fn kallsyms_filter() {
        let syms = kallsyms_entries(
            "0000000000000000 T __x64_sys_read\n0000000000000000 T __x64_sys_newstat\n\
             0000000000000000 t __x64_sys_ni_syscall_x\n0000000000000000 T __ia32_sys_read\n",
        );
        let got = filter(|entry, _| syms.contains(entry));
        let names: Vec<&str> = got.iter().map(|s| s.name).collect();
        assert_eq!(names, ["read", "stat"]);
    }

    #[test]
    fn prototypes() {
        let p = built_in_proto("openat").unwrap();
        let types: Vec<&str> = p.args.iter().map(|a| a.0.as_str()).collect();
        assert_eq!(types, ["int", "const char __user *", "int", "umode_t"]);
        assert_eq!(p.args[1].1, "filename");
        assert_eq!(p.ret, "long");
        // Every call of the table but the placeholder has one.
        for s in all() {
            let entry = table::X86_64.iter().find(|t| t.1 == s.name).unwrap().2;
            let call = &entry["sys_".len()..];
            assert!(
                call == "ni_syscall" || built_in_proto(call).is_some(),
                "{call}"
            );
        }
        // x86-64's clone: tls last.
        let c = built_in_proto("clone").unwrap();
        assert_eq!(c.args[4], ("unsigned long".to_string(), "tls".to_string()));
    }

    #[test]
    fn suggestions() {
        let names = ["read", "readv", "pread64", "write", "open", "openat"];
        assert_eq!(nearby("raed", names), ["read"]);
        assert_eq!(nearby("opn", names), ["open"]);
        assert_eq!(nearby("readx", names), ["read", "readv"]);
        assert!(nearby("zzzzzz", names).is_empty());
        assert_eq!(did_you_mean(&["a", "b"]), " (did you mean 'a' or 'b'?)");
    }
}
