// SPDX-License-Identifier: GPL-2.0

//! The behaviour of the `dynvar` state machine, one named test per rule: the chunk cycle
//! (free, allocated, dirty, cleaned, free), the consumer state a failed search sets, the
//! cleaner's passes, and the mechanism's details (`Documentation/dynvar.rst` lists them).

mod dynvar_util;

use dynvar_util::*;
use oxtrace_core::action::Key;
use oxtrace_core::dynvar::*;

const V: u32 = 1;

fn k(i: u64) -> [Key<'static>; 2] {
    akey(V, i)
}

/// Fills every free chunk of a dynamic memory from `cpu`, keys `base..`.
fn fill(ds: &Dstate<'_>, cpu: usize, base: u64, n: usize) {
    for i in 0..n as u64 {
        ds.store(cpu, V, &k(base + i), base + i + 1).unwrap();
    }
}

#[test]
fn claim_01_free_allocate_dirty_clean_free_cycle() {
    let m = Mem::with(4, 1);
    let ds = m.ds();
    // Memory with data chunks, all on the free list.
    assert_eq!(m.list(0, List::Free).len(), 4);
    // Allocating takes a chunk off the free list.
    ds.store(0, V, &k(1), 42).unwrap();
    let c = ds.lookup(&k(1)).unwrap().unwrap().chunk();
    assert!(!m.list(0, List::Free).contains(&c));
    assert_eq!(m.list(0, List::Free).len(), 3);
    assert_eq!(ds.load(&k(1)).unwrap(), 42);
    // Deallocating (storing 0) puts it on the dirty list.
    ds.store(0, V, &k(1), 0).unwrap();
    assert_eq!(m.list(0, List::Dirty), vec![c]);
    assert_eq!(ds.load(&k(1)).unwrap(), 0);
    // Cleaning brings it back to where allocation finds it.
    ds.clean(&Quiet).unwrap();
    assert!(m.list(0, List::Dirty).is_empty());
    assert_eq!(m.list(0, List::Clean), vec![c]);
    fill(&ds, 0, 100, 4);
    assert!(m.all(List::Free).is_empty() && m.all(List::Clean).is_empty());
    let used: Vec<u32> = (100..104)
        .map(|i| ds.lookup(&k(i)).unwrap().unwrap().chunk())
        .collect();
    assert!(used.contains(&c), "the cleaned chunk is allocated again");
    assert_eq!(m.audit().in_use, 4);
}

#[test]
fn claim_02_dynamic_memory_has_a_consumer_state() {
    let m = Mem::with(4, 2);
    // Set FREE when the memory is set up.
    assert_eq!(m.ds().state(), DstateState::Free);
    assert_eq!(m.ds().stats().state, DstateState::Free as u32);
}

#[test]
fn claim_03_state_set_after_searching_every_cpu() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    // CPU 0 uses its two chunks, then finds CPU 1's: the search succeeds, state unchanged.
    fill(&ds, 0, 0, 3);
    assert_eq!(ds.state(), DstateState::Free);
    assert_eq!(ds.cpu_stats(0).unwrap().steals, 1);
    fill(&ds, 0, 3, 1);
    assert_eq!(ds.state(), DstateState::Free);
    // Only a search that finds nothing anywhere sets the state, and the drop is counted by it.
    assert_eq!(
        ds.store(0, V, &k(9), 1),
        Err(DynvarError::Drop(DropReason::Empty))
    );
    assert_eq!(ds.state(), DstateState::Empty);
    assert_eq!(ds.cpu_stats(0).unwrap().drops_empty, 1);
}

#[test]
fn claim_04_state_empty_when_all_chunks_allocated() {
    let m = Mem::with(6, 3);
    let ds = m.ds();
    fill(&ds, 1, 0, 6);
    let a = m.audit();
    assert_eq!((a.in_use, a.dirty, a.rinsing), (6, 0, 0));
    assert_eq!(
        ds.store(2, V, &k(100), 1),
        Err(DynvarError::Drop(DropReason::Empty))
    );
    assert_eq!(ds.state(), DstateState::Empty);
    // Further drops are counted as EMPTY drops without searching again.
    assert!(ds.store(0, V, &k(101), 1).is_err());
    let t = ds.stats().total;
    assert_eq!((t.drops_empty, t.drops_dirty, t.drops_rinsing), (2, 0, 0));
    // Existing variables are still readable and writable: no allocation needed.
    ds.store(0, V, &k(3), 77).unwrap();
    assert_eq!(ds.load(&k(3)).unwrap(), 77);
}

