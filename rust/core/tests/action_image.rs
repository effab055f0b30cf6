// SPDX-License-Identifier: GPL-2.0

//! The program image: builder/parser round trip, precise rejections, and fuzzing.

mod action_support;

use action_support::TEnv;
use oxtrace_core::action::*;
use oxtrace_core::program::*;
use proptest::prelude::*;

const STRTAB: &[u8] = b"\0vfs_read\0ksys_*\0n\0a\0%d %s\\n\0";

fn sample_code() -> Vec<u64> {
    vec![
        // clause 0 predicate: pid == 4242
        insn(Op::Ldb, 1, 0, 0, Builtin::Pid as u32),
        insn(Op::Setx, 2, 0, 0, 0),
        insn(Op::Eq, 3, 1, 2, 0),
        insn(Op::Ret, 0, 3, 0, 0),
        // clause 0 actions: @a[execname] = count(); printf(fmt 0, pid, execname)
        insn(Op::Ldbs, 1, 0, 0, Builtin::Execname as u32),
        insn(Op::Pushts, 0, 1, 0, 0),
        insn(Op::Ldi, 2, 0, 0, 1),
        insn(Op::Agg, 0, 0, 2, 0),
        insn(Op::Ldb, 3, 0, 0, Builtin::Pid as u32),
        insn(Op::Pushtv, 0, 3, 0, IntType::I32.0 as u32),
        insn(Op::Pushts, 0, 1, 0, 0),
        insn(Op::Printf, 0, 0, 0, 0),
        insn(Op::Ret, 0, 0, 0, 0),
        // clause 1 actions: exit(0)
        insn(Op::Exit, 0, 0, 0, 0),
        insn(Op::Ret, 0, 0, 0, 0),
    ]
}

struct Owned {
    probes: Vec<ProbeDesc>,
    clauses: Vec<ClauseDesc>,
    code: Vec<u64>,
    ints: Vec<u64>,
    strtab: Vec<u8>,
    vars: Vec<VarDesc>,
    aggs: Vec<AggDesc>,
    fmts: Vec<FmtDesc>,
    options: Vec<(OptKey, u64)>,
    nlocals: u32,
}

fn sample() -> Owned {
    Owned {
        probes: vec![
            ProbeDesc {
                kind: ProbeKind::FbtEntry,
                func: 1,
                arg: 0,
            },
            ProbeDesc {
                kind: ProbeKind::FbtReturn,
                func: 10,
                arg: 0,
            },
            ProbeDesc {
                kind: ProbeKind::Tick,
                func: 0,
                arg: 1_000_000_000,
            },
        ],
        clauses: vec![
            ClauseDesc {
                probe_first: 0,
                probe_count: 2,
                pred_start: 0,
                pred_len: 4,
                act_start: 4,
                act_len: 9,
            },
            ClauseDesc {
                probe_first: 2,
                probe_count: 1,
                pred_start: 0,
                pred_len: 0,
                act_start: 13,
                act_len: 2,
            },
        ],
        code: sample_code(),
        ints: vec![4242],
        strtab: STRTAB.to_vec(),
        vars: vec![VarDesc {
            name: 17,
            scope: Scope::Thread,
            keys: KeyLayout::NONE,
            string: false,
        }],
        aggs: vec![AggDesc {
            name: 19,
            func: AggKind::Lquantize,
            keys: KeyLayout::new(1, 1),
            params: [0, 100, 10, 0],
        }],
        fmts: vec![FmtDesc { fmt: 21 }],
        options: vec![(OptKey::Strsize, 64), (OptKey::Bufsize, 1 << 16)],
        nlocals: 2,
    }
}

