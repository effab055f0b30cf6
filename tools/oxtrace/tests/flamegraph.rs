//! `--oformat flamegraph`: a known stack aggregation drawn as an SVG flame graph; the frames,
//! their widths and colours checked in the SVG text. With `OXT_FLAME_OUT=DIR` the test also
//! leaves `DIR/known.svg` and `DIR/known.expect` (what a browser must show) for
//! `scripts/test-flamegraph.sh`, which loads the SVG in headless Chromium.

mod support;

use oxtrace::agg::*;
use oxtrace::output::flamegraph::{frame_color, LEGEND};
use oxtrace::output::folded::FrameKind;
use oxtrace::sym::ksym::Ksyms;
use oxtrace_core::agg::{AggFunc, KeyElem};
use std::collections::BTreeMap;
use support::{stack_ref, table_of as table};

fn stack_key(name: &str) -> KeyField {
    KeyField {
        name: name.into(),
        kind: KeyKind::Stack,
    }
}

/// A kernel stack.
fn kstack(pcs: &[u64]) -> Vec<u8> {
    stack_ref(false, 0, pcs)
}

/// A user stack of process `pid`.
fn ustack(pid: u64, pcs: &[u64]) -> Vec<u8> {
    stack_ref(true, pid, pcs)
}

/// The frames the SVG draws: `(title text, fill)` of every `<g>` of the frames group.
fn svg_frames(svg: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for g in svg.split("<g>").skip(1) {
        let (Some(t0), Some(t1)) = (g.find("<title>"), g.find("</title>")) else {
            continue;
        };
        let title = g[t0 + 7..t1].to_string();
        let fill = g
            .split("fill=\"")
            .nth(1)
            .and_then(|f| f.split('"').next())
            .unwrap_or("")
            .to_string();
        v.push((title, fill));
    }
    v
}

/// The title of the known profile.
const TITLE: &str = "oxtrace -s known.d";

/// The kind of a frame of the known profile, by its name.
fn kind_of(name: &str) -> FrameKind {
    if name.starts_with("vmlinux`") {
        FrameKind::Kernel
    } else if name.starts_with("0x") {
        FrameKind::User
    } else {
        FrameKind::Other
    }
}

fn rgb(c: inferno::flamegraph::color::Color) -> String {
    format!("rgb({},{},{})", c.r, c.g, c.b)
}

/// The known profile: `@[execname, stack(), ustack()] = count()` over kernel stacks under
/// user stacks of two processes.
fn known() -> (AggTable, Vec<(Vec<&'static str>, u64)>) {
    let _ = Ksyms::set_kernel(Ksyms::parse(
        "ffffffff81000000 T do_syscall_64\nffffffff81100000 T ksys_read\n\
         ffffffff81200000 T vfs_read\nffffffff81300000 T ksys_write\n",
    ));
    let read = kstack(&[0xffffffff81200010, 0xffffffff81100020, 0xffffffff81000030]);
    let read2 = kstack(&[0xffffffff81200044, 0xffffffff81100020, 0xffffffff81000030]);
    let write = kstack(&[0xffffffff81300008, 0xffffffff81000030]);
    // A pid no process has: the user frames are their addresses.
    let pid = 0x3fff_fff0;
    let u_main = ustack(pid, &[0x4010, 0x4000]);
    let u_loop = ustack(pid, &[0x5000, 0x4000]);
    let t = table(
        vec![AggDef {
            id: 0,
            name: String::new(),
            func: AggFunc::Count,
            keys: vec![
                KeyField::string("execname"),
                stack_key("ustack()"),
                stack_key("stack()"),
            ],
        }],
        &[
            (
                0,
                vec![
                    KeyElem::Str(b"cat"),
                    KeyElem::Str(&u_main),
                    KeyElem::Str(&read),
                ],
                0,
            ),
            (
                0,
                vec![
                    KeyElem::Str(b"cat"),
                    KeyElem::Str(&u_main),
                    KeyElem::Str(&read),
                ],
                0,
            ),
            (
                0,
                vec![
                    KeyElem::Str(b"cat"),
                    KeyElem::Str(&u_main),
                    KeyElem::Str(&read),
                ],
                0,
            ),
            (
                0,
                vec![
                    KeyElem::Str(b"cat"),
                    KeyElem::Str(&u_main),
                    KeyElem::Str(&read2),
                ],
                0,
            ),
            (
                0,
                vec![
                    KeyElem::Str(b"cat"),
                    KeyElem::Str(&u_loop),
                    KeyElem::Str(&write),
                ],
                0,
            ),
            (
                0,
                vec![
                    KeyElem::Str(b"dd"),
                    KeyElem::Str(&u_loop),
                    KeyElem::Str(&write),
                ],
                0,
            ),
            (
                0,
                vec![
                    KeyElem::Str(b"dd"),
                    KeyElem::Str(&u_loop),
                    KeyElem::Str(&write),
                ],
                0,
            ),
        ],
    );
    // The same profile as function names, outermost first: read and read2 differ only in
    // vfs_read's offset, so they are one path.
    let k_read = [
        "vmlinux`do_syscall_64",
        "vmlinux`ksys_read",
        "vmlinux`vfs_read",
    ];
    let k_write = ["vmlinux`do_syscall_64", "vmlinux`ksys_write"];
    let path = |e: &'static str, u: [&'static str; 2], k: &[&'static str]| {
        let mut v = vec![e];
        v.extend(u);
        v.extend(k);
        v
    };
    let expect = vec![
        (path("cat", ["0x4000", "0x4010"], &k_read), 4),
        (path("cat", ["0x4000", "0x5000"], &k_write), 1),
        (path("dd", ["0x4000", "0x5000"], &k_write), 2),
    ];
    (t, expect)
}

