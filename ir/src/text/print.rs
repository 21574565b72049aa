//! The printer: [`print`] writes a [`Graph`] in the textual format described in the
//! [module docs](super). Output is deterministic (program order, attributes sorted by name,
//! symbols in declaration order) and built in one `String` in a single pass (linear time).

use super::lexer::is_ident;
use crate::dim::{Symbol, SymbolScope};
use crate::dtype::DType;
use crate::graph::{Graph, NodeId, ValueRef};
use crate::op::{Attr, Attrs, Literal};
use std::collections::HashMap;
use std::fmt::Write;

/// Prints `g` in the textual IR format (see the [module docs](super)).
///
/// Never panics, even on a graph that does not verify: dangling references print as `%?N`
/// (which the parser rejects) and removed nodes in the program order print as comments.
pub fn print(g: &Graph) -> String {
    let mut p = Printer {
        out: String::with_capacity(64 * (g.order().len() + 4)),
    };
    p.out.push_str("graph");
    p.name(&g.name);
    p.out.push_str(" {\n");
    p.body(g, 1);
    p.out.push_str("}\n");
    p.out
}

/// Prints an attribute dictionary `{name = value, ...}` in the textual IR's value syntax (the
/// form of an op's payload, [`crate::Op::to_attrs`]); [`super::parse_attrs`] reads it back.
pub fn print_attrs(attrs: &Attrs) -> String {
    let mut p = Printer { out: String::new() };
    p.attr_dict(attrs);
    p.out
}

