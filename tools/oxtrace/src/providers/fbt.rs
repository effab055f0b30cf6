//! Kernel functions that can be probed, and glob matching of probe descriptions.
//!
//! Globs (`*`, `?`) in a probe's function are expanded here, in user space, against the
//! functions the kernel allows probing: ftrace's `available_filter_functions` (what
//! kprobes-on-ftrace can attach to) when tracefs is mounted, else the text symbols of
//! `/proc/kallsyms`. The kernel then registers each function and reports what it refused.

use super::tracefs::tracefs;
use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io;
use std::sync::OnceLock;

const BLACKLIST: &str = "/sys/kernel/debug/kprobes/blacklist";

/// Where the function list came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// ftrace's list of traceable functions.
    Ftrace,
    /// Text symbols of `/proc/kallsyms`.
    Kallsyms,
}

/// The probeable kernel functions, sorted and deduplicated.
pub fn functions() -> io::Result<(Vec<String>, Source)> {
    let blacklist = fs::read_to_string(BLACKLIST)
        .map(|s| parse_blacklist(&s))
        .unwrap_or_default();
    if let Some(s) = tracefs()
        .and_then(|t| fs::read_to_string(format!("{t}/available_filter_functions")).ok())
        .filter(|s| !s.is_empty())
    {
        return Ok((parse_filter_functions(&s, &blacklist), Source::Ftrace));
    }
    let s = fs::read_to_string("/proc/kallsyms")?;
    Ok((parse_kallsyms(&s, &blacklist), Source::Kallsyms))
}

/// The loadable module of every probeable function that is in one, from ftrace's
/// `name [module]` lines or kallsyms' `addr t name\t[module]` lines: a function of vmlinux
/// has none. Read once per run.
pub fn modules() -> &'static HashMap<String, String> {
    static MODULES: OnceLock<HashMap<String, String>> = OnceLock::new();
    MODULES.get_or_init(|| {
        tracefs()
            .and_then(|t| fs::read_to_string(format!("{t}/available_filter_functions")).ok())
            .filter(|s| !s.is_empty())
            .or_else(|| fs::read_to_string("/proc/kallsyms").ok())
            .map(|s| parse_modules(&s))
            .unwrap_or_default()
    })
}

/// The module column of function `func` as `-l` shows it: its module, or `kernel`.
pub fn module_of(func: &str) -> &'static str {
    modules().get(func).map_or("kernel", String::as_str)
}

/// Whether a function of module `module` (`None`: the kernel's own) is one that the module
/// field `pat` of a description names: empty or `*`, any; `vmlinux` or `kernel`, the
/// kernel's own; else a glob of module names.
pub fn module_matches(pat: &str, module: Option<&str>) -> bool {
    match (pat, module) {
        ("" | "*", _) => true,
        ("vmlinux" | "kernel", m) => m.is_none(),
        (p, Some(m)) => glob_match(p, m),
        (_, None) => false,
    }
}

/// The function-to-module map of ftrace's or kallsyms' text (a line whose last word is
/// `[module]`).
pub fn parse_modules(text: &str) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for l in text.lines() {
        let mut w = l.split_whitespace().rev();
        let Some(last) = w.next() else { continue };
        let Some(module) = last.strip_prefix('[').and_then(|x| x.strip_suffix(']')) else {
            continue;
        };
        // ftrace: `name [mod]`; kallsyms: `addr type name [mod]`.
        if let Some(name) = w.next() {
            m.insert(name.to_string(), module.to_string());
        }
    }
    m
}

/// Names of `available_filter_functions` (`name` or `name [module]` per line).
pub fn parse_filter_functions(text: &str, blacklist: &BTreeSet<String>) -> Vec<String> {
    let set: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| !blacklist.contains(*n))
        .map(str::to_owned)
        .collect();
    set.into_iter().collect()
}

/// Text symbols (`t`/`T`) of `/proc/kallsyms`, without compiler-generated local names.
pub fn parse_kallsyms(text: &str, blacklist: &BTreeSet<String>) -> Vec<String> {
    let set: BTreeSet<String> = text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (_addr, ty, name) = (it.next()?, it.next()?, it.next()?);
            matches!(ty, "t" | "T").then_some(name)
        })
        .filter(|n| !n.contains('.') && !n.starts_with("__pfx_") && !blacklist.contains(*n))
        .map(str::to_owned)
        .collect();
    set.into_iter().collect()
}

/// Function names of the kprobe blacklist (`0xstart-0xend\tname` per line).
pub fn parse_blacklist(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(str::to_owned)
        .collect()
}

/// Whether `pat` has glob characters.
pub fn is_glob(pat: &str) -> bool {
    pat.contains(['*', '?'])
}

/// Shell-style match of `name` against `pat` with `*` (any run) and `?` (one character).
pub fn glob_match(pat: &str, name: &str) -> bool {
    let (p, n) = (pat.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, name index it matched to).
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi + 1, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The functions that `pat` names, in order.
pub fn expand<'a>(pat: &str, functions: &'a [String]) -> Vec<&'a str> {
    if !is_glob(pat) {
        return functions
            .binary_search_by(|f| f.as_str().cmp(pat))
            .map(|i| vec![functions[i].as_str()])
            .unwrap_or_default();
    }
    functions
        .iter()
        .map(String::as_str)
        .filter(|f| glob_match(pat, f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*", ""));
        assert!(glob_match("ksys_*", "ksys_read"));
        assert!(!glob_match("ksys_*", "do_ksys_read"));
        assert!(glob_match("*_read", "ksys_read"));
        assert!(glob_match("vfs_?ead", "vfs_read"));
        assert!(!glob_match("vfs_?ead", "vfs_bread"));
        assert!(glob_match("*s*s*", "sys_kss"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(glob_match("__x64_sys_get*pid", "__x64_sys_getppid"));
    }

    #[test]
    fn parsing() {
        let bl = parse_blacklist("0xffffffff81000000-0xffffffff81000010\tdo_int3\n");
        let ff = parse_filter_functions("vfs_read\nfoo [mod]\ndo_int3\nvfs_read\n", &bl);
        assert_eq!(ff, ["foo", "vfs_read"]);
        let ks = parse_kallsyms(
            "ffffffff81000000 T _text\nffffffff81000100 t foo.cold\n\
             ffffffff81000200 D data\nffffffff81000300 t __pfx_bar\nffffffff81000400 T bar\n",
            &bl,
        );
        assert_eq!(ks, ["_text", "bar"]);
        let fns: Vec<String> = ["a1", "a2", "b1"].iter().map(|s| s.to_string()).collect();
        assert_eq!(expand("a*", &fns), ["a1", "a2"]);
        assert_eq!(expand("b1", &fns), ["b1"]);
        assert!(expand("c", &fns).is_empty());
    }

    #[test]
    fn modules_of_functions() {
        let m = parse_modules(
            "vfs_read\next4_read [ext4]\n\
             ffffffffa0000000 t oxtmod_hit\t[oxtmod]\nffffffff81000000 T _text\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m["ext4_read"], "ext4");
        assert_eq!(m["oxtmod_hit"], "oxtmod");
        assert!(module_matches("", Some("ext4")) && module_matches("*", None));
        assert!(module_matches("kernel", None) && module_matches("vmlinux", None));
        assert!(!module_matches("vmlinux", Some("ext4")));
        assert!(module_matches("ext*", Some("ext4")) && !module_matches("ext4", None));
    }
}
