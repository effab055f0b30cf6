//! Stacks and symbol values as the user sees them: the one renderer of every stack and
//! symbol value the kernel encodes (`oxtrace_core::stack`, `oxtrace_core::ustack`), named
//! through the tables of `crate::sym`.

use crate::sym::ksym::Ksyms;
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
    use oxtrace_core::ustack::{encode_sym, put};

    const KALLSYMS: &str = "\
ffffffff81234500 T ksys_read
ffffffffa0000000 T ext4_read\t[ext4]
";

    #[test]
    fn renders_an_encoded_stack() {
        let k = Ksyms::parse(KALLSYMS);
        let mut b = [0u8; 16];
        let n = oxtrace_core::stack::encode(&[0xffffffff81234519, 0xffffffffa0000010], &mut b);
        assert_eq!(n, 10);
        assert!(b[..n].iter().all(|c| *c != 0));
        let mut s = String::new();
        render_with(&k, &mut Usyms::new(), &b[..n], &mut s);
        assert_eq!(
            s,
            "\n              vmlinux`ksys_read+0x19\n              ext4`ext4_read+0x10\n"
        );
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