#[test]
fn claim_05_state_dirty_when_all_chunks_allocated_or_dirty() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    fill(&ds, 0, 0, 4);
    ds.store(1, V, &k(2), 0).unwrap();
    let a = m.audit();
    assert_eq!((a.in_use, a.dirty, a.free + a.clean), (3, 1, 0));
    assert_eq!(
        ds.store(0, V, &k(50), 1),
        Err(DynvarError::Drop(DropReason::Dirty))
    );
    assert_eq!(ds.state(), DstateState::Dirty);
    assert_eq!(ds.cpu_stats(0).unwrap().drops_dirty, 1);
}

#[test]
fn claim_06_state_rinsing_when_all_chunks_allocated_or_rinsing() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    fill(&ds, 0, 0, 4);
    ds.store(0, V, &k(0), 0).unwrap();
    ds.store(1, V, &k(1), 0).unwrap();
    let seen = std::cell::Cell::new(None);
    // While the cleaner waits in its first cross-call, CPU 1 tries to allocate.
    let hook = Hook::new(|n| {
        if n == 1 {
            let a = m.audit();
            assert_eq!((a.in_use, a.rinsing, a.dirty), (2, 2, 0));
            seen.set(Some(ds.store(1, V, &k(60), 1)));
            assert_eq!(ds.state(), DstateState::Rinsing);
        }
    });
    ds.clean(&hook).unwrap();
    assert_eq!(
        seen.get(),
        Some(Err(DynvarError::Drop(DropReason::Rinsing)))
    );
    assert_eq!(ds.cpu_stats(1).unwrap().drops_rinsing, 1);
    // The pass ends CLEAN and the chunks are allocatable again.
    assert_eq!(ds.state(), DstateState::Clean);
    ds.store(1, V, &k(60), 1).unwrap();
}

#[test]
fn para_41_dirty_takes_precedence_over_rinsing() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    fill(&ds, 0, 0, 4);
    ds.store(0, V, &k(0), 0).unwrap();
    let seen = std::cell::Cell::new(None);
    let hook = Hook::new(|n| {
        if n == 1 {
            // One chunk rinsing, now one more dirty: no chunk to allocate.
            ds.store(1, V, &k(1), 0).unwrap();
            seen.set(Some(ds.store(1, V, &k(70), 1)));
        }
    });
    ds.clean(&hook).unwrap();
    assert_eq!(seen.get(), Some(Err(DynvarError::Drop(DropReason::Dirty))));
    assert_eq!(m.all(List::Dirty).len(), 1);
}

#[test]
fn claim_07_state_clean_after_cleaning() {
    let m = Mem::with(2, 1);
    let ds = m.ds();
    fill(&ds, 0, 0, 2);
    ds.store(0, V, &k(0), 0).unwrap();
    assert!(ds.store(0, V, &k(9), 1).is_err());
    assert_eq!(ds.state(), DstateState::Dirty);
    ds.clean(&Quiet).unwrap();
    assert_eq!(ds.state(), DstateState::Clean);
    ds.store(0, V, &k(9), 1).unwrap();
    assert_eq!(ds.state(), DstateState::Clean);
}

#[test]
fn claim_08_cleaning_moves_dirty_to_rinsing_crosscalls_rinsing_to_clean_crosscalls_then_clean() {
    let m = Mem::with(6, 3);
    let ds = m.ds();
    fill(&ds, 0, 0, 6);
    for (cpu, key) in [(0, 0), (1, 1), (2, 2), (2, 3)] {
        ds.store(cpu, V, &k(key), 0).unwrap();
    }
    let mut dirty = m.all(List::Dirty);
    dirty.sort();
    assert_eq!(dirty.len(), 4);
    assert!(ds.store(0, V, &k(99), 1).is_err());
    let hook = Hook::new(|n| match n {
        1 => {
            // After the move, before the response: every dirty chunk is rinsing.
            assert!(m.all(List::Dirty).is_empty());
            let mut r = m.all(List::Rinsing);
            r.sort();
            assert_eq!(r, dirty);
            assert!(m.all(List::Clean).is_empty());
            assert_ne!(ds.state(), DstateState::Clean);
        }
        2 => {
            // After the first response: rinsing moved to clean; state not yet CLEAN.
            assert!(m.all(List::Rinsing).is_empty());
            let mut c = m.all(List::Clean);
            c.sort();
            assert_eq!(c, dirty);
            assert_ne!(ds.state(), DstateState::Clean);
        }
        _ => panic!("a third cross-call"),
    });
    let r = ds.clean(&hook).unwrap();
    assert_eq!(hook.calls.get(), 2);
    assert_eq!(r.crosscalls, 2);
    assert_eq!(r.rinsed, 4);
    // After the second response: CLEAN.
    assert_eq!(ds.state(), DstateState::Clean);
    let s = ds.stats();
    assert_eq!((s.crosscalls, s.passes, s.rinsed), (2, 1, 4));
    // A pass with nothing dirty issues no cross-call.
    let idle = Hook::new(|_| panic!("cross-call without work"));
    assert_eq!(ds.clean(&idle).unwrap().crosscalls, 0);
    assert_eq!(ds.stats().idle_passes, 1);
}

