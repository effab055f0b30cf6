// SPDX-License-Identifier: GPL-2.0

//! quantize(), lquantize() and llquantize(): bucket arithmetic and the parameter checks.
//!
//! [`check_params`] is the one validator of aggregating-function parameters: the compiler
//! calls it on the source, [`crate::program::Image::parse`] on every aggregation of an image,
//! and the kernel builds its functions with it at LOAD.

use super::*;

/// Checks the parameter words of `kind` (as the image carries them: lquantize
/// `[low, high, step, 0]`, llquantize `[factor, low, high, steps]`, zero for the others) and
/// returns the function they describe.
pub fn check_params(kind: AggKind, p: &[i64; 4]) -> Result<AggFunc, ParamError> {
    let plain = |f: AggFunc| {
        if *p == [0; 4] {
            Ok(f)
        } else {
            Err(ParamError::UnexpectedParameter)
        }
    };
    match kind {
        AggKind::Count => plain(AggFunc::Count),
        AggKind::Sum => plain(AggFunc::Sum),
        AggKind::Min => plain(AggFunc::Min),
        AggKind::Max => plain(AggFunc::Max),
        AggKind::Avg => plain(AggFunc::Avg),
        AggKind::Stddev => plain(AggFunc::Stddev),
        AggKind::Quantize => plain(AggFunc::Quantize),
        AggKind::Lquantize if p[3] != 0 => Err(ParamError::UnexpectedParameter),
        AggKind::Lquantize => AggFunc::lquantize(p[0], p[1], p[2]),
        AggKind::Llquantize => AggFunc::llquantize(p[0], p[1], p[2], p[3]),
    }
}

/// The `quantize()` bucket of `v`, in O(1): bucket 63 holds 0; bucket `64 + k` holds
/// `[2^k, 2^(k+1))`; bucket `62 - k` holds `(-2^(k+1), -2^k]`; the ends are open-ended, as
/// in DTrace (values at or below `-2^62` all land in bucket 0).
#[inline]
#[allow(clippy::comparison_chain)] // the kernel's clippy (1.85); a `match` on `cmp` reads worse
pub fn quantize_bucket(v: i64) -> usize {
    if v > 0 {
        // floor(log2 v) is at most 62 for a positive i64.
        64 + (63 - (v as u64).leading_zeros()) as usize
    } else if v == 0 {
        QUANTIZE_ZERO
    } else {
        let k = 63 - v.unsigned_abs().leading_zeros();
        62 - (k.min(62) as usize)
    }
}

/// The value DTrace labels `quantize()` bucket `b` with (its bound nearest to zero).
///
/// `b` must be below [`QUANTIZE_BUCKETS`]; larger indices are clamped.
pub const fn quantize_bucket_value(b: usize) -> i64 {
    let b = if b >= QUANTIZE_BUCKETS {
        QUANTIZE_BUCKETS - 1
    } else {
        b
    };
    if b < QUANTIZE_ZERO {
        -(1i64 << (QUANTIZE_ZERO - 1 - b))
    } else if b == QUANTIZE_ZERO {
        0
    } else {
        1i64 << (b - QUANTIZE_ZERO - 1)
    }
}

/// Validated `lquantize(value, low, high, step)` parameters.
///
/// # Invariants
///
/// `step >= 1`, `1 <= levels <= LQUANTIZE_MAX_LEVELS`, `base + levels * step` fits in `i64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LquantizeParams {
    pub(super) base: i32,
    pub(super) step: u16,
    pub(super) levels: u16,
}

impl LquantizeParams {
    /// Checks `lquantize()` parameters the way DTrace's compiler does: 32-bit bounds,
    /// `high > low`, a 16-bit positive step and between 1 and 65535 levels of `step` each
    /// (the top level ends at `low + levels * step`, which may be below `high`).
    pub fn new(low: i64, high: i64, step: i64) -> Result<Self, ParamError> {
        if low < i32::MIN as i64 || low > i32::MAX as i64 {
            return Err(ParamError::LqLowRange);
        }
        if high < i32::MIN as i64 || high > i32::MAX as i64 {
            return Err(ParamError::LqHighRange);
        }
        if high <= low {
            return Err(ParamError::LqHighNotAboveLow);
        }
        if step <= 0 {
            return Err(ParamError::LqStepNotPositive);
        }
        if step > u16::MAX as i64 {
            return Err(ParamError::LqStepRange);
        }
        let levels = (high - low) / step;
        if levels == 0 {
            return Err(ParamError::LqStepTooLarge);
        }
        if levels > LQUANTIZE_MAX_LEVELS as i64 {
            return Err(ParamError::LqStepTooSmall);
        }
        // INVARIANT: checked above; low + levels * step <= high fits in i32.
        Ok(Self {
            base: low as i32,
            step: step as u16,
            levels: levels as u16,
        })
    }

