// SPDX-License-Identifier: GPL-2.0

//! Enabled probe IDs (`probe::EpidBases`, `probe::epid`): dense, in program order (by
//! description, then its slots, then its clauses), as the kernel and the tool number them.

use oxtrace_core::action::*;
use oxtrace_core::probe::{self, ClauseEnv, DescEpids, EpidBases};
use oxtrace_core::program::*;

const STRTAB: &[u8] = b"\0f*\0";

fn desc(kind: ProbeKind) -> ProbeDesc {
    ProbeDesc {
        kind,
        func: if kind == ProbeKind::FbtEntry { 1 } else { 0 },
        arg: if kind == ProbeKind::Tick {
            1_000_000
        } else {
            0
        },
    }
}

fn clause(probe_first: u32, probe_count: u32, act_start: u32, act_len: u32) -> ClauseDesc {
    ClauseDesc {
        probe_first,
        probe_count,
        pred_start: 0,
        pred_len: 0,
        act_start,
        act_len,
    }
}

/// An image of `probes` and `clauses` (whose actions are in `code`), with three globals.
fn image(probes: &[ProbeDesc], clauses: &[ClauseDesc], code: &[u64]) -> Vec<u8> {
    let vars = [0u32, 1, 2].map(|_| VarDesc {
        name: 1,
        scope: Scope::Global,
        keys: KeyLayout::NONE,
        string: false,
    });
    let p = Parts {
        probes,
        clauses,
        code,
        ints: &[],
        strtab: STRTAB,
        vars: &vars,
        aggs: &[],
        fmts: &[],
        options: &[],
        nlocals: 0,
    };
    let mut out = vec![0u8; p.encoded_len()];
    p.write(&mut out).unwrap();
    out
}

const RET: u64 = insn(Op::Ret, 0, 0, 0, 0);

/// Each slot's EPID base, the slots being on descriptions `slot_descs`.
fn bases(img: &Image<'_>, slot_descs: &[u32]) -> Vec<u32> {
    let mut descs = vec![DescEpids::default(); img.probe_count()];
    probe::epid_bases(img, &mut descs, slot_descs.iter().copied()).collect()
}

/// Every slot's EPID of every clause (0 where the clause is not on the slot's description).
fn table(img: &Image<'_>, slot_descs: &[u32]) -> Vec<Vec<u64>> {
    let bases = bases(img, slot_descs);
    slot_descs
        .iter()
        .zip(&bases)
        .map(|(&d, &b)| {
            (0..img.clause_count() as u32)
                .map(|c| probe::epid(b, probe::clauses_of(img, d), c))
                .collect()
        })
        .collect()
}

#[test]
fn one_clause_per_description_numbers_the_slots() {
    // BEGIN, BEGIN, tick: a clause each.
    let probes = [ProbeKind::Begin, ProbeKind::Begin, ProbeKind::Tick].map(desc);
    let clauses = [clause(0, 1, 0, 1), clause(1, 1, 0, 1), clause(2, 1, 0, 1)];
    let b = image(&probes, &clauses, &[RET]);
    let img = Image::parse(&b).unwrap();
    assert_eq!(table(&img, &[0, 1, 2]), [[1, 0, 0], [0, 2, 0], [0, 0, 3]]);
}

#[test]
fn dense_in_program_order_with_no_epid_for_other_clauses() {
    // Descriptions: 0 BEGIN, 1 fbt (a glob, three functions), 2 tick. Clause 0 is on 0 and
    // 1, clause 1 on 1, clause 2 on 2, clause 3 on 0. LOAD's slots: the attach list's
    // (description 1's three functions), then descriptions 0 and 2.
    let probes = [ProbeKind::Begin, ProbeKind::FbtEntry, ProbeKind::Tick].map(desc);
    let clauses = [
        clause(0, 2, 0, 1),
        clause(1, 1, 0, 1),
        clause(2, 1, 0, 1),
        clause(0, 1, 0, 1),
    ];
    let b = image(&probes, &clauses, &[RET]);
    let img = Image::parse(&b).unwrap();
    let t = table(&img, &[1, 1, 1, 0, 2]);
    assert_eq!(
        t,
        [
            // Description 1 follows BEGIN's two EPIDs: its functions in slot order, each
            // with clauses 0 and 1.
            [3, 4, 0, 0],
            [5, 6, 0, 0],
            [7, 8, 0, 0],
            // BEGIN runs clauses 0 and 3, in that order.
            [1, 0, 0, 2],
            [0, 0, 9, 0],
        ]
    );
    // Dense: 1 to 9, each once.
    let mut all: Vec<u64> = t.into_iter().flatten().filter(|&e| e != 0).collect();
    all.sort_unstable();
    assert_eq!(all, (1..=9).collect::<Vec<_>>());
}

