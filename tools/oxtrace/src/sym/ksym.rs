//! Kernel symbols for `stack()` and printf's `%a`: /proc/kallsyms read once into a table
//! sorted by address, an address found by binary search and printed as DTrace does
//! (`vmlinux`func+0x1f`, `module`func+0x8`).

use std::sync::OnceLock;

/// A kernel text symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sym {
    addr: u64,
    name: String,
    /// The module, `None` for the kernel image.
    module: Option<String>,
    /// A text (code) symbol: stack frames are looked up among these only.
    text: bool,
}

/// The kernel's text symbols, sorted by address.
#[derive(Clone, Debug, Default)]
pub struct Ksyms {
    syms: Vec<Sym>,
    /// Indices into `syms` of the text symbols, in address order.
    text: Vec<usize>,
}

static KERNEL: OnceLock<Ksyms> = OnceLock::new();

impl Ksyms {
    /// Parses kallsyms text (`ffffffff81000000 T _text`, `... t name\t[module]`); keeps the
    /// symbols with a known address (an unprivileged reader sees zeros).
    pub fn parse(text: &str) -> Self {
        let mut syms: Vec<Sym> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                let module = f
                    .next()
                    .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                    .map(str::to_string);
                (addr != 0).then(|| Sym {
                    addr,
                    name: name.to_string(),
                    module,
                    text: matches!(kind, "t" | "T" | "w" | "W"),
                })
            })
            .collect();
        syms.sort_by_key(|s| s.addr);
        let text = (0..syms.len()).filter(|&i| syms[i].text).collect();
        Self { syms, text }
    }

    /// The table of the running kernel, read at first use.
    pub fn kernel() -> &'static Ksyms {
        KERNEL.get_or_init(|| {
            std::fs::read_to_string("/proc/kallsyms")
                .map(|t| Ksyms::parse(&t))
                .unwrap_or_default()
        })
    }

    /// Uses `k` as the running kernel's table (tests); false if one is in use already.
    pub fn set_kernel(k: Ksyms) -> bool {
        KERNEL.set(k).is_ok()
    }

    /// `pc` symbolized: `vmlinux`func+0xoff` (no offset at the symbol's start),
    /// `module`func+0xoff` for a module, the bare hexadecimal address when no text symbol
    /// is at or below it. For stack frames: only text symbols are considered.
    pub fn format(&self, pc: u64) -> String {
        let i = self.text.partition_point(|&i| self.syms[i].addr <= pc);
        let s = i.checked_sub(1).and_then(|i| self.syms.get(self.text[i]));
        Self::render(s, pc)
    }

    /// `addr` symbolized as [`Ksyms::format`] does, against every symbol, data included
    /// (printf's `%a`).
    pub fn format_addr(&self, addr: u64) -> String {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        Self::render(i.checked_sub(1).and_then(|i| self.syms.get(i)), addr)
    }

    /// The address of symbol `name` of the kernel image (`module` `None`) or of a module.
    pub fn lookup(&self, name: &str, module: Option<&str>) -> Option<u64> {
        self.syms
            .iter()
            .find(|s| s.name == name && s.module.as_deref() == module)
            .map(|s| s.addr)
    }

    /// The names of the kernel image's data symbols, for "did you mean".
    pub fn data_names(&self) -> impl Iterator<Item = &str> {
        self.syms
            .iter()
            .filter(|s| !s.text && s.module.is_none())
            .map(|s| s.name.as_str())
    }

    /// Whether the table is empty (no kallsyms, or an unprivileged reader's zeros).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    fn render(s: Option<&Sym>, addr: u64) -> String {
        let Some(s) = s else {
            return format!("0x{addr:x}");
        };
        let module = s.module.as_deref().unwrap_or("vmlinux");
        match addr - s.addr {
            0 => format!("{module}`{}", s.name),
            off => format!("{module}`{}+0x{off:x}", s.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81234500 T ksys_read
ffffffff81234400 t __x64_sys_read
ffffffff82000000 D some_data
ffffffffa0001000 t helper\t[ext4]
ffffffffa0000000 T ext4_read\t[ext4]
";

    #[test]
    fn symbolizes_kernel_and_module_pcs() {
        let k = Ksyms::parse(TEXT);
        assert_eq!(k.format(0xffffffff81234500), "vmlinux`ksys_read");
        assert_eq!(k.format(0xffffffff81234519), "vmlinux`ksys_read+0x19");
        assert_eq!(k.format(0xffffffff812344ff), "vmlinux`__x64_sys_read+0xff");
        assert_eq!(k.format(0xffffffffa0000010), "ext4`ext4_read+0x10");
        assert_eq!(k.format(0xffffffffa0001002), "ext4`helper+0x2");
        // Data symbols are not text: the PC belongs to the last text symbol before it.
        assert_eq!(k.format(0xffffffff82000008), "vmlinux`ksys_read+0xdcbb08");
        assert_eq!(k.format(0x1000), "0x1000");
        // printf's %a names data too.
        assert_eq!(k.format_addr(0xffffffff82000008), "vmlinux`some_data+0x8");
        assert_eq!(k.format_addr(0xffffffff81234519), "vmlinux`ksys_read+0x19");
    }
}
