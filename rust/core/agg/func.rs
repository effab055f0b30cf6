// SPDX-License-Identifier: GPL-2.0

//! The aggregating functions: initial value, update in probe context, merge, final value,
//! and the 128-bit arithmetic stddev needs (the kernel has no `__divti3`).

use super::*;

/// The aggregating functions: the one list of their codes (in the program image and the
/// ABI form of [`AggFunc::encode`]) and their D names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AggKind {
    /// `count()`.
    Count = 0,
    /// `sum(v)`.
    Sum = 1,
    /// `min(v)`.
    Min = 2,
    /// `max(v)`.
    Max = 3,
    /// `avg(v)`.
    Avg = 4,
    /// `stddev(v)`.
    Stddev = 5,
    /// `quantize(v[, incr])`.
    Quantize = 6,
    /// `lquantize(v, low, high[, step[, incr]])`: params `[low, high, step, 0]`.
    Lquantize = 7,
    /// `llquantize(v, factor, low, high, steps[, incr])`: params `[factor, low, high, steps]`.
    Llquantize = 8,
}

impl AggKind {
    /// Every function, in code order.
    pub const ALL: [AggKind; 9] = [
        Self::Count,
        Self::Sum,
        Self::Min,
        Self::Max,
        Self::Avg,
        Self::Stddev,
        Self::Quantize,
        Self::Lquantize,
        Self::Llquantize,
    ];

    /// Decodes a function code.
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }

    /// The D name of the function.
    pub fn name(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
            Self::Avg => "avg",
            Self::Stddev => "stddev",
            Self::Quantize => "quantize",
            Self::Lquantize => "lquantize",
            Self::Llquantize => "llquantize",
        }
    }

    /// Looks a function up by its D name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// An aggregating function with its validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AggFunc {
    /// Number of updates.
    Count,
    /// Sum of the values (wrapping 64-bit, as DTrace).
    Sum,
    /// Smallest value.
    Min,
    /// Largest value.
    Max,
    /// Count and sum; the result is `sum / count`.
    Avg,
    /// Count, sum and the 128-bit sum of squares.
    Stddev,
    /// Power-of-two buckets.
    Quantize,
    /// Linear buckets.
    Lquantize(LquantizeParams),
    /// Log-linear buckets.
    Llquantize(LlquantizeParams),
}

impl AggFunc {
    /// The function's kind.
    pub fn kind(&self) -> AggKind {
        match self {
            Self::Count => AggKind::Count,
            Self::Sum => AggKind::Sum,
            Self::Min => AggKind::Min,
            Self::Max => AggKind::Max,
            Self::Avg => AggKind::Avg,
            Self::Stddev => AggKind::Stddev,
            Self::Quantize => AggKind::Quantize,
            Self::Lquantize(_) => AggKind::Lquantize,
            Self::Llquantize(_) => AggKind::Llquantize,
        }
    }

    /// `lquantize(v, low, high, step)`.
    pub fn lquantize(low: i64, high: i64, step: i64) -> Result<Self, ParamError> {
        Ok(Self::Lquantize(LquantizeParams::new(low, high, step)?))
    }

    /// `llquantize(v, factor, low, high, steps)`.
    pub fn llquantize(factor: i64, low: i64, high: i64, steps: i64) -> Result<Self, ParamError> {
        Ok(Self::Llquantize(LlquantizeParams::new(
            factor, low, high, steps,
        )?))
    }

    /// The ABI form: function code and one parameter word (lquantize: base in bits 0-31,
    /// step in 32-47, levels in 48-63; llquantize: factor, low, high, steps in 16-bit
    /// fields from bit 0 up; zero for the others).
    pub fn encode(&self) -> (u8, u64) {
        let arg = match self {
            Self::Lquantize(p) => {
                (p.base as u32 as u64) | ((p.step as u64) << 32) | ((p.levels as u64) << 48)
            }
            Self::Llquantize(p) => {
                p.factor as u64
                    | ((p.low as u64) << 16)
                    | ((p.high as u64) << 32)
                    | ((p.steps as u64) << 48)
            }
            _ => 0,
        };
        (self.kind() as u8, arg)
    }

