// SPDX-License-Identifier: GPL-2.0

//! Property tests of `dynvar`: random sequences of stores, increments, deletions, lookups and
//! cleaner passes on several simulated CPUs (some of them acting while the cleaner waits in
//! its cross-calls) against a model map. After every step: free + clean + rinsing + dirty +
//! in use = total, every lookup returns the last stored value, 0 deletes, and allocations +
//! drops = allocation attempts. A firing that reads a variable and then deletes one (the
//! same, or another) with what the read found deletes exactly that one, whatever other CPUs
//! did to its chain in between. A thread's own variable reads back its value from any chunk
//! noted for it, whatever became of that chunk.

mod dynvar_util;

use dynvar_util::*;
use oxtrace_core::action::Key;
use oxtrace_core::dynvar::*;
use proptest::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

const NAMES: [&[u8]; 4] = [b"bash", b"bash2", b"sshd", b""];

/// The tuple of model key `id`: thread-locals, integer-keyed and string-keyed arrays.
fn tuple(id: u8) -> Vec<Key<'static>> {
    match id % 3 {
        0 => thread_tuple(u64::from(id), 1).to_vec(),
        1 => vec![array_key(2), Key::Int(u64::from(id))],
        _ => vec![
            array_key(3),
            Key::Str(NAMES[(id as usize / 3) % 4]),
            Key::Int(u64::from(id / 12)),
        ],
    }
}

fn var_of(id: u8) -> u32 {
    [1, 2, 3][(id % 3) as usize]
}

#[derive(Clone, Debug)]
enum Op {
    Store {
        cpu: usize,
        key: u8,
        val: u64,
    },
    Add {
        cpu: usize,
        key: u8,
        delta: u64,
    },
    Delete {
        cpu: usize,
        key: u8,
    },
    Load {
        key: u8,
    },
    Clean,
    /// One firing on `cpu`: looks `key` up, other CPUs run `between` (no cleaner pass can
    /// complete meanwhile), then deletes `other` (or `key`) starting where the lookup found
    /// `key`.
    Firing {
        cpu: usize,
        key: u8,
        other: Option<u8>,
        between: Vec<Op>,
    },
    /// A cleaner pass during whose first and second cross-calls CPUs run these operations.
    CleanWith(Vec<Op>, Vec<Op>),
    /// A thread's own variable `key` (a thread-local's) in two firings on `cpu`: the first
    /// stores `val` (0 deletes, from chunk `hint`), noting where; `between` runs on other
    /// keys, cleaner passes included; the second loads it from what the first noted (or
    /// from `hint`, when that was nothing).
    Own {
        cpu: usize,
        key: u8,
        val: u64,
        hint: u32,
        between: Vec<Op>,
    },
}

fn leaf(ncpus: usize) -> impl Strategy<Value = Op> {
    let cpu = 0..ncpus;
    let key = 0u8..24;
    prop_oneof![
        4 => (cpu.clone(), key.clone(), prop_oneof![Just(0u64), 1u64..5]).prop_map(|(cpu, key, val)| Op::Store { cpu, key, val }),
        2 => (cpu.clone(), key.clone(), prop_oneof![Just(1u64), Just(u64::MAX), Just(2u64)]).prop_map(|(cpu, key, delta)| Op::Add { cpu, key, delta }),
        2 => (cpu, key.clone()).prop_map(|(cpu, key)| Op::Delete { cpu, key }),
        1 => key.prop_map(|key| Op::Load { key }),
        1 => Just(Op::Clean),
    ]
}

fn op(ncpus: usize) -> impl Strategy<Value = Op> {
    let firing = (
        0..ncpus,
        0u8..24,
        prop::option::weighted(0.2, 0u8..24),
        prop::collection::vec(leaf(ncpus), 0..4),
    )
        .prop_map(|(cpu, key, other, between)| Op::Firing {
            cpu,
            key,
            other,
            between,
        });
    let own = (
        0..ncpus,
        0u8..8,
        prop_oneof![Just(0u64), 1u64..5],
        0u32..12,
        prop::collection::vec(leaf(ncpus), 0..4),
    )
        .prop_map(|(cpu, k, val, hint, between)| Op::Own {
            cpu,
            key: 3 * k,
            val,
            hint,
            between,
        });
    prop_oneof![
        8 => leaf(ncpus),
        2 => firing,
        2 => own,
        1 => (prop::collection::vec(leaf(ncpus), 0..4), prop::collection::vec(leaf(ncpus), 0..4))
            .prop_map(|(a, b)| Op::CleanWith(a, b)),
    ]
}

struct Run<'m> {
    m: &'m Mem,
    model: RefCell<HashMap<u8, u64>>,
    attempts: Cell<u64>,
}

