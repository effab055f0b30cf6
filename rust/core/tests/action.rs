// SPDX-License-Identifier: GPL-2.0

//! Verifier rules (one test per rule, checking the reported instruction) and interpreter
//! semantics of every opcode.

mod action_support;

use action_support::*;
use oxtrace_core::action::*;

const RET0: u64 = insn(Op::Ret, 0, 0, 0, 0);

fn rej(words: &[u64]) -> VerifyError {
    check(words, &TDict::default()).expect_err("verifier must reject")
}

fn ldi(rd: u8, v: i32) -> u64 {
    insn(Op::Ldi, rd, 0, 0, v as u32)
}

fn ret(r: u8) -> u64 {
    insn(Op::Ret, 0, r, 0, 0)
}

fn alu(op: Op, a: i64, b: i64) -> Result<u64, Fault> {
    let d = TDict {
        ints: vec![a as u64, b as u64],
        ..TDict::default()
    };
    let mut env = TEnv::default();
    run_with(
        &[
            insn(Op::Setx, 1, 0, 0, 0),
            insn(Op::Setx, 2, 0, 0, 1),
            insn(op, 3, 1, 2, 0),
            ret(3),
        ],
        &d,
        &mut env,
    )
}

// ---- verifier: one test per rule -------------------------------------------------------

#[test]
fn verify_rejects_empty_program() {
    assert_eq!(
        rej(&[]),
        VerifyError {
            index: 0,
            reason: Reason::Empty
        }
    );
}

#[test]
fn verify_rejects_too_long_program() {
    let mut p = vec![insn(Op::Nop, 0, 0, 0, 0); MAX_INSNS];
    p.push(RET0);
    assert_eq!(rej(&p).reason, Reason::TooLong);
    assert_eq!(rej(&p).index, MAX_INSNS as u32);
}

#[test]
fn verify_rejects_misaligned_code() {
    let e = Code::new(&[0u8; 12]).unwrap_err();
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::Misaligned
        }
    );
}

#[test]
fn verify_rejects_bad_opcode() {
    let e = rej(&[ldi(1, 0), NOPS as u64, RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadOpcode(NOPS)
        }
    );
    let e = rej(&[0xff, RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadOpcode(0xff)
        }
    );
}

#[test]
fn verify_rejects_bad_destination_register() {
    let e = rej(&[ldi(1, 0), insn(Op::Mov, NREGS as u8, 1, 0, 0), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadRegister(NREGS as u8)
        }
    );
}

#[test]
fn verify_rejects_bad_source_registers() {
    let e = rej(&[insn(Op::Add, 1, 2, 200, 0), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadRegister(200)
        }
    );
    let e = rej(&[RET0, insn(Op::Ret, 0, 16, 0, 0)]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadRegister(16)
        }
    );
}

#[test]
fn verify_rejects_write_to_r0() {
    let e = rej(&[ldi(1, 0), ldi(0, 5), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::WritesR0
        }
    );
}

#[test]
fn verify_rejects_nonzero_unused_fields() {
    // ret uses r1 only: rd, r2 and imm must be zero.
    assert_eq!(
        rej(&[insn(Op::Ret, 1, 0, 0, 0)]).reason,
        Reason::ReservedNonZero
    );
    assert_eq!(
        rej(&[insn(Op::Ret, 0, 0, 1, 0)]).reason,
        Reason::ReservedNonZero
    );
    let e = rej(&[insn(Op::Nop, 0, 0, 0, 1), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::ReservedNonZero
        }
    );
}

#[test]
fn verify_rejects_backward_jump() {
    let e = rej(&[ldi(1, 0), insn(Op::Ba, 0, 0, 0, 0), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BackwardJump(0)
        }
    );
}

#[test]
fn verify_rejects_jump_to_itself() {
    let e = rej(&[ldi(1, 0), insn(Op::Bz, 0, 1, 0, 1), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BackwardJump(1)
        }
    );
}

#[test]
fn verify_rejects_jump_out_of_bounds() {
    let e = rej(&[insn(Op::Bnz, 0, 1, 0, 3), ldi(1, 0), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::JumpOutOfBounds(3)
        }
    );
}

#[test]
fn verify_rejects_bad_int_table_index() {
    let e = rej(&[ldi(1, 0), insn(Op::Setx, 1, 0, 0, 2), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadIntIndex(2)
        }
    );
}

#[test]
fn verify_rejects_bad_string_offset() {
    // Past the table.
    let e = rej(&[insn(Op::Sets, 1, 0, 0, 100), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadStrOffset(100)
        }
    );
    // Inside "hello": not the start of a string.
    let e = rej(&[RET0, insn(Op::Sets, 1, 0, 0, 2), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadStrOffset(2)
        }
    );
}

#[test]
fn verify_rejects_string_constant_longer_than_strsize() {
    let d = TDict {
        strsize: 3,
        ..TDict::default()
    };
    let e = check(&[insn(Op::Sets, 1, 0, 0, 1), RET0], &d).unwrap_err();
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::StringTooLong(1)
        }
    );
}

#[test]
fn verify_rejects_bad_builtin() {
    let e = rej(&[insn(Op::Ldb, 1, 0, 0, NBUILTINS), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadBuiltin(NBUILTINS)
        }
    );
    // A string built-in through the integer load, and the reverse.
    let e = rej(&[RET0, insn(Op::Ldb, 1, 0, 0, Builtin::Execname as u32), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadBuiltin(Builtin::Execname as u32)
        }
    );
    let e = rej(&[insn(Op::Ldbs, 1, 0, 0, Builtin::Pid as u32), RET0]);
    assert_eq!(e.reason, Reason::BadBuiltin(0));
}

#[test]
fn verify_rejects_bad_local_index() {
    let e = rej(&[ldi(1, 0), insn(Op::Stls, 0, 1, 0, 4), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadLocal(4)
        }
    );
}

#[test]
fn verify_rejects_variable_of_wrong_scope_or_missing() {
    // Var 1 is thread-local, not global.
    let e = rej(&[insn(Op::Ldgs, 1, 0, 0, 1), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadVariable(1)
        }
    );
    let e = rej(&[RET0, insn(Op::Stts, 0, 1, 0, 9), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadVariable(9)
        }
    );
    let e = rej(&[insn(Op::Ldgaa, 1, 0, 0, 0), RET0]);
    assert_eq!(e.reason, Reason::BadVariable(0));
}

#[test]
fn verify_rejects_bad_aggregation_id() {
    let e = rej(&[ldi(1, 1), insn(Op::Agg, 0, 1, 1, 2), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadAggregation(2)
        }
    );
    let e = rej(&[insn(Op::Clear, 0, 0, 0, 5), RET0]);
    assert_eq!(e.reason, Reason::BadAggregation(5));
}

