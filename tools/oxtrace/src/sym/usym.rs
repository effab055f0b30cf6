//! User symbols for `ustack()`, `usym()` and printf's `%A` (`crate::output::symbols` renders
//! the stacks and symbol values they name).
//!
//! A user address is found in the process's `/proc/PID/maps`, turned into the mapped
//! file's virtual address through its `PT_LOAD` segments, and named from the file's ELF
//! symbol table (`.symtab`, else `.dynsym`), with the [`object`] crate: maintained by the
//! gimli-rs group that also maintains `addr2line` (the Rust standard library's backtrace
//! uses both), pure Rust, and with only the ELF reader enabled it adds one crate and no
//! C dependency. Mappings are cached per process and symbol tables per file, so a stack of
//! 20 frames costs one binary search each after the first. A process that has exited (its
//! maps are gone) prints bare hexadecimal addresses, as DTrace does.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use oxtrace_core::ustack::Style;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// One file mapping of a process (a line of `/proc/PID/maps` with a path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// Address past the end.
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The mapped file's absolute path.
    pub path: String,
}

/// The function symbols and load segments of one ELF file.
#[derive(Debug, Default)]
pub struct ElfSyms {
    /// Function symbols: address, size (0: unknown), name; sorted by address.
    syms: Vec<(u64, u64, String)>,
    /// Load segments: file offset, file size, virtual address.
    segs: Vec<(u64, u64, u64)>,
    /// Every function symbol, aliases included (`__libc_malloc` beside `malloc`), sorted by
    /// name.
    all: Vec<(u64, u64, String)>,
    /// Addresses of `STT_GNU_IFUNC` symbols (resolvers that choose an implementation at
    /// load time), sorted.
    ifuncs: Vec<u64>,
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
        let ifunc = |s: &object::Symbol<'_, '_>| match s.flags() {
            object::SymbolFlags::Elf { st_info, .. }
                if st_info.st_type() == object::elf::STT_GNU_IFUNC =>
            {
                Some(s.address())
            }
            _ => None,
        };
        let mut syms: Vec<_> = f.symbols().filter_map(|s| func(&s)).collect();
        let mut ifuncs: Vec<u64> = f.symbols().filter_map(|s| ifunc(&s)).collect();
        if syms.is_empty() {
            syms = f.dynamic_symbols().filter_map(|s| func(&s)).collect();
            ifuncs = f.dynamic_symbols().filter_map(|s| ifunc(&s)).collect();
        }
        ifuncs.sort_unstable();
        let mut all = syms.clone();
        all.sort_by(|a, b| a.2.cmp(&b.2));
        sort_syms(&mut syms);
        let segs = f
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        Some(Self {
            syms,
            segs,
            all,
            ifuncs,
        })
    }

    /// Function symbols: address, size (0: unknown), name; sorted by address, one name
    /// an address.
    pub fn functions(&self) -> &[(u64, u64, String)] {
        &self.syms
    }

    /// The function symbols named `name` (an alias the address's one name hides, too).
    pub fn named(&self, name: &str) -> &[(u64, u64, String)] {
        let lo = self.all.partition_point(|s| s.2.as_str() < name);
        let hi = self.all.partition_point(|s| s.2.as_str() <= name);
        &self.all[lo..hi]
    }

    /// Whether the function at `v` is an `STT_GNU_IFUNC` resolver.
    pub fn is_ifunc(&self, v: u64) -> bool {
        self.ifuncs.binary_search(&v).is_ok()
    }

    /// Load segments: file offset, file size, virtual address.
    pub fn segments(&self) -> &[(u64, u64, u64)] {
        &self.segs
    }

    /// The file offset of virtual address `v`, through the load segment whose file bytes
    /// hold it.
    pub fn file_offset(&self, v: u64) -> Option<u64> {
        self.segs
            .iter()
            .find(|(_, n, a)| (*a..a + n).contains(&v))
            .map(|(o, _, a)| v - a + o)
    }

    /// The function at virtual address `v` and the offset into it.
    pub fn function_at(&self, v: u64) -> Option<(&str, u64)> {
        self.lookup(v)
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

/// The file mappings of a `/proc/PID/maps` text, in its order.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
