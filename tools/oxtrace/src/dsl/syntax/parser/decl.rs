//! The D parser's declarations: storage classes, type specifiers and declarators.

use super::super::super::error::Span;
use super::super::ast::*;
use super::super::lexer::Tok;
use super::super::scope;
use super::{is_type_word, PResult, Parser, MAX_ARRAY};

/// Why the type specifier words `w` make no type, in DTrace's words and tags.
fn combo_error(w: &[&str]) -> String {
    let has = |x: &str| w.contains(&x);
    let modifier = ["short", "long", "signed", "unsigned"]
        .iter()
        .any(|m| has(m));
    if has("void") && modifier {
        "[D_DECL_VOIDATTR] invalid type declaration: attributes may not be used with void type"
            .into()
    } else if has("char") && (has("short") || has("long")) {
        "[D_DECL_CHARATTR] invalid type declaration: short and long may not be used with char type"
            .into()
    } else if has("short") && has("long") {
        // DTrace takes both words and finds no such type.
        format!(
            "[D_UNKNOWN] failed to resolve type {}: Unknown type name",
            w.join(" ")
        )
    } else if (has("signed") || has("unsigned")) && (has("float") || has("double")) {
        "[D_DECL_SIGNINT] invalid type declaration: signed and unsigned may only be used with integer type".into()
    } else {
        format!("[D_DECL_COMBO] invalid type combination '{}'", w.join(" "))
    }
}

/// The tag of an anonymous struct or union written at byte `at`: no D name can spell it.
fn anon_tag(at: usize) -> String {
    format!("(anon@{at})")
}

/// C's storage classes: `extern` declares a global, the others mean nothing in D.
const STORAGE_CLASSES: &[&str] = &["extern", "register", "static", "auto"];