#[test]
fn claim_09_clean_list_moved_to_free_list_when_free_list_empty() {
    let m = Mem::with(4, 1);
    let ds = m.ds();
    fill(&ds, 0, 0, 4);
    for i in 0..3 {
        ds.store(0, V, &k(i), 0).unwrap();
    }
    ds.clean(&Quiet).unwrap();
    assert!(m.list(0, List::Free).is_empty());
    assert_eq!(m.list(0, List::Clean).len(), 3);
    assert_eq!(ds.cpu_stats(0).unwrap().clean, 3);
    ds.store(0, V, &k(10), 1).unwrap();
    // The whole clean list went to the free list at once; one chunk was taken from it.
    assert!(m.list(0, List::Clean).is_empty());
    assert_eq!(m.list(0, List::Free).len(), 2);
    let s = ds.cpu_stats(0).unwrap();
    assert_eq!((s.clean_moves, s.free, s.clean), (1, 2, 0));
    m.audit();
}

#[test]
fn claim_10_existing_variable_is_not_allocated_again() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    ds.store(0, V, &k(5), 1).unwrap();
    let c = ds.lookup(&k(5)).unwrap().unwrap().chunk();
    ds.store(1, V, &k(5), 2).unwrap();
    assert_eq!(ds.add(1, V, &k(5), 3).unwrap(), 5);
    let r = ds.get_or_alloc(0, V, &k(5), 8).unwrap();
    assert_eq!((r.chunk(), r.word(0)), (c, 5));
    assert_eq!(ds.stats().total.allocs, 1);
    assert_eq!(m.audit().in_use, 1);
}

#[test]
fn claim_11_dirty_chunk_is_reusable_only_after_cleaning() {
    let m = Mem::with(1, 1);
    let ds = m.ds();
    ds.store(0, V, &k(1), 1).unwrap();
    let c = ds.lookup(&k(1)).unwrap().unwrap().chunk();
    ds.store(0, V, &k(1), 0).unwrap();
    // Freed but dirty: not allocatable.
    assert_eq!(
        ds.store(0, V, &k(2), 1),
        Err(DynvarError::Drop(DropReason::Dirty))
    );
    let r = ds.clean(&Quiet).unwrap();
    assert_eq!((r.rinsed, r.crosscalls), (1, 2));
    ds.store(0, V, &k(2), 1).unwrap();
    assert_eq!(ds.lookup(&k(2)).unwrap().unwrap().chunk(), c);
}

#[test]
fn claim_12_dynamic_memory_belongs_to_one_consumer() {
    let a = Mem::with(2, 1);
    let b = Mem::with(2, 1);
    fill(&a.ds(), 0, 0, 2);
    assert!(a.ds().store(0, V, &k(7), 1).is_err());
    assert_eq!(a.ds().state(), DstateState::Empty);
    // The other consumer's memory and state are untouched.
    assert_eq!(b.ds().state(), DstateState::Free);
    assert_eq!(b.ds().load(&k(0)).unwrap(), 0);
    fill(&b.ds(), 0, 0, 2);
    assert_eq!(b.ds().stats().total.drops_empty, 0);
}

