// SPDX-License-Identifier: GPL-2.0

//! Room for a tuple of keys outside the stack.
//!
//! Keys borrow the strings they name (the string table, a scratch slot), so an array of
//! them cannot be a field of state that outlives one firing. A [`KeyBuf`] is untyped room
//! for `N` keys, kept in the per-CPU state built at LOAD: [`KeyBuf::fill`] writes the keys
//! of one operation and lends them for as long as the buffer is borrowed.

use super::Key;
use core::mem::MaybeUninit;

/// Room for up to `N` keys of any lifetime; holds no value between two [`fill`]s.
///
/// [`fill`]: KeyBuf::fill
pub struct KeyBuf<const N: usize>([MaybeUninit<Key<'static>>; N]);

impl<const N: usize> KeyBuf<N> {
    /// An empty buffer.
    pub const fn new() -> Self {
        Self([MaybeUninit::uninit(); N])
    }

    /// Writes key `i` = `f(i)` for `i` in `0..n` and returns those keys; `None` when `n` is
    /// over `N`. An error from `f` stops the fill and is returned.
    pub fn fill<'k, 'b: 'k, E>(
        &'k mut self,
        n: usize,
        mut f: impl FnMut(usize) -> Result<Key<'b>, E>,
    ) -> Option<Result<&'k [Key<'b>], E>> {
        if n > N {
            return None;
        }
        // Lifetimes do not change a type's layout, and `MaybeUninit<T>` has `T`'s.
        let base = self.0.as_mut_ptr().cast::<Key<'b>>();
        for i in 0..n {
            match f(i) {
                // SAFETY: `i < n <= N`, so `base + i` is an element of `self.0`, which
                // `&mut self` lets us write; a `Key` is `Copy`, so overwriting one drops
                // nothing.
                Ok(k) => unsafe { base.add(i).write(k) },
                Err(e) => return Some(Err(e)),
            }
        }
        // SAFETY: the first `n <= N` elements were just written with keys of lifetime
        // `'b`, which outlives `'k`; the slice borrows `self` for `'k`, so nothing writes
        // them while it lives. The buffer never reads them back as `Key<'static>`: its
        // only reader is this slice, and the next `fill` writes before it lends.
        Some(Ok(unsafe { core::slice::from_raw_parts(base, n) }))
    }
}

impl<const N: usize> Default for KeyBuf<N> {
    fn default() -> Self {
        Self::new()
    }
}