impl Run<'_> {
    fn check_conservation(&self) {
        let a = self.m.audit();
        assert_eq!(a.total(), self.m.layout.nchunks() as u64);
        assert_eq!(a.in_use, self.model.borrow().len() as u64);
    }

    /// Whether allocating `key` needs a chunk (it does not exist yet).
    fn absent(&self, key: u8) -> bool {
        !self.model.borrow().contains_key(&key)
    }

    fn check_drop(&self, cpu: usize, e: DynvarError, in_pass: bool) {
        let ds = self.m.ds();
        let DynvarError::Drop(reason) = e else {
            panic!("unexpected error {e:?}");
        };
        // A drop never leaves a chunk on the allocating CPU's own lists.
        assert!(self.m.list(cpu, List::Free).is_empty());
        assert!(self.m.list(cpu, List::Clean).is_empty());
        // The reason is the state in force when the search failed.
        let want = match reason {
            DropReason::Empty => DstateState::Empty,
            DropReason::Dirty => DstateState::Dirty,
            DropReason::Rinsing => DstateState::Rinsing,
        };
        assert_eq!(ds.state(), want);
        if !in_pass {
            // Outside a cleaner pass, no chunk anywhere was allocatable.
            assert!(self.m.all(List::Free).is_empty() && self.m.all(List::Clean).is_empty());
        }
    }

    /// Whether storing `val` into `key` needs a chunk; such a store counts as an attempt.
    fn store_attempt(&self, key: u8, val: u64) -> bool {
        let need = val != 0 && self.absent(key);
        if need {
            self.attempts.set(self.attempts.get() + 1);
        }
        need
    }

    /// Applies a store's result `r` to the model, or checks its drop; whether it stored.
    fn stored(
        &self,
        cpu: usize,
        key: u8,
        val: u64,
        need: bool,
        in_pass: bool,
        r: Result<(), DynvarError>,
    ) -> bool {
        match r {
            Ok(()) => {
                let mut m = self.model.borrow_mut();
                if val == 0 {
                    m.remove(&key);
                } else {
                    m.insert(key, val);
                }
                true
            }
            Err(e) => {
                assert!(need, "store to an existing variable failed: {e:?}");
                self.check_drop(cpu, e, in_pass);
                false
            }
        }
    }

    fn apply(&self, op: &Op, in_pass: bool) {
        let ds = self.m.ds();
        match op {
            Op::Store { cpu, key, val } => {
                let need = self.store_attempt(*key, *val);
                let r = ds.store(*cpu, var_of(*key), &tuple(*key)[..], *val);
                self.stored(*cpu, *key, *val, need, in_pass, r);
            }
            Op::Add { cpu, key, delta } => {
                let t = tuple(*key);
                let old = self.model.borrow().get(key).copied().unwrap_or(0);
                let need = self.absent(*key);
                if need {
                    self.attempts.set(self.attempts.get() + 1);
                }
                match ds.add(*cpu, var_of(*key), &t[..], *delta) {
                    Ok(v) => {
                        let want = old.wrapping_add(*delta);
                        assert_eq!(v, want);
                        let mut m = self.model.borrow_mut();
                        if want == 0 {
                            m.remove(key);
                        } else {
                            m.insert(*key, want);
                        }
                    }
                    Err(e) => {
                        assert!(need);
                        self.check_drop(*cpu, e, in_pass);
                    }
                }
            }
            Op::Delete { cpu, key } => {
                let existed = self.model.borrow_mut().remove(key).is_some();
                assert_eq!(ds.delete(*cpu, &tuple(*key)[..]).unwrap(), existed);
            }
            Op::Load { key } => {
                let want = self.model.borrow().get(key).copied().unwrap_or(0);
                assert_eq!(ds.load(&tuple(*key)[..]).unwrap(), want);
            }
            Op::Firing {
                cpu,
                key,
                other,
                between,
            } => {
                let want = self.model.borrow().get(key).copied().unwrap_or(0);
                let mut found = None;
                assert_eq!(ds.load_noting(&tuple(*key)[..], &mut found).unwrap(), want);
                assert_eq!(found.is_some(), want != 0);
                for o in between {
                    if !matches!(o, Op::Clean) {
                        self.apply(o, false);
                    }
                }
                // What the kernel does for `self->x = 0` (or `a[k] = 0`) after the read: the
                // checks after every step find a wrong deletion.
                let gone = other.unwrap_or(*key);
                self.model.borrow_mut().remove(&gone);
                let t = tuple(gone);
                ds.store_noted(*cpu, var_of(gone), &t[..], 0, &mut found)
                    .unwrap();
                assert_eq!(found, None);
                assert_eq!(ds.load(&t[..]).unwrap(), 0);
            }
            Op::Own {
                cpu,
                key,
                val,
                hint,
                between,
            } => {
                let t = tuple(*key);
                let need = self.store_attempt(*key, *val);
                let mut found = Some(*hint);
                let r = ds.store_noted(*cpu, var_of(*key), &t[..], *val, &mut found);
                if self.stored(*cpu, *key, *val, need, in_pass, r) && *val != 0 {
                    assert!(found.is_some());
                }
                // Only the thread touches its own variable.
                for o in between {
                    let mine = match o {
                        Op::Store { key: k, .. }
                        | Op::Add { key: k, .. }
                        | Op::Delete { key: k, .. } => k == key,
                        _ => false,
                    };
                    if !mine {
                        self.apply(o, in_pass);
                    }
                }
                let want = self.model.borrow().get(key).copied().unwrap_or(0);
                let mut found = found.or(Some(*hint));
                assert_eq!(ds.load_own(&t[..], &mut found).unwrap(), want);
            }
            Op::Clean => {
                let before = self.m.audit();
                let r = ds.clean(&Quiet).unwrap();
                let after = self.m.audit();
                // A pass at quiescence cleans every dirty list unless a CPU with a clean list
                // found nobody to lend it a rinsing list.
                if r.failclean == 0 {
                    assert_eq!(after.dirty, 0);
                    assert_eq!(r.rinsed, before.dirty);
                    assert_eq!(after.clean, before.clean + before.dirty);
                }
                if r.rinsed > 0 {
                    assert_eq!(ds.state(), DstateState::Clean);
                    assert_eq!(r.crosscalls, 2);
                }
            }
            Op::CleanWith(first, second) => {
                let hook = Hook::new(|n| {
                    self.check_conservation();
                    let ops = if n == 1 { first } else { second };
                    for o in ops {
                        if !matches!(o, Op::Clean | Op::CleanWith(..)) {
                            self.apply(o, true);
                        }
                    }
                    self.check_conservation();
                });
                let r = ds.clean(&hook).unwrap();
                assert_eq!(r.crosscalls, hook.calls.get());
                if r.rinsed > 0 {
                    assert_eq!(ds.state(), DstateState::Clean);
                }
            }
        }
        self.check_conservation();
        // Every variable reads back its last value.
        for (k, v) in self.model.borrow().iter() {
            assert_eq!(ds.load(&tuple(*k)[..]).unwrap(), *v);
        }
    }
}

