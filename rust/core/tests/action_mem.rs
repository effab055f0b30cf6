// SPDX-License-Identifier: GPL-2.0

//! Scratch memory opcodes: the verifier's reservation and operand rules, and the
//! interpreter's bounds (allocation, stores only into what the clause allocated).

mod action_support;

use action_support::*;
use oxtrace_core::action::*;

const RET0: u64 = insn(Op::Ret, 0, 0, 0, 0);

fn ldi(rd: u8, v: i32) -> u64 {
    insn(Op::Ldi, rd, 0, 0, v as u32)
}

/// Verifies `words` and runs them over a scratch of exactly the size LOAD would give.
fn run_sized(words: &[u64], env: &mut TEnv) -> Result<u64, Fault> {
    let d = TDict::default();
    let b = code_bytes(words);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).expect("program must verify");
    let need =
        scratch_size(d.nlocals, d.strsize, v.string_allocs()) + scratch_mem(&d, v.mem_sites());
    let mut scratch = vec![0u8; need];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    vm.run(&v, &d, env)
}

#[test]
fn the_verifier_reserves_scratchsize_alignment_and_header_per_site() {
    let d = TDict::default();
    assert_eq!(scratch_mem(&d, 0), 0);
    assert_eq!(scratch_mem(&d, 2), 256 + 32);
    let b = code_bytes(&[
        ldi(1, 8),
        insn(Op::Alloca, 2, 1, 0, 0),
        insn(Op::Copyin, 3, 1, 1, 0),
        RET0,
    ]);
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    assert_eq!(v.mem_sites(), 2);
    // A limit that cannot hold the reservation refuses the program at its instruction.
    let tight = scratch_size(d.nlocals, d.strsize, 0) + 100;
    let e = verify(Code::new(&b).unwrap(), &d, tight).unwrap_err();
    assert_eq!((e.index, e.reason), (1, Reason::ScratchTooLarge));
}

#[test]
fn operand_rules_of_the_new_opcodes() {
    for (w, reason) in [
        (insn(Op::Stx, 1, 1, 2, 0), Reason::ReservedNonZero),
        (insn(Op::Bcopy, 0, 1, 2, 16), Reason::BadImmRegister(16)),
        (insn(Op::Copyinto, 0, 1, 2, 99), Reason::BadImmRegister(99)),
        (insn(Op::Alloca, 0, 1, 0, 0), Reason::WritesR0),
        (insn(Op::Uregs, 1, 1, 0, 3), Reason::ReservedNonZero),
    ] {
        let e = check(&[w, RET0], &TDict::default()).unwrap_err();
        assert_eq!(e.reason, reason, "{w:#x}");
    }
}

#[test]
fn all_of_scratchsize_fits_and_one_byte_more_faults() {
    let mut env = TEnv::default();
    // alloca(1) misaligns the bump pointer; alloca(255) still fits exactly.
    let r = run_sized(
        &[
            ldi(1, 1),
            insn(Op::Alloca, 2, 1, 0, 0),
            ldi(1, 255),
            insn(Op::Alloca, 3, 1, 0, 0),
            ldi(4, -1),
            insn(Op::Stb, 0, 3, 4, 254),
            insn(Op::Ldub, 5, 3, 0, 254),
            insn(Op::Ret, 0, 5, 0, 0),
        ],
        &mut env,
    );
    assert_eq!(r, Ok(255));
    let r = run_sized(
        &[
            ldi(1, 200),
            insn(Op::Alloca, 2, 1, 0, 0),
            ldi(1, 57),
            insn(Op::Alloca, 3, 1, 0, 0),
            RET0,
        ],
        &mut env,
    );
    assert_eq!(r.unwrap_err().kind, FaultKind::ScratchExhausted);
    let r = run_sized(&[ldi(1, -1), insn(Op::Alloca, 2, 1, 0, 0), RET0], &mut env);
    assert_eq!(r.unwrap_err().kind, FaultKind::ScratchExhausted);
}

