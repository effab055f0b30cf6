//! dtrace:::ERROR through the simulator: fired in the firing that faults, with DTrace's
//! arguments, and never for a fault of its own clauses.

mod support;

use oxtrace::dsl::sim::{Firing, Sim};
use oxtrace::run;
use oxtrace_core::action::FaultKind;
use oxtrace_core::diag::FaultMsg;
use support::c;

#[test]
fn error_fires_with_dtrace_arguments() {
    let p = c(r#"
        BEGIN { x = 0; y = 1 / x; printf("not reached\n"); }
        BEGIN { trace(*(int *)8); }
        BEGIN /1 / x/ { }
        dtrace:::ERROR {
            printf("%d %d %d %d %d %#x ", arg0, arg1, arg2, arg3 > 0, arg4, arg5);
            printf("%s:%s:%s\n", probeprov, probefunc, probename);
        }
        BEGIN { printf("after\n"); }
    "#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    // Each BEGIN description is a probe of its own (0, 1, 2); arg1 is the epid of probe p's
    // clause c of the 5: p * 5 + c + 1. Action index: the division is the second
    // statement; the read the first; a predicate's fault is action 0. Fault types are
    // DTrace's: 4 division by zero, 1 bad address.
    assert_eq!(
        s.printf_output(&p),
        "0 1 2 1 4 0 dtrace::ERROR\n\
         0 7 1 1 1 0x8 dtrace::ERROR\n\
         0 13 0 1 4 0 dtrace::ERROR\n\
         after\n"
    );
    assert_eq!(s.faults.len(), 3);
}

#[test]
fn a_fault_in_error_does_not_recurse() {
    let p = c(r#"
        BEGIN { trace(*(int *)16); }
        ERROR { printf("error %d\n", arg4); trace(*(int *)arg5); }
        ERROR { printf("second clause\n"); }
    "#);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "error 1\nsecond clause\n");
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.faults[1].1.kind, FaultKind::BadAddr(16));
}

#[test]
fn without_error_clauses_faults_are_only_reported() {
    let p = c("BEGIN { z = 0; x = 1 / z; } BEGIN { printf(\"next\\n\"); }");
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    assert_eq!(s.printf_output(&p), "next\n");
    assert_eq!(s.faults[0].1.kind, FaultKind::DivZero);
}

#[test]
fn the_error_line_names_the_epid_of_the_clause_and_the_probe_id() {
    let src = "BEGIN { trace(1); }\nBEGIN { printf(\"%d\\n\", epid); x = 0; y = 1 / x; }";
    let p = c(src);
    let mut s = Sim::default();
    s.fire(&p, &Firing::default());
    // The second description is probe slot 1, its clause the second of 2: epid 4.
    assert_eq!(s.printf_output(&p), "4\n");
    let (clause, f) = s.faults[0];
    let (code, addr) = oxtrace_core::diag::fault_code(&f.kind);
    let src = run::Source {
        text: src,
        name: "t.d",
    };
    let fault = || FaultMsg { code, addr };
    let line = run::error_line(
        &p,
        src,
        (1, 7, "dtrace:::BEGIN"),
        (clause as u32, f.pc),
        fault(),
    );
    assert_eq!(
        line,
        format!(
            "error on enabled probe ID 4 (ID 7: dtrace:::BEGIN): division by zero in clause at t.d:2:1, instruction {}",
            f.pc
        )
    );
    // A probe without a listed ID is named without one.
    let line = run::error_line(
        &p,
        src,
        (1, 0, "dtrace:::BEGIN"),
        (clause as u32, f.pc),
        fault(),
    );
    assert!(
        line.starts_with("error on enabled probe ID 4 (dtrace:::BEGIN): division by zero"),
        "{line}"
    );
}