#[test]
fn a_known_profile_draws_every_frame_once_with_its_width_and_colour() {
    let (t, expect) = known();
    let svg = t.to_flamegraph(TITLE).expect("an SVG");
    assert!(svg.starts_with("<?xml"), "{}", &svg[..100]);
    assert!(svg.contains(&format!(">{TITLE}<")));
    assert!(svg.contains(LEGEND));
    // Every prefix of a path is one frame, with the sum of the counts under it.
    let total: u64 = expect.iter().map(|e| e.1).sum();
    let mut want: BTreeMap<Vec<&str>, u64> = BTreeMap::new();
    for (p, n) in &expect {
        for i in 1..=p.len() {
            *want.entry(p[..i].to_vec()).or_default() += n;
        }
    }
    let frames = svg_frames(&svg);
    // One frame per prefix, plus "all".
    assert_eq!(frames.len(), want.len() + 1, "{frames:#?}");
    assert!(frames
        .iter()
        .any(|(t, _)| t == &format!("all ({total} samples, 100%)")));
    for (prefix, n) in &want {
        let name = prefix.last().unwrap();
        let pct = format!("{:.2}", 100.0 * *n as f64 / total as f64);
        let title = format!("{name} ({n} samples, {pct}%)");
        let hits: Vec<_> = frames.iter().filter(|(t, _)| t == &title).collect();
        assert!(!hits.is_empty(), "no frame {title}: {frames:#?}");
        for (_, fill) in hits {
            assert_eq!(fill, &rgb(frame_color(kind_of(name), name)), "{title}");
        }
    }
    if let Some(dir) = std::env::var_os("OXT_FLAME_OUT") {
        // What a browser must show: the frame count (with "all"), the widest frame under
        // "all" (the root with the most samples), and the frames whose name is drawn once,
        // each with its colour and width in samples (of the 1,180 pixels inside the
        // margins of the 1,200-pixel image).
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("known.svg"), &svg).unwrap();
        let (widest, _) = want
            .iter()
            .filter(|(p, _)| p.len() == 1)
            .max_by_key(|(_, n)| **n)
            .unwrap();
        let mut e = format!(
            "frames {}\ntotal {total}\nwidest {}\ntitle {TITLE}\ngraphwidth 1180\n",
            want.len() + 1,
            widest[0]
        );
        let colour = |name: &str| rgb(frame_color(kind_of(name), name));
        for (prefix, n) in &want {
            let name = *prefix.last().unwrap();
            let c = colour(name);
            // A colour drawn once: no other frame (or "all") shares it, so its widest run
            // of pixels is this frame.
            let drawn = want
                .keys()
                .filter(|p| colour(p.last().unwrap()) == c)
                .count();
            if drawn == 1 && c != colour("all") {
                e.push_str(&format!(
                    "frame {name} {} {n}\n",
                    rgb(frame_color(kind_of(name), name))
                ));
            }
        }
        std::fs::write(dir.join("known.expect"), e).unwrap();
    }
}

#[test]
fn no_stack_entries_no_flame_graph() {
    let t = table(
        vec![AggDef {
            id: 0,
            name: String::new(),
            func: AggFunc::Count,
            keys: vec![KeyField::int("pid")],
        }],
        &[(0, vec![KeyElem::Int(7)], 0)],
    );
    assert_eq!(t.to_flamegraph("x"), None);
}
