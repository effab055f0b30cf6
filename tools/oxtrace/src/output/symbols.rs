//! Stacks and symbol values as the user sees them: the one renderer of every stack and
//! symbol value the kernel encodes (`oxtrace_core::stack`, `oxtrace_core::ustack`), named
//! through the tables of `crate::sym` (a stack's frames through the definitions the run
//! keeps in `crate::sym::stacks`).

use crate::sym::ksym::Ksyms;
use crate::sym::stacks;
use crate::sym::usym::{self, Usyms};
use oxtrace_core::ustack::{Decoded, Style};

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
    Decoded::new(bytes).is_some_and(|d| !d.style.stack())
}

/// The frames (or the one symbol) of an encoded value, innermost first, each symbolized:
/// kernel stacks with `k`, user values with `u`.
pub fn frames_with(k: &Ksyms, u: &mut Usyms, bytes: &[u8]) -> Vec<String> {
    let Some(d) = Decoded::new(bytes) else {
        // Not an encoded value: the empty string of a stack that had no frame.
        return vec![];
    };
    if d.style.stack() {
        let Some(id) = d.addrs().next() else {
            return vec![];
        };
        let t = stacks::system().lock().unwrap_or_else(|e| e.into_inner());
        let Some(st) = t.get(id) else {
            return vec![format!("<stack {id:#x} not defined>")];
        };
        return if st.user {
            st.pcs
                .iter()
                .map(|&a| u.format(st.pid, a, Style::Ustack))
                .collect()
        } else {
            st.pcs.iter().map(|&pc| k.format(pc)).collect()
        };
    }
    if d.style.user() {
        d.addrs().map(|a| u.format(d.pid, a, d.style)).collect()
    } else {
        d.addrs().map(|a| kernel_sym(k, a, d.style)).collect()
    }
}

/// [`frames_with`] on the running system.
pub fn frames(bytes: &[u8]) -> Vec<String> {
    let mut u = usym::system().lock().unwrap_or_else(|e| e.into_inner());
    frames_with(Ksyms::kernel(), &mut u, bytes)
}

/// An encoded stack as DTrace prints it: an empty line, then one frame a line indented 14
/// columns; a symbol value as its text alone.
pub fn render(bytes: &[u8], out: &mut String) {
    let mut u = usym::system().lock().unwrap_or_else(|e| e.into_inner());
    render_with(Ksyms::kernel(), &mut u, bytes, out);
}

/// [`render`] with the symbols of `k` and `u`.
pub fn render_with(k: &Ksyms, u: &mut Usyms, bytes: &[u8], out: &mut String) {
    let f = frames_with(k, u, bytes);
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
    use oxtrace_core::ustack::encode_sym;

    const KALLSYMS: &str = "\
ffffffff81234500 T ksys_read
ffffffffa0000000 T ext4_read\t[ext4]
";

    /// A reference to a stack defined in the run's table.
    fn defined(user: bool, pid: u64, pcs: &[u64]) -> Vec<u8> {
        use oxtrace_core::stack::{id, write_def, Def, DEF_KERNEL, DEF_MAX_BYTES, DEF_USER};
        let i = id(user, pid, pcs);
        let mut b = [0u8; DEF_MAX_BYTES];
        let n = write_def(i, pid, pcs, &mut b);
        let kind = if user { DEF_USER } else { DEF_KERNEL };
        assert!(stacks::define(&Def::parse(kind, &b[..n]).unwrap()));
        let style = if user { Style::Ustack } else { Style::Kstack };
        let n = encode_sym(style, pid, i, &mut b);
        b[..n].to_vec()
    }

    #[test]
    fn renders_a_defined_stack() {
        let k = Ksyms::parse(KALLSYMS);
        let b = defined(false, 0, &[0xffffffff81234519, 0xffffffffa0000010]);
        assert!(b.len() <= 12 && b.iter().all(|c| *c != 0));
        let mut s = String::new();
        render_with(&k, &mut Usyms::new(), &b, &mut s);
        assert_eq!(
            s,
            "\n              vmlinux`ksys_read+0x19\n              ext4`ext4_read+0x10\n"
        );
        // A reference the run has no definition of says so.
        let mut r = [0u8; 16];
        let n = encode_sym(Style::Kstack, 0, 0x1234, &mut r);
        assert_eq!(
            frames_with(&k, &mut Usyms::new(), &r[..n]),
            ["<stack 0x1234 not defined>"]
        );
        assert!(frames_with(&k, &mut Usyms::new(), &[]).is_empty());
    }

    /// A function of this test binary, which /proc/self/maps maps.
    #[inline(never)]
    fn known_function() -> u64 {
        known_function as *const () as u64
    }

    #[test]
    fn renders_user_stacks_and_symbols() {
        let k = Ksyms::parse("ffffffff81234500 T ksys_read\nffffffffa0000000 t f\t[ext4]\n");
        let mut u = Usyms::new();
        let pid = std::process::id() as u64;
        let a = known_function();
        // A stack of two frames: this function and an address in no mapping.
        let b = defined(true, pid, &[a + 4, 0x10]);
        let f = frames_with(&k, &mut u, &b);
        assert_eq!(f.len(), 2);
        assert!(
            f[0].contains("known_function") && f[0].ends_with("+0x4"),
            "{}",
            f[0]
        );
        assert_eq!(f[1], "0x10");
        assert!(!is_symbol(&b));
        let mut tmp = [0u8; 32];
        // Kernel symbol values.
        let n = encode_sym(Style::Ksym, 0, 0xffffffff81234519, &mut tmp);
        assert_eq!(frames_with(&k, &mut u, &tmp[..n]), ["vmlinux`ksys_read"]);
        assert!(is_symbol(&tmp[..n]));
        let n = encode_sym(Style::Kmod, 0, 0xffffffffa0000004, &mut tmp);
        assert_eq!(frames_with(&k, &mut u, &tmp[..n]), ["ext4"]);
    }
}
