//! printf formatting: golden outputs, and a cross-check against the C library's snprintf.

use oxtrace::dsl::format::{format_trace_item, format_trace_item_default, parse, sprintf, Piece};
use oxtrace_core::action::{IntType, Item};

fn f(fmt: &str, items: &[Item<'_>]) -> String {
    String::from_utf8(sprintf(fmt.as_bytes(), items).unwrap()).unwrap()
}

fn i64v(v: i64) -> Item<'static> {
    Item::Int(v as u64, IntType::I64)
}

fn i32v(v: i32) -> Item<'static> {
    Item::Int(v as i64 as u64, IntType::I32)
}

#[test]
fn golden() {
    let s = |x: &'static str| Item::Str(x.as_bytes());
    let cases: Vec<(&str, Vec<Item<'_>>, &str)> = vec![
        ("%d", vec![i64v(-42)], "-42"),
        (
            "%i|%5d|%-5d|%05d",
            vec![i64v(7), i64v(7), i64v(7), i64v(-7)],
            "7|    7|7    |-0007",
        ),
        ("%u", vec![i64v(-1)], "18446744073709551615"),
        ("%u", vec![i32v(-1)], "4294967295"),
        (
            "%x %X %#x %#o %o",
            vec![i64v(255), i64v(255), i64v(255), i64v(8), i64v(0)],
            "ff FF 0xff 010 0",
        ),
        ("%x", vec![i32v(-1)], "ffffffff"),
        ("%lx %llu %ld", vec![i64v(16), i64v(3), i64v(-3)], "10 3 -3"),
        ("%+d % d %+d", vec![i64v(5), i64v(5), i64v(-5)], "+5  5 -5"),
        (
            "%.3d|%8.3d|%-8.3d|",
            vec![i64v(7), i64v(-7), i64v(7)],
            "007|    -007|007     |",
        ),
        ("%.0d|", vec![i64v(0)], "|"),
        ("%c%c", vec![i64v(72), i64v(105)], "Hi"),
        (
            "%s|%10s|%-10s|%.2s",
            vec![s("abc"), s("abc"), s("abc"), s("abc")],
            "abc|       abc|abc       |ab",
        ),
        ("%p %p", vec![i64v(0x1234), i64v(0)], "0x1234 0x0"),
        ("100%% done\n", vec![], "100% done\n"),
        ("%d", vec![Item::Int(0xff, IntType::new(1, false))], "255"),
        ("%d", vec![Item::Int(u64::MAX, IntType::new(1, true))], "-1"),
        (
            "%u",
            vec![Item::Int(u64::MAX, IntType::new(2, true))],
            "4294967295",
        ),
        (
            "%d",
            vec![Item::Int(1 << 63, IntType::U64)],
            "-9223372036854775808",
        ),
        ("%s", vec![i64v(3)], "3"),
        ("%d %d", vec![i64v(1)], "1 "),
    ];
    for (fmt, items, want) in cases {
        assert_eq!(f(fmt, &items), want, "format {fmt:?}");
    }
}

#[test]
fn trace_items() {
    assert_eq!(format_trace_item(&i32v(-3)), b"-3");
    assert_eq!(
        format_trace_item(&Item::Int(u64::MAX, IntType::U64)),
        b"18446744073709551615"
    );
    assert_eq!(format_trace_item(&Item::Str(b"x")), b"x");
}

#[test]
fn parse_errors_and_printa_flag() {
    assert_eq!(parse(b"%w", false).unwrap_err().0, 1);
    assert_eq!(parse(b"abc %", false).unwrap_err().0, 4);
    let star = parse(b"%*.*d", false).unwrap();
    assert!(matches!(&star[0], Piece::Conv(c) if c.star_width && c.star_prec));
    assert_eq!(parse(b"%@d", false).unwrap_err().0, 1);
    let p = parse(b"%-10s %@8d\n", true).unwrap();
    let agg: Vec<bool> = p
        .iter()
        .filter_map(|x| match x {
            Piece::Conv(c) => Some(c.flags.agg),
            _ => None,
        })
        .collect();
    assert_eq!(agg, vec![false, true]);
}

fn c_snprintf(fmt: &str, v: i64) -> String {
    let cfmt = std::ffi::CString::new(fmt).unwrap();
    let mut buf = vec![0u8; 256];
    // SAFETY: the buffer is 256 bytes, the format takes exactly one 64-bit integer argument.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), v) };
    buf.truncate(n as usize);
    String::from_utf8(buf).unwrap()
}

/// Every combination of flags, widths and precisions against the C library, for 64-bit
/// arguments (C's `ll` conversions).
#[test]
fn matches_c_snprintf() {
    let values = [0i64, 1, -1, 42, -42, 255, i64::MAX, i64::MIN, 0x1234_5678];
    let flags = ["", "-", "0", "+", " ", "#", "-+", "0#", "- "];
    let widths = ["", "1", "5", "12", "25"];
    let precs = ["", ".0", ".3", ".20"];
    let mut n = 0;
    for conv in ["d", "i", "u", "x", "X", "o"] {
        for fl in flags {
            for w in widths {
                for p in precs {
                    for &v in &values {
                        let ours = f(&format!("[%{fl}{w}{p}{conv}]"), &[i64v(v)]);
                        let theirs = c_snprintf(&format!("[%{fl}{w}{p}ll{conv}]"), v);
                        assert_eq!(ours, theirs, "%{fl}{w}{p}{conv} of {v}");
                        n += 1;
                    }
                }
            }
        }
    }
    assert!(n > 9000);
}

/// trace() without -q: the Dynamic Tracing Guide's columns by size, strings in 33.
#[test]
fn trace_default_layout() {
    let t = |it: Item<'_>| String::from_utf8(format_trace_item_default(&it)).unwrap();
    assert_eq!(t(i64v(3)), format!(" {:>16}", 3));
    assert_eq!(t(i64v(-5)), format!(" {:>16}", -5));
    assert_eq!(t(i32v(-1)), "       -1");
    assert_eq!(t(Item::Int(65535, IntType::new(2, false))), " 65535");
    assert_eq!(t(Item::Int(7, IntType::new(1, false))), "   7");
    assert_eq!(t(Item::Str(b"hello")), format!("  {:<33}", "hello"));
    assert_eq!(t(Item::Str(&[b'x'; 40])), format!("  {}", "x".repeat(40)));
}

/// `rawbytes`: trace() of a string as dtrace prints binary data, the whole `strsize` bytes.
#[test]
fn rawbytes_dumps_the_recorded_bytes() {
    let out = oxtrace::dsl::format::format_rawbytes(b"oxtrace\tok", 20);
    let want = "
             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef
         0: 6f 78 74 72 61 63 65 09 6f 6b 00 00 00 00 00 00  oxtrace.ok......
        10: 00 00 00 00                                      ....
";
    assert_eq!(String::from_utf8(out).unwrap(), want);
}
