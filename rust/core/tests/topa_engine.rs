// SPDX-License-Identifier: GPL-2.0

//! The ToPA output engine: bytes land in order across slices and tables, stop exactly at
//! capacity, ring wrap exact, INT/STOP semantics, operational errors on malformed tables.

mod topa_support;

use oxtrace_core::topa::*;
use proptest::prelude::*;
use topa_support::*;

/// Writes `data` in chunks of the given sizes (cycled); returns the bytes stored.
fn write_chunked(e: &mut OutputEngine, mem: &mut ModelMem, data: &[u8], chunks: &[usize]) -> usize {
    let mut done = 0;
    let mut stored = 0;
    let mut k = 0;
    while done < data.len() {
        let n = chunks[k % chunks.len()].max(1).min(data.len() - done);
        stored += e.write(mem, &data[done..done + n]);
        done += n;
        k += 1;
    }
    stored
}

fn started(s: &mut Setup) -> OutputEngine {
    let mut e = OutputEngine::new(&s.layout, &s.cfg);
    e.enable(&s.mem).unwrap();
    e
}

/// Where stream byte `pos` must live: (slice index, offset in slice).
fn locate(slices: &[Slice], pos: u64) -> (usize, u64) {
    let mut start = 0;
    for (i, s) in slices.iter().enumerate() {
        if pos < start + s.size() {
            return (i, pos - start);
        }
        start += s.size();
    }
    unreachable!()
}

fn orders() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0u8..=2, 1..24)
}