#[test]
fn claim_13_chunk_size_is_static() {
    // Computed at LOAD from the largest key + value + header.
    let small = chunk_bytes_for(&[KeyShape::Int, KeyShape::Int], 8);
    let big = chunk_bytes_for(&[KeyShape::Int, KeyShape::Str { max_len: 16 }], 8);
    assert_eq!(small, (HEADER_WORDS + 1 + 4) * 8);
    assert_eq!(big, (HEADER_WORDS + 1 + 2 + 3) * 8);
    let l = Layout::new(4096, 2, small, 4).unwrap();
    assert_eq!(l.chunk_bytes(), small);
    assert_eq!(l.nchunks(), 4096 / (small + BUCKET_BYTES));
    let m = Mem::new(l);
    let ds = m.ds();
    // A tuple larger than the chunk is refused and counted, never split.
    let s = [
        array_key(2),
        Key::Str(b"a string far too long for the chunk"),
    ];
    assert_eq!(ds.store(0, 2, &s, 1), Err(DynvarError::TooLarge));
    assert_eq!(ds.cpu_stats(0).unwrap().drops_size, 1);
    assert_eq!(ds.var_drops(2), 1);
    // Every chunk has the same size: the region is nchunks * chunk_words.
    assert_eq!(l.chunk_word_count(), l.nchunks() * small / 8);
    assert_eq!(Layout::new(4096, 2, 8, 0), Err(LayoutError::ChunkTooSmall));
    assert_eq!(
        Layout::new(4096, 2, MAX_CHUNK_BYTES + 8, 0),
        Err(LayoutError::ChunkTooLarge)
    );
    assert_eq!(Layout::new(10, 2, small, 0), Err(LayoutError::TooSmall));
}

#[test]
fn claim_14_memory_indexed_by_a_hash_table_with_one_bucket_per_chunk() {
    let l = layout(64, 4, 8);
    let r = l.regions();
    assert_eq!(r.buckets.len(), 64 * BUCKET_BYTES);
    assert_eq!(std::mem::size_of::<Bucket>(), BUCKET_BYTES);
    // Packed, eight to a cache line; the region still starts on one.
    assert_eq!(std::mem::align_of::<Bucket>(), BUCKET_BYTES);
    assert_eq!(r.buckets.start % 64, 0);
    let m = Mem::new(l);
    let ds = m.ds();
    // Every chunk used: some buckets hold chains of several, all still found.
    for i in 0..64u64 {
        ds.store((i % 4) as usize, V, &k(i * 7919), i + 1).unwrap();
    }
    for i in 0..64u64 {
        assert_eq!(ds.load(&k(i * 7919)).unwrap(), i + 1);
    }
    // Delete from the middle of chains, the rest stays reachable.
    for i in (0..64u64).step_by(3) {
        assert!(ds.delete(0, &k(i * 7919)).unwrap());
    }
    for i in 0..64u64 {
        let want = if i % 3 == 0 { 0 } else { i + 1 };
        assert_eq!(ds.load(&k(i * 7919)).unwrap(), want);
    }
    let a = m.audit();
    assert_eq!((a.in_use, a.dirty), (42, 22));
}

// ---- mechanism details ------------------------------------------------------------------------

#[test]
fn para_35_chunks_split_evenly_over_cpus() {
    let l = layout(10, 4, 0);
    let shares: Vec<_> = (0..4).map(|c| l.cpu_share(c)).collect();
    assert_eq!(shares, vec![0..3, 3..6, 6..8, 8..10]);
    let m = Mem::new(l);
    for (c, s) in shares.iter().enumerate() {
        assert_eq!(m.list(c, List::Free).len(), s.len());
        assert_eq!(m.ds().cpu_stats(c).unwrap().free, s.len() as u64);
    }
    // The shares tile the chunks for any split, and their sizes are known without
    // dividing (`share_len`, which a store's low-water test uses).
    for (nchunks, ncpus) in [(10, 4), (2, 4), (4, 4), (7, 1), (1000, 3), (5, 7)] {
        let l = layout(nchunks, ncpus, 0);
        let mut next = 0;
        for c in 0..ncpus as usize + 2 {
            let s = l.cpu_share(c);
            assert_eq!(
                s.end - s.start,
                l.share_len(c),
                "{nchunks} over {ncpus}: {c}"
            );
            if c < ncpus as usize {
                assert_eq!(s.start, next);
                assert!(
                    s.len() == nchunks / ncpus as usize
                        || s.len() == nchunks.div_ceil(ncpus as usize)
                );
                next = s.end;
            } else {
                assert!(s.is_empty());
            }
        }
        assert_eq!(next as usize, nchunks);
    }
    // Fewer chunks than CPUs: the last CPUs start empty and steal.
    let m = Mem::with(2, 4);
    assert!(m.list(3, List::Free).is_empty());
    m.ds().store(3, V, &k(1), 1).unwrap();
    assert_eq!(m.ds().cpu_stats(3).unwrap().steals, 1);
}