#[test]
fn stores_go_only_where_the_clause_allocated() {
    let mut env = TEnv::default();
    // One byte past an 8-byte allocation, and a kernel address.
    let r = run_sized(
        &[
            ldi(1, 8),
            insn(Op::Alloca, 2, 1, 0, 0),
            insn(Op::Stw, 0, 2, 1, 5),
            RET0,
        ],
        &mut env,
    );
    assert!(matches!(r.unwrap_err().kind, FaultKind::BadAddr(_)));
    let r = run_sized(&[ldi(1, 0x1000), insn(Op::Stx, 0, 1, 1, 0), RET0], &mut env);
    assert_eq!(r.unwrap_err().kind, FaultKind::BadAddr(0x1000));
    // bcopy's destination is checked the same way, its source read as kernel memory.
    let r = run_sized(
        &[ldi(1, 0x1000), ldi(3, 8), insn(Op::Bcopy, 0, 3, 3, 1), RET0],
        &mut env,
    );
    assert_eq!(r.unwrap_err().kind, FaultKind::BadAddr(0x1000));
}

#[test]
fn uregs_checks_the_index() {
    let mut env = TEnv::default();
    let r = run_sized(&[ldi(1, 26), insn(Op::Uregs, 2, 1, 0, 0), RET0], &mut env);
    assert_eq!(r.unwrap_err().kind, FaultKind::IllegalOp);
    // The test environment has no user thread: 0.
    let r = run_sized(
        &[
            ldi(1, 16),
            insn(Op::Uregs, 2, 1, 0, 0),
            insn(Op::Ret, 0, 2, 0, 0),
        ],
        &mut env,
    );
    assert_eq!(r, Ok(0));
}

/// Fills 8 allocated bytes at r2 with 0xff, stores the string in r1 into the first `n` of
/// them with `bcopy`, and returns the 8 bytes.
fn string_store(src: &[u64], n: i32) -> Result<[u8; 8], Fault> {
    let mut w = vec![
        ldi(5, 8),
        insn(Op::Alloca, 2, 5, 0, 0),
        insn(Op::Setx, 3, 0, 0, 1),
        insn(Op::Stx, 0, 2, 3, 0),
    ];
    w.extend_from_slice(src);
    w.extend([
        ldi(4, n),
        insn(Op::Bcopy, 0, 1, 4, 2),
        insn(Op::Ldx, 6, 2, 0, 0),
        insn(Op::Ret, 0, 6, 0, 0),
    ]);
    run_sized(&w, &mut TEnv::default()).map(u64::to_le_bytes)
}

#[test]
fn bcopy_of_a_string_reference_is_a_bounded_string_store() {
    let hello = [insn(Op::Sets, 1, 0, 0, 1)];
    // Truncated to n - 1 bytes and a NUL; the bytes past n untouched.
    assert_eq!(string_store(&hello, 4), Ok(*b"hel\0\xff\xff\xff\xff"));
    // Shorter than n: NULs up to n.
    assert_eq!(string_store(&hello, 8), Ok(*b"hello\0\0\0"));
    assert_eq!(string_store(&hello, 6), Ok(*b"hello\0\xff\xff"));
    // n = 1 holds the NUL only, n = 0 nothing.
    assert_eq!(
        string_store(&hello, 1),
        Ok(*b"\0\xff\xff\xff\xff\xff\xff\xff")
    );
    assert_eq!(string_store(&hello, 0), Ok([0xff; 8]));
    // A string in a scratch slot.
    let joined = [
        insn(Op::Sets, 1, 0, 0, 1),
        insn(Op::Sets, 7, 0, 0, 7),
        insn(Op::Strjoin, 1, 1, 7, 0),
    ];
    assert_eq!(string_store(&joined, 8), Ok(*b"hellowo\0"));
    // A reference to no string.
    let bad = [insn(Op::Setx, 1, 0, 0, 2)];
    let mut d = TDict::default();
    d.ints.push(str_ref(STR_SPACE_TABLE, 999));
    let b = code_bytes(
        &[
            &[ldi(5, 8), insn(Op::Alloca, 2, 5, 0, 0)][..],
            &bad[..],
            &[ldi(4, 8), insn(Op::Bcopy, 0, 1, 4, 2), RET0][..],
        ]
        .concat(),
    );
    let v = verify(Code::new(&b).unwrap(), &d, LIMIT).unwrap();
    let need =
        scratch_size(d.nlocals, d.strsize, v.string_allocs()) + scratch_mem(&d, v.mem_sites());
    let mut scratch = vec![0u8; need];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    let r = vm.run(&v, &d, &mut TEnv::default());
    assert_eq!(r.unwrap_err().kind, FaultKind::BadString);
    // The destination is checked as for any store, the whole n bytes.
    assert!(matches!(
        string_store(&hello, 9).unwrap_err().kind,
        FaultKind::BadAddr(_)
    ));
    let r = run_sized(
        &[
            insn(Op::Sets, 1, 0, 0, 1),
            ldi(2, 0x1000),
            ldi(4, 4),
            insn(Op::Bcopy, 0, 1, 4, 2),
            RET0,
        ],
        &mut TEnv::default(),
    );
    assert_eq!(r.unwrap_err().kind, FaultKind::BadAddr(0x1000));
}

