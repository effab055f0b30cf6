// SPDX-License-Identifier: GPL-2.0

//! Aggregations (seeds 001 and 003): the aggregating functions, the per-CPU aggregation
//! buffer and the snapshot record format.
//!
//! Pure logic: only `core`, no allocation; the memory is the caller's. The same file is
//! compiled into the kernel module and into the host crate. See `Documentation/agg.rst`.
//!
//! - [`AggFunc`]: count, sum, min, max, avg, stddev, quantize, lquantize, llquantize: the
//!   initial value, the update in probe context ([`AggFunc::apply`]), the user-level merge
//!   ([`AggFunc::merge`]) and the final value ([`AggFunc::scalar`], [`AggFunc::bucket_range`]).
//! - [`AggBuffer`]: one CPU's aggregation buffer in a caller-provided region: data sets
//!   `{key, aggregation id, value}` found through a hash key, hash buckets and chains.
//! - [`AggBuffer::serialize`] and [`parse_snapshot`]: the snapshot stream user space reads.

use core::fmt;

/// Number of `quantize()` buckets: 63 negative powers of two, zero, 63 positive ones.
pub const QUANTIZE_BUCKETS: usize = 127;

/// Index of the `quantize()` bucket that holds zero.
pub const QUANTIZE_ZERO: usize = 63;

/// Most elements in a key tuple.
pub const KEY_MAX_ELEMS: usize = 8;

/// Longest string key element, in bytes (execname, probefunc, ...).
pub const KEY_STR_MAX: usize = 128;

/// Most 64-bit words an encoded key takes: the descriptor word plus the elements.
pub const KEY_MAX_WORDS: usize = 1 + KEY_MAX_ELEMS * KEY_STR_MAX / 8;

/// Most value words of one data set (the 24-bit field of a data set header).
pub const MAX_VALUE_WORDS: usize = (1 << 24) - 1;

/// Most `lquantize()` levels (between underflow and overflow buckets), as in DTrace.
pub const LQUANTIZE_MAX_LEVELS: u32 = u16::MAX as u32;

/// Descriptor byte of an integer key element.
const DESC_INT: u8 = 0xff;

// ---------------------------------------------------------------------------------------
// Errors.

/// Why the parameters of an aggregating function are invalid (checked at load time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// The function code is not one of [`AggKind`].
    UnknownFunction(u8),
    /// A function without parameters got a non-zero parameter word.
    UnexpectedParameter,
    /// `lquantize()` lower bound is not a 32-bit quantity.
    LqLowRange,
    /// `lquantize()` upper bound is not a 32-bit quantity.
    LqHighRange,
    /// `lquantize()` upper bound is not greater than the lower bound.
    LqHighNotAboveLow,
    /// `lquantize()` step is zero or negative.
    LqStepNotPositive,
    /// `lquantize()` step is not a 16-bit quantity.
    LqStepRange,
    /// `lquantize()` step is so large that there is not one level.
    LqStepTooLarge,
    /// `lquantize()` step is so small that there are more than [`LQUANTIZE_MAX_LEVELS`].
    LqStepTooSmall,
    /// An `llquantize()` parameter is not an unsigned 16-bit quantity (argument number,
    /// counted after the value as DTrace does: factor is #1).
    LlqRange(u8),
    /// `llquantize()` factor is below two.
    LlqFactorTooSmall,
    /// `llquantize()` high magnitude is not greater than the low magnitude.
    LlqMagnitudeRange,
    /// `llquantize()` steps per magnitude is below the factor.
    LlqStepsBelowFactor,
    /// `llquantize()` factor does not divide the steps, or the steps do not divide a power
    /// of the factor.
    LlqStepsUneven,
    /// `llquantize()` factor raised to the high magnitude plus two overflows 64 bits.
    LlqMagnitudeTooBig,
    /// The function would need more than [`MAX_VALUE_WORDS`] value words.
    TooManyBuckets,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownFunction(c) => write!(f, "unknown aggregating function code {c}"),
            Self::UnexpectedParameter => f.write_str("aggregating function takes no parameters"),
            Self::LqLowRange => f.write_str("lquantize( ) argument #1 must be a 32-bit quantity"),
            Self::LqHighRange => f.write_str("lquantize( ) argument #2 must be a 32-bit quantity"),
            Self::LqHighNotAboveLow => f.write_str(
                "lquantize( ) upper bound (argument #2) must be greater than lower bound (argument #1)",
            ),
            Self::LqStepNotPositive => {
                f.write_str("lquantize( ) step (argument #3) must be a non-zero positive integer")
            }
            Self::LqStepRange => f.write_str("lquantize( ) step (argument #3) must be a 16-bit quantity"),
            Self::LqStepTooLarge => f.write_str(
                "lquantize( ) step (argument #3) too large: must have at least one quantization level",
            ),
            Self::LqStepTooSmall => f.write_str(
                "lquantize( ) step (argument #3) too small: number of quantization levels must be a 16-bit quantity",
            ),
            Self::LlqRange(n) => write!(f, "llquantize( ) argument #{n} must be an unsigned 16-bit quantity"),
            Self::LlqFactorTooSmall => f.write_str("llquantize( ) factor (argument #1) must be two or more"),
            Self::LlqMagnitudeRange => f.write_str(
                "llquantize( ) high magnitude (argument #3) must be greater than low magnitude (argument #2)",
            ),
            Self::LlqStepsBelowFactor => f.write_str(
                "llquantize( ) factor (argument #1) must be less than or equal to the number of linear steps per magnitude (argument #4)",
            ),
            Self::LlqStepsUneven => f.write_str(
                "llquantize( ) factor (argument #1) must evenly divide the number of steps per magnitude (argument #4), and the number of steps per magnitude must evenly divide a power of the factor",
            ),
            Self::LlqMagnitudeTooBig => f.write_str(
                "llquantize( ) factor raised to the power of high magnitude plus 2 overflows 64 bits",
            ),
            Self::TooManyBuckets => f.write_str("aggregation value needs too many buckets"),
        }
    }
}

