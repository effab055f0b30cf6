//! The per-CPU aggregation buffer and the snapshot stream of `rust/core/agg/`.

use oxtrace_core::agg::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// An owned key element, for generating tuples.
#[derive(Clone, Debug)]
enum K {
    I(u64),
    S(Vec<u8>),
}

fn elems(k: &[K]) -> Vec<KeyElem<'_>> {
    k.iter()
        .map(|e| match e {
            K::I(v) => KeyElem::Int(*v),
            K::S(s) => KeyElem::Str(s),
        })
        .collect()
}

fn key_bytes(k: &[K]) -> Vec<u8> {
    let mut w = [0u64; KEY_MAX_WORDS];
    let n = encode_key(&elems(k), &mut w).unwrap();
    w[..n].iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One update: aggregation (index into FUNCS), key, value, increment.
type Op = (u32, Vec<K>, i64, i64);

fn funcs() -> Vec<AggFunc> {
    vec![
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::Avg,
        AggFunc::Stddev,
        AggFunc::Quantize,
        AggFunc::lquantize(0, 100, 10).unwrap(),
        AggFunc::llquantize(10, 0, 4, 10).unwrap(),
    ]
}

fn key_strategy() -> impl Strategy<Value = Vec<K>> {
    let elem = prop_oneof![
        (0u64..20).prop_map(K::I),
        Just(K::I(u64::MAX)),
        prop::sample::select(vec![
            "bash",
            "sshd",
            "",
            "a-very-long-process-name-xyz",
            "kworker/0:1"
        ])
        .prop_map(|s| K::S(s.as_bytes().to_vec())),
        prop::collection::vec(1u8..=255, 0..=KEY_STR_MAX).prop_map(K::S),
    ];
    prop::collection::vec(elem, 0..4)
}

fn op_strategy() -> impl Strategy<Value = Op> {
    (0u32..9, key_strategy(), any::<i64>(), -2i64..5)
}

type Model = BTreeMap<(u32, Vec<u8>), Vec<u64>>;

fn apply_model(m: &mut Model, f: &[AggFunc], (id, k, v, inc): &Op) {
    let func = &f[*id as usize];
    let e = m.entry((*id, key_bytes(k))).or_insert_with(|| {
        let mut w = vec![0; func.value_words()];
        func.init(&mut w);
        w
    });
    func.apply(e, *v, *inc).unwrap();
}

/// Serialises `buf` (in chunks of at most `chunk` bytes) and merges the records into `m`.
fn snapshot_into(buf: &AggBuffer<'_>, cpu: u32, chunk: usize, f: &[AggFunc], m: &mut Model) -> u64 {
    let mut out = Vec::new();
    let mut cur = SnapshotCursor::new();
    let mut tmp = vec![0u8; chunk];
    while !cur.is_done() {
        match buf.serialize(cpu, &mut tmp, &mut cur) {
            Ok(n) => out.extend_from_slice(&tmp[..n]),
            Err(SnapshotError::OutputTooSmall { needed }) => tmp.resize(needed, 0),
        }
    }
    assert_eq!(out.len(), buf.snapshot_len());
    let (h, recs, rest) = parse_snapshot(&out).unwrap();
    assert!(rest.is_empty());
    assert_eq!(h.cpu, cpu);
    assert_eq!(h.records as usize, buf.len());
    let mut n = 0;
    for r in recs {
        let r = r.unwrap();
        n += 1;
        let func = &f[r.agg_id as usize];
        let vals: Vec<u64> = r.values().collect();
        assert_eq!(vals.len(), r.value_words());
        let e = m
            .entry((r.agg_id, r.key.bytes().to_vec()))
            .or_insert_with(|| {
                let mut w = vec![0; func.value_words()];
                func.init(&mut w);
                w
            });
        func.merge(e, &vals).unwrap();
    }
    assert_eq!(n, buf.len());
    h.drops
}

fn contents(buf: &AggBuffer<'_>) -> Model {
    buf.iter()
        .map(|d| {
            let kb: Vec<u8> = d.key_words.iter().flat_map(|x| x.to_le_bytes()).collect();
            ((d.agg_id, kb), d.values.to_vec())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Merging N per-CPU partial buffers equals one buffer fed everything (and a model).
    #[test]
    fn per_cpu_merge_equals_single(ops in prop::collection::vec((op_strategy(), 0u32..4), 0..300), chunk in 40usize..4096) {
        let f = funcs();
        let mut single_mem = vec![0u64; 1 << 20];
        let mut single = AggBuffer::format(&mut single_mem).unwrap();
        let mut cpus_mem: Vec<Vec<u64>> = (0..4).map(|_| vec![0u64; 1 << 18]).collect();
        for m in cpus_mem.iter_mut() {
            AggBuffer::format(m).unwrap();
        }
        let mut model = Model::new();
        for (op, cpu) in &ops {
            let (id, k, v, inc) = op;
            single.apply(*id, &f[*id as usize], &elems(k), *v, *inc).unwrap();
            let mut b = AggBuffer::attach(&mut cpus_mem[*cpu as usize]).unwrap();
            b.apply(*id, &f[*id as usize], &elems(k), *v, *inc).unwrap();
            apply_model(&mut model, &f, op);
        }
        prop_assert_eq!(contents(&single), model.clone());
        let mut merged = Model::new();
        for (cpu, mem) in cpus_mem.iter_mut().enumerate() {
            let b = AggBuffer::attach(mem).unwrap();
            prop_assert_eq!(snapshot_into(&b, cpu as u32, chunk, &f, &mut merged), 0);
        }
        prop_assert_eq!(&merged, &model);
        let mut from_single = Model::new();
        snapshot_into(&single, 0, chunk, &f, &mut from_single);
        prop_assert_eq!(&from_single, &model);
    }

    /// A full buffer counts a drop per refused new data set and loses nothing else.
    #[test]
    fn full_buffer_drops_only_new_data_sets(ops in prop::collection::vec(op_strategy(), 0..400), words in AggBuffer::MIN_BYTES / 8..600) {
        let f = funcs();
        let mut mem = vec![0u64; words];
        let mut b = AggBuffer::format(&mut mem).unwrap();
        let mut model = Model::new();
        let mut drops = 0;
        for op in &ops {
            let (id, k, v, inc) = op;
            let before = contents(&b);
            match b.apply(*id, &f[*id as usize], &elems(k), *v, *inc) {
                Ok(()) => apply_model(&mut model, &f, op),
                Err(AggError::Full) => {
                    drops += 1;
                    prop_assert!(!model.contains_key(&(*id, key_bytes(k))));
                    prop_assert_eq!(contents(&b), before);
                }
                Err(e) => prop_assert!(false, "{:?}", e),
            }
        }
        prop_assert_eq!(b.drops(), drops);
        prop_assert_eq!(contents(&b), model.clone());
        let mut snap = Model::new();
        prop_assert_eq!(snapshot_into(&b, 3, 64, &f, &mut snap), drops);
        prop_assert_eq!(snap, model);
        b.reset();
        prop_assert_eq!((b.len(), b.drops(), b.used_bytes()), (0, 0, 0));
        prop_assert!(b.iter().next().is_none());
    }

    /// The parser never panics on arbitrary bytes.
    #[test]
    fn parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok((_, recs, _)) = parse_snapshot(&bytes) {
            for r in recs.flatten() {
                let _ = r.key.elems().count();
                let _ = r.values().count();
            }
        }
    }

    /// Nor on a valid stream with bytes flipped or cut.
    #[test]
    fn parser_never_panics_on_mutations(ops in prop::collection::vec(op_strategy(), 1..20), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8), cut in any::<prop::sample::Index>()) {
        let f = funcs();
        let mut mem = vec![0u64; 1 << 14];
        let mut b = AggBuffer::format(&mut mem).unwrap();
        for (id, k, v, inc) in &ops {
            b.apply(*id, &f[*id as usize], &elems(k), *v, *inc).unwrap();
        }
        let mut out = vec![0u8; b.snapshot_len()];
        let mut cur = SnapshotCursor::new();
        let n = b.serialize(0, &mut out, &mut cur).unwrap();
        prop_assert!(cur.is_done());
        prop_assert_eq!(n, out.len());
        for (i, x) in &flips {
            let i = i.index(out.len());
            out[i] ^= *x;
        }
        let end = cut.index(out.len() + 1);
        for s in [&out[..], &out[..end]] {
            if let Ok((_, recs, _)) = parse_snapshot(s) {
                for r in recs.flatten() {
                    let _ = r.key.elems().count();
                    let _ = r.values().fold(0u64, |a, x| a.wrapping_add(x));
                }
            }
        }
    }
}

#[test]
fn keys_round_trip_through_snapshot() {
    let mut mem = vec![0u64; 4096];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    let long = [b'x'; KEY_STR_MAX];
    let key = [
        KeyElem::Str(b"bash"),
        KeyElem::Int(42),
        KeyElem::Str(b""),
        KeyElem::Str(&long),
        KeyElem::Int(u64::MAX),
    ];
    b.apply(7, &AggFunc::Count, &key, 0, 1).unwrap();
    b.apply(7, &AggFunc::Count, &key, 0, 1).unwrap();
    b.apply(8, &AggFunc::Sum, &[], 5, 1).unwrap();
    assert_eq!(b.lookup(7, &key), Some(&[2u64][..]));
    assert_eq!(b.lookup(8, &[]), Some(&[5u64][..]));
    assert_eq!(b.lookup(7, &[]), None);
    let mut out = vec![0u8; b.snapshot_len()];
    b.serialize(1, &mut out, &mut SnapshotCursor::new())
        .unwrap();
    let (h, recs, _) = parse_snapshot(&out).unwrap();
    assert_eq!((h.cpu, h.records, h.drops), (1, 2, 0));
    let recs: Vec<_> = recs.map(|r| r.unwrap()).collect();
    assert_eq!(recs[0].agg_id, 7);
    assert_eq!(recs[0].key.elems().collect::<Vec<_>>(), key.to_vec());
    assert_eq!(recs[0].key.len(), 5);
    assert_eq!(recs[0].value(0), 2);
    assert!(recs[1].key.is_empty());
    assert_eq!(recs[1].value(0), 5);
}

#[test]
fn key_errors_change_nothing() {
    let mut mem = vec![0u64; 4096];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    let long = [b'x'; KEY_STR_MAX + 1];
    assert_eq!(
        b.apply(1, &AggFunc::Count, &[KeyElem::Str(&long)], 0, 1),
        Err(AggError::Key(KeyError::StringTooLong))
    );
    let many = [KeyElem::Int(1); KEY_MAX_ELEMS + 1];
    assert_eq!(
        b.apply(1, &AggFunc::Count, &many, 0, 1),
        Err(AggError::Key(KeyError::TooManyElements))
    );
    assert_eq!((b.len(), b.drops()), (0, 0));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// An integer key encoded in place (`IntKey`, the interpreter's) is the key `apply`
    /// encodes from its elements: the same words, the same data sets, word for word.
    #[test]
    fn int_keys_encode_as_elements(
        ops in prop::collection::vec(
            (0u32..9, prop::collection::vec(0u64..6, 0..=KEY_MAX_ELEMS), -5i64..5),
            0..200,
        ),
    ) {
        let f = funcs();
        let mut a_mem = vec![0u64; 1 << 14];
        let mut b_mem = vec![0u64; 1 << 14];
        let mut a = AggBuffer::format(&mut a_mem).unwrap();
        AggBuffer::format(&mut b_mem).unwrap();
        let mut b = AggWriter::new(&mut b_mem).unwrap();
        for (id, k, v) in &ops {
            let el: Vec<KeyElem<'_>> = k.iter().map(|&x| KeyElem::Int(x)).collect();
            let mut ik = IntKey::new();
            for &x in k {
                ik.push(x).unwrap();
            }
            let mut w = [0u64; KEY_MAX_WORDS];
            let n = encode_key(&el, &mut w).unwrap();
            prop_assert_eq!(ik.words(), &w[..n]);
            let func = &f[*id as usize];
            prop_assert_eq!(a.apply(*id, func, &el, *v, 1), b.apply_ints(*id, func, &ik, *v, 1));
        }
        prop_assert_eq!(&a_mem, &b_mem);
    }
}

#[test]
fn int_key_holds_at_most_max_elements() {
    let mut k = IntKey::new();
    assert_eq!(k.words(), &[0]);
    for i in 0..KEY_MAX_ELEMS as u64 {
        assert_eq!(k.push(i), Some(()));
    }
    assert_eq!(k.push(99), None);
    assert_eq!(k.words().len(), 1 + KEY_MAX_ELEMS);
    // Cleared, it encodes a new key as a fresh one does.
    k.clear();
    assert_eq!(k.words(), &[0]);
    k.push(7).unwrap();
    let mut w = [0u64; KEY_MAX_WORDS];
    let n = encode_key(&[KeyElem::Int(7)], &mut w).unwrap();
    assert_eq!(k.words(), &w[..n]);
}

#[test]
fn hash_and_encoding_agree() {
    let key = [KeyElem::Int(3), KeyElem::Str(b"probefunc_name")];
    let mut w = [0u64; KEY_MAX_WORDS];
    let n = encode_key(&key, &mut w).unwrap();
    assert_eq!(n, key_words_len(&key).unwrap());
    assert_eq!(n, 1 + 1 + 2);
    let mut mem = vec![0u64; 4096];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    b.apply(9, &AggFunc::Count, &key, 0, 1).unwrap();
    let d = b.iter().next().unwrap();
    assert_eq!(d.key_words, &w[..n]);
    assert_eq!(d.hash, key_hash(9, &w[..n]));
    assert_ne!(key_hash(9, &w[..n]), key_hash(10, &w[..n]));
    assert_eq!(encode_key(&key, &mut [0u64; 2]), Err(KeyError::NoSpace));
}

#[test]
fn byte_regions_and_attach() {
    let mut raw = vec![0u64; 1024];
    let bytes: &mut [u8] = as_bytes(&mut raw);
    assert_eq!(
        AggBuffer::format_bytes(&mut bytes[1..1 + 8 * 100]).err(),
        Some(BufferError::Alignment)
    );
    assert_eq!(
        AggBuffer::format_bytes(&mut bytes[..16]).err(),
        Some(BufferError::Size)
    );
    {
        let mut b = AggBuffer::format_bytes(bytes).unwrap();
        b.apply(1, &AggFunc::Count, &[], 0, 1).unwrap();
    }
    let b = AggBuffer::attach_bytes(bytes).unwrap();
    assert_eq!(b.lookup(1, &[]), Some(&[1u64][..]));
    assert!(b.buckets().is_power_of_two());
    // The header with its update cache (24 words), then 128 buckets.
    assert_eq!(b.data_bytes(), 8 * (1024 - 24 - 128));
    let mut junk = vec![0u64; 1024];
    assert_eq!(
        AggBuffer::attach(&mut junk).err(),
        Some(BufferError::NotFormatted)
    );
}

/// An 8-byte aligned byte region (the kernel's vmalloc'd buffer stands in here).
fn as_bytes(w: &mut [u64]) -> &mut [u8] {
    let len = w.len() * 8;
    let ptr = w.as_mut_ptr().cast::<u8>();
    // SAFETY: u8 has alignment 1 and every byte of a u64 is initialised.
    unsafe { std::slice::from_raw_parts_mut(ptr, len) }
}

#[test]
fn serialize_is_resumable_and_reports_needed() {
    let mut mem = vec![0u64; 1 << 14];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    for i in 0..50u64 {
        b.apply(2, &AggFunc::Quantize, &[KeyElem::Int(i)], i as i64, 1)
            .unwrap();
    }
    let mut cur = SnapshotCursor::new();
    assert_eq!(
        b.serialize(0, &mut [0u8; 8], &mut cur),
        Err(SnapshotError::OutputTooSmall {
            needed: SNAPSHOT_HEADER_BYTES
        })
    );
    let mut small = [0u8; 40];
    assert_eq!(b.serialize(0, &mut small, &mut cur), Ok(32));
    let rec = RECORD_HEADER_BYTES + 8 * (2 + AggFunc::Quantize.value_words());
    assert_eq!(
        b.serialize(0, &mut small, &mut cur),
        Err(SnapshotError::OutputTooSmall { needed: rec })
    );
    let mut big = vec![0u8; rec * 3 + 5];
    assert_eq!(b.serialize(0, &mut big, &mut cur), Ok(rec * 3));
    assert!(!cur.is_done());
}

#[test]
fn many_keys_load() {
    // 64 MiB buffer, 500k distinct keys: chains stay short enough for a unit test.
    let mut mem = vec![0u64; 8 << 20];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    for i in 0..500_000u64 {
        b.apply(1, &AggFunc::Count, &[KeyElem::Int(i)], 0, 1)
            .unwrap();
    }
    for i in 0..500_000u64 {
        b.apply(1, &AggFunc::Count, &[KeyElem::Int(i)], 0, 1)
            .unwrap();
    }
    assert_eq!(b.len(), 500_000);
    assert!(b.iter().all(|d| d.values == [2]));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The update cache (per aggregation id modulo its slots, the data set updated last)
    /// never sends an update to another data set: ids that share a slot, keys that take
    /// turns, and resets that put new data sets where old ones were all update what a
    /// model does.
    #[test]
    fn update_cache_follows_keys_ids_and_resets(
        ops in prop::collection::vec(
            (0u32..40, prop::collection::vec(0u64..3, 0..3), -5i64..5, prop::bool::weighted(0.05)),
            0..400,
        ),
    ) {
        let f = funcs();
        let mut mem = vec![0u64; 1 << 14];
        let mut b = AggBuffer::format(&mut mem).unwrap();
        let mut model = Model::new();
        for (id, k, v, reset) in &ops {
            if *reset {
                prop_assert_eq!(&contents(&b), &model);
                b.reset();
                model.clear();
                continue;
            }
            let func = &f[(*id % 9) as usize];
            let el: Vec<KeyElem<'_>> = k.iter().map(|&x| KeyElem::Int(x)).collect();
            b.apply(*id, func, &el, *v, 1).unwrap();
            let kb = key_bytes(&k.iter().map(|&x| K::I(x)).collect::<Vec<_>>());
            let e = model.entry((*id, kb)).or_insert_with(|| {
                let mut w = vec![0; func.value_words()];
                func.init(&mut w);
                w
            });
            func.apply(e, *v, 1).unwrap();
        }
        prop_assert_eq!(&contents(&b), &model);
    }
}
