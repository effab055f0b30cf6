// SPDX-License-Identifier: GPL-2.0

//! Stacks (`stack()`, `ustack()`) as key components: a short reference in the value, the
//! frames once in a definition record.
//!
//! A stack travels as a string so that it is a key, a tuple member and a record item
//! without a new kind anywhere, but the string holds no frames: it is a reference, the
//! stack's style byte and its [`id`] (`ustack::encode_sym` with `Style::Kstack` or
//! `Style::Ustack`, about a dozen bytes whatever the depth). The frames go once to the
//! consumer in a definition record of the principal buffer ([`crate::buffer::KIND_STACK`],
//! [`write_def`]) written by the CPU that took the stack before any record or aggregation
//! update that names it; the tool keeps the definitions it has read and looks references
//! up when it prints. So a stack is as deep as `stackframes` asks, up to [`MAX_FRAMES`],
//! without growing the aggregation key, the scratch string or the probe's stack, and a
//! stack seen a million times costs its frames once. As DTrace's and bpftrace's stack
//! tables, this is how deep stacks stay cheap.
//!
//! The id is a 64-bit hash of the stack's kind, process and frames: the same stack has
//! the same id on every CPU, so keys merge across CPUs as the frames themselves would.
//! Two different stacks with one id are a 2^-64 chance; the tool warns when it sees one.

/// Most frames of a `stack(n)` and `ustack(n)`.
pub use crate::limits::MAX_STACKFRAMES as MAX_FRAMES;

/// DTrace's default depth (option `stackframes`).
pub const DEFAULT_FRAMES: u32 = 20;

/// Words of a definition before its frames: the id and the process id.
pub const DEF_HEADER_WORDS: usize = 2;

/// Most bytes of a definition record's payload.
pub const DEF_MAX_BYTES: usize = 8 * (DEF_HEADER_WORDS + MAX_FRAMES as usize);

/// [`crate::buffer::Header::id`] of a kernel stack's definition.
pub const DEF_KERNEL: u32 = 1;
/// [`crate::buffer::Header::id`] of a user stack's definition.
pub const DEF_USER: u32 = 2;

const HIGH: u64 = 0xffff_ffff_0000_0000;

/// Whether `pc` can be a kernel text address: x86-64 kernel text and modules all lie in
/// the top 2 GiB. Other values (a stale word of a guess unwinder) are left out of stacks.
pub fn is_kernel_pc(pc: u64) -> bool {
    pc & HIGH == HIGH && pc & 0x8000_0000 != 0
}

/// Moves the kernel PCs of `pcs` to its front, in order, and returns their number.
pub fn keep_kernel_pcs(pcs: &mut [u64]) -> usize {
    let mut n = 0;
    for i in 0..pcs.len() {
        // PANIC: `n <= i < pcs.len()`.
        if is_kernel_pc(pcs[i]) {
            pcs[n] = pcs[i];
            n += 1;
        }
    }
    n
}

/// The id of a stack: kernel (`user` false) or user stack of process `pid` with frames
/// `pcs`, innermost first. Never 0 (the empty stack has no id).
pub fn id(user: bool, pid: u64, pcs: &[u64]) -> u64 {
    // FNV-1a over the words, then a final avalanche (splitmix64's) so that nearby
    // stacks do not get nearby ids.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |v: u64| {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    mix(if user { DEF_USER } else { DEF_KERNEL } as u64);
    mix(pid);
    for &pc in pcs {
        mix(pc);
    }
    let mut z = h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    if z == 0 {
        1
    } else {
        z
    }
}

/// Writes the payload of the definition of stack `id` (process `pid`, frames `pcs`) into
/// `out`; returns its length, 0 when `out` is too small.
pub fn write_def(id: u64, pid: u64, pcs: &[u64], out: &mut [u8]) -> usize {
    let len = 8 * (DEF_HEADER_WORDS + pcs.len());
    let Some(out) = out.get_mut(..len) else {
        return 0;
    };
    let words = [id, pid].into_iter().chain(pcs.iter().copied());
    for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    len
}

/// A stack definition read back from a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Def<'a> {
    /// A user stack (else a kernel stack).
    pub user: bool,
    /// Its id.
    pub id: u64,
    /// The process of a user stack (0 for a kernel stack).
    pub pid: u64,
    frames: &'a [u8],
}