/// Why a key tuple cannot be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// More than [`KEY_MAX_ELEMS`] elements.
    TooManyElements,
    /// A string element longer than [`KEY_STR_MAX`] bytes (the caller truncates, as DTrace
    /// does at `strsize`).
    StringTooLong,
    /// The output slice is too short for the encoded key.
    NoSpace,
}

/// Why [`AggBuffer::apply`] did not update the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggError {
    /// The key tuple is invalid; nothing changed.
    Key(KeyError),
    /// The buffer is full: one aggregation drop was counted, nothing else changed.
    Full,
    /// A value slice does not have the function's number of words.
    ValueLength,
}

impl From<KeyError> for AggError {
    fn from(e: KeyError) -> Self {
        Self::Key(e)
    }
}

/// Why a region cannot be used as an aggregation buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferError {
    /// Smaller than [`AggBuffer::MIN_BYTES`] or larger than 32 GiB.
    Size,
    /// A byte region that is not 8-byte aligned or not a multiple of 8 bytes long.
    Alignment,
    /// [`AggBuffer::attach`] on a region [`AggBuffer::format`] did not prepare.
    NotFormatted,
}

/// Why [`AggBuffer::serialize`] wrote nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// The output slice cannot hold the next header or record; `needed` bytes would.
    OutputTooSmall {
        /// Bytes the next item needs.
        needed: usize,
    },
}