#[test]
fn para_40_allocation_walks_next_cpus_free_and_clean_lists() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    // CPU 1 allocates its own two chunks and frees them; after cleaning they sit on CPU 1's
    // clean list while CPU 1's free list is empty.
    fill(&ds, 1, 0, 2);
    ds.store(1, V, &k(0), 0).unwrap();
    ds.store(1, V, &k(1), 0).unwrap();
    ds.clean(&Quiet).unwrap();
    assert_eq!(m.list(1, List::Clean).len(), 2);
    // CPU 0 uses its own two, then takes CPU 1's clean list onto its own free list.
    fill(&ds, 0, 10, 3);
    assert!(m.list(1, List::Clean).is_empty());
    assert_eq!(m.list(0, List::Free).len(), 1);
    let s = ds.cpu_stats(0).unwrap();
    assert_eq!((s.clean_moves, s.allocs), (1, 3));
    m.audit();
}

#[test]
fn para_44_delete_puts_chunk_on_the_deleting_cpus_dirty_list() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    ds.store(0, V, &k(1), 5).unwrap();
    let c = ds.lookup(&k(1)).unwrap().unwrap().chunk();
    assert!(ds.delete(1, &k(1)).unwrap());
    assert!(!ds.delete(1, &k(1)).unwrap());
    assert_eq!(m.list(1, List::Dirty), vec![c]);
    assert!(m.list(0, List::Dirty).is_empty());
    assert_eq!(ds.cpu_stats(1).unwrap().frees, 1);
}

#[test]
fn cleaner_borrows_a_cpu_for_a_cpu_that_frees_but_never_allocates() {
    let m = Mem::with(6, 3);
    let ds = m.ds();
    // CPU 0 gets a clean list it never uses.
    fill(&ds, 0, 0, 2);
    ds.store(0, V, &k(0), 0).unwrap();
    ds.clean(&Quiet).unwrap();
    assert_eq!(m.list(0, List::Clean).len(), 1);
    // CPU 1 allocates, CPU 0 frees: CPU 0 has both a clean and a dirty list.
    fill(&ds, 1, 10, 2);
    ds.store(0, V, &k(10), 0).unwrap();
    ds.store(0, V, &k(11), 0).unwrap();
    assert_eq!(m.list(0, List::Dirty).len(), 2);
    let r = ds.clean(&Quiet).unwrap();
    assert_eq!((r.borrowed, r.rinsed, r.failclean), (1, 2, 0));
    // CPU 0's clean list is intact; its dirty chunks were rinsed on, and are now clean on,
    // the first CPU whose clean, rinsing and dirty lists were all empty: CPU 1.
    assert!(m.all(List::Dirty).is_empty());
    assert_eq!(m.list(0, List::Clean).len(), 1);
    assert_eq!(m.list(1, List::Clean).len(), 2);
    assert!(m.list(2, List::Clean).is_empty());
    assert_eq!(ds.stats().borrowed, 1);
    m.audit();
}

#[test]
fn cleaner_leaves_dirty_list_for_later_when_no_cpu_can_lend() {
    let m = Mem::with(2, 1);
    let ds = m.ds();
    fill(&ds, 0, 0, 2);
    ds.store(0, V, &k(0), 0).unwrap();
    ds.clean(&Quiet).unwrap();
    ds.store(0, V, &k(1), 0).unwrap();
    // One CPU: clean list not empty, nobody to borrow.
    let r = ds.clean(&Quiet).unwrap();
    assert_eq!((r.rinsed, r.failclean, r.crosscalls), (0, 1, 0));
    assert_eq!(m.list(0, List::Dirty).len(), 1);
    // Allocation takes the clean list first, so no drop comes from it; then the dirty chunk
    // is cleaned by the next pass.
    ds.store(0, V, &k(5), 1).unwrap();
    let r = ds.clean(&Quiet).unwrap();
    assert_eq!(r.rinsed, 1);
    ds.store(0, V, &k(6), 1).unwrap();
    assert_eq!(
        ds.stats().total.drops_empty + ds.stats().total.drops_dirty,
        0
    );
    m.audit();
}

