//! printf formats: parsing and checking at compile time (`crate::output::printf` formats
//! the records with them).

/// Flags of a conversion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// `-`: left-justify.
    pub minus: bool,
    /// `+`: always a sign.
    pub plus: bool,
    /// ` `: a space for positive numbers.
    pub space: bool,
    /// `0`: pad with zeros.
    pub zero: bool,
    /// `#`: alternate form.
    pub alt: bool,
    /// `@`: the aggregation value (printa formats only).
    pub agg: bool,
}

/// One conversion specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv {
    /// Flags.
    pub flags: Flags,
    /// Minimum field width.
    pub width: Option<usize>,
    /// Precision.
    pub prec: Option<usize>,
    /// `*` width: an integer argument before the value gives it.
    pub star_width: bool,
    /// `.*` precision: an integer argument (after a `*` width's) gives it.
    pub star_prec: bool,
    /// The conversion character.
    pub conv: char,
    /// Byte range in the format.
    pub start: usize,
    /// End of the byte range in the format.
    pub end: usize,
}

/// What a conversion consumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// An integer or pointer.
    Int,
    /// A string.
    Str,
    /// A kernel stack (`%k`, `stack()`).
    Stack,
    /// A user address (`%A`), which the compiler records with the process as `uaddr()`.
    Uaddr,
    /// A `float`, `double` or `long double` (`%e %E %f %g %G`).
    Float,
}

impl Conv {
    /// The kind of argument the conversion wants.
    pub fn arg_kind(&self) -> ArgKind {
        match self.conv {
            's' | 'S' => ArgKind::Str,
            'k' => ArgKind::Stack,
            'A' => ArgKind::Uaddr,
            'e' | 'E' | 'f' | 'g' | 'G' => ArgKind::Float,
            _ => ArgKind::Int,
        }
    }

    /// The kinds of the arguments the conversion takes, in order: the `*` width, the `.*`
    /// precision, then the value.
    pub fn arg_kinds(&self) -> impl Iterator<Item = ArgKind> {
        let stars = self.star_width as usize + self.star_prec as usize;
        std::iter::repeat_n(ArgKind::Int, stars).chain(std::iter::once(self.arg_kind()))
    }
}

/// The types conversion `conv` takes, as DTrace names them in its errors.
pub fn prototype(conv: char) -> &'static str {
    match conv {
        'e' | 'E' | 'f' | 'g' | 'G' => "float, double, or long double",
        'c' => "char, short, or int",
        's' | 'S' => "char [] or string (or use stringof)",
        'k' => "stack",
        'a' | 'A' | 'p' => "pointer or integer",
        'Y' => "int64_t",
        _ => "char, short, int, long, or long long",
    }
}

/// A piece of a parsed format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal bytes (`%%` already turned into `%`).
    Lit(Vec<u8>),
    /// A conversion.
    Conv(Conv),
}

/// A format error: byte offset in the format and message.
pub type FormatError = (usize, String);

/// Largest width or precision accepted.
pub const MAX_WIDTH: usize = 4096;

