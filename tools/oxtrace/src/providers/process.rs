//! What a process offers the pid and USDT providers: its load objects (the ELF files
//! `/proc/PID/maps` shows mapped), read once per compile, and the user-space probes
//! (uprobes) a description resolves to.
//!
//! Probes are placed by file offset: the kernel puts a uprobe on the file's page, so the
//! address the process loaded the object at (the load bias of a PIE or a shared library)
//! never enters, except for USDT operands that name a symbol's absolute address.

use crate::sym::usym::{parse_maps, ElfSyms};
use oxtrace_core::abi;
use oxtrace_core::limits;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// One user-space probe of a description: a uprobe for LOAD's uattach table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserProbe {
    /// `provider:module:function:name`, at most `MAX_UPROBE_NAME` bytes.
    pub name: String,
    /// Absolute path of the probed file.
    pub path: String,
    /// File offset of the probed instruction.
    pub offset: u64,
    /// File offset of the USDT semaphore, or 0.
    pub ref_ctr: u64,
    /// Return probes: the returning instruction's offset in its function.
    pub roff: u64,
    /// The process.
    pub pid: u32,
    /// USDT: the operands.
    pub args: Vec<abi::UsdtArg>,
    /// Matched by a glob: the kernel may skip it (`ATTACH_OPTIONAL`).
    pub optional: bool,
}

/// One ELF file a process has mapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadObject {
    /// Its absolute path, as the maps show it.
    pub path: String,
    /// The path's last component: the probe's module.
    pub name: String,
    /// Whether it is the executable (`a.out`).
    pub exe: bool,
    /// Address and file offset of its first mapping (the load bias follows from them).
    pub first_map: (u64, u64),
}

/// An ELF file read for its symbols and code.
pub struct Elf {
    /// The file's bytes.
    pub data: Vec<u8>,
    /// Its function symbols and load segments.
    pub syms: ElfSyms,
}

thread_local! {
    static FILES: RefCell<HashMap<String, Option<Rc<Elf>>>> = RefCell::new(HashMap::new());
}

/// The ELF file at `path`, read once per thread (`None`: unreadable or not ELF).
pub fn elf(path: &str) -> Option<Rc<Elf>> {
    FILES.with(|f| {
        f.borrow_mut()
            .entry(path.to_string())
            .or_insert_with(|| {
                let data = std::fs::read(path).ok()?;
                let syms = ElfSyms::parse(&data)?;
                Some(Rc::new(Elf { data, syms }))
            })
            .clone()
    })
}

/// The load bias of `obj` (its addresses in the process less its ELF virtual addresses),
/// from its first mapping and the load segment holding that file offset.
pub fn load_bias(obj: &LoadObject, e: &Elf) -> Option<u64> {
    let (start, off) = obj.first_map;
    let (so, _, sv) = e
        .syms
        .segments()
        .iter()
        .find(|(o, n, _)| (o & !0xfff) <= off && off < o + n.max(&1))?;
    // The mapping's offset is page-aligned, the segment's need not be: congruent mod pages.
    Some(start.wrapping_sub(sv.wrapping_add(off).wrapping_sub(*so)))
}

/// Why a process cannot be probed, or its load objects: the executable first, then the
/// others in the order of their first mapping.
pub fn load_objects(pid: u32) -> Result<Vec<LoadObject>, String> {
    if pid == std::process::id() {
        return Err(format!(
            "process {pid} is oxtrace itself: user-space probes cannot be placed in the tool's own process"
        ));
    }
    let maps = match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("no such process {pid}"))
        }
        Err(e) => return Err(format!("cannot read /proc/{pid}/maps: {e}")),
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    Ok(objects_of(&maps, exe.as_deref()))
}

/// The load objects of a maps text, `exe` the executable's path.
pub fn objects_of(maps: &str, exe: Option<&str>) -> Vec<LoadObject> {
    let mut v: Vec<LoadObject> = Vec::new();
    for m in parse_maps(maps) {
        if m.path.ends_with(" (deleted)") || v.iter().any(|o| o.path == m.path) {
            continue;
        }
        v.push(LoadObject {
            name: m.path.rsplit('/').next().unwrap_or(&m.path).to_string(),
            exe: exe == Some(m.path.as_str()),
            path: m.path,
            first_map: (m.start, m.offset),
        });
    }
    v.sort_by_key(|o| !o.exe);
    v
}

