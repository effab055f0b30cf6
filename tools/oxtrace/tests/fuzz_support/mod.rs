//! The fuzzing harness of `tests/fuzz.rs`: proptest drives byte-level mutations of real
//! seed inputs (the selftests' D programs, the host's BTF, ELF files built from the
//! selftests' C sources, /proc/kallsyms, tracefs format files, records the kernel's own
//! writers produce), and every input runs under three guards:
//!
//! - a panic is a failure (proptest catches it, shrinks the input and reports it);
//! - time: an input slower than `OXT_FUZZ_INPUT_MS` fails (default 30 s, a generous
//!   bound: a debug build on a saturated host is slow; `make stress` sets 10 s for its
//!   release build), and a watchdog thread aborts the process, printing the input, if one
//!   runs for ten times as long (a hang never returns to be measured);
//! - memory: a counting allocator tracks each thread's live heap; an input that grows it
//!   by more than 256 MiB fails, and no thread may hold more than 1 GiB (the allocation
//!   fails, which aborts: an unbounded allocation never reaches the host's OOM killer).
//!
//! `OXT_FUZZ_CASES` sets the inputs per target (`make stress` runs 100,000; `cargo test`,
//! and with it `make check`, runs the short default).

#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Growth of a thread's live heap over one input that fails it.
const INPUT_MEM_LIMIT: isize = 256 << 20;
/// Live heap no thread may exceed: the allocation fails.
const THREAD_MEM_CAP: isize = 1 << 30;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting each thread's live bytes.
pub struct Counting;

fn account(delta: isize) -> bool {
    LIVE.try_with(|l| {
        let n = l.get() + delta;
        if delta > 0 && n > THREAD_MEM_CAP {
            return false;
        }
        l.set(n);
        let _ = PEAK.try_with(|p| p.set(p.get().max(n)));
        true
    })
    .unwrap_or(true)
}

// SAFETY: every call is forwarded to `System` unchanged; the counting touches only
// const-initialized thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !account(l.size() as isize) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !account(l.size() as isize) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        account(-(l.size() as isize));
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if !account(new as isize - l.size() as isize) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Inputs per target.
pub fn cases() -> u32 {
    std::env::var("OXT_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

/// How long one input may take: a bound for a runaway input, not a performance target
/// (a debug build on a host with every CPU busy is many times slower than an idle one).
pub fn input_limit() -> Duration {
    Duration::from_millis(
        std::env::var("OXT_FUZZ_INPUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30_000),
    )
}

/// One byte-level mutation of an input.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Flip a bit.
    Flip(u32, u8),
    /// Set a byte.
    Set(u32, u8),
    /// Overwrite 4 bytes with an interesting little-endian value.
    Word(u32, u32),
    /// Overwrite 8 bytes with an interesting little-endian value.
    Quad(u32, u64),
    /// Insert bytes.
    Insert(u32, Vec<u8>),
    /// Insert a dictionary token.
    Token(u32, u16),
    /// Delete a range.
    Delete(u32, u16),
    /// Copy a range elsewhere.
    Dup(u32, u16, u32),
    /// Cut the input.
    Truncate(u32),
    /// Splice in a range of another seed.
    Splice(u32, u16, u32, u16),
}

fn word() -> impl Strategy<Value = u32> {
    prop_oneof![
        prop::sample::select(vec![
            0u32,
            1,
            2,
            3,
            4,
            7,
            8,
            12,
            16,
            24,
            0x7f,
            0x80,
            0xff,
            0x100,
            0xffff,
            0x1_0000,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_fff0,
            0xffff_fffe,
            0xffff_ffff,
        ]),
        any::<u32>(),
    ]
}

fn quad() -> impl Strategy<Value = u64> {
    prop_oneof![
        prop::sample::select(vec![
            0u64,
            1,
            8,
            0x1000,
            0x7fff_ffff,
            0xffff_ffff,
            0x8000_0000_0000_0000,
            u64::MAX - 7,
            u64::MAX,
        ]),
        any::<u64>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<u32>(), 0u8..8).prop_map(|(p, b)| Mutation::Flip(p, b)),
        2 => (any::<u32>(), any::<u8>()).prop_map(|(p, b)| Mutation::Set(p, b)),
        2 => (any::<u32>(), word()).prop_map(|(p, w)| Mutation::Word(p, w)),
        1 => (any::<u32>(), quad()).prop_map(|(p, w)| Mutation::Quad(p, w)),
        1 => (any::<u32>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(p, b)| Mutation::Insert(p, b)),
        3 => (any::<u32>(), any::<u16>()).prop_map(|(p, t)| Mutation::Token(p, t)),
        2 => (any::<u32>(), 1u16..64).prop_map(|(p, n)| Mutation::Delete(p, n)),
        1 => (any::<u32>(), 1u16..64, any::<u32>()).prop_map(|(p, n, t)| Mutation::Dup(p, n, t)),
        1 => any::<u32>().prop_map(Mutation::Truncate),
        1 => (any::<u32>(), any::<u16>(), any::<u32>(), 1u16..256)
            .prop_map(|(s, at, from, n)| Mutation::Splice(s, at, from, n)),
    ]
}

/// Applies `muts` to a copy of `seed`.
pub fn mutate(seed: &[u8], muts: &[Mutation], seeds: &[Vec<u8>], dict: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seed.to_vec();
    let at = |v: &Vec<u8>, p: u32| (p as usize).checked_rem(v.len() + 1).unwrap_or(0);
    for m in muts {
        match m {
            Mutation::Flip(p, b) if !v.is_empty() => {
                let i = *p as usize % v.len();
                v[i] ^= 1 << b;
            }
            Mutation::Set(p, b) if !v.is_empty() => {
                let i = *p as usize % v.len();
                v[i] = *b;
            }
            Mutation::Word(p, w) if v.len() >= 4 => {
                let i = *p as usize % (v.len() - 3);
                v[i..i + 4].copy_from_slice(&w.to_le_bytes());
            }
            Mutation::Quad(p, w) if v.len() >= 8 => {
                let i = *p as usize % (v.len() - 7);
                v[i..i + 8].copy_from_slice(&w.to_le_bytes());
            }
            Mutation::Insert(p, b) => {
                let i = at(&v, *p);
                v.splice(i..i, b.iter().copied());
            }
            Mutation::Token(p, t) if !dict.is_empty() => {
                let i = at(&v, *p);
                let tok = &dict[*t as usize % dict.len()];
                v.splice(i..i, tok.iter().copied());
            }
            Mutation::Delete(p, n) => {
                let i = at(&v, *p);
                let e = (i + *n as usize).min(v.len());
                v.drain(i..e);
            }
            Mutation::Dup(p, n, t) => {
                let i = at(&v, *p);
                let e = (i + *n as usize).min(v.len());
                let piece = v[i..e].to_vec();
                let j = at(&v, *t);
                v.splice(j..j, piece);
            }
            Mutation::Truncate(p) => {
                let i = at(&v, *p);
                v.truncate(i);
            }
            Mutation::Splice(s, from, to, n) if !seeds.is_empty() => {
                let o = &seeds[*s as usize % seeds.len()];
                let f = (*from as usize).checked_rem(o.len() + 1).unwrap_or(0);
                let e = (f + *n as usize).min(o.len());
                let j = at(&v, *to);
                v.splice(j..j, o[f..e].iter().copied());
            }
            _ => {}
        }
    }
    v
}

/// What the watchdog watches: when the current input started (ms since `base`, 0: none)
/// and the input.
struct Watch {
    name: String,
    base: Instant,
    started: AtomicU64,
    input: Mutex<Vec<u8>>,
    done: AtomicBool,
}

fn watchdog(w: Arc<Watch>, hang: Duration) {
    while !w.done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        let s = w.started.load(Ordering::Relaxed);
        if s == 0 {
            continue;
        }
        let now = w.base.elapsed().as_millis() as u64;
        if now.saturating_sub(s) > hang.as_millis() as u64 {
            let input = w.input.lock().map(|i| i.clone()).unwrap_or_default();
            let path = std::env::temp_dir().join(format!("oxt-fuzz-hang-{}.bin", w.name));
            let _ = std::fs::write(&path, &input);
            eprintln!(
                "fuzz {}: an input ran for more than {} ms: a hang; the input ({} bytes) is in {}:\n{}",
                w.name,
                hang.as_millis(),
                input.len(),
                path.display(),
                String::from_utf8_lossy(&input[..input.len().min(2000)])
            );
            std::process::abort();
        }
    }
}

