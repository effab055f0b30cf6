//! `llquantize()` with fewer steps than the factor (DTrace's rule: the steps then divide the
//! factor): compiled, run through the simulator, merged and printed, and its parameter
//! errors worded by the one validator at the argument they name.

mod support;

use oxtrace::agg::SortOrder;
use oxtrace::dsl::{compile, CompileOptions, Compiled};
use support::{begin_table, c};

/// Runs BEGIN and prints `@id` as `printa` does.
fn begin_printa(p: &Compiled, id: u32) -> String {
    let mut t = begin_table(p);
    let mut out = String::new();
    t.printa(id, SortOrder::default(), &mut out).unwrap();
    out
}

const HEADER: &str = "\n\n           value  ------------- Distribution ------------- count    \n";

#[test]
fn fewer_steps_than_the_factor_run_and_print() {
    let p = c("BEGIN { @l = llquantize(3, 10, 0, 6, 5); }");
    assert_eq!(p.aggs[0].params, [10, 0, 6, 5]);
    // Order 0 has buckets of width 2 (1, 2, 4, 6, 8): 3 lands in the one labelled 2.
    assert_eq!(
        begin_printa(&p, 0),
        format!(
            "{HEADER}{}{}{}\n",
            "               1 |                                         0        \n",
            "               2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@ 1        \n",
            "               4 |                                         0        \n",
        )
    );
    // Bucket starts are multiples of the width: the first bucket of an order begins at
    // the power (10, 100), the others at multiples of 20 and 200.
    let p = c(
        "BEGIN { @l = llquantize(19, 10, 0, 6, 5); @l = llquantize(20, 10, 0, 6, 5); \
               @l = llquantize(499, 10, 0, 6, 5); }",
    );
    assert_eq!(
        begin_printa(&p, 0),
        format!(
            "{HEADER}{}{}{}{}{}{}{}{}{}{}\n",
            "               8 |                                         0        \n",
            "              10 |@@@@@@@@@@@@@                            1        \n",
            "              20 |@@@@@@@@@@@@@                            1        \n",
            "              40 |                                         0        \n",
            "              60 |                                         0        \n",
            "              80 |                                         0        \n",
            "             100 |                                         0        \n",
            "             200 |                                         0        \n",
            "             400 |@@@@@@@@@@@@@                            1        \n",
            "             600 |                                         0        \n",
        )
    );
}

#[test]
fn parameter_errors_are_the_validators_at_their_argument() {
    let e = compile(
        "BEGIN { @l = llquantize(3, 10, 0, 6, 3); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:38");
    assert_eq!(
        e.msg,
        "[D_LLQUANT_STEPVAL] llquantize( ) factor (argument #1) must be evenly divisible by the number of steps \
         per magnitude (argument #4) when the steps are fewer than the factor"
    );
    let e = compile(
        "BEGIN { @l = llquantize(3, 10, 0, 6, 30); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:38");
    assert!(e
        .msg
        .starts_with("[D_LLQUANT_STEPVAL] llquantize( ) factor (argument #1) must evenly divide"));
    let e = compile(
        "BEGIN { @l = llquantize(3, 1, 0, 6, 30); }",
        "t.d",
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.position(), "1:28");
    assert_eq!(
        e.msg,
        "[D_LLQUANT_FACTORVAL] llquantize( ) factor (argument #1) must be two or more"
    );
}