    /// The lower bound (first level).
    pub fn base(&self) -> i64 {
        self.base as i64
    }

    /// The width of a level.
    pub fn step(&self) -> i64 {
        self.step as i64
    }

    /// The number of levels between the underflow and overflow buckets.
    pub fn levels(&self) -> usize {
        self.levels as usize
    }

    /// Number of buckets: underflow, levels, overflow.
    pub fn buckets(&self) -> usize {
        self.levels as usize + 2
    }

    /// The bucket of `v`: 0 below `base`, `1 + (v - base) / step` within, `levels + 1` at or
    /// above `base + levels * step`. Unlike DTrace, `v` is not truncated to 32 bits first.
    #[inline]
    pub fn bucket(&self, v: i64) -> usize {
        let base = self.base as i64;
        if v < base {
            return 0;
        }
        // v >= base >= i32::MIN, so the difference fits in u64.
        let level = (v as i128 - base as i128) as u64 / self.step as u64;
        if level < self.levels as u64 {
            level as usize + 1
        } else {
            self.levels as usize + 1
        }
    }

    /// The inclusive value range of bucket `b` (`None` = unbounded on that side).
    pub fn bucket_range(&self, b: usize) -> (Option<i64>, Option<i64>) {
        let base = self.base as i64;
        let step = self.step as i64;
        let levels = self.levels as usize;
        if b == 0 {
            (None, Some(base - 1))
        } else if b <= levels {
            let lo = base + (b as i64 - 1) * step;
            (Some(lo), Some(lo + step - 1))
        } else {
            (Some(base + levels as i64 * step), None)
        }
    }
}

/// Validated `llquantize(value, factor, low, high, steps)` parameters.
///
/// The buckets are Oracle DTrace's, symmetric around zero: the negative overflow
/// (`<= -factor^(high + 1)`), the negative buckets (mirrors of the positive ones, largest
/// magnitude first), the zero bucket (`abs(value) < factor^low`), the positive buckets (`steps`
/// linear buckets per order of magnitude from `factor^low`, fewer where an order has fewer
/// integers), the positive overflow (`>= factor^(high + 1)`).
///
/// # Invariants
///
/// `factor >= 2`, `low < high`, `steps >= 1`; `factor % steps == 0` if `steps < factor`, else
/// `steps % factor == 0` and `steps` divides a power of `factor`; `factor^(high + 2)` fits in
/// `u64`, `buckets <= MAX_VALUE_WORDS`. So every bucket width `factor^(order + 1) / steps`
/// (or 1) is an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LlquantizeParams {
    pub(super) factor: u16,
    pub(super) low: u16,
    pub(super) high: u16,
    pub(super) steps: u16,
    /// Positive buckets between the zero bucket and the overflow.
    inner: u32,
}

impl LlquantizeParams {
    /// Checks `llquantize()` parameters the way DTrace's compiler does.
    pub fn new(factor: i64, low: i64, high: i64, steps: i64) -> Result<Self, ParamError> {
        let r = |v: i64, n: u8| {
            if (0..=u16::MAX as i64).contains(&v) {
                Ok(v as u64)
            } else {
                Err(ParamError::LlqRange(n))
            }
        };
        let (f, lo, hi, st) = (r(factor, 1)?, r(low, 2)?, r(high, 3)?, r(steps, 4)?);
        if f < 2 {
            return Err(ParamError::LlqFactorTooSmall);
        }
        if lo >= hi {
            return Err(ParamError::LlqMagnitudeRange);
        }
        if st == 0 {
            return Err(ParamError::LlqStepsZero);
        }
        // DTrace's rule: fewer steps than the factor must divide it; more must be a
        // multiple of it, and (for integer bucket widths) divide a power of it.
        if st < f {
            if f % st != 0 {
                return Err(ParamError::LlqStepsDontDivideFactor);
            }
        } else {
            let mut v = f;
            while v < st {
                v *= f;
            }
            if st % f != 0 || v % st != 0 {
                return Err(ParamError::LlqStepsUneven);
            }
        }
        let mut order: u64 = 1;
        for _ in 0..hi + 2 {
            order = order.checked_mul(f).ok_or(ParamError::LlqMagnitudeTooBig)?;
        }
        let mut p = Self {
            factor: f as u16,
            low: lo as u16,
            high: hi as u16,
            steps: st as u16,
            inner: 0,
        };
        // The steps of every order of magnitude, twice, the zero bucket and two overflows.
        let mut n: u64 = 0;
        let mut this = pow(f, lo + 1);
        for _ in lo..=hi {
            let nb = this.min(st);
            n += nb - nb / f;
            if 2 * n + 3 > MAX_VALUE_WORDS as u64 {
                return Err(ParamError::TooManyBuckets);
            }
            this = this.saturating_mul(f);
        }
        // INVARIANT: all checks above passed.
        p.inner = n as u32;
        Ok(p)
    }

