// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the private parts; the public behaviour is tested in `tests/agg_*.rs`.

use super::*;

#[test]
fn quantize_edges() {
    assert_eq!(quantize_bucket(0), 63);
    assert_eq!(quantize_bucket(1), 64);
    assert_eq!(quantize_bucket(-1), 62);
    assert_eq!(quantize_bucket(i64::MAX), 126);
    assert_eq!(quantize_bucket(i64::MIN), 0);
    assert_eq!(quantize_bucket_value(126), 1 << 62);
    assert_eq!(quantize_bucket_value(0), -(1 << 62));
}

#[test]
fn llquantize_buckets() {
    // llquantize(v, 10, 0, 2, 10): <= -1000, the mirror of the positive buckets, 0, 1..9,
    // 10..90 by 10, 100..900 by 100, >= 1000 (Oracle DTrace's layout).
    let p = LlquantizeParams::new(10, 0, 2, 10).unwrap();
    assert_eq!(p.buckets(), 1 + 27 + 1 + 27 + 1);
    assert_eq!(p.zero_bucket(), 28);
    assert_eq!(p.bucket(0), 28);
    assert_eq!(p.bucket(1), 29);
    assert_eq!(p.bucket(9), 37);
    assert_eq!(p.bucket(10), 38);
    assert_eq!(p.bucket(999), 55);
    assert_eq!(p.bucket(1000), 56);
    assert_eq!(p.bucket(i64::MAX), 56);
    assert_eq!(p.bucket(-1), 27);
    assert_eq!(p.bucket(-999), 1);
    assert_eq!(p.bucket(-1000), 0);
    assert_eq!(p.bucket(i64::MIN), 0);
    assert_eq!(p.labels().count(), 28);
    assert_eq!(p.bucket_range(28), (Some(0), Some(0)));
    assert_eq!(p.bucket_range(27), (Some(-1), Some(-1)));
    assert_eq!(p.bucket_range(18), (Some(-19), Some(-10)));
    assert_eq!(p.bucket_range(0), (None, Some(-1000)));
    assert_eq!(p.bucket_range(56), (Some(1000), None));
    // Above magnitude 0 the zero bucket holds abs(value) < factor^low.
    let p = LlquantizeParams::new(10, 1, 2, 10).unwrap();
    assert_eq!(
        (p.bucket(-9), p.bucket(9)),
        (p.zero_bucket(), p.zero_bucket())
    );
    assert_eq!(p.bucket_range(p.zero_bucket()), (Some(-9), Some(9)));
}

#[test]
fn division() {
    let cases: [(u128, u128); 6] = [
        (u128::MAX, 1),
        (u128::MAX, 3),
        (1 << 100, (1 << 64) + 7),
        (12345, 0x1_0000_0000_0000_0001),
        (99, 7),
        (0, 5),
    ];
    for (n, d) in cases {
        assert_eq!(udiv128(n, d), n / d);
    }
    assert_eq!(idiv128(-7, 2), -3);
    assert_eq!(idiv128(7, -2), -3);
    assert_eq!(idiv128(-7, -2), 3);
    assert_eq!(idiv128(i64::MIN as i128, 1), i64::MIN as i128);
}

#[test]
fn sqrt() {
    assert_eq!(isqrt128(u128::MAX), u64::MAX);
    assert_eq!(isqrt128(15), 3);
    assert_eq!(isqrt128(16), 4);
}

/// A reset with few data sets clears only their buckets; the table must still be all
/// empty afterwards, as after a reset with many (the whole table cleared).
#[test]
fn reset_clears_every_used_bucket() {
    for n in [0u64, 1, 3, 40, 5000] {
        let mut mem = vec![0u64; 1 << 16];
        let mut b = AggBuffer::format(&mut mem).unwrap();
        let nb = b.buckets();
        for k in 0..n {
            b.apply(1, &AggFunc::Count, &[KeyElem::Int(k)], 0, 1)
                .unwrap();
        }
        let sparse = (n as usize) < nb / 8;
        assert_eq!(
            b.snapshot_len(),
            SNAPSHOT_HEADER_BYTES + b.iter().map(|d| d.record_len()).sum::<usize>()
        );
        b.reset();
        assert!(
            mem[buffer::HEADER_WORDS..buffer::HEADER_WORDS + nb]
                .iter()
                .all(|&w| w == 0),
            "n={n} sparse={sparse}"
        );
        let mut b = AggBuffer::attach(&mut mem).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.snapshot_len(), SNAPSHOT_HEADER_BYTES);
        b.apply(1, &AggFunc::Count, &[KeyElem::Int(7)], 0, 1)
            .unwrap();
        assert_eq!(b.lookup(1, &[KeyElem::Int(7)]), Some(&[1][..]));
        assert_eq!(b.lookup(1, &[KeyElem::Int(8)]), None);
    }
}