fn chunks() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(1usize..9000, 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Below capacity: every byte lands in order, slice after slice, table after table.
    #[test]
    fn bytes_land_in_order(orders in orders(), per in 1usize..5, seed: u64, chunks in chunks(),
                           frac in 0.0f64..1.0) {
        let mut s = setup(&orders, per, Mode::Ring, seed);
        let cap = s.layout.capacity();
        let total = ((cap - 1) as f64 * frac) as usize;
        let data = stream(total, seed);
        let mut e = started(&mut s);
        prop_assert_eq!(write_chunked(&mut e, &mut s.mem, &data, &chunks), total);
        prop_assert_eq!((e.bytes_written(), e.bytes_lost(), e.wraps()), (total as u64, 0, 0));
        prop_assert!(!e.is_stopped() && e.error().is_none() && !e.pmi_pending());
        // Physical placement: byte i is in slice j at the right offset; the rest is untouched.
        for (j, sl) in s.slices.iter().enumerate() {
            let bytes = s.mem.region_bytes(sl.phys);
            let start: u64 = s.slices[..j].iter().map(|x| x.size()).sum();
            for (k, &b) in bytes.iter().enumerate() {
                let pos = start + k as u64;
                let want = if pos < total as u64 { data[pos as usize] } else { 0 };
                prop_assert_eq!(b, want, "slice {} byte {}", j, k);
            }
        }
        // Registers: entry of the next byte, offset in it.
        let (j, off) = locate(&s.slices, total as u64);
        let regs = e.regs();
        prop_assert_eq!(regs.table(), s.mem.table_phys[j / per]);
        prop_assert_eq!(regs.index(), (j % per) as u64);
        prop_assert_eq!(regs.offset(), off);
        prop_assert_eq!(regs.mask_ptrs & MASK_PTRS_LOWER_MASK, MASK_PTRS_LOWER_MASK);
        let cur = e.cursor(&s.layout, &s.mem).unwrap();
        prop_assert_eq!(cur, Cursor { position: total as u64, wrapped: false });
        prop_assert_eq!(read_all(&s, cur), data);
    }

    /// Stop mode: exactly `capacity` bytes are stored, the rest is lost, `Stopped` is set
    /// only when the last region is full, with the registers the SDM describes.
    #[test]
    fn stop_is_exact_at_capacity(orders in orders(), per in 1usize..5, seed: u64,
                                 chunks in chunks(), delta in -3000i64..3000, int: bool) {
        let mut s = setup(&orders, per, Mode::Stop { int }, seed);
        let cap = s.layout.capacity() as i64;
        let total = (cap + delta).max(0) as usize;
        let data = stream(total, seed);
        let mut e = started(&mut s);
        let stored = write_chunked(&mut e, &mut s.mem, &data, &chunks);
        let full = total as i64 >= cap;
        prop_assert_eq!(stored as i64, (total as i64).min(cap));
        prop_assert_eq!(e.bytes_lost() as i64, (total as i64 - cap).max(0));
        prop_assert_eq!(e.is_stopped(), full);
        prop_assert_eq!(e.status() & RTIT_STATUS_STOPPED != 0, full);
        prop_assert_eq!(e.pmi_pending(), full && int);
        prop_assert!(e.error().is_none());
        prop_assert_eq!(e.wraps(), 0);
        if full {
            // OUTPUT_BASE = table of the STOP entry, index = that entry, offset = its size.
            let n = s.slices.len();
            let regs = e.regs();
            prop_assert_eq!(regs.table(), s.mem.table_phys[(n - 1) / per]);
            prop_assert_eq!(regs.index(), ((n - 1) % per) as u64);
            prop_assert_eq!(regs.offset(), s.slices[n - 1].size());
            // Nothing more is written, ever.
            prop_assert_eq!(e.write(&mut s.mem, b"more"), 0);
        }
        let cur = e.cursor(&s.layout, &s.mem).unwrap();
        prop_assert_eq!(cur.position as i64, (total as i64).min(cap));
        prop_assert_eq!(read_all(&s, cur), &data[..(total as i64).min(cap) as usize]);
    }

    /// Ring mode: after any amount, the buffer holds exactly the newest `capacity` bytes,
    /// oldest first from the write position; wraps = total / capacity.
    #[test]
    fn ring_wrap_is_exact(orders in proptest::collection::vec(0u8..=1, 1..10), per in 1usize..4,
                          seed: u64, chunks in chunks(), laps in 0u64..4, extra in 0u64..20000) {
        let mut s = setup(&orders, per, Mode::Ring, seed);
        let cap = s.layout.capacity();
        let total = (laps * cap + extra % cap) as usize;
        let data = stream(total, seed);
        let mut e = started(&mut s);
        prop_assert_eq!(write_chunked(&mut e, &mut s.mem, &data, &chunks), total);
        prop_assert_eq!(e.bytes_lost(), 0);
        prop_assert_eq!(e.wraps(), total as u64 / cap);
        prop_assert!(!e.is_stopped() && !e.pmi_pending());
        let cur = e.cursor(&s.layout, &s.mem).unwrap();
        prop_assert_eq!(cur.position, total as u64 % cap);
        prop_assert_eq!(cur.wrapped, total as u64 >= cap);
        let keep = total.min(cap as usize);
        prop_assert_eq!(read_all(&s, cur), &data[total - keep..]);
    }

    /// Reading in pieces from any offset gives the same bytes as one read.
    #[test]
    fn read_logical_in_pieces(orders in proptest::collection::vec(0u8..=1, 1..8), seed: u64,
                              total in 0usize..60000, piece in 1usize..7000) {
        let mut s = setup(&orders, 2, Mode::Ring, seed);
        let data = stream(total, seed);
        let mut e = started(&mut s);
        e.write(&mut s.mem, &data);
        let cur = e.cursor(&s.layout, &s.mem).unwrap();
        let whole = read_all(&s, cur);
        let mut pieces = Vec::new();
        let mut buf = vec![0u8; piece];
        loop {
            let n = s.layout.read_logical(&s.mem, cur, pieces.len() as u64, &mut buf).unwrap();
            if n == 0 { break; }
            pieces.extend_from_slice(&buf[..n]);
        }
        prop_assert_eq!(pieces, whole);
    }

    /// Saving the registers, disabling, and resuming from them continues the same walk.
    #[test]
    fn resume_from_saved_registers(orders in orders(), per in 1usize..4, seed: u64,
                                   total in 0usize..80000, cut in 0.0f64..1.0, ring: bool) {
        let mode = if ring { Mode::Ring } else { Mode::Stop { int: false } };
        let data = stream(total, seed);
        let mut a = setup(&orders, per, mode, seed);
        let mut ea = started(&mut a);
        ea.write(&mut a.mem, &data);

        let mut b = setup(&orders, per, mode, seed);
        let mut eb = started(&mut b);
        let k = (total as f64 * cut) as usize;
        eb.write(&mut b.mem, &data[..k]);
        eb.disable();
        let mut eb2 = OutputEngine::with_regs(&b.cfg, b.layout.first_table(), eb.regs(), eb.status());
        eb2.enable(&b.mem).unwrap();
        eb2.write(&mut b.mem, &data[k..]);
        prop_assert_eq!(eb2.regs(), ea.regs());
        prop_assert_eq!(eb2.status(), ea.status());
        prop_assert_eq!(a.mem.regions, b.mem.regions);
    }
}

