// SPDX-License-Identifier: GPL-2.0

//! The opcodes [`Vm::exec`] does not run inline: the whole match of the rarer ones, the
//! environment calls [`Vm::slow`] dispatches, built-in variables and the tuple.

use super::*;

impl<'s> Vm<'s> {
    /// The opcodes of [`Vm::exec`] not in [`HOT`]'s classes: their result, if they have one.
    /// One frame with `exec`'s (inlined), only its dispatch apart.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn other<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        b: u64,
        imm: u32,
        pc: usize,
        next: &mut usize,
        dict: &D,
        env: &mut E,
    ) -> Result<Option<u64>, Fault> {
        let f = |kind| Fault {
            pc: pc as u32,
            kind,
        };
        let mut out = None;
        use Op::*;
        match op {
            Nop => {}
            Setx => out = Some(dict.int_at(imm).ok_or(f(FaultKind::Invalid))?),
            Sets => {
                if imm as usize >= dict.strtab().len() {
                    return Err(f(FaultKind::Invalid));
                }
                out = Some(str_ref(STR_SPACE_TABLE, imm));
            }
            Mul => out = Some(a.wrapping_mul(b)),
            Sdiv | Udiv | Srem | Urem => {
                if b == 0 {
                    return Err(f(FaultKind::DivZero));
                }
                let (sa, sb) = (a as i64, b as i64);
                // Checked forms have no panic path; `None` is only i64::MIN / -1 here,
                // whose wrapped results are MIN and 0.
                out = Some(match op {
                    Sdiv => sa.checked_div(sb).unwrap_or(sa) as u64,
                    Udiv => a.checked_div(b).unwrap_or(0),
                    Srem => sa.checked_rem(sb).unwrap_or(0) as u64,
                    _ => a.checked_rem(b).unwrap_or(0),
                });
            }
            And => out = Some(a & b),
            Or => out = Some(a | b),
            Xor => out = Some(a ^ b),
            Sll => out = Some(a.wrapping_shl(b as u32)),
            Srl => out = Some(a.wrapping_shr(b as u32)),
            Sra => out = Some((a as i64).wrapping_shr(b as u32) as u64),
            Not => out = Some(!a),
            Neg => out = Some(a.wrapping_neg()),
            Lnot => out = Some((a == 0) as u64),
            Sext => {
                out = Some(match imm {
                    8 => a as i8 as i64 as u64,
                    16 => a as i16 as i64 as u64,
                    32 => a as i32 as i64 as u64,
                    _ => return Err(f(FaultKind::Invalid)),
                })
            }
            Zext => {
                out = Some(match imm {
                    8 => a as u8 as u64,
                    16 => a as u16 as u64,
                    32 => a as u32 as u64,
                    _ => return Err(f(FaultKind::Invalid)),
                })
            }
            Eq => out = Some((a == b) as u64),
            Ne => out = Some((a != b) as u64),
            Lt => out = Some(((a as i64) < (b as i64)) as u64),
            Le => out = Some(((a as i64) <= (b as i64)) as u64),
            Gt => out = Some(((a as i64) > (b as i64)) as u64),
            Ge => out = Some(((a as i64) >= (b as i64)) as u64),
            Ltu => out = Some((a < b) as u64),
            Leu => out = Some((a <= b) as u64),
            Gtu => out = Some((a > b) as u64),
            Geu => out = Some((a >= b) as u64),
            Ba | Bz | Bnz => {
                let taken = match op {
                    Ba => true,
                    Bz => a == 0,
                    _ => a != 0,
                };
                if taken {
                    if imm as usize <= pc {
                        return Err(f(FaultKind::Invalid));
                    }
                    *next = imm as usize;
                }
            }
            Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx => {
                let addr = a.wrapping_add(imm as i32 as i64 as u64);
                let size = match op {
                    Ldsb | Ldub => 1,
                    Ldsh | Lduh => 2,
                    Ldsw | Lduw => 4,
                    _ => 8,
                };
                let mut buf = [0u8; 8];
                // PANIC: `size` is 1, 2, 4 or 8.
                if !self.read_mem(env, addr, &mut buf[..size]) {
                    return Err(f(FaultKind::BadAddr(addr)));
                }
                let v = u64::from_le_bytes(buf);
                out = Some(match op {
                    Ldsb => v as i8 as i64 as u64,
                    Ldsh => v as i16 as i64 as u64,
                    Ldsw => v as i32 as i64 as u64,
                    _ => v,
                });
            }
            Ldls => out = Some(self.local(imm).ok_or(f(FaultKind::Invalid))?),
            Stls => {
                if !self.set_local(imm, a) {
                    return Err(f(FaultKind::Invalid));
                }
            }
            Ldgs => out = Some(env.global_load(imm)),
            Stgs => env.global_store(imm, a),
            Pushts => {
                // A full tuple first, as for `pushtv`; then validate now so the fault
                // points at the push.
                if self.st.tlen >= MAX_TUPLE {
                    return Err(f(FaultKind::TupleOverflow));
                }
                resolve_str(dict.strtab(), self.scratch, self.st.strsize as usize, a)
                    .ok_or(f(FaultKind::BadString))?;
                self.push(TupleVal::Str(a)).map_err(f)?;
            }
            Pushtm => {
                // The dynamic size `b` when it is within the static one `imm`, which a
                // negative size (a huge unsigned one) is not.
                let n = if b <= u64::from(imm) { b as u32 } else { imm };
                self.push(TupleVal::Mem(a, n)).map_err(f)?;
            }
            Flusht => self.st.tlen = 0,
            Scmp => {
                let ss = self.st.strsize as usize;
                let strtab = dict.strtab();
                // A NULL string (a subroutine's "not found") compares as the empty one,
                // as in DTrace: `strchr(s, c) != NULL` tests for a match.
                let get = |r: u64| match r {
                    0 => Some(&[][..]),
                    _ => resolve_str(strtab, self.scratch, ss, r),
                };
                let s1 = get(a).ok_or(f(FaultKind::BadString))?;
                let s2 = get(b).ok_or(f(FaultKind::BadString))?;
                out = Some(match s1.cmp(s2) {
                    core::cmp::Ordering::Less => -1i64 as u64,
                    core::cmp::Ordering::Equal => 0,
                    core::cmp::Ordering::Greater => 1,
                });
            }
            Strlen => {
                let s = resolve_str(dict.strtab(), self.scratch, self.st.strsize as usize, a)
                    .ok_or(f(FaultKind::BadString))?;
                out = Some(s.len() as u64);
            }
            Chkb => {
                if a >= u64::from(imm) {
                    return Err(f(FaultKind::BadIndex(a)));
                }
            }
            // One speculate() per clause, before its data (the compiler checks it).
            // The other actions are `slow`'s, which checks them.
            Speculate => {
                if self.st.spec.is_some() {
                    return Err(f(FaultKind::IllegalOp));
                }
                self.st.spec = Some(a);
            }
            Hton => {
                out = Some(match imm {
                    16 => (a as u16).to_be() as u64,
                    32 => (a as u32).to_be() as u64,
                    64 => a.to_be(),
                    _ => return Err(f(FaultKind::Invalid)),
                })
            }
            Stb => self.store(a, imm, b, 1).map_err(f)?,
            Sth => self.store(a, imm, b, 2).map_err(f)?,
            Stw => self.store(a, imm, b, 4).map_err(f)?,
            Stx => self.store(a, imm, b, 8).map_err(f)?,
            // [`HOT`]'s classes, which never come here.
            _ => return Err(f(FaultKind::Invalid)),
        }
        Ok(out)
    }

    /// `ldb`: built-in variable `imm`.
    #[inline(always)]
    pub(super) fn ldb<E: Env + ?Sized>(&mut self, imm: u32, env: &mut E) -> Result<u64, FaultKind> {
        let bi = Builtin::from_u32(imm).ok_or(FaultKind::Invalid)?;
        env.builtin_fallible(bi)
    }

    /// `ldb` for [`Vm::run`], out of line: the environment's built-in variables stay out
    /// of the fire path's frame.
    #[inline(never)]
    pub(super) fn ldb_to<E: Env + ?Sized>(
        &mut self,
        ins: DInsn,
        env: &mut E,
    ) -> Result<(), FaultKind> {
        let (rd, _, _) = self.operands(ins);
        let v = self.ldb(ins.imm, env)?;
        self.write_back(rd, Some(v))
    }

    /// `pushtv`: integer `a` of type `imm` onto the tuple (a full tuple faults first).
    #[inline(always)]
    pub(super) fn pushtv(&mut self, a: u64, imm: u32) -> Result<(), FaultKind> {
        if self.st.tlen >= MAX_TUPLE {
            return Err(FaultKind::TupleOverflow);
        }
        if imm >= 8 {
            return Err(FaultKind::Invalid);
        }
        self.push(TupleVal::Int(a, IntType(imm as u8)))
    }

    /// Pushes `v` onto the tuple.
    #[inline(always)]
    fn push(&mut self, v: TupleVal) -> Result<(), FaultKind> {
        // PANIC: `get_mut` is `None` at `MAX_TUPLE`, the tuple's length.
        let slot = self
            .st
            .tuple
            .get_mut(self.st.tlen)
            .ok_or(FaultKind::TupleOverflow)?;
        *slot = v;
        self.st.tlen += 1;
        Ok(())
    }

    /// Runs instruction `ins` at `pc`, an environment call that [`Vm::run`] does not call
    /// itself (and an aggregation in a speculation, which it refuses). Out of line, and its
    /// opcodes' bodies out of line too, so that its frame is small under theirs.
    #[inline(never)]
    pub(super) fn slow<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        code: &Verified<'_>,
        dict: &D,
        env: &mut E,
        pc: usize,
        ins: DInsn,
    ) -> Result<(), Fault> {
        let f = |kind| Fault {
            pc: pc as u32,
            kind,
        };
        let op = ins.op;
        let (rd, a, b) = self.operands(ins);
        let imm = ins.imm;
        let mut out: Option<u64> = None;
        use Op::*;
        // A speculated clause records data only: DTrace refuses the rest, and a second
        // `speculate()` (`exec`'s), a `commit()` or `discard()` with it.
        if self.st.spec.is_some() && op.is_action() && !matches!(op, Trace | Printf) {
            return Err(f(FaultKind::IllegalOp));
        }
        match op {
            Ldbs | Kstr | Strjoin | Uargs => {
                out = Some(self.strop(op, a, b, imm, dict, env).map_err(f)?)
            }
            Ldgaa | Stgaa => {
                let (layout, string) = match dict.var(imm) {
                    Some(v) if v.scope == Scope::Assoc => (v.keys, v.string),
                    _ => return Err(f(FaultKind::Invalid)),
                };
                out = if op == Ldgaa && string {
                    Some(self.assoc_load_str(imm, layout, dict, env).map_err(f)?)
                } else {
                    self.assoc(op, imm, layout, string, a, dict, env)
                        .map_err(f)?
                };
                self.st.tlen = 0;
            }
            Trace | Printf | System => {
                let (kind, id) = if op == Trace {
                    (RecordKind::Trace, 0)
                } else {
                    if imm >= dict.fmt_count() {
                        return Err(f(FaultKind::Invalid));
                    }
                    let k = if op == Printf {
                        RecordKind::Printf
                    } else {
                        RecordKind::System
                    };
                    (k, imm)
                };
                self.record(dict.strtab(), env, kind, id).map_err(f)?;
            }
            Printa => {
                let fmt = imm >> 16;
                let v = if fmt == 0 { u32::MAX } else { fmt - 1 };
                self.emit_int(env, RecordKind::Printa, imm & 0xffff, v as u64);
            }
            Clear => self.emit_int_none(env, RecordKind::Clear, imm),
            Denormalize => self.emit_int_none(env, RecordKind::Denormalize, imm),
            Trunc => self.emit_int(env, RecordKind::Trunc, imm, a),
            Normalize => self.emit_int(env, RecordKind::Normalize, imm, a),
            Exit => self.emit_int(env, RecordKind::Exit, 0, a),
            Ptwrite => {
                if !env.ptwrite(a) {
                    self.st.losses.ptwrites += 1;
                }
            }
            Raise => {
                if !env.raise(a) {
                    return Err(f(FaultKind::IllegalOp));
                }
            }
            Chill => {
                if !env.chill(a) {
                    return Err(f(FaultKind::IllegalOp));
                }
            }
            Speculation => out = Some(env.speculation()),
            Commit | Discard => {
                if a != 0 && !env.spec_end(a, op == Commit) {
                    return Err(f(FaultKind::IllegalOp));
                }
            }
            Substr | Strstr | Strchr | Strrchr | Index | Rindex | Strtok | Lltostr | Strtoll
            | Toupper | Tolower | Basename | Dirname | Cleanpath | InetNtop | Rand | Progenyof => {
                // The third register of `Substr`, `Index` and `Rindex` (the verifier
                // checked `imm < NREGS`); the others don't read `c`.
                let c = self.imm_reg(imm, code.nregs());
                out = Some(self.subr(op, a, b, c, dict, env).map_err(f)?);
            }
            Kstack => out = Some(self.kstack(imm, dict, env).map_err(f)?),
            Ustack | Ustackdepth | Ucaller | Kstackdepth | Symval => {
                out = Some(self.user_op(op, a, imm, dict, env).map_err(f)?);
            }
            Alloca => out = Some(self.alloca(a, dict).map_err(f)?),
            Copyin => out = Some(self.copyin(a, b, dict, env).map_err(f)?),
            Copyinto => {
                let dest = self.imm_reg(imm, code.nregs());
                self.copyinto(a, b, dest, env).map_err(f)?;
            }
            Bcopy => {
                let dest = self.imm_reg(imm, code.nregs());
                self.bcopy(a, dest, b, dict, env).map_err(f)?;
            }
            Uregs => out = Some(self.uregs(a, env).map_err(f)?),
            Copyout | Copyoutstr => self.copyout(ins, code.nregs(), dict, env).map_err(f)?,

            _ => return Err(f(FaultKind::Invalid)),
        }
        self.write_back(rd, out).map_err(f)
    }
}
