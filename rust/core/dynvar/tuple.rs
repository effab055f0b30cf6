// SPDX-License-Identifier: GPL-2.0

//! Tuples: how a variable's keys are encoded in a chunk, hashed and compared.

use super::*;

const KIND_INT: u64 = 1;
const KIND_STR: u64 = 2;

// A tuple that names a dynamic variable is a slice of the interpreter's keys (one
// definition for the interpreter, the aggregations and this engine). Thread-local `self->x`
// is the tuple `(thread id, TLS_TAG | variable id)` (see [`thread_tuple`]); an associative
// array element `a[k1, k2]` is `(ARRAY_TAG | variable id, k1, k2)`. A string key holds its
// bytes up to (not including) the terminating NUL, bounded by `strsize`.

/// Words a key occupies in a chunk: a descriptor, then the payload.
pub fn key_words(key: &Key<'_>) -> usize {
    1 + payload_words(key)
}

#[inline(always)]
fn payload_words(key: &Key<'_>) -> usize {
    match key {
        Key::Int(_) => 1,
        Key::Str(b) => b.len().div_ceil(8),
    }
}

#[inline(always)]
fn key_desc(key: &Key<'_>) -> u64 {
    match key {
        Key::Int(_) => KIND_INT,
        Key::Str(b) => KIND_STR | ((b.len() as u64) << 8),
    }
}

/// Payload word `i` of a key: the integer, or eight string bytes packed little-endian (zero
/// padded). Built in a register, not a byte buffer: it is inlined into the frames of probe
/// context's chain walk.
#[inline(always)]
fn key_payload(key: &Key<'_>, i: usize) -> u64 {
    match key {
        Key::Int(v) => *v,
        Key::Str(b) => {
            let start = i.saturating_mul(8);
            let mut w = 0u64;
            for j in 0..8 {
                if let Some(&c) = b.get(start.saturating_add(j)) {
                    w |= u64::from(c) << (8 * j);
                }
            }
            w
        }
    }
}

/// The tuple of thread-local variable `var` of thread `tid`.
pub fn thread_tuple(tid: u64, var: u32) -> [Key<'static>; 2] {
    [Key::Int(tid), Key::Int(tls_id(var))]
}

/// The first key of every element of associative array `var`.
pub fn array_key(var: u32) -> Key<'static> {
    Key::Int(array_id(var))
}

/// The variable-id key of thread-local variable `var`.
#[inline(always)]
fn tls_id(var: u32) -> u64 {
    TLS_TAG | u64::from(var)
}

/// The variable-id key of associative array `var`.
#[inline(always)]
fn array_id(var: u32) -> u64 {
    ARRAY_TAG | u64::from(var)
}