/// Parse `fmt`; `printa` allows the `@` flag.
pub fn parse(fmt: &[u8], printa: bool) -> Result<Vec<Piece>, FormatError> {
    let mut out = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            lit.push(fmt[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if fmt.get(i) == Some(&b'%') {
            lit.push(b'%');
            i += 1;
            continue;
        }
        // DTrace's conversion number, for its errors.
        let nconv = convs(&out).count() + 1;
        let syntax = |what: String| format!("[D_SYNTAX] format conversion #{nconv} {what}");
        let mut flags = Flags::default();
        // `?`: as wide as a pointer printed in hex, as DTrace's `%?p` columns are.
        let mut ptr_width = false;
        while let Some(&c) = fmt.get(i) {
            match c {
                b'-' => flags.minus = true,
                b'+' => flags.plus = true,
                b' ' => flags.space = true,
                b'0' => flags.zero = true,
                b'#' => flags.alt = true,
                b'?' => ptr_width = true,
                b'\'' => {}
                b'@' if printa => flags.agg = true,
                b'@' => {
                    return Err((
                        i,
                        "[D_PRINTF_AGG_CONV] %@ prints an aggregation's value: it is for printa( ) formats, not printf( )".into(),
                    ))
                }
                _ => break,
            }
            i += 1;
        }
        if fmt.get(i) == Some(&b'%') {
            return Err((
                start,
                syntax("is %%, which takes no flags, width or precision".into()),
            ));
        }
        let num = |i: &mut usize| -> Result<Option<usize>, FormatError> {
            let s = *i;
            while fmt.get(*i).is_some_and(|c| c.is_ascii_digit()) {
                *i += 1;
            }
            if s == *i {
                return Ok(None);
            }
            let v: usize = std::str::from_utf8(&fmt[s..*i])
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(usize::MAX);
            if v > MAX_WIDTH {
                return Err((s, format!("width or precision larger than {MAX_WIDTH}")));
            }
            Ok(Some(v))
        };
        let twice = |what: &str| {
            syntax(format!(
                "has more than one '*' specified for the output {what}"
            ))
        };
        // `%n$`, `*n$`: C's positional arguments, which D does not take.
        let positional = |i: usize| {
            let d = fmt[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            d > 0 && fmt.get(i + d) == Some(&b'$')
        };
        if positional(i) || (fmt.get(i) == Some(&b'*') && positional(i + 1)) {
            return Err((
                start,
                syntax("uses a positional argument (%n$), which D does not support".into()),
            ));
        }
        let star_width = fmt.get(i) == Some(&b'*');
        let width = if star_width {
            i += 1;
            if fmt.get(i) == Some(&b'*') {
                return Err((i, twice("width")));
            }
            None
        } else {
            num(&mut i)?
        };
        let mut prec = None;
        let mut star_prec = false;
        if fmt.get(i) == Some(&b'.') {
            i += 1;
            if fmt.get(i) == Some(&b'*') {
                star_prec = true;
                i += 1;
                if fmt.get(i) == Some(&b'*') {
                    return Err((i, twice("precision")));
                }
            } else {
                prec = Some(num(&mut i)?.unwrap_or(0));
            }
            if fmt.get(i) == Some(&b'.') {
                return Err((i, syntax("has more than one '.'".into())));
            }
            if star_prec && positional(i) {
                return Err((
                    start,
                    syntax("uses a positional argument (%n$), which D does not support".into()),
                ));
            }
        }
        let width = match width {
            None if ptr_width && !star_width => Some(2 * core::mem::size_of::<u64>()),
            w => w,
        };
        // DTrace reads `@` wherever it stands before the conversion: `%8@d`, `%-8.2@d`.
        if printa && fmt.get(i) == Some(&b'@') {
            flags.agg = true;
            i += 1;
        }
        // Length modifiers are accepted and ignored: the argument's type decides.
        while let Some(b'h' | b'l' | b'L' | b'j' | b'z' | b't' | b'q') = fmt.get(i) {
            i += 1;
        }
        let conv = match fmt.get(i) {
            None => return Err((start, syntax("ends before its conversion character".into()))),
            Some(&c) => c as char,
        };
        if !"diuxXocspSYakAeEfgG".contains(conv) {
            return Err((
                i,
                syntax(format!("is undefined: %{}", conv.escape_default())),
            ));
        }
        i += 1;
        if !lit.is_empty() {
            out.push(Piece::Lit(std::mem::take(&mut lit)));
        }
        out.push(Piece::Conv(Conv {
            flags,
            width,
            prec,
            star_width,
            star_prec,
            conv,
            start,
            end: i,
        }));
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    Ok(out)
}

/// The conversions of a parsed format.
pub fn convs(pieces: &[Piece]) -> impl Iterator<Item = &Conv> {
    pieces.iter().filter_map(|p| match p {
        Piece::Conv(c) => Some(c),
        Piece::Lit(_) => None,
    })
}