#[test]
fn take_run_of_integer_keys() {
    let mut mem = [0u64; 4096];
    AggBuffer::format(&mut mem).unwrap();
    let mut b = AggBuffer::attach(&mut mem).unwrap();
    for k in 0..5u64 {
        b.apply(1, &AggFunc::Count, &[KeyElem::Int(k)], 0, 1)
            .unwrap();
    }
    b.apply(1, &AggFunc::Count, &[KeyElem::Str(b"x")], 0, 1)
        .unwrap();
    b.apply(1, &AggFunc::Count, &[KeyElem::Int(9)], 0, 1)
        .unwrap();
    let mut out = [0u8; 1024];
    let mut cur = SnapshotCursor::new();
    let n = b.serialize(0, &mut out, &mut cur).unwrap();
    let (_, mut recs, _) = parse_snapshot(&out[..n]).unwrap();
    let first = recs.clone().next().unwrap().unwrap();
    let mut hdr = [0u8; RECORD_HEADER_BYTES];
    hdr.copy_from_slice(&out[SNAPSHOT_HEADER_BYTES..SNAPSHOT_HEADER_BYTES + 16]);
    let desc = u64::from_le_bytes(first.key.bytes()[..8].try_into().unwrap());
    // A string descriptor is never taken in bulk.
    assert!(recs.clone().take_run(&hdr, desc ^ 1).is_empty());
    // The five integer keys, then the string key ends the run; the rest parses on.
    // A record: 16 header bytes, the descriptor and one key word, one value word.
    assert_eq!(recs.take_run(&hdr, desc).len(), 5 * 40);
    let rest: Vec<_> = recs
        .map(|r| r.unwrap().key.elems().next().unwrap())
        .collect();
    assert_eq!(rest, [KeyElem::Str(b"x"), KeyElem::Int(9)]);
}

/// A writer over any words at all (a header or links that no formatted buffer has) returns
/// errors or updates something in range; it never panics and never walks forever.
#[test]
fn writer_survives_any_header() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let funcs = [AggFunc::Count, AggFunc::Sum, AggFunc::Quantize];
    for round in 0..2000 {
        let mut mem = vec![0u64; 256];
        {
            let mut b = AggBuffer::format(&mut mem).unwrap();
            for k in 0..(round % 12) {
                let _ = b.apply(k as u32 % 3, &AggFunc::Count, &[KeyElem::Int(k)], 0, 1);
            }
        }
        // Corrupt a few words, header and data alike, with small and wild values.
        for _ in 0..1 + round % 4 {
            let i = next() as usize % mem.len();
            mem[i] = match next() % 4 {
                0 => next(),
                1 => next() % 300,
                2 => u64::MAX,
                _ => 0,
            };
        }
        let mut w = AggWriter::new(&mut mem).unwrap();
        for k in 0..4u64 {
            let f = &funcs[(k % 3) as usize];
            let _ = w.apply(k as u32, f, &[KeyElem::Int(next() % 5)], k as i64, 1);
        }
    }
}

/// A chain whose link points forward (a cycle, in the worst case) is corrupt: the walk
/// stops at it.
#[test]
fn writer_stops_at_a_forward_link() {
    let mut mem = vec![0u64; 256];
    let mut b = AggBuffer::format(&mut mem).unwrap();
    b.apply(1, &AggFunc::Count, &[KeyElem::Int(1)], 0, 1)
        .unwrap();
    let nb = b.buckets();
    let data = buffer::HEADER_WORDS + nb;
    // Every bucket and the cache name the one data set, which links to itself.
    for w in &mut mem[8..data] {
        *w = data as u64;
    }
    mem[data] = (mem[data] & !0xffff_ffff) | data as u64;
    let mut w = AggWriter::new(&mut mem).unwrap();
    assert_eq!(
        w.apply(2, &AggFunc::Count, &[KeyElem::Int(9)], 0, 1),
        Err(AggError::Corrupt)
    );
}

#[test]
fn writer_needs_the_header_words() {
    let mut mem = vec![0u64; buffer::HEADER_WORDS - 1];
    assert!(AggWriter::new(&mut mem).is_err());
}