fn run(nchunks: usize, ncpus: u32, ops: &[Op]) {
    let m = Mem::with(nchunks, ncpus);
    let r = Run {
        m: &m,
        model: RefCell::new(HashMap::new()),
        attempts: Cell::new(0),
    };
    for o in ops {
        r.apply(o, false);
    }
    let s = m.ds().stats();
    let t = s.total;
    assert_eq!(
        t.allocs + t.drops_empty + t.drops_dirty + t.drops_rinsing,
        r.attempts.get()
    );
    assert_eq!(s.in_use, r.model.borrow().len() as u64);
    assert!(s.high_water >= s.in_use && s.high_water <= nchunks as u64);
    // Release: delete everything, clean until nothing is dirty; every chunk is back.
    let keys: Vec<u8> = r.model.borrow().keys().copied().collect();
    for k in keys {
        r.apply(&Op::Delete { cpu: 0, key: k }, false);
    }
    for _ in 0..3 * ncpus {
        m.ds().clean(&Quiet).unwrap();
    }
    // Allocating every chunk once proves none is stranded: a dirty list left behind because
    // its CPU had a clean list is cleaned by the first pass after the clean lists are used up.
    for i in 0..nchunks as u64 {
        let cpu = (i % u64::from(ncpus)) as usize;
        if let Err(e) = m.ds().store(cpu, 9, &akey(9, i), 1) {
            assert!(matches!(e, DynvarError::Drop(DropReason::Dirty)), "{e:?}");
            let r = m.ds().clean(&Quiet).unwrap();
            assert_eq!(r.failclean, 0);
            m.ds().store(cpu, 9, &akey(9, i), 1).unwrap();
        }
    }
    assert_eq!(m.audit().in_use, nchunks as u64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sequences_conserve_chunks_and_values_2cpus(ops in prop::collection::vec(op(2), 1..80)) {
        run(6, 2, &ops);
    }

    #[test]
    fn sequences_conserve_chunks_and_values_3cpus(ops in prop::collection::vec(op(3), 1..80)) {
        run(8, 3, &ops);
    }

    #[test]
    fn sequences_conserve_chunks_and_values_4cpus_tight(ops in prop::collection::vec(op(4), 1..80)) {
        run(3, 4, &ops);
    }
}
