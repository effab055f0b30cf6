//! User symbols for `ustack()`, `usym()` and printf's `%A`, and the one renderer of every
//! stack and symbol value the kernel encodes (`oxtrace_core::stack`, `oxtrace_core::ustack`).
//!
//! A user address is found in the process's `/proc/PID/maps`, turned into the mapped
//! file's virtual address through its `PT_LOAD` segments, and named from the file's ELF
//! symbol table (`.symtab`, else `.dynsym`), with the [`object`] crate: maintained by the
//! gimli-rs group that also maintains `addr2line` (the Rust standard library's backtrace
//! uses both), pure Rust, and with only the ELF reader enabled it adds one crate and no
//! C dependency. Mappings are cached per process and symbol tables per file, so a stack of
//! 20 frames costs one binary search each after the first. A process that has exited (its
//! maps are gone) prints bare hexadecimal addresses, as DTrace does.

use crate::ksym::Ksyms;
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use oxtrace_core::ustack::{Decoded, Style};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One file mapping of a process.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    path: String,
}

/// The function symbols and load segments of one ELF file.
#[derive(Debug, Default)]
pub struct ElfSyms {
    /// Function symbols: address, size (0: unknown), name; sorted by address.
    syms: Vec<(u64, u64, String)>,
    /// Load segments: file offset, file size, virtual address.
    segs: Vec<(u64, u64, u64)>,
}

impl ElfSyms {
    /// Reads the symbols of ELF image `data`; `None` if it is not one.
    pub fn parse(data: &[u8]) -> Option<Self> {
        let f = object::File::parse(data).ok()?;
        let func = |s: &object::Symbol<'_, '_>| {
            (s.kind() == SymbolKind::Text && s.address() != 0 && !s.is_undefined())
                .then(|| Some((s.address(), s.size(), s.name().ok()?.to_string())))
                .flatten()
        };
        let mut syms: Vec<_> = f.symbols().filter_map(|s| func(&s)).collect();
        if syms.is_empty() {
            syms = f.dynamic_symbols().filter_map(|s| func(&s)).collect();
        }
        sort_syms(&mut syms);
        let segs = f
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        Some(Self { syms, segs })
    }

    /// The virtual address of file offset `off`, through the segment that holds it.
    fn vaddr(&self, off: u64) -> Option<u64> {
        self.segs
            .iter()
            .find(|(o, n, _)| (*o..o + n).contains(&off))
            .map(|(o, _, v)| off - o + v)
    }

    /// The function at virtual address `v` and the offset into it.
    fn lookup(&self, v: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= v).checked_sub(1)?;
        let (a, size, name) = &self.syms[i];
        (*size == 0 || v < a + size).then_some((name.as_str(), v - a))
    }
}

/// Sorts symbols by address and keeps one name an address: of glibc's `__libc_read`,
/// `__read` and `read`, the one with the fewest leading underscores, the name a program
/// calls.
fn sort_syms(syms: &mut Vec<(u64, u64, String)>) {
    syms.sort_by_key(|(a, _, n)| (*a, n.len() - n.trim_start_matches('_').len(), n.clone()));
    syms.dedup_by_key(|s| s.0);
}

/// What an address is, as far as it is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The module (file name of the mapping), if the address is in a file mapping.
    pub module: Option<String>,
    /// The function and the offset into it.
    pub func: Option<(String, u64)>,
}

/// The cache of processes' mappings and files' symbols.
#[derive(Default)]
pub struct Usyms {
    procs: HashMap<u64, Option<Arc<Vec<Mapping>>>>,
    files: HashMap<String, Option<Arc<ElfSyms>>>,
    /// Where `/proc` is (tests point it elsewhere).
    proc_root: String,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(6, ' ');
            let (range, _perms, off) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.next()?.trim_start();
            let (s, e) = range.split_once('-')?;
            if !path.starts_with('/') {
                return None;
            }
            Some(Mapping {
                start: u64::from_str_radix(s, 16).ok()?,
                end: u64::from_str_radix(e, 16).ok()?,
                offset: u64::from_str_radix(off, 16).ok()?,
                path: path.to_string(),
            })
        })
        .collect()
}