#[test]
fn int_raises_a_pmi_once_its_region_fills() {
    let mut s = setup(&[0, 0], 2, Mode::Stop { int: true }, 1);
    let mut e = started(&mut s);
    e.write(&mut s.mem, &[1u8; 8191]);
    assert!(!e.pmi_pending() && !e.is_stopped());
    e.write(&mut s.mem, &[2u8; 1]);
    assert!(e.pmi_pending() && e.is_stopped());
    assert!(e.take_pmi());
    assert!(!e.take_pmi());
    // INT without STOP in the middle of a ring: PMI, and the walk goes on.
    let p = s.mem.table_phys[0];
    s.mem.tables[0][0] |= ENTRY_INT;
    s.mem.tables[0][1] &= !(ENTRY_STOP | ENTRY_INT);
    s.mem.tables[0][2] = p | ENTRY_END;
    let first = s.layout.first_table();
    let mut e = OutputEngine::with_regs(&s.cfg, first, OutputRegs::new(p, 0, 0), 0);
    e.enable(&s.mem).unwrap();
    e.write(&mut s.mem, &[3u8; 4096]);
    assert!(e.pmi_pending() && !e.is_stopped());
    assert_eq!((e.regs().index(), e.regs().offset()), (1, 0));
    e.write(&mut s.mem, &[3u8; 4096]);
    assert_eq!((e.regs().index(), e.regs().offset(), e.wraps()), (0, 0, 1));
}

#[test]
fn walks_at_least_three_tables() {
    let mut s = setup(&[0; 7], 2, Mode::Ring, 9);
    assert_eq!(s.layout.tables(), 4);
    let mut e = started(&mut s);
    let mut tables_seen = vec![e.regs().table()];
    for _ in 0..7 {
        e.write(&mut s.mem, &[0xaa; 4096]);
        if *tables_seen.last().unwrap() != e.regs().table() {
            tables_seen.push(e.regs().table());
        }
    }
    let p = &s.mem.table_phys;
    assert_eq!(tables_seen, vec![p[0], p[1], p[2], p[3], p[0]]);
}

#[test]
fn single_entry_ring() {
    let cfg = Config {
        multi_entry: false,
        ..Config::new(PhysWidth::ARCH_MAX)
    };
    let slice = Slice {
        phys: 0x40_0000,
        order: 1,
    };
    let mut tables = vec![[0u64; TABLE_ENTRIES]];
    let layout = build(&mut tables, &[0x1000], &[slice], Mode::Ring, &cfg).unwrap();
    let mut mem = ModelMem {
        tables,
        table_phys: vec![0x1000],
        regions: vec![(0x40_0000, vec![0; 8192])],
    };
    let mut e = OutputEngine::new(&layout, &cfg);
    e.enable(&mem).unwrap();
    let data = stream(20000, 5);
    assert_eq!(e.write(&mut mem, &data), 20000);
    assert_eq!(e.wraps(), 2);
    let cur = e.cursor(&layout, &mem).unwrap();
    let mut out = vec![0; 8192];
    layout.read_logical(&mem, cur, 0, &mut out).unwrap();
    assert_eq!(out, &data[20000 - 8192..]);
    // Entry 1 must be END back to the same table.
    mem.tables[0][1] = 0x2000 | ENTRY_END;
    let mut e = OutputEngine::new(&layout, &cfg);
    e.enable(&mem).unwrap();
    assert_eq!(e.write(&mut mem, &data[..9000]), 8192);
    assert_eq!(
        e.error(),
        Some(WalkError::SingleEntryRule { table: 0x1000 })
    );
    assert_eq!(e.bytes_lost(), 9000 - 8192);
}

