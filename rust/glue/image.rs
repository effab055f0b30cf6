// SPDX-License-Identifier: GPL-2.0

//! A loaded image: the bytes LOAD copied in, and what parsing and verifying made of them.
//!
//! The parsed [`Image`] and its verified clauses borrow the bytes; owning the three together
//! lets a session keep them without a lifetime parameter.

use crate::diag::Refusal;
use crate::limits;
use crate::program::{Image, VerifiedClause};
use crate::sys::gfp_load;
use kernel::alloc::AllocError;
use kernel::prelude::*;

/// An image and its verified clauses, with the buffer they borrow.
///
/// # Invariants
///
/// `image` and `clauses` borrow the heap memory of `_buf` as if for `'static`. That memory is
/// never written (`_buf` is private and never borrowed mutably), never moves (moving a `VVec`
/// moves its pointer, not its elements) and is freed only when `_buf` drops, after `image` and
/// `clauses` (declared before it); the accessors shorten the lifetime to a borrow of `self`,
/// so no `'static` reference leaves this type.
pub(crate) struct OwnedImage {
    image: Image<'static>,
    clauses: KVec<VerifiedClause<'static>>,
    /// Scratch bytes the largest clause needs for one firing.
    scratch: usize,
    /// Whether a clause calls `speculation()`.
    speculates: bool,
    _buf: VVec<u8>,
}

impl OwnedImage {
    /// Parses `buf` and runs every check LOAD makes of an image ([`limits::check_load`]:
    /// each clause verified, the scratch and dynamic-variable limits), keeping the verified
    /// clauses.
    pub(crate) fn load<E: From<AllocError> + From<Refusal>>(buf: VVec<u8>) -> Result<Self, E> {
        // SAFETY: the memory is never written, moved or freed while the slice or anything
        // derived from it lives: it moves into `Self` with `buf` below, or is dropped on an
        // error return, when the errors (plain data) no longer borrow it (type invariant).
        let bytes: &'static [u8] = unsafe { core::slice::from_raw_parts(buf.as_ptr(), buf.len()) };
        let image = Image::parse(bytes).map_err(|e| Refusal::image(&e))?;
        let mut clauses = KVec::with_capacity(image.clause_count(), gfp_load())?;
        let plan = limits::check_load(&image, |c| {
            clauses.push(c, gfp_load())?;
            Ok::<(), E>(())
        })?;
        // INVARIANT: `image` and `clauses` borrow `buf`, which moves in with them.
        Ok(Self {
            image,
            clauses,
            scratch: plan.scratch,
            speculates: plan.speculates,
            _buf: buf,
        })
    }

    /// The parsed image.
    pub(crate) fn image(&self) -> &Image<'_> {
        &self.image
    }

    /// The verified clauses, by clause index.
    pub(crate) fn clauses(&self) -> &[VerifiedClause<'_>] {
        &self.clauses
    }

    /// Bytes of the image.
    pub(crate) fn len(&self) -> usize {
        self._buf.len()
    }

    /// Scratch bytes one firing may need (locals, records, strings).
    pub(crate) fn scratch(&self) -> usize {
        self.scratch
    }

    /// Whether a clause calls `speculation()`.
    pub(crate) fn speculates(&self) -> bool {
        self.speculates
    }
}