impl Owned {
    fn parts(&self) -> Parts<'_> {
        Parts {
            probes: &self.probes,
            clauses: &self.clauses,
            code: &self.code,
            ints: &self.ints,
            strtab: &self.strtab,
            vars: &self.vars,
            aggs: &self.aggs,
            fmts: &self.fmts,
            options: &self.options,
            nlocals: self.nlocals,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let p = self.parts();
        let mut out = vec![0u8; p.encoded_len()];
        let n = p.write(&mut out).unwrap();
        assert_eq!(n, out.len());
        out
    }
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn sec_off(b: &[u8], s: Section) -> usize {
    u32::from_le_bytes(
        b[16 + 8 * s as usize..20 + 8 * s as usize]
            .try_into()
            .unwrap(),
    ) as usize
}

#[test]
fn round_trip() {
    let o = sample();
    let b = o.bytes();
    let img = Image::parse(&b).unwrap();
    assert_eq!(img.probe_count(), 3);
    assert_eq!(img.probe(0), Some(o.probes[0]));
    assert_eq!(img.probe(2), Some(o.probes[2]));
    assert_eq!(img.probe_func(1), Some(&b"ksys_*"[..]));
    assert_eq!(img.clause_count(), 2);
    assert_eq!(img.clause(1), Some(o.clauses[1]));
    assert_eq!(img.var_desc(0), Some(o.vars[0]));
    assert_eq!(img.agg_desc(0), Some(o.aggs[0]));
    assert_eq!(img.fmt_str(0), Some(&b"%d %s\\n"[..]));
    assert_eq!(img.int_at(0), Some(4242));
    assert_eq!(img.nlocals(), 2);
    let opts = img.options();
    assert_eq!(opts.strsize, 64);
    assert_eq!(opts.bufsize, 1 << 16);
    assert_eq!(opts.dynvarsize, Options::default().dynvarsize);
    assert_eq!(img.strsize(), 64);
}

#[test]
fn verify_and_run_clauses_from_image() {
    let o = sample();
    let b = o.bytes();
    let img = Image::parse(&b).unwrap();
    let need = img.verify(1 << 20).unwrap();
    let c0 = img.verify_clause(0, 1 << 20).unwrap();
    assert!(need >= c0.scratch);
    let mut scratch = vec![0u8; need];
    let mut vmst = VmState::new();
    let mut vm = Vm::new(&mut vmst, &mut scratch, img.nlocals(), img.strsize()).unwrap();
    let mut env = TEnv::default();
    vm.begin_clause();
    assert_eq!(vm.run(c0.pred.as_ref().unwrap(), &img, &mut env), Ok(1));
    assert_eq!(vm.run(&c0.act, &img, &mut env), Ok(0));
    assert_eq!(env.aggs.len(), 1);
    assert_eq!(env.records.len(), 1);
    assert_eq!(env.records[0].kind, RecordKind::Printf);
}

#[test]
fn verify_reports_clause_part_and_instruction() {
    let mut o = sample();
    o.code[9] = insn(Op::Pushtv, 0, 3, 0, 9);
    let b = o.bytes();
    let img = Image::parse(&b).unwrap();
    assert_eq!(
        img.verify(1 << 20),
        Err(LoadError {
            clause: 0,
            part: Part::Actions,
            error: VerifyError {
                index: 5,
                reason: Reason::BadType(9)
            },
        })
    );
    let mut o = sample();
    o.code[1] = insn(Op::Setx, 2, 0, 0, 1);
    let b = o.bytes();
    let e = Image::parse(&b).unwrap().verify(1 << 20).unwrap_err();
    assert_eq!((e.clause, e.part, e.error.index), (0, Part::Predicate, 1));
}

#[test]
fn rejects_header_faults() {
    let good = sample().bytes();
    assert_eq!(Image::parse(&good[..50]).err(), Some(ImageError::TooShort));
    let mut b = good.clone();
    b[0] = b'X';
    assert_eq!(Image::parse(&b).err(), Some(ImageError::BadMagic));
    let mut b = good.clone();
    b[4] = 9;
    assert_eq!(Image::parse(&b).err(), Some(ImageError::BadVersion(9)));
    let mut b = good.clone();
    b[6] = 80;
    assert_eq!(Image::parse(&b).err(), Some(ImageError::BadHeaderSize(80)));
    let mut b = good.clone();
    b.extend_from_slice(&[0; 8]);
    assert!(matches!(
        Image::parse(&b),
        Err(ImageError::SizeMismatch { .. })
    ));
    let mut b = good.clone();
    put_u32(&mut b, 12, MAX_LOCALS + 1);
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::TooManyLocals(MAX_LOCALS + 1))
    );
    let mut b = good.clone();
    b[90] = 1;
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::ReservedNonZero(88))
    );
    let big = vec![0u8; MAX_IMAGE_SIZE + 1];
    assert_eq!(Image::parse(&big).err(), Some(ImageError::TooLarge));
}

