//! `--oformat folded`: stack aggregations as the folded stacks flame graph tools read; printa's
//! `%k` of a stack key.

use oxtrace::agg::*;
use oxtrace::sym::ksym::Ksyms;
use oxtrace_core::agg::{AggBuffer, AggFunc, KeyElem, SnapshotCursor};

fn table(defs: Vec<AggDef>, ups: &[(u32, Vec<KeyElem<'_>>, i64)]) -> AggTable {
    let mut dict = Dictionary::new();
    for d in defs {
        dict.insert(d).unwrap();
    }
    let mut m = vec![0u64; 1 << 14];
    AggBuffer::format(&mut m).unwrap();
    for (id, key, v) in ups {
        let func = dict.get(*id).unwrap().func;
        let mut b = AggBuffer::attach(&mut m).unwrap();
        b.apply(*id, &func, key, *v, 1).unwrap();
    }
    let b = AggBuffer::attach(&mut m).unwrap();
    let mut buf = vec![0u8; b.snapshot_len()];
    let mut cur = SnapshotCursor::new();
    let n = b.serialize(0, &mut buf, &mut cur).unwrap();
    let mut t = AggTable::new(dict);
    t.merge_snapshots(&buf[..n]).unwrap();
    t
}

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
    use oxtrace_core::stack::{id, write_def, Def, DEF_KERNEL, DEF_MAX_BYTES};
    let i = id(false, 0, pcs);
    let mut b = vec![0u8; DEF_MAX_BYTES];
    let n = write_def(i, 0, pcs, &mut b);
    assert!(oxtrace::sym::stacks::define(
        &Def::parse(DEF_KERNEL, &b[..n]).unwrap()
    ));
    let n = oxtrace_core::ustack::encode_sym(oxtrace_core::ustack::Style::Kstack, 0, i, &mut b);
    b.truncate(n);
    b
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