/// Why a snapshot stream is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The stream ends inside a header or record.
    Truncated,
    /// The header does not start with [`SNAPSHOT_MAGIC`].
    BadMagic,
    /// A snapshot format version this parser does not know.
    BadVersion(u16),
    /// The header length or payload length is inconsistent.
    BadHeader,
    /// A record length is not a multiple of 8 or disagrees with its contents.
    BadRecordLength,
    /// A record's key is not a canonical encoded key.
    BadKey,
    /// Fewer or more records than the header announced.
    RecordCount,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("snapshot truncated"),
            Self::BadMagic => f.write_str("snapshot has a bad magic number"),
            Self::BadVersion(v) => write!(f, "snapshot format version {v} is unknown"),
            Self::BadHeader => f.write_str("snapshot header is inconsistent"),
            Self::BadRecordLength => f.write_str("snapshot record has a bad length"),
            Self::BadKey => f.write_str("snapshot record has a malformed key"),
            Self::RecordCount => f.write_str("snapshot record count disagrees with its header"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// quantize(), lquantize(), llquantize() buckets.

/// The `quantize()` bucket of `v`, in O(1): bucket 63 holds 0; bucket `64 + k` holds
/// `[2^k, 2^(k+1))`; bucket `62 - k` holds `(-2^(k+1), -2^k]`; the ends are open-ended, as
/// in DTrace (values at or below `-2^62` all land in bucket 0).
#[inline]
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
    base: i32,
    step: u16,
    levels: u16,
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
/// # Invariants
///
/// `factor >= 2`, `low < high`, `factor <= steps`, `steps % factor == 0`, `steps` divides a
/// power of `factor`, `factor^(high + 2)` fits in `u64`, `buckets <= MAX_VALUE_WORDS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LlquantizeParams {
    factor: u16,
    low: u16,
    high: u16,
    steps: u16,
    buckets: u32,
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
        if st < f {
            return Err(ParamError::LlqStepsBelowFactor);
        }
        // The smallest power of the factor at or above the steps must be a multiple of them.
        let mut v = f;
        while v < st {
            v *= f;
        }
        if st % f != 0 || v % st != 0 {
            return Err(ParamError::LlqStepsUneven);
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
            buckets: 0,
        };
        // Underflow, the steps of every order of magnitude, overflow.
        let mut n: u64 = 2;
        let mut this = pow(f, lo + 1);
        for _ in lo..=hi {
            let nb = this.min(st);
            n += nb - nb / f;
            if n > MAX_VALUE_WORDS as u64 {
                return Err(ParamError::TooManyBuckets);
            }
            this = this.saturating_mul(f);
        }
        // INVARIANT: all checks above passed.
        p.buckets = n as u32;
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

    /// Number of buckets, underflow and overflow included.
    pub fn buckets(&self) -> usize {
        self.buckets as usize
    }

    /// The bucket of `v`: 0 below `factor^low`, then `steps` linear buckets per order of
    /// magnitude (fewer where an order has fewer integers), the last one at or above
    /// `factor^(high + 1)`.
    #[inline]
    pub fn bucket(&self, v: i64) -> usize {
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
                return base + ((v - last) / (this / nb)) as usize;
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
        // Bucket b >= 1 starts at label b - 1 and ends before label b.
        if b == 0 {
            let first = pow(self.factor as u64, self.low as u64) as i64;
            return (None, Some(first - 1));
        }
        let mut it = self.labels().skip(b - 1);
        let lo = it.next();
        let hi = it.next().map(|l| l - 1);
        (lo, hi)
    }

    /// The lower bounds of buckets 1.., in order: the labels DTrace prints; bucket 0 is
    /// `< factor^low` and the last bucket is `>=` the last label.
    pub fn labels(&self) -> LlquantizeLabels {
        let value = pow(self.factor as u64, self.low as u64) as i64;
        let next = value * self.factor as i64;
        LlquantizeLabels {
            factor: self.factor as i64,
            steps: self.steps as i64,
            order: self.low as u32,
            high: self.high as u32,
            value,
            next,
            first: true,
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
    value: i64,
    next: i64,
    first: bool,
}

impl Iterator for LlquantizeLabels {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        // Yields factor^low, the linear steps of every order and finally factor^(high + 1).
        if self.first {
            self.first = false;
            return Some(self.value);
        }
        if self.order > self.high {
            return None;
        }
        let step = if self.next > self.steps {
            self.next / self.steps
        } else {
            1
        };
        self.value += step;
        if self.value == self.next {
            self.order += 1;
            if self.order <= self.high {
                self.next = self.next.saturating_mul(self.factor);
            }
        }
        Some(self.value)
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

// ---------------------------------------------------------------------------------------
// Aggregating functions.

/// The kind of an aggregating function, with its ABI code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AggKind {
    /// `count()`.
    Count = 1,
    /// `sum(v)`.
    Sum = 2,
    /// `min(v)`.
    Min = 3,
    /// `max(v)`.
    Max = 4,
    /// `avg(v)`.
    Avg = 5,
    /// `stddev(v)`.
    Stddev = 6,
    /// `quantize(v[, incr])`.
    Quantize = 7,
    /// `lquantize(v, low, high[, step[, incr]])`.
    Lquantize = 8,
    /// `llquantize(v, factor, low, high, steps[, incr])`.
    Llquantize = 9,
}

impl AggKind {
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
            1 => plain(Self::Count),
            2 => plain(Self::Sum),
            3 => plain(Self::Min),
            4 => plain(Self::Max),
            5 => plain(Self::Avg),
            6 => plain(Self::Stddev),
            7 => plain(Self::Quantize),
            8 => {
                let base = arg as u32 as i32 as i64;
                let step = (arg >> 32) as u16 as i64;
                let levels = (arg >> 48) as u16 as i64;
                let p = LquantizeParams::new(base, base + levels * step, step)?;
                if p.levels as i64 != levels {
                    return Err(ParamError::LqStepTooLarge);
                }
                Ok(Self::Lquantize(p))
            }
            9 => Self::llquantize(
                (arg & 0xffff) as i64,
                ((arg >> 16) & 0xffff) as i64,
                ((arg >> 32) & 0xffff) as i64,
                (arg >> 48) as i64,
            ),
            c => Err(ParamError::UnknownFunction(c)),
        }
    }

    /// Number of 64-bit words of the value component.
    pub fn value_words(&self) -> usize {
        match self {
            Self::Count | Self::Sum | Self::Min | Self::Max => 1,
            Self::Avg => 2,
            Self::Stddev => 4,
            Self::Quantize => QUANTIZE_BUCKETS,
            Self::Lquantize(p) => p.buckets(),
            Self::Llquantize(p) => p.buckets(),
        }
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
    #[inline]
    pub fn apply(&self, v: &mut [u64], value: i64, incr: i64) -> Result<(), AggError> {
        if v.len() != self.value_words() {
            return Err(AggError::ValueLength);
        }
        let x = value as u64;
        match self {
            Self::Count => v[0] = v[0].wrapping_add(1),
            Self::Sum => v[0] = v[0].wrapping_add(x),
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
            Self::Quantize => {
                let b = quantize_bucket(value);
                v[b] = v[b].wrapping_add(incr as u64);
            }
            Self::Lquantize(p) => {
                let b = p.bucket(value);
                v[b] = v[b].wrapping_add(incr as u64);
            }
            Self::Llquantize(p) => {
                let b = p.bucket(value);
                v[b] = v[b].wrapping_add(incr as u64);
            }
        }
        Ok(())
    }

    /// Merges the value `src` into `dst` (user level, claims 12-14, 19-23): counts, sums,
    /// buckets and sums of squares add; min and max keep the extreme.
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
        if b >= self.value_words() {
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

// ---------------------------------------------------------------------------------------
// Keys.

/// One element of a key tuple: the interpreter's key type (one definition for the
/// interpreter, the dynamic variables and the aggregations). An integer's signedness is a
/// matter of printing (the tool's dictionary); a string has at most [`KEY_STR_MAX`] bytes,
/// without its terminating NUL.
pub use crate::action::Key as KeyElem;

/// The encoded key words the elements produce, one at a time (the descriptor word first,
/// then an integer as one word, a string as its bytes zero-padded to whole words).
#[derive(Clone)]
struct KeyWords<'k, 'a> {
    elems: &'k [KeyElem<'a>],
    desc: Option<u64>,
    elem: usize,
    off: usize,
}

impl<'k, 'a> KeyWords<'k, 'a> {
    /// Checks the elements and returns the words and their number.
    fn new(elems: &'k [KeyElem<'a>]) -> Result<(Self, usize), KeyError> {
        if elems.len() > KEY_MAX_ELEMS {
            return Err(KeyError::TooManyElements);
        }
        let mut desc = 0u64;
        let mut n = 1;
        for (i, e) in elems.iter().enumerate() {
            let d = match e {
                KeyElem::Int(_) => {
                    n += 1;
                    DESC_INT
                }
                KeyElem::Str(s) => {
                    if s.len() > KEY_STR_MAX {
                        return Err(KeyError::StringTooLong);
                    }
                    n += s.len().div_ceil(8);
                    s.len() as u8 + 1
                }
            };
            desc |= (d as u64) << (8 * i);
        }
        Ok((
            Self {
                elems,
                desc: Some(desc),
                elem: 0,
                off: 0,
            },
            n,
        ))
    }
}

impl Iterator for KeyWords<'_, '_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if let Some(d) = self.desc.take() {
            return Some(d);
        }
        loop {
            match self.elems.get(self.elem)? {
                KeyElem::Int(v) => {
                    self.elem += 1;
                    return Some(*v);
                }
                KeyElem::Str(s) => {
                    if self.off >= s.len() {
                        self.elem += 1;
                        self.off = 0;
                        continue;
                    }
                    let end = (self.off + 8).min(s.len());
                    let mut b = [0u8; 8];
                    b[..end - self.off].copy_from_slice(&s[self.off..end]);
                    self.off = end;
                    return Some(u64::from_le_bytes(b));
                }
            }
        }
    }
}

