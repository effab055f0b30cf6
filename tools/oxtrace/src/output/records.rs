//! The records of a run in JSON, one object a line (`--oformat json`): the members every line
//! starts with and the traced values.

use super::json::json_str;
use super::printf::format_trace_item;
use oxtrace_core::action::{Item, RecordKind};
use oxtrace_core::buffer;

/// The members every JSON record line of probe `probe` starts with, without the closing
/// brace.
pub fn json_head(kind: RecordKind, cpu: u32, h: &buffer::Header, probe: &str) -> String {
    let ty = match kind {
        RecordKind::Printf => "printf",
        RecordKind::Exit => "exit",
        _ => "trace",
    };
    let mut o = format!(
        "{{\"type\":\"{ty}\",\"cpu\":{cpu},\"id\":{},\"probe\":",
        h.probe
    );
    json_str(&mut o, probe.as_bytes());
    o.push_str(&format!(",\"timestamp\":{}", h.timestamp));
    o
}

/// A traced value as JSON: an integer as a number (signed or not by its D type), a string
/// as a string.
pub fn json_item(o: &mut String, it: &Item<'_>) {
    match it {
        Item::Str(s) => json_str(o, s),
        Item::Mem(s) => {
            o.push('[');
            let bytes: Vec<String> = s.iter().map(|b| b.to_string()).collect();
            o.push_str(&bytes.join(","));
            o.push(']');
        }
        Item::Int(..) => o.push_str(&String::from_utf8_lossy(&format_trace_item(it))),
    }
}