#[test]
fn verify_rejects_bad_format_id() {
    let e = rej(&[insn(Op::Printf, 0, 0, 0, 2), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadFormat(2)
        }
    );
    // printa with format 2 (encoded 3) on aggregation 0.
    let e = rej(&[RET0, insn(Op::Printa, 0, 0, 0, 3 << 16), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::BadFormat(2)
        }
    );
    let e = rej(&[insn(Op::Printa, 0, 0, 0, 7), RET0]);
    assert_eq!(e.reason, Reason::BadAggregation(7));
}

#[test]
fn verify_rejects_bad_extension_width() {
    let e = rej(&[insn(Op::Sext, 1, 1, 0, 12), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadWidth(12)
        }
    );
}

#[test]
fn verify_rejects_bad_int_type_code() {
    let e = rej(&[insn(Op::Pushtv, 0, 1, 0, 8), RET0]);
    assert_eq!(
        e,
        VerifyError {
            index: 0,
            reason: Reason::BadType(8)
        }
    );
}

#[test]
fn verify_rejects_program_without_final_return() {
    let e = rej(&[ldi(1, 0), insn(Op::Bz, 0, 1, 0, 2), RET0, ldi(2, 1)]);
    assert_eq!(
        e,
        VerifyError {
            index: 3,
            reason: Reason::NoReturn
        }
    );
}

#[test]
fn verify_rejects_scratch_overflow() {
    let d = TDict::default();
    let p = [
        insn(Op::Ldbs, 1, 0, 0, Builtin::Execname as u32),
        insn(Op::Ldbs, 2, 0, 0, Builtin::Probefunc as u32),
        RET0,
    ];
    let b = code_bytes(&p);
    let limit = scratch_size(d.nlocals, d.strsize, 1);
    let e = verify(Code::new(&b).unwrap(), &d, limit).unwrap_err();
    assert_eq!(
        e,
        VerifyError {
            index: 1,
            reason: Reason::ScratchTooLarge
        }
    );
    let v = verify(Code::new(&b).unwrap(), &d, limit + slot_size(d.strsize)).unwrap();
    assert_eq!(v.string_allocs(), 2);
}

#[test]
fn verify_rejects_unusable_tables() {
    let d = TDict {
        strsize: MAX_STRSIZE + 1,
        ..TDict::default()
    };
    assert_eq!(check(&[RET0], &d).unwrap_err().reason, Reason::BadTables);
}

#[test]
fn verify_accepts_every_valid_shape() {
    let p = [
        ldi(1, 3),
        insn(Op::Setx, 2, 0, 0, 1),
        insn(Op::Sets, 3, 0, 0, 7),
        insn(Op::Bz, 0, 1, 0, 5),
        insn(Op::Ba, 0, 0, 0, 5),
        insn(Op::Pushtv, 0, 1, 0, IntType::I32.0 as u32),
        insn(Op::Printa, 0, 0, 0, 1 | (2 << 16)),
        insn(Op::Zext, 4, 1, 0, 16),
        RET0,
    ];
    check(&p, &TDict::default()).unwrap();
}

// ---- interpreter semantics ------------------------------------------------------------

#[test]
fn run_constants() {
    assert_eq!(run(&[ldi(1, -7), ret(1)]).0, Ok(-7i64 as u64));
    assert_eq!(
        run(&[insn(Op::Setx, 1, 0, 0, 0), ret(1)]).0,
        Ok(0x1122_3344_5566_7788)
    );
    assert_eq!(
        run(&[ldi(1, 9), insn(Op::Mov, 2, 1, 0, 0), ret(2)]).0,
        Ok(9)
    );
    assert_eq!(run(&[insn(Op::Nop, 0, 0, 0, 0), RET0]).0, Ok(0));
    // r0 always reads as zero.
    assert_eq!(run(&[ret(0)]).0, Ok(0));
}

#[test]
fn run_arithmetic() {
    assert_eq!(alu(Op::Add, i64::MAX, 1), Ok(i64::MIN as u64));
    assert_eq!(alu(Op::Sub, 3, 5), Ok(-2i64 as u64));
    assert_eq!(alu(Op::Mul, -3, 5), Ok(-15i64 as u64));
    assert_eq!(alu(Op::Sdiv, -7, 2), Ok(-3i64 as u64));
    assert_eq!(alu(Op::Udiv, -8, 2), Ok(u64::MAX / 2 - 3));
    assert_eq!(alu(Op::Srem, -7, 2), Ok(-1i64 as u64));
    assert_eq!(alu(Op::Urem, 7, 4), Ok(3));
    assert_eq!(alu(Op::Sdiv, i64::MIN, -1), Ok(i64::MIN as u64));
    assert_eq!(alu(Op::Srem, i64::MIN, -1), Ok(0));
}

#[test]
fn run_division_by_zero_faults() {
    for op in [Op::Sdiv, Op::Udiv, Op::Srem, Op::Urem] {
        assert_eq!(
            alu(op, 5, 0),
            Err(Fault {
                pc: 2,
                kind: FaultKind::DivZero
            })
        );
    }
}

#[test]
fn run_logic_and_shifts() {
    assert_eq!(alu(Op::And, 0b1100, 0b1010), Ok(0b1000));
    assert_eq!(alu(Op::Or, 0b1100, 0b1010), Ok(0b1110));
    assert_eq!(alu(Op::Xor, 0b1100, 0b1010), Ok(0b0110));
    assert_eq!(alu(Op::Sll, 1, 63), Ok(1 << 63));
    assert_eq!(alu(Op::Sll, 1, 64), Ok(1), "shift counts are taken mod 64");
    assert_eq!(alu(Op::Srl, -1, 60), Ok(0xf));
    assert_eq!(alu(Op::Sra, -16, 2), Ok(-4i64 as u64));
    assert_eq!(
        run(&[ldi(1, 0), insn(Op::Not, 2, 1, 0, 0), ret(2)]).0,
        Ok(u64::MAX)
    );
    assert_eq!(
        run(&[ldi(1, 5), insn(Op::Neg, 2, 1, 0, 0), ret(2)]).0,
        Ok(-5i64 as u64)
    );
    assert_eq!(
        run(&[ldi(1, 5), insn(Op::Lnot, 2, 1, 0, 0), ret(2)]).0,
        Ok(0)
    );
    assert_eq!(run(&[insn(Op::Lnot, 2, 0, 0, 0), ret(2)]).0, Ok(1));
}

#[test]
fn run_extensions() {
    let ext = |op, v: i32, w| run(&[ldi(1, v), insn(op, 2, 1, 0, w), ret(2)]).0.unwrap();
    assert_eq!(ext(Op::Sext, 0xff, 8), u64::MAX);
    assert_eq!(ext(Op::Zext, -1, 8), 0xff);
    assert_eq!(ext(Op::Sext, 0x8000, 16), 0xffff_ffff_ffff_8000);
    assert_eq!(ext(Op::Zext, -1, 16), 0xffff);
    assert_eq!(ext(Op::Sext, -1, 32), u64::MAX);
    assert_eq!(ext(Op::Zext, -1, 32), 0xffff_ffff);
}

