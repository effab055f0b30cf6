//! `make bench`'s timing of the tool's aggregation side, on synthetic snapshots: the merge
//! of 100,000 keys into the tool's table and the output after it (default `printa`, a
//! `printa` format, quantize histograms, JSON), each written to a sink, in CPU time (the
//! machine is shared). It prints figures and never fails on them (timings are never
//! asserted in tests). `ONLY` runs the figures whose name contains it (for a profiler).
//!
//! ```text
//! oxt-aggbench [ROUNDS [ONLY]]
//! ```

use oxtrace::agg::{AggDef, AggTable, Dictionary, KeyField, SortOrder};
use oxtrace_core::agg::{AggBuffer, AggFunc, KeyElem, SnapshotCursor};
use std::io::{self, Write};

const KEYS: u64 = 100_000;
/// Histograms are several lines each: fewer keys for the quantize figure.
const HIST_KEYS: u64 = 20_000;

/// The snapshot streams of `ncpus` CPUs after `@[k] = func(v(k))` for every `k < keys`,
/// key `k` on CPU `k % ncpus`, serialized as the kernel's AGGSNAP does.
fn streams(func: AggFunc, keys: u64, ncpus: usize, v: impl Fn(u64) -> i64) -> Vec<Vec<u8>> {
    let mut mems: Vec<Vec<u64>> = (0..ncpus).map(|_| vec![0u64; 1 << 21]).collect();
    for m in mems.iter_mut() {
        AggBuffer::format(m).expect("buffer");
    }
    for k in 0..keys {
        let cpu = (k % ncpus as u64) as usize;
        let mut b = AggBuffer::attach(&mut mems[cpu]).expect("buffer");
        // A few firings per key, as a workload makes them.
        for i in 0..3 {
            b.apply(0, &func, &[KeyElem::Int(k * 7919 % keys)], v(k + i), 1)
                .expect("apply");
        }
    }
    mems.iter_mut()
        .enumerate()
        .map(|(cpu, m)| {
            let b = AggBuffer::attach(m).expect("buffer");
            let mut buf = vec![0u8; b.snapshot_len()];
            let mut cur = SnapshotCursor::new();
            let mut len = 0;
            while !cur.is_done() {
                len += b
                    .serialize(cpu as u32, &mut buf[len..], &mut cur)
                    .expect("serialize");
            }
            buf.truncate(len);
            buf
        })
        .collect()
}

fn table(func: AggFunc) -> AggTable {
    let mut d = Dictionary::new();
    d.insert(AggDef {
        id: 0,
        name: String::new(),
        func,
        keys: vec![KeyField::int("arg2")],
    })
    .expect("dictionary");
    AggTable::new(d)
}

fn merged(func: AggFunc, snaps: &[Vec<u8>]) -> AggTable {
    let mut t = table(func);
    for s in snaps {
        t.merge_snapshots(s).expect("merge");
    }
    t
}

/// This thread's CPU time in ms: on a shared machine it moves less than the wall clock.
fn cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// Minimum and median of `rounds` runs of `f`, in ms of CPU time.
fn time(rounds: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut v: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = cpu_ms();
            f();
            cpu_ms() - t
        })
        .collect();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn report(what: &str, (min, med): (f64, f64)) {
    println!("AGGBENCH {what}: min {min:.1} ms, median {med:.1} ms");
}

/// Whether figure `what` is selected by the second argument.
fn want(what: &str) -> bool {
    std::env::args().nth(2).is_none_or(|o| what.contains(&o))
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5)
        .max(1);
    let bench = |what: &str, f: &mut dyn FnMut()| {
        if want(what) {
            report(what, time(rounds, f));
        }
    };
    let count = streams(AggFunc::Count, KEYS, 1, |_| 0);
    let count4 = streams(AggFunc::Count, KEYS, 4, |_| 0);
    bench("merge 100k keys, 1 CPU", &mut || {
        drop(merged(AggFunc::Count, &count))
    });
    bench("merge 100k keys, 4 CPUs", &mut || {
        drop(merged(AggFunc::Count, &count4))
    });
    let order = SortOrder::default();
    let mut t = merged(AggFunc::Count, &count4);
    let mut print = |f: &mut dyn FnMut(&mut AggTable, &mut String)| {
        let mut s = String::new();
        f(&mut t, &mut s);
        io::sink().write_all(s.as_bytes()).expect("write");
    };
    bench("print 100k keys", &mut || {
        print(&mut |t, s| t.printa(0, order, s).expect("printa"))
    });
    bench("printa format 100k keys", &mut || {
        print(&mut |t, s| {
            t.printa_format(0, "%-8d %@12d\n", order, s)
                .expect("printa")
        })
    });
    bench("json 100k keys", &mut || {
        print(&mut |t, s| *s = t.to_json(order))
    });
    let q = streams(AggFunc::Quantize, HIST_KEYS, 4, |k| (k % 5000) as i64);
    let mut t = merged(AggFunc::Quantize, &q);
    bench("print quantize 20k keys", &mut || {
        let mut s = String::new();
        t.printa(0, order, &mut s).expect("printa");
        io::sink().write_all(s.as_bytes()).expect("write");
    });
}