/// Encodes a key tuple into `out`; returns the number of words written.
pub fn encode_key(elems: &[KeyElem<'_>], out: &mut [u64]) -> Result<usize, KeyError> {
    let (words, n) = KeyWords::new(elems)?;
    if out.len() < n {
        return Err(KeyError::NoSpace);
    }
    for (o, w) in out.iter_mut().zip(words) {
        *o = w;
    }
    Ok(n)
}

/// The number of words `elems` encode to.
pub fn key_words_len(elems: &[KeyElem<'_>]) -> Result<usize, KeyError> {
    Ok(KeyWords::new(elems)?.1)
}

const HASH_SEED: u64 = 0x6f78_7472_6163_6521;
const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
fn hash_step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(HASH_MUL).rotate_left(31)
}

#[inline]
fn hash_finish(mut h: u64) -> u32 {
    // The murmur3 finalizer spreads every input bit over the bucket index bits.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h as u32
}

/// The hash key of a data set: a function of the aggregation id and the encoded key words
/// (claims 3, 5: the key is generated from the expression and the aggregation id).
pub fn key_hash(agg_id: u32, key_words: &[u64]) -> u32 {
    let mut h = hash_step(HASH_SEED, agg_id as u64);
    for w in key_words {
        h = hash_step(h, *w);
    }
    hash_finish(h)
}

/// Decodes the elements of an encoded key given as little-endian bytes (a snapshot
/// record's key); yields `None` after the last element.
#[derive(Clone, Copy, Debug)]
pub struct KeyRef<'a> {
    bytes: &'a [u8],
}

impl<'a> KeyRef<'a> {
    /// Checks that `bytes` is a canonical encoded key: elements contiguous in the
    /// descriptor, string lengths within bounds, exact length, zero padding.
    pub fn new(bytes: &'a [u8]) -> Result<Self, ParseError> {
        let desc = u64::from_le_bytes(
            bytes
                .get(..8)
                .ok_or(ParseError::BadKey)?
                .try_into()
                .map_err(|_| ParseError::BadKey)?,
        );
        let mut off = 8usize;
        let mut ended = false;
        for i in 0..KEY_MAX_ELEMS {
            let d = (desc >> (8 * i)) as u8;
            if d == 0 {
                ended = true;
                continue;
            }
            if ended {
                return Err(ParseError::BadKey);
            }
            if d == DESC_INT {
                off += 8;
            } else {
                let len = d as usize - 1;
                if len > KEY_STR_MAX {
                    return Err(ParseError::BadKey);
                }
                let padded = len.div_ceil(8) * 8;
                let s = bytes.get(off..off + padded).ok_or(ParseError::BadKey)?;
                if s[len..].iter().any(|b| *b != 0) {
                    return Err(ParseError::BadKey);
                }
                off += padded;
            }
        }
        if off != bytes.len() {
            return Err(ParseError::BadKey);
        }
        Ok(Self { bytes })
    }

    /// The encoded key bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        let desc = self.desc();
        (0..KEY_MAX_ELEMS)
            .take_while(|i| (desc >> (8 * i)) as u8 != 0)
            .count()
    }

    /// Whether the key has no element (`@x = count()`).
    pub fn is_empty(&self) -> bool {
        self.desc() == 0
    }

    fn desc(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[..8]);
        u64::from_le_bytes(b)
    }

    /// The elements, in order.
    pub fn elems(&self) -> KeyElems<'a> {
        KeyElems {
            desc: self.desc(),
            bytes: self.bytes,
            i: 0,
            off: 8,
        }
    }
}

/// Iterator over the elements of a [`KeyRef`].
#[derive(Clone, Debug)]
pub struct KeyElems<'a> {
    desc: u64,
    bytes: &'a [u8],
    i: usize,
    off: usize,
}

impl<'a> Iterator for KeyElems<'a> {
    type Item = KeyElem<'a>;

