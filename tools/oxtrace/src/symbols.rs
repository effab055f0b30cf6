//! Kernel symbols for printf's `%a`: an address as `module`symbol+offset`, as DTrace
//! prints it, from `/proc/kallsyms` (read once, when a `%a` is first printed).

use std::sync::OnceLock;

/// One symbol: address, module (`vmlinux` for the core kernel), name.
type Sym = (u64, String, String);

static TABLE: OnceLock<Vec<Sym>> = OnceLock::new();

/// Symbols of a `/proc/kallsyms` text, sorted by address (zero addresses, which an
/// unprivileged reader sees, are left out).
pub fn parse(text: &str) -> Vec<Sym> {
    let mut v: Vec<Sym> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let _ty = f.next()?;
            let name = f.next()?;
            let module = f.next().map_or("vmlinux", |m| {
                m.trim_start_matches('[').trim_end_matches(']')
            });
            (addr != 0).then(|| (addr, module.to_string(), name.to_string()))
        })
        .collect();
    v.sort_by_key(|s| s.0);
    v
}

/// Uses `syms` instead of `/proc/kallsyms` (tests); false if a table is in use already.
pub fn init_with(syms: Vec<Sym>) -> bool {
    TABLE.set(syms).is_ok()
}

fn table() -> &'static [Sym] {
    TABLE.get_or_init(|| {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| parse(&t))
            .unwrap_or_default()
    })
}

/// `addr` as `module`symbol+0xoff` (no offset at the symbol itself), or `None` when no
/// symbol is at or below it.
pub fn symbolize(addr: u64) -> Option<String> {
    let t = table();
    let i = t.partition_point(|s| s.0 <= addr).checked_sub(1)?;
    let (base, module, name) = &t[i];
    let off = addr - base;
    Some(if off == 0 {
        format!("{module}`{name}")
    } else {
        format!("{module}`{name}+{off:#x}")
    })
}
