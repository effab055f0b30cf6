// SPDX-License-Identifier: GPL-2.0

//! Strings: the scratch slots new strings go in, and the opcodes that make them
//! (subroutines, `strtok`, kernel and user strings), each out of line so that its locals
//! stay out of the interpreter loop's frame.

use super::*;

impl<'s> Vm<'s> {
    /// Allocates a string slot and fills it with `f(strtab, scratch before the slot, out)`,
    /// `out` being the slot's `strsize` bytes; returns the new string's reference, or 0 (a
    /// NULL string) when `f` returns `None`.
    pub(super) fn new_str<F>(&mut self, strtab: &[u8], f: F) -> Result<u64, FaultKind>
    where
        F: FnOnce(&[u8], &[u8], &mut [u8]) -> Result<Option<usize>, FaultKind>,
    {
        let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
        let ss = self.st.strsize as usize;
        // PANIC: `alloc_slot` checked that `off + ss + 1` fits the scratch.
        let (before, slot_area) = self.scratch.split_at_mut(off);
        let slot = &mut slot_area[..ss + 1];
        match f(strtab, before, &mut slot[..ss])? {
            Some(len) => {
                // PANIC: `f` writes into `slot[..ss]`, so `len <= ss`; `min` keeps it so.
                slot[len.min(ss)] = 0;
                Ok(str_ref(STR_SPACE_SCRATCH, off as u32))
            }
            None => {
                slot[0] = 0;
                Ok(0)
            }
        }
    }

    /// Copies what follows byte `end` of string `cur` into the `strtok` slot (in place when
    /// `cur` is that slot) and marks the slot as holding it.
    fn keep_strtok(&mut self, strtab: &[u8], cur: u64, end: usize) -> Result<(), FaultKind> {
        let ss = self.st.strsize as usize;
        let keep = self.st.nlocals as usize * 8 + record_buf_size(self.st.strsize);
        let len = resolve_str(strtab, self.scratch, ss, cur)
            .ok_or(FaultKind::BadString)?
            .len();
        let end = end.min(len);
        if str_space(cur) == STR_SPACE_SCRATCH {
            // The strtok slot itself or a later slot of this clause: `copy_within` allows the
            // overlap of the first.
            let off = str_offset(cur);
            // PANIC: `resolve_str` found `len` bytes at `off`, so `off + len` is in the
            // scratch; `Vm::new` checked that it holds the strtok slot (`keep + ss + 1`).
            self.scratch.copy_within(off + end..off + len, keep);
        } else {
            let rest = resolve_str(strtab, &[], ss, cur).unwrap_or(&[]);
            // PANIC: as above; `rest.len() - end <= ss`.
            let out = &mut self.scratch[keep..keep + ss];
            subr::copy(rest.get(end..).unwrap_or(&[]), out);
        }
        // PANIC: `len - end <= ss`, and the slot has `ss + 1` bytes.
        self.scratch[keep + len - end] = 0;
        self.scratch[keep + ss] = STRTOK_KEPT;
        Ok(())
    }