    fn next(&mut self) -> Option<KeyElem<'a>> {
        if self.i >= KEY_MAX_ELEMS {
            return None;
        }
        let d = (self.desc >> (8 * self.i)) as u8;
        if d == 0 {
            return None;
        }
        self.i += 1;
        if d == DESC_INT {
            let w = self.bytes.get(self.off..self.off + 8)?;
            self.off += 8;
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            Some(KeyElem::Int(u64::from_le_bytes(b)))
        } else {
            let len = d as usize - 1;
            let s = self.bytes.get(self.off..self.off + len)?;
            self.off += len.div_ceil(8) * 8;
            Some(KeyElem::Str(s))
        }
    }
}

// ---------------------------------------------------------------------------------------
// The per-CPU aggregation buffer.

// Header words of a formatted buffer.
const H_MAGIC: usize = 0;
const H_WORDS: usize = 1;
const H_NBUCKETS: usize = 2;
const H_DATA: usize = 3;
const H_BUMP: usize = 4;
const H_COUNT: usize = 5;
const H_DROPS: usize = 6;
const HEADER_WORDS: usize = 8;
const BUF_MAGIC: u64 = u64::from_le_bytes(*b"OXAGBUF1");

/// Data set header words: chain link and hash key; aggregation id and sizes.
const DS_HEADER_WORDS: usize = 2;

/// One CPU's aggregation buffer over a caller-provided region of 64-bit words.
///
/// Layout (all offsets in words, `0` meaning "none"):
///
/// ```text
/// [0..8)             header: magic, words, nbuckets, data start, bump, count, drops, 0
/// [8..8+nbuckets)    hash buckets: offset of the first data set of each chain
/// [data..bump)       data sets, allocated in order, never freed until reset():
///     word 0         next data set in the chain (bits 0-31) | hash key (bits 32-63)
///     word 1         aggregation id (0-31) | key words (32-39) | value words (40-63)
///     key words      encoded key tuple (see encode_key)
///     value words    the function's value component
/// ```
///
/// Probe context: [`AggBuffer::apply`] takes `&mut self`; the buffer belongs to one CPU and
/// is only updated with interrupts off there, so it needs no lock and no atomic
/// read-modify-write.
///
/// # Invariants
///
/// The header is valid: `HEADER_WORDS + nbuckets <= data <= bump <= words == mem.len()`,
/// `nbuckets` is a power of two, every bucket head and chain link is 0 or the offset of a
/// data set in `[data, bump)`, and data sets tile `[data, bump)` exactly.
pub struct AggBuffer<'a> {
    w: &'a mut [u64],
}

impl<'a> AggBuffer<'a> {
    /// Smallest usable region: header, eight buckets and room for a few data sets.
    pub const MIN_BYTES: usize = 8 * (HEADER_WORDS + 8 + 32);

    /// Formats `mem` as an empty buffer. About 1/8 of it becomes hash buckets (a power of
    /// two), the rest holds data sets.
    pub fn format(mem: &'a mut [u64]) -> Result<Self, BufferError> {
        let words = mem.len();
        if words * 8 < Self::MIN_BYTES || words > u32::MAX as usize {
            return Err(BufferError::Size);
        }
        let want = (words / 8).max(8);
        let nbuckets = 1usize << (usize::BITS - 1 - want.leading_zeros());
        mem[H_MAGIC] = BUF_MAGIC;
        mem[H_WORDS] = words as u64;
        mem[H_NBUCKETS] = nbuckets as u64;
        mem[H_DATA] = (HEADER_WORDS + nbuckets) as u64;
        mem[7] = 0;
        // INVARIANT: reset() makes every bucket empty and bump == data.
        let mut b = Self { w: mem };
        b.reset();
        Ok(b)
    }

    /// [`AggBuffer::format`] over a byte region, which must be 8-byte aligned and a whole
    /// number of words long.
    pub fn format_bytes(mem: &'a mut [u8]) -> Result<Self, BufferError> {
        Self::format(words_of(mem)?)
    }

    /// Uses a region [`AggBuffer::format`] already prepared (O(1) checks).
    pub fn attach(mem: &'a mut [u64]) -> Result<Self, BufferError> {
        let words = mem.len();
        if words < HEADER_WORDS || mem[H_MAGIC] != BUF_MAGIC || mem[H_WORDS] != words as u64 {
            return Err(BufferError::NotFormatted);
        }
        let nb = mem[H_NBUCKETS];
        let data = mem[H_DATA];
        let bump = mem[H_BUMP];
        if !nb.is_power_of_two()
            || data != HEADER_WORDS as u64 + nb
            || bump < data
            || bump > words as u64
        {
            return Err(BufferError::NotFormatted);
        }
        // INVARIANT: format() and apply() maintain the layout; the header checks above
        // reject a region that was never formatted.
        Ok(Self { w: mem })
    }

    /// [`AggBuffer::attach`] over a byte region.
    pub fn attach_bytes(mem: &'a mut [u8]) -> Result<Self, BufferError> {
        Self::attach(words_of(mem)?)
    }

    /// Empties the buffer: no data sets, no drops (after a snapshot copied it out).
    pub fn reset(&mut self) {
        let data = self.w[H_DATA] as usize;
        for b in &mut self.w[HEADER_WORDS..data] {
            *b = 0;
        }
        self.w[H_BUMP] = data as u64;
        self.w[H_COUNT] = 0;
        self.w[H_DROPS] = 0;
    }

