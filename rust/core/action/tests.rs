// SPDX-License-Identifier: GPL-2.0

//! Unit tests of the private parts; the public behaviour is tested in `tests/action*.rs`.

use super::*;

#[test]
fn insn_roundtrip() {
    let w = insn(Op::Add, 1, 2, 3, 0xdead_beef);
    let i = Insn::decode(w);
    assert_eq!((i.op, i.rd, i.r1, i.r2, i.imm), (6, 1, 2, 3, 0xdead_beef));
    assert_eq!(i.encode(), w);
}

#[test]
fn every_opcode_decodes_to_itself() {
    for b in 0..=255u8 {
        match Op::from_u8(b) {
            Some(op) => assert_eq!(op as u8, b),
            None => assert!(b >= NOPS && !USTACK_OPS.contains(&b) && !MEM_OPS.contains(&b)),
        }
    }
}

#[test]
fn key_layout_validity() {
    assert!(KeyLayout::new(2, 0b10).is_valid());
    assert!(!KeyLayout::new(2, 0b100).is_valid());
    assert!(!KeyLayout::new(9, 0).is_valid());
}