/// Runs `f` on `cases()` mutations of `seeds` (and each seed itself first). `f` returns an
/// error for a wrong answer (a refusal without a position, a check that disagrees).
pub fn run(
    name: &str,
    seeds: &[Vec<u8>],
    dict: &[Vec<u8>],
    f: impl Fn(&[u8]) -> Result<(), String>,
) {
    assert!(!seeds.is_empty(), "fuzz {name}: no seeds");
    let limit = input_limit();
    let w = Arc::new(Watch {
        name: name.to_string(),
        base: Instant::now(),
        started: AtomicU64::new(0),
        input: Mutex::new(Vec::new()),
        done: AtomicBool::new(false),
    });
    let dog = {
        let w = w.clone();
        std::thread::spawn(move || watchdog(w, limit * 10))
    };
    let t0 = Instant::now();
    let one = |input: &[u8]| -> Result<(), TestCaseError> {
        *w.input.lock().unwrap() = input.to_vec();
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        w.started
            .store(w.base.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
        let t = Instant::now();
        let r = f(input);
        let took = t.elapsed();
        w.started.store(0, Ordering::Relaxed);
        let grew = PEAK.with(Cell::get) - base;
        let show = || String::from_utf8_lossy(&input[..input.len().min(300)]).into_owned();
        r.map_err(|e| TestCaseError::fail(format!("{e}\ninput: {:?}", show())))?;
        if took > limit {
            return Err(TestCaseError::fail(format!(
                "an input took {took:?} (limit {limit:?}): {:?}",
                show()
            )));
        }
        if grew > INPUT_MEM_LIMIT {
            return Err(TestCaseError::fail(format!(
                "an input grew the heap by {} MiB: {:?}",
                grew >> 20,
                show()
            )));
        }
        Ok(())
    };
    for s in seeds {
        if let Err(e) = one(s) {
            w.done.store(true, Ordering::Relaxed);
            panic!("fuzz {name}: a seed fails: {e}");
        }
    }
    let n = cases();
    let mut runner = TestRunner::new(Config {
        cases: n,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..Config::default()
    });
    let strat = (0..seeds.len(), prop::collection::vec(mutation(), 1..6));
    let r = runner.run(&strat, |(s, muts)| {
        let input = mutate(&seeds[s], &muts, seeds, dict);
        one(&input)
    });
    w.done.store(true, Ordering::Relaxed);
    let _ = dog.join();
    if let Err(e) = r {
        panic!("fuzz {name}: {e}");
    }
    eprintln!(
        "fuzz {name}: {} seeds and {n} inputs in {:.1} s",
        seeds.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// The repository's root.
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
