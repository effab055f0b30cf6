//! The parser on synthetic blobs, each malformation refused, and on the running kernel's BTF
//! where there is one.

use super::build::Builder;
use super::*;

fn sample() -> (Vec<u8>, [u32; 6]) {
    let mut b = Builder::new();
    let int = b.int("int", 4, true);
    let uchar = b.int("unsigned char", 1, false);
    let fwd = b.fwd(false, "file");
    let pfile = b.ptr(fwd);
    let file = b.sou(
        false,
        "file",
        16,
        &[
            ("f_count", int, 0, 0),
            ("f_mode", uchar, 32, 3),
            ("f_next", pfile, 64, 0),
        ],
    );
    let size_t = b.typedef("size_t", int);
    let cint = b.constant(size_t);
    let f = b.func("vfs_read", int, &[("file", pfile), ("count", cint)]);
    b.var("jiffies", int);
    (b.finish(), [int, uchar, pfile, file, size_t, f])
}

#[test]
fn parses_a_synthetic_blob() {
    let (blob, [int, uchar, pfile, file, size_t, _]) = sample();
    let btf = Btf::parse(&blob).unwrap();
    assert_eq!(btf.len(), 11);
    assert_eq!(
        btf.ty(int).unwrap().kind,
        Kind::Int {
            size: 4,
            signed: true,
            bool: false
        }
    );
    // The definition wins over the forward declaration, whatever the order.
    assert_eq!(btf.find(NameKind::Struct, "file"), Some(file));
    let Kind::Sou { size, members, .. } = &btf.ty(file).unwrap().kind else {
        panic!("not a struct");
    };
    assert_eq!(*size, 16);
    let got: Vec<_> = members
        .iter()
        .map(|m| (btf.str(m.name), m.ty, m.bit_off, m.bits))
        .collect();
    assert_eq!(
        got,
        [
            ("f_count", int, 0, 0),
            ("f_mode", uchar, 32, 3),
            ("f_next", pfile, 64, 0)
        ]
    );
    assert_eq!(btf.find(NameKind::Typedef, "size_t"), Some(size_t));
    let (ret, params) = btf.func("vfs_read").unwrap();
    assert_eq!(ret, int);
    assert_eq!(btf.str(params[0].name), "file");
    assert_eq!(btf.type_name(params[0].ty), "struct file *");
    assert_eq!(btf.strip(params[1].ty, false), size_t);
    assert_eq!(btf.strip(params[1].ty, true), int);
    assert_eq!(btf.type_name(params[1].ty), "size_t");
    assert!(btf.func("vfs_write").is_none());
    assert_eq!(btf.find(NameKind::Union, "file"), None);
}

#[test]
fn refuses_malformed_blobs() {
    let (blob, _) = sample();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (blob[..10].to_vec(), "too short for a BTF header"),
        (
            {
                let mut b = blob.clone();
                b.swap(0, 1);
                b
            },
            "bad BTF magic 0x9feb",
        ),
        (
            {
                let mut b = blob.clone();
                b[2] = 2;
                b
            },
            "unsupported BTF version 2",
        ),
        (
            {
                // The string section runs past the end.
                let mut b = blob.clone();
                b[20..24].copy_from_slice(&100_000u32.to_le_bytes());
                b
            },
            "BTF string section",
        ),
        (
            {
                // The type section ends inside the last record.
                let mut b = blob.clone();
                let tlen = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) - 4;
                b[12..16].copy_from_slice(&tlen.to_le_bytes());
                b
            },
            "is truncated",
        ),
        (
            {
                // Type 1's kind becomes 31.
                let mut b = blob.clone();
                b[24 + 7] = 31;
                b
            },
            "unknown BTF kind 31",
        ),
        (
            {
                // Type 3 (a pointer) points past the table.
                let mut b = blob.clone();
                let at = 24 + 16 + 16 + 12 + 8;
                b[at..at + 4].copy_from_slice(&999u32.to_le_bytes());
                b
            },
            "BTF type 4 has a bad reference",
        ),
    ];
    for (b, want) in cases {
        let e = Btf::parse(&b).map(|_| ()).expect_err(want);
        assert!(e.contains(want), "{e:?} should say {want:?}");
    }
}

#[test]
fn no_input_panics() {
    // Every prefix and every single-byte corruption of a valid blob parses or is refused.
    let (blob, _) = sample();
    for n in 0..blob.len() {
        let _ = Btf::parse(&blob[..n]);
        for v in [0u8, 0xff, 0x80, 7] {
            let mut b = blob.clone();
            b[n] = v;
            if let Ok(btf) = Btf::parse(&b) {
                for id in 0..btf.len() as u32 {
                    let _ = btf.type_name(id);
                }
            }
        }
    }
}

/// The running kernel's BTF, when it has some: the types every Linux has.
#[test]
fn parses_the_running_kernel() {
    let Some(btf) = Btf::kernel() else {
        eprintln!("no {KERNEL_PATH}: nothing to check");
        return;
    };
    let btf = btf.unwrap();
    assert!(btf.len() > 1000, "{} types", btf.len());
    let task = btf.find(NameKind::Struct, "task_struct").unwrap();
    let Kind::Sou { members, size, .. } = &btf.ty(task).unwrap().kind else {
        panic!("task_struct is not a struct");
    };
    assert!(*size > 1000);
    let pid = members.iter().find(|m| btf.str(m.name) == "pid").unwrap();
    assert_eq!(btf.type_name(pid.ty), "pid_t");
    let (_, params) = btf.func("vfs_read").unwrap();
    assert_eq!(params.len(), 4);
    assert_eq!(btf.type_name(params[0].ty), "struct file *");
}

/// Found by the BTF fuzzer (tests/fuzz.rs): a pointer to itself made `type_name` recurse
/// until the stack overflowed, which aborts the tool. A loop, and a chain deeper than the
/// kernel's own limit, are refused when the blob is parsed.
#[test]
fn refuses_reference_loops_and_deep_chains() {
    let mut b = Builder::new();
    b.int("int", 4, true);
    let p = b.ptr(3); // type 2 -> type 3
    b.typedef("t", p); // type 3 -> type 2: a loop
    let e = Btf::parse(&b.finish()).unwrap_err();
    assert_eq!(
        e,
        "BTF type 2 starts a chain of more than 32 pointers, arrays, typedefs or qualifiers (or a loop)"
    );
    let chain = |n: u32| {
        let mut b = Builder::new();
        let mut t = b.int("int", 4, true);
        for _ in 0..n {
            t = b.ptr(t);
        }
        (b.finish(), t)
    };
    let (ok, top) = chain(u32::from(MAX_CHAIN));
    let btf = Btf::parse(&ok).unwrap();
    assert_eq!(btf.type_name(top), format!("int{}", " *".repeat(32)));
    let e = Btf::parse(&chain(u32::from(MAX_CHAIN) + 1).0).unwrap_err();
    assert!(
        e.starts_with("BTF type 34 starts a chain of more than 32"),
        "{e}"
    );
}