    /// Decodes and validates the ABI form made by [`AggFunc::encode`].
    pub fn decode(code: u8, arg: u64) -> Result<Self, ParamError> {
        let plain = |f: Self| {
            if arg == 0 {
                Ok(f)
            } else {
                Err(ParamError::UnexpectedParameter)
            }
        };
        match code {
            0 => plain(Self::Count),
            1 => plain(Self::Sum),
            2 => plain(Self::Min),
            3 => plain(Self::Max),
            4 => plain(Self::Avg),
            5 => plain(Self::Stddev),
            6 => plain(Self::Quantize),
            7 => {
                let base = arg as u32 as i32 as i64;
                let step = (arg >> 32) as u16 as i64;
                let levels = (arg >> 48) as u16 as i64;
                let p = LquantizeParams::new(base, base + levels * step, step)?;
                if p.levels as i64 != levels {
                    return Err(ParamError::LqStepTooLarge);
                }
                Ok(Self::Lquantize(p))
            }
            8 => Self::llquantize(
                (arg & 0xffff) as i64,
                ((arg >> 16) & 0xffff) as i64,
                ((arg >> 32) & 0xffff) as i64,
                (arg >> 48) as i64,
            ),
            c => Err(ParamError::UnknownFunction(c)),
        }
    }

    /// Number of 64-bit words of the value component: a histogram's buckets are followed by
    /// one word holding the sum of the values it counted (OpenMetrics' `_sum`, which the
    /// buckets alone cannot give).
    #[inline]
    pub fn value_words(&self) -> usize {
        match self {
            Self::Count | Self::Sum | Self::Min | Self::Max => 1,
            Self::Avg => 2,
            Self::Stddev => 4,
            Self::Quantize | Self::Lquantize(_) | Self::Llquantize(_) => self.nbuckets() + 1,
        }
    }

    /// Number of buckets of a histogram; 0 for the scalar functions.
    pub fn nbuckets(&self) -> usize {
        match self {
            Self::Quantize => QUANTIZE_BUCKETS,
            Self::Lquantize(p) => p.buckets(),
            Self::Llquantize(p) => p.buckets(),
            _ => 0,
        }
    }

