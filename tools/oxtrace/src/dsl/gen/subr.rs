//! Code generation of D's subroutines beyond `stringof`/`strlen`/`strjoin`: the string
//! library (`substr`, `index`, `strtok`, `basename`, ...), `inet_*`, byte order, `rand`,
//! `progenyof`, `getmajor`/`getminor`. A child of `gen`, so it uses the generator's
//! register and emission helpers; `Gen::call` hands it every name [`is_subr`] knows.

use super::super::error::Span;
use super::super::syntax::ast::{const_eval, Expr, ExprKind};
use super::super::types::{Ty, I32, I64, U32, U64};
use super::{GResult, Gen};
use oxtrace_core::action::{subr, Builtin, Op};

/// Subroutines compiled here.
const SUBRS: &[&str] = &[
    "substr",
    "strstr",
    "strchr",
    "strrchr",
    "index",
    "rindex",
    "strtok",
    "lltostr",
    "strtoll",
    "toupper",
    "tolower",
    "basename",
    "dirname",
    "cleanpath",
    "inet_ntoa",
    "inet_ntoa6",
    "inet_ntop",
    "link_ntop",
    "htons",
    "htonl",
    "htonll",
    "ntohs",
    "ntohl",
    "ntohll",
    "rand",
    "progenyof",
    "getmajor",
    "getminor",
    "mutex_owned",
    "mutex_owner",
    "mutex_type_adaptive",
    "mutex_type_spin",
    "rw_read_held",
    "rw_write_held",
    "rw_iswriter",
];

/// The bits of `struct mutex`'s `owner` (`atomic_long_t`, its first member) that are flags,
/// not the owning task's address (`MUTEX_FLAGS`, kernel/locking/mutex.h).
const MUTEX_FLAGS: u64 = 0x07;
/// `struct qrwlock`'s `cnts` (the first word of a `rwlock_t`): the writer byte and the
/// waiting-writer bit below `_QR_SHIFT`, the readers above (include/asm-generic/qrwlock.h).
const QW_LOCKED: u64 = 0x0ff;
const QW_WMASK: u64 = 0x1ff;

/// `SIGSTOP` on Linux (every architecture but alpha, mips, parisc and sparc): `stop()`.
const STOP_SIGNAL: u64 = 19;

/// Whether `name` is a subroutine of this file.
pub(super) fn is_subr(name: &str) -> bool {
    SUBRS.contains(&name)
}

