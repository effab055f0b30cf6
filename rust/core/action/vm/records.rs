// SPDX-License-Identifier: GPL-2.0

//! Records: the tuple assembled into a record and emitted to the principal buffer.

use super::*;

impl<'s> Vm<'s> {
    /// The tuple as a record of `kind` (format `id`): assembled, the tuple consumed, then
    /// emitted (a refused record counts as a loss).
    #[inline(always)]
    pub(super) fn record<E: Env + ?Sized>(
        &mut self,
        strtab: &[u8],
        env: &mut E,
        kind: RecordKind,
        id: u32,
    ) -> Result<(), FaultKind> {
        let len = self.assemble(strtab, env)?;
        self.st.tlen = 0;
        self.emit(env, kind, id, len);
        Ok(())
    }

    /// Encode the tuple into the record buffer; returns its length. Memory items are read
    /// here, without faulting: from the scratch area when they lie in it, else through the
    /// environment's kernel read.
    fn assemble<E: Env + ?Sized>(
        &mut self,
        strtab: &[u8],
        env: &mut E,
    ) -> Result<usize, FaultKind> {
        let ss = self.st.strsize as usize;
        let rb_start = self.st.nlocals as usize * 8;
        let rb_len = record_buf_size(self.st.strsize);
        // PANIC: `Vm::new` checked that the scratch holds the locals and the record buffer
        // (`scratch_size(nlocals, strsize, 0)`); `tlen <= MAX_TUPLE`, the tuple's length; each
        // `d` has the length its indices assume (9, or 3 + the string's).
        let slots_base = rb_start + rb_len;
        let mut n = 0usize;
        for i in 0..self.st.tlen {
            // PANIC: `tlen <= MAX_TUPLE`, the tuple's length.
            let t = self.st.tuple[i];
            if let TupleVal::Mem(addr, len) = t {
                n = self.assemble_mem(env, rb_start, rb_len, n, addr, len as usize)?;
                continue;
            }
            let (head, slots) = self.scratch.split_at_mut(rb_start + rb_len);
            let rb = &mut head[rb_start..];
            match t {
                TupleVal::Int(v, ty) => {
                    let d = rb.get_mut(n..n + 9).ok_or(FaultKind::Invalid)?;
                    d[0] = ty.0;
                    d[1..].copy_from_slice(&v.to_le_bytes());
                    n += 9;
                }
                TupleVal::Str(r) => {
                    let s = resolve_str_in(strtab, slots, slots_base, ss, r)
                        .ok_or(FaultKind::BadString)?;
                    let d = rb.get_mut(n..n + 3 + s.len()).ok_or(FaultKind::Invalid)?;
                    d[0] = ITEM_STR;
                    d[1..3].copy_from_slice(&(s.len() as u16).to_le_bytes());
                    d[3..].copy_from_slice(s);
                    n += 3 + s.len();
                }
                TupleVal::Mem(..) => {}
            }
        }
        Ok(n)
    }

    /// A memory item of `len` bytes at `addr` into the record buffer (`rb_len` bytes at
    /// scratch offset `rb_start`) at offset `n`; returns the offset after it. Memory that
    /// does not fit the buffer, or cannot be read, faults.
    #[inline(never)]
    fn assemble_mem<E: Env + ?Sized>(
        &mut self,
        env: &mut E,
        rb_start: usize,
        rb_len: usize,
        n: usize,
        addr: u64,
        len: usize,
    ) -> Result<usize, FaultKind> {
        let end = n + 3 + len;
        if end > rb_len || len > u16::MAX as usize {
            return Err(FaultKind::ScratchExhausted);
        }
        let at = rb_start + n;
        // Scratch memory only from inside one object the clause allocated, as every
        // other access to the scratch area.
        let src = if self.scratch_addr(addr) {
            let off = self.object(addr, len as u64);
            Some(off.ok_or(FaultKind::BadAddr(addr))?)
        } else {
            None
        };
        // PANIC: `n + 3 + len <= rb_len`, and the record buffer is in the scratch area
        // (`Vm::new` checked it); `src + len` is within it (`object`).
        self.scratch[at] = ITEM_MEM;
        self.scratch[at + 1..at + 3].copy_from_slice(&(len as u16).to_le_bytes());
        match src {
            Some(off) => self.scratch.copy_within(off..off + len, at + 3),
            None => {
                if !env.read_kernel(addr, &mut self.scratch[at + 3..at + 3 + len]) {
                    return Err(FaultKind::BadAddr(addr));
                }
            }
        }
        Ok(end)
    }

    #[inline(never)]
    fn emit<E: Env + ?Sized>(&mut self, env: &mut E, kind: RecordKind, id: u32, len: usize) {
        let rb_start = self.st.nlocals as usize * 8;
        let data = self.scratch.get(rb_start..rb_start + len).unwrap_or(&[]);
        let rec = Record { kind, id, data };
        match self.st.spec {
            // The environment counts speculative drops itself.
            Some(s) => {
                env.emit_spec(s, &rec);
            }
            None => {
                if !env.emit(&rec) {
                    self.st.losses.records += 1;
                }
            }
        }
    }

    #[inline(never)]
    pub(super) fn emit_int<E: Env + ?Sized>(
        &mut self,
        env: &mut E,
        kind: RecordKind,
        id: u32,
        v: u64,
    ) {
        let mut d = [0u8; 9];
        d[0] = IntType::I64.0;
        d[1..].copy_from_slice(&v.to_le_bytes());
        if !env.emit(&Record { kind, id, data: &d }) {
            self.st.losses.records += 1;
        }
    }

    #[inline(never)]
    pub(super) fn emit_int_none<E: Env + ?Sized>(
        &mut self,
        env: &mut E,
        kind: RecordKind,
        id: u32,
    ) {
        if !env.emit(&Record {
            kind,
            id,
            data: &[],
        }) {
            self.st.losses.records += 1;
        }
    }
}
