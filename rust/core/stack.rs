// SPDX-License-Identifier: GPL-2.0

//! Kernel stacks (`stack()`) as key components: the encoding the interpreter writes into a
//! scratch string and the tool decodes.
//!
//! A stack travels as a string so that it is a key, a tuple member and a record item
//! without a new kind anywhere: each frame is the low 32 bits of its PC (kernel text and
//! modules on x86-64 all lie in the top 2 GiB, whose high 32 bits are ones) in
//! [`FRAME_BYTES`] bytes of 7 bits each with the high bit set, so no byte is NUL and the
//! string ends at the last frame. Frames outside the top 2 GiB are left out.

/// Bytes of one encoded frame.
pub const FRAME_BYTES: usize = 5;

/// Most frames of a `stack(n)`.
pub use crate::limits::MAX_STACKFRAMES as MAX_FRAMES;

// The limit is as many frames as fit a string key.
const _: () = assert!(MAX_FRAMES as usize == crate::limits::KEY_STR_MAX / FRAME_BYTES);

/// DTrace's default depth (option `stackframes`).
pub const DEFAULT_FRAMES: u32 = 20;

const HIGH: u64 = 0xffff_ffff_0000_0000;

/// Encodes `pcs` into `out`, as many whole frames as fit; returns the bytes written.
pub fn encode(pcs: &[u64], out: &mut [u8]) -> usize {
    let mut n = 0;
    for &pc in pcs {
        if pc & HIGH != HIGH || pc & 0x8000_0000 == 0 {
            continue;
        }
        let Some(dst) = out.get_mut(n..n + FRAME_BYTES) else {
            break;
        };
        let lo = pc as u32;
        for (i, b) in dst.iter_mut().enumerate() {
            *b = 0x80 | ((lo >> (7 * i)) & 0x7f) as u8;
        }
        n += FRAME_BYTES;
    }
    n
}

/// The PCs of an encoded stack, outermost last; a trailing partial frame is ignored.
pub fn decode(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks_exact(FRAME_BYTES).map(|c| {
        let lo = c
            .iter()
            .enumerate()
            .fold(0u32, |v, (i, b)| v | (((*b & 0x7f) as u32) << (7 * i)));
        HIGH | lo as u64
    })
}