/// What an argument must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    Str,
    Int,
    /// A pointer (or the constant 0, NULL), of DTrace's prototype type.
    Ptr(&'static str),
    /// An integer or a pointer, of DTrace's prototype type (`uintptr_t`, `size_t`).
    Scalar(&'static str),
    /// `copyout()`'s `void *` source: a pointer, NULL or a string.
    Buf,
}

/// Whether a pointer to `t` passes for a parameter of pointer type `proto`: as DTrace takes
/// it, a pointer to the prototype's pointee or a `void *`. (Only `inet_ntoa6()`'s is checked:
/// the others take any pointer.)
fn pointee_ok(proto: &str, t: &Ty) -> bool {
    match proto {
        "in6_addr_t *" => match t {
            Ty::Void => true,
            Ty::Sou(_, n) => n == "struct in6_addr",
            _ => false,
        },
        _ => true,
    }
}

/// `Gen::clsflags`: the clause has a `speculate()`.
const CLS_SPEC: u8 = 1;
/// The clause has a `commit()`.
const CLS_COMMIT: u8 = 2;
/// The clause has a data-recording action (any action but the speculation ones).
const CLS_DATAREC: u8 = 4;
/// The clause has an aggregation.
const CLS_AGG: u8 = 8;

/// The destructive actions, which may not follow `speculate()`.
const DESTRUCTIVE: &[&str] = &[
    "system",
    "raise",
    "stop",
    "chill",
    "panic",
    "breakpoint",
    "copyout",
    "copyoutstr",
    "freopen",
];

impl Gen<'_> {
    /// Applies DTrace's rules for the order of a clause's actions to action `what` (an
    /// action's name, or "an aggregation"), then notes what it does: `speculate()` comes
    /// once, before any data-recording or aggregating action and not after `commit()`;
    /// `commit()` comes before them too; after `speculate()` no aggregation, destructive
    /// action or `exit()` (nor, here, anything but `trace`/`printf`, which the kernel
    /// speculates), after `commit()` no other action but `commit`/`discard`.
    pub(super) fn clause_order(&mut self, what: &str, span: Span) -> GResult<()> {
        let f = self.clsflags;
        let tagged = |tag: &str, msg: &str| format!("[{tag}] {msg}");
        let fail = match what {
            "discard" => None,
            "commit" if f & (CLS_DATAREC | CLS_AGG) != 0 => Some(tagged(
                "D_COMM_DREC",
                "commit( ) may not follow data-recording action(s)",
            )),
            "speculate" if f & CLS_SPEC != 0 => Some(tagged(
                "D_SPEC_SPEC",
                "speculate( ) may not follow speculate( )",
            )),
            "speculate" if f & CLS_COMMIT != 0 => Some(tagged(
                "D_SPEC_COMM",
                "speculate( ) may not follow commit( )",
            )),
            "speculate" if f & (CLS_DATAREC | CLS_AGG) != 0 => Some(tagged(
                "D_SPEC_DREC",
                "speculate( ) may not follow data-recording action(s)",
            )),
            "commit" | "speculate" => None,
            "an aggregation" if f & CLS_COMMIT != 0 => Some(tagged(
                "D_AGG_COMM",
                "aggregating actions may not follow commit( )",
            )),
            "an aggregation" if f & CLS_SPEC != 0 => Some(tagged(
                "D_AGG_SPEC",
                "aggregating actions may not follow speculate( )",
            )),
            "an aggregation" => None,
            _ if f & CLS_SPEC != 0 && DESTRUCTIVE.contains(&what) => Some(tagged(
                "D_ACT_SPEC",
                "destructive actions may not follow speculate( )",
            )),
            "exit" if f & CLS_SPEC != 0 => {
                Some(tagged("D_EXIT_SPEC", "exit( ) may not follow speculate( )"))
            }
            _ if f & CLS_COMMIT != 0 => Some(tagged(
                "D_DREC_COMM",
                "data-recording actions may not follow commit( )",
            )),
            _ => None,
        };
        if let Some(m) = fail {
            return self.err(span, m);
        }
        self.not_speculated(what, span)?;
        self.clsflags |= match what {
            "commit" => CLS_COMMIT,
            // These act and record nothing, so speculate() may still follow them.
            "discard" | "chill" | "raise" | "stop" | "copyout" | "copyoutstr" => 0,
            "speculate" => CLS_SPEC,
            "an aggregation" => CLS_AGG,
            _ => CLS_DATAREC,
        };
        Ok(())
    }

    /// Refuses what a speculated clause may not do after `speculate()` (anything but
    /// `trace`/`printf` and the clause's variables): the kernel speculates only those.
    fn not_speculated(&self, what: &str, span: Span) -> GResult<()> {
        let ok = matches!(what, "trace" | "printf" | "speculate");
        if !ok && self.clsflags & CLS_SPEC != 0 {
            let what = if what.starts_with("an ") {
                what.to_string()
            } else {
                format!("{what}()")
            };
            return self.err(
                span,
                format!("{what} may not follow speculate(): a speculation records data only"),
            );
        }
        Ok(())
    }

    /// The destructive actions: `system(fmt, ...)`, `freopen(fmt, ...)`, `raise(sig)`,
    /// `stop()`, `chill(ns)`, `copyout(buf, addr, nbytes)`, `copyoutstr(str, addr,
    /// maxlen)`; refused, as DTrace refuses them, unless destructive actions
    /// are allowed. The arguments are checked first, as DTrace checks a call's prototype
    /// before its permission.
    pub(super) fn destructive_action(
        &mut self,
        name: &str,
        args: &[Expr],
        span: Span,
    ) -> GResult<()> {
        match name {
            "system" => self.printf_op(args, span, Op::System)?,
            "freopen" => self.printf_as(args, span, Op::Printf, name)?,
            "stop" => {
                self.subr_args(name, args, span, &[], 0)?;
                let r = self.subr_const(STOP_SIGNAL, span)?;
                self.emit(Op::Raise, 0, r, 0, 0);
                self.release(r);
            }
            "copyout" | "copyoutstr" => {
                let (first, op) = if name == "copyout" {
                    (Want::Buf, Op::Copyout)
                } else {
                    (Want::Str, Op::Copyoutstr)
                };
                let want = [first, Want::Scalar("uintptr_t"), Want::Scalar("size_t")];
                let r = self.subr_args(name, args, span, &want, 3)?;
                self.emit(op, 0, r[0], r[1], r[2] as u32);
                self.release_regs(&r);
            }
            _ => {
                let r = self.subr_args(name, args, span, &[Want::Int], 1)?;
                let op = if name == "raise" {
                    Op::Raise
                } else {
                    Op::Chill
                };
                self.emit(op, 0, r[0], 0, 0);
                self.release_regs(&r);
            }
        }
        if !self.t.destructive {
            return self.err(
                span,
                format!(
                    "{name}(): destructive actions not allowed \
                     (allow them with -w or #pragma D option destructive)"
                ),
            );
        }
        Ok(())
    }

    /// `speculate(id)`, `commit(id)`, `discard(id)`.
    pub(super) fn spec_action(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<()> {
        let r = self.subr_args(name, args, span, &[Want::Int], 1)?;
        let op = match name {
            "speculate" => Op::Speculate,
            "commit" => Op::Commit,
            _ => Op::Discard,
        };
        self.emit(op, 0, r[0], 0, 0);
        self.release_regs(&r);
        Ok(())
    }

    /// DTrace's lock subroutines on Linux's locks: `mutex_*(struct mutex *)` and
    /// `rw_*(rwlock_t *)`, reading the lock word without faulting (a bad address is the
    /// run-time "invalid address"). A Linux mutex is adaptive (its waiters spin while the
    /// owner runs), never a spin lock.
    fn lock_subr(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        let proto = if name.starts_with("mutex_") {
            "struct mutex *"
        } else {
            "rwlock_t *"
        };
        let r = self.subr_args(name, args, span, &[Want::Ptr(proto)], 1)?[0];
        let mask = match name {
            "mutex_type_adaptive" | "mutex_type_spin" => {
                self.load_const(r, u64::from(name == "mutex_type_adaptive"));
                return Ok((r, I32));
            }
            "mutex_owned" | "mutex_owner" => {
                self.emit(Op::Ldx, r, r, 0, 0);
                !MUTEX_FLAGS
            }
            _ => {
                self.emit(Op::Lduw, r, r, 0, 0);
                match name {
                    "rw_read_held" => !QW_WMASK & u64::from(u32::MAX),
                    "rw_write_held" => QW_LOCKED,
                    _ => QW_WMASK,
                }
            }
        };
        let t = self.reg(span)?;
        self.load_const(t, mask);
        self.emit(Op::And, r, r, t, 0);
        let ty = match name {
            "mutex_owned" => {
                self.emit(Op::Ldb, t, 0, 0, Builtin::Curthread as u32);
                self.emit(Op::Eq, r, r, t, 0);
                I32
            }
            // The owner, typed as `curthread` is.
            "mutex_owner" => self.type_of(&Expr {
                kind: ExprKind::Ident("curthread".into()),
                span,
            })?,
            _ => I32,
        };
        self.release(t);
        Ok((r, ty))
    }

    /// `r`, the value of `e` of type `ty`: a `char *` (or NULL) read as the string it points
    /// to (from kernel or scratch memory, bounded by `strsize`, as `stringof` reads it;
    /// NULL faults with "invalid address"); anything else as is.
    pub(super) fn char_ptr_string(&mut self, r: u8, ty: &Ty, e: &Expr) -> GResult<u8> {
        if !is_str_ptr(ty) && !super::expr::is_null(e) {
            return Ok(r);
        }
        let span = e.span;
        let rd = self.reg(span)?;
        self.emit(Op::Kstr, rd, r, 0, 0);
        self.release(r);
        Ok(rd)
    }

    /// Checks the count (`min..=max`) and compiles the arguments, each of the kind `want`
    /// says; returns their registers.
    fn subr_args(
        &mut self,
        name: &str,
        args: &[Expr],
        span: Span,
        want: &[Want],
        min: usize,
    ) -> GResult<Vec<u8>> {
        if let Some(m) = super::arity_error(name, args.len(), min, want.len()) {
            return self.err(span, m);
        }
        let mut regs = Vec::new();
        for (a, w) in args.iter().zip(want) {
            let (mut r, ty) = self.expr(a)?;
            // A string parameter is DTrace's `char *`: it takes a `char *` pointer, read
            // as the string it points to, and NULL (the constant 0), which faults with
            // "invalid address" when the subroutine reads it.
            // (NULL stays 0: `strtok(NULL, ...)` goes on with the last string.)
            if *w == Want::Str && is_str_ptr(&ty) {
                r = self.char_ptr_string(r, &ty, a)?;
            }
            let ok = match w {
                Want::Str if is_str_ptr(&ty) => true,
                Want::Str => ty == Ty::Str || super::expr::is_null(a),
                Want::Int => ty.is_scalar(),
                Want::Ptr(p) => match &ty {
                    Ty::Ptr(t) => pointee_ok(p, t),
                    _ => super::expr::is_null(a),
                },
                Want::Scalar(_) => ty.is_scalar(),
                Want::Buf => matches!(ty, Ty::Ptr(_) | Ty::Str) || super::expr::is_null(a),
            };
            if !ok {
                let proto = match w {
                    Want::Int => "int",
                    Want::Str => "char *",
                    Want::Buf => "void *",
                    Want::Ptr(p) | Want::Scalar(p) => p,
                };
                return self.err(
                    a.span,
                    format!(
                        "[D_PROTO_ARG] {name}( ) argument #{} is incompatible with prototype: prototype: {proto}, argument: {}",
                        regs.len() + 1,
                        ty.name()
                    ),
                );
            }
            regs.push(r);
        }
        Ok(regs)
    }

    /// `inet_ntoa6()`'s `strict`: an integer constant, as in DTrace; when it is not 0, an
    /// IPv4 address inside the IPv6 one keeps its IPv6 prefix.
    fn strict_arg(&mut self, e: &Expr) -> GResult<bool> {
        let ty = self.type_of(e)?;
        if !ty.is_int() {
            return self.err(
                e.span,
                format!(
                    "[D_PROTO_ARG] inet_ntoa6( ) argument #2 is incompatible with prototype: prototype: int, argument: {}",
                    ty.name()
                ),
            );
        }
        match const_eval(e) {
            Some(v) => Ok(v != 0),
            None => self.err(
                e.span,
                "[D_PROTO_ARG] inet_ntoa6( ) argument #2 must be an integer constant",
            ),
        }
    }

    /// A register holding the constant `v`.
    fn subr_const(&mut self, v: u64, span: Span) -> GResult<u8> {
        let r = self.reg(span)?;
        self.load_const(r, v);
        Ok(r)
    }

    fn release_regs(&mut self, regs: &[u8]) {
        for &r in regs {
            self.release(r);
        }
    }

    /// Compiles subroutine `name` (one [`is_subr`] knows) into a new register.
    pub(super) fn subr_call(&mut self, name: &str, args: &[Expr], span: Span) -> GResult<(u8, Ty)> {
        use Want::{Int, Str};
        if name.starts_with("mutex_") || name.starts_with("rw_") {
            return self.lock_subr(name, args, span);
        }
        // Opcodes `rd = op(r1, r2)` giving a string.
        let str2 = |n: &str| match n {
            "strstr" => Some((Op::Strstr, [Str, Str])),
            "strchr" => Some((Op::Strchr, [Str, Int])),
            "strrchr" => Some((Op::Strrchr, [Str, Int])),
            "strtok" => Some((Op::Strtok, [Str, Str])),
            _ => None,
        };
        let str1 = |n: &str| match n {
            "toupper" => Some(Op::Toupper),
            "tolower" => Some(Op::Tolower),
            "basename" => Some(Op::Basename),
            "dirname" => Some(Op::Dirname),
            "cleanpath" => Some(Op::Cleanpath),
            _ => None,
        };
        if let Some((op, want)) = str2(name) {
            let r = self.subr_args(name, args, span, &want, 2)?;
            if op == Op::Strtok && !super::expr::is_null(&args[0]) {
                // Only the NULL written as such goes on with the last string: a NULL
                // string that comes at run time (`strtok(strstr(s, t), d)`) is an invalid
                // address, as in DTrace. Make it 1, which names no string.
                let t = self.reg(span)?;
                self.load_const(t, 0);
                self.emit(Op::Eq, t, r[0], t, 0);
                self.emit(Op::Or, r[0], r[0], t, 0);
                self.release(t);
            }
            let rd = self.reg(span)?;
            self.emit(op, rd, r[0], r[1], 0);
            self.release_regs(&r);
            return Ok((rd, Ty::Str));
        }
        if let Some(op) = str1(name) {
            let r = self.subr_args(name, args, span, &[Str], 1)?;
            let rd = self.reg(span)?;
            self.emit(op, rd, r[0], 0, 0);
            self.release_regs(&r);
            return Ok((rd, Ty::Str));
        }
        match name {
            "substr" => {
                let mut r = self.subr_args(name, args, span, &[Str, Int, Int], 2)?;
                if r.len() == 2 {
                    // No length: the rest of the string (longer than any strsize).
                    r.push(self.subr_const(i32::MAX as u64, span)?);
                }
                let rd = self.reg(span)?;
                self.emit(Op::Substr, rd, r[0], r[1], r[2] as u32);
                self.release_regs(&r);
                Ok((rd, Ty::Str))
            }
            "index" | "rindex" => {
                let mut r = self.subr_args(name, args, span, &[Str, Str, Int], 2)?;
                if r.len() == 2 {
                    // index() starts at 0 (r0 reads 0); rindex() at the end, where any
                    // larger position is clamped.
                    r.push(if name == "index" {
                        0
                    } else {
                        self.subr_const(i32::MAX as u64, span)?
                    });
                }
                let op = if name == "index" {
                    Op::Index
                } else {
                    Op::Rindex
                };
                let rd = self.reg(span)?;
                self.emit(op, rd, r[0], r[1], r[2] as u32);
                self.release_regs(&r);
                Ok((rd, I32))
            }
            "lltostr" | "strtoll" => {
                let first = if name == "lltostr" { Int } else { Str };
                let mut r = self.subr_args(name, args, span, &[first, Int], 1)?;
                if r.len() == 1 {
                    r.push(self.subr_const(10, span)?);
                }
                let rd = self.reg(span)?;
                let (op, ty) = if name == "lltostr" {
                    (Op::Lltostr, Ty::Str)
                } else {
                    (Op::Strtoll, I64)
                };
                self.emit(op, rd, r[0], r[1], 0);
                self.release_regs(&r);
                Ok((rd, ty))
            }
            // DTrace's prototypes: the address is a pointer (an integer is refused, as by
            // DTrace; cast it), the family or link type an integer checked at run time.
            "inet_ntoa" | "inet_ntoa6" | "inet_ntop" | "link_ntop" => {
                let r = match name {
                    "inet_ntop" => {
                        self.subr_args(name, args, span, &[Int, Want::Ptr("void *")], 2)?
                    }
                    "link_ntop" => {
                        let r = self.subr_args(name, args, span, &[Int, Want::Ptr("void *")], 2)?;
                        let rk = self.subr_const(subr::LINK_FAMILY, span)?;
                        self.emit(Op::Or, r[0], r[0], rk, 0);
                        self.release(rk);
                        r
                    }
                    "inet_ntoa" => {
                        let mut r =
                            self.subr_args(name, args, span, &[Want::Ptr("ipaddr_t *")], 1)?;
                        r.insert(0, self.subr_const(subr::AF_INET, span)?);
                        r
                    }
                    _ => {
                        if let Some(m) = super::arity_error(name, args.len(), 1, 2) {
                            return self.err(span, m);
                        }
                        let want = [Want::Ptr("in6_addr_t *")];
                        let mut r = self.subr_args(name, &args[..1], span, &want, 1)?;
                        let strict = match args.get(1) {
                            None => false,
                            Some(e) => self.strict_arg(e)?,
                        };
                        let af = if strict {
                            subr::AF_INET6
                        } else {
                            subr::AF_INET6_LOOSE
                        };
                        r.insert(0, self.subr_const(af, span)?);
                        r
                    }
                };
                let rd = self.reg(span)?;
                self.emit(Op::InetNtop, rd, r[0], r[1], 0);
                self.release_regs(&r);
                Ok((rd, Ty::Str))
            }
            "htons" | "htonl" | "htonll" | "ntohs" | "ntohl" | "ntohll" => {
                let r = self.subr_args(name, args, span, &[Int], 1)?;
                let (bits, ty) = match &name[4..] {
                    "s" => (
                        16,
                        Ty::Int {
                            size: 2,
                            signed: false,
                        },
                    ),
                    "l" => (32, U32),
                    _ => (64, U64),
                };
                self.emit(Op::Hton, r[0], r[0], 0, bits);
                Ok((r[0], ty))
            }
            "rand" => {
                self.subr_args(name, args, span, &[], 0)?;
                let rd = self.reg(span)?;
                self.emit(Op::Rand, rd, 0, 0, 0);
                Ok((rd, I32))
            }
            "progenyof" => {
                let r = self.subr_args(name, args, span, &[Int], 1)?;
                self.emit(Op::Progenyof, r[0], r[0], 0, 0);
                Ok((r[0], I32))
            }
            "getmajor" | "getminor" => {
                let r = self.subr_args(name, args, span, &[Int], 1)?;
                let k = if name == "getmajor" {
                    subr::MINORBITS as u64
                } else {
                    (1u64 << subr::MINORBITS) - 1
                };
                let rk = self.subr_const(k, span)?;
                let op = if name == "getmajor" { Op::Srl } else { Op::And };
                self.emit(op, r[0], r[0], rk, 0);
                self.release(rk);
                // A Linux dev_t is 32 bits: the major is what is left of it.
                self.emit(Op::Zext, r[0], r[0], 0, 32);
                Ok((r[0], U32))
            }
            _ => self.err(span, format!("unknown function '{name}'")),
        }
    }
}

/// Whether `ty` is a pointer D takes where a string (DTrace's `char *`) goes, as the string
/// it points to: `char *` (signed or not) or, as DTrace's pointer rules allow, `void *`
/// (Oracle's `copyoutstr(alloca(...), ...)`).
pub(super) fn is_str_ptr(ty: &Ty) -> bool {
    matches!(ty, Ty::Ptr(p) if matches!(**p, Ty::Int { size: 1, .. } | Ty::Void))
}
