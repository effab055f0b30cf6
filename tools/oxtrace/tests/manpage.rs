//! The man page (Documentation/oxtrace.8.rst) says what the code does: every command-line
//! option of the tool's clap definition is described and nothing else is; every D option
//! the compiler takes is listed with the kernel's default and range; every provider a
//! description may name is listed. The README's count of guest selftests is checked against
//! what the selftests declare.

use clap::CommandFactory;
use oxtrace::cli::Cli;
use oxtrace::options::{frames_bound, interval_text, size_text, TOOL_OPTIONS};
use oxtrace_core::program::{OptKey, Options};

fn read(rel: &str) -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    std::fs::read_to_string(format!("{root}/{rel}")).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The text of the man page between the heading line `from` and the heading `to`.
fn section(page: &str, from: &str, to: &str) -> String {
    let a = page
        .find(&format!("\n{from}\n"))
        .unwrap_or_else(|| panic!("no section {from}"));
    let b = page[a + 1..]
        .find(&format!("\n{to}\n"))
        .map_or(page.len(), |b| a + 1 + b);
    page[a..b].to_string()
}

/// The paragraph of the man page's definition list item whose term starts with `term`.
fn item<'a>(sec: &'a str, term: &str) -> Option<&'a str> {
    let at = sec.find(&format!("\n{term}"))?;
    let rest = &sec[at + 1..];
    // The item ends at the next unindented line.
    let end = rest[1..]
        .find("\n\n")
        .and_then(|i| {
            let mut j = i + 1;
            while rest[1..].get(j..j + 1) == Some("\n") {
                j += 1;
            }
            let next = &rest[1 + j..];
            (!next.starts_with("   ")).then_some(1 + j)
        })
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

#[test]
fn every_option_is_in_the_man_page_and_only_those() {
    let page = read("Documentation/oxtrace.8.rst");
    let opts = section(&page, "OPTIONS", "D options (-x and #pragma D option)");
    let cmd = Cli::command();
    let mut flags = vec![
        "-h".to_string(),
        "--help".into(),
        "-V".into(),
        "--version".into(),
    ];
    for a in cmd.get_arguments() {
        if let Some(s) = a.get_short() {
            flags.push(format!("-{s}"));
        }
        if let Some(l) = a.get_long() {
            flags.push(format!("--{l}"));
        }
    }
    for f in &flags {
        assert!(
            opts.contains(&format!("**{f}**")),
            "the man page's OPTIONS do not describe {f}"
        );
    }
    // Every option the page describes (a term line starting with **-) is the tool's.
    for line in opts.lines().filter(|l| l.starts_with("**-")) {
        for word in line.split("**").filter(|w| w.starts_with('-')) {
            assert!(
                flags.iter().any(|f| f == word),
                "the man page describes {word}, which the tool does not have"
            );
        }
    }
}

/// A rate as the man page writes a default: `Nhz`.
fn hz(ns: u64) -> String {
    format!("{}hz", 1_000_000_000 / ns)
}

