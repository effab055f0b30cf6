//! The pid and USDT providers against real ELF files: a PIE built here with `cc` (and
//! `<sys/sdt.h>`), run until it has its libraries mapped, resolved through its maps.

use super::pid::{self, decode};
use super::process::{self, LoadObject};
use super::usdt;
use oxtrace_core::abi;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const PROG: &str = r#"
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <stdio.h>
unsigned short myprov_fire_semaphore __attribute__((unused, section(".probes")));
unsigned short myprov_plain_semaphore __attribute__((unused, section(".probes")));
long counter = 5;
__attribute__((noinline)) int work(int a, long b) { if (a > 3) return a * 2; return (int)b + 1; }
__attribute__((noinline)) int tail(int a) { return work(a + 1, 7); }
static int impl_f(void) { return 1; }
static void *resolve_f(void) { return (void *)impl_f; }
int oxt_ifunc(void) __attribute__((ifunc("resolve_f")));
asm(".text\n.globl nosize\n.type nosize,@function\nnosize: ret\n");
int main(int argc, char **argv) {
    char buf[8];
    int r = work(argc, 2) + tail(argc);
    if (__builtin_expect(myprov_fire_semaphore, 0))
        DTRACE_PROBE2(myprov, fire, r, (long)argc);
    DTRACE_PROBE1(myprov, plain, counter);
    printf("ready %p\n", (void *)&counter);
    fflush(stdout);
    return fgets(buf, sizeof buf, stdin) ? 0 : r;
}
"#;

