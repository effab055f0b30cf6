// SPDX-License-Identifier: GPL-2.0

//! ToPA entry format and table builder: SDM encodings, every rule violation rejected, and
//! valid tables for any valid input.

mod topa_support;

use oxtrace_core::topa::*;
use proptest::prelude::*;
use topa_support::*;

const W: PhysWidth = PhysWidth::ARCH_MAX;

#[test]
fn entry_encodings_follow_the_sdm() {
    // Output region: base in bits MAXPHYADDR-1:12, Size in 9:6, STOP bit 4, INT bit 2.
    let raw = Entry::Output {
        base: 0x1234_5000,
        order: 0,
        int: false,
        stop: false,
    }
    .encode(W)
    .unwrap();
    assert_eq!(raw, 0x1234_5000);
    let raw = Entry::Output {
        base: 0x800_0000,
        order: 15,
        int: true,
        stop: true,
    }
    .encode(W)
    .unwrap();
    assert_eq!(raw, 0x800_0000 | (15 << 6) | (1 << 4) | (1 << 2));
    // END: bit 0, the address is the next table.
    assert_eq!(Entry::End { table: 0xabc000 }.encode(W), Ok(0xabc001));
    assert_eq!(region_size(0), 4096);
    assert_eq!(region_size(15), 128 << 20);
    assert_eq!(region_size(255), 128 << 20);
}

#[test]
fn entry_rule_violations_are_rejected() {
    for bit in [1u64, 3, 5, 10, 11] {
        assert_eq!(
            Entry::decode(0x10_0000 | (1 << bit), W),
            Err(EntryError::ReservedBits),
            "reserved bit {bit}"
        );
    }
    assert_eq!(Entry::decode(1u64 << 52, W), Err(EntryError::AddressWidth));
    let w36 = PhysWidth::new(36).unwrap();
    assert_eq!(
        Entry::decode(1u64 << 36, w36),
        Err(EntryError::AddressWidth)
    );
    assert_eq!(Entry::decode((1u64 << 36) - 4096, w36).map(|_| ()), Ok(()));
    assert_eq!(
        Entry::decode(0x5000 | ENTRY_END | ENTRY_STOP, W),
        Err(EntryError::EndWithStopOrInt)
    );
    assert_eq!(
        Entry::decode(0x5000 | ENTRY_END | ENTRY_INT, W),
        Err(EntryError::EndWithStopOrInt)
    );
    // 2 MiB region (order 9) with base bits 20:12 not zero.
    assert_eq!(
        Entry::decode(0x20_1000 | (9 << 6), W),
        Err(EntryError::Misaligned)
    );
    let bad = |e: Entry| e.encode(W);
    assert_eq!(
        bad(Entry::Output {
            base: 0,
            order: 16,
            int: false,
            stop: false
        }),
        Err(EntryError::SizeOrder)
    );
    assert_eq!(
        bad(Entry::Output {
            base: 0x1000,
            order: 1,
            int: false,
            stop: false
        }),
        Err(EntryError::Misaligned)
    );
    assert_eq!(
        bad(Entry::Output {
            base: 0x10,
            order: 0,
            int: false,
            stop: false
        }),
        Err(EntryError::Misaligned)
    );
    assert_eq!(
        bad(Entry::End { table: 0x1800 }),
        Err(EntryError::Misaligned)
    );
    assert_eq!(
        bad(Entry::End { table: 1 << 52 }),
        Err(EntryError::AddressWidth)
    );
    assert_eq!(PhysWidth::new(31), None);
    assert_eq!(PhysWidth::new(53), None);
}

/// Runs `build` on sentinel-filled pages and checks the error and that no page changed.
fn expect_err(
    ntables: usize,
    table_phys: &[u64],
    slices: &[Slice],
    mode: Mode,
    cfg: &Config,
    want: BuildError,
) {
    let mut tables = vec![[0xdead_beef_u64; TABLE_ENTRIES]; ntables];
    assert_eq!(build(&mut tables, table_phys, slices, mode, cfg), Err(want));
    assert!(
        tables.iter().all(|t| t.iter().all(|&e| e == 0xdead_beef)),
        "tables modified on {want:?}"
    );
}

