// SPDX-License-Identifier: GPL-2.0

//! Scratch memory: `alloca()`, `copyin()`, `copyinto()`, `bcopy()`, stores through D pointers
//! and `uregs[]`; and `copyout()`/`copyoutstr()`, which write scratch memory or a string to
//! user memory.
//!
//! Scratch memory is carved from the CPU's scratch area after the clause's string slots, by
//! the same bump pointer, and is freed with them when the next clause begins. Pointers to it
//! are real addresses, as in DTrace, so that D's pointer arithmetic, casts and member
//! accesses work on them unchanged. Each allocation is an *object*: an 8-byte header in the
//! scratch (its size and the offset of the clause's previous header) then its bytes, and
//! [`Vm::object`] finds the object an access lies in by following the headers back from the
//! last one. Every access whose address is in the scratch area must lie in one object, a
//! store wherever its address is: so no store reaches kernel memory, a header, a string slot
//! or another object, and no load reads past the object it started in.

use super::*;

/// Bytes of an object's header.
const MEM_HDR: usize = 8;

/// The NULs `copyout()` writes after a string's bytes, this many at a time.
static NULS: [u8; 64] = [0; 64];

impl Vm<'_> {
    /// The address of the scratch area's first byte.
    fn scratch_base(&self) -> u64 {
        self.scratch.as_ptr() as u64
    }

    /// Whether `addr` is in the scratch area.
    pub(super) fn scratch_addr(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.scratch_base()) < self.scratch.len() as u64
    }

    /// The scratch offset of `[addr, addr + len)` when it lies in one object the clause
    /// allocated (`len` of 0 is taken as 1): the only place an access to the scratch area
    /// may go.
    pub(super) fn object(&self, addr: u64, len: u64) -> Option<usize> {
        let (off, end) = self.object_at(addr)?;
        (len.max(1) <= (end - off) as u64).then_some(off)
    }

    /// The object `addr` is in: its scratch offset and the end of the object.
    fn object_at(&self, addr: u64) -> Option<(usize, usize)> {
        let off = addr.checked_sub(self.scratch_base())?;
        let mut h = self.st.last_mem;
        // Each header's link is below it (`alloca`), so the walk ends, after at most as
        // many steps as the clause made allocations.
        while h != 0 {
            let at = h - 1;
            let hdr = u64::from_le_bytes(self.scratch.get(at..at + MEM_HDR)?.try_into().ok()?);
            let start = (at + MEM_HDR) as u64;
            let end = start + hdr as u32 as u64;
            if off >= start && off < end {
                return Some((off as usize, end as usize));
            }
            let prev = (hdr >> 32) as usize;
            if prev >= h {
                return None;
            }
            h = prev;
        }
        None
    }

    /// Reads `out.len()` bytes at `addr`: from the scratch area itself when it is there (in
    /// one object, else false), else with the environment's non-faulting kernel read.
    pub(super) fn read_mem<E: Env + ?Sized>(
        &mut self,
        env: &mut E,
        addr: u64,
        out: &mut [u8],
    ) -> bool {
        if !self.scratch_addr(addr) {
            return env.read_kernel(addr, out);
        }
        match self.object(addr, out.len() as u64) {
            Some(off) => {
                // PANIC: `object` checked that `off + out.len()` is within the scratch.
                out.copy_from_slice(&self.scratch[off..off + out.len()]);
                true
            }
            None => false,
        }
    }

    /// A string read from scratch memory at `addr` (`stringof()`, a char array member of a
    /// copied-in struct) into the new slot at `off`, at most `max` bytes and not past the
    /// object `addr` is in; `None` when `addr` is not in the scratch area, `BadAddr` when it
    /// is in no object there.
    pub(super) fn scratch_str(
        &mut self,
        addr: u64,
        off: usize,
        max: usize,
    ) -> Option<Result<u64, FaultKind>> {
        if !self.scratch_addr(addr) {
            return None;
        }
        let Some((src, end)) = self.object_at(addr) else {
            return Some(Err(FaultKind::BadAddr(addr)));
        };
        let avail = (end - src).min(max);
        // PANIC: `object_at` found `src + avail <= end <= scratch.len()` (the header).
        let len = self.scratch[src..src + avail]
            .iter()
            .position(|&c| c == 0)
            .unwrap_or(avail);
        // PANIC: the slot at `off` has `strsize + 1 > max >= len` bytes (`alloc_slot`).
        self.scratch.copy_within(src..src + len, off);
        self.scratch[off + len] = 0;
        Some(Ok(str_ref(STR_SPACE_SCRATCH, off as u32)))
    }

    /// `alloca(size)`: `size` zeroed bytes of scratch memory, 8-byte aligned.
    pub(super) fn alloca<D: Dict + ?Sized>(
        &mut self,
        size: u64,
        dict: &D,
    ) -> Result<u64, FaultKind> {
        let limit = dict.scratchsize().min(crate::limits::MAX_SCRATCHSIZE) as usize;
        if size > limit as u64 {
            return Err(FaultKind::ScratchExhausted);
        }
        let size = size as usize;
        let at = self.scratch_base().wrapping_add(self.st.next_slot as u64);
        let pad = (at.wrapping_neg() & 7) as usize;
        let hdr = self.st.next_slot + pad;
        let off = hdr + MEM_HDR;
        // The verifier reserved `scratchsize` and each allocation's padding and header: the
        // second test only keeps the slice in bounds whatever the tables say.
        if self.st.mem_used + size > limit || off + size > self.scratch.len() {
            return Err(FaultKind::ScratchExhausted);
        }
        // The header: the size, and the link to the clause's previous header (below it).
        let link = ((self.st.last_mem as u64) << 32) | size as u64;
        // PANIC: `hdr + MEM_HDR + size <= scratch.len()` (checked above).
        self.scratch[hdr..off].copy_from_slice(&link.to_le_bytes());
        self.scratch[off..off + size].fill(0);
        self.st.last_mem = hdr + 1;
        self.st.next_slot = off + size;
        self.st.mem_used += size;
        Ok(self.scratch_base() + off as u64)
    }

    /// `copyin(addr, size)`: `size` bytes of the current task's user memory at `addr` in new
    /// scratch memory; returns its address.
    #[inline(never)]
    pub(super) fn copyin<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        addr: u64,
        size: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        let p = self.alloca(size, dict)?;
        self.copyinto(addr, size, p, env)?;
        Ok(p)
    }

    /// `copyinto(addr, size, dest)`: `size` bytes of user memory at `addr` into the scratch
    /// memory at `dest`.
    #[inline(never)]
    pub(super) fn copyinto<E: Env + ?Sized>(
        &mut self,
        addr: u64,
        size: u64,
        dest: u64,
        env: &mut E,
    ) -> Result<(), FaultKind> {
        let off = self.object(dest, size).ok_or(FaultKind::BadAddr(dest))?;
        // PANIC: `object` checked that `off + size` is within the scratch.
        let out = &mut self.scratch[off..off + size as usize];
        if !env.read_user(addr, out) {
            return Err(FaultKind::BadAddr(addr));
        }
        Ok(())
    }

    /// `bcopy(src, dest, size)`: `size` readable bytes at `src` into the scratch memory at
    /// `dest`; a string reference as `src` is a string store ([`Vm::store_str`]).
    #[inline(never)]
    pub(super) fn bcopy<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        src: u64,
        dest: u64,
        size: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<(), FaultKind> {
        let off = self.object(dest, size).ok_or(FaultKind::BadAddr(dest))?;
        let n = size as usize;
        if src >> 48 == STR_TAG {
            return self.store_str(src, off, n, dict.strtab());
        }
        if self.scratch_addr(src) {
            let from = self.object(src, size).ok_or(FaultKind::BadAddr(src))?;
            // PANIC: both ranges are within the scratch (checked above).
            self.scratch.copy_within(from..from + n, off);
            return Ok(());
        }
        // PANIC: `object` checked that `off + n` is within the scratch.
        if !env.read_kernel(src, &mut self.scratch[off..off + n]) {
            return Err(FaultKind::BadAddr(src));
        }
        Ok(())
    }

    /// A string stored into the `n` bytes at scratch offset `off` (a `char[n]` or `string`
    /// member, `p->name = execname`): at most `n - 1` of its bytes, truncated as DTrace
    /// truncates, then NULs up to `n`. A string reference is no address (its tag makes it
    /// non-canonical), so `bcopy` tells the two apart.
    fn store_str(&mut self, r: u64, off: usize, n: usize, strtab: &[u8]) -> Result<(), FaultKind> {
        let ss = self.st.strsize as usize;
        let len = resolve_str(strtab, self.scratch, ss, r)
            .ok_or(FaultKind::BadString)?
            .len()
            .min(n.saturating_sub(1));
        // The string's first byte: `resolve_str` accepted the reference, so its offset is
        // within the table or the scratch and `len` bytes follow it there.
        let from = str_offset(r);
        // PANIC: `object` checked that `off + n` is within the scratch and `len < n`;
        // `from + len` is within the source (above).
        if str_space(r) == STR_SPACE_TABLE {
            self.scratch[off..off + len].copy_from_slice(&strtab[from..from + len]);
        } else {
            self.scratch.copy_within(from..from + len, off);
        }
        self.scratch[off + len..off + n].fill(0);
        Ok(())
    }

    /// `*(uN *)(base + simm) = v` of `size` bytes, into scratch memory only.
    #[inline(never)]
    pub(super) fn store(
        &mut self,
        base: u64,
        imm: u32,
        v: u64,
        size: usize,
    ) -> Result<(), FaultKind> {
        let addr = base.wrapping_add(imm as i32 as i64 as u64);
        let off = self
            .object(addr, size as u64)
            .ok_or(FaultKind::BadAddr(addr))?;
        // PANIC: `object` checked `off + size`; `size` is 1, 2, 4 or 8.
        self.scratch[off..off + size].copy_from_slice(&v.to_le_bytes()[..size]);
        Ok(())
    }

    /// `copyout(src, addr, size)` and `copyoutstr(src, addr, size)` (`ins`: `r1`, `r2` and
    /// the register `imm`, taken here so that `slow` passes no argument on the stack):
    /// bytes written into the current task's user memory at `addr` (destructive). `copyout`
    /// writes `size` bytes of the scratch object at `src`, or of the string `src` as DTrace
    /// keeps it (in `strsize + 1` bytes: its bytes, then NULs; a larger `size` is an
    /// illegal operation); `copyoutstr` the string `src` and its NUL, at most `size` bytes
    /// (cut there, without the NUL).
    #[inline(never)]
    pub(super) fn copyout<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        ins: DInsn,
        nregs: usize,
        dict: &D,
        env: &mut E,
    ) -> Result<(), FaultKind> {
        let (_, src, addr) = self.operands(ins);
        let size = self.imm_reg(ins.imm, nregs);
        let str = ins.op == Op::Copyoutstr;
        let ss = self.st.strsize as usize;
        let (bytes, nuls) = if str || src >> 48 == STR_TAG {
            let s =
                resolve_str(dict.strtab(), self.scratch, ss, src).ok_or(FaultKind::BadString)?;
            let room = if str {
                (s.len() as u64 + 1).min(size)
            } else if size <= ss as u64 + 1 {
                size
            } else {
                return Err(FaultKind::IllegalOp);
            };
            // PANIC: `room - n` NULs follow the `n <= s.len()` bytes.
            let n = s.len().min(room as usize);
            (&s[..n], room as usize - n)
        } else {
            let off = self.object(src, size).ok_or(FaultKind::BadAddr(src))?;
            // PANIC: `object` checked that `off + size` is within the scratch.
            (&self.scratch[off..off + size as usize], 0)
        };
        if !env.write_user(addr, bytes) {
            return Err(FaultKind::BadAddr(addr));
        }
        // At most `strsize + 1` NULs (the room above): a bounded loop.
        let mut at = addr.wrapping_add(bytes.len() as u64);
        let mut left = nuls;
        while left > 0 {
            let k = left.min(NULS.len());
            // PANIC: `k <= NULS.len()`.
            // DTrace names the destination, wherever in it the write failed.
            if !env.write_user(at, &NULS[..k]) {
                return Err(FaultKind::BadAddr(addr));
            }
            at = at.wrapping_add(k as u64);
            left -= k;
        }
        Ok(())
    }

    /// `uregs[idx]`: 0 for a kernel thread, "illegal operation" for an unknown register.
    #[inline(never)]
    pub(super) fn uregs<E: Env + ?Sized>(
        &mut self,
        idx: u64,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        if idx >= UREG_COUNT {
            return Err(FaultKind::IllegalOp);
        }
        Ok(env.user_reg(idx).unwrap_or(0))
    }
}
