//! The aggregating functions of `rust/core/agg/` against straightforward references.

use oxtrace_core::agg::*;
use proptest::prelude::*;

/// DTrace's quantize bucket search, a linear scan over the bucket values.
fn ref_quantize(v: i64) -> usize {
    let zero = QUANTIZE_ZERO;
    if v < 0 {
        for i in 0..zero {
            if v <= quantize_bucket_value(i) {
                return i;
            }
        }
        unreachable!()
    }
    for i in zero + 1..QUANTIZE_BUCKETS {
        if v < quantize_bucket_value(i) {
            return i - 1;
        }
    }
    QUANTIZE_BUCKETS - 1
}

fn ref_lquantize(v: i64, base: i64, step: i64, levels: i64) -> usize {
    if v < base {
        return 0;
    }
    for i in 0..levels {
        if (v as i128) < base as i128 + (i as i128 + 1) * step as i128 {
            return i as usize + 1;
        }
    }
    levels as usize + 1
}

/// The lower bounds of llquantize buckets 1.., built order by order.
fn ref_llq_bounds(f: i128, low: u32, high: u32, steps: i128) -> Vec<i128> {
    let mut b = Vec::new();
    for order in low..=high {
        let lo = f.pow(order);
        let hi = f.pow(order + 1);
        let width = hi / hi.min(steps);
        let mut x = lo;
        while x < hi {
            b.push(x);
            x += width;
        }
    }
    b.push(f.pow(high + 1));
    b
}

/// Oracle DTrace's symmetric layout over the positive `bounds`: the zero bucket at
/// `bounds.len()`, positive values above it, negative ones mirrored below it.
fn ref_llquantize(v: i64, bounds: &[i128]) -> usize {
    let z = bounds.len();
    let m = bounds
        .iter()
        .filter(|b| **b <= (v as i128).abs())
        .count()
        .min(bounds.len());
    if v < 0 {
        z - m
    } else {
        z + m
    }
}

fn isqrt_ref(n: u128) -> u128 {
    let (mut lo, mut hi) = (0u128, 1u128 << 64);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if mid.checked_mul(mid).is_some_and(|m| m <= n) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Reference results of a scalar function over `vals`.
fn ref_scalar(kind: AggKind, vals: &[i64]) -> i128 {
    let n = vals.len() as i128;
    let sum = vals.iter().fold(0i64, |a, v| a.wrapping_add(*v));
    match kind {
        AggKind::Count => n,
        AggKind::Sum => sum as i128,
        AggKind::Min => *vals.iter().min().unwrap_or(&i64::MAX) as i128,
        AggKind::Max => *vals.iter().max().unwrap_or(&i64::MIN) as i128,
        AggKind::Avg => {
            if n == 0 {
                0
            } else {
                sum as i128 / n
            }
        }
        AggKind::Stddev => {
            if n == 0 {
                return 0;
            }
            let sq: u128 = vals
                .iter()
                .map(|v| (v.unsigned_abs() as u128).pow(2))
                .fold(0u128, |a, b| a.wrapping_add(b));
            let mean = (sum as i128 / n).unsigned_abs();
            isqrt_ref((sq / n as u128).saturating_sub(mean.saturating_mul(mean))) as i128
        }
        _ => unreachable!(),
    }
}

fn run(f: &AggFunc, vals: &[(i64, i64)]) -> Vec<u64> {
    let mut v = vec![0; f.value_words()];
    f.init(&mut v);
    for (x, inc) in vals {
        f.apply(&mut v, *x, *inc).unwrap();
    }
    v
}

fn edge_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MIN + 1),
        Just(i64::MAX),
        Just(i64::MAX - 1),
        Just(0i64),
        Just(1i64),
        Just(-1i64),
        (-70i64..70).prop_map(|k| if k >= 0 {
            1i64 << (k % 63)
        } else {
            -(1i64 << (-k % 63))
        }),
        (-70i64..70).prop_map(|k| if k >= 0 {
            (1i64 << (k % 63)) - 1
        } else {
            -(1i64 << (-k % 63)) + 1
        }),
        -1000i64..1000,
        any::<i64>(),
    ]
}