#[test]
fn builder_rejects_every_rule_violation() {
    let cfg = Config::new(W);
    let s = |phys, order| Slice { phys, order };
    let ring = Mode::Ring;
    let t = [0x10_0000u64, 0x20_0000];
    let ok = [s(0x40_0000, 0), s(0x50_0000, 1)];

    expect_err(1, &t[..1], &[], ring, &cfg, BuildError::NoSlices);
    for per in [0, MAX_OUTPUTS_PER_TABLE + 1] {
        let c = Config {
            outputs_per_table: per,
            ..cfg
        };
        expect_err(1, &t[..1], &ok, ring, &c, BuildError::BadOutputsPerTable);
    }
    expect_err(
        2,
        &t[..1],
        &ok,
        ring,
        &cfg,
        BuildError::TableCountMismatch { tables: 2, phys: 1 },
    );
    let one = Config {
        outputs_per_table: 1,
        ..cfg
    };
    expect_err(
        1,
        &t[..1],
        &ok,
        ring,
        &one,
        BuildError::TooFewTables {
            needed: 2,
            given: 1,
        },
    );
    expect_err(
        1,
        &[0x10_0800],
        &ok,
        ring,
        &cfg,
        BuildError::TableMisaligned { table: 0 },
    );
    expect_err(
        1,
        &[0x10_0008],
        &ok,
        ring,
        &cfg,
        BuildError::TableMisaligned { table: 0 },
    );
    let w36 = Config::new(PhysWidth::new(36).unwrap());
    expect_err(
        1,
        &[1 << 36],
        &ok,
        ring,
        &w36,
        BuildError::TableAddressWidth { table: 0 },
    );
    expect_err(
        2,
        &[0x10_0000, 0x10_0000],
        &ok,
        ring,
        &one,
        BuildError::TableOverlap { table: 1, other: 0 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(0x40_0000, 0), s(0x800_0000, 16)],
        ring,
        &cfg,
        BuildError::SliceSizeOrder { slice: 1 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(0x40_1000, 1)],
        ring,
        &cfg,
        BuildError::SliceMisaligned { slice: 0 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(0x40_0200, 0)],
        ring,
        &cfg,
        BuildError::SliceMisaligned { slice: 0 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(1 << 36, 0)],
        ring,
        &w36,
        BuildError::SliceAddressWidth { slice: 0 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(0x40_0000, 2), s(0x40_2000, 0)],
        ring,
        &cfg,
        BuildError::SliceOverlap { slice: 1, other: 0 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(0x40_0000, 0), s(0x40_0000, 0)],
        ring,
        &cfg,
        BuildError::SliceOverlap { slice: 1, other: 0 },
    );
    expect_err(
        1,
        &t[..1],
        &[s(0x40_0000, 0), s(0x10_0000, 0)],
        ring,
        &cfg,
        BuildError::SliceOverlapsTable { slice: 1, table: 0 },
    );
    // A 1 MiB slice containing the table page.
    expect_err(
        1,
        &[0x10_3000],
        &[s(0x10_0000, 8)],
        Mode::Stop { int: true },
        &cfg,
        BuildError::SliceOverlapsTable { slice: 0, table: 0 },
    );
    let single = Config {
        multi_entry: false,
        ..cfg
    };
    expect_err(
        1,
        &t[..1],
        &ok,
        ring,
        &single,
        BuildError::SingleEntryNeedsOneSlice { slices: 2 },
    );
}

#[test]
fn layout_of_three_tables_ring_and_stop() {
    let orders = [0u8, 1, 0, 2, 0, 0, 1];
    for mode in [
        Mode::Ring,
        Mode::Stop { int: true },
        Mode::Stop { int: false },
    ] {
        let s = setup(&orders, 3, mode, 7);
        assert_eq!(s.layout.tables(), 3);
        assert_eq!(s.layout.slices(), 7);
        assert_eq!(
            s.layout.capacity(),
            orders.iter().map(|&o| region_size(o)).sum::<u64>()
        );
        let t = &s.mem.tables;
        let p = &s.mem.table_phys;
        for (i, sl) in s.slices.iter().enumerate() {
            let raw = t[i / 3][i % 3];
            let last = i == 6;
            let want = Entry::Output {
                base: sl.phys,
                order: sl.order,
                int: matches!(mode, Mode::Stop { int: true }) && last,
                stop: matches!(mode, Mode::Stop { .. }) && last,
            };
            assert_eq!(Entry::decode(raw, W), Ok(want));
        }
        assert_eq!(t[0][3], p[1] | ENTRY_END);
        assert_eq!(t[1][3], p[2] | ENTRY_END);
        match mode {
            Mode::Ring => assert_eq!(t[2][1], p[0] | ENTRY_END),
            Mode::Stop { .. } => assert_eq!(t[2][1], 0),
        }
        assert!(t[2][2..].iter().all(|&e| e == 0));
        assert_eq!(check_sdm_rules(&s.mem, p[0], 52), 7);
        // Slices are not physically contiguous.
        for w in s.slices.windows(2) {
            assert_ne!(w[0].phys + w[0].size(), w[1].phys);
        }
    }
}

