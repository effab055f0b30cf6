//! D's integer semantics, as C's and DTrace's: the types of constants, the usual
//! arithmetic conversions and promotions, casts, signed and unsigned comparisons, 64-bit
//! unsigned values printed in full, and strings compared with and assigned NULL; run
//! through the real interpreter with the simulated environment.

mod support;

use oxtrace::agg::SortOrder;
use oxtrace::runtime::sim::{Firing, OwnedItem, Sim};
use oxtrace_core::action::{IntType, RecordKind};
use support::{begin_table, c, run_begin as run};

/// The items `trace()` recorded in BEGIN.
fn traced(src: &str) -> Vec<OwnedItem> {
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    s.records
        .iter()
        .filter(|r| r.kind == RecordKind::Trace)
        .flat_map(|r| r.items.clone())
        .collect()
}

fn int(v: i64, ty: IntType) -> OwnedItem {
    OwnedItem::Int(v as u64, ty.0)
}

#[test]
fn constants_take_the_first_c_type_that_holds_them() {
    // int, long by value; hex and octal may be unsigned; suffixes u, l, ul, ll.
    let src = r#"BEGIN { printf("%d %d %d %d %d %d %d %d\n", sizeof(1), sizeof(2147483648),
        sizeof(1L), sizeof(1LL), sizeof(1U), sizeof(1UL), sizeof(0xffffffff), sizeof(037777777777));
        printf("%d %d %d %d\n", 0xffffffff > 0, -1 < 0xffffffff, 1LL << 32, -1L < 1U); }"#;
    assert_eq!(run(src), "4 8 8 8 4 8 4 4\n1 0 4294967296 1\n");
    assert_eq!(
        traced("BEGIN { trace(0xffffffff); trace(-1ul); trace(4294967296); }"),
        vec![
            int(0xffff_ffff, IntType::U32),
            int(-1, IntType::U64),
            int(1 << 32, IntType::I64)
        ]
    );
}

#[test]
fn uint64_max_prints_in_full() {
    let src = r#"uint64_t y; BEGIN { x = (uint64_t)-1; y = -1;
        printf("%u %d %x %u\n", x, x, x, y); printf("%d %d\n", (uint)-12345, (int)-12345); }"#;
    assert_eq!(
        run(src),
        "18446744073709551615 18446744073709551615 ffffffffffffffff 18446744073709551615\n\
         4294954951 -12345\n"
    );
    assert_eq!(
        traced("BEGIN { trace((uint64_t)-1); trace(-1); }"),
        vec![int(-1, IntType::U64), int(-1, IntType::I32)]
    );
}

#[test]
fn usual_arithmetic_conversions_and_promotions() {
    // The operand type of greater rank (width, then unsigned), as DTrace types it: int with
    // unsigned int is unsigned; long with unsigned int is long. No promotion to int: char
    // + char is a char, a shift or ~ has its operand's type.
    let src = r#"BEGIN {
        printf("%d %d %d %d\n", (uint8_t)1 - 2, (short)1 - 2, 1U - 2, 1L - 2U);
        printf("%d %d %d %d\n", sizeof((char)1 + (char)1), sizeof(1U + 1L), sizeof(1 ? 1 : 2L),
            sizeof((uint8_t)1 << 40));
        printf("%d %d %d %d\n", -1 >> 1, -1U >> 1, (uint64_t)-1 >> 63, (int64_t)-1 >> 63);
        printf("%d %d %d %d\n", -7 / 2, -7 % 2, 7U / 2, 0xfffffff9 / 2);
        printf("%d %d %d\n", ~0U, ~0, ~(uint8_t)0); }"#;
    assert_eq!(
        run(src),
        "-1 -1 4294967295 -1\n1 8 8 1\n-1 2147483647 1 -1\n-3 -1 3 2147483644\n4294967295 -1 255\n"
    );
}

#[test]
fn casts_truncate_and_sign_extend() {
    let src = r#"BEGIN {
        printf("%d %d %d %d\n", (char)200, (uint8_t)-1, (short)70000, (unsigned short)-1);
        printf("%d %d %d\n", (int)0x1ffffffff, (uint32_t)-2, (int64_t)(uint32_t)-1);
        printf("%d %d\n", (int64_t)(int)0xffffffff, (uint64_t)(char)-1); }"#;
    assert_eq!(
        run(src),
        "-56 255 4464 65535\n-1 4294967294 4294967295\n-1 18446744073709551615\n"
    );
}

#[test]
fn narrow_operands_keep_their_width() {
    // DTrace's tst.cast-add: (uint8_t)254 + 3 is an unsigned char, 1; short + char a short.
    let src = r#"unsigned char C; signed char c; short s;
        BEGIN { C = -2; c = 3; s = -2;
            printf("%d %d %d %d\n", C + c, c + C, s + c, C - 5); }"#;
    assert_eq!(run(src), "1 1 1 249\n");
}

#[test]
fn signed_and_unsigned_comparisons() {
    let src = r#"BEGIN {
        printf("%d %d %d %d\n", (uint64_t)-1 > 0, -1 < (unsigned)1, -1 < 1, -1L < 1U);
        printf("%d %d %d\n", (uint8_t)255 > (char)-1, (unsigned short)1 > -1, 0U >= -1); }"#;
    // (uint8_t)255 > (char)-1 compares as unsigned char, the greater rank: -1 is all ones.
    assert_eq!(run(src), "1 0 1 1\n0 1 0\n");
}

#[test]
fn strings_compare_with_and_take_null() {
    let src = r#"string t; BEGIN { s = "abc"; printf("%d %d %d %d\n", s == NULL, s != NULL,
        NULL == s, NULL < s);
        t = NULL; printf("%d %d [%s]\n", t == NULL, t != NULL, t);
        s = NULL; printf("%d [%s] [%s]\n", s == NULL, s, 1 ? NULL : "x"); }"#;
    assert_eq!(run(src), "0 1 0 1\n1 0 []\n1 [] []\n");
}

#[test]
fn uint64_keys_print_unsigned() {
    let p = c("BEGIN { @u[(uint64_t)-1] = count(); @s[(int64_t)-1] = count(); }");
    let mut t = begin_table(&p);
    let mut out = String::new();
    t.printa(0, SortOrder::default(), &mut out).unwrap();
    t.printa(1, SortOrder::default(), &mut out).unwrap();
    assert_eq!(
        out,
        "\n 18446744073709551615                1\n\n               -1                1\n"
    );
}