#[test]
fn every_d_option_is_in_the_man_page_with_its_default() {
    let page = read("Documentation/oxtrace.8.rst");
    let dopts = section(&page, "D options (-x and #pragma D option)", "oxtrace pt");
    let defaults = Options::default();
    let mut wrong = Vec::new();
    let mut n = 0;
    while let Some(key) = OptKey::from_u32(n + 1) {
        n += 1;
        let name = key.name();
        let Some(text) = item(&dopts, &format!("**{name}**")) else {
            wrong.push(format!("D option {name} is not in the man page"));
            continue;
        };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let v = defaults.get(key);
        let default = match key {
            OptKey::Bufpolicy => "switch".to_string(),
            OptKey::Switchrate | OptKey::Aggrate | OptKey::Cleanrate => hz(v),
            OptKey::Strsize | OptKey::Nspec => v.to_string(),
            _ => size_text(v),
        };
        if !text.contains(&format!("Default **{default}**")) {
            wrong.push(format!(
                "{name}: the man page does not give the default {default}"
            ));
        }
        // The range: sizes and counts as the options write them, rates as intervals.
        let (lo, hi) = key.range();
        let range = match key {
            OptKey::Bufpolicy => "switch, fill or ring".to_string(),
            OptKey::Switchrate | OptKey::Aggrate | OptKey::Cleanrate => {
                format!("{}..{}", interval_text(lo), interval_text(hi))
            }
            OptKey::Strsize | OptKey::Nspec => format!("{lo}..{hi}"),
            _ => format!("{}..{}", size_text(lo), size_text(hi)),
        };
        if !text.contains(&range) {
            wrong.push(format!(
                "{name}: the man page does not give the range {range}"
            ));
        }
    }
    assert!(n >= 10, "only {n} kernel options");
    for name in TOOL_OPTIONS {
        if !dopts.contains(&format!("**{name}**")) {
            wrong.push(format!("tool option {name} is not in the man page"));
        }
    }
    // The frame-count options' bounds, from rust/core's limits.
    let frames = item(&dopts, "**stackframes**").unwrap_or_default();
    let frames = frames.split_whitespace().collect::<Vec<_>>().join(" ");
    for name in ["stackframes", "ustackframes"] {
        let max = frames_bound(name).unwrap();
        let f = if name == "stackframes" {
            "stack()"
        } else {
            "ustack()"
        };
        if !frames.contains(&format!("**{f}** (1 to {max})")) {
            wrong.push(format!(
                "{name}: the man page does not give its bound 1 to {max}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_provider_is_in_the_man_page() {
    let page = read("Documentation/oxtrace.8.rst");
    let provs = section(&page, "PROVIDERS", "EXAMPLES");
    for p in oxtrace::dsl::PROVIDERS {
        // dtrace's are named by their probes, tick by its own.
        let shown = match p {
            "dtrace" => "**BEGIN**".to_string(),
            "interval" => "**interval:".to_string(),
            p => format!("**{p}"),
        };
        assert!(
            provs.contains(&shown),
            "provider {p} is not in the man page's PROVIDERS ({shown})"
        );
    }
}

/// The guest's selftests as their sources declare them: the plans of the shell tests, the
/// TEST()s of the C programs (kselftest_harness.h), one test per command of the tutorial
/// (oxt-doctest) and oxt-loadtest's plan.
fn selftests_declared() -> u32 {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut n = 0;
    for e in std::fs::read_dir(format!("{root}/selftests/oxtrace")).unwrap() {
        let p = e.unwrap().path();
        let t = std::fs::read_to_string(&p).unwrap_or_default();
        match p.extension().and_then(|x| x.to_str()) {
            Some("sh") => {
                n += t
                    .lines()
                    .filter_map(|l| l.strip_prefix("plan ")?.trim().parse::<u32>().ok())
                    .sum::<u32>()
            }
            Some("c") => {
                n += t
                    .lines()
                    .filter(|l| l.starts_with("TEST(") || l.starts_with("TEST_F("))
                    .count() as u32
            }
            _ => {}
        }
    }
    n += read("Documentation/tutorial.rst")
        .lines()
        .filter(|l| l.starts_with("   # "))
        .count() as u32;
    let lt = read("tools/oxtrace/src/bin/oxt-loadtest.rs");
    n += lt
        .split("println!(\"1..")
        .nth(1)
        .and_then(|r| r.split('"').next()?.parse::<u32>().ok())
        .expect("oxt-loadtest's plan");
    n
}

#[test]
fn the_readme_counts_the_selftests_there_are() {
    let declared = selftests_declared();
    let readme = read("README.md");
    let at = readme
        .find(" selftests in the guest")
        .expect("the README counts the selftests");
    let said: u32 = readme[..at]
        .rsplit(' ')
        .next()
        .and_then(|n| n.replace(',', "").parse().ok())
        .expect("a number before 'selftests in the guest'");
    // "about N": within a tenth of what the sources declare.
    assert!(
        said.abs_diff(declared) * 10 <= declared,
        "the README says about {said} selftests; the selftests declare {declared}"
    );
}
