//! Low-level scanning for the textual IR: a byte cursor over the source with trivia skipping
//! (whitespace and `//` comments), identifiers, numbers, quoted strings, and the raw spans of
//! symbolic dimension expressions (handed to [`crate::dim::DimExpr`]'s `FromStr`).
//!
//! The parser is scannerless on purpose: dimension expressions have their own grammar (owned by
//! `dim`), so the cursor only finds where one ends (at a delimiter outside parentheses).
//! Every method is total: malformed input yields a [`ParseError`], never a panic.

use super::ParseError;

/// Deepest parenthesis nesting accepted inside one dimension expression.
const MAX_DIM_DEPTH: usize = 64;

/// A number token: the source text of an integer or of a float (with `.` or an exponent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Number<'a> {
    /// `-?[0-9]+`
    Int(&'a str),
    /// `-?[0-9]+(.[0-9]*)?([eE][+-]?[0-9]+)?` with a `.` or an exponent.
    Float(&'a str),
}

/// A position in the source and the scanning primitives. See the module docs.
pub struct Cursor<'a> {
    src: &'a str,
    pos: usize,
}

/// True for characters that may continue an identifier, a value name or an op name.
pub(crate) fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'$'
}

/// True for characters that may start an identifier.
pub(crate) fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

/// True if `s` can be printed bare as an identifier (otherwise it is printed quoted).
pub(crate) fn is_ident(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty() && is_ident_start(b[0]) && b.iter().all(|&c| is_ident_char(c))
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `src`.
    pub fn new(src: &'a str) -> Self {
        Cursor { src, pos: 0 }
    }

    /// Byte offset of the next token (after trivia).
    pub(crate) fn here(&mut self) -> usize {
        self.skip_trivia();
        self.pos
    }

    /// The rest of the source.
    fn rest(&self) -> &'a [u8] {
        &self.src.as_bytes()[self.pos..]
    }

    /// The next byte, without skipping trivia.
    pub(crate) fn peek_raw(&self) -> Option<u8> {
        self.rest().first().copied()
    }

    /// Skips whitespace and `//` comments, then returns the next byte.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.skip_trivia();
        self.peek_raw()
    }

    /// True at the end of the input (after trivia).
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Skips whitespace and `//` line comments.
    pub(crate) fn skip_trivia(&mut self) {
        loop {
            let r = self.rest();
            match r.first() {
                Some(c) if c.is_ascii_whitespace() => self.pos += 1,
                Some(b'/') if r.get(1) == Some(&b'/') => {
                    let n = r.iter().position(|&c| c == b'\n').unwrap_or(r.len());
                    self.pos += n;
                }
                _ => return,
            }
        }
    }

    /// An error at byte offset `at` (line and column are computed here, on the error path only).
    pub fn error_at(&self, at: usize, msg: impl Into<String>) -> ParseError {
        let at = at.min(self.src.len());
        let before = self.src.as_bytes()[..at].iter().rposition(|&c| c == b'\n');
        let line = self.src.as_bytes()[..at]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        let start = before.map_or(0, |p| p + 1);
        // Count characters, not bytes; `at` may sit inside a multi-byte character.
        let col = String::from_utf8_lossy(&self.src.as_bytes()[start..at])
            .chars()
            .count()
            + 1;
        ParseError {
            line,
            col,
            message: msg.into(),
        }
    }

    /// An error at the current position (after trivia), naming what was found there.
    pub(crate) fn error(&mut self, msg: impl Into<String>) -> ParseError {
        self.skip_trivia();
        let found = self.describe_next();
        self.error_at(self.pos, format!("{}, found {found}", msg.into()))
    }

    /// A short description of the next token, for messages.
    fn describe_next(&self) -> String {
        let r = self.src.get(self.pos..).unwrap_or("");
        match r.chars().next() {
            None => "end of input".into(),
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => {
                let w: String = r
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .take(32)
                    .collect();
                format!("`{w}`")
            }
            Some(c) => format!("`{}`", c.escape_debug()),
        }
    }

    /// Consumes `s` if the input continues with it (after trivia).
    pub fn eat(&mut self, s: &str) -> bool {
        self.skip_trivia();
        if self.rest().starts_with(s.as_bytes()) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// Consumes `s` or fails with "expected `s` <context>".
    pub(crate) fn expect(&mut self, s: &str, context: &str) -> Result<(), ParseError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{s}` {context}")))
        }
    }

    /// Consumes the keyword `kw` if the next identifier is exactly `kw`.
    pub(crate) fn eat_keyword(&mut self, kw: &str) -> bool {
        self.skip_trivia();
        let r = self.rest();
        if r.starts_with(kw.as_bytes()) && !r.get(kw.len()).is_some_and(|&c| is_ident_char(c)) {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    /// The identifier at the cursor, without consuming it.
    pub(crate) fn peek_ident(&mut self) -> Option<&'a str> {
        self.skip_trivia();
        let r = self.rest();
        if !r.first().is_some_and(|&c| is_ident_start(c)) {
            return None;
        }
        let n = r.iter().position(|&c| !is_ident_char(c)).unwrap_or(r.len());
        Some(&self.src[self.pos..self.pos + n])
    }

    /// Consumes an identifier `[A-Za-z_][A-Za-z0-9_.$]*`.
    pub fn ident(&mut self) -> Option<&'a str> {
        let id = self.peek_ident()?;
        self.pos += id.len();
        Some(id)
    }

    /// Consumes the characters of a value name after `%` (`[A-Za-z0-9_.$]+`).
    pub(crate) fn value_name(&mut self) -> Option<&'a str> {
        let r = self.rest();
        let n = r.iter().position(|&c| !is_ident_char(c)).unwrap_or(r.len());
        if n == 0 {
            return None;
        }
        let s = &self.src[self.pos..self.pos + n];
        self.pos += n;
        Some(s)
    }

    /// Consumes a decimal number (integer or float; see [`Number`]).
    pub fn number(&mut self) -> Option<Number<'a>> {
        self.skip_trivia();
        let r = self.rest();
        let mut i = usize::from(r.first() == Some(&b'-'));
        let digits = |i: usize| {
            r[i.min(r.len())..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count()
        };
        let n = digits(i);
        if n == 0 {
            return None;
        }
        i += n;
        let mut float = false;
        if r.get(i) == Some(&b'.') {
            float = true;
            i += 1;
            i += digits(i);
        }
        if matches!(r.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(r.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let m = digits(j);
            if m > 0 {
                float = true;
                i = j + m;
            }
        }
        let s = &self.src[self.pos..self.pos + i];
        self.pos += i;
        Some(if float {
            Number::Float(s)
        } else {
            Number::Int(s)
        })
    }

    /// Consumes `0x` followed by hex digits; returns the digits.
    pub fn hex(&mut self) -> Option<&'a str> {
        self.skip_trivia();
        let r = self.rest();
        if !(r.starts_with(b"0x") || r.starts_with(b"0X")) {
            return None;
        }
        let n = r[2..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        if n == 0 {
            return None;
        }
        let s = &self.src[self.pos + 2..self.pos + 2 + n];
        self.pos += 2 + n;
        Some(s)
    }

    /// Consumes an integer that fits in `i64`, or fails naming `what`.
    pub(crate) fn int(&mut self, what: &str) -> Result<i64, ParseError> {
        self.skip_trivia();
        let at = self.pos;
        match self.number() {
            Some(Number::Int(s)) => s
                .parse::<i64>()
                .map_err(|_| self.error_at(at, format!("integer `{s}` does not fit in 64 bits"))),
            Some(Number::Float(_)) => {
                Err(self.error_at(at, format!("expected an integer for {what}, found a float")))
            }
            None => Err(self.error(format!("expected an integer for {what}"))),
        }
    }

    /// Consumes a double-quoted string with escapes `\" \\ \n \t \r \u{HEX}`.
    pub fn string(&mut self) -> Result<String, ParseError> {
        self.skip_trivia();
        let start = self.pos;
        if self.peek_raw() != Some(b'"') {
            return Err(self.error("expected a string"));
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            let r = &self.src[self.pos..];
            // Copy the run of ordinary characters in one go.
            let n = r
                .bytes()
                .position(|c| c == b'"' || c == b'\\' || c == b'\n')
                .unwrap_or(r.len());
            out.push_str(&r[..n]);
            self.pos += n;
            match self.peek_raw() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let esc_at = self.pos;
                    self.pos += 1;
                    let c = self.peek_raw();
                    self.pos += usize::from(c.is_some());
                    match c {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'n') => out.push('\n'),
                        Some(b't') => out.push('\t'),
                        Some(b'r') => out.push('\r'),
                        Some(b'u') => out.push(self.unicode_escape(esc_at)?),
                        _ => {
                            return Err(self.error_at(
                                esc_at,
                                "unknown escape in string (use \\\" \\\\ \\n \\t \\r \\u{HEX})",
                            ))
                        }
                    }
                }
                _ => return Err(self.error_at(start, "unterminated string")),
            }
        }
    }

    /// The `{HEX}` part of a `\u{HEX}` escape.
    fn unicode_escape(&mut self, esc_at: usize) -> Result<char, ParseError> {
        let bad = |c: &Self| c.error_at(esc_at, "malformed \\u{HEX} escape in string");
        if self.peek_raw() != Some(b'{') {
            return Err(bad(self));
        }
        self.pos += 1;
        let r = self.rest();
        let n = r.iter().take_while(|c| c.is_ascii_hexdigit()).count();
        if n == 0 || n > 6 || r.get(n) != Some(&b'}') {
            return Err(bad(self));
        }
        let v =
            u32::from_str_radix(&self.src[self.pos..self.pos + n], 16).map_err(|_| bad(self))?;
        self.pos += n + 1;
        char::from_u32(v).ok_or_else(|| bad(self))
    }

    /// Consumes the source text of one dimension expression: everything up to a `,`, `]`, `)`,
    /// `:`, comparison or other delimiter outside parentheses and quoted symbol names, or the
    /// end of the line.
    /// Returns the trimmed text and its start offset.
    pub fn dim_span(&mut self) -> Result<(&'a str, usize), ParseError> {
        self.skip_trivia();
        let start = self.pos;
        let r = self.rest();
        let mut depth = 0usize;
        let mut i = 0;
        while let Some(&c) = r.get(i) {
            match c {
                b'(' => {
                    depth += 1;
                    if depth > MAX_DIM_DEPTH {
                        return Err(
                            self.error_at(start + i, "dimension expression nested too deeply")
                        );
                    }
                }
                b')' if depth == 0 => break,
                b')' => depth -= 1,
                b',' if depth == 0 => break,
                // A quoted symbol name (`"seq len"`), with `\"` and `\\` escapes.
                b'"' => {
                    let mut j = i + 1;
                    loop {
                        match r.get(j) {
                            None => {
                                return Err(
                                    self.error_at(start + i, "unterminated quoted symbol name")
                                )
                            }
                            Some(b'\\') => j += 2,
                            Some(b'"') => break,
                            Some(_) => j += 1,
                        }
                    }
                    i = j;
                }
                b'\n' | b']' | b'[' | b'<' | b'>' | b'=' | b'!' | b':' | b'{' | b'}' | b'%'
                | b'@' | b'#' | b';' => break,
                _ => {}
            }
            i += 1;
        }
        if depth != 0 {
            return Err(self.error_at(start + i, "unbalanced `(` in dimension expression"));
        }
        let s = self.src[start..start + i].trim_end();
        if s.is_empty() {
            return Err(self.error("expected a dimension expression"));
        }
        self.pos = start + i;
        Ok((s, start))
    }
}
