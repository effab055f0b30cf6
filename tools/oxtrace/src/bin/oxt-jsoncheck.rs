//! oxt-jsoncheck: checks that standard input is `oxtrace --oformat json` output: every line one
//! JSON object (parsed strictly by serde_json) with a string member `type`, nothing else,
//! no blank line. Prints a summary (`N lines: trace 2, aggregation 1, ...`) and exits 1
//! naming the first bad line.

use std::collections::BTreeMap;
use std::io::{self, BufRead};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    let mut n = 0;
    for line in io::stdin().lock().lines() {
        n += 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("oxt-jsoncheck: line {n}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("oxt-jsoncheck: line {n} is not JSON ({e}): {line}");
                return ExitCode::FAILURE;
            }
        };
        let Some(ty) = v.get("type").and_then(|t| t.as_str()) else {
            eprintln!("oxt-jsoncheck: line {n} is not an object with a string \"type\": {line}");
            return ExitCode::FAILURE;
        };
        *types.entry(ty.to_string()).or_default() += 1;
    }
    let summary: Vec<String> = types.iter().map(|(t, c)| format!("{t} {c}")).collect();
    println!("{n} lines: {}", summary.join(", "));
    ExitCode::SUCCESS
}