    /// Aggregation drops counted since the last reset.
    pub fn drops(&self) -> u64 {
        self.w[H_DROPS]
    }

    /// Number of data sets.
    pub fn len(&self) -> usize {
        self.w[H_COUNT] as usize
    }

    /// Whether there is no data set.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of hash buckets.
    pub fn buckets(&self) -> usize {
        self.w[H_NBUCKETS] as usize
    }

    /// Bytes of the region used by data sets.
    pub fn used_bytes(&self) -> usize {
        (self.w[H_BUMP] - self.w[H_DATA]) as usize * 8
    }

    /// Bytes of the region available for data sets.
    pub fn data_bytes(&self) -> usize {
        (self.w[H_WORDS] - self.w[H_DATA]) as usize * 8
    }

    /// Finds the data set of `(agg_id, key)` and applies `func` with `value` and `incr` to
    /// it; creates it first from the function's initial value if there is none (claims 4,
    /// 5, 7). Probe context: bounded time, no allocation, no lock.
    ///
    /// When the data set does not exist and there is no room for it, counts one
    /// aggregation drop and returns [`AggError::Full`]; nothing else changes.
    #[inline]
    pub fn apply(
        &mut self,
        agg_id: u32,
        func: &AggFunc,
        key: &[KeyElem<'_>],
        value: i64,
        incr: i64,
    ) -> Result<(), AggError> {
        let (words, kw) = KeyWords::new(key)?;
        let mut h = hash_step(HASH_SEED, agg_id as u64);
        for w in words.clone() {
            h = hash_step(h, w);
        }
        let hash = hash_finish(h);
        let nw = func.value_words();
        if nw > MAX_VALUE_WORDS {
            return Err(AggError::ValueLength);
        }
        let w1 = agg_id as u64 | ((kw as u64) << 32) | ((nw as u64) << 40);
        let bucket = HEADER_WORDS + (hash as usize & (self.w[H_NBUCKETS] as usize - 1));

        // Walk the chain of the hash bucket (claim 5): hash key, id and sizes first, then
        // the key words.
        let mut off = self.w[bucket] as usize;
        while off != 0 {
            let w0 = self.w[off];
            if (w0 >> 32) as u32 == hash
                && self.w[off + 1] == w1
                && words
                    .clone()
                    .eq(self.w[off + 2..off + 2 + kw].iter().copied())
            {
                let v = off + DS_HEADER_WORDS + kw;
                return func.apply(&mut self.w[v..v + nw], value, incr);
            }
            off = w0 as u32 as usize;
        }

        // A new data set (claim 5): key, aggregation id, initial value, then the update.
        let need = DS_HEADER_WORDS + kw + nw;
        let bump = self.w[H_BUMP] as usize;
        if need > self.w.len() - bump {
            self.w[H_DROPS] = self.w[H_DROPS].wrapping_add(1);
            return Err(AggError::Full);
        }
        for (d, s) in self.w[bump + 2..bump + 2 + kw].iter_mut().zip(words) {
            *d = s;
        }
        let v = bump + DS_HEADER_WORDS + kw;
        func.init(&mut self.w[v..v + nw]);
        func.apply(&mut self.w[v..v + nw], value, incr)?;
        self.w[bump] = self.w[bucket] | ((hash as u64) << 32);
        self.w[bump + 1] = w1;
        // INVARIANT: the data set is complete before the bucket head and bump publish it.
        self.w[bucket] = bump as u64;
        self.w[H_BUMP] = (bump + need) as u64;
        self.w[H_COUNT] += 1;
        Ok(())
    }

    /// The value component of `(agg_id, key)` if the data set exists (tests, debugging).
    pub fn lookup(&self, agg_id: u32, key: &[KeyElem<'_>]) -> Option<&[u64]> {
        let mut kbuf = [0u64; KEY_MAX_WORDS];
        let kw = encode_key(key, &mut kbuf).ok()?;
        let hash = key_hash(agg_id, &kbuf[..kw]);
        let bucket = HEADER_WORDS + (hash as usize & (self.w[H_NBUCKETS] as usize - 1));
        let mut off = self.w[bucket] as usize;
        while off != 0 {
            let ds = self.dataset_at(off);
            if ds.agg_id == agg_id && ds.key_words == &kbuf[..kw] {
                return Some(ds.values);
            }
            off = self.w[off] as u32 as usize;
        }
        None
    }

    fn dataset_at(&self, off: usize) -> DataSet<'_> {
        let w1 = self.w[off + 1];
        let kw = (w1 >> 32) as u8 as usize;
        let nw = (w1 >> 40) as usize;
        let k = off + DS_HEADER_WORDS;
        DataSet {
            hash: (self.w[off] >> 32) as u32,
            agg_id: w1 as u32,
            key_words: &self.w[k..k + kw],
            values: &self.w[k + kw..k + kw + nw],
        }
    }

    /// The data sets in allocation order.
    pub fn iter(&self) -> DataSets<'_> {
        DataSets {
            buf: self,
            off: self.w[H_DATA] as usize,
        }
    }

    /// Bytes [`AggBuffer::serialize`] writes in all for this buffer.
    pub fn snapshot_len(&self) -> usize {
        SNAPSHOT_HEADER_BYTES + self.iter().map(|d| d.record_len()).sum::<usize>()
    }