#[test]
fn run_comparisons_signed_and_unsigned() {
    let t = |op, a, b| alu(op, a, b).unwrap();
    assert_eq!(t(Op::Eq, 4, 4), 1);
    assert_eq!(t(Op::Ne, 4, 4), 0);
    assert_eq!(t(Op::Lt, -1, 0), 1);
    assert_eq!(t(Op::Ltu, -1, 0), 0);
    assert_eq!(t(Op::Le, 3, 3), 1);
    assert_eq!(t(Op::Leu, -1, 3), 0);
    assert_eq!(t(Op::Gt, 0, -1), 1);
    assert_eq!(t(Op::Gtu, 0, -1), 0);
    assert_eq!(t(Op::Ge, -2, -2), 1);
    assert_eq!(t(Op::Geu, -1, 0), 1);
}

#[test]
fn run_branches() {
    // if (r1 == 0) r2 = 1 else r2 = 2
    let prog = |v| {
        [
            ldi(1, v),
            insn(Op::Bnz, 0, 1, 0, 4),
            ldi(2, 1),
            insn(Op::Ba, 0, 0, 0, 5),
            ldi(2, 2),
            ret(2),
        ]
    };
    assert_eq!(run(&prog(0)).0, Ok(1));
    assert_eq!(run(&prog(7)).0, Ok(2));
    let bz = [ldi(1, 0), insn(Op::Bz, 0, 1, 0, 3), ldi(2, 9), ret(2)];
    assert_eq!(run(&bz).0, Ok(0));
}

#[test]
fn run_builtins() {
    let b = |x: Builtin| run(&[insn(Op::Ldb, 1, 0, 0, x as u32), ret(1)]).0.unwrap();
    assert_eq!(b(Builtin::Pid), 4242);
    assert_eq!(b(Builtin::Tid), 4243);
    assert_eq!(b(Builtin::Cpu), 3);
    assert_eq!(b(Builtin::Arg5), 15);
    assert_eq!(b(Builtin::Retval), -5i64 as u64);
    assert_eq!(b(Builtin::Id), 77);
}

#[test]
fn run_string_builtins_and_compare() {
    // strcmp(execname, "hello") and strlen(execname).
    let (r, _) = run(&[
        insn(Op::Ldbs, 1, 0, 0, Builtin::Execname as u32),
        insn(Op::Sets, 2, 0, 0, 1),
        insn(Op::Scmp, 3, 1, 2, 0),
        ret(3),
    ]);
    assert_eq!(r, Ok(-1i64 as u64), "bash < hello");
    let (r, _) = run(&[
        insn(Op::Ldbs, 1, 0, 0, Builtin::Probefunc as u32),
        insn(Op::Strlen, 2, 1, 0, 0),
        ret(2),
    ]);
    assert_eq!(r, Ok(11));
    let (r, _) = run(&[
        insn(Op::Sets, 1, 0, 0, 7),
        insn(Op::Sets, 2, 0, 0, 7),
        insn(Op::Scmp, 3, 1, 2, 0),
        ret(3),
    ]);
    assert_eq!(r, Ok(0));
}

#[test]
fn run_strings_are_truncated_to_strsize() {
    let d = TDict {
        strsize: 4,
        strtab: b"\0abc\0".to_vec(),
        ..TDict::default()
    };
    let mut env = TEnv::default();
    let r = run_with(
        &[
            insn(Op::Ldbs, 1, 0, 0, Builtin::Probefunc as u32),
            insn(Op::Strlen, 2, 1, 0, 0),
            ret(2),
        ],
        &d,
        &mut env,
    );
    assert_eq!(r, Ok(4));
}

#[test]
fn run_strjoin() {
    let (r, env) = run(&[
        insn(Op::Sets, 1, 0, 0, 1),
        insn(Op::Sets, 2, 0, 0, 7),
        insn(Op::Strjoin, 3, 1, 2, 0),
        insn(Op::Pushts, 0, 3, 0, 0),
        insn(Op::Trace, 0, 0, 0, 0),
        RET0,
    ]);
    assert_eq!(r, Ok(0));
    assert_eq!(env.records[0].items, vec![OItem::S(b"helloworld".to_vec())]);
}

#[test]
fn run_integer_used_as_string_faults() {
    let (r, _) = run(&[ldi(1, 5), insn(Op::Strlen, 2, 1, 0, 0), ret(2)]);
    assert_eq!(
        r,
        Err(Fault {
            pc: 1,
            kind: FaultKind::BadString
        })
    );
    let forged = str_ref(STR_SPACE_SCRATCH, 1 << 30);
    let d = TDict {
        ints: vec![forged],
        ..TDict::default()
    };
    let r = run_with(
        &[
            insn(Op::Setx, 1, 0, 0, 0),
            insn(Op::Pushts, 0, 1, 0, 0),
            RET0,
        ],
        &d,
        &mut TEnv::default(),
    );
    assert_eq!(
        r,
        Err(Fault {
            pc: 1,
            kind: FaultKind::BadString
        })
    );
}

#[test]
fn run_kernel_reads() {
    // mem at 0x1000 holds bytes 0..=255.
    let rd = |op: Op, off: i32| {
        let d = TDict {
            ints: vec![0x1000],
            ..TDict::default()
        };
        run_with(
            &[
                insn(Op::Setx, 1, 0, 0, 0),
                insn(op, 2, 1, 0, off as u32),
                ret(2),
            ],
            &d,
            &mut TEnv::default(),
        )
    };
    assert_eq!(rd(Op::Ldub, 0x80), Ok(0x80));
    assert_eq!(rd(Op::Ldsb, 0x80), Ok(-128i64 as u64));
    assert_eq!(rd(Op::Lduh, 1), Ok(0x0201));
    assert_eq!(rd(Op::Ldsh, 0xfe), Ok(0xffff_ffff_ffff_fffe));
    assert_eq!(rd(Op::Lduw, 4), Ok(0x0706_0504));
    assert_eq!(rd(Op::Ldsw, 0xfc), Ok(0xffff_ffff_fffe_fdfc));
    assert_eq!(rd(Op::Ldx, 8), Ok(0x0f0e_0d0c_0b0a_0908));
    assert_eq!(
        rd(Op::Ldx, 0xf9),
        Err(Fault {
            pc: 1,
            kind: FaultKind::BadAddr(0x10f9)
        })
    );
    assert_eq!(
        rd(Op::Ldub, -1),
        Err(Fault {
            pc: 1,
            kind: FaultKind::BadAddr(0xfff)
        })
    );
}

