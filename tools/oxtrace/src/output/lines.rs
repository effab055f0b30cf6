//! dtrace's default output around the records (without `-q`): the `CPU ID FUNCTION:NAME`
//! header, one line per firing of each clause that recorded something (dtrace's "enabled
//! probe"), that clause's `trace()`/`printf()` output on it, and the blank line at exit.
//!
//! dtrace prints the prefix before the first record of an enabled probe's firing and a
//! newline after its last one, so two clauses of one probe print two lines, and
//! `printf("x\n")` leaves a blank line after it. With `-q` nothing is added.

use std::io::{self, Write};

/// The firing and clause a record belongs to: records of one firing share its timestamp,
/// CPU and probe; the clause comes in the record's kind word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClauseFiring {
    /// When the probe fired (ns).
    pub ts: u64,
    /// The CPU it fired on.
    pub cpu: u32,
    /// The enabled probe (slot) that fired.
    pub probe: u32,
    /// The clause that wrote the record.
    pub clause: u32,
}

/// The state of the default output between records.
#[derive(Debug, Default)]
pub struct Lines {
    /// `-q` / `quiet`: print the records alone.
    pub quiet: bool,
    header_done: bool,
    open: Option<ClauseFiring>,
}

impl Lines {
    /// A fresh output, quiet or not.
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            ..Self::default()
        }
    }

    /// Before a record of `at` is printed: ends the line of the clause before it (when this
    /// is another one), prints the header the first time and this clause's prefix, CPU, the
    /// probe's `id` and `name` (`function:name`, right-aligned in 32 columns).
    pub fn begin(
        &mut self,
        at: ClauseFiring,
        id: u32,
        name: &str,
        out: &mut impl Write,
    ) -> io::Result<()> {
        if self.quiet || self.open == Some(at) {
            return Ok(());
        }
        self.end(out)?;
        if !self.header_done {
            writeln!(out, "{:>3} {:>6} {:>32}", "CPU", "ID", "FUNCTION:NAME")?;
            self.header_done = true;
        }
        write!(out, "{:>3} {id:>6} {name:>32} ", at.cpu)?;
        self.open = Some(at);
        Ok(())
    }

    /// Ends the open line, if any: after the last record of a clause's firing.
    pub fn end(&mut self, out: &mut impl Write) -> io::Result<()> {
        if self.open.take().is_some() && !self.quiet {
            writeln!(out)?;
        }
        Ok(())
    }

    /// At the end of the run, before the aggregations are printed (`aggs`, what that
    /// prints): ends the open line, then dtrace's blank line. The aggregations' own text
    /// starts with a blank line, which stands for it.
    pub fn finish(&mut self, aggs: &str, out: &mut impl Write) -> io::Result<()> {
        self.end(out)?;
        if !self.quiet && aggs.is_empty() {
            writeln!(out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ts: u64, clause: u32) -> ClauseFiring {
        ClauseFiring {
            ts,
            cpu: 1,
            probe: 0,
            clause,
        }
    }

    #[test]
    fn one_line_per_clause_firing() {
        let mut l = Lines::new(false);
        let mut o = Vec::new();
        l.begin(at(5, 0), 1, ":BEGIN", &mut o).unwrap();
        o.extend_from_slice(b" a");
        l.begin(at(5, 0), 1, ":BEGIN", &mut o).unwrap();
        o.extend_from_slice(b" b");
        l.begin(at(5, 1), 1, ":BEGIN", &mut o).unwrap();
        o.extend_from_slice(b"x\n");
        l.finish("", &mut o).unwrap();
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "CPU     ID                    FUNCTION:NAME\n  \
             1      1                           :BEGIN  a b\n  \
             1      1                           :BEGIN x\n\n\n"
        );
    }

    #[test]
    fn quiet_adds_nothing() {
        let mut l = Lines::new(true);
        let mut o = Vec::new();
        l.begin(at(5, 0), 1, ":BEGIN", &mut o).unwrap();
        l.end(&mut o).unwrap();
        l.finish("", &mut o).unwrap();
        assert!(o.is_empty());
    }

    #[test]
    fn aggregations_stand_for_the_blank_line() {
        let mut l = Lines::new(false);
        let mut o = Vec::new();
        l.finish("\n  1\n", &mut o).unwrap();
        assert!(o.is_empty());
    }
}
