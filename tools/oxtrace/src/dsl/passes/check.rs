//! The last check: the kernel's own LOAD check, run on the image before it is sent so
//! that a refusal points at the source (the clause, aggregation or option it is about)
//! and nothing reaches the device that LOAD would refuse.

use super::super::error::{CompileError, GResult, Span};
use super::super::Compiled;
use super::options::OptionAt;
use super::Tables;
use crate::options::size_text;
use oxtrace_core::abi;
use oxtrace_core::action as act;
use oxtrace_core::diag::{ImageMsg, ReasonMsg, Refusal};
use oxtrace_core::limits;
use oxtrace_core::load;
use oxtrace_core::program::{self as prog, OptKey};

/// Run LOAD's checks on `image`, compiled from `src` into `c` and `t`.
pub(crate) fn load_check(
    image: &[u8],
    c: &Compiled,
    t: &Tables,
    src: &str,
    input: &str,
) -> GResult<()> {
    let refused = match prog::Image::parse(image) {
        Ok(img) => load::check_load(&img, |_| Ok::<(), Refusal>(())).err(),
        Err(e) => Some(Refusal::image(&e)),
    };
    match refused {
        Some(r) => Err(refusal_error(c, t, src, input, &r)),
        None => Ok(()),
    }
}

/// The compile error for a refusal of the kernel's LOAD check, at the clause, aggregation or
/// option it is about.
fn refusal_error(c: &Compiled, t: &Tables, src: &str, input: &str, r: &Refusal) -> CompileError {
    let at = |span: Span, msg: String| CompileError::at(src, input, span, msg);
    let option_at = |key: OptKey, msg: String| match c.option_at.iter().find(|(k, _)| *k == key) {
        Some((_, OptionAt::X(text))) => CompileError::at(text, "-x", Span::new(0, text.len()), msg),
        Some((_, OptionAt::Pragma(span))) => at(*span, msg),
        None => at(Span::new(0, 0), msg),
    };
    match r.kind {
        abi::LOADERR_VERIFY => {
            let span = c
                .clause_spans
                .get(r.index as usize)
                .map_or(Span::new(0, 0), |s| s.0);
            let reason = ReasonMsg {
                code: r.code,
                arg: r.arg,
            };
            if r.code == oxtrace_core::diag::reason_code(&act::Reason::ScratchTooLarge).0 {
                let msg = format!(
                    "clause needs more than {} bytes of scratch space (lower strsize or use fewer strings)",
                    limits::MAX_SCRATCH
                );
                if c.option_at.iter().any(|(k, _)| *k == OptKey::Strsize) {
                    return option_at(OptKey::Strsize, msg);
                }
                return at(span, msg);
            }
            at(
                span,
                format!("internal error: the verifier rejects this clause: {reason}"),
            )
        }
        _ => {
            let words = ImageMsg {
                code: r.code,
                arg: r.arg,
            }
            .to_string();
            if r.code == Refusal::dynvarsize(0).code || r.code == Refusal::dynvar_chunk(0).code {
                let have = size_text(c.options.dynvarsize);
                return option_at(
                    OptKey::Dynvarsize,
                    format!("{words} (dynvarsize is {have})"),
                );
            }
            if r.code & 0xffff == ImageMsg::AGG_PARAMS {
                if let Some(a) = t.aggs.get(r.arg as usize) {
                    return at(a.first, format!("@{}: {words}", a.name));
                }
            }
            at(
                Span::new(0, 0),
                format!("internal error: invalid image: {words}"),
            )
        }
    }
}
