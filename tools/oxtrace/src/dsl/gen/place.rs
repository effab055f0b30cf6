//! Places: a location with its keys evaluated ([`Place`]), and the loads and stores of
//! variables, elements, members and bit-fields through them.

use super::super::error::{CompileError, Span};
use super::super::syntax::ast::*;
use super::super::types::{Ty, I32, I64};
use super::super::KeyKind;
use super::loc::{KeyPart, Loc};
use super::{float_key, GResult, Gen, LDOUBLE_VAR};
use oxtrace_core::action::{self as act, Op, Scope};

impl Gen<'_> {
    /// Turn a scalar or string location into a place: evaluate its keys and indices.
    pub(super) fn place(&mut self, l: Loc<'_>, read: bool) -> GResult<(Place, Ty)> {
        match l {
            Loc::Mem { addr, ty } => Ok((Place::Mem(addr), ty)),
            Loc::MemBits {
                addr,
                ty,
                shift,
                width,
            } => Ok((
                Place::Bits {
                    inner: Box::new(Place::Mem(addr)),
                    shift,
                    width,
                    signed: ty.signed(),
                },
                ty,
            )),
            Loc::Val { reg, ty } => Ok((Place::Val(reg), ty)),
            Loc::Var {
                class,
                name,
                keys,
                ty,
                span,
            } => {
                let base = name.split(['.', '[']).next().unwrap_or(&name).to_string();
                if read
                    && !self.t.assigned.contains(&(class, base.clone()))
                    && !self.t.declared.contains_key(&(class, base.clone()))
                {
                    let what = match class {
                        DeclClass::Global => base.to_string(),
                        DeclClass::Thread => format!("self->{base}"),
                        DeclClass::Local => format!("this->{base}"),
                    };
                    if what == "args" {
                        return self.err(
                            span,
                            "[D_IDENT_BADREF] args is an array: use args[N] for one argument",
                        );
                    }
                    return self.err(
                        span,
                        format!("[D_IDENT_UNDEF] failed to resolve {what}: it is never assigned or declared"),
                    );
                }
                let ty = match ty {
                    Some(t) => t,
                    None => {
                        self.t.assumed = true;
                        I64
                    }
                };
                let assoc = keys.iter().any(|k| matches!(k, KeyPart::Key(..)));
                match self.t.shapes.get(&(class, name.clone())) {
                    Some(&(was, at)) if was != assoc => {
                        let first = CompileError::at(self.src, self.input, at, "");
                        let what = if was { "an array" } else { "a scalar" };
                        let now = if assoc { "an array" } else { "a scalar" };
                        return self.err(
                            span,
                            format!(
                                "[D_ARR_BADREF] {} is {what} at {}:{}, {now} here",
                                match class {
                                    DeclClass::Global => name.clone(),
                                    DeclClass::Thread => format!("self->{name}"),
                                    DeclClass::Local => format!("this->{name}"),
                                },
                                first.line,
                                first.col
                            ),
                        );
                    }
                    Some(_) => {}
                    None => {
                        self.t.shapes.insert((class, name.clone()), (assoc, span));
                    }
                }
                // A string global or thread-local lives in the dynamic memory like an array
                // element (the kernel keeps no string space for scalars): `s` is `s[0]`,
                // `self->s` is keyed by the thread.
                if let Some(&(width, signed)) = self.t.bitfields.get(&(class, name.clone())) {
                    let l = Loc::Var {
                        class,
                        name: name.clone(),
                        keys,
                        ty: Some(ty.clone()),
                        span,
                    };
                    self.t.bitfields.remove(&(class, name.clone()));
                    let r = self.place(l, read);
                    self.t.bitfields.insert((class, name), (width, signed));
                    let (inner, ty) = r?;
                    let p = Place::Bits {
                        inner: Box::new(inner),
                        shift: 0,
                        width,
                        signed,
                    };
                    return Ok((p, ty));
                }
                let string_scalar = keys.is_empty() && ty == Ty::Str && class != DeclClass::Local;
                if keys.is_empty() && !string_scalar {
                    let p = match class {
                        DeclClass::Global => {
                            if self
                                .t
                                .var_idx
                                .contains_key(&(Scope::Assoc as u32, name.clone()))
                            {
                                return self.err(
                                    span,
                                    format!("[D_ARR_BADREF] '{name}' is an array elsewhere, a scalar here"),
                                );
                            }
                            Place::Global(self.var(Scope::Global, &name))
                        }
                        DeclClass::Thread => Place::Thread(self.var(Scope::Thread, &name)),
                        DeclClass::Local => Place::Local(self.local(&name)),
                    };
                    return Ok((p, ty));
                }
                if class == DeclClass::Local {
                    return self.local_element(&name, &keys, ty, span);
                }
                let vname = match class {
                    DeclClass::Thread => format!("self->{name}"),
                    _ => name.clone(),
                };
                if class == DeclClass::Global
                    && !string_scalar
                    && self
                        .t
                        .var_idx
                        .contains_key(&(Scope::Global as u32, name.clone()))
                {
                    return self.err(
                        span,
                        format!("[D_ARR_BADREF] '{name}' is a scalar elsewhere, an array here"),
                    );
                }
                let id = self.var(Scope::Assoc, &vname);
                self.t.vars[id as usize].string = ty == Ty::Str;
                let mut regs = Vec::new();
                if class == DeclClass::Thread {
                    let r = self.reg(span)?;
                    self.emit(Op::Ldb, r, 0, 0, act::Builtin::Tid as u32);
                    regs.push((r, I32));
                } else if string_scalar {
                    let r = self.reg(span)?;
                    self.emit(Op::Ldi, r, 0, 0, 0);
                    regs.push((r, I32));
                }
                for k in &keys {
                    let (r, kt) = self.key_part(k)?;
                    regs.push((r, kt));
                }
                self.check_keys(id, &regs, &keys, span)?;
                Ok((Place::Assoc { id, keys: regs }, ty))
            }
        }
    }

    /// Evaluate one key or index (bounds-checked at run time).
    pub(super) fn key_part(&mut self, k: &KeyPart<'_>) -> GResult<(u8, Ty)> {
        match k {
            KeyPart::Key(e, want) => {
                let (r, t) = self.expr(e)?;
                if matches!(t, Ty::Void | Ty::Sou(..) | Ty::Array(..)) {
                    return self.err(
                        e.span,
                        format!("[D_KEY_TYPE] invalid key type {}", t.name()),
                    );
                }
                if let Some(w) = want {
                    if (*w == Ty::Str) != (t == Ty::Str) {
                        return self.err(
                            e.span,
                            format!(
                                "[D_ARR_BADREF] key is declared {}, used with {}",
                                w.name(),
                                t.name()
                            ),
                        );
                    }
                }
                Ok((r, t))
            }
            KeyPart::Index(e, n) => {
                let (r, t) = self.expr(e)?;
                self.need_int(&t, e.span, "an array subscript")?;
                if const_eval(e).is_none() {
                    self.emit(Op::Chkb, 0, r, 0, *n as u32);
                }
                Ok((r, I64))
            }
        }
    }

    /// An element of a clause-local array: one local per element, chosen by a chain of
    /// compares when the index is not a constant.
    pub(super) fn local_element(
        &mut self,
        name: &str,
        keys: &[KeyPart<'_>],
        ty: Ty,
        span: Span,
    ) -> GResult<(Place, Ty)> {
        let mut consts = Vec::new();
        let mut dims = Vec::new();
        for k in keys {
            match k {
                KeyPart::Index(e, n) => {
                    consts.push(const_eval(e));
                    dims.push((*e, *n));
                }
                KeyPart::Key(..) => {
                    return self.err(
                        span,
                        "[D_ARR_LOCAL] clause-local variables cannot be associative arrays",
                    )
                }
            }
        }
        if consts.iter().all(|c| c.is_some()) {
            let idx: String = consts
                .iter()
                .map(|c| format!("[{}]", c.unwrap_or(0)))
                .collect();
            return Ok((Place::Local(self.local(&format!("{name}{idx}"))), ty));
        }
        if dims.len() != 1 {
            return self.err(
                span,
                "clause-local arrays of several dimensions take constant subscripts",
            );
        }
        let (e, n) = dims[0];
        if n > 64 {
            return self.err(
                e.span,
                "clause-local arrays of more than 64 elements take constant subscripts",
            );
        }
        let (r, t) = self.expr(e)?;
        self.need_int(&t, e.span, "an array subscript")?;
        self.emit(Op::Chkb, 0, r, 0, n as u32);
        let slots = (0..n)
            .map(|i| self.local(&format!("{name}[{i}]")))
            .collect();
        Ok((Place::LocalArr { slots, idx: r }, ty))
    }

    /// Check the key registers against array `id`'s layout (fixed by its first use).
    pub(super) fn check_keys(
        &mut self,
        id: u32,
        regs: &[(u8, Ty)],
        keys: &[KeyPart<'_>],
        span: Span,
    ) -> GResult<()> {
        if regs.len() > act::MAX_KEYS {
            return self.err(span, format!("too many keys (at most {})", act::MAX_KEYS));
        }
        if let Some((_, t)) = regs.iter().find(|(_, t)| t.is_float()) {
            return self.err(span, float_key(t));
        }
        let kinds: Vec<KeyKind> = regs.iter().map(|(_, t)| t.key_kind()).collect();
        let name = self.t.vars[id as usize].name.clone();
        let skip = regs.len() - keys.len();
        match &self.t.vars[id as usize].keys {
            None => self.t.vars[id as usize].keys = Some(kinds),
            Some(want) => {
                if want.len() != kinds.len() {
                    return self.err(
                        span,
                        format!(
                            "[D_PROTO_LEN] {name}[] has {} key(s) elsewhere, {} here",
                            want.len() - skip,
                            kinds.len() - skip
                        ),
                    );
                }
                for (i, (w, k)) in want.iter().zip(&kinds).enumerate() {
                    if w != k {
                        let at = match keys.get(i.wrapping_sub(skip)) {
                            Some(KeyPart::Key(e, _)) | Some(KeyPart::Index(e, _)) => e.span,
                            None => span,
                        };
                        return self.err(
                            at,
                            format!(
                                "[D_PROTO_ARG] key {} of {name}[] is {} elsewhere, {} here",
                                i + 1 - skip,
                                w.name(),
                                k.name()
                            ),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Read a place into a new register (the place's key registers stay allocated).
    pub(super) fn load_place(&mut self, p: &Place, ty: &Ty, span: Span) -> GResult<u8> {
        if *ty == Ty::Float(16) && !matches!(p, Place::Mem(_) | Place::Val(_)) {
            return self.err(span, LDOUBLE_VAR);
        }
        if matches!(ty, Ty::Sou(..)) {
            return self.err(
                span,
                format!(
                    "[D_OP_SOU] a {} can only be assigned or accessed by member",
                    ty.name()
                ),
            );
        }
        if let Place::Bits {
            inner,
            shift,
            width,
            signed,
        } = p
        {
            let rd = self.load_place(inner, ty, span)?;
            if let Place::Mem(_) = **inner {
                self.extract_bits(rd, *shift, *width, *signed, span)?;
            }
            return Ok(rd);
        }
        let rd = self.reg(span)?;
        match p {
            Place::Bits { .. } => {}
            Place::Global(id) => {
                self.emit(Op::Ldgs, rd, 0, 0, *id);
            }
            Place::Thread(id) => {
                self.emit(Op::Ldts, rd, 0, 0, *id);
            }
            Place::Local(slot) => {
                self.emit(Op::Ldls, rd, 0, 0, *slot);
            }
            Place::Assoc { id, keys } => {
                self.push_keys(keys);
                self.emit(Op::Ldgaa, rd, 0, 0, *id);
            }
            Place::LocalArr { slots, idx } => {
                let rt = self.reg(span)?;
                let mut ends = Vec::new();
                for (i, slot) in slots.iter().enumerate() {
                    self.load_const(rt, i as u64);
                    self.emit(Op::Eq, rt, rt, *idx, 0);
                    let skip = self.emit(Op::Bz, 0, rt, 0, 0);
                    self.emit(Op::Ldls, rd, 0, 0, *slot);
                    ends.push(self.emit(Op::Ba, 0, 0, 0, 0));
                    self.patch(skip);
                }
                // Not reached: the index was bounds-checked.
                self.emit(Op::Ldi, rd, 0, 0, 0);
                for j in ends {
                    self.patch(j);
                }
                self.release(rt);
            }
            Place::Mem(addr) => {
                let o = match ty {
                    Ty::Int {
                        size: 1,
                        signed: true,
                    } => Op::Ldsb,
                    Ty::Int { size: 1, .. } => Op::Ldub,
                    Ty::Int {
                        size: 2,
                        signed: true,
                    } => Op::Ldsh,
                    Ty::Int { size: 2, .. } => Op::Lduh,
                    Ty::Int {
                        size: 4,
                        signed: true,
                    } => Op::Ldsw,
                    Ty::Int { size: 4, .. } | Ty::Float(4) => Op::Lduw,
                    Ty::Int { .. } | Ty::Ptr(_) | Ty::Float(8) => Op::Ldx,
                    Ty::Float(_) => {
                        // A long double is its address: printf() and trace() read its
                        // 16 bytes (`push_float`), a store copies them.
                        self.emit(Op::Mov, rd, *addr, 0, 0);
                        return Ok(rd);
                    }
                    Ty::Array(e, n) if matches!(**e, Ty::Int { size: 1, .. }) => {
                        // A char array in memory is a string, as in D, of at most its length.
                        self.emit(Op::Kstr, rd, *addr, 0, (*n as u32) << 1);
                        return Ok(rd);
                    }
                    Ty::Str => {
                        // A `string` member: its bytes in place, at most `strsize`.
                        self.emit(Op::Kstr, rd, *addr, 0, 0);
                        return Ok(rd);
                    }
                    Ty::Array(..) => {
                        // An array in memory reads as the address of its first element.
                        self.emit(Op::Mov, rd, *addr, 0, 0);
                        return Ok(rd);
                    }
                    _ => {
                        return self.err(
                            span,
                            format!("cannot read a {} from kernel memory", ty.name()),
                        )
                    }
                };
                self.emit(o, rd, *addr, 0, 0);
            }
            Place::Val(r) => {
                self.emit(Op::Mov, rd, *r, 0, 0);
            }
        }
        if ty == &Ty::Str && matches!(p, Place::Local(_) | Place::LocalArr { .. }) {
            // A clause-local string not assigned in this clause is "", not a bad reference.
            let j = self.emit(Op::Bnz, 0, rd, 0, 0);
            self.emit(Op::Sets, rd, 0, 0, 0);
            self.patch(j);
        }
        Ok(rd)
    }

    /// Store register `rv` (already of the place's type) into a place.
    pub(super) fn store_place(&mut self, p: &Place, rv: u8, span: Span) -> GResult<()> {
        match p {
            Place::Bits {
                inner,
                width,
                signed,
                ..
            } => {
                if !matches!(**inner, Place::Mem(_)) {
                    self.extract_bits(rv, 0, *width, *signed, span)?;
                }
                return self.store_place(inner, rv, span);
            }
            Place::Global(id) => {
                self.emit(Op::Stgs, 0, rv, 0, *id);
            }
            Place::Thread(id) => {
                self.emit(Op::Stts, 0, rv, 0, *id);
            }
            Place::Local(slot) => {
                self.emit(Op::Stls, 0, rv, 0, *slot);
            }
            Place::Assoc { id, keys } => {
                self.push_keys(keys);
                self.emit(Op::Stgaa, 0, rv, 0, *id);
            }
            Place::LocalArr { slots, idx } => {
                let rt = self.reg(span)?;
                let mut ends = Vec::new();
                for (i, slot) in slots.iter().enumerate() {
                    self.load_const(rt, i as u64);
                    self.emit(Op::Eq, rt, rt, *idx, 0);
                    let skip = self.emit(Op::Bz, 0, rt, 0, 0);
                    self.emit(Op::Stls, 0, rv, 0, *slot);
                    ends.push(self.emit(Op::Ba, 0, 0, 0, 0));
                    self.patch(skip);
                }
                self.emit(Op::Nop, 0, 0, 0, 0);
                for j in ends {
                    self.patch(j);
                }
                self.release(rt);
            }
            Place::Mem(_) | Place::Val(_) => {
                return self.err(
                    span,
                    "[D_OP_WRITE] operator requires a writable variable: kernel memory cannot be modified",
                )
            }
        }
        Ok(())
    }

    pub(super) fn release_place(&mut self, p: &Place) {
        match p {
            Place::Assoc { keys, .. } => {
                let k = keys.clone();
                self.release_all(&k);
            }
            Place::LocalArr { idx, .. } => self.release(*idx),
            Place::Mem(r) | Place::Val(r) => self.release(*r),
            Place::Bits { inner, .. } => self.release_place(inner),
            _ => {}
        }
    }

    /// Narrow `r` to the `width` bits at `shift` (sign-extended when `signed`).
    pub(super) fn extract_bits(
        &mut self,
        r: u8,
        shift: u8,
        width: u8,
        signed: bool,
        span: Span,
    ) -> GResult<()> {
        if width >= 64 {
            return Ok(());
        }
        let t = self.reg(span)?;
        self.load_const(t, 64 - shift as u64 - width as u64);
        self.emit(Op::Sll, r, r, t, 0);
        self.load_const(t, 64 - width as u64);
        self.emit(if signed { Op::Sra } else { Op::Srl }, r, r, t, 0);
        self.release(t);
        Ok(())
    }

    /// Read a location into a register.
    pub(super) fn load_loc(&mut self, l: Loc<'_>, span: Span) -> GResult<(u8, Ty)> {
        let (p, ty) = self.place(l, true)?;
        let r = self.load_place(&p, &ty, span)?;
        self.release_place(&p);
        let ty = match ty {
            Ty::Array(elem, _) if matches!(*elem, Ty::Int { size: 1, .. }) => Ty::Str,
            Ty::Array(elem, _) => Ty::Ptr(elem),
            t => t,
        };
        Ok((r, ty))
    }

    /// Read a variable, member, element or memory location.
    pub(super) fn rvalue(&mut self, e: &Expr) -> GResult<(u8, Ty)> {
        let l = self.loc(e)?;
        if let Loc::Var {
            ty: Some(Ty::Array(..)),
            ..
        } = &l
        {
            return self.err(
                e.span,
                "[D_OP_ARRFUN] an array variable can only be used with a subscript",
            );
        }
        self.load_loc(l, e.span)
    }
}

/// A location with its keys evaluated: what a load or store names.
pub(super) enum Place {
    Global(u32),
    Thread(u32),
    Local(u32),
    Assoc {
        id: u32,
        keys: Vec<(u8, Ty)>,
    },
    LocalArr {
        slots: Vec<u32>,
        idx: u8,
    },
    Mem(u8),
    Val(u8),
    /// A bit-field: in memory, `width` bits at `shift` of the unit; in a variable, a value
    /// kept narrowed to `width` bits.
    Bits {
        inner: Box<Place>,
        shift: u8,
        width: u8,
        signed: bool,
    },
}
