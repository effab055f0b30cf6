//! The stacks the kernel defined: `stack()` and `ustack()` values are references (a style
//! byte and an id, `oxtrace_core::stack`), and each CPU writes a stack's frames once in a
//! definition record before the first record or aggregation key that names it. The run
//! keeps every definition it reads here, and the renderer looks references up.

use oxtrace_core::stack::Def;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One defined stack: its process (0 for a kernel stack) and its frames, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    /// A user stack (else a kernel stack).
    pub user: bool,
    /// The process of a user stack.
    pub pid: u64,
    /// The frames, innermost first.
    pub pcs: Vec<u64>,
}

/// The stacks defined so far, by id.
#[derive(Debug, Default)]
pub struct Stacks {
    by_id: HashMap<u64, Stack>,
    /// Definitions whose id was already another stack's (a hash collision) or did not
    /// match their frames (a corrupt record).
    pub bad: u64,
}

impl Stacks {
    /// Keeps definition `d`; false (and counted in `bad`) when it is not well formed or
    /// its id already names other frames.
    pub fn define(&mut self, d: &Def<'_>) -> bool {
        if !d.checks() {
            self.bad += 1;
            return false;
        }
        let s = Stack {
            user: d.user,
            pid: d.pid,
            pcs: d.pcs().collect(),
        };
        match self.by_id.get(&d.id) {
            Some(old) if *old != s => {
                self.bad += 1;
                false
            }
            Some(_) => true,
            None => {
                self.by_id.insert(d.id, s);
                true
            }
        }
    }

    /// The stack of `id`, if it was defined.
    pub fn get(&self, id: u64) -> Option<&Stack> {
        self.by_id.get(&id)
    }

    /// Stacks defined.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The stacks of this process's runs (and simulations), made at first use.
pub fn system() -> &'static Mutex<Stacks> {
    static S: OnceLock<Mutex<Stacks>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(Stacks::default()))
}

/// Keeps definition `d` in [`system`]; see [`Stacks::define`].
pub fn define(d: &Def<'_>) -> bool {
    system().lock().unwrap_or_else(|e| e.into_inner()).define(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxtrace_core::stack::{id, write_def, DEF_KERNEL, DEF_MAX_BYTES};

    #[test]
    fn keeps_definitions_and_refuses_a_clash() {
        let pcs = [0xffff_ffff_8123_4519u64, 0xffff_ffff_8100_0060];
        let i = id(false, 0, &pcs);
        let mut b = [0u8; DEF_MAX_BYTES];
        let n = write_def(i, 0, &pcs, &mut b);
        let mut t = Stacks::default();
        assert!(t.define(&Def::parse(DEF_KERNEL, &b[..n]).unwrap()));
        assert!(t.define(&Def::parse(DEF_KERNEL, &b[..n]).unwrap()));
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(i).unwrap().pcs, pcs.to_vec());
        // Other frames under that id: refused, counted.
        let n = write_def(i, 0, &pcs[..1], &mut b);
        assert!(!t.define(&Def::parse(DEF_KERNEL, &b[..n]).unwrap()));
        assert_eq!(t.bad, 1);
        assert_eq!(t.get(i).unwrap().pcs, pcs.to_vec());
    }
}