#[test]
fn run_kernel_string_read() {
    let mut env = TEnv::default();
    // Readable memory is page-granular, as in the kernel: the string crosses into a page.
    let mut crossing = b"ab\0zz".to_vec();
    crossing.resize(2 + 4096, 0);
    env.mem.push((0x2ffe, crossing));
    env.mem.push((0x5000, b"0123456789".repeat(10)));
    let d = TDict {
        ints: vec![0x2ffe, 0x5000, 0x9000],
        ..TDict::default()
    };
    let p = |i| {
        [
            insn(Op::Setx, 1, 0, 0, i),
            insn(Op::Kstr, 2, 1, 0, 0),
            insn(Op::Strlen, 3, 2, 0, 0),
            ret(3),
        ]
    };
    assert_eq!(run_with(&p(0), &d, &mut env), Ok(2));
    // Truncated to strsize (32) when there is no NUL within it.
    assert_eq!(run_with(&p(1), &d, &mut env), Ok(32));
    assert_eq!(
        run_with(&p(2), &d, &mut env),
        Err(Fault {
            pc: 1,
            kind: FaultKind::BadAddr(0x9000)
        })
    );
}

#[test]
fn run_clause_locals() {
    let (r, _) = run(&[
        ldi(1, 41),
        insn(Op::Stls, 0, 1, 0, 3),
        insn(Op::Ldls, 2, 0, 0, 3),
        insn(Op::Ldls, 3, 0, 0, 0),
        insn(Op::Add, 4, 2, 3, 0),
        ret(4),
    ]);
    assert_eq!(r, Ok(41));
}

#[test]
fn run_locals_are_cleared_per_clause() {
    let d = TDict::default();
    let st = code_bytes(&[ldi(1, 5), insn(Op::Stls, 0, 1, 0, 0), RET0]);
    let ld = code_bytes(&[insn(Op::Ldls, 1, 0, 0, 0), ret(1)]);
    let st = verify(Code::new(&st).unwrap(), &d, LIMIT).unwrap();
    let ld = verify(Code::new(&ld).unwrap(), &d, LIMIT).unwrap();
    let mut scratch = vec![0u8; scratch_size(d.nlocals, d.strsize, 0)];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    let mut env = TEnv::default();
    vm.begin_clause();
    vm.run(&st, &d, &mut env).unwrap();
    assert_eq!(
        vm.run(&ld, &d, &mut env),
        Ok(5),
        "locals live across the clause's programs"
    );
    vm.begin_clause();
    assert_eq!(vm.run(&ld, &d, &mut env), Ok(0));
}

#[test]
fn run_globals() {
    let (r, env) = run(&[
        ldi(1, 12),
        insn(Op::Stgs, 0, 1, 0, 0),
        insn(Op::Ldgs, 2, 0, 0, 0),
        ret(2),
    ]);
    assert_eq!(r, Ok(12));
    assert_eq!(env.globals[&0], 12);
}

#[test]
fn run_thread_local_keyed_by_tid() {
    let (r, env) = run(&[
        ldi(1, 99),
        insn(Op::Stts, 0, 1, 0, 1),
        insn(Op::Ldts, 2, 0, 0, 1),
        ret(2),
    ]);
    assert_eq!(r, Ok(99));
    assert_eq!(env.dyn_[&(1, vec![OKey::I(4243)])], 99);
}

#[test]
fn a_thread_local_is_looked_up_once_per_firing_until_stored() {
    let dict = TDict::default();
    let load_twice = [
        insn(Op::Ldts, 1, 0, 0, 1),
        insn(Op::Ldts, 2, 0, 0, 1),
        insn(Op::Add, 1, 1, 2, 0),
        ret(1),
    ];
    let store = [ldi(1, 5), insn(Op::Stts, 0, 1, 0, 1), RET0];
    let progs: Vec<_> = [&load_twice[..], &store[..]]
        .iter()
        .map(|w| code_bytes(w))
        .collect();
    let vs: Vec<_> = progs
        .iter()
        .map(|b| verify(Code::new(b).unwrap(), &dict, LIMIT).unwrap())
        .collect();
    let (pred, act) = (&vs[0], &vs[1]);
    let mut env = TEnv::default();
    env.dyn_.insert((1, vec![OKey::I(4243)]), 20);
    let mut scratch = vec![0u8; scratch_size(dict.nlocals, dict.strsize, 0)];
    let mut st = VmState::new();
    {
        // One firing: a predicate and its action, as a clause runs them.
        let mut vm = Vm::new(&mut st, &mut scratch, dict.nlocals, dict.strsize).unwrap();
        assert_eq!(vm.run(pred, &dict, &mut env), Ok(40));
        assert_eq!(vm.run(pred, &dict, &mut env), Ok(40));
        assert_eq!(env.dyn_loads, 1);
        // A store forgets the value: the next load sees the new one.
        assert_eq!(vm.run(act, &dict, &mut env), Ok(0));
        assert_eq!(vm.run(pred, &dict, &mut env), Ok(10));
        assert_eq!(env.dyn_loads, 2);
        // Another thread's variable is its own.
        env.builtins.insert(Builtin::Tid as u32, 7);
        assert_eq!(vm.run(pred, &dict, &mut env), Ok(0));
        assert_eq!(env.dyn_loads, 3);
    }
    // The next firing looks the variable up again: the thread may have stored it on
    // another CPU in between.
    env.builtins.insert(Builtin::Tid as u32, 4243);
    env.dyn_.insert((1, vec![OKey::I(4243)]), 8);
    let mut vm = Vm::new(&mut st, &mut scratch, dict.nlocals, dict.strsize).unwrap();
    assert_eq!(vm.run(pred, &dict, &mut env), Ok(16));
    assert_eq!(env.dyn_loads, 4);
}

#[test]
fn run_thread_local_store_zero_deletes() {
    let (_, env) = run(&[
        ldi(1, 99),
        insn(Op::Stts, 0, 1, 0, 1),
        insn(Op::Stts, 0, 0, 0, 1),
        RET0,
    ]);
    assert!(env.dyn_.is_empty());
}

#[test]
fn run_assoc_array_with_string_and_int_keys() {
    // a[execname, 7] = 5; return a[execname, 7]
    let (r, env) = run(&[
        insn(Op::Ldbs, 1, 0, 0, Builtin::Execname as u32),
        ldi(2, 7),
        ldi(3, 5),
        insn(Op::Pushts, 0, 1, 0, 0),
        insn(Op::Pushtv, 0, 2, 0, IntType::I64.0 as u32),
        insn(Op::Stgaa, 0, 3, 0, 2),
        insn(Op::Pushts, 0, 1, 0, 0),
        insn(Op::Pushtv, 0, 2, 0, IntType::I64.0 as u32),
        insn(Op::Ldgaa, 4, 0, 0, 2),
        ret(4),
    ]);
    assert_eq!(r, Ok(5));
    assert_eq!(
        env.dyn_[&(2, vec![OKey::S(b"bash".to_vec()), OKey::I(7)])],
        5
    );
}

