// SPDX-License-Identifier: GPL-2.0

//! A loaded image: the bytes LOAD copied in, and what parsing and verifying made of them.
//!
//! The parsed [`Image`] and its verified clauses borrow the bytes; owning the three together
//! lets a session keep them without a lifetime parameter. Each verified program is also
//! decoded here, once ([`DInsn`]), so that a firing runs it without decoding a word.

use crate::action::DInsn;
use crate::diag::Refusal;
use crate::load;
use crate::program::{Image, VerifiedClause};
use crate::sys::gfp_load;
use kernel::alloc::AllocError;
use kernel::prelude::*;

/// An image and its verified clauses, with the buffers they borrow.
///
/// # Invariants
///
/// `image` and `clauses` borrow the heap memory of `_buf` as if for `'static`, and `clauses`
/// that of `_dec` (their decoded code). That memory is never written after `load` (both are
/// private and never borrowed mutably), never moves (moving a vector moves its pointer, not
/// its elements) and is freed only when `_buf` and `_dec` drop, after `image` and `clauses`
/// (declared before them); the accessors shorten the lifetime to a borrow of `self`, so no
/// `'static` reference leaves this type.
pub(crate) struct OwnedImage {
    image: Image<'static>,
    clauses: KVec<VerifiedClause<'static>>,
    /// Scratch bytes the largest clause needs for one firing.
    scratch: usize,
    /// Whether a clause calls `speculation()`.
    speculates: bool,
    _dec: KVVec<DInsn>,
    _buf: VVec<u8>,
}

impl OwnedImage {
    /// Parses `buf` and runs every check LOAD makes of an image ([`load::check_load`]:
    /// each clause verified, the scratch and dynamic-variable limits), keeping the verified
    /// clauses.
    pub(crate) fn load<E: From<AllocError> + From<Refusal>>(buf: VVec<u8>) -> Result<Self, E> {
        // SAFETY: the memory is never written, moved or freed while the slice or anything
        // derived from it lives: it moves into `Self` with `buf` below, or is dropped on an
        // error return, when the errors (plain data) no longer borrow it (type invariant).
        let bytes: &'static [u8] = unsafe { core::slice::from_raw_parts(buf.as_ptr(), buf.len()) };
        let image = Image::parse(bytes).map_err(|e| Refusal::image(&e))?;
        let mut clauses = KVec::with_capacity(image.clause_count(), gfp_load())?;
        let plan = load::check_load(&image, |c| {
            clauses.push(c, gfp_load())?;
            Ok::<(), E>(())
        })?;
        let total = clauses
            .iter()
            .map(|c| c.pred.map_or(0, |p| p.code().len()) + c.act.code().len())
            .sum();
        let mut dec = KVVec::from_elem(DInsn::NOP, total, gfp_load())?;
        let (ptr, len) = (dec.as_mut_ptr(), dec.len());
        // SAFETY: as for `bytes`: the elements are written only through this slice, here,
        // then only read through what `decode_into` returns; they never move and are freed
        // only with `dec`, which moves into `Self` below (type invariant). `dec` itself is
        // not used again but to be dropped.
        let mut rest: &'static mut [DInsn] = unsafe { core::slice::from_raw_parts_mut(ptr, len) };
        for c in clauses.iter_mut() {
            for v in Iterator::chain(c.pred.iter_mut(), core::iter::once(&mut c.act)) {
                // PANIC: `total` is the sum of these lengths, so `rest` holds this one.
                let (here, tail) = core::mem::take(&mut rest).split_at_mut(v.code().len());
                rest = tail;
                // Verified code always decodes; if it did not, the raw code runs.
                *v = v.decode_into(&image, here).unwrap_or(*v);
            }
        }
        // INVARIANT: `image` and `clauses` borrow `buf` and `dec`, which move in with them.
        Ok(Self {
            image,
            clauses,
            scratch: plan.scratch,
            speculates: plan.speculates,
            _dec: dec,
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