    /// Serialises the buffer into `out` as a snapshot stream (header, then one record per
    /// data set), resumably: call again with the same `cursor` until it is done. Records
    /// are never split. Returns the bytes written; [`SnapshotError::OutputTooSmall`] when
    /// not even the next item fits.
    pub fn serialize(
        &self,
        cpu: u32,
        out: &mut [u8],
        cursor: &mut SnapshotCursor,
    ) -> Result<usize, SnapshotError> {
        let mut n = 0;
        if cursor.off == 0 {
            if out.len() < SNAPSHOT_HEADER_BYTES {
                return Err(SnapshotError::OutputTooSmall {
                    needed: SNAPSHOT_HEADER_BYTES,
                });
            }
            let payload = self.snapshot_len() - SNAPSHOT_HEADER_BYTES;
            let h = SnapshotHeader {
                cpu,
                records: self.len() as u32,
                drops: self.drops(),
                payload_len: payload as u64,
            };
            h.write(&mut out[..SNAPSHOT_HEADER_BYTES]);
            n = SNAPSHOT_HEADER_BYTES;
            cursor.off = self.w[H_DATA] as usize;
        }
        let bump = self.w[H_BUMP] as usize;
        while cursor.off < bump {
            let ds = self.dataset_at(cursor.off);
            let len = ds.record_len();
            if out.len() - n < len {
                if n == 0 {
                    return Err(SnapshotError::OutputTooSmall { needed: len });
                }
                return Ok(n);
            }
            ds.write_record(&mut out[n..n + len]);
            n += len;
            cursor.off += DS_HEADER_WORDS + ds.key_words.len() + ds.values.len();
        }
        cursor.done = true;
        Ok(n)
    }
}

fn words_of(mem: &mut [u8]) -> Result<&mut [u64], BufferError> {
    // SAFETY: every bit pattern is a valid u64 and u64 has no drop glue, so viewing
    // initialised bytes as words is sound; align_to_mut only hands out the aligned middle.
    let (pre, words, post) = unsafe { mem.align_to_mut::<u64>() };
    if !pre.is_empty() || !post.is_empty() {
        return Err(BufferError::Alignment);
    }
    Ok(words)
}

/// One data set of an [`AggBuffer`].
#[derive(Clone, Copy, Debug)]
pub struct DataSet<'b> {
    /// The hash key.
    pub hash: u32,
    /// The aggregation identifier component.
    pub agg_id: u32,
    /// The key component, encoded (see [`encode_key`]).
    pub key_words: &'b [u64],
    /// The value component.
    pub values: &'b [u64],
}

impl DataSet<'_> {
    /// Bytes of this data set's snapshot record.
    pub fn record_len(&self) -> usize {
        RECORD_HEADER_BYTES + 8 * (self.key_words.len() + self.values.len())
    }

    fn write_record(&self, out: &mut [u8]) {
        let len = self.record_len();
        out[0..4].copy_from_slice(&(len as u32).to_le_bytes());
        out[4..8].copy_from_slice(&self.agg_id.to_le_bytes());
        out[8..12].copy_from_slice(&(self.key_words.len() as u32).to_le_bytes());
        out[12..16].copy_from_slice(&(self.values.len() as u32).to_le_bytes());
        let words = self.key_words.iter().chain(self.values);
        for (chunk, w) in out[RECORD_HEADER_BYTES..].chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// Iterator over the data sets of an [`AggBuffer`].
pub struct DataSets<'b> {
    buf: &'b AggBuffer<'b>,
    off: usize,
}

impl<'b> Iterator for DataSets<'b> {
    type Item = DataSet<'b>;

    fn next(&mut self) -> Option<DataSet<'b>> {
        if self.off >= self.buf.w[H_BUMP] as usize {
            return None;
        }
        let ds = self.buf.dataset_at(self.off);
        self.off += DS_HEADER_WORDS + ds.key_words.len() + ds.values.len();
        Some(ds)
    }
}

// ---------------------------------------------------------------------------------------
// Snapshot stream.

/// Magic number that opens a snapshot stream ("OXAG" little-endian).
pub const SNAPSHOT_MAGIC: u32 = u32::from_le_bytes(*b"OXAG");

/// Snapshot format version.
pub const SNAPSHOT_VERSION: u16 = 1;

/// Bytes of a snapshot header.
pub const SNAPSHOT_HEADER_BYTES: usize = 32;

/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 16;

/// Resume point of [`AggBuffer::serialize`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotCursor {
    off: usize,
    done: bool,
}

impl SnapshotCursor {
    /// A cursor at the start of the stream.
    pub const fn new() -> Self {
        Self {
            off: 0,
            done: false,
        }
    }

    /// Whether the whole buffer has been written.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

/// The header of one CPU's snapshot stream (all fields little-endian):
///
/// ```text
/// 0  u32 magic "OXAG"     4  u16 version (1)     6  u16 header bytes (32)
/// 8  u32 cpu             12  u32 records        16  u64 drops     24  u64 payload bytes
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The CPU whose buffer this is.
    pub cpu: u32,
    /// Number of records that follow.
    pub records: u32,
    /// Aggregation drops of that buffer since its last reset.
    pub drops: u64,
    /// Bytes of records that follow the header.
    pub payload_len: u64,
}

