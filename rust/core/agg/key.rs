// SPDX-License-Identifier: GPL-2.0

//! Keys: the encoding of a key tuple into words, its hash, and reading it back.

use super::*;

/// One element of a key tuple, handed to the aggregation and dynamic-variable engines: one
/// definition for them and the interpreter (which names it `action::Key`). An integer's
/// signedness is a matter of printing (the tool's dictionary); a string has at most
/// [`KEY_STR_MAX`] bytes, without its terminating NUL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyElem<'a> {
    /// An integer component.
    Int(u64),
    /// A string component (without its NUL).
    Str(&'a [u8]),
}

/// The encoded key words the elements produce, one at a time (the descriptor word first,
/// then an integer as one word, a string as its bytes zero-padded to whole words).
#[derive(Clone)]
pub(super) struct KeyWords<'k, 'a> {
    elems: &'k [KeyElem<'a>],
    desc: Option<u64>,
    elem: usize,
    off: usize,
}

impl<'k, 'a> KeyWords<'k, 'a> {
    /// Checks the elements and returns the words and their number.
    pub(super) fn new(elems: &'k [KeyElem<'a>]) -> Result<(Self, usize), KeyError> {
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

/// The encoded words of a key whose elements are all integers (`@[pid]`, `@`, the common
/// case), built in place: the descriptor word, then one word per element.
///
/// # Invariants
///
/// `n <= KEY_MAX_ELEMS`; `w[0]` is the descriptor of `n` integers and `w[1..=n]` their
/// values, which is what [`encode_key`] writes for them.
#[derive(Clone, Copy, Debug)]
pub struct IntKey {
    w: [u64; 1 + KEY_MAX_ELEMS],
    n: usize,
}

impl IntKey {
    /// The empty key (`@`).
    pub const fn new() -> Self {
        // INVARIANT: no element, descriptor 0.
        Self {
            w: [0; 1 + KEY_MAX_ELEMS],
            n: 0,
        }
    }

    /// Makes this the empty key again, without rewriting words it no longer exposes.
    #[inline]
    pub fn clear(&mut self) {
        // INVARIANT: no element, descriptor 0; `push` writes each word it exposes.
        self.w[0] = 0;
        self.n = 0;
    }

    /// Appends integer `v`; `None` when the key has [`KEY_MAX_ELEMS`] elements already.
    #[inline]
    pub fn push(&mut self, v: u64) -> Option<()> {
        if self.n >= KEY_MAX_ELEMS {
            return None;
        }
        // INVARIANT: one more element, its descriptor byte and its word.
        self.w[0] |= u64::from(DESC_INT) << (8 * self.n);
        self.n += 1;
        // PANIC: `n <= KEY_MAX_ELEMS`, below the array's `1 + KEY_MAX_ELEMS`.
        self.w[self.n] = v;
        Some(())
    }

    /// The encoded words.
    #[inline]
    pub fn words(&self) -> &[u64] {
        // PANIC: `n <= KEY_MAX_ELEMS` (type invariant).
        &self.w[..1 + self.n]
    }
}

impl Default for IntKey {
    fn default() -> Self {
        Self::new()
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

pub(super) const HASH_SEED: u64 = 0x6f78_7472_6163_6521;
const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
pub(super) fn hash_step(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(HASH_MUL).rotate_left(31)
}

#[inline]
pub(super) fn hash_finish(mut h: u64) -> u32 {
    // The murmur3 finalizer spreads every input bit over the bucket index bits.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h as u32
}

/// The hash key of a data set: a function of the aggregation id and the encoded key words,
/// so that equal keys of different aggregations land on different chains.
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
        // All integers (pid, cpu, arg2, ...), the common keys: `n` descriptor bytes of
        // DESC_INT then zeros, and `n` words after the descriptor.
        if desc != 0 {
            let n = (71 - desc.leading_zeros()) as usize / 8;
            let ints = (u64::MAX >> (64 - 8 * n)) / 0xff * u64::from(DESC_INT);
            if desc == ints && bytes.len() == 8 + 8 * n {
                return Ok(Self { bytes });
            }
        }
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