#[test]
fn rejects_section_faults() {
    let good = sample().bytes();
    let mut b = good.clone();
    let o = sec_off(&b, Section::Code);
    put_u32(&mut b, 16 + 8 * Section::Code as usize, o as u32 + 4);
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::SectionMisaligned(Section::Code))
    );
    let mut b = good.clone();
    put_u32(&mut b, 16 + 8 * Section::Clauses as usize, 0);
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::SectionOverlap(Section::Clauses))
    );
    let mut b = good.clone();
    put_u32(&mut b, 20 + 8 * Section::Options as usize, 1 << 20);
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::SectionOutOfBounds(Section::Options))
    );
    let mut b = good.clone();
    put_u32(&mut b, 20 + 8 * Section::Aggs as usize, 40);
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::SectionLength(Section::Aggs))
    );
    let mut b = good.clone();
    let s = sec_off(&b, Section::Strtab);
    b[s] = b'x';
    assert_eq!(Image::parse(&b).err(), Some(ImageError::BadStrtab));
}

#[test]
fn rejects_bad_probes() {
    let mut o = sample();
    o.probes[1].func = 3;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadProbe {
            index: 1,
            why: ProbeFault::FuncOffset
        })
    );
    let mut o = sample();
    o.probes[0].func = 0;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadProbe {
            index: 0,
            why: ProbeFault::FuncPattern
        })
    );
    let mut o = sample();
    o.probes[0].func = 21; // "%d %s\n": not a function pattern
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadProbe {
            index: 0,
            why: ProbeFault::FuncPattern
        })
    );
    let mut o = sample();
    o.probes[2].arg = 10;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadProbe {
            index: 2,
            why: ProbeFault::TickPeriod
        })
    );
    let mut o = sample();
    o.probes[2] = ProbeDesc {
        kind: ProbeKind::Begin,
        func: 0,
        arg: 5,
    };
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadProbe {
            index: 2,
            why: ProbeFault::Field
        })
    );
    let mut b = sample().bytes();
    let p = sec_off(&b, Section::Probes);
    put_u32(&mut b, p + 24, 77);
    let e = Image::parse(&b).err();
    assert_eq!(
        e,
        Some(ImageError::BadProbe {
            index: 1,
            why: ProbeFault::Kind(77)
        })
    );
}

#[test]
fn provider_probes() {
    // STRTAB: 1 "vfs_read", 10 "ksys_*", 17 "n", 21 "%d %s\n".
    let with = |p: ProbeDesc| {
        let mut o = sample();
        o.probes[2] = p;
        Image::parse(&o.bytes()).err()
    };
    let bad = |why| Some(ImageError::BadProbe { index: 2, why });
    let sys = |kind, func, arg| ProbeDesc { kind, func, arg };
    assert_eq!(with(sys(ProbeKind::SyscallEntry, 1, 0)), None);
    assert_eq!(with(sys(ProbeKind::SyscallReturn, 17, 1023)), None);
    assert_eq!(
        with(sys(ProbeKind::SyscallEntry, 1, 1024)),
        bad(ProbeFault::Field)
    );
    // A syscall is named, not globbed.
    assert_eq!(
        with(sys(ProbeKind::SyscallEntry, 10, 0)),
        bad(ProbeFault::FuncPattern)
    );
    assert_eq!(with(sys(ProbeKind::Profile, 0, 1_000_000)), None);
    assert_eq!(
        with(sys(ProbeKind::Profile, 0, 10)),
        bad(ProbeFault::TickPeriod)
    );
    assert_eq!(
        with(sys(ProbeKind::Profile, 1, 1_000_000)),
        bad(ProbeFault::Field)
    );
    // A tracepoint is SUBSYS:EVENT.
    assert_eq!(
        with(sys(ProbeKind::Tracepoint, 1, 301)),
        bad(ProbeFault::FuncPattern)
    );
}

#[test]
fn rejects_bad_clauses() {
    let mut o = sample();
    o.clauses[1].probe_count = 2;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadClause {
            index: 1,
            why: ClauseFault::Probes
        })
    );
    let mut o = sample();
    o.clauses[0].pred_start = 14;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadClause {
            index: 0,
            why: ClauseFault::PredRange
        })
    );
    let mut o = sample();
    o.clauses[1].act_len = 0;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadClause {
            index: 1,
            why: ClauseFault::ActRange
        })
    );
    let mut o = sample();
    o.clauses.clear();
    assert_eq!(Image::parse(&o.bytes()).err(), Some(ImageError::NoClauses));
}

