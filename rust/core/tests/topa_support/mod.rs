// SPDX-License-Identifier: GPL-2.0

//! Shared helpers of the ToPA tests: a model physical memory and table/slice placement.

#![allow(dead_code)]

use oxtrace_core::topa::*;
use proptest::prelude::*;

/// Physical memory made of ToPA table pages and output regions, each at its own address.
pub struct ModelMem {
    pub tables: Vec<TablePage>,
    pub table_phys: Vec<u64>,
    pub regions: Vec<(u64, Vec<u8>)>,
}

impl ModelMem {
    fn region(&self, phys: u64, len: usize) -> Option<(usize, usize)> {
        self.regions
            .iter()
            .enumerate()
            .find_map(|(i, (base, data))| {
                let off = phys.checked_sub(*base)? as usize;
                (off + len <= data.len()).then_some((i, off))
            })
    }

    /// The bytes of the region at `base`.
    pub fn region_bytes(&self, base: u64) -> &[u8] {
        &self.regions.iter().find(|(b, _)| *b == base).unwrap().1
    }
}

impl PhysMem for ModelMem {
    fn read_entry(&self, phys: u64) -> Result<u64, MemFault> {
        if phys & 7 != 0 {
            return Err(MemFault);
        }
        for (t, &base) in self.table_phys.iter().enumerate() {
            if phys >= base && phys < base + TABLE_BYTES {
                return Ok(self.tables[t][((phys - base) / 8) as usize]);
            }
        }
        Err(MemFault)
    }

    fn write(&mut self, phys: u64, bytes: &[u8]) -> Result<(), MemFault> {
        let (i, off) = self.region(phys, bytes.len()).ok_or(MemFault)?;
        self.regions[i].1[off..off + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, phys: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        let (i, off) = self.region(phys, buf.len()).ok_or(MemFault)?;
        buf.copy_from_slice(&self.regions[i].1[off..off + buf.len()]);
        Ok(())
    }
}

/// Slot spacing: every slice and table gets its own 1 MiB slot, so none is contiguous with
/// another (test slices are at most 64 KiB).
pub const SLOT: u64 = 1 << 20;
/// Where slots start.
pub const SLOT_BASE: u64 = 0x1_0000_0000;

/// Deterministic permutation of `0..n` from `seed`.
pub fn permutation(n: usize, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n as u64).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Slices of the given orders and `ntables` tables, scattered over shuffled slots.
pub fn place(orders: &[u8], ntables: usize, seed: u64) -> (Vec<Slice>, Vec<u64>) {
    let slots = permutation(orders.len() + ntables, seed);
    let slices = orders
        .iter()
        .zip(&slots)
        .map(|(&order, &s)| Slice {
            phys: SLOT_BASE + s * SLOT,
            order,
        })
        .collect();
    let tables = slots[orders.len()..]
        .iter()
        .map(|&s| SLOT_BASE + s * SLOT)
        .collect();
    (slices, tables)
}

/// A built ring or stop buffer in model memory.
pub struct Setup {
    pub mem: ModelMem,
    pub layout: Layout,
    pub cfg: Config,
    pub slices: Vec<Slice>,
}

pub fn setup(orders: &[u8], per_table: usize, mode: Mode, seed: u64) -> Setup {
    let cfg = Config {
        outputs_per_table: per_table,
        ..Config::new(PhysWidth::ARCH_MAX)
    };
    let ntables = orders.len().div_ceil(per_table);
    let (slices, table_phys) = place(orders, ntables, seed);
    let mut tables = vec![[0u64; TABLE_ENTRIES]; ntables];
    let layout = build(&mut tables, &table_phys, &slices, mode, &cfg).expect("valid layout");
    let regions = slices
        .iter()
        .map(|s| (s.phys, vec![0u8; s.size() as usize]))
        .collect();
    Setup {
        mem: ModelMem {
            tables,
            table_phys,
            regions,
        },
        layout,
        cfg,
        slices,
    }
}

/// An order-sensitive byte stream.
pub fn stream(len: usize, salt: u64) -> Vec<u8> {
    (0..len as u64)
        .map(|i| ((i.wrapping_add(salt)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
        .collect()
}

/// The whole logical content of a buffer.
pub fn read_all(s: &Setup, cur: Cursor) -> Vec<u8> {
    let mut out = vec![0u8; s.layout.data_len(cur) as usize];
    let n = s.layout.read_logical(&s.mem, cur, 0, &mut out).unwrap();
    assert_eq!(n, out.len());
    out
}

/// Checks every SDM rule on the raw tables reachable from `first`, independently of the
/// module's decoder: returns the number of output entries met.
pub fn check_sdm_rules(mem: &ModelMem, first: u64, width: u8) -> usize {
    let mut table = first;
    let mut outputs = 0;
    let mut visited = Vec::new();
    loop {
        assert_eq!(table % 4096, 0, "table base 4 KiB aligned");
        assert!(table >> width == 0, "table base within MAXPHYADDR");
        visited.push(table);
        let t = mem
            .table_phys
            .iter()
            .position(|&p| p == table)
            .expect("END points to a table");
        let page = &mem.tables[t];
        for (i, &raw) in page.iter().enumerate() {
            assert_eq!(raw & 0b1100_0010_1010, 0, "reserved bits 1,3,5,11:10 clear");
            assert_eq!(raw >> width, 0, "bits above MAXPHYADDR clear");
            let end = raw & 1 != 0;
            let int = raw & 4 != 0;
            let stop = raw & 16 != 0;
            let base = raw & !0xfff;
            if end {
                assert!(i != 0, "no END in entry 0");
                assert!(!int && !stop, "no INT/STOP on END");
                if visited.contains(&base) {
                    return outputs;
                }
                table = base;
                break;
            }
            let size = 4096u64 << ((raw >> 6) & 0xf);
            assert_eq!(base % size, 0, "region base aligned to its size");
            outputs += 1;
            if stop {
                return outputs;
            }
            assert!(i + 1 < TABLE_ENTRIES, "table ends with END or STOP");
        }
    }
}

/// Any packet the encoder can write.
pub fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        Just(Packet::Pad),
        Just(Packet::Psb),
        Just(Packet::PsbEnd),
        Just(Packet::Ovf),
        (0u64..=TSC_MASK).prop_map(|tsc| Packet::Tsc { tsc }),
        (any::<u32>(), any::<bool>()).prop_map(|(v, ip)| Packet::Ptw {
            payload: v as u64,
            size: PtwSize::Four,
            ip
        }),
        (any::<u64>(), any::<bool>()).prop_map(|(v, ip)| Packet::Ptw {
            payload: v,
            size: PtwSize::Eight,
            ip
        }),
    ]
}
