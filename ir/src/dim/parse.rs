//! Parser for the text form of [`DimExpr`] (`FromStr`).
//!
//! Grammar (whitespace allowed between tokens):
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := unary ('*' unary | '//' divisor | '%' divisor)*
//! divisor := unary                      -- must be a positive integer constant
//! unary   := ('-' | '+') unary | primary
//! primary := INT | SYMBOL | '(' expr ')' | FUNC '(' expr (',' expr)* ')'
//! FUNC    := floordiv | mod | min | max -- floordiv/mod take (expr, divisor)
//! SYMBOL  := [A-Za-z_][A-Za-z0-9_]* | '"' (char | '\"' | '\\')* '"'
//! ```
//! Unary minus binds tighter than `*`, `//` and `%` (as in Python: `-7 // 2 = -4`).
//! Function names are only keywords before `(`; elsewhere `min` is a symbol. Nesting deeper
//! than [`MAX_DEPTH`] is rejected rather than overflowing the stack.

use std::str::FromStr;

use super::expr::MAX_PARSED_SIZE;
use super::{DimError, DimExpr, Symbol};

/// Maximum nesting of parentheses, calls and unary signs.
pub(crate) const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

type PResult = Result<DimExpr, DimError>;

impl<'a> Parser<'a> {
    fn err(&self, pos: usize, msg: impl Into<String>) -> DimError {
        DimError::Parse {
            input: self.src.to_string(),
            pos,
            msg: msg.into(),
        }
    }

