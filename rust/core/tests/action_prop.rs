// SPDX-License-Identifier: GPL-2.0

//! Property tests: random bytecode never panics the verifier or the interpreter; verified
//! programs never reach an instruction the verifier should have rejected and always stop.

mod action_support;

use action_support::*;
use oxtrace_core::action::*;
use proptest::prelude::*;

/// Instruction fields biased towards small, mostly valid values.
fn field() -> impl Strategy<Value = u8> {
    prop_oneof![4 => Just(0u8), 6 => 0u8..16, 1 => any::<u8>()]
}

fn imm() -> impl Strategy<Value = u32> {
    prop_oneof![4 => Just(0u32), 6 => 0u32..24, 1 => any::<u32>(), 1 => Just(8), 1 => Just(32)]
}

fn word() -> impl Strategy<Value = u64> {
    (0u8..NOPS + 3, field(), field(), field(), imm()).prop_map(|(op, rd, r1, r2, imm)| {
        Insn {
            op,
            rd,
            r1,
            r2,
            imm,
        }
        .encode()
    })
}

fn program() -> impl Strategy<Value = Vec<u64>> {
    (prop::collection::vec(word(), 0..48), any::<bool>()).prop_map(|(mut v, end)| {
        if end {
            v.push(insn(Op::Ret, 0, 1, 0, 0));
        }
        v
    })
}

/// A random program whose rejected instructions were replaced by `nop` until it verifies
/// (the end is fixed with a `ret`): rich in valid, randomly shaped instructions.
fn repaired() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(word(), 1..48).prop_map(|mut p| {
        p.push(insn(Op::Ret, 0, 1, 0, 0));
        let d = TDict::default();
        while let Err(e) = check(&p, &d) {
            let i = (e.index as usize).min(p.len() - 1);
            if i == p.len() - 1 && e.reason == Reason::NoReturn {
                p.push(insn(Op::Ret, 0, 0, 0, 0));
            } else {
                p[i] = insn(Op::Nop, 0, 0, 0, 0);
            }
        }
        p
    })
}

fn any_program() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![program(), repaired()]
}

/// Loads of constants and built-in variables (some out of range), pushes (some of a type
/// out of range), an aggregation update (of an aggregation that may not exist), `trace()`
/// or `printf()` (of a format that may not exist) and `ret`, with now and then another
/// instruction.
fn agg_program() -> impl Strategy<Value = Vec<u64>> {
    let reg = 0u8..5;
    // Variable 1 is thread-local; the others are not, and fail verification.
    let var = prop_oneof![4 => Just(1u32), 1 => 0u32..3];
    let step = prop_oneof![
        3 => (reg.clone(), any::<i32>()).prop_map(|(r, k)| insn(Op::Ldi, r, 0, 0, k as u32)),
        3 => (reg.clone(), 0u32..NBUILTINS + 2).prop_map(|(r, b)| insn(Op::Ldb, r, 0, 0, b)),
        3 => (reg.clone(), 0u32..9).prop_map(|(r, t)| insn(Op::Pushtv, 0, r, 0, t)),
        1 => (reg.clone(), reg.clone()).prop_map(|(a, b)| insn(Op::Add, a, a, b, 0)),
        1 => (reg.clone(), reg.clone(), reg.clone())
            .prop_map(|(d, a, b)| insn(Op::Sub, d, a, b, 0)),
        1 => (reg.clone(), reg.clone()).prop_map(|(d, a)| insn(Op::Mov, d, a, 0, 0)),
        2 => (reg.clone(), var.clone()).prop_map(|(r, v)| insn(Op::Ldts, r, 0, 0, v)),
        2 => (reg.clone(), var).prop_map(|(r, v)| insn(Op::Stts, 0, r, 0, v)),
        1 => (reg.clone(), reg.clone(), 0u32..16).prop_map(|(a, b, id)| end(a, b, id)),
    ];
    (
        prop::collection::vec(step, 0..12),
        (reg.clone(), reg.clone(), 0u32..16),
        reg,
    )
        .prop_map(|(mut p, (a, b, id), r)| {
            p.push(end(a, b, id));
            p.push(insn(Op::Ret, 0, r, 0, 0));
            p
        })
}