impl Parser<'_> {
    /// Whether a declaration starts here: a type specifier, optionally after `self` or
    /// `this`, or `typedef`, `inline`.
    pub(super) fn is_decl_start(&self) -> bool {
        match &self.peek().tok {
            Tok::Ident(w) if w == "self" || w == "this" => {
                let class_word = matches!(&self.peek_at(1).tok, Tok::Ident(w)
                    if w == "self" || w == "this" || STORAGE_CLASSES.contains(&w.as_str()));
                !matches!(self.peek_at(1).tok, Tok::Punct("->"))
                    && (class_word || self.is_type_start(1) || self.is_implicit_int(1))
            }
            Tok::Ident(w) if w == "typedef" || w == "inline" => true,
            Tok::Ident(w) if STORAGE_CLASSES.contains(&w.as_str()) => true,
            _ => self.is_type_start(0),
        }
    }

    /// Whether a declarator with no type starts at token `n`: `self x;` and `this x;`
    /// declare an `int`, as a C declaration with a storage class and no type does.
    pub(super) fn is_implicit_int(&self, n: usize) -> bool {
        matches!(&self.peek_at(n).tok, Tok::Ident(_))
            && !self.is_type_start(n)
            && matches!(
                self.peek_at(n + 1).tok,
                Tok::Punct(";") | Tok::Punct(",") | Tok::Punct("[")
            )
    }

    /// The storage class of a declaration: `self`, `this`, `extern` (a global) or none.
    /// C's other classes mean nothing in D, and a declaration has one class at most.
    pub(super) fn decl_class(&mut self) -> PResult<DeclClass> {
        let mut class: Option<(DeclClass, Span)> = None;
        loop {
            let t = self.peek().clone();
            let c = match &t.tok {
                Tok::Ident(w) if w == "self" && !self.is_member_use(1) => DeclClass::Thread,
                Tok::Ident(w) if w == "this" && !self.is_member_use(1) => DeclClass::Local,
                Tok::Ident(w) if w == "extern" => DeclClass::Global,
                Tok::Ident(w) if STORAGE_CLASSES.contains(&w.as_str()) => {
                    return self.err(
                        t.span,
                        "[D_DECL_BADCLASS] specified storage class not appropriate in D",
                    )
                }
                _ => return Ok(class.map_or(DeclClass::Global, |c| c.0)),
            };
            if let Some((_, first)) = class {
                return self.err(
                    first.to(t.span),
                    "[D_DECL_CLASS] only one storage class may be given in a declaration",
                );
            }
            self.bump();
            class = Some((c, t.span));
        }
    }

    /// Whether token `n` makes the `self` or `this` before it a variable's (`self->x`).
    pub(super) fn is_member_use(&self, n: usize) -> bool {
        matches!(self.peek_at(n).tok, Tok::Punct("->"))
    }

    /// A top-level declaration: variables, struct/union/enum definitions, typedef, inline.
    pub(super) fn top_decl(&mut self, items: &mut Vec<Item>) -> PResult<()> {
        let first = self.peek().clone();
        if matches!(&first.tok, Tok::Ident(w) if w == "typedef") {
            self.bump();
            let (base, defs) = self.type_spec(true)?;
            items.extend(defs);
            loop {
                let (ty, name, span) = self.declarator_parts(&base)?;
                if !matches!(ty, TypeName::Array(..)) && self.is("[") {
                    return self.err(
                        span,
                        "[D_SYNTAX] syntax error: a typedef cannot be an associative array",
                    );
                }
                self.typedefs.insert(name.clone());
                items.push(Item::Typedef(ty, name, span));
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(";")?;
            return Ok(());
        }
        if matches!(&first.tok, Tok::Ident(w) if w == "inline") {
            self.bump();
            let (base, defs) = self.type_spec(true)?;
            items.extend(defs);
            let (ty, name, span) = self.declarator_parts(&base)?;
            self.expect("=")?;
            let e = self.expr()?;
            self.expect(";")?;
            items.push(Item::Inline(ty, name, e, span));
            return Ok(());
        }
        let is_extern = matches!(&first.tok, Tok::Ident(w) if w == "extern");
        let class = self.decl_class()?;
        let (base, defs) = if (class != DeclClass::Global || is_extern) && self.is_implicit_int(0) {
            (
                TypeName::Int {
                    size: 4,
                    signed: true,
                },
                vec![],
            )
        } else {
            self.type_spec(true)?
        };
        let defined = !defs.is_empty();
        items.extend(defs);
        // `struct a { ... } struct b { ... };`: a definition without its `;`.
        if self.is_type_start(0) && matches!(base, TypeName::Sou(..) | TypeName::Enum(_)) {
            let sp = self.peek().span;
            return self.err(
                sp,
                "[D_DECL_COMBO] invalid type combination: a definition ends with ';' before the next type",
            );
        }
        if self.is(";") {
            // A struct, union or enum definition alone, or a declaration of a tag.
            let semi = self.bump().span;
            if !defined && !matches!(base, TypeName::Sou(..) | TypeName::Enum(_)) {
                return self.err(first.span.to(semi), "[D_DECL_USELESS] useless declaration");
            }
            return Ok(());
        }
        if is_extern {
            // A kernel symbol's declaration: it makes no D variable (the symbol is read as
            // `name), and its arrays may leave their size out (extern int a[];).
            loop {
                if self.is_prototype() {
                    self.prototype()?;
                } else if self.is_function_pointer() {
                    self.function_pointer()?;
                } else {
                    self.extern_declarator()?;
                }
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(";")?;
            return Ok(());
        }
        loop {
            if self.is_prototype() {
                self.prototype()?;
            } else {
                let d = self.declarator(class, &base)?;
                items.push(Item::Decl(d));
            }
            if !self.eat(",") {
                break;
            }
        }
        self.expect(";")?;
        Ok(())
    }

    /// Whether a function's declarator follows: `*`s, a name, `(`.
    fn is_prototype(&self) -> bool {
        let mut n = 0;
        while matches!(self.peek_at(n).tok, Tok::Punct("*")) {
            n += 1;
        }
        matches!(self.peek_at(n).tok, Tok::Ident(_))
            && matches!(self.peek_at(n + 1).tok, Tok::Punct("("))
    }

    /// A function prototype, `int foo(int, char *s, ...)`: checked as DTrace checks it and
    /// taken, as C takes a declaration of a function it never calls (D calls none).
    fn prototype(&mut self) -> PResult<()> {
        while self.eat("*") {}
        let (name, _) = self.ident()?;
        self.parameters(&name)
    }

    /// Whether a pointer to a function's declarator follows: `*`s, `(`, `*`.
    fn is_function_pointer(&self) -> bool {
        let mut n = 0;
        while matches!(self.peek_at(n).tok, Tok::Punct("*")) {
            n += 1;
        }
        matches!(self.peek_at(n).tok, Tok::Punct("("))
            && matches!(self.peek_at(n + 1).tok, Tok::Punct("*"))
    }

    /// `int *(*fp)(void)`, a pointer to a function: checked as a prototype and taken, as C
    /// takes the declaration of an object that D never reads.
    fn function_pointer(&mut self) -> PResult<()> {
        while self.eat("*") {}
        self.expect("(")?;
        while self.eat("*") {}
        let (name, _) = self.ident()?;
        self.expect(")")?;
        self.parameters(&name)
    }

    /// A member's declarator: an unnamed bit-field's (`int : 0`), a pointer to a function
    /// (`int (*fp)(void)`, `int (*afp[2])()`: `void *`, as D calls none, checked as a
    /// prototype), or a variable's. Out of `type_spec`, whose frame every nested struct
    /// stacks.
    #[inline(never)]
    fn member_declarator(&mut self, base: &TypeName) -> PResult<(TypeName, String, Span)> {
        if self.is(":") {
            return Ok((base.clone(), String::new(), self.peek().span));
        }
        if !self.is_function_pointer() {
            let d = self.declarator_parts(base)?;
            if self.is("(") {
                return self.err(
                    d.2,
                    format!("[D_DECL_VOIDOBJ] a member cannot be a function: {}", d.1),
                );
            }
            return Ok(d);
        }
        while self.eat("*") {}
        self.expect("(")?;
        let (ty, name, span) = self.declarator_parts(&TypeName::Void)?;
        self.expect(")")?;
        self.parameters(&name)?;
        Ok((ty, name, span))
    }

    /// The parameter list of function `name`, from its `(`.
    fn parameters(&mut self, name: &str) -> PResult<()> {
        self.expect("(")?;
        if self.eat(")") {
            return Ok(());
        }
        let mut n = 0;
        loop {
            n += 1;
            if self.eat("...") {
                self.expect(")")?;
                return Ok(());
            }
            let t = self.peek().clone();
            if let Tok::Ident(w) = &t.tok {
                match w.as_str() {
                    "register" => {
                        self.bump();
                    }
                    "static" | "extern" | "auto" | "self" | "this" | "typedef" | "inline" => {
                        return self.err(
                            t.span,
                            format!("[D_DECL_PARMCLASS] parameter #{n} of {name}: a parameter's storage class can only be register"),
                        )
                    }
                    _ => {}
                }
            }
            let (base, _) = self.nested(|p| p.type_spec(false))?;
            let mut ptr = false;
            while self.eat("*") {
                ptr = true;
            }
            let pname = match &self.peek().tok {
                Tok::Ident(w) if !is_type_word(w) && !self.typedefs.contains(w) => {
                    Some(self.ident()?)
                }
                _ => None,
            };
            while self.is("[") {
                let open = self.bump().span;
                if self.is_type_start(0) || self.is("...") {
                    return self.err(
                        open,
                        format!("[D_DECL_PROTO_TYPE] parameter #{n} of {name} is an associative array: a function prototype cannot take a dynamic variable"),
                    );
                }
                if !self.is("]") {
                    self.expr()?;
                }
                self.expect("]")?;
            }
            if base == TypeName::Void && !ptr {
                if let Some((v, sp)) = pname {
                    return self.err(
                        sp,
                        format!("[D_DECL_PROTO_NAME] a void parameter cannot have a name: {v}"),
                    );
                }
                if n > 1 || !self.is(")") {
                    return self.err(
                        t.span,
                        format!("[D_DECL_PROTO_VOID] void must be the only parameter of {name}"),
                    );
                }
            }
            if self.eat(")") {
                return Ok(());
            }
            self.expect(",")?;
        }
    }

    /// The declarator of an `extern` declaration: pointers, the name, then dimensions,
    /// which may be empty.
    pub(super) fn extern_declarator(&mut self) -> PResult<()> {
        while self.eat("*") {}
        let (name, span) = self.ident()?;
        if name.contains('`') {
            return self.err(
                span,
                format!("[D_DECL_SCOPE] D scoping operator may not be used in a declaration name ({name})"),
            );
        }
        while self.eat("[") {
            if !self.eat("]") {
                self.expr()?;
                self.expect("]")?;
            }
        }
        Ok(())
    }

    /// A declarator of a variable: pointers, name, then fixed dimensions or associative
    /// key types.
    pub(super) fn declarator(&mut self, class: DeclClass, base: &TypeName) -> PResult<Decl> {
        let mut ty = base.clone();
        let depth = self.depth;
        while self.is("*") {
            self.enter()?;
            self.bump();
            ty = TypeName::Ptr(Box::new(ty));
        }
        self.depth = depth;
        let (name, span) = self.ident()?;
        if name.contains('`') {
            return self.err(
                span,
                format!("[D_DECL_SCOPE] D scoping operator may not be used in a declaration name ({name})"),
            );
        }
        let mut keys = None;
        let mut dims = Vec::new();
        while self.is("[") {
            let open = self.bump().span;
            if self.is("]") {
                let close = self.bump().span;
                return self.err(
                    open.to(close),
                    "[D_DECL_ARRNULL] array declaration requires array dimension or tuple signature",
                );
            }
            if self.is("...") {
                let sp = self.peek().span;
                return self.err(
                    sp,
                    "[D_DECL_PROTO_VARARGS] an associative array's key types cannot end in '...'",
                );
            }
            if self.is_type_start(0) && dims.is_empty() && keys.is_none() {
                let mut ks = Vec::new();
                loop {
                    if self.is("...") {
                        let sp = self.peek().span;
                        return self.err(
                            sp,
                            "[D_DECL_PROTO_VARARGS] an associative array's key types cannot end in '...'",
                        );
                    }
                    let k = self.type_name()?;
                    ks.push(k);
                    if self.eat("]") {
                        break;
                    }
                    self.expect(",")?;
                }
                keys = Some(ks);
                continue;
            }
            let e = self.expr()?;
            let close = self.expect("]")?;
            if keys.is_some() {
                return self.err(
                    e.span,
                    "[D_SYNTAX] syntax error: an associative array has no dimension",
                );
            }
            dims.push((e, open.to(close)));
        }
        for (e, sp) in dims.into_iter().rev() {
            let n = match const_eval(&e) {
                Some(n) if n > 0 && n <= MAX_ARRAY as i64 => n as u64,
                Some(n) if n > 0 => {
                    return self.err(
                        sp,
                        format!("[D_DECL_ARRBIG] array dimension {n} is too big (at most {MAX_ARRAY})"),
                    )
                }
                // A negative dimension is an expression (`-7`), not the constant DTrace
                // wants there.
                Some(n) if n < 0 => {
                    return self.err(
                        e.span,
                        "[D_DECL_ARRSUB] positive integral constant expression or tuple signature expected as array declaration subscript",
                    )
                }
                Some(_) => {
                    return self.err(sp, "[D_DECL_ARRBIG] array dimension must be positive")
                }
                None => {
                    return self.err(
                        e.span,
                        "[D_DECL_ARRSUB] positive integral constant expression or tuple signature expected as array declaration subscript",
                    )
                }
            };
            ty = TypeName::Array(Box::new(ty), n);
        }
        Ok(Decl {
            class,
            ty,
            keys,
            name,
            span,
        })
    }

    /// A declarator of a typedef, inline or member: pointers, name, fixed dimensions.
    pub(super) fn declarator_parts(
        &mut self,
        base: &TypeName,
    ) -> PResult<(TypeName, String, Span)> {
        let d = self.declarator(DeclClass::Global, base)?;
        if d.keys.is_some() {
            return self.err(
                d.span,
                "[D_DECL_ARRNULL] only variables can be associative arrays",
            );
        }
        Ok((d.ty, d.name, d.span))
    }

    /// A type specifier: integer words, `string`, `void`, a typedef name, or `struct`/
    /// `union`/`enum` with an optional definition (allowed when `defs_ok`; definitions are
    /// returned as items).
    pub(super) fn type_spec(&mut self, defs_ok: bool) -> PResult<(TypeName, Vec<Item>)> {
        // `long struct s`, `unsigned enum e`: the modifiers are for integers only.
        let mut n = 0;
        while matches!(&self.peek_at(n).tok,
            Tok::Ident(w) if matches!(w.as_str(), "short" | "long" | "signed" | "unsigned"))
        {
            n += 1;
        }
        if n > 0
            && matches!(&self.peek_at(n).tok,
                Tok::Ident(w) if matches!(w.as_str(), "struct" | "union" | "enum"))
        {
            let t = self.peek().clone();
            let m = match &t.tok {
                Tok::Ident(w) if w == "signed" || w == "unsigned" => "[D_DECL_SIGNINT] invalid type declaration: signed and unsigned may only be used with integer type",
                _ => "[D_DECL_LONGINT] invalid type declaration: long and short may only be used with integer or floating-point type",
            };
            return self.err(t.span, m);
        }
        let t = self.peek().clone();
        let kw = match &t.tok {
            Tok::Ident(w) if w == "struct" || w == "union" || w == "enum" => w.clone(),
            Tok::Ident(w) if self.is_typedef_name(w) => {
                self.bump();
                return Ok((TypeName::Named(w.clone()), vec![]));
            }
            _ => return Ok((self.type_words()?, vec![])),
        };
        self.bump();
        let (mut name, nspan) = match self.peek().tok.clone() {
            Tok::Ident(n) => {
                let sp = self.bump().span;
                (n, sp)
            }
            _ => (String::new(), t.span),
        };
        // An anonymous struct or union is named by where it is written: one type each.
        if name.is_empty() && kw != "enum" && self.is("{") {
            name = anon_tag(t.span.start);
        }
        let mut defs = Vec::new();
        if self.is("{") {
            let open = self.bump().span;
            if name.contains('`') {
                // module`name names a kernel type: D defines only its own.
                return self.err(
                    nspan,
                    format!("[D_SYNTAX] syntax error: a {kw} defined in D cannot have the scoped name {name}"),
                );
            }
            let tag = format!("{kw} {name}");
            if !defs_ok {
                // A type defined before is being defined again, as DTrace sees it.
                if self.sou_defs.contains(&tag) {
                    return self.err(open, format!("[D_DECL_TYPERED] type redeclared: {tag}"));
                }
                return self.err(
                    open,
                    format!("[D_SYNTAX] syntax error: a {kw} cannot be defined here"),
                );
            }
            self.sou_defs.insert(tag);
            if kw == "enum" {
                let mut items = Vec::new();
                loop {
                    if self.eat("}") {
                        break;
                    }
                    let (n, sp) = self.ident()?;
                    let v = if self.eat("=") {
                        Some(self.ternary()?)
                    } else {
                        None
                    };
                    items.push((n, v, sp));
                    if !self.eat(",") {
                        self.expect("}")?;
                        break;
                    }
                }
                defs.push(Item::Enum {
                    name: name.clone(),
                    items,
                });
            } else {
                let mut members = Vec::new();
                loop {
                    if self.eat("}") {
                        break;
                    }
                    let (mbase, mdefs) = self.nested(|p| p.type_spec(true))?;
                    defs.extend(mdefs);
                    loop {
                        // An unnamed bit-field (`int : 0;` ends its storage unit).
                        let (ty, mname, span) = self.member_declarator(&mbase)?;
                        let bits = if self.eat(":") {
                            Some(self.ternary()?)
                        } else {
                            None
                        };
                        members.push(MemberDecl {
                            ty,
                            name: mname,
                            span,
                            bits,
                        });
                        if !self.eat(",") {
                            break;
                        }
                    }
                    self.expect(";")?;
                }
                defs.push(Item::Sou {
                    name: name.clone(),
                    union: kw == "union",
                    members,
                    span: nspan,
                });
            }
        } else if name.is_empty() {
            let sp = self.peek().span;
            return self.err(sp, format!("[D_SYNTAX] syntax error: expected a {kw} tag"));
        }
        let ty = if kw == "enum" {
            TypeName::Enum(name)
        } else {
            TypeName::Sou(name, kw == "union")
        };
        Ok((ty, defs))
    }

    /// Whether `w` is a typedef name, maybe scoped by a module (``D`dqstr_t``: resolved
    /// with its scope). Out of `type_spec`, whose frame every nested struct stacks.
    #[inline(never)]
    fn is_typedef_name(&self, w: &str) -> bool {
        (self.typedefs.contains(w) && !is_type_word(w))
            || scope::split(w).is_some_and(|(_, b)| self.typedefs.contains(b))
    }

    /// The type word of ``m`word`` (taken), if `s` is one; kept out of `type_words`, whose
    /// frame every nested struct definition stacks.
    #[inline(never)]
    fn scoped_type_word(&mut self, s: &str) -> PResult<Option<String>> {
        let Some((m, b)) = scope::split(s) else {
            return Ok(None);
        };
        if !self.is_scoped_type(s) || self.typedefs.contains(b) {
            return Ok(None);
        }
        if !scope::is_known(m) {
            let sp = self.peek().span;
            return self.err(
                sp,
                format!("[D_UNKNOWN] failed to resolve type {s}: Unknown module name"),
            );
        }
        let w = b.to_string();
        self.bump();
        Ok(Some(w))
    }

    /// Integer type words (`unsigned long long`, `uint32_t`...), `string` or `void`.
    pub(super) fn type_words(&mut self) -> PResult<TypeName> {
        let mut words = Vec::new();
        let start = self.peek().span;
        while let Tok::Ident(s) = self.peek().tok.clone() {
            // ``C`int``: a type word scoped by a module is the word itself.
            if s.contains('`') {
                if words.is_empty() {
                    if let Some(w) = self.scoped_type_word(&s)? {
                        words.push(w);
                    }
                }
                break;
            }
            if !is_type_word(&s) || matches!(s.as_str(), "struct" | "union" | "enum") {
                break;
            }
            // `unsigned x` is a declaration of x; one specifier word stops before a name.
            words.push(s);
            self.bump();
        }
        let end = self.peek().span;
        let w: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
        let int = |size, signed| TypeName::Int { size, signed };
        let ty = match w.as_slice() {
            ["char"] | ["signed", "char"] | ["int8_t"] => int(1, true),
            ["unsigned", "char"]
            | ["uint8_t"]
            | ["uchar_t"]
            | ["u_char"]
            | ["u_int8_t"]
            | ["bool"]
            | ["_Bool"] => int(1, false),
            ["short"]
            | ["short", "int"]
            | ["signed", "short"]
            | ["signed", "short", "int"]
            | ["int16_t"] => int(2, true),
            ["unsigned", "short"]
            | ["unsigned", "short", "int"]
            | ["uint16_t"]
            | ["ushort_t"]
            | ["u_short"]
            | ["u_int16_t"] => int(2, false),
            ["int"]
            | ["signed"]
            | ["signed", "int"]
            | ["int32_t"]
            | ["pid_t"]
            | ["id_t"]
            | ["boolean_t"] => int(4, true),
            ["unsigned"]
            | ["unsigned", "int"]
            | ["uint32_t"]
            | ["uid_t"]
            | ["gid_t"]
            | ["uint_t"]
            | ["uint"]
            | ["u_int"]
            | ["u_int32_t"]
            | ["mode_t"]
            | ["dev_t"]
            | ["nlink_t"]
            | ["ipaddr_t"] => int(4, false),
            ["long"]
            | ["long", "int"]
            | ["long", "long"]
            | ["long", "long", "int"]
            | ["signed", "long"]
            | ["signed", "long", "int"]
            | ["signed", "long", "long"]
            | ["signed", "long", "long", "int"]
            | ["int64_t"]
            | ["longlong_t"]
            | ["ssize_t"]
            | ["intptr_t"]
            | ["off_t"]
            | ["time_t"]
            | ["clock_t"] => int(8, true),
            ["unsigned", "long"]
            | ["unsigned", "long", "long"]
            | ["unsigned", "long", "int"]
            | ["unsigned", "long", "long", "int"]
            | ["uint64_t"]
            | ["u_int64_t"]
            | ["ulong_t"]
            | ["ulong"]
            | ["u_long"]
            | ["u_longlong_t"]
            | ["size_t"]
            | ["uintptr_t"]
            | ["ino_t"] => int(8, false),
            ["float"] => TypeName::Float(4),
            ["double"] => TypeName::Float(8),
            ["long", "double"] => TypeName::Float(16),
            ["caddr_t"] => TypeName::Ptr(Box::new(int(1, true))),
            ["string"] => TypeName::Str,
            ["void"] => TypeName::Void,
            [] => {
                let t = self.peek().clone();
                return self.err(
                    t.span,
                    format!(
                        "[D_SYNTAX] syntax error: expected a type, found {}",
                        Self::describe(&t.tok)
                    ),
                );
            }
            _ => return self.err(start.to(end), combo_error(&w)),
        };
        Ok(ty)
    }
}