#[test]
fn rejects_bad_dictionaries() {
    let mut o = sample();
    o.vars[0].keys = KeyLayout::new(1, 0);
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadVar {
            index: 0,
            why: DictFault::Keys
        })
    );
    let mut o = sample();
    o.vars[0].name = 4;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadVar {
            index: 0,
            why: DictFault::Name
        })
    );
    let mut b = sample().bytes();
    let v = sec_off(&b, Section::Vars);
    put_u32(&mut b, v, 3);
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::BadVar {
            index: 0,
            why: DictFault::Id
        })
    );
    let mut b = sample().bytes();
    put_u32(&mut b, v + 4, 3);
    let e = Image::parse(&b).err();
    assert_eq!(
        e,
        Some(ImageError::BadVar {
            index: 0,
            why: DictFault::Kind
        })
    );
    // The string flag is for associative arrays only; a flag bit past it is invalid.
    let mut o = sample();
    o.vars[0].string = true;
    assert_eq!(
        Image::parse(&o.bytes()).err(),
        Some(ImageError::BadVar {
            index: 0,
            why: DictFault::Kind
        })
    );
    let mut b = sample().bytes();
    put_u32(&mut b, v + 4, 1 | (2 << 8));
    assert_eq!(
        Image::parse(&b).err(),
        Some(ImageError::BadVar {
            index: 0,
            why: DictFault::Kind
        })
    );
    let mut o = sample();
    o.vars[0] = VarDesc {
        name: o.vars[0].name,
        scope: Scope::Assoc,
        keys: KeyLayout::new(1, 1),
        string: true,
    };
    let img_bytes = o.bytes();
    let img = Image::parse(&img_bytes).expect("a string-valued array is valid");
    assert!(img.var_desc(0).unwrap().string);
    let mut o = sample();
    o.aggs[0].params = [100, 0, 10, 0];
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadAggParams {
            index: 0,
            why: oxtrace_core::agg::ParamError::LqHighNotAboveLow
        })
    );
    let mut o = sample();
    o.aggs[0].keys = KeyLayout::new(9, 0);
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadAgg {
            index: 0,
            why: DictFault::Keys
        })
    );
    let mut o = sample();
    o.fmts[0].fmt = 1000;
    assert_eq!(Image::parse(&o.bytes()).err(), Some(ImageError::BadFmt(0)));
}

#[test]
fn rejects_bad_options() {
    let mut o = sample();
    o.options.push((OptKey::Strsize, 32));
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadOption {
            index: 2,
            why: OptionFault::Duplicate
        })
    );
    let mut o = sample();
    o.options[1].1 = oxtrace_core::limits::MAX_BUFSIZE + 1;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadOption {
            index: 1,
            why: OptionFault::Range
        })
    );
    let mut b = sample().bytes();
    let s = sec_off(&b, Section::Options);
    put_u32(&mut b, s, 99);
    let e = Image::parse(&b).err();
    assert_eq!(
        e,
        Some(ImageError::BadOption {
            index: 0,
            why: OptionFault::Key(99)
        })
    );
}

#[test]
fn small_sizes_round_up_and_small_strsize_is_refused() {
    use oxtrace_core::limits::{MIN_BUFSIZE, MIN_STRSIZE};
    let mut o = sample();
    o.options[1].1 = 12;
    let b = o.bytes();
    let img = Image::parse(&b).unwrap();
    assert_eq!(img.options().get(OptKey::Bufsize), MIN_BUFSIZE);
    let mut o = sample();
    o.options[0].1 = u64::from(MIN_STRSIZE) - 1;
    let e = Image::parse(&o.bytes()).err();
    assert_eq!(
        e,
        Some(ImageError::BadOption {
            index: 0,
            why: OptionFault::Range
        })
    );
    for k in [
        OptKey::Bufsize,
        OptKey::Aggsize,
        OptKey::Dynvarsize,
        OptKey::Specsize,
    ] {
        assert_eq!(k.round_up(0), k.range().0);
        assert_eq!(k.round_up(k.range().0 + 1), k.range().0 + 1);
    }
    assert_eq!(OptKey::Strsize.round_up(1), 1);
}

#[test]
fn agg_parameter_rules() {
    assert!(agg_params_valid(AggKind::Count, &[0; 4]));
    assert!(!agg_params_valid(AggKind::Sum, &[1, 0, 0, 0]));
    assert!(agg_params_valid(AggKind::Lquantize, &[-10, 10, 1, 0]));
    assert!(!agg_params_valid(AggKind::Lquantize, &[0, 10, 0, 0]));
    assert!(!agg_params_valid(AggKind::Lquantize, &[0, 10, 20, 0]));
    assert!(!agg_params_valid(
        AggKind::Lquantize,
        &[i64::MIN, i64::MAX, 1, 0]
    ));
    assert!(agg_params_valid(AggKind::Llquantize, &[10, 0, 6, 20]));
    assert!(!agg_params_valid(AggKind::Llquantize, &[1, 0, 6, 20]));
    assert!(!agg_params_valid(AggKind::Llquantize, &[10, 0, 30, 10]));
    assert!(!agg_params_valid(AggKind::Llquantize, &[10, 0, 6, 15]));
}

