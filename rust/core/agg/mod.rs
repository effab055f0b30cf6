// SPDX-License-Identifier: GPL-2.0

//! Aggregations: the aggregating functions, the per-CPU aggregation buffer and the
//! snapshot record format.
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

mod buffer;
mod func;
mod key;
mod params;
mod snapshot;

pub use buffer::*;
pub use func::*;
pub use key::*;
pub use params::*;
pub use snapshot::*;

/// Number of `quantize()` buckets: 63 negative powers of two, zero, 63 positive ones.
pub const QUANTIZE_BUCKETS: usize = 127;

/// Index of the `quantize()` bucket that holds zero.
pub const QUANTIZE_ZERO: usize = 63;

/// Most elements in a key tuple.
pub const KEY_MAX_ELEMS: usize = 8;

pub use crate::limits::KEY_STR_MAX;

/// Most 64-bit words an encoded key takes: the descriptor word plus the elements.
pub const KEY_MAX_WORDS: usize = 1 + KEY_MAX_ELEMS * KEY_STR_MAX / 8;

/// Most value words of one data set (the 24-bit field of a data set header).
pub const MAX_VALUE_WORDS: usize = (1 << 24) - 1;

/// Most `lquantize()` levels (between underflow and overflow buckets), as in DTrace.
pub const LQUANTIZE_MAX_LEVELS: u32 = u16::MAX as u32;

/// Descriptor byte of an integer key element.
const DESC_INT: u8 = 0xff;

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
    /// `llquantize()` steps per magnitude is zero.
    LlqStepsZero,
    /// `llquantize()` steps per magnitude is below the factor and does not divide it.
    LlqStepsDontDivideFactor,
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
            Self::LlqStepsZero => f.write_str(
                "llquantize( ) number of steps per magnitude (argument #4) must be at least one",
            ),
            Self::LlqStepsDontDivideFactor => f.write_str(
                "llquantize( ) factor (argument #1) must be evenly divisible by the number of steps per magnitude (argument #4) when the steps are fewer than the factor",
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

impl ParamError {
    /// The argument the error is about, counted after the value as DTrace does (1 is the
    /// first parameter); `None` when it is about the function as a whole.
    pub fn argument(&self) -> Option<u8> {
        Some(match self {
            Self::LqLowRange => 1,
            Self::LqHighRange | Self::LqHighNotAboveLow => 2,
            Self::LqStepNotPositive
            | Self::LqStepRange
            | Self::LqStepTooLarge
            | Self::LqStepTooSmall => 3,
            Self::LlqRange(n) => *n,
            Self::LlqFactorTooSmall => 1,
            Self::LlqMagnitudeRange | Self::LlqMagnitudeTooBig => 3,
            Self::LlqStepsZero | Self::LlqStepsDontDivideFactor | Self::LlqStepsUneven => 4,
            Self::UnknownFunction(_) | Self::UnexpectedParameter | Self::TooManyBuckets => {
                return None
            }
        })
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
    /// An [`AggWriter`]'s region has a header or a link no formatted buffer has (it was
    /// not formatted, or something else wrote it); nothing was written.
    Corrupt,
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

#[cfg(test)]
mod tests;