/// `pushtm` of `(addr, dynamic size)` with static size `max`, then `trace`: the record's
/// items, or the fault.
fn traced_mem(addr: i32, dynsize: i32, max: u32) -> Result<Vec<OItem>, Fault> {
    let mut env = TEnv::default();
    run_sized(
        &[
            ldi(1, addr),
            ldi(2, dynsize),
            insn(Op::Pushtm, 0, 1, 2, max),
            insn(Op::Trace, 0, 0, 0, 0),
            RET0,
        ],
        &mut env,
    )?;
    Ok(env.records[0].items.clone())
}

#[test]
fn pushtm_records_memory_bounded_by_its_static_size() {
    assert_eq!(
        traced_mem(0x1010, 4, 4),
        Ok(vec![OItem::M(vec![16, 17, 18, 19])])
    );
    // A smaller dynamic size wins; a larger or negative one takes the static size.
    assert_eq!(traced_mem(0x1010, 2, 4), Ok(vec![OItem::M(vec![16, 17])]));
    assert_eq!(
        traced_mem(0x1010, 9, 4),
        Ok(vec![OItem::M(vec![16, 17, 18, 19])])
    );
    assert_eq!(
        traced_mem(0x1010, -1, 4),
        Ok(vec![OItem::M(vec![16, 17, 18, 19])])
    );
    assert_eq!(traced_mem(0x1010, 0, 4), Ok(vec![OItem::M(vec![])]));
}

#[test]
fn pushtm_of_unreadable_or_oversized_memory_faults() {
    let fault = |kind| Err(Fault { pc: 3, kind });
    assert_eq!(traced_mem(0x10, 4, 4), fault(FaultKind::BadAddr(0x10)));
    // More than the record buffer holds.
    let big = record_buf_size(TDict::default().strsize) as u32;
    assert_eq!(
        traced_mem(0x1000, big as i32, big),
        fault(FaultKind::ScratchExhausted)
    );
}

#[test]
fn pushtm_reads_scratch_memory_the_clause_allocated() {
    let mut env = TEnv::default();
    let r = run_sized(
        &[
            ldi(1, 8),
            insn(Op::Alloca, 2, 1, 0, 0),
            ldi(3, 0x0201),
            insn(Op::Sth, 0, 2, 3, 0),
            insn(Op::Pushtm, 0, 2, 1, 3),
            insn(Op::Trace, 0, 0, 0, 0),
            RET0,
        ],
        &mut env,
    );
    assert_eq!(r, Ok(0));
    assert_eq!(env.records[0].items, vec![OItem::M(vec![1, 2, 0])]);
}

