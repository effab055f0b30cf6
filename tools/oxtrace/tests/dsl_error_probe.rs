//! dtrace:::ERROR through the simulator: fired in the firing that faults, with DTrace's
//! arguments, and never for a fault of its own clauses.

mod support;

use oxtrace::dsl::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
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