/// Whether module pattern `pat` names `obj`: its basename, its full path, `a.out` for the
/// executable, or a basename's start up to a `.` (`libc` and `libc.so` name `libc.so.6`),
/// each possibly a glob; empty names every object.
pub fn module_matches(pat: &str, obj: &LoadObject) -> bool {
    use super::fbt::glob_match;
    if pat.is_empty() || glob_match(pat, &obj.name) || glob_match(pat, &obj.path) {
        return true;
    }
    if obj.exe && glob_match(pat, "a.out") {
        return true;
    }
    // An initial part of the basename that ends before a dot.
    obj.name
        .match_indices('.')
        .any(|(i, _)| glob_match(pat, &obj.name[..i]))
}

/// `provider:module:function:name`, the function cut so that the whole fits the kernel's
/// limit (C++ names can be long).
pub fn probe_name(prov: &str, module: &str, func: &str, name: &str) -> String {
    let fixed = prov.len() + module.len() + name.len() + 3;
    let room = limits::MAX_UPROBE_NAME.saturating_sub(fixed);
    let mut cut = func.len().min(room);
    while !func.is_char_boundary(cut) {
        cut -= 1;
    }
    let s = format!("{prov}:{module}:{}:{name}", &func[..cut]);
    if s.len() > limits::MAX_UPROBE_NAME {
        let mut n = limits::MAX_UPROBE_NAME;
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        return s[..n].to_string();
    }
    s
}

/// A provider field `NAMEPID` split into the name and the process id (`pid1234`,
/// `myprov1234`); `None` without a trailing process id.
pub fn split_pid(prov: &str) -> Option<(&str, u32)> {
    let digits = prov.len() - prov.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits == prov.len() {
        return None;
    }
    let (name, pid) = prov.split_at(prov.len() - digits);
    Some((name, pid.parse().ok().filter(|&p| p > 0)?))
}

/// The load objects of `pid` that `module` names, or why there are none.
pub fn matching_objects(pid: u32, module: &str) -> Result<Vec<LoadObject>, String> {
    let objs = load_objects(pid)?;
    let hit: Vec<LoadObject> = objs
        .iter()
        .filter(|o| module_matches(module, o))
        .cloned()
        .collect();
    if hit.is_empty() {
        let names: Vec<String> = objs
            .iter()
            .map(|o| match o.exe {
                true => format!("{} (a.out)", o.name),
                false => o.name.clone(),
            })
            .collect();
        return Err(format!(
            "process {pid} has no load object '{module}' (it has: {})",
            names.join(", ")
        ));
    }
    Ok(hit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
555555554000-555555555000 r--p 00000000 08:01 1234   /usr/bin/prog
555555555000-555555556000 r-xp 00001000 08:01 1234   /usr/bin/prog
7ffff7dd0000-7ffff7f50000 r-xp 00028000 08:01 99     /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7f60000-7ffff7f70000 r-xp 00000000 08:01 98     /usr/lib/libold.so (deleted)
7ffff7ff0000-7ffff7ff2000 r-xp 00000000 00:00 0      [vdso]
";

    #[test]
    fn objects_and_module_names() {
        let o = objects_of(MAPS, Some("/usr/bin/prog"));
        assert_eq!(o.len(), 2);
        assert!(o[0].exe && o[0].name == "prog" && o[0].first_map == (0x555555554000, 0));
        let libc = &o[1];
        for pat in [
            "libc.so.6",
            "libc.so",
            "libc",
            "libc*",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "",
        ] {
            assert!(module_matches(pat, libc), "{pat}");
        }
        for pat in ["lib", "libc.s", "a.out", "libcx", "c.so.6"] {
            assert!(!module_matches(pat, libc), "{pat}");
        }
        assert!(module_matches("a.out", &o[0]) && module_matches("prog", &o[0]));
    }

    #[test]
    fn provider_pids() {
        assert_eq!(split_pid("pid1234"), Some(("pid", 1234)));
        assert_eq!(split_pid("myprov77"), Some(("myprov", 77)));
        assert_eq!(split_pid("pid"), None);
        assert_eq!(split_pid("1234"), None);
        assert_eq!(split_pid("pid0"), None);
        assert_eq!(split_pid("pid99999999999"), None);
    }

    #[test]
    fn names_fit_the_limit() {
        assert_eq!(probe_name("pid1", "a", "f", "entry"), "pid1:a:f:entry");
        let long = "x".repeat(400);
        let n = probe_name("pid1", "a", &long, "return");
        assert_eq!(n.len(), limits::MAX_UPROBE_NAME);
        assert!(n.starts_with("pid1:a:xxx") && n.ends_with(":return"));
    }

    #[test]
    fn own_and_missing_processes() {
        let me = load_objects(std::process::id()).unwrap_err();
        assert!(me.contains("oxtrace itself"), "{me}");
        assert_eq!(
            load_objects(u32::MAX / 2 + 5).unwrap_err(),
            format!("no such process {}", u32::MAX / 2 + 5)
        );
    }
}
