//! Guest selftest of LOAD, in TAP: programs the verifier must reject with the offending
//! instruction's index, and 10,000 LOADs of random and mutated images that must fail cleanly
//! (no oops, no splat, no leak).

#![deny(clippy::undocumented_unsafe_blocks)]

use oxtrace::dsl::{self, CompileOptions};
use oxtrace::runtime::device::Device;
use oxtrace_core::abi;
use oxtrace_core::action::{insn, Op};
use oxtrace_core::program::{Image, Section};
use std::path::Path;

struct Tap {
    n: u32,
    failed: u32,
}

impl Tap {
    fn check(&mut self, ok: bool, name: &str, diag: &str) {
        self.n += 1;
        if ok {
            println!("ok {} {name}", self.n);
        } else {
            self.failed += 1;
            println!("not ok {} {name}", self.n);
            for l in diag.lines() {
                println!("# {l}");
            }
        }
    }
}

/// xorshift64*: reproducible randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn open() -> Device {
    Device::open(Path::new("/dev/oxtrace")).expect("open /dev/oxtrace")
}

/// A valid image with small buffers, and where its first clause's actions start (byte
/// offset of that instruction in the image).
fn base_image() -> (Vec<u8>, usize) {
    let src = "#pragma D option bufsize=64k\n\
               BEGIN { x = 1; x = x + 2; x = x * 3; trace(x); exit(0); }";
    let c = dsl::compile(src, "-e", &CompileOptions::default()).expect("base program compiles");
    let img = Image::parse(&c.image).expect("base image parses");
    let code = img.section(Section::Code);
    let code_off = code.as_ptr() as usize - c.image.as_ptr() as usize;
    let act = img.clause(0).expect("clause 0").act_start as usize;
    let at = code_off + 8 * act;
    (c.image.clone(), at)
}

fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    println!("TAP version 13");
    println!("1..6");
    let mut t = Tap { n: 0, failed: 0 };
    let (base, at) = base_image();

    // The unmodified image loads.
    let d = open();
    let r = d.load(&base, &[], &[], (&[], &[]));
    t.check(
        r.is_ok(),
        "the base image loads",
        &format!("{:?}", r.err().map(|b| b.1)),
    );
    drop(d);

    // Each defect is reported at its instruction.
    let cases: [(&str, u32, u64, u32); 3] = [
        ("backward jump", 2, insn(Op::Ba, 0, 0, 0, 0), 8),
        ("invalid opcode", 1, 0xff, 4),
        ("register out of range", 0, insn(Op::Mov, 40, 1, 0, 0), 5),
    ];
    for (what, idx, word, code) in cases {
        let mut img = base.clone();
        let o = at + 8 * idx as usize;
        img[o..o + 8].copy_from_slice(&word.to_le_bytes());
        let d = open();
        match d.load(&img, &[], &[], (&[], &[])) {
            Ok(_) => t.check(false, &format!("{what} rejected"), "LOAD succeeded"),
            Err(b) => {
                let (e, l) = *b;
                let ok = e.err.raw_os_error() == Some(libc::EINVAL)
                    && l.err_kind == abi::LOADERR_VERIFY
                    && l.err_insn == idx
                    && l.err_code == code;
                t.check(
                    ok,
                    &format!("{what} rejected at instruction {idx}"),
                    &format!(
                        "errno {:?} kind {} clause {} part {} insn {} code {} arg {}",
                        e.err.raw_os_error(),
                        l.err_kind,
                        l.err_index,
                        l.err_part,
                        l.err_insn,
                        l.err_code,
                        l.err_arg
                    ),
                );
            }
        }
    }

    // 10,000 LOADs of random bytes, random sizes and mutated images.
    let vm0 = meminfo("VmallocUsed:");
    let slab0 = meminfo("Slab:");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut d = open();
    let (mut loaded, mut refused, mut unexpected) = (0u32, 0u32, Vec::new());
    for i in 0..10_000u32 {
        let img: Vec<u8> = match i % 4 {
            // Pure noise of any size up to 64 KiB.
            0 => (0..rng.below(1 << 16)).map(|_| rng.next() as u8).collect(),
            // A few flipped bytes in a valid image.
            1 | 2 => {
                let mut m = base.clone();
                for _ in 0..1 + rng.below(8) {
                    let p = rng.below(m.len() as u64) as usize;
                    m[p] ^= 1 << rng.below(8);
                }
                m
            }
            // A valid image cut short or padded.
            _ => {
                let mut m = base.clone();
                m.resize(rng.below(base.len() as u64 * 2) as usize, rng.next() as u8);
                m
            }
        };
        // Now and then, a random attach table too.
        let (att, names) = if i % 7 == 0 {
            let names = b"ksys_read\0\0nonexistent_function_x\0".to_vec();
            let att: Vec<abi::Attach> = (0..rng.below(4))
                .map(|_| abi::Attach {
                    probe: rng.below(3) as u32,
                    flags: rng.below(3) as u32,
                    name: rng.below(names.len() as u64 + 2) as u32,
                    reserved: (rng.below(8) == 0) as u32,
                })
                .collect();
            (att, names)
        } else {
            (Vec::new(), Vec::new())
        };
        match d.load(&img, &att, &names, (&[], &[])) {
            Ok(_) => {
                loaded += 1;
                d = open();
            }
            Err(b) => {
                let code = b.0.err.raw_os_error().unwrap_or(0);
                if matches!(
                    code,
                    libc::EINVAL | libc::E2BIG | libc::ENOENT | libc::ENOMEM
                ) {
                    refused += 1;
                } else if unexpected.len() < 10 {
                    unexpected.push(format!("load {i}: {}", b.0));
                }
            }
        }
    }
    drop(d);
    t.check(
        unexpected.is_empty() && loaded + refused == 10_000,
        "10000 random LOADs fail cleanly or load",
        &format!(
            "loaded {loaded}, refused {refused}\n{}",
            unexpected.join("\n")
        ),
    );
    println!("# {loaded} loaded, {refused} refused");

    // Nothing leaked: no consumer left, memory back where it was.
    let d = open();
    let st = d.status().expect("status");
    let vm1 = meminfo("VmallocUsed:");
    let slab1 = meminfo("Slab:");
    println!("# VmallocUsed {vm0} -> {vm1} kB, Slab {slab0} -> {slab1} kB");
    t.check(
        st.live_consumers == 1 && st.nconsumers == 1 && vm1 <= vm0 + 1024 && slab1 <= slab0 + 4096,
        "no consumer or memory leaked",
        &format!("live {} open {}", st.live_consumers, st.nconsumers),
    );
    std::process::exit(i32::from(t.failed > 0));
}