impl Usyms {
    /// A cache reading `/proc`.
    pub fn new() -> Self {
        Self::with_proc("/proc")
    }

    /// A cache reading process information under `root` instead of `/proc`.
    pub fn with_proc(root: &str) -> Self {
        Self {
            proc_root: root.to_string(),
            ..Self::default()
        }
    }

    fn maps(&mut self, pid: u64) -> Option<Arc<Vec<Mapping>>> {
        let root = &self.proc_root;
        self.procs
            .entry(pid)
            .or_insert_with(|| {
                let t = std::fs::read_to_string(format!("{root}/{pid}/maps")).ok()?;
                Some(Arc::new(parse_maps(&t)))
            })
            .clone()
    }

    fn file(&mut self, pid: u64, path: &str) -> Option<Arc<ElfSyms>> {
        let root = &self.proc_root;
        self.files
            .entry(path.to_string())
            .or_insert_with(|| {
                // Through the process's root first: it may live in another mount namespace.
                let data = std::fs::read(format!("{root}/{pid}/root{path}"))
                    .or_else(|_| std::fs::read(path))
                    .ok()?;
                ElfSyms::parse(&data).map(Arc::new)
            })
            .clone()
    }

    /// Reads the mappings of `pid` and the symbols of its mapped files now, if not yet done,
    /// so that its stacks are named even if it exits before the tool prints them.
    pub fn prime(&mut self, pid: u64) {
        if self.procs.contains_key(&pid) {
            return;
        }
        let Some(maps) = self.maps(pid) else {
            return;
        };
        for m in maps.iter() {
            self.file(pid, &m.path);
        }
    }

    /// Resolves `addr` in process `pid`.
    pub fn resolve(&mut self, pid: u64, addr: u64) -> Resolved {
        let none = Resolved {
            module: None,
            func: None,
        };
        let Some(maps) = self.maps(pid) else {
            return none;
        };
        let Some(m) = maps.iter().find(|m| (m.start..m.end).contains(&addr)) else {
            return none;
        };
        let module = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
        let func = self.file(pid, &m.path).and_then(|f| {
            let v = f.vaddr(addr - m.start + m.offset)?;
            f.lookup(v).map(|(n, off)| (n.to_string(), off))
        });
        Resolved {
            module: Some(module),
            func,
        }
    }

    /// `addr` of process `pid` printed in `style`: `module`func+0xoff` (a frame, `uaddr`,
    /// `%A`), `module`func` (`usym`, `ufunc`), `module` (`umod`); hexadecimal when the
    /// symbol (or for `umod` the mapping) is unknown.
    pub fn format(&mut self, pid: u64, addr: u64, style: Style) -> String {
        let r = self.resolve(pid, addr);
        match (style, r.module, r.func) {
            (Style::Umod, Some(m), _) => m,
            (Style::Usym | Style::Ufunc, Some(m), Some((f, _))) => format!("{m}`{f}"),
            (Style::Ustack | Style::Uaddr, Some(m), Some((f, 0))) => format!("{m}`{f}"),
            (Style::Ustack | Style::Uaddr, Some(m), Some((f, off))) => {
                format!("{m}`{f}+0x{off:x}")
            }
            _ => format!("0x{addr:x}"),
        }
    }
}

/// The cache of the running system, made at first use.
pub fn system() -> &'static Mutex<Usyms> {
    static U: OnceLock<Mutex<Usyms>> = OnceLock::new();
    U.get_or_init(|| Mutex::new(Usyms::new()))
}