/// Calls `f` with each encoded word of a tuple, in the order they are stored in a chunk,
/// until it returns false; returns whether it never did. A loop, not an iterator: no
/// iterator state in the frames of probe context.
#[inline(always)]
fn for_each_word(keys: &[Key<'_>], mut f: impl FnMut(u64) -> bool) -> bool {
    for key in keys {
        // An integer (every key of a thread-local variable) is two words, without the
        // string's loop.
        if let Key::Int(v) = key {
            if !f(KIND_INT) || !f(*v) {
                return false;
            }
            continue;
        }
        if !f(key_desc(key)) {
            return false;
        }
        for i in 0..payload_words(key) {
            if !f(key_payload(key, i)) {
                return false;
            }
        }
    }
    true
}

/// A tuple as the engine uses it: its encoded words (`for_each_word`), hashed, compared
/// with a live chunk's and written into a new one. A slice of the interpreter's keys is one;
/// [`IntPair`] is the commonest shape held as its words, so that the walk of a chain for it
/// compiles without a test of the tuple's shape or a loop over its keys.
pub trait Tuple {
    /// Keys in the tuple; a valid tuple has 1 to [`MAX_KEYS`].
    fn nkeys(&self) -> usize;
    /// Words the tuple occupies in a chunk.
    fn words(&self) -> usize;
    /// Its hash over its encoded words; never [`HASH_FREE`].
    fn hash(&self) -> u64;
    /// Whether a live chunk holds the tuple: `meta` is its meta word, `body` its words
    /// after the header (compared by the rule of `held_keys`).
    fn held(&self, meta: u64, body: &[Word]) -> bool;
    /// Writes `vw` zeroed value words, then the tuple's encoding, into `body`, the words
    /// after a chunk's header; returns the chunk's meta word (the layout of `fill_body`). The caller
    /// checked that `vw + self.words()` words fit the body.
    fn fill(&self, body: &[Word], vw: usize) -> u64;
}

/// The key words of a live chunk (meta word `meta`, words after the header `body`) if its
/// meta word says it holds `nkeys` keys in `kwords` words: the rule both forms of
/// [`Tuple::held`] compare by.
#[inline(always)]
fn held_keys(meta: u64, body: &[Word], nkeys: usize, kwords: usize) -> Option<&[Word]> {
    if meta & 0xffff != nkeys as u64 || ((meta >> 32) & 0xffff) as usize != kwords {
        return None;
    }
    let vw = ((meta >> 16) & 0xffff) as usize;
    body.get(vw..vw + kwords)
}

/// [`Tuple::fill`] with `write` writing the key words: the layout both forms fill by.
#[inline(always)]
fn fill_body(
    body: &[Word],
    vw: usize,
    nkeys: usize,
    kwords: usize,
    write: impl FnOnce(&[Word]),
) -> u64 {
    // PANIC: `vw + kwords <= body.len()` (the caller of `Tuple::fill` checked it).
    for w in &body[..vw] {
        w.set(0);
    }
    write(&body[vw..vw + kwords]);
    nkeys as u64 | ((vw as u64) << 16) | ((kwords as u64) << 32)
}

// A slice's compare and fill are out of line, whole: their loops' state stays out of
// `Dstate::dynvar`'s frame, which is on the probe's stack under the chunk allocator's.
impl Tuple for [Key<'_>] {
    #[inline(always)]
    fn nkeys(&self) -> usize {
        self.len()
    }

    #[inline(always)]
    fn words(&self) -> usize {
        self.iter().map(key_words).sum()
    }

    #[inline(always)]
    fn hash(&self) -> u64 {
        hash_keys(self)
    }

    #[inline(always)]
    fn held(&self, meta: u64, body: &[Word]) -> bool {
        keys_held(self, meta, body)
    }

    #[inline(always)]
    fn fill(&self, body: &[Word], vw: usize) -> u64 {
        fill_keys(self, body, vw)
    }
}

impl<const N: usize> Tuple for [Key<'_>; N] {
    #[inline(always)]
    fn nkeys(&self) -> usize {
        N
    }

    #[inline(always)]
    fn words(&self) -> usize {
        self[..].words()
    }

    #[inline(always)]
    fn hash(&self) -> u64 {
        self[..].hash()
    }

    #[inline(always)]
    fn held(&self, meta: u64, body: &[Word]) -> bool {
        self[..].held(meta, body)
    }

    #[inline(always)]
    fn fill(&self, body: &[Word], vw: usize) -> u64 {
        self[..].fill(body, vw)
    }
}

/// A tuple of two integers, the commonest there is: every `self->x` ([`IntPair::thread`])
/// and every element `a[k]` of an integer `k`. The same variable as the slice
/// `[Key::Int(a), Key::Int(b)]`: same words, same hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntPair(pub u64, pub u64);

impl IntPair {
    /// The tuple of thread-local variable `var` of thread `tid` ([`thread_tuple`]).
    #[inline(always)]
    pub fn thread(tid: u64, var: u32) -> Self {
        Self(tid, tls_id(var))
    }

    /// The tuple of element `a[k]` of associative array `var` ([`array_key`]).
    #[inline(always)]
    pub fn element(var: u32, k: u64) -> Self {
        Self(array_id(var), k)
    }

    /// `keys` as a pair, if it is one.
    #[inline(always)]
    pub fn of(keys: &[Key<'_>]) -> Option<Self> {
        match keys {
            [Key::Int(a), Key::Int(b)] => Some(Self(*a, *b)),
            _ => None,
        }
    }

    #[cfg(test)]
    fn encoded(self) -> [u64; 4] {
        [KIND_INT, self.0, KIND_INT, self.1]
    }
}

impl Tuple for IntPair {
    #[inline(always)]
    fn nkeys(&self) -> usize {
        2
    }

    #[inline(always)]
    fn words(&self) -> usize {
        4
    }

    // No iterator here nor in `fill`: the kernel's build (with its UB checks) put the
    // words on the stack, into the frame of the walk, which is under the chunk allocator's.
    #[inline(always)]
    fn hash(&self) -> u64 {
        let h = mix(mix(HASH_SEED, KIND_INT), self.0);
        avalanche(mix(mix(h, KIND_INT), self.1))
    }

    #[inline(always)]
    fn held(&self, meta: u64, body: &[Word]) -> bool {
        // The payloads first: they differ between variables, the descriptors rarely do.
        match held_keys(meta, body, 2, 4) {
            Some([w0, w1, w2, w3]) => {
                w1.get() == self.0
                    && w3.get() == self.1
                    && w0.get() == KIND_INT
                    && w2.get() == KIND_INT
            }
            _ => false,
        }
    }

    // Out of line: inlined, the pair's walk kept 32 bytes more of the probe's stack
    // across the chunk allocator's call (`scripts/stackcheck.py`); a fill follows every
    // allocation, which costs more than the call.
    #[inline(never)]
    fn fill(&self, body: &[Word], vw: usize) -> u64 {
        fill_body(body, vw, 2, 4, |keys| {
            if let [w0, w1, w2, w3] = keys {
                w0.set(KIND_INT);
                w1.set(self.0);
                w2.set(KIND_INT);
                w3.set(self.1);
            }
        })
    }
}

/// A tuple's hash before its first word.
const HASH_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// One word into a tuple's hash.
#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(23) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Hash of a slice of keys over its encoded words; never [`HASH_FREE`].
// Out of line, like `keys_held` and `fill_keys`: their loops' state stays out of
// `dynvar`'s frame, which is on the probe's stack under the chunk allocator.
#[inline(never)]
fn hash_keys(keys: &[Key<'_>]) -> u64 {
    let mut h = HASH_SEED;
    for_each_word(keys, |w| {
        h = mix(h, w);
        true
    });
    avalanche(h)
}

/// [`Tuple::held`] of a slice of keys.
#[inline(never)]
fn keys_held(keys: &[Key<'_>], meta: u64, body: &[Word]) -> bool {
    let Some(words) = held_keys(meta, body, keys.len(), keys.words()) else {
        return false;
    };
    let mut n = 0;
    for_each_word(keys, |k| {
        let same = words.get(n).is_some_and(|w| w.get() == k);
        n += 1;
        same
    })
}

/// [`Tuple::fill`] of a slice of keys.
#[inline(never)]
fn fill_keys(keys: &[Key<'_>], body: &[Word], vw: usize) -> u64 {
    fill_body(body, vw, keys.len(), keys.words(), |words| {
        let mut n = 0;
        for_each_word(keys, |k| {
            let Some(w) = words.get(n) else {
                return false;
            };
            w.set(k);
            n += 1;
            true
        });
    })
}

/// The last step of a tuple's hash: the low bits (the bucket) come to depend on every input
/// bit, and the result is never [`HASH_FREE`].
#[inline(always)]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    if h == HASH_FREE {
        1
    } else {
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuple_words_encode_strings_packed() {
        let k = [Key::Int(7), Key::Str(b"abcdefghij")];
        let mut w = [u64::MAX; 6];
        let mut n = 0;
        for_each_word(&k, |x| {
            w[n] = x;
            n += 1;
            n < w.len()
        });
        assert_eq!(w[0], KIND_INT);
        assert_eq!(w[1], 7);
        assert_eq!(w[2], KIND_STR | 10 << 8);
        assert_eq!(w[3], u64::from_le_bytes(*b"abcdefgh"));
        assert_eq!(w[4], u64::from_le_bytes(*b"ij\0\0\0\0\0\0"));
        assert_eq!(w[5], u64::MAX);
        assert_eq!(k.iter().map(key_words).sum::<usize>(), 5);
    }

    #[test]
    fn int_pairs_encode_as_any_tuple() {
        for (a, b) in [(0, 0), (1, u64::MAX), (TLS_TAG | 3, 42), (u64::MAX, 7)] {
            let k = [Key::Int(a), Key::Int(b)];
            let p = IntPair::of(&k).unwrap();
            assert_eq!(p, IntPair(a, b));
            let mut w = Vec::new();
            for_each_word(&k, |x| {
                w.push(x);
                true
            });
            assert_eq!(Vec::from(p.encoded()), w);
            assert_eq!((p.nkeys(), p.words()), (k.nkeys(), k.words()));
            assert_eq!(p.hash(), k.hash());
            // A body of one value word and the key words; both forms fill it alike and
            // each finds the other's.
            let body: Vec<Word> = (0..5).map(|_| Word::new()).collect();
            body[0].set(9);
            let meta = p.fill(&body, 1);
            assert!(k.held(meta, &body) && p.held(meta, &body));
            assert_eq!(k.fill(&body, 1), meta);
            let got: Vec<u64> = body.iter().map(Word::get).collect();
            assert_eq!(got[0], 0);
            assert_eq!(got[1..], w[..]);
            body[2].set(a ^ 1);
            assert!(!k.held(meta, &body) && !p.held(meta, &body));
            body[2].set(a);
            // A meta word of another shape never matches.
            assert!(!k.held(meta + 1, &body) && !p.held(meta + 1, &body));
        }
        let [t, v] = thread_tuple(9, 4);
        assert_eq!(Some(IntPair::thread(9, 4)), IntPair::of(&[t, v]));
        assert_eq!(
            Some(IntPair::element(5, 7)),
            IntPair::of(&[array_key(5), Key::Int(7)])
        );
        assert_eq!(IntPair::of(&[Key::Int(1)]), None);
        assert_eq!(IntPair::of(&[Key::Int(1), Key::Str(b"x")]), None);
        assert_eq!(IntPair::of(&[Key::Int(1), Key::Int(2), Key::Int(3)]), None);
    }

    #[test]
    fn hash_is_never_free_and_separates_kinds() {
        assert_ne!(hash_keys(&[Key::Int(0)]), HASH_FREE);
        assert_ne!(
            hash_keys(&[Key::Int(0)]),
            hash_keys(&[Key::Str(b"\0\0\0\0\0\0\0\0")])
        );
    }
}