    /// Turns an arithmetic error at `pos` into a parse error.
    fn arith(&self, pos: usize, r: PResult) -> PResult {
        if let Ok(e) = &r {
            if e.size_exceeds(MAX_PARSED_SIZE) {
                return Err(self.err(
                    pos,
                    format!("expression too large (more than {MAX_PARSED_SIZE} terms and factors)"),
                ));
            }
        }
        r.map_err(|e| match e {
            DimError::NonPositiveDivisor(k) => {
                self.err(pos, format!("divisor must be positive, got {k}"))
            }
            other => self.err(pos, format!("{other}")),
        })
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        self.ws();
        if self.src[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> PResult) -> PResult {
        if self.depth >= MAX_DEPTH {
            return Err(self.err(self.pos, "expression nested too deeply"));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    fn expr(&mut self) -> PResult {
        let mut acc = self.term()?;
        loop {
            let at = self.pos;
            if self.eat("+") {
                let t = self.term()?;
                acc = self.arith(at, acc.checked_add(&t))?;
            } else if self.eat("-") {
                let t = self.term()?;
                acc = self.arith(at, acc.checked_sub(&t))?;
            } else {
                return Ok(acc);
            }
        }
    }

    fn term(&mut self) -> PResult {
        let mut acc = self.unary()?;
        loop {
            self.ws();
            let at = self.pos;
            if self.eat("//") {
                let k = self.divisor()?;
                acc = self.arith(at, acc.floor_div(k))?;
            } else if self.eat("%") {
                let k = self.divisor()?;
                acc = self.arith(at, acc.rem(k))?;
            } else if self.eat("*") {
                let f = self.unary()?;
                acc = self.arith(at, acc.checked_mul(&f))?;
            } else if self.peek() == Some(b'/') {
                return Err(self.err(at, "use `//` for floor division"));
            } else {
                return Ok(acc);
            }
        }
    }

    fn divisor(&mut self) -> Result<i64, DimError> {
        self.ws();
        let at = self.pos;
        match self.unary()?.as_const() {
            Some(k) if k > 0 => Ok(k),
            Some(k) => Err(self.err(at, format!("divisor must be positive, got {k}"))),
            None => Err(self.err(at, "divisor must be an integer constant")),
        }
    }

    fn unary(&mut self) -> PResult {
        self.ws();
        let at = self.pos;
        if self.eat("-") {
            self.ws();
            if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return self.literal(true);
            }
            let e = self.nested(Self::unary)?;
            self.arith(at, e.checked_neg())
        } else if self.eat("+") {
            self.nested(Self::unary)
        } else {
            self.primary()
        }
    }

    fn literal(&mut self, negative: bool) -> PResult {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits = &self.src[start..self.pos];
        let v = digits
            .parse::<i128>()
            .ok()
            .map(|v| if negative { -v } else { v });
        match v.and_then(|v| i64::try_from(v).ok()) {
            Some(v) => Ok(DimExpr::constant(v)),
            None => Err(self.err(start, "integer literal out of range")),
        }
    }

    fn primary(&mut self) -> PResult {
        self.ws();
        let at = self.pos;
        match self.peek() {
            Some(b) if b.is_ascii_digit() => self.literal(false),
            Some(b'(') => {
                self.pos += 1;
                let e = self.nested(Self::expr)?;
                self.expect(")")?;
                Ok(e)
            }
            Some(b'"') => self.quoted(),
            Some(b) if b.is_ascii_alphabetic() || b == b'_' => {
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    self.pos += 1;
                }
                let name = &self.src[at..self.pos];
                let after = self.pos;
                if self.eat("(") {
                    self.nested(|p| p.call(name, at))
                } else {
                    self.pos = after;
                    Ok(DimExpr::symbol(&Symbol::new(name)))
                }
            }
            Some(_) => Err(self.err(at, "expected a number, a symbol, a call or `(`")),
            None => Err(self.err(at, "unexpected end of input")),
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), DimError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.err(self.pos, format!("expected `{s}`")))
        }
    }

    fn quoted(&mut self) -> PResult {
        let start = self.pos;
        let mut name = String::new();
        let mut chars = self.src[start + 1..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos = start + 1 + i + 1;
                    return Ok(DimExpr::symbol(&Symbol::new(&name)));
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => name.push(e),
                    _ => return Err(self.err(start + 1 + i, "bad escape in quoted symbol")),
                },
                c => name.push(c),
            }
        }
        Err(self.err(start, "unterminated quoted symbol"))
    }

    fn call(&mut self, name: &str, at: usize) -> PResult {
        let mut args = vec![self.expr()?];
        while self.eat(",") {
            args.push(self.expr()?);
        }
        self.expect(")")?;
        match name {
            "floordiv" | "mod" => {
                let [x, k] = <[DimExpr; 2]>::try_from(args)
                    .map_err(|_| self.err(at, format!("`{name}` takes 2 arguments")))?;
                let k = match k.as_const() {
                    Some(k) if k > 0 => k,
                    _ => {
                        return Err(
                            self.err(at, format!("`{name}` needs a positive constant divisor"))
                        )
                    }
                };
                let r = if name == "mod" {
                    x.rem(k)
                } else {
                    x.floor_div(k)
                };
                self.arith(at, r)
            }
            "min" => self.arith(at, DimExpr::min_of(&args).unwrap_or(Ok(DimExpr::zero()))),
            "max" => self.arith(at, DimExpr::max_of(&args).unwrap_or(Ok(DimExpr::zero()))),
            _ => Err(self.err(at, format!("unknown function `{name}`"))),
        }
    }
}

impl FromStr for DimExpr {
    type Err = DimError;

    /// Parses the text form (see the module docs), e.g. `"4*B*S + floordiv(S, 2)"`.
    ///
    /// # Errors
    /// [`DimError::Parse`] with the byte offset of the problem; arithmetic problems
    /// (coefficient overflow, a non-positive divisor) are reported as parse errors too.
    fn from_str(s: &str) -> Result<DimExpr, DimError> {
        let mut p = Parser {
            src: s,
            pos: 0,
            depth: 0,
        };
        let e = p.expr()?;
        p.ws();
        if p.pos != s.len() {
            return Err(p.err(p.pos, "unexpected input after the expression"));
        }
        Ok(e)
    }
}