impl SnapshotHeader {
    /// Writes the header into `out[..SNAPSHOT_HEADER_BYTES]`.
    pub fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&SNAPSHOT_MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&(SNAPSHOT_HEADER_BYTES as u16).to_le_bytes());
        out[8..12].copy_from_slice(&self.cpu.to_le_bytes());
        out[12..16].copy_from_slice(&self.records.to_le_bytes());
        out[16..24].copy_from_slice(&self.drops.to_le_bytes());
        out[24..32].copy_from_slice(&self.payload_len.to_le_bytes());
    }
}

fn le32(b: &[u8], at: usize) -> Result<u32, ParseError> {
    let s = b.get(at..at + 4).ok_or(ParseError::Truncated)?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le64(b: &[u8], at: usize) -> Result<u64, ParseError> {
    let s = b.get(at..at + 8).ok_or(ParseError::Truncated)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}

/// Parses the snapshot stream at the start of `bytes`: its header, an iterator over its
/// records, and the bytes after it (where another CPU's stream may follow). Never panics.
pub fn parse_snapshot(bytes: &[u8]) -> Result<(SnapshotHeader, Records<'_>, &[u8]), ParseError> {
    if le32(bytes, 0)? != SNAPSHOT_MAGIC {
        return Err(ParseError::BadMagic);
    }
    let ver = bytes.get(4..6).ok_or(ParseError::Truncated)?;
    let ver = u16::from_le_bytes([ver[0], ver[1]]);
    if ver != SNAPSHOT_VERSION {
        return Err(ParseError::BadVersion(ver));
    }
    let hl = bytes.get(6..8).ok_or(ParseError::Truncated)?;
    if u16::from_le_bytes([hl[0], hl[1]]) as usize != SNAPSHOT_HEADER_BYTES {
        return Err(ParseError::BadHeader);
    }
    let h = SnapshotHeader {
        cpu: le32(bytes, 8)?,
        records: le32(bytes, 12)?,
        drops: le64(bytes, 16)?,
        payload_len: le64(bytes, 24)?,
    };
    let rest = &bytes[SNAPSHOT_HEADER_BYTES..];
    if h.payload_len & 7 != 0 {
        return Err(ParseError::BadHeader);
    }
    if h.payload_len > rest.len() as u64 {
        return Err(ParseError::Truncated);
    }
    let (payload, after) = rest.split_at(h.payload_len as usize);
    Ok((
        h,
        Records {
            rest: payload,
            remaining: h.records,
        },
        after,
    ))
}

/// Iterator over the records of a snapshot stream. After an error it yields nothing more.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    rest: &'a [u8],
    remaining: u32,
}

/// One record of a snapshot stream: a data set as user space sees it.
///
/// ```text
/// 0  u32 record bytes (16 + 8 * (key words + value words))   4  u32 aggregation id
/// 8  u32 key words    12  u32 value words    16  key words, then value words (u64 LE)
/// ```
#[derive(Clone, Debug)]
pub struct Record<'a> {
    /// The aggregation identifier component.
    pub agg_id: u32,
    /// The key component.
    pub key: KeyRef<'a>,
    values: &'a [u8],
}

impl<'a> Record<'a> {
    /// Number of value words.
    pub fn value_words(&self) -> usize {
        self.values.len() / 8
    }

    /// Value word `i` (0 past the end).
    pub fn value(&self, i: usize) -> u64 {
        le64(self.values, i * 8).unwrap_or(0)
    }

    /// The value words, in order.
    pub fn values(&self) -> impl Iterator<Item = u64> + 'a {
        self.values.chunks_exact(8).map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            if self.rest.is_empty() {
                return None;
            }
            self.rest = &[];
            return Some(Err(ParseError::RecordCount));
        }
        let r = self.parse_one();
        match r {
            Ok(_) => self.remaining -= 1,
            Err(_) => {
                self.remaining = 0;
                self.rest = &[];
            }
        }
        Some(r)
    }
}

impl<'a> Records<'a> {
    fn parse_one(&mut self) -> Result<Record<'a>, ParseError> {
        let b = self.rest;
        if b.is_empty() {
            return Err(ParseError::RecordCount);
        }
        let len = le32(b, 0)? as usize;
        let agg_id = le32(b, 4)?;
        let kw = le32(b, 8)? as usize;
        let nw = le32(b, 12)? as usize;
        if len & 7 != 0
            || kw == 0
            || kw > KEY_MAX_WORDS
            || nw == 0
            || nw > MAX_VALUE_WORDS
            || len != RECORD_HEADER_BYTES + 8 * (kw + nw)
        {
            return Err(ParseError::BadRecordLength);
        }
        let rec = b.get(..len).ok_or(ParseError::Truncated)?;
        let key = KeyRef::new(&rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + 8 * kw])?;
        self.rest = &b[len..];
        Ok(Record {
            agg_id,
            key,
            values: &rec[RECORD_HEADER_BYTES + 8 * kw..],
        })
    }
}

#[cfg(test)]
mod tests {
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
        // llquantize(v, 10, 0, 2, 10): <1, 1..9, 10..90 by 10, 100..900 by 100, >=1000.
        let p = LlquantizeParams::new(10, 0, 2, 10).unwrap();
        assert_eq!(p.buckets(), 1 + 9 + 9 + 9 + 1);
        assert_eq!(p.bucket(0), 0);
        assert_eq!(p.bucket(1), 1);
        assert_eq!(p.bucket(9), 9);
        assert_eq!(p.bucket(10), 10);
        assert_eq!(p.bucket(999), 27);
        assert_eq!(p.bucket(1000), 28);
        assert_eq!(p.labels().count(), 28);
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
}
