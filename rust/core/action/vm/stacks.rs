// SPDX-License-Identifier: GPL-2.0

//! Stacks and symbols: `stack()`, `ustack()`, their depths, callers and symbol values.

use super::*;

/// An [`Env`]'s user memory as a frame reader (the non-faulting [`Env::read_user`]).
pub(super) struct UserFrames<'e, E: Env + ?Sized>(pub(super) &'e mut E);

impl<E: Env + ?Sized> crate::ustack::FrameReader for UserFrames<'_, E> {
    fn read(&mut self, addr: u64, out: &mut [u8; 16]) -> bool {
        self.0.read_user(addr, out)
    }
}

impl<'s> Vm<'s> {
    /// Runs a user stack or symbol opcode (`Ustack` ..= `Ucaller`); returns the value of
    /// `rd`. Apart from [`Vm::run`] so that its locals do not grow that frame.
    #[inline(never)]
    pub(super) fn user_op<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        a: u64,
        imm: u32,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        use crate::ustack::{self, Style};
        match op {
            Op::Ustack => {
                let id = env.stack_id(true, imm.min(ustack::MAX_FRAMES));
                let pid = env.builtin(Builtin::Pid);
                self.new_str(dict.strtab(), |_, _, slot| {
                    Ok(Some(if id == 0 {
                        0
                    } else {
                        ustack::encode_sym(Style::Ustack, pid, id, slot)
                    }))
                })
            }
            Op::Ustackdepth | Op::Ucaller => {
                let Some(regs) = env.user_regs() else {
                    return Ok(0);
                };
                let max = if op == Op::Ucaller {
                    2
                } else {
                    ustack::MAX_FRAMES
                };
                let mut last = 0u64;
                let n = ustack::walk(regs, max, &mut UserFrames(env), |pc| {
                    last = pc;
                    true
                });
                Ok(match op {
                    Op::Ucaller if n == 2 => last,
                    Op::Ucaller => 0,
                    _ => n as u64,
                })
            }
            Op::Kstackdepth => Ok(env.kernel_stack_depth() as u64),
            Op::Symval => {
                let style = Style::from_u8(imm.min(255) as u8).ok_or(FaultKind::Invalid)?;
                let pid = if style.user() {
                    env.builtin(Builtin::Pid)
                } else {
                    0
                };
                self.new_str(dict.strtab(), |_, _, slot| {
                    Ok(Some(ustack::encode_sym(style, pid, a, slot)))
                })
            }
            _ => Err(FaultKind::Invalid),
        }
    }

    /// `stack(imm)`: a reference to the kernel stack, at most `imm` frames, in a new string
    /// slot (the frames go to the consumer once, through [`Env::stack_id`]).
    #[inline(never)]
    pub(super) fn kstack<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        imm: u32,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        let id = env.stack_id(false, imm.min(crate::stack::MAX_FRAMES));
        self.new_str(dict.strtab(), |_, _, slot| {
            Ok(Some(if id == 0 {
                0
            } else {
                crate::ustack::encode_sym(crate::ustack::Style::Kstack, 0, id, slot)
            }))
        })
    }
}
