//! `--oformat flamegraph`: the aggregations keyed by stacks drawn as one interactive SVG
//! flame graph by the `inferno` crate (Brendan Gregg's FlameGraph in Rust): the stacks of
//! `super::folded`, each frame a function (the `+0x..` offsets dropped, so that the calls
//! of one function from different places merge), kernel frames in oranges, user frames in
//! blues, other key members (`execname`, `pid`) in greys. With several stack aggregations
//! each one's stacks are rooted at its name (`@k`, `@u`).

use super::folded::{FoldedStack, FrameKind};
use crate::agg::{AggTable, SortOrder};
use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::{self, Options};

/// The subtitle: what the colours mean.
pub const LEGEND: &str = "kernel frames orange, user frames blue, other keys grey";

/// The flame graph's title for a program: `oxtrace -s FILE`, or the text of `-e`/`-n`
/// (its white space collapsed, cut at 100 characters).
pub fn title(name: &str, text: &str) -> String {
    if !name.starts_with('-') {
        return format!("oxtrace -s {name}");
    }
    let mut t = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if t.chars().count() > 100 {
        t = t.chars().take(97).collect::<String>() + "...";
    }
    format!("oxtrace {name} '{t}'")
}

/// A frame as the flame graph names it: without its `+0x..` offset.
pub fn function_of(frame: &str) -> &str {
    match frame.rfind("+0x") {
        Some(i) if i > 0 && frame[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => &frame[..i],
        _ => frame,
    }
}

/// The colour of a frame: the hue says its kind, a hash of its name the shade, so that
/// neighbours differ and a function keeps its colour from one graph to the next.
pub fn frame_color(kind: FrameKind, name: &str) -> Color {
    // FNV-1a; three bytes of it shade the three channels apart.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let v = |i: u32| ((h >> (8 * i)) & 0xff) as f64 / 255.0;
    let c = |i: u32, base: f64, span: f64| (base + span * v(i)) as u8;
    match kind {
        FrameKind::Kernel => Color {
            r: c(0, 215.0, 40.0),
            g: c(1, 95.0, 70.0),
            b: c(2, 0.0, 50.0),
        },
        FrameKind::User => Color {
            r: c(0, 50.0, 60.0),
            g: c(1, 130.0, 50.0),
            b: c(2, 210.0, 45.0),
        },
        FrameKind::Other => {
            let g = c(0, 150.0, 70.0);
            Color { r: g, g, b: g }
        }
    }
}

/// The folded lines the flame graph is drawn from, with the kind of each frame name:
/// offsets dropped, each stack rooted at its aggregation's name when there are several.
pub fn flame_lines(
    t: &AggTable,
    stacks: &[FoldedStack],
) -> (Vec<String>, Vec<(String, FrameKind)>) {
    let several = stacks.iter().any(|s| s.agg != stacks[0].agg);
    let mut lines = Vec::with_capacity(stacks.len());
    let mut kinds = Vec::new();
    for s in stacks {
        let mut names: Vec<(&str, FrameKind)> = Vec::with_capacity(s.frames.len() + 1);
        let root;
        if several {
            let n = t.dictionary().get(s.agg).map_or("", |d| d.name.as_str());
            root = format!("@{n}");
            names.push((&root, FrameKind::Other));
        }
        names.extend(s.frames.iter().map(|(f, k)| (function_of(f), *k)));
        if names.is_empty() {
            names.push(("[unknown]", FrameKind::Other));
        }
        let mut line = String::new();
        for (i, (n, k)) in names.iter().enumerate() {
            if i > 0 {
                line.push(';');
            }
            line.push_str(n);
            kinds.push((n.to_string(), *k));
        }
        line.push(' ');
        line.push_str(&s.value.to_string());
        lines.push(line);
    }
    (lines, kinds)
}

impl AggTable {
    /// Every aggregation with a stack key as one SVG flame graph titled `title`; `None`
    /// when no such aggregation has an entry above zero (nothing to draw).
    pub fn to_flamegraph(&self, title: &str) -> Option<String> {
        let stacks = self.folded_stacks(SortOrder::default());
        if stacks.is_empty() {
            return None;
        }
        let (lines, kinds) = flame_lines(self, &stacks);
        let mut palette = PaletteMap::default();
        // The root frame inferno adds ("all", an empty function to its palette).
        palette.insert("", frame_color(FrameKind::Other, "all"));
        for (name, kind) in &kinds {
            palette.insert(name, frame_color(*kind, name));
        }
        let all_counts = stacks.iter().all(|s| {
            self.dictionary()
                .get(s.agg)
                .is_some_and(|d| d.func == oxtrace_core::agg::AggFunc::Count)
        });
        let mut opt = Options::default();
        opt.title = title.to_string();
        opt.subtitle = Some(LEGEND.to_string());
        opt.count_name = if all_counts { "samples" } else { "value" }.to_string();
        opt.palette_map = Some(&mut palette);
        let mut svg = Vec::new();
        flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut svg).ok()?;
        String::from_utf8(svg).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_lose_their_offsets_only() {
        assert_eq!(function_of("vmlinux`ksys_read+0x20"), "vmlinux`ksys_read");
        assert_eq!(function_of("prog`main+0x1f"), "prog`main");
        assert_eq!(function_of("0x10"), "0x10");
        assert_eq!(function_of("a+0xzz"), "a+0xzz");
        assert_eq!(function_of("cat"), "cat");
    }

    #[test]
    fn titles_name_the_program() {
        assert_eq!(title("latency.d", "x"), "oxtrace -s latency.d");
        assert_eq!(
            title("-e", "profile-997\n  { @[stack()] = count(); }"),
            "oxtrace -e 'profile-997 { @[stack()] = count(); }'"
        );
        assert!(title("-n", &"x ".repeat(200)).ends_with("...'"));
    }

    #[test]
    fn kinds_have_their_hues() {
        for n in ["a", "vmlinux`ksys_read", "zz"] {
            let k = frame_color(FrameKind::Kernel, n);
            let u = frame_color(FrameKind::User, n);
            let o = frame_color(FrameKind::Other, n);
            assert!(k.r > k.g && k.g > k.b, "{k:?}");
            assert!(u.b > u.g && u.g > u.r, "{u:?}");
            assert!(o.r == o.g && o.g == o.b, "{o:?}");
        }
    }
}
