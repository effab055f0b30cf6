//! `--oformat folded`: stack aggregations as the folded stacks flame graph tools read; printa's
//! `%k` of a stack key.

mod support;

use oxtrace::agg::*;
use oxtrace::sym::ksym::Ksyms;
use oxtrace_core::agg::{AggFunc, KeyElem};
use support::{stack_ref, table_of as table};

fn def(id: u32, func: AggFunc, keys: Vec<KeyField>) -> AggDef {
    AggDef {
        id,
        name: String::new(),
        func,
        keys,
    }
}

/// A reference to kernel stack `pcs`, defined in the run's table as the kernel's
/// definition record would.
fn kstack(pcs: &[u64]) -> Vec<u8> {
    stack_ref(false, 0, pcs)
}

fn stack_key() -> KeyField {
    KeyField {
        name: "stack()".into(),
        kind: KeyKind::Stack,
    }
}

#[test]
fn stack_aggregations_fold_root_first() {
    let _ = Ksyms::set_kernel(Ksyms::parse(
        "ffffffff81000000 T do_syscall_64\nffffffff81100000 T ksys_read\n\
         ffffffff81200000 T vfs_read\n",
    ));
    let enc = kstack;
    // Innermost first, as the kernel walks.
    let deep = enc(&[0xffffffff81200010, 0xffffffff81100020, 0xffffffff81000030]);
    let short = enc(&[0xffffffff81100020, 0xffffffff81000030]);
    let t = table(
        vec![
            def(
                0,
                AggFunc::Count,
                vec![KeyField::string("execname"), stack_key()],
            ),
            def(1, AggFunc::Count, vec![KeyField::int("pid")]),
            def(2, AggFunc::Sum, vec![stack_key()]),
        ],
        &[
            (0, vec![KeyElem::Str(b"cat"), KeyElem::Str(&deep)], 0),
            (0, vec![KeyElem::Str(b"cat"), KeyElem::Str(&deep)], 0),
            (0, vec![KeyElem::Str(b"cat"), KeyElem::Str(&short)], 0),
            (1, vec![KeyElem::Int(7)], 0),
            (2, vec![KeyElem::Str(&short)], -5),
            (2, vec![KeyElem::Str(&deep)], 9),
        ],
    );
    assert_eq!(
        t.to_folded(SortOrder::default()),
        "cat;vmlinux`do_syscall_64+0x30;vmlinux`ksys_read+0x20 1\n\
         cat;vmlinux`do_syscall_64+0x30;vmlinux`ksys_read+0x20;vmlinux`vfs_read+0x10 2\n\
         vmlinux`do_syscall_64+0x30;vmlinux`ksys_read+0x20;vmlinux`vfs_read+0x10 9\n"
    );
}

#[test]
fn printa_percent_k_prints_a_stack_key_symbolized() {
    // The kernel table is the one the other test sets (one per test binary): set it here
    // too, whichever runs first.
    let _ = Ksyms::set_kernel(Ksyms::parse(
        "ffffffff81000000 T do_syscall_64\nffffffff81100000 T ksys_read\n\
         ffffffff81200000 T vfs_read\n",
    ));
    let b = kstack(&[0xffffffff81100020, 0xffffffff81000030]);
    let mut sym = [0u8; 16];
    let m = oxtrace_core::ustack::encode_sym(
        oxtrace_core::ustack::Style::Kfunc,
        0,
        0xffffffff81200010,
        &mut sym,
    );
    let mut t = table(
        vec![def(0, AggFunc::Count, vec![stack_key(), stack_key()])],
        &[(0, vec![KeyElem::Str(&b), KeyElem::Str(&sym[..m])], 0)],
    );
    let mut s = String::new();
    t.printa_format(0, "%k|%s|%@d\n", SortOrder::default(), &mut s)
        .unwrap();
    assert_eq!(
        s,
        "\n              vmlinux`ksys_read+0x20\n              vmlinux`do_syscall_64+0x30\n\
         |vmlinux`vfs_read|1\n"
    );
}