struct Printer {
    out: String,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Printer {
    fn indent(&mut self, level: usize) {
        for _ in 0..level {
            self.out.push_str("  ");
        }
    }

    /// ` @name` (bare when an identifier, quoted otherwise); nothing for an empty name.
    fn name(&mut self, name: &str) {
        if name.is_empty() {
            return;
        }
        self.out.push_str(" @");
        if is_ident(name) {
            self.out.push_str(name);
        } else {
            self.string(name);
        }
    }

    /// A quoted string with `\" \\ \n \t \r` and `\u{HEX}` (other control characters) escapes.
    fn string(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\t' => self.out.push_str("\\t"),
                '\r' => self.out.push_str("\\r"),
                c if c.is_control() => {
                    let _ = write!(self.out, "\\u{{{:x}}}", c as u32);
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    /// The body of a graph or region: facts, assertions, ops and `return`, at `level`.
    fn body(&mut self, g: &Graph, level: usize) {
        self.scope(&g.scope, level);
        for a in &g.assertions {
            self.indent(level);
            let _ = write!(
                self.out,
                "assert {} {} {} : ",
                a.lhs,
                rel_symbol(a.rel),
                a.rhs
            );
            self.string(&a.message);
            self.out.push('\n');
        }
        let order = g.order();
        let numbers: HashMap<NodeId, usize> =
            order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
        for (i, &id) in order.iter().enumerate() {
            self.indent(level);
            if !g.contains(id) {
                let _ = writeln!(self.out, "// %{i}: removed node {}", id.index());
                continue;
            }
            self.op(g, &numbers, i, id, level);
        }
        self.indent(level);
        self.out.push_str("return");
        for (k, &v) in g.outputs().iter().enumerate() {
            self.out.push_str(if k == 0 { " " } else { ", " });
            self.value(g, &numbers, v);
            if let Some(name) = g.output_names.get(k).filter(|n| !n.is_empty()) {
                self.out.push_str(" as ");
                self.string(name);
            }
        }
        self.out.push('\n');
    }

    /// `symbols ...` and `fact` lines (divisibility, then equalities in the order given) for a
    /// non-empty scope. Divisibility is printed as the lcm of the symbol's divisors.
    fn scope(&mut self, scope: &SymbolScope, level: usize) {
        let symbols = scope.symbols();
        if symbols.is_empty() {
            return;
        }
        self.indent(level);
        self.out.push_str("symbols ");
        for (k, s) in symbols.iter().enumerate() {
            if k > 0 {
                self.out.push_str(", ");
            }
            self.symbol(s);
            match scope.range(s) {
                (None, None) => {}
                (lo, hi) => {
                    self.out.push_str(" in ");
                    match lo {
                        Some(lo) => {
                            let _ = write!(self.out, "[{lo}, ");
                        }
                        None => self.out.push_str("(-inf, "),
                    }
                    match hi {
                        Some(hi) => {
                            let _ = write!(self.out, "{hi}]");
                        }
                        None => self.out.push_str("inf)"),
                    }
                }
            }
        }
        self.out.push('\n');
        for s in &symbols {
            let k = scope.divisor_of(s);
            if k > 1 {
                self.indent(level);
                self.out.push_str("fact ");
                self.symbol(s);
                let _ = writeln!(self.out, " % {k} == 0");
            }
        }
        for (s, e) in scope.equalities() {
            self.indent(level);
            self.out.push_str("fact ");
            self.symbol(s);
            let _ = writeln!(self.out, " == {e}");
        }
    }

    /// A symbol name: bare when an identifier, quoted otherwise (as inside dimension expressions).
    fn symbol(&mut self, s: &Symbol) {
        if s.is_identifier() {
            self.out.push_str(s.name());
        } else {
            self.string(s.name());
        }
    }

    /// A value reference: `%N` for the only result of an op, `%N#k` otherwise.
    fn value(&mut self, g: &Graph, numbers: &HashMap<NodeId, usize>, v: ValueRef) {
        match numbers.get(&v.node) {
            Some(n) if g.contains(v.node) && v.output == 0 && g.node(v.node).outputs.len() == 1 => {
                let _ = write!(self.out, "%{n}");
            }
            Some(n) => {
                let _ = write!(self.out, "%{n}#{}", v.output);
            }
            None => {
                let _ = write!(self.out, "%?{}#{}", v.node.index(), v.output);
            }
        }
    }

    /// One op line (and its regions), without the leading indentation.
    fn op(
        &mut self,
        g: &Graph,
        numbers: &HashMap<NodeId, usize>,
        i: usize,
        id: NodeId,
        level: usize,
    ) {
        let n = g.node(id);
        let _ = write!(self.out, "%{i}");
        if n.outputs.len() != 1 {
            let _ = write!(self.out, ":{}", n.outputs.len());
        }
        let _ = write!(self.out, " = {}", n.kind().name());
        let operands = g.operands(id);
        if !operands.is_empty() {
            self.out.push('(');
            for (k, &v) in operands.iter().enumerate() {
                if k > 0 {
                    self.out.push_str(", ");
                }
                self.value(g, numbers, v);
            }
            self.out.push(')');
        }
        let attrs = n.op.to_attrs();
        if !attrs.is_empty() {
            self.out.push(' ');
            self.attr_dict(&attrs);
        }
        self.out.push_str(" : ");
        if n.outputs.is_empty() {
            self.out.push_str("()");
        }
        for (k, t) in n.outputs.iter().enumerate() {
            if k > 0 {
                self.out.push_str(", ");
            }
            let _ = write!(self.out, "{t}");
        }
        if !n.regions.is_empty() {
            self.out.push_str(" {\n");
            for r in &n.regions {
                self.indent(level + 1);
                self.out.push_str("region");
                self.name(&r.name);
                self.out.push_str(" {\n");
                self.body(r, level + 2);
                self.indent(level + 1);
                self.out.push_str("}\n");
            }
            self.indent(level);
            self.out.push('}');
        }
        if let Some(loc) = &n.loc {
            self.out.push_str(" loc(");
            self.string(loc);
            self.out.push(')');
        }
        self.out.push('\n');
    }

    /// `{name = value, ...}`, names sorted.
    fn attr_dict(&mut self, attrs: &Attrs) {
        self.out.push('{');
        for (k, (name, a)) in attrs.iter().enumerate() {
            if k > 0 {
                self.out.push_str(", ");
            }
            if is_ident(name) {
                self.out.push_str(name);
            } else {
                self.string(name);
            }
            self.out.push_str(" = ");
            self.attr(a);
        }
        self.out.push('}');
    }

    fn attr(&mut self, a: &Attr) {
        match a {
            Attr::I64(v) => {
                let _ = write!(self.out, "{v}");
            }
            Attr::Ints(vs) => {
                self.out.push('[');
                for (k, v) in vs.iter().enumerate() {
                    let _ = write!(self.out, "{}{v}", if k > 0 { ", " } else { "" });
                }
                self.out.push(']');
            }
            Attr::Dims(ds) => {
                self.out.push_str("dims[");
                for (k, d) in ds.iter().enumerate() {
                    let _ = write!(self.out, "{}{d}", if k > 0 { ", " } else { "" });
                }
                self.out.push(']');
            }
            Attr::Str(s) => self.string(s),
            Attr::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Attr::F64(v) => self.float(*v),
            Attr::DType(d) => self.out.push_str(d.name()),
            Attr::Literal(l) => self.literal(l),
        }
    }

    /// An f64 that parses back to the same value: `{:?}` (always with `.` or an exponent),
    /// `nan`, `inf`, `-inf`.
    fn float(&mut self, v: f64) {
        if v.is_nan() {
            self.out.push_str("nan");
        } else if v.is_infinite() {
            self.out.push_str(if v > 0.0 { "inf" } else { "-inf" });
        } else {
            let _ = write!(self.out, "{v:?}");
        }
    }

    /// `dense<SCALAR> : dtype` for a splat, `dense<"0xHEX"> : dtype` otherwise.
    fn literal(&mut self, l: &Literal) {
        let size = l.dtype.size_bytes() as usize;
        self.out.push_str("dense<");
        if l.splat && l.data.len() == size {
            self.splat_scalar(l.dtype, &l.data);
        } else {
            if l.splat {
                self.out.push_str("splat ");
            }
            self.out.push_str("\"0x");
            self.out.reserve(2 * l.data.len());
            for &b in &l.data {
                self.out.push(HEX[(b >> 4) as usize] as char);
                self.out.push(HEX[(b & 15) as usize] as char);
            }
            self.out.push('"');
        }
        let _ = write!(self.out, "> : {}", l.dtype);
    }

    /// One element: floats with `{:?}` (NaN, bf16 and f16 as `0x` raw bits), integers in decimal.
    fn splat_scalar(&mut self, dtype: DType, b: &[u8]) {
        let mut raw = [0u8; 8];
        raw[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
        let bits = u64::from_le_bytes(raw);
        let _ = match dtype {
            DType::F32 if !f32::from_bits(bits as u32).is_nan() => {
                write!(self.out, "{:?}", f32::from_bits(bits as u32))
            }
            DType::F64 if !f64::from_bits(bits).is_nan() => {
                write!(self.out, "{:?}", f64::from_bits(bits))
            }
            DType::F32 => write!(self.out, "0x{bits:08x}"),
            DType::F64 => write!(self.out, "0x{bits:016x}"),
            DType::BF16 | DType::F16 => write!(self.out, "0x{bits:04x}"),
            DType::I1 | DType::U8 | DType::U32 | DType::U64 => write!(self.out, "{bits}"),
            DType::I8 => write!(self.out, "{}", bits as u8 as i8),
            DType::I16 => write!(self.out, "{}", bits as u16 as i16),
            DType::I32 => write!(self.out, "{}", bits as u32 as i32),
            DType::I64 => write!(self.out, "{}", bits as i64),
        };
    }
}

/// The comparison symbol of a relation in `assert` lines.
pub(crate) fn rel_symbol(r: crate::graph::Relation) -> &'static str {
    use crate::graph::Relation::*;
    match r {
        Eq => "==",
        Ne => "!=",
        Ge => ">=",
        Gt => ">",
        Le => "<=",
        Lt => "<",
    }
}