    /// The factor.
    pub fn factor(&self) -> u64 {
        self.factor as u64
    }

    /// The low order of magnitude.
    pub fn low(&self) -> u32 {
        self.low as u32
    }

    /// The high order of magnitude.
    pub fn high(&self) -> u32 {
        self.high as u32
    }

    /// Linear steps per order of magnitude.
    pub fn steps(&self) -> u64 {
        self.steps as u64
    }

    /// Number of buckets: both overflows, the negative and positive ones, the zero bucket.
    pub fn buckets(&self) -> usize {
        2 * self.inner as usize + 3
    }

    /// The zero bucket: `abs(value) < factor^low`.
    pub fn zero_bucket(&self) -> usize {
        self.inner as usize + 1
    }

    /// The bucket of `v` (see the type's documentation).
    #[inline]
    pub fn bucket(&self, v: i64) -> usize {
        let z = self.zero_bucket();
        // |i64::MIN| does not fit: it is in the overflow like i64::MAX.
        let m = self.magnitude(v.unsigned_abs().min(i64::MAX as u64) as i64);
        if v < 0 {
            z - m
        } else {
            z + m
        }
    }

    /// The positive bucket of `v >= 0` counted from the zero bucket: 0 below `factor^low`,
    /// then the linear buckets of each order of magnitude, `inner + 1` at or above
    /// `factor^(high + 1)`.
    #[inline]
    fn magnitude(&self, v: i64) -> usize {
        let f = self.factor as i64;
        // factor^(high + 2) fits in u64, so factor^(high + 1) fits in i64.
        let mut this = pow(self.factor as u64, self.low as u64) as i64;
        if v < this {
            return 0;
        }
        let mut last = this;
        this *= f;
        let mut base = 1usize;
        for order in self.low..=self.high {
            let nb = this.min(self.steps as i64);
            if v < this {
                // Buckets are aligned to multiples of their width; the first one of an
                // order starts at factor^order (with fewer steps than the factor, below
                // the first multiple).
                let w = this / nb;
                return base + (v / w - last / w) as usize;
            }
            base += (nb - nb / f) as usize;
            if order == self.high {
                break;
            }
            last = this;
            this *= f;
        }
        base
    }

    /// The inclusive value range of bucket `b` (`None` = unbounded on that side).
    pub fn bucket_range(&self, b: usize) -> (Option<i64>, Option<i64>) {
        let z = self.zero_bucket();
        let scale = pow(self.factor as u64, self.low as u64) as i64;
        if b == z {
            return (Some(1 - scale), Some(scale - 1));
        }
        // Positive bucket z + m (m >= 1) starts at label m - 1 and ends before label m.
        let m = b.abs_diff(z);
        let mut it = self.labels().skip(m - 1);
        let lo = it.next();
        let hi = it.next().map(|l| l - 1);
        if b > z {
            (lo, hi)
        } else {
            (hi.map(|h| -h), lo.map(|l| -l))
        }
    }

    /// The lower bounds of the positive buckets after the zero bucket, in order, then
    /// `factor^(high + 1)`: the labels DTrace prints (the negative buckets' are their
    /// negations).
    pub fn labels(&self) -> LlquantizeLabels {
        LlquantizeLabels {
            factor: self.factor as i64,
            steps: self.steps as i64,
            order: self.low as u32,
            high: self.high as u32,
            pow: pow(self.factor as u64, self.low as u64) as i64,
            idx: 0,
            done: false,
        }
    }
}

/// Iterator over the labels of `llquantize()` buckets (see [`LlquantizeParams::labels`]).
#[derive(Clone, Debug)]
pub struct LlquantizeLabels {
    factor: i64,
    steps: i64,
    order: u32,
    high: u32,
    /// factor^order.
    pow: i64,
    /// Index of the next bucket within the order.
    idx: i64,
    done: bool,
}

impl Iterator for LlquantizeLabels {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        // Yields the start of every bucket of every order, then factor^(high + 1).
        if self.order > self.high {
            if self.done {
                return None;
            }
            self.done = true;
            return Some(self.pow);
        }
        // factor^(high + 1) fits in an i64 (type invariant).
        let this = self.pow.saturating_mul(self.factor);
        let nb = this.min(self.steps);
        let w = this / nb;
        let label = if self.idx == 0 {
            self.pow
        } else {
            (self.pow / w + self.idx) * w
        };
        self.idx += 1;
        if self.idx == nb - nb / self.factor {
            self.idx = 0;
            self.order += 1;
            self.pow = this;
        }
        Some(label)
    }
}

const fn pow(b: u64, e: u64) -> u64 {
    let mut r = 1u64;
    let mut i = 0;
    while i < e {
        r = r.saturating_mul(b);
        i += 1;
    }
    r
}