/// Runs `words` twice over one scratch of the size LOAD would give (so both runs see the
/// same addresses): `first`, then `words`.
fn run_twice(first: &[u64], words: &[u64]) -> (Result<u64, Fault>, Result<u64, Fault>) {
    let d = TDict::default();
    let (b1, b2) = (code_bytes(first), code_bytes(words));
    let v1 = verify(Code::new(&b1).unwrap(), &d, LIMIT).expect("program must verify");
    let v2 = verify(Code::new(&b2).unwrap(), &d, LIMIT).expect("program must verify");
    let need = scratch_size(d.nlocals, d.strsize, v2.string_allocs())
        + scratch_mem(&d, v2.mem_sites().max(v1.mem_sites()));
    let mut scratch = vec![0u8; need];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, d.nlocals, d.strsize).unwrap();
    vm.begin_clause();
    let r1 = vm.run(&v1, &d, &mut TEnv::default());
    vm.begin_clause();
    let r2 = vm.run(&v2, &d, &mut TEnv::default());
    (r1, r2)
}

#[test]
fn loads_and_stores_stay_in_one_object() {
    // Two 12-byte objects: reading past the first (into the padding and header before the
    // second) faults, as reading before the second does; both objects are readable.
    let allocs = [
        ldi(1, 12),
        insn(Op::Alloca, 2, 1, 0, 0),
        insn(Op::Alloca, 3, 1, 0, 0),
    ];
    for (op, base, off, ok) in [
        (Op::Ldub, 2, 11, true),
        (Op::Ldub, 2, 12, false),
        (Op::Lduw, 2, 8, true),
        (Op::Lduw, 2, 9, false),
        (Op::Ldx, 3, -8, false),
        (Op::Ldub, 3, -1, false),
        (Op::Ldx, 3, 4, true),
    ] {
        let code = [&allocs[..], &[insn(op, 4, base, 0, off as u32), RET0][..]].concat();
        let (_, r) = run_twice(&code, &code);
        assert_eq!(r.is_ok(), ok, "{op:?} r{base}{off:+}: {r:?}");
        if let Err(e) = r {
            assert!(matches!(e.kind, FaultKind::BadAddr(_)), "{e:?}");
        }
    }
}

proptest::proptest! {
    /// Stores (and loads) of 1 to 8 bytes at any offset from either of two objects
    /// succeed exactly when all their bytes are in one object.
    #[test]
    fn accesses_succeed_exactly_inside_an_object(
        a in 0i32..40, b in 0i32..40, second in proptest::bool::ANY,
        off in -48i32..56, w in 0usize..4, load in proptest::bool::ANY,
    ) {
        let allocs = [
            ldi(1, a),
            insn(Op::Alloca, 2, 1, 0, 0),
            ldi(1, b),
            insn(Op::Alloca, 3, 1, 0, 0),
        ];
        // The distance between the objects in this scratch.
        let gap = [&allocs[..], &[insn(Op::Sub, 5, 3, 2, 0), insn(Op::Ret, 0, 5, 0, 0)][..]].concat();
        let size = [1i32, 2, 4, 8][w];
        let base = if second { 3 } else { 2 };
        let op = if load {
            [Op::Ldub, Op::Lduh, Op::Lduw, Op::Ldx][w]
        } else {
            [Op::Stb, Op::Sth, Op::Stw, Op::Stx][w]
        };
        let access = if load {
            insn(op, 4, base, 0, off as u32)
        } else {
            insn(op, 0, base, 1, off as u32)
        };
        let code = [&allocs[..], &[access, RET0][..]].concat();
        let (d, r) = run_twice(&gap, &code);
        let d = d.unwrap() as i64;
        // The access relative to the first object.
        let at = off as i64 + if second { d } else { 0 };
        let end = at + size as i64;
        let in0 = at >= 0 && end <= a as i64;
        let in1 = at >= d && end <= d + b as i64;
        proptest::prop_assert_eq!(r.is_ok(), in0 || in1, "{:?} at {} of {} / {} gap {}: {:?}", op, at, a, b, d, r);
        if let Err(e) = r {
            proptest::prop_assert!(matches!(e.kind, FaultKind::BadAddr(_)), "{:?}", e);
        }
    }
}