/// Primes the system cache ([`Usyms::prime`]) for every process of a user value in the
/// stack keys of `t`: the run calls this at each aggregation snapshot.
pub fn prime_table(t: &crate::agg::AggTable) {
    use crate::agg::{KeyKind, SortOrder};
    use oxtrace_core::agg::KeyElem;
    let mut pids = std::collections::BTreeSet::new();
    for def in t.dictionary().iter() {
        if !def.keys.iter().any(|k| k.kind == KeyKind::Stack) {
            continue;
        }
        for e in t.sorted(def.id, SortOrder::default()).unwrap_or_default() {
            for el in e.key.elems() {
                if let KeyElem::Str(s) = el {
                    match Decoded::new(s) {
                        Some(d) if d.style.user() => pids.insert(d.pid),
                        _ => false,
                    };
                }
            }
        }
    }
    let mut u = system().lock().unwrap_or_else(|e| e.into_inner());
    for pid in pids {
        u.prime(pid);
    }
}

/// Kernel address `addr` printed in `style` (`sym()`, `func()`, `mod()`).
fn kernel_sym(k: &Ksyms, addr: u64, style: Style) -> String {
    let full = k.format_addr(addr);
    let Some((m, f)) = full.split_once('`') else {
        return full;
    };
    match style {
        Style::Kmod => m.to_string(),
        _ => format!("{m}`{}", f.split('+').next().unwrap_or(f)),
    }
}

/// Whether encoded value `bytes` is one symbol (`usym()`, `sym()`, ...), printed as a
/// string, rather than a stack printed one frame a line.
pub fn is_symbol(bytes: &[u8]) -> bool {
    Decoded::new(bytes).is_some_and(|d| d.style != Style::Ustack)
}

/// The frames (or the one symbol) of an encoded value, innermost first, each symbolized:
/// kernel stacks with `k`, user values with `u`.
pub fn frames_with(k: &Ksyms, u: &mut Usyms, bytes: &[u8]) -> Vec<String> {
    match Decoded::new(bytes) {
        None => oxtrace_core::stack::decode(bytes)
            .map(|pc| k.format(pc))
            .collect(),
        Some(d) if d.style.user() => d.addrs().map(|a| u.format(d.pid, a, d.style)).collect(),
        Some(d) => d.addrs().map(|a| kernel_sym(k, a, d.style)).collect(),
    }
}

/// [`frames_with`] on the running system.
pub fn frames(bytes: &[u8]) -> Vec<String> {
    let mut u = system().lock().unwrap_or_else(|e| e.into_inner());
    frames_with(Ksyms::kernel(), &mut u, bytes)
}