#[test]
fn run_assoc_array_key_mismatch_faults() {
    // Var 2 wants (string, int); give (int, int).
    let (r, _) = run(&[
        ldi(2, 7),
        insn(Op::Pushtv, 0, 2, 0, 7),
        insn(Op::Pushtv, 0, 2, 0, 7),
        insn(Op::Ldgaa, 4, 0, 0, 2),
        ret(4),
    ]);
    assert_eq!(
        r,
        Err(Fault {
            pc: 3,
            kind: FaultKind::KeyMismatch
        })
    );
    let (r, _) = run(&[insn(Op::Ldgaa, 4, 0, 0, 2), ret(4)]);
    assert_eq!(
        r,
        Err(Fault {
            pc: 0,
            kind: FaultKind::KeyMismatch
        })
    );
}

#[test]
fn run_dynvar_drop_is_counted_not_fatal() {
    let d = TDict::default();
    let mut env = TEnv {
        dyn_cap: 0,
        ..TEnv::default()
    };
    let b = code_bytes(&[ldi(1, 1), insn(Op::Stts, 0, 1, 0, 1), ldi(2, 3), ret(2)]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    let mut scratch = vec![0u8; scratch_size(d.nlocals, d.strsize, 0)];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    assert_eq!(vm.run(&v, &d, &mut env), Ok(3));
    assert_eq!(vm.losses().dynvars, 1);
}

#[test]
fn run_tuple_overflow_faults() {
    let mut p = vec![];
    for _ in 0..=MAX_TUPLE {
        p.push(insn(Op::Pushtv, 0, 0, 0, 7));
    }
    p.push(RET0);
    assert_eq!(
        run(&p).0,
        Err(Fault {
            pc: MAX_TUPLE as u32,
            kind: FaultKind::TupleOverflow
        })
    );
}

#[test]
fn run_aggregation_updates() {
    // @[execname] = sum(arg0) (agg 1 keyed by a string); @ = count() (agg 0).
    let (r, env) = run(&[
        insn(Op::Ldbs, 1, 0, 0, Builtin::Execname as u32),
        insn(Op::Ldb, 2, 0, 0, Builtin::Arg0 as u32),
        ldi(3, 1),
        insn(Op::Pushts, 0, 1, 0, 0),
        insn(Op::Agg, 0, 2, 3, 1),
        insn(Op::Agg, 0, 0, 3, 0),
        RET0,
    ]);
    assert_eq!(r, Ok(0));
    assert_eq!(
        env.aggs,
        vec![
            (1, vec![OKey::S(b"bash".to_vec())], [10, 1]),
            (0, vec![], [0, 1])
        ]
    );
}

#[test]
fn run_aggregation_drop_is_counted() {
    let d = TDict::default();
    let mut env = TEnv {
        agg_fail: true,
        ..TEnv::default()
    };
    let b = code_bytes(&[insn(Op::Agg, 0, 0, 0, 0), RET0]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    let mut scratch = vec![0u8; scratch_size(d.nlocals, d.strsize, 0)];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    assert_eq!(vm.run(&v, &d, &mut env), Ok(0));
    assert_eq!(vm.losses().aggs, 1);
}

#[test]
fn run_trace_and_printf_records() {
    let (r, env) = run(&[
        insn(Op::Ldb, 1, 0, 0, Builtin::Pid as u32),
        insn(Op::Pushtv, 0, 1, 0, IntType::I32.0 as u32),
        insn(Op::Trace, 0, 0, 0, 0),
        insn(Op::Sets, 2, 0, 0, 7),
        insn(Op::Pushts, 0, 2, 0, 0),
        insn(Op::Pushtv, 0, 1, 0, IntType::U64.0 as u32),
        insn(Op::Printf, 0, 0, 0, 1),
        RET0,
    ]);
    assert_eq!(r, Ok(0));
    assert_eq!(
        env.records,
        vec![
            ORecord {
                kind: RecordKind::Trace,
                id: 0,
                items: vec![OItem::I(4242, IntType::I32.0)]
            },
            ORecord {
                kind: RecordKind::Printf,
                id: 1,
                items: vec![OItem::S(b"world".to_vec()), OItem::I(4242, IntType::U64.0)]
            },
        ]
    );
}

#[test]
fn run_record_drop_is_counted() {
    let d = TDict::default();
    let mut env = TEnv {
        rec_cap: 1,
        ..TEnv::default()
    };
    let b = code_bytes(&[
        insn(Op::Exit, 0, 0, 0, 0),
        insn(Op::Exit, 0, 0, 0, 0),
        insn(Op::Exit, 0, 0, 0, 0),
        RET0,
    ]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    let mut scratch = vec![0u8; scratch_size(d.nlocals, d.strsize, 0)];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    assert_eq!(vm.run(&v, &d, &mut env), Ok(0));
    assert_eq!(vm.losses().records, 2);
    assert_eq!(env.records.len(), 1);
}

#[test]
fn run_aggregation_action_records() {
    let (_, env) = run(&[
        ldi(1, 3),
        insn(Op::Exit, 0, 1, 0, 0),
        insn(Op::Printa, 0, 0, 0, 1),
        insn(Op::Printa, 0, 0, 0, 1 | (2 << 16)),
        insn(Op::Clear, 0, 0, 0, 1),
        insn(Op::Trunc, 0, 1, 0, 0),
        insn(Op::Normalize, 0, 1, 0, 1),
        insn(Op::Denormalize, 0, 0, 0, 1),
        RET0,
    ]);
    let i = |v: u64| vec![OItem::I(v, IntType::I64.0)];
    let got: Vec<_> = env
        .records
        .iter()
        .map(|r| (r.kind, r.id, r.items.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (RecordKind::Exit, 0, i(3)),
            (RecordKind::Printa, 1, i(u32::MAX as u64)),
            (RecordKind::Printa, 1, i(1)),
            (RecordKind::Clear, 1, vec![]),
            (RecordKind::Trunc, 0, i(3)),
            (RecordKind::Normalize, 1, i(3)),
            (RecordKind::Denormalize, 1, vec![]),
        ]
    );
}

#[test]
fn run_fault_aborts_clause_before_later_actions() {
    let (r, env) = run(&[
        insn(Op::Exit, 0, 0, 0, 0),
        ldi(1, 1),
        insn(Op::Udiv, 2, 1, 0, 0),
        insn(Op::Exit, 0, 0, 0, 0),
        RET0,
    ]);
    assert_eq!(
        r,
        Err(Fault {
            pc: 2,
            kind: FaultKind::DivZero
        })
    );
    assert_eq!(env.records.len(), 1);
}

#[test]
fn vm_rejects_bad_parameters() {
    let mut s = vec![0u8; 16];
    assert_eq!(
        Vm::new(&mut VmState::new(), &mut s, 0, 0).err(),
        Some(VmError::BadParams)
    );
    assert_eq!(
        Vm::new(&mut VmState::new(), &mut s, 0, 32).err(),
        Some(VmError::ScratchTooSmall)
    );
    // Checked once, as LOAD does: the same refusals, the scratch still checked per VM.
    assert_eq!(VmParams::new(MAX_LOCALS + 1, 32), Err(VmError::BadParams));
    assert_eq!(VmParams::new(0, MAX_STRSIZE + 1), Err(VmError::BadParams));
    let p = VmParams::new(2, 32).unwrap();
    assert_eq!(
        Vm::with(&mut VmState::new(), &mut s, &p).err(),
        Some(VmError::ScratchTooSmall)
    );
    let mut s = vec![0u8; scratch_size(2, 32, 1)];
    assert!(Vm::with(&mut VmState::new(), &mut s, &p).is_ok());
}

#[test]
fn vm_too_small_scratch_faults_instead_of_overrunning() {
    let d = TDict::default();
    let b = code_bytes(&[insn(Op::Ldbs, 1, 0, 0, Builtin::Execname as u32), RET0]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    let mut scratch = vec![0u8; scratch_size(d.nlocals, d.strsize, 0)];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    assert_eq!(
        vm.run(&v, &d, &mut TEnv::default()),
        Err(Fault {
            pc: 0,
            kind: FaultKind::ScratchExhausted
        })
    );
}

#[test]
fn items_decoder_rejects_truncated_data() {
    let mut it = Items::new(&[ITEM_STR, 5, 0, b'a']);
    assert_eq!(it.next(), None);
    assert!(it.bad);
    let mut it = Items::new(&[0x42]);
    assert_eq!(it.next(), None);
    assert!(it.bad);
}

#[test]
fn run_ptwrite_values_in_order_and_losses_counted() {
    let d = TDict::default();
    let mut env = TEnv {
        ptw_cap: 2,
        ..TEnv::default()
    };
    let b = code_bytes(&[
        ldi(1, 7),
        insn(Op::Ptwrite, 0, 1, 0, 0),
        ldi(1, -1),
        insn(Op::Ptwrite, 0, 1, 0, 0),
        insn(Op::Ptwrite, 0, 1, 0, 0),
        RET0,
    ]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    let mut scratch = vec![0u8; scratch_size(d.nlocals, d.strsize, 0)];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    assert_eq!(vm.run(&v, &d, &mut env), Ok(0));
    assert_eq!(env.ptw, vec![7, u64::MAX]);
    assert_eq!(vm.losses().ptwrites, 1);
}

#[test]
fn verify_ptwrite_shape() {
    let d = TDict::default();
    // ptwrite writes no register: rd must be 0; imm must be 0.
    for w in [insn(Op::Ptwrite, 1, 1, 0, 0), insn(Op::Ptwrite, 0, 1, 0, 1)] {
        let b = code_bytes(&[w, RET0]);
        assert!(verify(Code::new(&b).unwrap(), &d, LIMIT).is_err());
    }
    assert_eq!(Op::from_u8(70), Some(Op::Ptwrite));
    assert_eq!(Op::Ptwrite.name(), "ptwrite");
}

// ---- chkb and string-valued variables -------------------------------------------------

#[test]
fn chkb_faults_at_and_past_the_bound() {
    for (i, ok) in [(0i32, true), (4, true), (5, false), (-1, false)] {
        let (r, _) = run(&[ldi(1, i), insn(Op::Chkb, 0, 1, 0, 5), ret(1)]);
        if ok {
            assert_eq!(r, Ok(i as u64));
        } else {
            assert_eq!(
                r,
                Err(Fault {
                    pc: 1,
                    kind: FaultKind::BadIndex(i as i64 as u64)
                })
            );
        }
    }
    assert_eq!(Op::from_u8(71), Some(Op::Chkb));
    assert_eq!(Op::Chkb.name(), "chkb");
    // Only r1 and the bound are fields.
    assert_eq!(
        rej(&[insn(Op::Chkb, 1, 1, 0, 5), RET0]).reason,
        Reason::ReservedNonZero
    );
}

/// A dictionary whose variable 3 is a string-valued array with one integer key.
fn string_dict() -> TDict {
    let mut d = TDict::default();
    d.vars.push(VarInfo {
        scope: Scope::Assoc,
        keys: KeyLayout::new(1, 0),
        string: true,
    });
    d
}

#[test]
fn string_variables_store_and_load_copies() {
    let d = string_dict();
    let mut env = TEnv::default();
    let key = insn(Op::Pushtv, 0, 2, 0, IntType::I64.0 as u32);
    // v[7] = "hello"; r3 = v[7]; v[7] = "" (deletes); trace(r3); return strlen(r3)
    let code = [
        insn(Op::Sets, 1, 0, 0, 1),
        ldi(2, 7),
        key,
        insn(Op::Stgaa, 0, 1, 0, 3),
        key,
        insn(Op::Ldgaa, 3, 0, 0, 3),
        insn(Op::Sets, 5, 0, 0, 0),
        key,
        insn(Op::Stgaa, 0, 5, 0, 3),
        insn(Op::Pushts, 0, 3, 0, 0),
        insn(Op::Trace, 0, 0, 0, 0),
        insn(Op::Strlen, 4, 3, 0, 0),
        ret(4),
    ];
    assert_eq!(run_with(&code, &d, &mut env), Ok(5));
    assert_eq!(env.records[0].items, vec![OItem::S(b"hello".to_vec())]);
    assert!(env.dyn_str.is_empty(), "the empty string deletes");
    // The verifier counts the load as a string slot.
    let b = code_bytes(&code);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    assert_eq!(v.string_allocs(), 1);
}

#[test]
fn string_variable_store_of_an_integer_faults() {
    let d = string_dict();
    let mut env = TEnv::default();
    let r = run_with(
        &[
            ldi(1, 42),
            insn(Op::Pushtv, 0, 1, 0, IntType::I64.0 as u32),
            insn(Op::Stgaa, 0, 1, 0, 3),
            RET0,
        ],
        &d,
        &mut env,
    );
    assert_eq!(
        r,
        Err(Fault {
            pc: 2,
            kind: FaultKind::BadString
        })
    );
}

#[test]
fn string_variable_loads_are_truncated_to_strsize() {
    let mut d = string_dict();
    d.strsize = 3;
    let mut env = TEnv::default();
    env.dyn_str
        .insert((3, vec![OKey::I(1)]), b"abcdef".to_vec());
    let r = run_with(
        &[
            ldi(1, 1),
            insn(Op::Pushtv, 0, 1, 0, IntType::I64.0 as u32),
            insn(Op::Ldgaa, 2, 0, 0, 3),
            insn(Op::Strlen, 3, 2, 0, 0),
            ret(3),
        ],
        &d,
        &mut env,
    );
    assert_eq!(r, Ok(3));
}

/// Runs `words` as [`run_decoded`] does; whether the program got a shape, what a run
/// did, and the aggregation updates it lost.
fn shaped_run(words: &[u64], dict: &TDict, env: &mut TEnv) -> (bool, Result<u64, Fault>, u64) {
    let (shaped, r, losses) = run_decoded(words, dict, env);
    (shaped, r, losses.aggs)
}

#[test]
fn updates_and_records_of_builtins_run_in_one_step() {
    let dict = TDict {
        aggs: vec![
            KeyLayout::NONE,
            KeyLayout::new(1, 0),
            KeyLayout::new(2, 0),
            KeyLayout::new(1, 0b1),
        ],
        ..TDict::default()
    };
    let pid = Builtin::Pid as u32;
    let arg0 = Builtin::Arg0 as u32;
    let cpu = Builtin::Cpu as u32;
    let mut env = TEnv::default();
    env.builtins.insert(pid, 4242);
    env.builtins.insert(arg0, 17);
    env.builtins.insert(cpu, 3);
    // `@[pid] = count()`, as the compiler emits it.
    let count = [
        insn(Op::Ldb, 1, 0, 0, pid),
        ldi(2, 1),
        insn(Op::Pushtv, 0, 1, 0, 6),
        insn(Op::Agg, 0, 0, 2, 1),
        RET0,
    ];
    // `@ = sum(arg0)`.
    let sum = [
        insn(Op::Ldb, 1, 0, 0, arg0),
        ldi(2, 1),
        insn(Op::Agg, 0, 1, 2, 0),
        RET0,
    ];
    // Two keys from one register reused, and a negative constant.
    let two = [
        insn(Op::Ldb, 1, 0, 0, cpu),
        insn(Op::Pushtv, 0, 1, 0, 3),
        ldi(1, -5),
        insn(Op::Pushtv, 0, 1, 0, 7),
        insn(Op::Ldb, 3, 0, 0, arg0),
        insn(Op::Agg, 0, 3, 1, 2),
        RET0,
    ];
    // `trace(pid)` and `printf("%d %d", arg0, 7)`: records of their types.
    let trace = [
        insn(Op::Ldb, 1, 0, 0, pid),
        insn(Op::Pushtv, 0, 1, 0, 6),
        insn(Op::Trace, 0, 0, 0, 0),
        RET0,
    ];
    let printf = [
        insn(Op::Ldb, 1, 0, 0, arg0),
        insn(Op::Pushtv, 0, 1, 0, 3),
        ldi(2, 7),
        insn(Op::Pushtv, 0, 2, 0, 2),
        insn(Op::Printf, 0, 0, 0, 1),
        RET0,
    ];
    for p in [&count[..], &sum, &two, &trace, &printf] {
        assert_eq!(shaped_run(p, &dict, &mut env), (true, Ok(0), 0));
    }
    assert_eq!(
        env.aggs,
        vec![
            (1, vec![OKey::I(4242)], [0, 1]),
            (0, vec![], [17, 1]),
            (
                2,
                vec![OKey::I(3), OKey::I(-5i64 as u64)],
                [17, -5i64 as u64]
            ),
        ]
    );
    assert_eq!(
        env.records,
        vec![
            ORecord {
                kind: RecordKind::Trace,
                id: 0,
                items: vec![OItem::I(4242, 6)],
            },
            ORecord {
                kind: RecordKind::Printf,
                id: 1,
                items: vec![OItem::I(17, 3), OItem::I(7, 2)],
            },
        ]
    );
    // A refused update is a loss, as from the instruction.
    env.agg_fail = true;
    assert_eq!(shaped_run(&count, &dict, &mut env), (true, Ok(0), 1));
    env.agg_fail = false;
    // A value returned (a predicate's), and a load after the update.
    let returns = [
        insn(Op::Ldb, 1, 0, 0, pid),
        insn(Op::Agg, 0, 1, 0, 0),
        ret(1),
    ];
    assert_eq!(shaped_run(&returns, &dict, &mut env), (true, Ok(4242), 0));
    let after = [
        insn(Op::Agg, 0, 0, 0, 0),
        insn(Op::Ldb, 1, 0, 0, arg0),
        ret(1),
    ];
    assert_eq!(shaped_run(&after, &dict, &mut env), (true, Ok(17), 0));
    // Two updates of their own keys, and a sum of a built-in and a constant.
    let both = [
        insn(Op::Ldb, 1, 0, 0, pid),
        insn(Op::Pushtv, 0, 1, 0, 6),
        ldi(2, 1),
        insn(Op::Agg, 0, 2, 0, 1),
        insn(Op::Ldb, 3, 0, 0, arg0),
        insn(Op::Add, 3, 3, 2, 0),
        insn(Op::Pushtv, 0, 3, 0, 6),
        insn(Op::Pushtv, 0, 2, 0, 6),
        insn(Op::Agg, 0, 3, 0, 2),
        RET0,
    ];
    env.aggs.clear();
    assert_eq!(shaped_run(&both, &dict, &mut env), (true, Ok(0), 0));
    assert_eq!(
        env.aggs,
        vec![
            (1, vec![OKey::I(4242)], [1, 0]),
            (2, vec![OKey::I(18), OKey::I(1)], [18, 0]),
        ]
    );
}

/// The latency script's clauses, as the compiler emits them: `self->ts = timestamp`,
/// `/self->ts/` and `@ = quantize(timestamp - self->ts); self->ts = 0`.
#[test]
fn thread_local_loads_and_stores_run_in_one_step() {
    let dict = TDict::default();
    let ts = Builtin::Timestamp as u32;
    let tid = Builtin::Tid as u32;
    // Variable 1 is thread-local.
    let var = 1;
    let mut env = TEnv {
        dyn_cap: 8,
        ..TEnv::default()
    };
    env.builtins.insert(tid, 77);
    env.builtins.insert(ts, 1000);
    let entry = [
        insn(Op::Ldb, 1, 0, 0, ts),
        insn(Op::Stts, 0, 1, 0, var),
        RET0,
    ];
    let pred = [insn(Op::Ldts, 1, 0, 0, var), ret(1)];
    let body = [
        insn(Op::Ldb, 1, 0, 0, ts),
        insn(Op::Ldts, 2, 0, 0, var),
        insn(Op::Sub, 1, 1, 2, 0),
        ldi(2, 1),
        insn(Op::Agg, 0, 1, 2, 0),
        ldi(2, 0),
        insn(Op::Stts, 0, 2, 0, var),
        RET0,
    ];
    let key = (var, vec![OKey::I(77)]);
    let (shaped, r, losses) = run_decoded(&pred, &dict, &mut env);
    assert_eq!((shaped, r, losses.dynvars), (true, Ok(0), 0));
    assert_eq!(run_decoded(&entry, &dict, &mut env).1, Ok(0));
    assert_eq!(env.dyn_.get(&key), Some(&1000));
    env.builtins.insert(ts, 1250);
    let loads = env.dyn_loads;
    assert_eq!(run_decoded(&pred, &dict, &mut env).1, Ok(1000));
    assert_eq!(env.dyn_loads, loads + 1);
    let (shaped, r, losses) = run_decoded(&body, &dict, &mut env);
    assert_eq!((shaped, r, losses.dynvars), (true, Ok(0), 0));
    assert_eq!(env.aggs, vec![(0, vec![], [250, 1])]);
    assert_eq!(env.dyn_.get(&key), None);
    // A store refused for want of room is a loss, as from the instruction.
    env.dyn_cap = 0;
    let (shaped, r, losses) = run_decoded(&entry, &dict, &mut env);
    assert_eq!((shaped, r, losses.dynvars), (true, Ok(0), 1));
    // A load after a store reads the stored value: the instructions run.
    env.dyn_cap = 8;
    let reload = [
        ldi(1, 5),
        insn(Op::Stts, 0, 1, 0, var),
        insn(Op::Ldts, 2, 0, 0, var),
        ret(2),
    ];
    assert!(!run_decoded(&reload, &dict, &mut env).0);
    assert_eq!(run_decoded(&reload, &dict, &mut env).1, Ok(5));
}

#[test]
fn other_programs_keep_their_instructions() {
    let dict = TDict {
        aggs: vec![
            KeyLayout::NONE,
            KeyLayout::new(1, 0),
            KeyLayout::new(1, 0b1),
        ],
        ..TDict::default()
    };
    let pid = Builtin::Pid as u32;
    let push_pid = [insn(Op::Ldb, 1, 0, 0, pid), insn(Op::Pushtv, 0, 1, 0, 6)];
    let cases: [(&str, Vec<u64>); 6] = [
        // A key with a string component goes through the string path.
        (
            "string key",
            [&push_pid[..], &[insn(Op::Agg, 0, 0, 0, 2), RET0]].concat(),
        ),
        // A tuple that does not match the key faults where the instruction is.
        (
            "key count",
            [&push_pid[..], &[insn(Op::Agg, 0, 0, 0, 0), RET0]].concat(),
        ),
        // Anything but loads, sums and differences: the interpreter runs it.
        (
            "product",
            vec![
                insn(Op::Ldb, 1, 0, 0, pid),
                insn(Op::Mul, 1, 1, 1, 0),
                insn(Op::Agg, 0, 1, 0, 0),
                RET0,
            ],
        ),
        (
            "global",
            vec![insn(Op::Ldgs, 1, 0, 0, 0), insn(Op::Agg, 0, 1, 0, 0), RET0],
        ),
        (
            "branch",
            vec![
                insn(Op::Ldb, 1, 0, 0, pid),
                insn(Op::Bz, 0, 1, 0, 3),
                insn(Op::Agg, 0, 1, 0, 0),
                RET0,
            ],
        ),
        // A tuple pushed and left.
        ("tuple left", [&push_pid[..], &[RET0]].concat()),
    ];
    for (what, words) in cases {
        let mut env = TEnv::default();
        let (shaped, r, _) = shaped_run(&words, &dict, &mut env);
        assert!(!shaped, "{what}");
        // An integer where the key has a string, and a short tuple, fault at `agg`.
        match what {
            "string key" | "key count" => {
                assert_eq!(
                    r.map_err(|f| (f.pc, f.kind)),
                    Err((2, FaultKind::KeyMismatch)),
                    "{what}"
                )
            }
            _ => assert!(r.is_ok(), "{what}"),
        }
    }
}

/// A built-in that faults where read (a USDT operand in unreadable user memory): the
/// interpreter's `ldb` reports the environment's fault; a firing whose arguments may fault
/// (`Vm::with_fallible_args`) runs shapes that read them in the interpreter, so the same
/// program faults there too, where as a shape it would read the infallible `Env::builtin`.
/// A shape that reads no argument still runs as one.
#[test]
fn fallible_argument_faults_outside_shapes() {
    let dict = TDict {
        aggs: vec![KeyLayout::NONE],
        ..TDict::default()
    };
    let arg1 = Builtin::Arg1 as u32;
    // `@ = sum(arg1)`: a shape.
    let sum = [
        insn(Op::Ldb, 1, 0, 0, arg1),
        ldi(2, 1),
        insn(Op::Agg, 0, 1, 2, 0),
        RET0,
    ];
    let b = code_bytes(&sum);
    let v = verify(Code::new(&b).unwrap(), &dict, LIMIT).unwrap();
    let mut buf = vec![DInsn::NOP; sum.len()];
    let v = v.decode_into(&dict, &mut buf).unwrap();
    assert!(v.shaped());
    let mut env = TEnv::default();
    env.faulting.insert(arg1, 16);
    // As a shape: the infallible reading, 11.
    let (r, _) = run_verified_as(&v, &dict, &mut env, true);
    assert_eq!(r, Ok(0));
    assert_eq!(env.aggs, vec![(0, vec![], [11, 1])]);
    // Without shapes: the fault, at the `ldb`, and no update.
    let (r, _) = run_verified_as(&v, &dict, &mut env, false);
    let f = r.unwrap_err();
    assert_eq!((f.kind, f.pc), (FaultKind::BadAddr(16), 0));
    assert_eq!(env.aggs.len(), 1);
    // Other built-ins read as ever.
    env.faulting.clear();
    let (r, _) = run_verified_as(&v, &dict, &mut env, false);
    assert_eq!(r, Ok(0));
    assert_eq!(env.aggs.len(), 2);
    // `@ = sum(pid)` reads no argument: a shape, whose run skips the interpreter's `ldb`,
    // so a faulting `pid` (which no real environment has) shows which path ran.
    let pid = Builtin::Pid as u32;
    let sum_pid = [
        insn(Op::Ldb, 1, 0, 0, pid),
        ldi(2, 1),
        insn(Op::Agg, 0, 1, 2, 0),
        RET0,
    ];
    let b = code_bytes(&sum_pid);
    let v = verify(Code::new(&b).unwrap(), &dict, LIMIT).unwrap();
    let mut buf = vec![DInsn::NOP; sum_pid.len()];
    let v = v.decode_into(&dict, &mut buf).unwrap();
    assert!(v.shaped());
    env.faulting.insert(pid, 16);
    let (r, _) = run_verified_as(&v, &dict, &mut env, false);
    assert_eq!(r, Ok(0));
    assert_eq!(env.aggs.len(), 3);
}