/// A two-table ring of 4 KiB slices with raw table contents supplied by the test.
fn raw_mem(t0: &[u64], t1: &[u64]) -> ModelMem {
    let mut tables = vec![[0u64; TABLE_ENTRIES]; 2];
    tables[0][..t0.len()].copy_from_slice(t0);
    tables[1][..t1.len()].copy_from_slice(t1);
    ModelMem {
        tables,
        table_phys: vec![0x1000, 0x2000],
        regions: (0..4)
            .map(|i| (0x10_0000 + i * 0x10_0000, vec![0; 4096]))
            .collect(),
    }
}

fn engine_on(mem: &ModelMem, regs: OutputRegs) -> (OutputEngine, Result<(), WalkError>) {
    let cfg = Config::new(PhysWidth::ARCH_MAX);
    let mut e = OutputEngine::with_regs(&cfg, 0x1000, regs, 0);
    let r = e.enable(mem);
    (e, r)
}

#[test]
fn malformed_tables_are_operational_errors() {
    const A: u64 = 0x10_0000;
    const B: u64 = 0x20_0000;
    let start = OutputRegs::new(0x1000, 0, 0);

    // END in entry 0 of the first table.
    let mem = raw_mem(&[0x2000 | ENTRY_END], &[A, 0x1000 | ENTRY_END]);
    let (e, r) = engine_on(&mem, start);
    assert_eq!(r, Err(WalkError::EndInEntryZero { table: 0x1000 }));
    assert_eq!(e.status() & RTIT_STATUS_ERROR, RTIT_STATUS_ERROR);

    // END leading to a table whose entry 0 is END: the first region fills, then error.
    let mut mem = raw_mem(&[A, 0x2000 | ENTRY_END], &[0x1000 | ENTRY_END]);
    let (mut e, r) = engine_on(&mem, start);
    r.unwrap();
    assert_eq!(e.write(&mut mem, &[1; 5000]), 4096);
    assert_eq!(e.error(), Some(WalkError::EndInEntryZero { table: 0x2000 }));
    assert_eq!(
        (e.bytes_lost(), e.status() & RTIT_STATUS_ERROR),
        (904, RTIT_STATUS_ERROR)
    );
    assert_eq!(e.write(&mut mem, &[1; 10]), 0);
    assert_eq!(
        e.enable(&mem),
        Err(WalkError::EndInEntryZero { table: 0x2000 })
    );

    // STOP or INT on an END entry.
    for bad in [ENTRY_STOP, ENTRY_INT] {
        let mut mem = raw_mem(&[A, 0x2000 | ENTRY_END | bad], &[B, 0x1000 | ENTRY_END]);
        let (mut e, r) = engine_on(&mem, start);
        r.unwrap();
        assert_eq!(e.write(&mut mem, &[1; 4097]), 4096);
        assert_eq!(
            e.error(),
            Some(WalkError::Entry {
                table: 0x1000,
                index: 1,
                error: EntryError::EndWithStopOrInt
            })
        );
    }

    // Reserved bit in the next entry.
    let mut mem = raw_mem(&[A, B | (1 << 3), 0x1000 | ENTRY_END], &[]);
    let (mut e, r) = engine_on(&mem, start);
    r.unwrap();
    assert_eq!(e.write(&mut mem, &[1; 4096]), 4096);
    assert!(matches!(
        e.error(),
        Some(WalkError::Entry {
            error: EntryError::ReservedBits,
            ..
        })
    ));

    // Region base not aligned to its size (8 KiB region at a 4 KiB boundary).
    let mem = raw_mem(&[0x10_1000 | (1 << 6), 0x1000 | ENTRY_END], &[]);
    let (_, r) = engine_on(&mem, start);
    assert_eq!(
        r,
        Err(WalkError::Entry {
            table: 0x1000,
            index: 0,
            error: EntryError::Misaligned
        })
    );

    // Base above MAXPHYADDR.
    let cfg36 = Config::new(PhysWidth::new(36).unwrap());
    let mem = raw_mem(&[1 << 40, 0x1000 | ENTRY_END], &[]);
    let mut e = OutputEngine::with_regs(&cfg36, 0x1000, start, 0);
    assert!(matches!(
        e.enable(&mem),
        Err(WalkError::Entry {
            error: EntryError::AddressWidth,
            ..
        })
    ));

    // OUTPUT_BASE not 4 KiB aligned.
    let mem = raw_mem(&[A, 0x1000 | ENTRY_END], &[]);
    let (_, r) = engine_on(&mem, OutputRegs::new(0x1080, 0, 0));
    assert_eq!(r, Err(WalkError::TableBase { table: 0x1080 }));

    // OutputOffset at or past the region size without Stopped.
    let (_, r) = engine_on(&mem, OutputRegs::new(0x1000, 0, 4096));
    assert_eq!(
        r,
        Err(WalkError::OutputOffset {
            offset: 4096,
            size: 4096
        })
    );
    // ... which is the legal state after a ToPA stop.
    let cfg = Config::new(PhysWidth::ARCH_MAX);
    let mut e = OutputEngine::with_regs(
        &cfg,
        0x1000,
        OutputRegs::new(0x1000, 0, 4096),
        RTIT_STATUS_STOPPED,
    );
    assert_eq!(e.enable(&mem), Ok(()));
    assert!(e.is_stopped());

    // An entry pointing at memory that is not there.
    let mut mem = raw_mem(&[0x7700_0000, 0x1000 | ENTRY_END], &[]);
    let (mut e, r) = engine_on(&mem, start);
    r.unwrap();
    assert_eq!(e.write(&mut mem, &[1]), 0);
    assert_eq!(e.error(), Some(WalkError::Mem { phys: 0x7700_0000 }));
}