#[test]
fn single_entry_topa_points_back_to_itself() {
    let cfg = Config {
        multi_entry: false,
        ..Config::new(W)
    };
    let mut tables = [[7u64; TABLE_ENTRIES]];
    let slice = Slice {
        phys: 0x20_0000,
        order: 9,
    };
    for mode in [Mode::Ring, Mode::Stop { int: false }] {
        let l = build(&mut tables, &[0x1000], &[slice], mode, &cfg).unwrap();
        assert_eq!(l.tables(), 1);
        assert_eq!(tables[0][1], 0x1000 | ENTRY_END);
        assert_eq!(tables[0][0] & ENTRY_STOP != 0, mode != Mode::Ring);
        assert!(tables[0][2..].iter().all(|&e| e == 0));
    }
}

#[test]
fn full_tables_hold_511_outputs() {
    let orders = vec![0u8; 1200];
    let s = setup(&orders, MAX_OUTPUTS_PER_TABLE, Mode::Ring, 3);
    assert_eq!(s.layout.tables(), 3);
    assert_eq!(s.mem.tables[0][511], s.mem.table_phys[1] | ENTRY_END);
    assert_eq!(
        s.mem.tables[2][1200 - 1022],
        s.mem.table_phys[0] | ENTRY_END
    );
    assert_eq!(check_sdm_rules(&s.mem, s.mem.table_phys[0], 52), 1200);
}

proptest! {
    #[test]
    fn decode_accepts_exactly_what_encode_produces(raw in any::<u64>(), bits in 32u8..=52) {
        let w = PhysWidth::new(bits).unwrap();
        match Entry::decode(raw, w) {
            Ok(e @ Entry::Output { .. }) => prop_assert_eq!(e.encode(w), Ok(raw)),
            // The processor ignores Size on END entries; we encode it as zero.
            Ok(e @ Entry::End { .. }) => prop_assert_eq!(e.encode(w), Ok(raw & !ENTRY_SIZE_MASK)),
            Err(_) => {}
        }
    }

    #[test]
    fn encode_roundtrips(slot in 0u64..(1 << 20), order in 0u8..=15, int: bool, stop: bool,
                         end: bool) {
        let base = (slot << 27) & ((1 << 52) - 1);
        let e = if end {
            Entry::End { table: base }
        } else {
            Entry::Output { base, order, int, stop }
        };
        let raw = e.encode(W).unwrap();
        prop_assert_eq!(Entry::decode(raw, W), Ok(e));
    }

    /// Any input: either an error with the pages untouched, or tables that obey every SDM
    /// rule and describe exactly the slices, in order.
    #[test]
    fn builder_never_builds_an_invalid_table(
        orders in proptest::collection::vec(0u8..=8, 0..30),
        per in 1usize..6,
        ring: bool,
        int: bool,
        seed: u64,
        corrupt in 0usize..8,
        which: prop::sample::Index,
        extra_tables in 0usize..2,
    ) {
        let mode = if ring { Mode::Ring } else { Mode::Stop { int } };
        let cfg = Config { outputs_per_table: per, ..Config::new(W) };
        let ntables = orders.len().div_ceil(per) + extra_tables;
        let (mut slices, mut table_phys) = place(&orders, ntables, seed);
        // Sometimes break one thing.
        let mut broken = slices.is_empty();
        if !slices.is_empty() {
            let i = which.index(slices.len());
            broken = corrupt <= 5 && !(corrupt == 2 && i == 0);
            match corrupt {
                0 => slices[i].phys += 0x800,
                1 => slices[i].phys |= 1 << 55,
                2 => { let p = slices[0].phys; slices[i].phys = p; }
                3 => table_phys[0] += 8,
                4 => { let p = table_phys[0]; slices[i].phys = p; }
                5 => slices[i].order = 16,
                _ => {}
            }
        }
        let mut tables = vec![[0x5a5a_u64; TABLE_ENTRIES]; ntables];
        match build(&mut tables, &table_phys, &slices, mode, &cfg) {
            Err(_) => {
                prop_assert!(broken);
                prop_assert!(tables.iter().all(|t| t.iter().all(|&e| e == 0x5a5a)));
            }
            Ok(layout) => {
                prop_assert!(!broken);
                let mem = ModelMem { tables, table_phys: table_phys.clone(), regions: vec![] };
                prop_assert_eq!(check_sdm_rules(&mem, table_phys[0], 52), slices.len());
                let mut met = Vec::new();
                layout.for_each_slice(&mem, |s| { met.push(Slice { phys: s.base, order: (s.size.trailing_zeros() - 12) as u8 }); true }).unwrap();
                prop_assert_eq!(met, slices);
            }
        }
    }
}
