//! Snapshot + merge at scale: 100 000 keys spread over four CPUs' kernel buffers (the pure
//! `AggBuffer`), serialized like the kernel does and merged into the tool's table. This is
//! the shape `make bench` times in the guest; here only the results are checked, never the
//! time (performance goes in `make bench`).

use oxtrace::agg::*;
use oxtrace_core::agg::{AggBuffer, AggFunc, KeyElem, SnapshotCursor};

const KEYS: u64 = 100_000;
const NCPUS: usize = 4;

/// Four CPUs' buffers after `@[k] = count()` (and `@s[k] = sum(k)`) for every `k` below
/// `KEYS`, key `k` counted on CPU `k % 4` and once more on CPU 0; the concatenated streams.
fn streams(dict: &Dictionary) -> Vec<u8> {
    let mut mems: Vec<Vec<u64>> = (0..NCPUS).map(|_| vec![0u64; 1 << 22]).collect();
    for m in mems.iter_mut() {
        AggBuffer::format(m).unwrap();
    }
    let count = dict.get(1).unwrap().func;
    let sum = dict.get(2).unwrap().func;
    for k in 0..KEYS {
        let key = [KeyElem::Int(k)];
        for cpu in [(k % NCPUS as u64) as usize, 0] {
            let mut b = AggBuffer::attach(&mut mems[cpu]).unwrap();
            b.apply(1, &count, &key, 0, 1).unwrap();
            b.apply(2, &sum, &key, k as i64, 1).unwrap();
        }
    }
    let mut out = Vec::new();
    for (cpu, m) in mems.iter_mut().enumerate() {
        let b = AggBuffer::attach(m).unwrap();
        assert_eq!(b.drops(), 0);
        let mut buf = vec![0u8; b.snapshot_len()];
        let mut cur = SnapshotCursor::new();
        let mut len = 0;
        while !cur.is_done() {
            len += b.serialize(cpu as u32, &mut buf[len..], &mut cur).unwrap();
        }
        out.extend_from_slice(&buf[..len]);
    }
    out
}

#[test]
fn merge_100k_keys_over_four_cpus() {
    let mut dict = Dictionary::new();
    for (id, name, func) in [(1, "", AggFunc::Count), (2, "s", AggFunc::Sum)] {
        dict.insert(AggDef {
            id,
            name: name.into(),
            func,
            keys: vec![KeyField::int("k")],
        })
        .unwrap();
    }
    let snap = streams(&dict);
    let mut t = AggTable::new(dict);
    let st = t.merge_snapshots(&snap).unwrap();
    assert_eq!(st.streams, NCPUS);
    // A key of CPU 0 is one record there, any other key one on CPU 0 and one on its own.
    let per_agg = KEYS as usize / 4 + 2 * (3 * KEYS as usize / 4);
    assert_eq!(st.records, 2 * per_agg);
    assert_eq!(t.len(1), KEYS as usize);
    assert_eq!(t.len(2), KEYS as usize);
    for k in [0, 1, 2, 3, 4, 77_777, KEYS - 1] {
        let key = [KeyElem::Int(k)];
        assert_eq!(t.get(1, &key), Some(&[2][..]), "count of key {k}");
        assert_eq!(t.get(2, &key), Some(&[2 * k][..]), "sum of key {k}");
    }
    // A second snapshot of the same data doubles every value and adds no key.
    t.merge_snapshots(&snap).unwrap();
    assert_eq!(t.len(1), KEYS as usize);
    assert_eq!(t.get(1, &[KeyElem::Int(5)]), Some(&[4][..]));
    let total: u64 = t
        .sorted(1, SortOrder::default())
        .unwrap()
        .iter()
        .map(|e| e.values[0])
        .sum();
    assert_eq!(total, 4 * KEYS);
}