impl<'a> Def<'a> {
    /// Reads the definition of a [`crate::buffer::KIND_STACK`] record with header id
    /// `kind` and payload `data`; `None` when it is not one.
    pub fn parse(kind: u32, data: &'a [u8]) -> Option<Self> {
        let user = match kind {
            DEF_KERNEL => false,
            DEF_USER => true,
            _ => return None,
        };
        if data.len() % 8 != 0 || data.len() < 8 * DEF_HEADER_WORDS || data.len() > DEF_MAX_BYTES {
            return None;
        }
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&data[8 * i..8 * i + 8]);
            u64::from_le_bytes(w)
        };
        Some(Self {
            user,
            id: word(0),
            pid: word(1),
            frames: &data[8 * DEF_HEADER_WORDS..],
        })
    }

    /// The frames, innermost first.
    pub fn pcs(&self) -> impl Iterator<Item = u64> + 'a {
        self.frames.chunks_exact(8).map(|c| {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            u64::from_le_bytes(w)
        })
    }

    /// Whether the id is the one its kind, process and frames give (not a corrupt record).
    pub fn checks(&self) -> bool {
        let mut pcs = [0u64; MAX_FRAMES as usize];
        let mut n = 0;
        for (d, pc) in pcs.iter_mut().zip(self.pcs()) {
            *d = pc;
            n += 1;
        }
        // PANIC: `n <= MAX_FRAMES`, the array's length.
        id(self.user, self.pid, &pcs[..n]) == self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PCS: [u64; 3] = [
        0xffff_ffff_8123_4519,
        0xffff_ffff_8100_0060,
        0xffff_ffff_a000_0010,
    ];

    #[test]
    fn ids_tell_stacks_apart() {
        let a = id(false, 0, &PCS);
        assert_ne!(a, 0);
        assert_eq!(a, id(false, 0, &PCS));
        assert_ne!(a, id(false, 0, &PCS[..2]));
        assert_ne!(a, id(true, 0, &PCS));
        assert_ne!(id(true, 1, &PCS), id(true, 2, &PCS));
        assert_ne!(id(false, 0, &[]), 0);
    }

    #[test]
    fn definitions_round_trip() {
        let deep: [u64; MAX_FRAMES as usize] =
            core::array::from_fn(|i| 0xffff_ffff_8100_0000 + 16 * i as u64);
        let mut b = [0u8; DEF_MAX_BYTES];
        let i = id(false, 0, &deep);
        let n = write_def(i, 0, &deep, &mut b);
        assert_eq!(n, DEF_MAX_BYTES);
        let d = Def::parse(DEF_KERNEL, &b[..n]).unwrap();
        assert_eq!((d.user, d.id, d.pid), (false, i, 0));
        assert!(d.pcs().eq(deep.iter().copied()));
        assert!(d.checks());
        let u = id(true, 42, &PCS);
        let n = write_def(u, 42, &PCS, &mut b);
        let d = Def::parse(DEF_USER, &b[..n]).unwrap();
        assert_eq!((d.user, d.pid), (true, 42));
        assert!(d.checks());
        // Wrong kind, short, ragged, or an id that is not its frames'.
        assert_eq!(Def::parse(3, &b[..n]), None);
        assert_eq!(Def::parse(DEF_USER, &b[..8]), None);
        assert_eq!(Def::parse(DEF_USER, &b[..n - 1]), None);
        assert!(!Def::parse(DEF_KERNEL, &b[..n]).unwrap().checks());
        assert_eq!(write_def(u, 42, &PCS, &mut b[..16]), 0);
    }

    #[test]
    fn only_kernel_text_is_a_kernel_pc() {
        assert!(PCS.iter().all(|&p| is_kernel_pc(p)));
        assert!(!is_kernel_pc(0x7fff_0000_1000));
        assert!(!is_kernel_pc(0xffff_ffff_0000_1000));
        let mut pcs = [0x7fff_0000_1000, PCS[0], 0xffff_ffff_0000_1000, PCS[1]];
        assert_eq!(keep_kernel_pcs(&mut pcs), 2);
        assert_eq!(pcs[..2], PCS[..2]);
    }
}