    /// The buckets of a histogram value `v` (without its sum word); empty for a scalar.
    pub fn buckets_of<'v>(&self, v: &'v [u64]) -> &'v [u64] {
        v.get(..self.nbuckets()).unwrap_or(&[])
    }

    /// The sum of the values a histogram counted (each `value × incr`, wrapping like
    /// DTrace's 64-bit arithmetic); `None` for a scalar or a bad value length.
    pub fn hist_sum(&self, v: &[u64]) -> Option<i64> {
        if !self.is_histogram() || v.len() != self.value_words() {
            return None;
        }
        v.last().map(|s| *s as i64)
    }

    /// Whether the value is a histogram (quantize family).
    pub fn is_histogram(&self) -> bool {
        matches!(
            self,
            Self::Quantize | Self::Lquantize(_) | Self::Llquantize(_)
        )
    }

    /// Stores the initial value: `i64::MAX` for min, `i64::MIN` for max, zero otherwise.
    pub fn init(&self, v: &mut [u64]) {
        let first = match self {
            Self::Min => i64::MAX as u64,
            Self::Max => i64::MIN as u64,
            _ => 0,
        };
        for (i, w) in v.iter_mut().enumerate() {
            *w = if i == 0 { first } else { 0 };
        }
    }

    /// Applies the function to the current value `v` with a new value (probe context).
    ///
    /// `incr` is the histogram increment (`quantize(v, incr)`); the other functions ignore
    /// it. Arithmetic wraps like DTrace's 64-bit arithmetic.
    ///
    /// `count()` and `sum()`, the commonest, are inlined where the update is made: called out
    /// of line they cost three times the addition's instructions in saved registers.
    #[inline(always)]
    pub fn apply(&self, v: &mut [u64], value: i64, incr: i64) -> Result<(), AggError> {
        let add = match self {
            Self::Count => 1,
            Self::Sum => value as u64,
            _ => return self.apply_other(v, value, incr),
        };
        // Their one value word (`value_words`).
        match v {
            [w] => {
                *w = w.wrapping_add(add);
                Ok(())
            }
            _ => Err(AggError::ValueLength),
        }
    }

    /// [`AggFunc::apply`] of the functions other than `count()` and `sum()`.
    #[inline(never)]
    fn apply_other(&self, v: &mut [u64], value: i64, incr: i64) -> Result<(), AggError> {
        if v.len() != self.value_words() {
            return Err(AggError::ValueLength);
        }
        let x = value as u64;
        match self {
            // Made by `apply`.
            Self::Count | Self::Sum => {}
            Self::Min => {
                if value < v[0] as i64 {
                    v[0] = x;
                }
            }
            Self::Max => {
                if value > v[0] as i64 {
                    v[0] = x;
                }
            }
            Self::Avg => {
                v[0] = v[0].wrapping_add(1);
                v[1] = v[1].wrapping_add(x);
            }
            Self::Stddev => {
                v[0] = v[0].wrapping_add(1);
                v[1] = v[1].wrapping_add(x);
                let a = value.unsigned_abs() as u128;
                add128(v, a * a);
            }
            Self::Quantize | Self::Lquantize(_) | Self::Llquantize(_) => {
                let b = match self {
                    Self::Quantize => quantize_bucket(value),
                    Self::Lquantize(p) => p.bucket(value),
                    Self::Llquantize(p) => p.bucket(value),
                    _ => 0,
                };
                // PANIC: `v` has `nbuckets() + 1` words (checked above) and every bucket
                // function returns an index below `nbuckets()`; the sum is the last word.
                v[b] = v[b].wrapping_add(incr as u64);
                let last = v.len() - 1;
                v[last] = v[last].wrapping_add(x.wrapping_mul(incr as u64));
            }
        }
        Ok(())
    }

    /// Merges the value `src` into `dst` (user level, the same function applied again to the
    /// CPUs' results): counts, sums, buckets and sums of squares add; min and max keep the
    /// extreme.
    pub fn merge(&self, dst: &mut [u64], src: &[u64]) -> Result<(), AggError> {
        let n = self.value_words();
        if dst.len() != n || src.len() != n {
            return Err(AggError::ValueLength);
        }
        match self {
            Self::Min => {
                if (src[0] as i64) < dst[0] as i64 {
                    dst[0] = src[0];
                }
            }
            Self::Max => {
                if (src[0] as i64) > dst[0] as i64 {
                    dst[0] = src[0];
                }
            }
            Self::Stddev => {
                dst[0] = dst[0].wrapping_add(src[0]);
                dst[1] = dst[1].wrapping_add(src[1]);
                add128(dst, src[2] as u128 | ((src[3] as u128) << 64));
            }
            _ => {
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = d.wrapping_add(*s);
                }
            }
        }
        Ok(())
    }

    /// The final value of a scalar function, divided by `normal` (1 when not normalized)
    /// the way `dtrace(1M)` prints it; `None` for histograms or a bad value length.
    pub fn scalar(&self, v: &[u64], normal: u64) -> Option<i128> {
        if v.len() != self.value_words() {
            return None;
        }
        let normal = normal.max(1) as i128;
        match self {
            Self::Count | Self::Sum | Self::Min | Self::Max => {
                Some(idiv128(v[0] as i64 as i128, normal))
            }
            Self::Avg => Some(avg(v[0], v[1], normal)),
            Self::Stddev => Some(stddev(v, normal as u128) as i128),
            _ => None,
        }
    }

    /// The inclusive value range of histogram bucket `b` (`None` = unbounded side), for
    /// JSON and OpenMetrics output; `None` for scalar functions or a bad index.
    pub fn bucket_range(&self, b: usize) -> Option<(Option<i64>, Option<i64>)> {
        if b >= self.nbuckets() {
            return None;
        }
        match self {
            Self::Quantize => Some(if b == 0 {
                (None, Some(quantize_bucket_value(0)))
            } else if b < QUANTIZE_ZERO {
                (
                    Some(quantize_bucket_value(b - 1) + 1),
                    Some(quantize_bucket_value(b)),
                )
            } else if b == QUANTIZE_ZERO {
                (Some(0), Some(0))
            } else if b == QUANTIZE_BUCKETS - 1 {
                (Some(quantize_bucket_value(b)), None)
            } else {
                (
                    Some(quantize_bucket_value(b)),
                    Some(quantize_bucket_value(b + 1) - 1),
                )
            }),
            Self::Lquantize(p) => Some(p.bucket_range(b)),
            Self::Llquantize(p) => Some(p.bucket_range(b)),
            _ => None,
        }
    }
}