#[test]
fn reading_a_missing_variable_yields_zero_and_zero_deletes() {
    let m = Mem::with(4, 1);
    let ds = m.ds();
    assert_eq!(ds.load(&k(1)).unwrap(), 0);
    assert!(ds.lookup(&k(1)).unwrap().is_none());
    // Storing 0 to a missing variable allocates nothing.
    ds.store(0, V, &k(1), 0).unwrap();
    assert_eq!(m.audit().in_use, 0);
    // ++ and += allocate, reaching 0 frees.
    assert_eq!(ds.add(0, V, &k(1), 1).unwrap(), 1);
    assert_eq!(ds.add(0, V, &k(1), 1).unwrap(), 2);
    assert_eq!(ds.add(0, V, &k(1), 0).unwrap(), 2);
    assert_eq!(ds.add(0, V, &k(1), (-2i64) as u64).unwrap(), 0);
    assert_eq!(ds.load(&k(1)).unwrap(), 0);
    let a = m.audit();
    assert_eq!((a.in_use, a.dirty), (0, 1));
}

#[test]
fn thread_locals_and_string_keys() {
    let m = Mem::new(
        Layout::new(
            1 << 14,
            2,
            chunk_bytes_for(
                &[KeyShape::Int, KeyShape::Str { max_len: 16 }, KeyShape::Int],
                16,
            ),
            4,
        )
        .unwrap(),
    );
    let ds = m.ds();
    // self->ts for two threads, and a global array with the same variable id.
    ds.store(0, 3, &thread_tuple(100, 3), 11).unwrap();
    ds.store(1, 3, &thread_tuple(200, 3), 22).unwrap();
    ds.store(0, 3, &[array_key(3), Key::Int(100)], 33).unwrap();
    assert_eq!(ds.load(&thread_tuple(100, 3)).unwrap(), 11);
    assert_eq!(ds.load(&thread_tuple(200, 3)).unwrap(), 22);
    assert_eq!(ds.load(&[array_key(3), Key::Int(100)]).unwrap(), 33);
    // An element whose words would be a thread-local's if an array's id were a thread id.
    ds.store(0, 3, &thread_tuple(3, 1), 44).unwrap();
    ds.store(0, 3, &[array_key(3), Key::Int(TLS_TAG | 1)], 55)
        .unwrap();
    assert_eq!(ds.load(&thread_tuple(3, 1)).unwrap(), 44);
    assert_eq!(ds.load(&[array_key(3), Key::Int(TLS_TAG | 1)]).unwrap(), 55);
    // a[execname, pid] with strings sharing a prefix, and an integer that packs like one.
    let a = |s: &'static [u8], p| [array_key(2), Key::Str(s), Key::Int(p)];
    ds.store(0, 2, &a(b"bash", 1), 1).unwrap();
    ds.store(0, 2, &a(b"bash2", 1), 2).unwrap();
    ds.store(0, 2, &a(b"bash", 2), 3).unwrap();
    ds.store(
        0,
        2,
        &[
            array_key(2),
            Key::Int(u64::from_le_bytes(*b"bash\0\0\0\0")),
            Key::Int(1),
        ],
        4,
    )
    .unwrap();
    assert_eq!(ds.load(&a(b"bash", 1)).unwrap(), 1);
    assert_eq!(ds.load(&a(b"bash2", 1)).unwrap(), 2);
    assert_eq!(ds.load(&a(b"bash", 2)).unwrap(), 3);
    assert_eq!(ds.load(&a(b"bas", 1)).unwrap(), 0);
    // String values through the value space.
    let r = ds.get_or_alloc(1, 1, &thread_tuple(100, 1), 16).unwrap();
    assert_eq!(r.value_bytes(), 16);
    assert_eq!(r.write_bytes(b"hello, world"), 12);
    let mut out = [0xffu8; 16];
    assert_eq!(
        ds.lookup(&thread_tuple(100, 1))
            .unwrap()
            .unwrap()
            .read_bytes(&mut out),
        16
    );
    assert_eq!(&out, b"hello, world\0\0\0\0");
}