/// An aggregation update, `trace()` or `printf()`, by `id`.
fn end(a: u8, b: u8, id: u32) -> u64 {
    match id % 4 {
        0 | 1 => insn(Op::Agg, 0, a, b, id),
        2 => insn(Op::Trace, 0, 0, 0, 0),
        _ => insn(Op::Printf, 0, 0, 0, id / 4),
    }
}

/// Key layouts of up to five elements, integers mostly.
fn agg_layouts() -> impl Strategy<Value = Vec<KeyLayout>> {
    prop::collection::vec(
        (0u8..6, prop_oneof![4 => Just(0u16), 1 => 0u16..32])
            .prop_map(|(n, m)| KeyLayout::new(n, m & ((1 << n) - 1))),
        3..5,
    )
}

/// `f` of `p` verified, raw and then decoded as LOAD decodes it; `None` when `p` does not
/// verify.
fn raw_and_decoded<T>(
    p: &[u64],
    dict: &TDict,
    mut f: impl FnMut(&Verified<'_>) -> T,
) -> Option<[T; 2]> {
    let bytes = code_bytes(p);
    let code = Code::new(&bytes).unwrap();
    let v = verify(code, dict, LIMIT).ok()?;
    let mut buf = vec![DInsn::NOP; code.len()];
    let dv = v
        .decode_into(dict, &mut buf)
        .expect("verified code decodes");
    Some([f(&v), f(&dv)])
}

fn rich_env() -> TEnv {
    let mut env = TEnv::default();
    // Make register values that look like addresses readable sometimes.
    env.mem.push((0, vec![7u8; 64]));
    env
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn verifier_and_interpreter_never_panic(p in any_program(), strsize in 1u32..64) {
        let dict = TDict { strsize, ..TDict::default() };
        let bytes = code_bytes(&p);
        let code = Code::new(&bytes).unwrap();
        match verify(code, &dict, LIMIT) {
            Ok(v) => {
                // The only way to run code is through a `Verified`, which only `verify`
                // makes: rejected programs cannot run at all.
                let mut scratch =
                    vec![0u8; scratch_size(dict.nlocals, dict.strsize, v.string_allocs())];
                let mut vmst = VmState::new();
                let mut vm = Vm::new(&mut vmst, &mut scratch, dict.nlocals, dict.strsize).unwrap();
                let mut env = rich_env();
                vm.begin_clause();
                match vm.run(&v, &dict, &mut env) {
                    Ok(_) => {}
                    Err(f) => {
                        // Verified code never meets an invalid instruction or runs short of
                        // the scratch the verifier sized.
                        prop_assert_ne!(f.kind, FaultKind::Invalid);
                        prop_assert_ne!(f.kind, FaultKind::ScratchExhausted);
                        prop_assert!((f.pc as usize) < p.len());
                    }
                }
                // Each instruction runs at most once: emitted records are bounded by length.
                prop_assert!(env.records.len() <= p.len());
            }
            Err(e) => {
                prop_assert!((e.index as usize) <= p.len().max(1));
            }
        }
    }

    /// The predecoded form the kernel runs behaves exactly as the raw code: same result or
    /// fault, same records, aggregations, variables and losses.
    #[test]
    fn decoded_runs_as_raw(p in any_program(), strsize in 1u32..64) {
        let dict = TDict { strsize, ..TDict::default() };
        let out = raw_and_decoded(&p, &dict, |prog| {
            let mut env = rich_env();
            let (r, losses) = run_verified(prog, &dict, &mut env);
            format!(
                "{r:?} {:?} {:?} {:?} {:?} {:?} {losses:?}",
                env.records, env.aggs, env.globals, env.ptw, env.raised
            )
        });
        if let Some([raw, dec]) = out {
            prop_assert_eq!(raw, dec);
        }
    }

    /// Aggregation updates and records of built-in variables and constants (the programs
    /// [`Verified::shaped`] runs in one step), and near misses: the one-step run does what
    /// the instructions do, with room for the update or record and without.
    #[test]
    fn shaped_programs_run_as_raw(p in agg_program(), layouts in agg_layouts()) {
        let dict = TDict { aggs: layouts, ..TDict::default() };
        let out = raw_and_decoded(&p, &dict, |prog| {
            [false, true].map(|full| {
                let mut env = TEnv { agg_fail: full, ..TEnv::default() };
                // A thread-local that exists already, and room for one more (none when
                // full).
                env.dyn_.insert((1, vec![OKey::I(1001)]), 9);
                env.dyn_cap = if full { 0 } else { 2 };
                if full {
                    env.rec_cap = 0;
                }
                for b in 0..NBUILTINS {
                    env.builtins.insert(b, 1000 + u64::from(b));
                }
                let (r, losses) = run_verified(prog, &dict, &mut env);
                let mut dynvars: Vec<_> = env.dyn_.iter().map(|e| format!("{e:?}")).collect();
                dynvars.sort();
                format!(
                    "{r:?} {:?} {:?} {dynvars:?} {} {losses:?}",
                    env.aggs, env.records, env.dyn_loads
                )
            })
        });
        if let Some([raw, dec]) = out {
            prop_assert_eq!(raw, dec);
        }
    }

    #[test]
    fn verifier_never_panics_on_any_bytes(b in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(code) = Code::new(&b) {
            let _ = verify(code, &TDict::default(), LIMIT);
        }
    }

    #[test]
    fn verifier_error_index_points_at_the_breaking_instruction(
        p in prop::collection::vec(word(), 1..32),
        bad in 0usize..32,
    ) {
        // Make a program valid up to `bad`, then put a bad opcode there.
        let mut p: Vec<u64> = p.iter().map(|_| insn(Op::Nop, 0, 0, 0, 0)).collect();
        let bad = bad % p.len();
        p[bad] = 0xfe;
        p.push(insn(Op::Ret, 0, 0, 0, 0));
        let e = check(&p, &TDict::default()).unwrap_err();
        prop_assert_eq!(e, VerifyError { index: bad as u32, reason: Reason::BadOpcode(0xfe) });
    }

    #[test]
    fn interpreter_never_panics_with_mismatched_tables(p in any_program()) {
        // Verify against one dictionary, run against a smaller one: the interpreter must
        // still not panic (it checks every table access).
        let big = TDict::default();
        let small = TDict {
            ints: vec![],
            strtab: vec![0],
            vars: vec![],
            aggs: vec![],
            nfmts: 0,
            nlocals: 4,
            strsize: 32,
        };
        let bytes = code_bytes(&p);
        if let Ok(v) = verify(Code::new(&bytes).unwrap(), &big, LIMIT) {
            let mut scratch = vec![0u8; scratch_size(4, 32, v.string_allocs())];
            let mut vmst = VmState::new();
            let mut vm = Vm::new(&mut vmst, &mut scratch, 4, 32).unwrap();
            vm.begin_clause();
            let _ = vm.run(&v, &small, &mut rich_env());
        }
    }
}

/// The generator must produce verifiable programs often enough for the properties above to
/// exercise the interpreter, not only the verifier.
#[test]
fn random_programs_often_verify() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = any_program();
    let (mut ok, total) = (0, 4000);
    for _ in 0..total {
        let p = strat.new_tree(&mut runner).unwrap().current();
        if check(&p, &TDict::default()).is_ok() {
            ok += 1;
        }
    }
    assert!(
        ok * 3 >= total,
        "only {ok} of {total} random programs verified"
    );
}
