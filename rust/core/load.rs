// SPDX-License-Identifier: GPL-2.0

//! The LOAD-time check: every limit of [`crate::limits`] applied to a parsed image.
//!
//! The kernel runs [`check_load`] on every image it is given; the tool's compiler runs the
//! same function on the image it built, before it opens the device, so that it refuses
//! exactly what LOAD would refuse.

use crate::action::{Dict, Op};
use crate::diag::Refusal;
use crate::dynvar::{self, Layout, LayoutError};
use crate::limits::MAX_SCRATCH;
use crate::program::{Image, VerifiedClause};

/// What a program needs once [`check_load`] has accepted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadPlan {
    /// Scratch bytes a CPU needs: the most any clause needs.
    pub scratch: usize,
    /// Whether a clause calls `speculation()`: only then are speculative buffers allocated.
    pub speculates: bool,
}

/// Everything LOAD checks about a parsed image before it allocates per-CPU state: every
/// clause verifies within [`MAX_SCRATCH`] and the dynamic variables fit `dynvarsize`.
/// ([`Image::parse`] checks option ranges, locals and names with the constants of
/// [`crate::limits`], and aggregation parameters with [`crate::agg::check_params`].) `keep`
/// receives each verified clause in order; its error stops the check.
pub fn check_load<'a, E: From<Refusal>>(
    image: &Image<'a>,
    mut keep: impl FnMut(VerifiedClause<'a>) -> Result<(), E>,
) -> Result<LoadPlan, E> {
    let opts = image.options();
    let mut scratch = 0;
    let mut speculates = false;
    for i in 0..image.clause_count() {
        let c = image
            .verify_clause(i, MAX_SCRATCH)
            .map_err(|e| Refusal::verify(&e))?;
        scratch = scratch.max(c.scratch);
        speculates |= [c.pred.as_ref(), Some(&c.act)]
            .into_iter()
            .flatten()
            .any(|p| p.uses(Op::Speculation));
        keep(c)?;
    }
    // A fill buffer keeps room for END's records: some must be left for the rest.
    if opts.bufpolicy == crate::buffer::POLICY_FILL {
        let need = image.end_reserve();
        if need >= opts.bufsize {
            return Err(Refusal::end_reserve(need).into());
        }
    }
    let nvars = image.var_count();
    let vars = (0..nvars as u32).filter_map(|id| image.var(id));
    if let Some(chunk) = dynvar::program_chunk_bytes(vars, opts.strsize as usize) {
        // The CPU count does not change the verdict: only one chunk must fit.
        match Layout::new(opts.dynvarsize as usize, 1, chunk, nvars as u32) {
            Ok(_) => {}
            Err(LayoutError::ChunkTooLarge) => return Err(Refusal::dynvar_chunk(chunk).into()),
            Err(LayoutError::TooSmall) => return Err(Refusal::dynvarsize(chunk).into()),
            Err(_) => return Err(Refusal::internal().into()),
        }
    }
    Ok(LoadPlan {
        scratch,
        speculates,
    })
}