#[test]
fn drops_are_counted_per_state_and_per_variable() {
    let m = Mem::with(2, 2);
    let ds = m.ds();
    ds.store(0, 1, &akey(1, 0), 1).unwrap();
    ds.store(1, 1, &akey(1, 1), 1).unwrap();
    assert!(ds.store(0, 2, &akey(2, 0), 1).is_err());
    assert!(ds.store(1, 3, &akey(3, 0), 1).is_err());
    ds.store(0, 1, &akey(1, 0), 0).unwrap();
    ds.clean(&Quiet).unwrap();
    ds.store(1, 1, &akey(1, 1), 0).unwrap();
    ds.store(0, 2, &akey(2, 0), 1).unwrap();
    assert!(ds.store(0, 3, &akey(3, 9), 1).is_err());
    assert_eq!(
        (ds.var_drops(1), ds.var_drops(2), ds.var_drops(3)),
        (0, 1, 2)
    );
    assert_eq!(ds.var_drops(1000), 0);
    let t = ds.stats().total;
    assert_eq!((t.drops_empty, t.drops_dirty), (2, 1));
    // Allocation attempts = allocations + drops.
    assert_eq!(t.allocs + t.drops_empty + t.drops_dirty, 6);
    assert_eq!(ds.stats().high_water, 2);
}

#[test]
fn bad_arguments_are_refused() {
    let m = Mem::with(4, 2);
    let ds = m.ds();
    assert_eq!(ds.store(2, V, &k(1), 1), Err(DynvarError::BadCpu));
    assert_eq!(ds.store(0, V, &[], 1), Err(DynvarError::BadTuple));
    let many = [Key::Int(0); MAX_KEYS + 1];
    assert_eq!(ds.load(&many), Err(DynvarError::BadTuple));
    assert_eq!(m.audit().free, 4);
}

#[test]
fn concurrent_cleaner_is_refused() {
    let m = Mem::with(2, 1);
    let ds = m.ds();
    ds.store(0, V, &k(1), 1).unwrap();
    ds.store(0, V, &k(1), 0).unwrap();
    let hook = Hook::new(|_| assert_eq!(ds.clean(&Quiet), Err(CleanError::Busy)));
    ds.clean(&hook).unwrap();
    assert_eq!(ds.clean(&Quiet).unwrap().crosscalls, 0);
}

#[test]
fn regions_are_disjoint_aligned_and_sized() {
    let l = Layout::new(DEFAULT_DYNVARSIZE, 4, small_chunk(), 16).unwrap();
    let r = l.regions();
    let spans = [&r.header, &r.cpus, &r.buckets, &r.chunks, &r.var_drops];
    for w in spans.windows(2) {
        assert!(w[0].end <= w[1].start);
    }
    for s in spans {
        assert_eq!(s.start % r.align, 0);
    }
    assert_eq!(r.align, 64);
    assert!(r.size >= r.var_drops.end && r.size.is_multiple_of(r.align));
    assert_eq!(r.chunks.len(), l.nchunks() * l.chunk_bytes());
    assert!(r.buckets.len() + r.chunks.len() <= DEFAULT_DYNVARSIZE);
    assert_eq!(
        Dstate::new(l, &Header::new(), &[], &[], &[], &[]).err(),
        Some(LayoutError::RegionMismatch)
    );
}

/// On-demand cleaning: a CPU asks for a pass once its free list holds less than half its
/// share, its clean list is empty and it has freed chunks; a pass answers it; asking
/// changes no list.
#[test]
fn wants_clean_below_low_water_with_dirty_chunks() {
    let m = Mem::with(8, 2);
    let ds = m.ds();
    // CPU 0's share is 4 chunks: taking 3 leaves 1 < 2, but nothing is dirty yet.
    for i in 0..3 {
        ds.store(0, V, &k(i), 1).unwrap();
    }
    assert!(!ds.wants_clean(0));
    ds.store(0, V, &k(0), 0).unwrap();
    assert!(ds.wants_clean(0), "1 free chunk and 1 dirty");
    assert!(!ds.wants_clean(1), "CPU 1 has all its chunks");
    assert!(!ds.wants_clean(7), "no such CPU");
    assert_eq!(m.list(0, List::Dirty).len(), 1);
    ds.clean(&Quiet).unwrap();
    assert_eq!(m.list(0, List::Clean).len(), 1);
    // Still 1 free chunk, and another freed: a pass could not rinse it for CPU 0 while its
    // clean list is full, so it does not ask.
    ds.store(0, V, &k(1), 0).unwrap();
    assert!(!ds.wants_clean(0), "the clean list is not empty");
    assert_eq!(m.audit().in_use, 1);
}