/// Adds `x` to the 128-bit sum of squares in words 2 (low) and 3 (high), wrapping.
#[inline]
fn add128(v: &mut [u64], x: u128) {
    let s = (v[2] as u128 | ((v[3] as u128) << 64)).wrapping_add(x);
    v[2] = s as u64;
    v[3] = (s >> 64) as u64;
}

fn avg(count: u64, sum: u64, normal: i128) -> i128 {
    let count = count as i64 as i128;
    if count == 0 {
        0
    } else {
        idiv128(idiv128(sum as i64 as i128, normal), count)
    }
}

/// DTrace's standard deviation: `sqrt(avg(x^2) - avg(x)^2)` with integer (truncating)
/// averages, the sum of squares divided by `normal^2`.
fn stddev(v: &[u64], normal: u128) -> u64 {
    let count = v[0] as u128;
    if count == 0 {
        return 0;
    }
    let sumsq = v[2] as u128 | ((v[3] as u128) << 64);
    let avg_sq = udiv128(udiv128(udiv128(sumsq, normal), normal), count);
    let mean = idiv128(
        idiv128(v[1] as i64 as i128, normal as i128),
        v[0] as i64 as i128,
    )
    .unsigned_abs();
    let sq_mean = mean.saturating_mul(mean);
    isqrt128(avg_sq.saturating_sub(sq_mean))
}

/// `n / d` for 128-bit integers without the compiler's `__udivti3`, which the kernel does
/// not provide; `d == 0` gives `u128::MAX`. Only final values divide in 128 bits.
pub fn udiv128(n: u128, d: u128) -> u128 {
    if d == 0 {
        return u128::MAX;
    }
    if n >> 64 == 0 && d >> 64 == 0 {
        return (n as u64 / d as u64) as u128;
    }
    if d > n {
        return 0;
    }
    // Restoring shift-subtract division, one quotient bit per step.
    let shift = d.leading_zeros() - n.leading_zeros();
    let mut d = d << shift;
    let mut r = n;
    let mut q: u128 = 0;
    for _ in 0..=shift {
        q <<= 1;
        if r >= d {
            r -= d;
            q |= 1;
        }
        d >>= 1;
    }
    q
}

/// `n / d` truncated toward zero, like C and Rust, through [`udiv128`].
pub fn idiv128(n: i128, d: i128) -> i128 {
    let q = udiv128(n.unsigned_abs(), d.unsigned_abs()) as i128;
    if (n < 0) != (d < 0) {
        q.wrapping_neg()
    } else {
        q
    }
}

/// Floor of the square root of a 128-bit integer.
pub fn isqrt128(n: u128) -> u64 {
    if n == 0 {
        return 0;
    }
    // Bit by bit: the result has at most 64 bits.
    let mut res: u128 = 0;
    let mut bit: u128 = 1 << ((127 - n.leading_zeros()) & !1);
    let mut n = n;
    while bit != 0 {
        if n >= res + bit {
            n -= res + bit;
            res = (res >> 1) + bit;
        } else {
            res >>= 1;
        }
        bit >>= 2;
    }
    res as u64
}
