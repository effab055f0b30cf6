//! dtrace:::ERROR through the simulator: fired in the firing that faults, with DTrace's
//! arguments, and never for a fault of its own clauses.

mod support;

use oxtrace::runtime;
use oxtrace::runtime::sim::{Firing, Sim};
use oxtrace_core::action::FaultKind;
use oxtrace_core::diag::FaultMsg;
use oxtrace_core::program::{Image, ProbeKind};
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
    // Each description is a probe of its own (BEGIN 0, 1, 2, ERROR 3, BEGIN 4) of one
    // clause: arg1, the faulting clause's EPID, is probe + 1. Action index: the division is the second
    // statement; the read the first; a predicate's fault is action 0. Fault types are
    // DTrace's: 4 division by zero, 1 bad address.
    assert_eq!(
        s.printf_output(&p),
        "0 1 2 1 4 0 dtrace::ERROR\n\
         0 2 1 1 1 0x8 dtrace::ERROR\n\
         0 3 0 1 4 0 dtrace::ERROR\n\
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
    // The second description is probe slot 1, after the first's one clause: EPID 2.
    assert_eq!(s.printf_output(&p), "2\n");
    let (clause, f) = s.faults[0];
    let (code, addr) = oxtrace_core::diag::fault_code(&f.kind);
    let src = runtime::Source {
        text: src,
        name: "t.d",
    };
    let fault = || FaultMsg { code, addr };
    let img = Image::parse(&p.image).unwrap();
    let epids = runtime::EnabledIds::new(&img, &[0, 1]);
    let line = runtime::error_line(
        &p,
        src,
        &epids,
        (1, 7, "dtrace:::BEGIN"),
        (clause as u32, f.pc),
        fault(),
    );
    assert_eq!(
        line,
        format!(
            "error on enabled probe ID 2 (ID 7: dtrace:::BEGIN): division by zero in clause at t.d:2:1, instruction {}",
            f.pc
        )
    );
    // A probe without a listed ID is named without one.
    let line = runtime::error_line(
        &p,
        src,
        &epids,
        (1, 0, "dtrace:::BEGIN"),
        (clause as u32, f.pc),
        fault(),
    );
    assert!(
        line.starts_with("error on enabled probe ID 2 (dtrace:::BEGIN): division by zero"),
        "{line}"
    );
}

/// EPIDs are dense and in program order, though LOAD's slots put the fbt ones of the attach
/// list (a glob's functions each a slot) before BEGIN's; the error line names the EPID the
/// clause's `epid` gave.
#[test]
fn epids_are_in_program_order_and_the_error_line_agrees() {
    let src = "BEGIN { printf(\"B=%d \", epid); }\n\
               fbt::f*:entry { printf(\"f=%d \", epid); }\n\
               fbt::g:entry { printf(\"g=%d\\n\", epid); x = 0; y = 1 / x; }";
    let p = c(src);
    let mut s = Sim {
        functions: vec!["f1".into(), "f2".into(), "g".into()],
        ..Sim::default()
    };
    let fbt = |func: &str| Firing {
        kind: ProbeKind::FbtEntry,
        func: func.into(),
        ..Firing::default()
    };
    // Slots: f1, f2 (description 1), g (2), then BEGIN (0). EPIDs: BEGIN's clause 1, then
    // f1's 2, f2's 3, g's 4.
    s.fire(&p, &fbt("f2"));
    s.fire(&p, &Firing::default());
    s.fire(&p, &fbt("f1"));
    s.fire(&p, &fbt("g"));
    assert_eq!(s.printf_output(&p), "f=3 B=1 f=2 g=4\n");
    let (clause, f) = s.faults[0];
    let (code, addr) = oxtrace_core::diag::fault_code(&f.kind);
    let img = Image::parse(&p.image).unwrap();
    // As PROBES lists the slots' descriptions.
    let epids = runtime::EnabledIds::new(&img, &[1, 1, 2, 0]);
    let line = runtime::error_line(
        &p,
        runtime::Source {
            text: src,
            name: "t.d",
        },
        &epids,
        (2, 0, "fbt:vmlinux:g:entry"),
        (clause as u32, f.pc),
        FaultMsg { code, addr },
    );
    assert!(
        line.starts_with("error on enabled probe ID 4 (fbt:vmlinux:g:entry):"),
        "{line}"
    );
    // A clause has no EPID on a slot of another description.
    assert_eq!(epids.epid(0, 0), 0);
    assert_eq!(epids.epid(3, 0), 1);
    assert_eq!(epids.epid(1, 1), 3);
}
