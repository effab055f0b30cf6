//! The compiler refuses exactly what LOAD would refuse: random options and programs are
//! compiled with the compiler's checks and without them, and the image built without them
//! goes through the kernel's own LOAD check (`Image::parse` and `load::check_load`, the
//! functions `Session::load` runs). Both verdicts must agree, for options, scratch, dynamic
//! variables and aggregation parameters.

use oxtrace::dsl::{compile, compile_unchecked, CompileOptions};
use oxtrace_core::diag::Refusal;
use oxtrace_core::limits;
use oxtrace_core::load::{self, LoadPlan};
use oxtrace_core::program::Image;
use proptest::prelude::*;

/// What LOAD says about an image, short of attaching probes.
fn kernel_verdict(image: &[u8]) -> Result<LoadPlan, Refusal> {
    let img = Image::parse(image).map_err(|e| Refusal::image(&e))?;
    load::check_load(&img, |_| Ok::<(), Refusal>(()))
}

fn size_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "1",
        "4095",
        "4096",
        "4k",
        "64k",
        "1m",
        "64m",
        "67108863",
        "67108864",
        "67108865",
        "65m",
        "1g",
        "1073741825",
        "2g",
        "1t",
    ])
    .prop_map(str::to_string)
}

fn rate_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "100us", "199us", "200us", "999us", "1ms", "10ms", "1s", "60s", "61s", "1hz", "10hz",
        "1000hz", "1001hz", "5000hz", "6000hz",
    ])
    .prop_map(str::to_string)
}

fn strsize_value() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["1", "16", "256", "1024", "2048", "4096", "4097", "8k"])
        .prop_map(str::to_string)
}

/// `-x` options, each set at most once.
fn options() -> impl Strategy<Value = Vec<(String, Option<String>)>> {
    (
        prop::option::of(size_value()),
        prop::option::of(size_value()),
        prop::option::of(size_value()),
        prop::option::of(strsize_value()),
        prop::option::of(rate_value()),
        prop::option::of(rate_value()),
        prop::option::of(rate_value()),
    )
        .prop_map(|(buf, agg, dyn_, str_, sw, ag, cl)| {
            [
                ("bufsize", buf),
                ("aggsize", agg),
                ("dynvarsize", dyn_),
                ("strsize", str_),
                ("switchrate", sw),
                ("aggrate", ag),
                ("cleanrate", cl),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k.to_string(), Some(v))))
            .collect()
        })
}

/// Parameters of one aggregation: `lquantize(low, high, step)` or `llquantize(factor, low,
/// high, steps)`, around the edges of the validator's rules.
fn agg_call() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        (-3i64..12, -3i64..12, -2i64..6)
            .prop_map(|(l, h, s)| Some(format!("lquantize(1, {l}, {h}, {s})"))),
        (0i64..12, -1i64..4, 0i64..8, -1i64..40)
            .prop_map(|(f, l, h, s)| Some(format!("llquantize(1, {f}, {l}, {h}, {s})"))),
        (2i64..300, 0i64..10, 0i64..70, 1i64..70)
            .prop_map(|(f, l, h, s)| Some(format!("llquantize(1, {f}, {l}, {h}, {s})"))),
    ]
}

/// A program whose scratch need grows with `strings` string values in one clause and whose
/// dynamic variables have `skeys` string keys.
fn program(strings: usize, skeys: usize, thread: bool, agg: bool, call: Option<String>) -> String {
    let mut s = String::from("BEGIN {\n");
    for _ in 0..strings {
        s.push_str("\ttrace(execname);\n");
    }
    if skeys > 0 {
        let keys = vec!["execname"; skeys].join(", ");
        s.push_str(&format!("\ta[{keys}] = 1;\n"));
    }
    if thread {
        s.push_str("\tself->t = 1;\n");
    }
    if agg {
        s.push_str("\t@c[execname] = count();\n");
    }
    if let Some(call) = call {
        s.push_str(&format!("\t@q = {call};\n"));
    }
    s.push_str("\texit(0);\n}\n");
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn compiler_refuses_what_load_refuses(
        xopts in options(),
        strings in 0usize..80,
        skeys in 0usize..4,
        thread in any::<bool>(),
        agg in any::<bool>(),
        call in agg_call(),
    ) {
        let src = program(strings, skeys, thread, agg, call);
        let opts = CompileOptions { xopts: xopts.clone(), ..CompileOptions::default() };
        let unchecked = compile_unchecked(&src, "p.d", &opts).expect("well-formed program");
        let kernel = kernel_verdict(&unchecked.image);
        match compile(&src, "p.d", &opts) {
            Ok(c) => {
                prop_assert!(kernel.is_ok(), "compiler accepts, LOAD refuses {:?}: {xopts:?}\n{src}", kernel);
                prop_assert_eq!(c.image, unchecked.image);
            }
            Err(e) => prop_assert!(
                kernel.is_err(),
                "compiler refuses ({e}), LOAD accepts: {xopts:?}\n{src}"
            ),
        }
    }
}

/// The limits that once differed: the compiler said 1 MiB of scratch and 1 GiB of buffer.
#[test]
fn kernel_limits_are_the_compilers() {
    let mut o = CompileOptions::default();
    o.xopts.push(("bufsize".into(), Some("1g".into())));
    let e = compile("BEGIN { exit(0); }", "-e", &o).unwrap_err();
    assert_eq!(e.input, "-x");
    assert_eq!(e.msg, "option bufsize=1g exceeds the largest buffer, 64m");
    assert!(e.to_string().contains("bufsize=1g"), "{e}");

    let e = compile(
        "#pragma D option aggsize=65m\nBEGIN { @ = count(); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:18");
    assert_eq!(
        e.msg,
        "[D_PRAGMA_OPTSET] option aggsize=65m exceeds the largest aggregation buffer, 64m"
    );

    // 60 string slots of 4097 bytes need more than 256 KiB.
    let src = format!(
        "#pragma D option strsize=4096\nBEGIN {{\n{}}}\n",
        "\ttrace(execname);\n".repeat(60)
    );
    let e = compile(&src, "t.d", &CompileOptions::default()).unwrap_err();
    assert_eq!(e.position(), "1:18");
    assert!(e.msg.contains("262144 bytes of scratch"), "{}", e.msg);

    let e = compile(
        "#pragma D option dynvarsize=4k\n#pragma D option strsize=4096\nBEGIN { a[execname] = 1; }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:18");
    assert!(e.msg.starts_with("dynvarsize too small"), "{}", e.msg);
}

#[test]
fn function_names_fit_the_attach_table() {
    let long = "f".repeat(limits::MAX_PROBE_NAME + 1);
    let e = compile(
        &format!("fbt::{long}:entry {{}}"),
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:1");
    assert_eq!(
        e.msg,
        format!("function name '{long}' is longer than 63 bytes")
    );
    let ok = "f".repeat(limits::MAX_PROBE_NAME);
    compile(
        &format!("fbt::{ok}:entry {{}}"),
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap();
}