fn all_funcs() -> Vec<AggFunc> {
    vec![
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::Avg,
        AggFunc::Stddev,
        AggFunc::Quantize,
        AggFunc::lquantize(-100, 100, 7).unwrap(),
        AggFunc::lquantize(0, 10, 1).unwrap(),
        AggFunc::llquantize(10, 0, 6, 20).unwrap(),
        AggFunc::llquantize(2, 1, 20, 4).unwrap(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn quantize_matches_dtrace_scan(v in edge_i64()) {
        prop_assert_eq!(quantize_bucket(v), ref_quantize(v));
        let b = quantize_bucket(v);
        let (lo, hi) = AggFunc::Quantize.bucket_range(b).unwrap();
        prop_assert!(lo.is_none_or(|lo| lo <= v) && hi.is_none_or(|hi| v <= hi));
    }

    #[test]
    fn lquantize_matches_reference(
        v in edge_i64(),
        low in -100_000i64..100_000,
        span in 1i64..200_000,
        step in 1i64..70_000,
    ) {
        let Ok(AggFunc::Lquantize(p)) = AggFunc::lquantize(low, low + span, step) else {
            prop_assume!(false);
            unreachable!()
        };
        let levels = span / step;
        prop_assert_eq!(p.levels() as i64, levels);
        prop_assert_eq!(p.bucket(v), ref_lquantize(v, low, step, levels));
        let (lo, hi) = p.bucket_range(p.bucket(v));
        prop_assert!(lo.is_none_or(|lo| lo <= v) && hi.is_none_or(|hi| v <= hi));
    }

    #[test]
    fn llquantize_matches_reference(
        v in edge_i64(),
        f in 2i64..12,
        low in 0i64..4,
        span in 1i64..6,
        k in 1u32..4,
        m in 1i64..4,
    ) {
        // steps: a multiple of the factor dividing a power of it (or just the factor).
        let steps = (f.pow(k) / m).max(f);
        let r = AggFunc::llquantize(f, low, low + span, steps);
        let Ok(AggFunc::Llquantize(p)) = r else {
            prop_assume!(false);
            unreachable!()
        };
        let bounds = ref_llq_bounds(f as i128, low as u32, (low + span) as u32, steps as i128);
        prop_assert_eq!(p.buckets(), 2 * bounds.len() + 1);
        prop_assert_eq!(p.bucket(v), ref_llquantize(v, &bounds));
        let labels: Vec<i128> = p.labels().map(|l| l as i128).collect();
        prop_assert_eq!(&labels, &bounds);
        let (lo, hi) = p.bucket_range(p.bucket(v));
        prop_assert!(lo.is_none_or(|lo| lo <= v) && hi.is_none_or(|hi| v <= hi));
    }

    #[test]
    fn scalars_match_reference(vals in prop::collection::vec(edge_i64(), 0..60)) {
        for f in [AggFunc::Count, AggFunc::Sum, AggFunc::Min, AggFunc::Max, AggFunc::Avg, AggFunc::Stddev] {
            let pairs: Vec<(i64, i64)> = vals.iter().map(|v| (*v, 1)).collect();
            let v = run(&f, &pairs);
            prop_assert_eq!(f.scalar(&v, 1).unwrap(), ref_scalar(f.kind(), &vals), "{:?}", f);
        }
    }

    #[test]
    fn histograms_match_reference(vals in prop::collection::vec((edge_i64(), -3i64..4), 0..60)) {
        for f in all_funcs().into_iter().filter(|f| f.is_histogram()) {
            let v = run(&f, &vals);
            let mut r = vec![0u64; f.value_words()];
            for (x, inc) in &vals {
                let b = match f {
                    AggFunc::Quantize => ref_quantize(*x),
                    AggFunc::Lquantize(p) => ref_lquantize(*x, p.base(), p.step(), p.levels() as i64),
                    AggFunc::Llquantize(p) => ref_llquantize(*x, &ref_llq_bounds(p.factor() as i128, p.low(), p.high(), p.steps() as i128)),
                    _ => unreachable!(),
                };
                r[b] = r[b].wrapping_add(*inc as u64);
                // The last word sums value × increment (OpenMetrics' `_sum`).
                let last = r.len() - 1;
                r[last] = r[last].wrapping_add((*x as u64).wrapping_mul(*inc as u64));
            }
            prop_assert_eq!(f.hist_sum(&v), Some(r[r.len() - 1] as i64));
            prop_assert_eq!(f.buckets_of(&v).len(), f.nbuckets());
            prop_assert_eq!(v, r);
        }
    }

    #[test]
    fn merge_of_parts_equals_whole(
        vals in prop::collection::vec((edge_i64(), -3i64..4), 0..80),
        cuts in prop::collection::vec(0usize..80, 0..6),
    ) {
        for f in all_funcs() {
            let whole = run(&f, &vals);
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.min(&vals.len()).to_owned()).collect();
            cuts.push(0);
            cuts.push(vals.len());
            cuts.sort();
            let mut merged = vec![0; f.value_words()];
            f.init(&mut merged);
            for w in cuts.windows(2) {
                let part = run(&f, &vals[w[0]..w[1]]);
                f.merge(&mut merged, &part).unwrap();
            }
            prop_assert_eq!(&merged, &whole, "{:?}", f);
        }
    }

    #[test]
    fn software_division_matches_native(n in any::<u128>(), d in any::<u128>(), sh in 0u32..128, m in any::<i128>(), e in any::<i64>()) {
        let d = (d >> sh).max(1);
        prop_assert_eq!(udiv128(n, d), n / d);
        prop_assert_eq!(udiv128(n >> sh, d), (n >> sh) / d);
        let e = if e == 0 { 1 } else { e as i128 };
        let m = m >> 1;
        prop_assert_eq!(idiv128(m, e), m / e);
    }

    #[test]
    fn encode_decode_roundtrip(code in 0u8..12, arg in any::<u64>()) {
        if let Ok(f) = AggFunc::decode(code, arg) {
            prop_assert_eq!(f.encode(), (code, arg));
        }
    }
}

#[test]
fn stddev_is_dtrace_integer_formula() {
    // 1 and 2: avg(x^2) = 5/2 = 2, avg(x) = 1, sqrt(2 - 1) = 1 (DTrace prints 1, not 0.5).
    let v = run(&AggFunc::Stddev, &[(1, 1), (2, 1)]);
    assert_eq!(AggFunc::Stddev.scalar(&v, 1), Some(1));
    let v = run(
        &AggFunc::Stddev,
        &[
            (2, 1),
            (4, 1),
            (4, 1),
            (4, 1),
            (5, 1),
            (5, 1),
            (7, 1),
            (9, 1),
        ],
    );
    assert_eq!(AggFunc::Stddev.scalar(&v, 1), Some(2));
    // Extremes do not overflow the 128-bit sum of squares.
    let v = run(&AggFunc::Stddev, &[(i64::MIN, 1), (i64::MAX, 1)]);
    assert_eq!(v[0], 2);
    let sq = (1u128 << 126) + (i64::MAX as u128).pow(2);
    assert_eq!((v[2] as u128) | ((v[3] as u128) << 64), sq);
    assert_eq!(
        AggFunc::Stddev.scalar(&v, 1),
        Some(isqrt_ref(sq / 2) as i128)
    );
}

#[test]
fn normalization_divides() {
    let v = run(&AggFunc::Sum, &[(1000, 1), (-10, 1)]);
    assert_eq!(AggFunc::Sum.scalar(&v, 10), Some(99));
    let v = run(&AggFunc::Avg, &[(100, 1), (300, 1)]);
    assert_eq!(AggFunc::Avg.scalar(&v, 10), Some(20));
    assert_eq!(AggFunc::Avg.scalar(&v, 0), Some(200));
    let v = run(&AggFunc::Stddev, &[(100, 1), (300, 1)]);
    assert_eq!(AggFunc::Stddev.scalar(&v, 10), Some(10));
    assert_eq!(AggFunc::Quantize.scalar(&v, 1), None);
}

#[test]
fn initial_values() {
    let mut v = [7u64; 1];
    AggFunc::Min.init(&mut v);
    assert_eq!(v[0] as i64, i64::MAX);
    AggFunc::Max.init(&mut v);
    assert_eq!(v[0] as i64, i64::MIN);
    AggFunc::Count.init(&mut v);
    assert_eq!(v[0], 0);
    assert_eq!(
        AggFunc::Count.apply(&mut [0u64; 2], 1, 1),
        Err(AggError::ValueLength)
    );
    assert_eq!(
        AggFunc::Sum.merge(&mut [0u64; 1], &[0u64; 2]),
        Err(AggError::ValueLength)
    );
}

#[test]
fn lquantize_validation() {
    use ParamError::*;
    assert_eq!(AggFunc::lquantize(0, 0, 1), Err(LqHighNotAboveLow));
    assert_eq!(AggFunc::lquantize(10, 0, 1), Err(LqHighNotAboveLow));
    assert_eq!(AggFunc::lquantize(0, 10, 0), Err(LqStepNotPositive));
    assert_eq!(AggFunc::lquantize(0, 10, -1), Err(LqStepNotPositive));
    assert_eq!(AggFunc::lquantize(0, 10, 11), Err(LqStepTooLarge));
    assert_eq!(AggFunc::lquantize(0, 100_000, 70_000), Err(LqStepRange));
    assert_eq!(AggFunc::lquantize(0, 100_000, 1), Err(LqStepTooSmall));
    assert_eq!(
        AggFunc::lquantize(i32::MIN as i64 - 1, 0, 1),
        Err(LqLowRange)
    );
    assert_eq!(
        AggFunc::lquantize(0, i32::MAX as i64 + 1, 1),
        Err(LqHighRange)
    );
    let AggFunc::Lquantize(p) = AggFunc::lquantize(0, 10, 3).unwrap() else {
        unreachable!()
    };
    // DTrace: levels = (high - low) / step, so the top level ends at 9, not 10.
    assert_eq!((p.levels(), p.buckets()), (3, 5));
    assert_eq!(p.bucket(9), 4);
    assert_eq!(p.bucket(8), 3);
    assert_eq!(p.bucket(-1), 0);
    assert_eq!(p.bucket(i64::MAX), 4);
    assert_eq!(p.bucket(i64::MIN), 0);
    assert!(AggFunc::lquantize(0, 65535, 1).is_ok());
}

#[test]
fn llquantize_validation() {
    use ParamError::*;
    assert_eq!(AggFunc::llquantize(1, 0, 6, 20), Err(LlqFactorTooSmall));
    assert_eq!(AggFunc::llquantize(10, 6, 6, 20), Err(LlqMagnitudeRange));
    assert_eq!(
        AggFunc::llquantize(10, 0, 6, 6),
        Err(LlqStepsDontDivideFactor)
    );
    assert_eq!(AggFunc::llquantize(10, 0, 6, 0), Err(LlqStepsZero));
    assert!(AggFunc::llquantize(10, 0, 6, 5).is_ok());
    assert!(AggFunc::llquantize(10, 0, 6, 1).is_ok());
    assert_eq!(AggFunc::llquantize(10, 0, 6, 25), Err(LlqStepsUneven));
    assert_eq!(AggFunc::llquantize(10, 0, 6, 15), Err(LlqStepsUneven));
    assert_eq!(AggFunc::llquantize(10, 0, 6, 30), Err(LlqStepsUneven));
    assert_eq!(AggFunc::llquantize(10, 2, 6, 80), Err(LlqStepsUneven));
    assert_eq!(AggFunc::llquantize(10, 0, 18, 10), Err(LlqMagnitudeTooBig));
    assert_eq!(AggFunc::llquantize(70_000, 0, 1, 70_000), Err(LlqRange(1)));
    assert_eq!(AggFunc::llquantize(10, -1, 1, 10), Err(LlqRange(2)));
    assert!(AggFunc::llquantize(10, 0, 17, 10).is_ok());
    assert!(AggFunc::llquantize(3, 3, 5, 27).is_ok());
    assert!(AggFunc::llquantize(10, 0, 6, 20).is_ok());
    assert!(AggFunc::llquantize(2, 0, 61, 2).is_ok());
    let AggFunc::Llquantize(p) = AggFunc::llquantize(2, 0, 61, 2).unwrap() else {
        unreachable!()
    };
    assert_eq!(p.bucket(i64::MAX), p.buckets() - 1);
    assert_eq!(p.bucket(i64::MIN), 0);
    assert!(ParamError::LlqStepsUneven
        .to_string()
        .contains("evenly divide"));
}

#[test]
fn every_function_refuses_a_value_of_the_wrong_length() {
    for f in &all_funcs() {
        let n = f.value_words();
        for len in [0, n - 1, n + 1] {
            let mut v = vec![0u64; n + 1];
            assert_eq!(
                f.apply(&mut v[..len], 5, 1),
                Err(AggError::ValueLength),
                "{f:?}, {len} words"
            );
            assert!(v.iter().all(|&w| w == 0), "{f:?} wrote a refused value");
        }
        let mut v = vec![0u64; n];
        f.init(&mut v);
        assert_eq!(f.apply(&mut v, 5, 1), Ok(()), "{f:?}");
    }
}