#[test]
fn a_clause_before_an_fbt_one_numbers_first() {
    // `BEGIN {} fbt::f:entry {}`: LOAD's slots put f's first, but BEGIN's clause is first in
    // the program, so it is EPID 1, as in dtrace.
    let probes = [ProbeKind::Begin, ProbeKind::FbtEntry].map(desc);
    let clauses = [clause(0, 1, 0, 1), clause(1, 1, 0, 1)];
    let b = image(&probes, &clauses, &[RET]);
    let img = Image::parse(&b).unwrap();
    assert_eq!(table(&img, &[1, 0]), [[0, 2], [1, 0]]);
    // A glob's functions follow BEGIN's clause, in slot order.
    assert_eq!(table(&img, &[1, 1, 0]), [[0, 2], [0, 3], [1, 0]]);
}

#[test]
fn a_descriptions_slots_need_not_be_adjacent() {
    // Slots on descriptions 1, 0, 1: description 0's comes first, then 1's in slot order.
    let probes = [ProbeKind::FbtEntry, ProbeKind::FbtEntry].map(desc);
    let clauses = [clause(0, 1, 0, 1), clause(1, 1, 0, 1)];
    let b = image(&probes, &clauses, &[RET]);
    let img = Image::parse(&b).unwrap();
    assert_eq!(bases(&img, &[1, 0, 1]), [1, 0, 2]);
}

#[test]
fn a_description_without_clauses_or_slots_takes_no_epid() {
    // Descriptions 0 BEGIN (clauses 0 and 1), 1 END (none), 2 tick (clause 2), 3 BEGIN
    // (clause 3) with no slot.
    let probes = [
        ProbeKind::Begin,
        ProbeKind::End,
        ProbeKind::Tick,
        ProbeKind::Begin,
    ]
    .map(desc);
    let clauses = [
        clause(0, 1, 0, 1),
        clause(0, 1, 0, 1),
        clause(2, 1, 0, 1),
        clause(3, 1, 0, 1),
    ];
    let b = image(&probes, &clauses, &[RET]);
    let img = Image::parse(&b).unwrap();
    assert_eq!(bases(&img, &[0, 1, 2]), [0, 2, 2]);
    // A description out of range has no slot of its own and takes no EPID.
    let mut descs = vec![DescEpids::default(); img.probe_count()];
    let mut e = EpidBases::new(&img, &mut descs, [9, 2, 0]);
    assert_eq!([e.next(9), e.next(0), e.next(2)], [0, 0, 2]);
    assert_eq!(probe::epid(7, [4, 9], 9), 9);
    assert_eq!(probe::epid(7, [4, 9], 5), 0);
}

/// A firing's environment that answers `epid` by the rule, for the slots `slot_descs`.
struct Firing<'a> {
    img: &'a Image<'a>,
    slot_descs: &'a [u32],
    bases: Vec<u32>,
    slot: u32,
    clause: u32,
    faulting: Option<u32>,
    err_args: [u64; 6],
    globals: [u64; 3],
}

impl<'a> Firing<'a> {
    fn new(img: &'a Image<'a>, slot_descs: &'a [u32], slot: u32) -> Self {
        Firing {
            img,
            slot_descs,
            bases: bases(img, slot_descs),
            slot,
            clause: 0,
            faulting: None,
            err_args: [0; 6],
            globals: [0; 3],
        }
    }
}