/// An encoded stack as DTrace prints it: an empty line, then one frame a line indented 14
/// columns; a symbol value as its text alone.
pub fn render(bytes: &[u8], out: &mut String) {
    let f = frames(bytes);
    if is_symbol(bytes) {
        out.push_str(f.first().map_or("", |s| s.as_str()));
        return;
    }
    out.push('\n');
    for s in f {
        out.push_str(&" ".repeat(14));
        out.push_str(&s);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxtrace_core::ustack::{encode_sym, put};

    const MAPS: &str = "\
555555554000-555555555000 r--p 00000000 08:01 1234   /usr/bin/prog
555555555000-555555556000 r-xp 00001000 08:01 1234   /usr/bin/prog
7ffff7dd0000-7ffff7f50000 r-xp 00028000 08:01 99     /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7ff0000-7ffff7ff2000 r-xp 00000000 00:00 0      [vdso]
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0      [stack]
";

    #[test]
    fn aliases_prefer_the_plain_name() {
        let mut syms = vec![
            (0x20, 8, "next".to_string()),
            (0x10, 8, "__libc_read".to_string()),
            (0x10, 8, "read".to_string()),
            (0x10, 8, "__read".to_string()),
        ];
        sort_syms(&mut syms);
        let names: Vec<&str> = syms.iter().map(|s| s.2.as_str()).collect();
        assert_eq!(names, ["read", "next"]);
    }

    #[test]
    fn maps_keep_file_mappings() {
        let m = parse_maps(MAPS);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1],
            Mapping {
                start: 0x555555555000,
                end: 0x555555556000,
                offset: 0x1000,
                path: "/usr/bin/prog".into()
            }
        );
        assert_eq!(m[2].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
    }

    /// The test binary itself, mapped as /proc/self/maps says, symbolizes its own functions.
    #[inline(never)]
    fn known_function() -> u64 {
        known_function as *const () as u64
    }

    #[test]
    fn symbolizes_this_process() {
        let mut u = Usyms::new();
        let pid = std::process::id() as u64;
        let a = known_function();
        let r = u.resolve(pid, a + 1);
        let (f, off) = r.func.expect("a symbol for this test's own function");
        assert!(f.contains("known_function"), "{f}");
        assert_eq!(off, 1);
        let exe = std::env::current_exe().unwrap();
        let name = exe.file_name().unwrap().to_str().unwrap();
        assert_eq!(r.module.as_deref(), Some(name));
        let s = u.format(pid, a + 0x1, Style::Uaddr);
        assert!(
            s.starts_with(&format!("{name}`")) && s.ends_with("+0x1"),
            "{s}"
        );
        assert_eq!(u.format(pid, a, Style::Umod), name);
        // Both are cached now: one process, one file.
        assert_eq!((u.procs.len(), u.files.len()), (1, 1));
        // An address in no mapping, and a process that does not exist: hexadecimal.
        assert_eq!(u.format(pid, 0x10, Style::Uaddr), "0x10");
        assert_eq!(
            u.format(u32::MAX as u64 + 7, a, Style::Uaddr),
            format!("0x{a:x}")
        );
    }

    #[test]
    fn renders_user_stacks_and_symbols() {
        let k = Ksyms::parse("ffffffff81234500 T ksys_read\nffffffffa0000000 t f\t[ext4]\n");
        let mut u = Usyms::new();
        let pid = std::process::id() as u64;
        let a = known_function();
        // A stack of two frames: this function and an address in no mapping.
        let mut b = vec![Style::Ustack as u8];
        let at = put(&mut [0u8; 16], 0, 0).unwrap();
        assert_eq!(at, 1);
        let mut tmp = [0u8; 32];
        let n = put(&mut tmp, 0, pid).unwrap();
        b.extend_from_slice(&tmp[..n]);
        let n = put(&mut tmp, 0, a + 4).unwrap();
        b.extend_from_slice(&tmp[..n]);
        let d = 0x10i64 - (a + 4) as i64;
        let n = put(&mut tmp, 0, ((d << 1) ^ (d >> 63)) as u64).unwrap();
        b.extend_from_slice(&tmp[..n]);
        let f = frames_with(&k, &mut u, &b);
        assert_eq!(f.len(), 2);
        assert!(
            f[0].contains("known_function") && f[0].ends_with("+0x4"),
            "{}",
            f[0]
        );
        assert_eq!(f[1], "0x10");
        assert!(!is_symbol(&b));
        // Kernel symbol values.
        let n = encode_sym(Style::Ksym, 0, 0xffffffff81234519, &mut tmp);
        assert_eq!(frames_with(&k, &mut u, &tmp[..n]), ["vmlinux`ksys_read"]);
        assert!(is_symbol(&tmp[..n]));
        let n = encode_sym(Style::Kmod, 0, 0xffffffffa0000004, &mut tmp);
        assert_eq!(frames_with(&k, &mut u, &tmp[..n]), ["ext4"]);
        // A kernel stack is still one.
        let n = oxtrace_core::stack::encode(&[0xffffffff81234519], &mut tmp);
        assert_eq!(
            frames_with(&k, &mut u, &tmp[..n]),
            ["vmlinux`ksys_read+0x19"]
        );
    }
}