    /// Runs a subroutine opcode (`Substr` ..= `Progenyof` but `Hton`); returns the value of `rd`.
    // Out of line, like the other rare opcodes' bodies: their locals stay out of `run`'s
    // frame, which is on the stack under every call the interpreter makes.
    #[inline(never)]
    pub(super) fn subr<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        b: u64,
        c: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        use Op::*;
        let ss = self.st.strsize as usize;
        let strtab = dict.strtab();
        // Resolves a string register within `sc`, the scratch before the new slot.
        fn get<'b>(t: &'b [u8], sc: &'b [u8], ss: usize, r: u64) -> Result<&'b [u8], FaultKind> {
            resolve_str(t, sc, ss, r).ok_or(FaultKind::BadString)
        }
        Ok(match op {
            Substr => self.new_str(strtab, |t, sc, out| {
                let s = get(t, sc, ss, a)?;
                Ok(Some(subr::substr(s, b as i64, Some(c as i64), out)))
            })?,
            Strstr => self.new_str(strtab, |t, sc, out| {
                let s = get(t, sc, ss, a)?;
                let sub = get(t, sc, ss, b)?;
                // PANIC: `strstr` returns an offset at most `s.len()`.
                Ok(subr::strstr(s, sub).map(|p| subr::copy(&s[p..], out)))
            })?,
            Strchr | Strrchr => self.new_str(strtab, |t, sc, out| {
                let s = get(t, sc, ss, a)?;
                // Searching for NUL finds the terminator: the empty string at the end.
                if b as u8 == 0 {
                    return Ok(Some(0));
                }
                let at = subr::strchr(s, b as u8, op == Strrchr);
                // PANIC: `strchr` returns a position in `s`.
                Ok(at.map(|p| subr::copy(&s[p..], out)))
            })?,
            Index | Rindex => {
                let s = get(strtab, self.scratch, ss, a)?;
                let sub = get(strtab, self.scratch, ss, b)?;
                if op == Index {
                    subr::index(s, sub, c as i64) as u64
                } else {
                    subr::rindex(s, sub, c as i64) as u64
                }
            }
            Strtok => {
                let cur = if a == 0 { self.strtok_rest() } else { a };
                if cur == 0 {
                    // Like DTrace: no string to go on with gives NULL.
                    return self.new_str(strtab, |_, _, _| Ok(None));
                }
                let mut cut = None;
                let r = self.new_str(strtab, |t, sc, out| {
                    let s = get(t, sc, ss, cur)?;
                    let d = get(t, sc, ss, b)?;
                    Ok(subr::strtok(s, d).map(|(start, end)| {
                        cut = Some(end);
                        // PANIC: `strtok` returns `start <= end <= s.len()`.
                        subr::copy(&s[start..end], out)
                    }))
                })?;
                match cut {
                    Some(end) => self.keep_strtok(strtab, cur, end)?,
                    None => {
                        let flag =
                            self.st.nlocals as usize * 8 + record_buf_size(self.st.strsize) + ss;
                        // PANIC: the strtok slot is within `slots_start()` (see `Vm::new`).
                        self.scratch[flag] = 0;
                    }
                }
                r
            }
            Lltostr => self.new_str(strtab, |_, _, out| {
                subr::lltostr(a as i64, b as i64, out)
                    .map(Some)
                    .ok_or(FaultKind::IllegalOp)
            })?,
            Strtoll => {
                let s = get(strtab, self.scratch, ss, a)?;
                subr::strtoll(s, b as i64).ok_or(FaultKind::IllegalOp)? as u64
            }
            Toupper | Tolower | Basename | Dirname | Cleanpath => {
                self.new_str(strtab, |t, sc, out| {
                    let s = get(t, sc, ss, a)?;
                    Ok(Some(match op {
                        Toupper => subr::change_case(s, true, out),
                        Tolower => subr::change_case(s, false, out),
                        Basename => subr::basename(s, out),
                        Dirname => subr::dirname(s, out),
                        _ => subr::cleanpath(s, out),
                    }))
                })?
            }
            InetNtop => {
                let mut addr = [0u8; 20];
                let (n, link) = match a {
                    subr::AF_INET => (4, false),
                    subr::AF_INET6 | subr::AF_INET6_LOOSE => (16, false),
                    _ if a == subr::LINK_FAMILY | subr::ARPHRD_ETHER => (6, true),
                    _ if a == subr::LINK_FAMILY | subr::ARPHRD_INFINIBAND => (20, true),
                    _ => return Err(FaultKind::IllegalOp),
                };
                // PANIC: `n` is 4, 6, 16 or 20, within `addr`.
                if !env.read_kernel(b, &mut addr[..n]) {
                    return Err(FaultKind::BadAddr(b));
                }
                self.new_str(strtab, |_, _, out| {
                    Ok(Some(match n {
                        _ if link => subr::link_ntoa(&addr[..n], out),
                        4 => subr::inet_ntoa(&[addr[0], addr[1], addr[2], addr[3]], out),
                        _ => {
                            let mut a6 = [0u8; 16];
                            a6.copy_from_slice(&addr[..16]);
                            subr::inet_ntoa6(&a6, a == subr::AF_INET6, out)
                        }
                    }))
                })?
            }
            Rand => {
                self.st.rand_n = self.st.rand_n.wrapping_add(1);
                let seed = env.builtin(Builtin::Timestamp)
                    ^ env.builtin(Builtin::Cpu).rotate_left(48)
                    ^ self.st.rand_n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                subr::rand_from(seed)
            }
            Progenyof => env.progenyof(a) as u64,
            _ => return Err(FaultKind::Invalid),
        })
    }

    /// `Ldbs`, `Kstr`, `Strjoin` and `Uargs`: a new string in a scratch slot; returns its
    /// reference.
    #[inline(never)]
    pub(super) fn strop<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        b: u64,
        imm: u32,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        use Op::*;
        Ok(match op {
            Ldbs => {
                let bi = Builtin::from_u32(imm).ok_or(FaultKind::Invalid)?;
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                // PANIC: `alloc_slot` checked that `off + slot_size` (`ss + 1`) fits the
                // scratch, and `len <= ss` below, so `slot` is `ss + 1` bytes and every
                // index into it is in range.
                let slot = &mut self.scratch[off..off + ss + 1];
                let len = env.builtin_str(bi, &mut slot[..ss]).min(ss);
                // Stop at an embedded NUL like a C string would.
                let len = slot[..len].iter().position(|&c| c == 0).unwrap_or(len);
                slot[len] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            Kstr => {
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                let max = match (imm >> 1) as usize {
                    0 => ss,
                    m => m.min(ss),
                };
                let user = imm & KSTR_USER != 0;
                if !user {
                    if let Some(r) = self.scratch_str(a, off, max) {
                        return r;
                    }
                }
                // PANIC: as in `Ldbs`: `slot` is `ss + 1` bytes and `read_kernel_str`
                // returns at most `ss`.
                let slot = &mut self.scratch[off..off + ss + 1];
                let len =
                    read_kernel_str(env, a, &mut slot[..max], user).map_err(FaultKind::BadAddr)?;
                slot[len] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            Uargs => {
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                let max = match imm as usize {
                    0 => ss,
                    m => m.min(ss),
                };
                let want = (b.saturating_sub(a)).min(max as u64) as usize;
                // PANIC: as in `Ldbs`: `slot` is `ss + 1` bytes and `want <= ss`.
                let slot = &mut self.scratch[off..off + ss + 1];
                let len = read_user_args(env, a, &mut slot[..want]);
                slot[len] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            Strjoin => {
                let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
                let ss = self.st.strsize as usize;
                let strtab = dict.strtab();
                // PANIC: `alloc_slot` checked that `off + ss + 1` fits the scratch; then
                // `l1 <= ss`, `l1 + l2 <= ss` and `l1`, `l2` are within `s1`, `s2`.
                let (before, slot_area) = self.scratch.split_at_mut(off);
                let slot = &mut slot_area[..ss + 1];
                let s1 = resolve_str(strtab, before, ss, a).ok_or(FaultKind::BadString)?;
                let s2 = resolve_str(strtab, before, ss, b).ok_or(FaultKind::BadString)?;
                let l1 = s1.len().min(ss);
                slot[..l1].copy_from_slice(&s1[..l1]);
                let l2 = s2.len().min(ss - l1);
                slot[l1..l1 + l2].copy_from_slice(&s2[..l2]);
                slot[l1 + l2] = 0;
                str_ref(STR_SPACE_SCRATCH, off as u32)
            }
            _ => return Err(FaultKind::Invalid),
        })
    }
}

/// Copy the kernel string at `addr` into `out` chunk by chunk (never reading across a page
/// boundary past the NUL); returns its length (truncated to `out.len()`), or the failing
/// address.
// Out of line: its chunk buffer is not in `Vm::strop`'s frame, under `Env::builtin_str`.
#[inline(never)]
fn read_kernel_str<E: Env + ?Sized>(
    env: &mut E,
    addr: u64,
    out: &mut [u8],
    user: bool,
) -> Result<usize, u64> {
    const PAGE: u64 = 4096;
    let mut done = 0usize;
    while done < out.len() {
        let at = addr.wrapping_add(done as u64);
        let to_page = (PAGE - at % PAGE) as usize;
        let chunk = to_page.min(out.len() - done);
        // PANIC: `done + chunk <= out.len()` by the choice of `chunk`.
        let dst = &mut out[done..done + chunk];
        let ok = if user {
            env.read_user(at, dst)
        } else {
            env.read_kernel(at, dst)
        };
        if !ok {
            return Err(at);
        }
        if let Some(p) = out[done..done + chunk].iter().position(|&c| c == 0) {
            return Ok(done + p);
        }
        done += chunk;
    }
    Ok(out.len())
}

/// Copy the user memory at `addr` into `out` page by page, stopping at the first page that
/// cannot be read, then make its NULs blanks and drop the trailing ones (`Uargs`); returns
/// the length.
fn read_user_args<E: Env + ?Sized>(env: &mut E, addr: u64, out: &mut [u8]) -> usize {
    const PAGE: u64 = 4096;
    let mut done = 0usize;
    while done < out.len() {
        let at = addr.wrapping_add(done as u64);
        let chunk = ((PAGE - at % PAGE) as usize).min(out.len() - done);
        // PANIC: `done + chunk <= out.len()` by the choice of `chunk`.
        if !env.read_user(at, &mut out[done..done + chunk]) {
            break;
        }
        done += chunk;
    }
    // PANIC: `done <= out.len()`.
    let out = &mut out[..done];
    let len = out.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1);
    for c in &mut out[..len] {
        if *c == 0 {
            *c = b' ';
        }
    }
    len
}

/// Bytes of the string a register references, up to its NUL or `strsize` bytes.
pub(super) fn resolve_str<'b>(
    strtab: &'b [u8],
    scratch: &'b [u8],
    strsize: usize,
    r: u64,
) -> Option<&'b [u8]> {
    resolve_str_in(strtab, scratch, 0, strsize, r)
}

/// Like [`resolve_str`] with `scratch` starting at scratch offset `base`.
pub(super) fn resolve_str_in<'b>(
    strtab: &'b [u8],
    scratch: &'b [u8],
    base: usize,
    strsize: usize,
    r: u64,
) -> Option<&'b [u8]> {
    if r >> 48 != STR_TAG {
        return None;
    }
    let off = str_offset(r);
    if (r >> 32) & 0xff != 0 {
        return None;
    }
    let tail = match str_space(r) {
        STR_SPACE_TABLE => strtab.get(off..)?,
        STR_SPACE_SCRATCH => scratch.get(off.checked_sub(base)?..)?,
        _ => return None,
    };
    let lim = tail.len().min(strsize);
    // PANIC: `len <= lim <= tail.len()`.
    let len = tail[..lim].iter().position(|&c| c == 0).unwrap_or(lim);
    Some(&tail[..len])
}
