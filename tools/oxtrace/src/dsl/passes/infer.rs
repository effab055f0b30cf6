//! Type inference of D variables. A variable not declared takes the type of its first
//! assignment, which may come in a clause after one that reads it (a return clause reads
//! what its entry clause, later in the text, sets). Expression types come from the code
//! generator, which records in `Tables::vty` the type each first assignment fixes and
//! notes in `Tables::assumed` a read of a variable whose type is not known yet; this pass
//! runs it in rounds, each starting from the types the last one learned.

use super::super::error::GResult;
use super::Tables;

/// Most rounds: each one adds types, and a program needs a few at most.
const MAX_ROUNDS: u32 = 4;

/// Run `gen` on a copy of `base` with the variable types learned so far, until a round
/// learns no type that an earlier read assumed (or fails without learning one): the
/// tables and result of the last round.
pub(crate) fn learn_types<T>(
    base: &Tables,
    mut gen: impl FnMut(&mut Tables) -> GResult<T>,
) -> GResult<(Tables, T)> {
    let mut seeds = base.vty.clone();
    let mut shapes = base.shapes.clone();
    let mut round = 0;
    loop {
        round += 1;
        let mut t = base.clone();
        t.vty = seeds.clone();
        // What the last round saw a variable used as: `self->x[k]` of a variable whose
        // learned type is a pointer stays an associative array.
        t.shapes = shapes.clone();
        let r = gen(&mut t);
        let learned = t.vty != seeds;
        match r {
            Ok(out) if !(learned && t.assumed) || round >= MAX_ROUNDS => return Ok((t, out)),
            Err(e) if !learned || round >= MAX_ROUNDS => return Err(e),
            _ => {
                seeds = t.vty.clone();
                shapes = t.shapes.clone();
            }
        }
    }
}
