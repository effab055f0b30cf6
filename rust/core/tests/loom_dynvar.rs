// SPDX-License-Identifier: GPL-2.0

//! Loom models of `dynvar`: threads act as CPUs in probe context (interrupts off, modelled by
//! a per-CPU generation counter that the cross-call waits on) and as the cleaner. Checked in
//! every interleaving: no chunk lost, none handed out twice, none reused while a CPU that
//! could have seen it live is still in probe context, and a reused chunk only after the first
//! cross-call of the pass that rinsed it.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p oxtrace-core --release --test loom_dynvar`.

#![cfg(loom)]

mod dynvar_util;

use dynvar_util::*;
use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use oxtrace_core::dynvar::*;

/// Probe context and cross-calls: `gen[cpu]` is odd while the CPU is in probe context
/// (interrupts off). A cross-call to a CPU completes once that CPU is, or has been, out of
/// probe context; the read-modify-write makes it a release/acquire pair both ways, like the
/// IPI's barriers.
struct Cpus {
    gen: Vec<AtomicU64>,
}

impl Cpus {
    fn new(n: usize) -> Self {
        Self {
            gen: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn enter(&self, cpu: usize) {
        self.gen[cpu].fetch_add(1, SeqCst);
    }

    fn exit(&self, cpu: usize) {
        self.gen[cpu].fetch_add(1, SeqCst);
    }
}

impl CrossCall for Cpus {
    fn sync_all_cpus(&self) {
        for g in &self.gen {
            let v = g.fetch_add(0, SeqCst);
            if v & 1 == 1 {
                while g.fetch_add(0, SeqCst) == v {
                    thread::yield_now();
                }
            }
        }
    }
}

struct World {
    m: Mem,
    cpus: Cpus,
}

fn world(nchunks: usize, ncpus: u32) -> Arc<World> {
    Arc::new(World {
        m: Mem::with(nchunks, ncpus),
        cpus: Cpus::new(ncpus as usize),
    })
}

fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    // Spin loops (bucket lock, cross-call wait, restarts) yield to loom: long but finite paths.
    b.max_branches = 20_000;
    b.check(f);
}

const V: u32 = 1;

/// Three CPUs allocate at once from two chunks owned by CPUs 0 and 1: CPUs 2 and 3 own
/// nothing and steal, racing each other and CPU 1 for the same free lists. Every chunk is
/// taken exactly once (by a success, or by an insertion that lost its bucket race and put it
/// on the dirty list); the others are dropped and counted.
#[test]
fn concurrent_allocations_get_distinct_chunks() {
    model(2, || {
        let w = world(2, 4);
        let hs: Vec<_> = [1usize, 2, 3]
            .into_iter()
            .map(|cpu| {
                let w = w.clone();
                thread::spawn(move || {
                    let key = 10 * cpu as u64;
                    w.cpus.enter(cpu);
                    let r = w.m.ds().get_or_alloc(cpu, V, &akey(V, key), 8).map(|r| {
                        r.set_word(0, key);
                        r.chunk()
                    });
                    w.cpus.exit(cpu);
                    (key, r)
                })
            })
            .collect();
        let got: Vec<(u64, Result<u32, DynvarError>)> =
            hs.into_iter().map(|h| h.join().unwrap()).collect();
        let ds = w.m.ds();
        let mut chunks: Vec<u32> = Vec::new();
        for (key, r) in &got {
            match r {
                Ok(c) => {
                    assert!(!chunks.contains(c), "one chunk handed out twice");
                    chunks.push(*c);
                    assert_eq!(ds.load(&akey(V, *key)).unwrap(), *key);
                }
                // EMPTY, or DIRTY when a chunk lost a bucket-head race went to the dirty list
                // (two buckets, three keys: two share one).
                Err(e) => assert!(
                    matches!(e, DynvarError::Drop(DropReason::Empty | DropReason::Dirty)),
                    "{e:?}"
                ),
            }
        }
        let s = ds.stats().total;
        let a = w.m.audit();
        assert_eq!(s.allocs, chunks.len() as u64);
        assert_eq!(s.allocs + s.drops_empty + s.drops_dirty, 3);
        assert_eq!((a.in_use, a.dirty), (s.allocs, s.races));
        assert_eq!(a.in_use + a.dirty, 2, "every chunk was taken exactly once");
    });
}

/// Two CPUs insert the same variable: one chunk wins the bucket head, the loser's chunk goes
/// to the dirty list and the loser then finds and updates the winner's chunk.
#[test]
fn same_variable_inserted_once() {
    model(3, || {
        let w = world(4, 2);
        let hs: Vec<_> = [(0usize, 1u64), (1, 2)]
            .into_iter()
            .map(|(cpu, val)| {
                let w = w.clone();
                thread::spawn(move || {
                    w.cpus.enter(cpu);
                    w.m.ds().store(cpu, V, &akey(V, 7), val).unwrap();
                    w.cpus.exit(cpu);
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let ds = w.m.ds();
        let v = ds.load(&akey(V, 7)).unwrap();
        assert!(v == 1 || v == 2);
        let a = w.m.audit();
        let s = ds.stats().total;
        assert_eq!((a.in_use, s.allocs), (1, 1));
        assert_eq!(a.dirty, s.races);
        assert_eq!(a.total(), 4);
    });
}

/// Stores `a` = key 0 (5), then the first of two more keys in its bucket (6), so that the
/// chain is that key, then `a`; returns the two keys. A deletion then unlinks from the middle
/// or the head depending on the key.
fn chain_of_two(w: &World) -> [u64; 2] {
    let ds = w.m.ds();
    let a = akey(V, 0);
    let same: Vec<u64> = (1..200u64)
        .filter(|k| ds.bucket_index(&akey(V, *k)) == ds.bucket_index(&a))
        .take(2)
        .collect();
    assert_eq!(same.len(), 2);
    ds.store(0, V, &a, 5).unwrap();
    ds.store(0, V, &akey(V, same[0]), 6).unwrap();
    [same[0], same[1]]
}

/// A deletion and an insertion on one hash chain at once (the deletion under the bucket lock,
/// the insertion by CAS on the head): both take effect, the chain stays whole.
#[test]
fn delete_and_insert_on_one_chain() {
    model(3, || {
        let w = world(4, 2);
        let a = akey(V, 0);
        let same = chain_of_two(&w);
        let w1 = w.clone();
        let del = thread::spawn(move || {
            w1.cpus.enter(0);
            assert!(w1.m.ds().delete(0, &akey(V, 0)).unwrap());
            w1.cpus.exit(0);
        });
        let w2 = w.clone();
        let (k0, k1) = (same[0], same[1]);
        let ins = thread::spawn(move || {
            w2.cpus.enter(1);
            w2.m.ds().store(1, V, &akey(V, k1), 7).unwrap();
            assert_eq!(w2.m.ds().load(&akey(V, k0)).unwrap(), 6);
            w2.cpus.exit(1);
        });
        del.join().unwrap();
        ins.join().unwrap();
        let ds = w.m.ds();
        assert_eq!(ds.load(&a).unwrap(), 0);
        assert_eq!(ds.load(&akey(V, same[0])).unwrap(), 6);
        assert_eq!(ds.load(&akey(V, same[1])).unwrap(), 7);
        assert_eq!(w.m.audit().in_use, 2);
    });
}

/// The latency script's return clause on one chain: CPU 0 reads `a` and deletes it where the
/// read found it, while CPU 1 deletes the variable ahead of `a` on the chain and inserts
/// another at its head. All three take effect and the chain stays whole, whether the
/// deletion found `a` where it looked or fell back to a walk.
#[test]
fn delete_found_races_a_deletion_and_an_insertion() {
    model(2, || {
        let w = world(4, 2);
        let a = akey(V, 0);
        let same = chain_of_two(&w);
        let w1 = w.clone();
        let firing = thread::spawn(move || {
            w1.cpus.enter(0);
            let ds = w1.m.ds();
            let v = ds.lookup(&akey(V, 0)).unwrap().unwrap();
            assert_eq!(v.word(0), 5);
            assert!(ds.delete_found(0, &akey(V, 0), v.chunk()).unwrap());
            w1.cpus.exit(0);
        });
        let w2 = w.clone();
        let (k0, k1) = (same[0], same[1]);
        let other = thread::spawn(move || {
            w2.cpus.enter(1);
            assert!(w2.m.ds().delete(1, &akey(V, k0)).unwrap());
            w2.m.ds().store(1, V, &akey(V, k1), 7).unwrap();
            w2.cpus.exit(1);
        });
        firing.join().unwrap();
        other.join().unwrap();
        let ds = w.m.ds();
        assert_eq!(ds.load(&a).unwrap(), 0);
        assert_eq!(ds.load(&akey(V, k0)).unwrap(), 0);
        assert_eq!(ds.load(&akey(V, k1)).unwrap(), 7);
        // Two deletions; an insertion that lost the head to another puts its chunk on the
        // dirty list too.
        let (a, s) = (w.m.audit(), ds.stats().total);
        assert_eq!((a.in_use, a.dirty), (1, 2 + s.races));
        assert_eq!(s.frees, 2);
    });
}

/// The ABA argument: CPU 0 has found a variable and still reads it while CPU 1 deletes it,
/// the cleaner runs and CPU 1 allocates again from a memory of one chunk. The chunk must not
/// be reused while CPU 0 is in probe context; when it is reused, the first cross-call of the
/// pass that rinsed it has completed.
#[test]
fn chunk_not_reused_while_a_cpu_may_read_it() {
    model(2, || {
        let w = world(1, 2);
        w.m.ds().store(0, V, &akey(V, 1), 7).unwrap();
        let wr = w.clone();
        let reader = thread::spawn(move || {
            wr.cpus.enter(0);
            let ds = wr.m.ds();
            if let Some(r) = ds.lookup(&akey(V, 1)).unwrap() {
                assert_eq!(r.word(0), 7);
                thread::yield_now();
                assert_eq!(r.word(0), 7, "chunk reused under a reader");
            }
            wr.cpus.exit(0);
        });
        let ww = w.clone();
        let writer = thread::spawn(move || {
            let ds = ww.m.ds();
            ww.cpus.enter(1);
            assert!(ds.delete(1, &akey(V, 1)).unwrap());
            ww.cpus.exit(1);
            ww.cpus.enter(1);
            let r = ds.store(1, V, &akey(V, 2), 9);
            if r.is_ok() {
                assert!(
                    ds.stats().crosscalls >= 1,
                    "reused before the first cross-call"
                );
            }
            ww.cpus.exit(1);
            r
        });
        let wc = w.clone();
        let cleaner = thread::spawn(move || {
            wc.m.ds().clean(&wc.cpus).unwrap();
        });
        reader.join().unwrap();
        let stored = writer.join().unwrap();
        cleaner.join().unwrap();
        let a = w.m.audit();
        assert_eq!(a.total(), 1);
        match stored {
            Ok(()) => assert_eq!(w.m.ds().load(&akey(V, 2)).unwrap(), 9),
            // Dropped while the chunk was dirty or rinsing, never as EMPTY.
            Err(e) => assert!(
                matches!(
                    e,
                    DynvarError::Drop(DropReason::Dirty | DropReason::Rinsing)
                ),
                "{e:?}"
            ),
        }
    });
}

/// CPUs free while the cleaner swaps their dirty lists and publishes clean lists, and one
/// allocates from a clean list as it appears: nothing lost, nothing twice.
#[test]
fn frees_and_allocations_race_with_the_cleaner() {
    model(2, || {
        let w = world(3, 2);
        let ds = w.m.ds();
        ds.store(0, V, &akey(V, 1), 1).unwrap();
        ds.store(0, V, &akey(V, 2), 2).unwrap();
        ds.store(1, V, &akey(V, 3), 3).unwrap();
        ds.delete(0, &akey(V, 1)).unwrap();
        let w0 = w.clone();
        let cpu0 = thread::spawn(move || {
            w0.cpus.enter(0);
            w0.m.ds().delete(0, &akey(V, 2)).unwrap();
            w0.cpus.exit(0);
        });
        let w1 = w.clone();
        let cpu1 = thread::spawn(move || {
            w1.cpus.enter(1);
            let r = w1.m.ds().store(1, V, &akey(V, 4), 4);
            w1.cpus.exit(1);
            r
        });
        let wc = w.clone();
        let cleaner = thread::spawn(move || {
            wc.m.ds().clean(&wc.cpus).unwrap();
        });
        cpu0.join().unwrap();
        let stored = cpu1.join().unwrap();
        cleaner.join().unwrap();
        let a = w.m.audit();
        assert_eq!(a.total(), 3);
        assert_eq!(a.in_use, 1 + u64::from(stored.is_ok()));
        // Quiescent now: two passes clean whatever is left dirty.
        w.m.ds().clean(&w.cpus).unwrap();
        w.m.ds().clean(&w.cpus).unwrap();
        let a = w.m.audit();
        assert_eq!(a.dirty + a.rinsing, 0);
        assert_eq!(a.free + a.clean + a.in_use, 3);
    });
}

/// A thread's own variable read from a chunk noted in an earlier firing (the latency
/// script's return probe reads where its entry stored): the thread on CPU 0 deleted its
/// variable, and while the cleaner recycles the chunk and CPU 1 allocates it for another
/// thread's variable, the thread reads its own from the noted chunk. It finds it gone, in
/// every interleaving, never the other thread's value.
#[test]
fn own_load_from_a_recycled_chunk() {
    model(2, || {
        let w = world(1, 2);
        let ds = w.m.ds();
        let mine = thread_tuple(5, V);
        let mut found = None;
        ds.store_noted(0, V, &mine[..], 7, &mut found).unwrap();
        let noted = found;
        assert!(noted.is_some());
        ds.store_noted(0, V, &mine[..], 0, &mut found).unwrap();
        let wr = w.clone();
        let reader = thread::spawn(move || {
            wr.cpus.enter(0);
            let ds = wr.m.ds();
            let mut f = noted;
            assert_eq!(ds.load_own(&thread_tuple(5, V)[..], &mut f).unwrap(), 0);
            wr.cpus.exit(0);
            wr.cpus.enter(0);
            let mut f = noted;
            assert_eq!(ds.load_own(&thread_tuple(5, V)[..], &mut f).unwrap(), 0);
            wr.cpus.exit(0);
        });
        let ww = w.clone();
        let writer = thread::spawn(move || {
            ww.cpus.enter(1);
            let r = ww.m.ds().store(1, V, &thread_tuple(6, V)[..], 9);
            ww.cpus.exit(1);
            r
        });
        let wc = w.clone();
        let cleaner = thread::spawn(move || {
            wc.m.ds().clean(&wc.cpus).unwrap();
        });
        reader.join().unwrap();
        let stored = writer.join().unwrap();
        cleaner.join().unwrap();
        if stored.is_ok() {
            assert_eq!(w.m.ds().load(&thread_tuple(6, V)[..]).unwrap(), 9);
        }
        assert_eq!(w.m.audit().total(), 1);
    });
}
