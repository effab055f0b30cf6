// SPDX-License-Identifier: GPL-2.0

//! Variables and aggregations: associative arrays, `self->` variables and aggregation
//! updates, keyed by the tuple.

use super::*;

impl<'s> Vm<'s> {
    /// `Agg`: applies aggregation `imm` at the tuple's keys to value `a` and weight `b`.
    #[inline(never)]
    pub(super) fn agg<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        imm: u32,
        a: u64,
        b: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<(), FaultKind> {
        let layout = dict.agg(imm).ok_or(FaultKind::Invalid)?;
        let ok = if !layout.has_str() {
            self.int_key(layout)?;
            env.agg_update_ints(imm, &self.st.ikey, &[a, b])
        } else {
            let keys = self.agg_keys(layout, dict)?;
            env.agg_update(imm, keys, &[a, b])
        };
        self.agg_done(ok);
        Ok(())
    }

    /// How every aggregation update ends: a refused one counts as a loss, and the tuple
    /// (its key) is consumed.
    #[inline(always)]
    pub(super) fn agg_done(&mut self, ok: bool) {
        if !ok {
            self.st.losses.aggs += 1;
        }
        self.st.tlen = 0;
    }

    /// Encodes the tuple into `ikey` for a key of integers only (`layout`); a tuple that
    /// does not fit the key faults as in [`build_keys`].
    #[inline(always)]
    fn int_key(&mut self, layout: KeyLayout) -> Result<(), FaultKind> {
        let st = &mut *self.st;
        if st.tlen != layout.count() {
            return Err(FaultKind::KeyMismatch);
        }
        st.ikey.clear();
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`push` checks).
        for t in &st.tuple[..st.tlen] {
            match *t {
                TupleVal::Int(v, _) => st.ikey.push(v).ok_or(FaultKind::KeyMismatch)?,
                TupleVal::Str(_) | TupleVal::Mem(..) => return Err(FaultKind::KeyMismatch),
            }
        }
        Ok(())
    }

    /// The keys of an update of an aggregation with string components (`layout`), from the
    /// tuple. Out of line: the key buffer's building is not in [`Vm::agg`]'s frame, which
    /// is under the update's.
    #[inline(never)]
    fn agg_keys<'k, D: Dict + ?Sized>(
        &'k mut self,
        layout: KeyLayout,
        dict: &'k D,
    ) -> Result<&'k [Key<'k>], FaultKind> {
        let ss = self.st.strsize as usize;
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`Pushtv` checks).
        build_keys(
            &self.st.tuple[..self.st.tlen],
            layout,
            dict.strtab(),
            self.scratch,
            ss,
            &mut self.st.keys,
        )
    }

    /// `ldgaa`/`stgaa` of associative array `var`, keyed by the tuple: a load returns the
    /// value (an integer: strings are [`Vm::assoc_load_str`]'s), a store stores `a`.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn assoc<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        op: Op,
        var: u32,
        layout: KeyLayout,
        string: bool,
        a: u64,
        dict: &D,
        env: &mut E,
    ) -> Result<Option<u64>, FaultKind> {
        let ss = self.st.strsize as usize;
        let strtab = dict.strtab();
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`Pushtv` checks).
        let keys = build_keys(
            &self.st.tuple[..self.st.tlen],
            layout,
            strtab,
            self.scratch,
            ss,
            &mut self.st.keys,
        )?;
        let stored = if op == Op::Ldgaa {
            return Ok(Some(env.dynvar_load(var, keys)));
        } else if string {
            let s = resolve_str(strtab, self.scratch, ss, a).ok_or(FaultKind::BadString)?;
            env.dynvar_store_str(var, keys, s)
        } else {
            env.dynvar_store(var, keys, a)
        };
        if !stored {
            self.st.losses.dynvars += 1;
        }
        Ok(None)
    }

    /// `Ldgaa` of a string-valued array: the element copied into a new scratch slot; returns
    /// the slot's reference. Apart from [`Vm::assoc`], whose frame is under every store.
    #[inline(never)]
    pub(super) fn assoc_load_str<D: Dict + ?Sized, E: Env + ?Sized>(
        &mut self,
        var: u32,
        layout: KeyLayout,
        dict: &D,
        env: &mut E,
    ) -> Result<u64, FaultKind> {
        let ss = self.st.strsize as usize;
        let off = self.alloc_slot().ok_or(FaultKind::ScratchExhausted)?;
        // PANIC: `alloc_slot` checked that `off + ss + 1` fits the scratch; the keys only
        // borrow the part before `off`.
        let (before, slot_area) = self.scratch.split_at_mut(off);
        let slot = &mut slot_area[..ss + 1];
        // PANIC: `tlen <= MAX_TUPLE`, the tuple's length (`Pushtv` checks).
        let keys = build_keys(
            &self.st.tuple[..self.st.tlen],
            layout,
            dict.strtab(),
            before,
            ss,
            &mut self.st.keys,
        )?;
        // PANIC: the length is clamped to `ss`.
        let len = env.dynvar_load_str(var, keys, &mut slot[..ss]).min(ss);
        let len = slot[..len].iter().position(|&c| c == 0).unwrap_or(len);
        slot[len] = 0;
        Ok(str_ref(STR_SPACE_SCRATCH, off as u32))
    }

    /// `self->x`: loads thread-local `var` (`store` `None`), or stores `store` into it and
    /// returns 0. Out of line: its key stays out of `exec`'s frame.
    #[inline(never)]
    pub(super) fn thread_var<E: Env + ?Sized>(
        &mut self,
        var: u32,
        store: Option<u64>,
        env: &mut E,
    ) -> u64 {
        self.thread_var_in(var, store, env)
    }

    /// [`Vm::thread_var`], inlined into [`Vm::run_shape`]: a shape's frame is small, and a
    /// call and return with six saved registers cost the latency script about 60
    /// instructions a read (four of them).
    #[inline(always)]
    pub(super) fn thread_var_in<E: Env + ?Sized>(
        &mut self,
        var: u32,
        store: Option<u64>,
        env: &mut E,
    ) -> u64 {
        let tid = env.builtin(Builtin::Tid);
        let keys = [Key::Int(tid)];
        match store {
            None => match self.st.tls {
                Some((v, t, x)) if v == var && t == tid => x,
                _ => {
                    let x = env.dynvar_load(var, &keys);
                    self.st.tls = Some((var, tid, x));
                    x
                }
            },
            Some(v) => {
                self.st.tls = None;
                if !env.dynvar_store(var, &keys, v) {
                    self.st.losses.dynvars += 1;
                }
                0
            }
        }
    }
}

/// Turn the tuple into keys in `keys`, checking it against `layout`; returns them.
#[inline(never)]
fn build_keys<'b, 'k>(
    tuple: &[TupleVal],
    layout: KeyLayout,
    strtab: &'b [u8],
    scratch: &'b [u8],
    strsize: usize,
    keys: &'k mut KeyBuf<MAX_KEYS>,
) -> Result<&'k [Key<'b>], FaultKind> {
    if tuple.len() != layout.count() {
        return Err(FaultKind::KeyMismatch);
    }
    let key = |i: usize| match (tuple.get(i), layout.is_str(i)) {
        (Some(&TupleVal::Int(v, _)), false) => Ok(Key::Int(v)),
        (Some(&TupleVal::Str(r)), true) => resolve_str(strtab, scratch, strsize, r)
            .map(Key::Str)
            .ok_or(FaultKind::BadString),
        _ => Err(FaultKind::KeyMismatch),
    };
    // More than `MAX_KEYS` keys is a mismatch too.
    keys.fill(tuple.len(), key)
        .unwrap_or(Err(FaultKind::KeyMismatch))
}