impl Env for Firing<'_> {
    fn builtin(&mut self, b: Builtin) -> u64 {
        match b {
            Builtin::Epid => {
                let d = self.slot_descs[self.slot as usize];
                let base = self.bases[self.slot as usize];
                probe::epid(base, probe::clauses_of(self.img, d), self.clause)
            }
            Builtin::Arg1 if self.faulting.is_some() => self.err_args[1],
            _ => 0,
        }
    }
    fn builtin_str(&mut self, _: Builtin, _: &mut [u8]) -> usize {
        0
    }
    fn read_kernel(&mut self, _: u64, _: &mut [u8]) -> bool {
        false
    }
    fn global_load(&mut self, id: u32) -> u64 {
        self.globals[id as usize]
    }
    fn global_store(&mut self, id: u32, value: u64) {
        self.globals[id as usize] = value;
    }
    fn dynvar_load(&mut self, _: u32, _: &[Key<'_>]) -> u64 {
        0
    }
    fn dynvar_store(&mut self, _: u32, _: &[Key<'_>], _: u64) -> bool {
        false
    }
    fn dynvar_load_str(&mut self, _: u32, _: &[Key<'_>], _: &mut [u8]) -> usize {
        0
    }
    fn dynvar_store_str(&mut self, _: u32, _: &[Key<'_>], _: &[u8]) -> bool {
        false
    }
    fn agg_update(&mut self, _: u32, _: &[Key<'_>], _: &[u64; AGG_NARGS]) -> bool {
        false
    }
    fn emit(&mut self, _: &Record<'_>) -> bool {
        false
    }
    fn ptwrite(&mut self, _: u64) -> bool {
        false
    }
    fn progenyof(&mut self, _: u64) -> bool {
        false
    }
    fn speculation(&mut self) -> u64 {
        0
    }
    fn emit_spec(&mut self, _: u64, _: &Record<'_>) -> bool {
        false
    }
    fn spec_end(&mut self, _: u64, _: bool) -> bool {
        true
    }
    fn raise(&mut self, _: u64) -> bool {
        false
    }
    fn chill(&mut self, _: u64) -> bool {
        false
    }
}

impl ClauseEnv for Firing<'_> {
    fn enter_clause(&mut self, clause: u32) {
        self.clause = clause;
    }
    fn fault(&mut self, _: u32, _: Fault) {}
    fn error_args(&mut self) -> &mut [u64; 6] {
        &mut self.err_args
    }
    fn enter_error(&mut self, desc: u32) -> bool {
        if self.faulting.is_some() {
            return false;
        }
        let Some(s) = self.slot_descs.iter().position(|&d| d == desc) else {
            return false;
        };
        self.faulting = Some(self.slot);
        self.slot = s as u32;
        true
    }
    fn leave_error(&mut self) {
        if let Some(s) = self.faulting.take() {
            self.slot = s;
        }
    }
}

#[test]
fn error_counts_like_any_slot_and_its_arg1_is_the_faulting_clause_epid() {
    // 0 BEGIN { trace(1); }  1 BEGIN { 1 / 0; }  2 ERROR { g0 = arg1; g1 = epid; }
    // 3 BEGIN { g2 = epid; }
    let code = [
        // Clause 0 (0..1).
        RET,
        // Clause 1 (1..5).
        insn(Op::Ldi, 1, 0, 0, 1),
        insn(Op::Ldi, 2, 0, 0, 0),
        insn(Op::Sdiv, 3, 1, 2, 0),
        RET,
        // Clause 2 (5..10).
        insn(Op::Ldb, 1, 0, 0, Builtin::Arg1 as u32),
        insn(Op::Stgs, 0, 1, 0, 0),
        insn(Op::Ldb, 2, 0, 0, Builtin::Epid as u32),
        insn(Op::Stgs, 0, 2, 0, 1),
        RET,
        // Clause 3 (10..13).
        insn(Op::Ldb, 1, 0, 0, Builtin::Epid as u32),
        insn(Op::Stgs, 0, 1, 0, 2),
        RET,
    ];
    let probes = [
        ProbeKind::Begin,
        ProbeKind::Begin,
        ProbeKind::Error,
        ProbeKind::Begin,
    ]
    .map(desc);
    let clauses = [
        clause(0, 1, 0, 1),
        clause(1, 1, 1, 4),
        clause(2, 1, 5, 5),
        clause(3, 1, 10, 3),
    ];
    let b = image(&probes, &clauses, &code);
    let img = Image::parse(&b).unwrap();
    let need = img.verify(1 << 20).unwrap();
    let verified: Vec<_> = (0..img.clause_count())
        .map(|c| img.verify_clause(c, 1 << 20).unwrap())
        .collect();
    let mut scratch = vec![0u8; need];
    let mut st = VmState::new();
    let mut vm = Vm::new(&mut st, &mut scratch, img.nlocals(), img.strsize()).unwrap();
    let slots = [0, 1, 2, 3];
    let mut globals = [0u64; 3];
    for slot in [1u32, 3] {
        let mut env = Firing::new(&img, &slots, slot);
        env.globals = globals;
        let order = probe::clauses_of(&img, slots[slot as usize]);
        probe::run_clauses(&mut vm, &img, &verified, order, &mut env);
        globals = env.globals;
    }
    // The division is clause 1 on slot 1: EPID 2; ERROR's clause on slot 2 is EPID 3, the
    // last BEGIN's 4.
    assert_eq!(globals, [2, 3, 4]);
}