#[test]
fn builder_reports_small_buffer() {
    let o = sample();
    let mut out = vec![0u8; 10];
    assert_eq!(o.parts().write(&mut out), Err(BuildError::BufferTooSmall));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics_on_random_bytes(b in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(img) = Image::parse(&b) {
            let _ = img.verify(1 << 20);
        }
    }

    #[test]
    fn parser_never_panics_on_corrupted_images(
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
        do_cut in any::<bool>(),
    ) {
        let mut b = sample().bytes();
        for (at, v) in edits {
            let i = at % b.len();
            b[i] = v;
        }
        if do_cut {
            b.truncate(cut % (b.len() + 1));
        }
        if let Ok(img) = Image::parse(&b) {
            for i in 0..img.clause_count() {
                if let Ok(c) = img.verify_clause(i, 1 << 20) {
                    let mut scratch = vec![0u8; c.scratch];
                    let mut vmst = VmState::new();
                    let mut vm = Vm::new(&mut vmst, &mut scratch, img.nlocals(), img.strsize()).unwrap();
                    let mut env = TEnv::default();
                    vm.begin_clause();
                    if let Some(p) = c.pred {
                        let r = vm.run(&p, &img, &mut env);
                        prop_assert!(r.map_err(|f| f.kind) != Err(FaultKind::Invalid));
                    }
                    let r = vm.run(&c.act, &img, &mut env);
                    prop_assert!(r.map_err(|f| f.kind) != Err(FaultKind::Invalid));
                }
            }
        }
    }

    #[test]
    fn round_trip_random_tables(
        ints in prop::collection::vec(any::<u64>(), 0..20),
        names in prop::collection::vec("[a-z_]{1,12}", 1..10),
        nlocals in 0u32..=MAX_LOCALS,
        strsize in oxtrace_core::limits::MIN_STRSIZE as u64..=MAX_STRSIZE as u64,
        scopes in prop::collection::vec(0u32..3, 0..10),
    ) {
        let mut strtab = vec![0u8];
        let mut offs = vec![];
        for n in &names {
            offs.push(strtab.len() as u32);
            strtab.extend_from_slice(n.as_bytes());
            strtab.push(0);
        }
        let vars: Vec<VarDesc> = scopes
            .iter()
            .enumerate()
            .map(|(i, &s)| VarDesc {
                name: offs[i % offs.len()],
                scope: Scope::from_u32(s).unwrap(),
                keys: if s == 2 { KeyLayout::new(2, 0b10) } else { KeyLayout::NONE },
                string: false,
            })
            .collect();
        let o = Owned {
            probes: vec![ProbeDesc { kind: ProbeKind::FbtEntry, func: offs[0], arg: 0 }],
            clauses: vec![ClauseDesc {
                probe_first: 0, probe_count: 1, pred_start: 0, pred_len: 0, act_start: 0, act_len: 1,
            }],
            code: vec![insn(Op::Ret, 0, 0, 0, 0)],
            ints: ints.clone(),
            strtab,
            vars: vars.clone(),
            aggs: vec![],
            fmts: offs.iter().map(|&fmt| FmtDesc { fmt }).collect(),
            options: vec![(OptKey::Strsize, strsize)],
            nlocals,
        };
        let b = o.bytes();
        let img = Image::parse(&b).unwrap();
        prop_assert_eq!(img.int_count(), ints.len() as u32);
        for (i, v) in ints.iter().enumerate() {
            prop_assert_eq!(img.int_at(i as u32), Some(*v));
        }
        for (i, v) in vars.iter().enumerate() {
            prop_assert_eq!(img.var_desc(i as u32), Some(*v));
        }
        for (i, n) in names.iter().enumerate() {
            prop_assert_eq!(img.fmt_str(i as u32), Some(n.as_bytes()));
        }
        prop_assert_eq!(img.nlocals(), nlocals);
        prop_assert_eq!(img.options().strsize, strsize);
        prop_assert!(img.verify(usize::MAX).is_ok());
    }
}