#[test]
fn disabled_engine_stores_nothing() {
    let mut s = setup(&[0, 0], 2, Mode::Ring, 4);
    let mut e = OutputEngine::new(&s.layout, &s.cfg);
    assert_eq!(e.write(&mut s.mem, &[1; 100]), 0);
    assert_eq!(e.bytes_lost(), 100);
    e.enable(&s.mem).unwrap();
    assert_eq!(e.write(&mut s.mem, &[1; 100]), 100);
    e.disable();
    assert!(!e.is_enabled());
    assert_eq!(e.write(&mut s.mem, &[1; 100]), 0);
}

#[test]
fn position_of_registers_left_on_an_end_entry() {
    let s = setup(&[0, 0, 0], 2, Mode::Ring, 11);
    let p = &s.mem.table_phys;
    // Index 2 of table 0 is its END entry: equivalent to the end of slice 1.
    assert_eq!(
        s.layout.position(&s.mem, OutputRegs::new(p[0], 2, 0)),
        Ok(8192)
    );
    // Index 1 of table 1 is the END back to the start: position 0 of the ring.
    assert_eq!(
        s.layout.position(&s.mem, OutputRegs::new(p[1], 1, 0)),
        Ok(0)
    );
    assert_eq!(
        s.layout.position(&s.mem, OutputRegs::new(p[1], 5, 0)),
        Err(WalkError::NotInLayout)
    );
}
