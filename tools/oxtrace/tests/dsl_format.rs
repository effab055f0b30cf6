//! printf formatting: golden outputs, and a cross-check against the C library's snprintf.

use oxtrace::dsl::format::{parse, Piece};
use oxtrace::output::printf::{format_trace_item, format_trace_item_default, sprintf};
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
        // DTrace's `%d` prints an unsigned value unsigned (its tst.cast-imp).
        (
            "%d",
            vec![Item::Int(1 << 63, IntType::U64)],
            "9223372036854775808",
        ),
        (
            "%i",
            vec![Item::Int(u32::MAX as u64 - 1, IntType::U32)],
            "4294967294",
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
    let out = oxtrace::output::printf::format_rawbytes(b"oxtrace\tok", 20);
    let want = "
             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef
         0: 6f 78 74 72 61 63 65 09 6f 6b 00 00 00 00 00 00  oxtrace.ok......
        10: 00 00 00 00                                      ....
";
    assert_eq!(String::from_utf8(out).unwrap(), want);
}

/// A `double` as the compiler records it: its 8 bytes, unsigned.
fn dv(v: f64) -> Item<'static> {
    Item::Int(v.to_bits(), IntType::U64)
}

/// A `float` as recorded: its 4 bytes, unsigned.
fn fv(v: f32) -> Item<'static> {
    Item::Int(u64::from(v.to_bits()), IntType::new(4, false))
}

fn c_snprintf_f(fmt: &str, v: f64) -> String {
    let cfmt = std::ffi::CString::new(fmt).unwrap();
    let mut buf = vec![0u8; 512];
    // SAFETY: the buffer is 512 bytes, the format takes exactly one double argument.
    let n = unsafe { libc::snprintf(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), v) };
    buf.truncate(n as usize);
    String::from_utf8(buf).unwrap()
}

/// `%e %E %f %g %G` of floats and doubles: golden outputs, a float promoted to double.
#[test]
fn float_golden() {
    let cases: Vec<(&str, Vec<Item<'_>>, &str)> = vec![
        ("%f", vec![fv(1.5)], "1.500000"),
        ("%f", vec![dv(-2.25)], "-2.250000"),
        (
            "%e|%E",
            vec![dv(12345.678), dv(0.00012)],
            "1.234568e+04|1.200000E-04",
        ),
        (
            "%g|%g|%g|%G",
            vec![dv(100000.0), dv(1e6), dv(0.0001), dv(1e-5)],
            "100000|1e+06|0.0001|1E-05",
        ),
        (
            "%.2f|%8.3f|%-8.1f|%08.2f",
            vec![dv(4.56789), dv(2.5), dv(2.5), dv(-2.5)],
            "4.57|   2.500|2.5     |-0002.50",
        ),
        ("%*.*f|", vec![i32v(9), i32v(2), fv(0.1)], "     0.10|"),
        (
            "%f %f %F",
            vec![dv(f64::INFINITY), dv(f64::NAN), dv(0.0)],
            "inf nan %F",
        ),
        (
            "%G %e",
            vec![dv(f64::NEG_INFINITY), dv(-0.0)],
            "-INF -0.000000e+00",
        ),
        (
            "%#.0f %#g %+.1e % f",
            vec![dv(2.0), dv(1.0), dv(5.0), dv(1.0)],
            "2. 1.00000 +5.0e+00  1.000000",
        ),
        (
            "%.3g|%.10g|%g",
            vec![fv(0.1), fv(0.1), dv(123456789.0)],
            "0.1|0.1000000015|1.23457e+08",
        ),
    ];
    for (fmt, items, want) in cases {
        if fmt.contains("%F") {
            // %F is no conversion D has.
            assert!(parse(fmt.as_bytes(), false).is_err());
            continue;
        }
        assert_eq!(f(fmt, &items), want, "format {fmt}");
    }
}

/// Every combination of flags, widths and precisions of the float conversions against the
/// C library.
#[test]
fn float_matches_c_snprintf() {
    let values = [
        0.0,
        -0.0,
        1.0,
        -1.5,
        0.1,
        123.456,
        -9.999_999e-5,
        1e21,
        6.02214076e23,
        2.5e-308,
        f64::MAX,
        f64::INFINITY,
        f64::NAN,
        0.5,
        9.5,
        99999.5,
    ];
    let flags = ["", "-", "0", "+", " ", "#", "-+", "0#", "- "];
    let widths = ["", "1", "12", "25"];
    let precs = ["", ".0", ".1", ".3", ".17"];
    let mut n = 0;
    for conv in ["e", "E", "f", "g", "G"] {
        for fl in flags {
            for w in widths {
                for p in precs {
                    for &v in &values {
                        let fmt = format!("[%{fl}{w}{p}{conv}]");
                        let ours = f(&fmt, &[dv(v)]);
                        assert_eq!(ours, c_snprintf_f(&fmt, v), "{fmt} of {v:e}");
                        n += 1;
                    }
                }
            }
        }
    }
    assert!(n > 10000);
}

/// A long double's two recorded halves, formatted as the nearest double; trace() of a
/// long double shows its bytes, of a float or double the integer of its size, as dtrace.
#[test]
fn long_double_and_trace_of_floats() {
    use oxtrace::output::printf::{format_trace, long_double};
    // 1.5L: significand 0xc000..., exponent 16383.
    let (lo, hi) = (0xc000_0000_0000_0000u64, 0x3fffu64);
    assert_eq!(long_double(lo, hi), 1.5);
    assert_eq!(long_double(lo, hi | 0x8000), -1.5);
    assert_eq!(long_double(0x8000_0000_0000_0000, 0x7fff), f64::INFINITY);
    assert!(long_double(0xc000_0000_0000_0000, 0x7fff).is_nan());
    assert_eq!(long_double(0, 0), 0.0);
    let ld = [Item::Int(lo, IntType::I64), Item::Int(hi, IntType::I64)];
    assert_eq!(
        f("%f|%8.2e|%g", &[ld[0], ld[1], ld[0], ld[1], ld[0], ld[1]]),
        "1.500000|1.50e+00|1.5"
    );
    let bytes = String::from_utf8(format_trace(&ld, true, None)).unwrap();
    assert_eq!(
        bytes,
        "
             0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f  0123456789abcdef
         0: 00 00 00 00 00 00 00 c0 ff 3f 00 00 00 00 00 00  .........?......
"
    );
    // trace(float) and trace(double): the bits as a signed integer of their size.
    let t = |it: Item<'_>, quiet| String::from_utf8(format_trace(&[it], quiet, None)).unwrap();
    let fb = 1.5f32.to_bits() as i32;
    assert_eq!(
        t(Item::Int(fb as i64 as u64, IntType::I32), true),
        fb.to_string()
    );
    assert_eq!(
        t(Item::Int(fb as i64 as u64, IntType::I32), false),
        format!(" {fb:>8}")
    );
    let db = (-2.0f64).to_bits() as i64;
    assert_eq!(t(Item::Int(db as u64, IntType::I64), true), db.to_string());
}