/// The program built and running, stopped in its `fgets`; killed when dropped.
pub(crate) struct Running {
    pub(crate) child: Child,
    pub(crate) exe: String,
    pub(crate) counter: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Builds the test program and runs it until it waits for its input.
pub(crate) fn run() -> Running {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("oxt-user-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("prog.c");
    let exe = dir.join("prog");
    std::fs::write(&src, PROG).unwrap();
    let st = Command::new("cc")
        .args(["-O2", "-fPIE", "-pie", "-fcf-protection=full", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("cc");
    assert!(st.success(), "cc failed (is systemtap-sdt-dev installed?)");
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let counter = u64::from_str_radix(line.trim().trim_start_matches("ready 0x"), 16).unwrap();
    Running {
        child,
        exe: exe.to_string_lossy().into_owned(),
        counter,
    }
}

#[test]
fn pid_and_usdt_probes_of_a_real_process() {
    let r = run();
    let pid = r.child.id();
    let objs = process::load_objects(pid).unwrap();
    assert!(objs[0].exe && objs[0].path == r.exe, "{objs:?}");
    assert!(objs.iter().any(|o| o.name.starts_with("libc.so")));

    // Entry: the symbol's file offset; the file's bytes there are the function's.
    let p = pid::resolve(pid, "a.out", "work", "entry").unwrap();
    assert_eq!(p.entry.len(), 1);
    let e = &p.entry[0];
    assert_eq!(e.name, format!("pid{pid}:prog:work:entry"));
    assert_eq!((e.path.as_str(), e.optional), (r.exe.as_str(), false));
    let elf = process::elf(&r.exe).unwrap();
    let (va, size, _) = elf
        .syms
        .functions()
        .iter()
        .find(|f| f.2 == "work")
        .cloned()
        .unwrap();
    assert_eq!(Some(e.offset), elf.syms.file_offset(va));
    // -fcf-protection: endbr64 first.
    let at = |off: u64| elf.data[off as usize];
    assert_eq!(
        &elf.data[e.offset as usize..e.offset as usize + 4],
        [0xf3, 0x0f, 0x1e, 0xfa]
    );

    // Return: a uprobe on each ret, roff its offset in the function.
    let p = pid::resolve(pid, "prog", "work", "return").unwrap();
    assert!(!p.ret.is_empty());
    for rp in &p.ret {
        assert_eq!(rp.offset, e.offset + rp.roff);
        assert!(rp.roff > 0 && rp.roff < size);
        assert_eq!(at(rp.offset), 0xc3, "{rp:?}");
    }
    // A tail call is a return too: tail() ends in a jmp to work().
    let p = pid::resolve(pid, "", "tail", "return").unwrap();
    assert!(
        p.ret.iter().any(|rp| matches!(at(rp.offset), 0xe9 | 0xeb)),
        "{:?}",
        p.ret
    );

    // Offsets: boundaries only.
    let p = pid::resolve(pid, "a.out", "work", "4").unwrap();
    assert_eq!(p.offsets[0].offset, e.offset + 4);
    assert_eq!(p.offsets[0].name, format!("pid{pid}:prog:work:4"));
    let err = pid::resolve(pid, "a.out", "work", "2").unwrap_err();
    assert!(err.contains("nearest: 0x0 and 0x4"), "{err}");
    let all = pid::resolve(pid, "a.out", "work", "*").unwrap();
    let insns = decode(&elf.data[e.offset as usize..(e.offset + size) as usize], va);
    assert_eq!(all.offsets.len(), insns.len());
    assert!(all.offsets.iter().all(|o| o.optional));
    assert_eq!(
        (all.entry.len(), all.ret.len()),
        (1, p.ret.len().max(all.ret.len()))
    );

    // A function of unknown size: refused when named, skipped under a glob.
    let err = pid::resolve(pid, "a.out", "nosize", "return").unwrap_err();
    assert!(err.contains("no size"), "{err}");
    assert_eq!(
        pid::resolve(pid, "a.out", "nosize", "entry")
            .unwrap()
            .entry
            .len(),
        1
    );
    let g = pid::resolve(pid, "a.out", "nosiz*", "return").unwrap();
    assert_eq!((g.ret.len(), g.unsized_skipped), (0, 1));

    // An IFUNC's symbol is its resolver: refused when named, left out of a glob.
    let err = pid::resolve(pid, "a.out", "oxt_ifunc", "entry").unwrap_err();
    assert!(err.contains("is an IFUNC"), "{err}");
    let g = pid::resolve(pid, "a.out", "oxt_ifun*", "entry").unwrap();
    assert_eq!((g.entry.len(), g.ifunc_skipped), (0, 1));

    // Modules: libc by any initial part of its name; a missing one is named.
    for m in ["libc.so.6", "libc.so", "libc"] {
        let p = pid::resolve(pid, m, "malloc", "entry").unwrap();
        assert_eq!(p.entry.len(), 1, "{m}");
        assert!(p.entry[0].path.contains("libc.so"), "{m}");
    }
    // An alias that the address's plainest name hides can be named too.
    let m = pid::resolve(pid, "libc", "malloc", "entry").unwrap().entry[0].offset;
    let a = pid::resolve(pid, "libc", "__libc_malloc", "entry").unwrap();
    assert_eq!(a.entry[0].offset, m);
    assert!(a.entry[0].name.ends_with(":__libc_malloc:entry"));
    let err = pid::resolve(pid, "libnope", "malloc", "entry").unwrap_err();
    assert!(
        err.contains("no load object 'libnope'") && err.contains("(a.out)"),
        "{err}"
    );
    let err = pid::resolve(pid, "a.out", "wrok", "entry").unwrap_err();
    assert!(err.contains("did you mean 'work'"), "{err}");
    let g = pid::resolve(pid, "a.out", "w*", "entry").unwrap();
    assert!(g
        .entry
        .iter()
        .any(|p| p.name.ends_with(":work:entry") && p.optional));

    // USDT: the providers, a semaphore-guarded site and a plain one.
    assert!(usdt::providers(pid).contains(&"myprov".to_string()));
    assert_eq!(usdt::resolve("nope", pid, "", "", "").unwrap(), None);
    let fire = usdt::resolve("myprov", pid, "", "", "fire")
        .unwrap()
        .unwrap();
    assert_eq!(fire.len(), 1);
    let f = &fire[0];
    assert_eq!(f.name, format!("myprov{pid}:prog:main:fire"));
    let sem = symbol_vaddr(&elf.data, "myprov_fire_semaphore");
    assert_eq!(Some(f.ref_ctr), elf.syms.file_offset(sem));
    assert_ne!(f.ref_ctr, 0);
    assert_eq!(f.args.len(), 2);
    assert!(f.args.iter().all(|a| a.size == 4 || a.size == 8));
    // The site is a nop at the note's address.
    assert_eq!(at(f.offset), 0x90);
    let plain = usdt::resolve("myprov", pid, "prog", "main", "plain")
        .unwrap()
        .unwrap();
    assert_ne!(plain[0].ref_ctr, f.ref_ctr);
    // glibc's own probes have no semaphore.
    if let Some(sj) = usdt::resolve("libc", pid, "libc", "", "setjmp").unwrap() {
        assert!(sj
            .iter()
            .all(|p| p.ref_ctr == 0 && p.path.contains("libc.so")));
    }
    // `counter` is a global: an operand naming it becomes its absolute address in the
    // process (its PIE load bias added), or a register the compiler loaded it into.
    let a = plain[0].args[0];
    assert_eq!(a.size, 8);
    if a.kind == abi::USDT_ARG_MEM && a.base == abi::UREG_NONE {
        assert_eq!(a.value as u64, r.counter);
    }
}

fn symbol_vaddr(data: &[u8], name: &str) -> u64 {
    use object::{Object, ObjectSymbol};
    let f = object::File::parse(data).unwrap();
    let s = f.symbols().find(|s| s.name() == Ok(name)).unwrap();
    s.address()
}

#[test]
fn load_bias_of_a_pie() {
    let r = run();
    let objs = process::load_objects(r.child.id()).unwrap();
    let exe: &LoadObject = &objs[0];
    let elf = process::elf(&exe.path).unwrap();
    let bias = process::load_bias(exe, &elf).unwrap();
    assert_eq!(bias + symbol_vaddr(&elf.data, "counter"), r.counter);
}
