//! The parser: [`parse`] reads the textual format described in the [module docs](super) back
//! into a [`Graph`], by recursive descent over a [`Cursor`].
//!
//! Each graph body is read in one pass into a list of pending ops (operands resolved to earlier
//! ops by name), then built: `input` ops first, through [`Graph::add_input`] in the order of
//! their `index` attributes (so [`Graph::inputs`] comes out in argument order even when a
//! schedule moved inputs around), then the other ops through [`Graph::add_node`], and finally
//! the printed program order is restored with [`Graph::set_order`]. Linear time apart from
//! sorting the inputs.

use super::lexer::Cursor;
use super::ParseError;
use crate::dim::{DimError, DimExpr, Symbol, SymbolScope};
use crate::dtype::DType;
use crate::graph::MAX_REGION_DEPTH;
use crate::graph::{Graph, NodeId, Relation, ShapeAssertion, ValueRef};
use crate::op::{Attrs, Op, OpKind};
use crate::types::TensorType;
use crate::Node;
use std::collections::HashMap;

/// Parses a graph printed by [`print()`](super::print()) (or written by hand in the same format).
///
/// Does not run the verifier; call [`crate::verify::verify`] on the result where wanted.
/// Never panics: malformed input gives a [`ParseError`] with the line and column.
pub fn parse(src: &str) -> Result<Graph, ParseError> {
    let mut p = Parser {
        c: Cursor::new(src),
    };
    if !p.c.eat_keyword("graph") {
        return Err(p.c.error("expected `graph` at the start of the text"));
    }
    let name = p.opt_name()?;
    p.c.expect("{", "to open the graph body")?;
    let g = p.body(name, 0)?;
    if !p.c.at_end() {
        return Err(p.c.error("expected end of input after the graph"));
    }
    Ok(g)
}

/// An op read but not yet added to the graph; operands are indices of earlier pending ops.
struct PendingOp {
    op: Op,
    types: Vec<TensorType>,
    operands: Vec<PendingRef>,
    regions: Vec<Graph>,
    loc: Option<String>,
}

/// A value read but not yet built: (index of the pending op, result index).
type PendingRef = (usize, u32);

/// Parses an attribute dictionary `{name = value, ...}` as [`super::print_attrs`] writes it.
/// Errors: [`ParseError`] with line and column; trailing text is an error.
pub fn parse_attrs(src: &str) -> Result<Attrs, ParseError> {
    let mut p = Parser {
        c: Cursor::new(src),
    };
    let a = p.attr_dict()?;
    if !p.c.at_end() {
        return Err(p.c.error("expected end of input after the attributes"));
    }
    Ok(a)
}

/// The recursive-descent parser (its attribute methods are in `attrs.rs`).
pub(super) struct Parser<'a> {
    pub(super) c: Cursor<'a>,
}

impl<'a> Parser<'a> {
    /// An optional `@name` or `@"name"`; "" when absent.
    fn opt_name(&mut self) -> Result<String, ParseError> {
        if !self.c.eat("@") {
            return Ok(String::new());
        }
        if self.c.peek_raw() == Some(b'"') {
            return self.c.string();
        }
        match self.c.ident() {
            Some(id) => Ok(id.to_string()),
            None => Err(self.c.error("expected a name after `@`")),
        }
    }

    /// Statements up to and including `return ...` and the closing `}`.
    fn body(&mut self, name: String, depth: usize) -> Result<Graph, ParseError> {
        let mut scope = SymbolScope::new();
        let mut assertions = Vec::new();
        let mut pending: Vec<PendingOp> = Vec::new();
        let mut names: HashMap<&'a str, usize> = HashMap::new();
        let outputs = loop {
            match self.c.peek() {
                Some(b'%') => {
                    let op = self.op(&mut names, &pending, depth)?;
                    pending.push(op);
                }
                _ if self.c.eat_keyword("symbols") => self.symbols(&mut scope)?,
                _ if self.c.eat_keyword("assert") => assertions.push(self.assertion()?),
                _ if self.c.eat_keyword("return") => break self.ret(&names, &pending)?,
                _ if self.c.eat_keyword("fact") => self.fact(&mut scope)?,
                _ => {
                    return Err(self.c.error(
                        "expected an op (`%N = ...`), `symbols`, `fact`, `assert` or `return`",
                    ))
                }
            }
        };
        self.c
            .expect("}", "after `return` to close the graph body")?;
        Ok(build(name, scope, assertions, pending, outputs))
    }

    /// `%name` and an optional `#k`, resolved against the ops read so far.
    fn value_ref(
        &mut self,
        names: &HashMap<&'a str, usize>,
        pending: &[PendingOp],
    ) -> Result<PendingRef, ParseError> {
        let at = self.c.here();
        if !self.c.eat("%") {
            return Err(self.c.error("expected a value (`%N`)"));
        }
        let name = self
            .c
            .value_name()
            .ok_or_else(|| self.c.error("expected a value name after `%`"))?;
        let &idx = names.get(name).ok_or_else(|| {
            self.c
                .error_at(at, format!("use of undefined value `%{name}`"))
        })?;
        let nres = pending[idx].types.len();
        if self.c.peek_raw() == Some(b'#') {
            self.c.eat("#");
            let k_at = self.c.here();
            let k = self.c.int("a result index")?;
            if k < 0 || k as usize >= nres {
                return Err(self.c.error_at(
                    k_at,
                    format!("`%{name}` has {nres} results, no result #{k}"),
                ));
            }
            return Ok((idx, k as u32));
        }
        if nres != 1 {
            return Err(self.c.error_at(
                at,
                format!("`%{name}` has {nres} results; name one as `%{name}#k`"),
            ));
        }
        Ok((idx, 0))
    }

    /// `%name[:k] = op[(operands)] [{attrs}] : types [{ regions }] [loc("...")]`.
    fn op(
        &mut self,
        names: &mut HashMap<&'a str, usize>,
        pending: &[PendingOp],
        depth: usize,
    ) -> Result<PendingOp, ParseError> {
        let at = self.c.here();
        self.c.eat("%");
        let name = self
            .c
            .value_name()
            .ok_or_else(|| self.c.error("expected a value name after `%`"))?;
        let mut nres = 1usize;
        if self.c.eat(":") {
            let n_at = self.c.here();
            nres = usize::try_from(self.c.int("the number of results")?).map_err(|_| {
                self.c
                    .error_at(n_at, "the number of results cannot be negative")
            })?;
        }
        self.c.expect("=", "after the result name")?;
        let kind_at = self.c.here();
        let op_name = self
            .c
            .ident()
            .ok_or_else(|| self.c.error("expected an op name"))?;
        let kind = OpKind::from_name(op_name.strip_prefix("stablehlo.").unwrap_or(op_name))
            .ok_or_else(|| self.c.error_at(kind_at, format!("unknown op `{op_name}`")))?;
        let mut operands = Vec::new();
        if self.c.eat("(") && !self.c.eat(")") {
            loop {
                operands.push(self.value_ref(names, pending)?);
                if !self.c.eat(",") {
                    break;
                }
            }
            self.c.expect(")", "to close the operand list")?;
        }
        let attrs_at = self.c.here();
        let attrs = if self.c.peek() == Some(b'{') {
            self.attr_dict()?
        } else {
            Attrs::new()
        };
        self.c.expect(":", "before the result types")?;
        let types = self.types()?;
        if types.len() != nres {
            return Err(self.c.error_at(
                at,
                format!(
                    "`%{name}` declares {nres} results but {} types",
                    types.len()
                ),
            ));
        }
        let mut regions = Vec::new();
        if self.c.eat("{") {
            while self.c.eat_keyword("region") {
                if depth + 1 > MAX_REGION_DEPTH {
                    return Err(self.c.error(format!(
                        "regions nested more than {MAX_REGION_DEPTH} deep (at most \
                         {MAX_REGION_DEPTH} levels are accepted)"
                    )));
                }
                let rname = self.opt_name()?;
                self.c.expect("{", "to open the region body")?;
                regions.push(self.body(rname, depth + 1)?);
            }
            self.c
                .expect("}", "to close the regions of the op (or `region`)")?;
        }
        let mut loc = None;
        if self.c.eat_keyword("loc") {
            self.c.expect("(", "after `loc`")?;
            loc = Some(self.c.string()?);
            self.c.expect(")", "to close `loc(`")?;
        }
        let op =
            Op::from_attrs(kind, attrs).map_err(|e| self.c.error_at(attrs_at, e.to_string()))?;
        if kind == OpKind::Input
            && (!operands.is_empty() || !regions.is_empty() || types.len() != 1)
        {
            return Err(self.c.error_at(
                at,
                "an `input` op has no operands or regions and exactly one result",
            ));
        }
        if names.insert(name, pending.len()).is_some() {
            return Err(self
                .c
                .error_at(at, format!("value `%{name}` is defined twice")));
        }
        Ok(PendingOp {
            op,
            types,
            operands,
            regions,
            loc,
        })
    }

    /// `[d, d, ...]` of dimension expressions (also the shape of a tensor type).
    pub(super) fn dims_list(&mut self) -> Result<Vec<DimExpr>, ParseError> {
        self.c.expect("[", "to open a list of dimensions")?;
        let mut v = Vec::new();
        if self.c.eat("]") {
            return Ok(v);
        }
        loop {
            v.push(self.dim()?);
            if !self.c.eat(",") {
                break;
            }
        }
        self.c.expect("]", "to close the list of dimensions")?;
        Ok(v)
    }

    /// One dimension expression, parsed by `DimExpr`'s `FromStr`.
    fn dim(&mut self) -> Result<DimExpr, ParseError> {
        let (s, at) = self.c.dim_span()?;
        s.parse::<DimExpr>().map_err(|e| match e {
            DimError::Parse { pos, msg, .. } => self.c.error_at(
                at + pos.min(s.len()),
                format!("in dimension expression `{s}`: {msg}"),
            ),
            e => self
                .c
                .error_at(at, format!("in dimension expression `{s}`: {e}")),
        })
    }

    /// `()` or `type, type, ...`.
    fn types(&mut self) -> Result<Vec<TensorType>, ParseError> {
        if self.c.eat("(") {
            self.c
                .expect(")", "after `(` (an op without results has types `()`)")?;
            return Ok(Vec::new());
        }
        let mut v = vec![self.tensor_type()?];
        while self.c.eat(",") {
            v.push(self.tensor_type()?);
        }
        Ok(v)
    }

    /// `dtype[d, ...]`.
    fn tensor_type(&mut self) -> Result<TensorType, ParseError> {
        let dtype = self.dtype()?;
        Ok(TensorType::new(dtype, self.dims_list()?))
    }

    pub(super) fn dtype(&mut self) -> Result<DType, ParseError> {
        let at = self.c.here();
        let w = self
            .c
            .ident()
            .ok_or_else(|| self.c.error("expected an element type"))?;
        w.parse::<DType>()
            .map_err(|e| self.c.error_at(at, e.to_string()))
    }

    /// `symbols NAME [in RANGE], ...`.
    fn symbols(&mut self, scope: &mut SymbolScope) -> Result<(), ParseError> {
        loop {
            let name = self.symbol_name()?;
            // Exactly the printed range: no range means unbounded, not `declare`'s `>= 1`.
            let sym = scope.declare_range(&name, None, None);
            if self.c.eat_keyword("in") {
                let lo = if self.c.eat("(") {
                    self.c
                        .expect("-inf", "after `(` (a finite lower bound is written `[lo`)")?;
                    None
                } else {
                    self.c.expect("[", "to open the range")?;
                    Some(self.c.int("the lower bound")?)
                };
                self.c.expect(",", "between the bounds of the range")?;
                let hi = if self.c.eat_keyword("inf") {
                    self.c
                        .expect(")", "after `inf` (a finite upper bound is written `hi]`)")?;
                    None
                } else {
                    let hi = self.c.int("the upper bound")?;
                    self.c.expect("]", "to close the range")?;
                    Some(hi)
                };
                scope.set_range(&sym, lo, hi);
            }
            if !self.c.eat(",") {
                return Ok(());
            }
        }
    }

    /// After `fact`: `NAME % K == 0` or `NAME == DIM`.
    fn fact(&mut self, scope: &mut SymbolScope) -> Result<(), ParseError> {
        let sym = Symbol::new(&self.symbol_name()?);
        if self.c.eat("==") {
            let e = self.dim()?;
            scope.add_equality(&sym, e);
            return Ok(());
        }
        self.c.expect("%", "or `==` after the symbol of a fact")?;
        let k = self.c.int("the divisor")?;
        self.c.expect("==", "in `% k == 0`")?;
        let z_at = self.c.here();
        if self.c.int("zero")? != 0 {
            return Err(self
                .c
                .error_at(z_at, "a divisibility fact is written `S % k == 0`"));
        }
        scope.add_divisible(&sym, k);
        Ok(())
    }

    /// A symbol name: an identifier or a quoted string.
    fn symbol_name(&mut self) -> Result<String, ParseError> {
        if self.c.peek() == Some(b'"') {
            return self.c.string();
        }
        self.c
            .ident()
            .map(str::to_string)
            .ok_or_else(|| self.c.error("expected a symbol name"))
    }

    /// After `assert`: `LHS REL RHS : "message"`.
    fn assertion(&mut self) -> Result<ShapeAssertion, ParseError> {
        let lhs = self.dim()?;
        let rel = if self.c.eat("==") {
            Relation::Eq
        } else if self.c.eat("!=") {
            Relation::Ne
        } else if self.c.eat(">=") {
            Relation::Ge
        } else if self.c.eat("<=") {
            Relation::Le
        } else if self.c.eat(">") {
            Relation::Gt
        } else if self.c.eat("<") {
            Relation::Lt
        } else {
            return Err(self
                .c
                .error("expected a comparison (`==`, `!=`, `>=`, `>`, `<=`, `<`)"));
        };
        let rhs = self.dim()?;
        self.c.expect(":", "before the assertion message")?;
        let message = self.c.string()?;
        Ok(ShapeAssertion {
            lhs,
            rel,
            rhs,
            message,
        })
    }

    /// After `return`: `[%v [as "name"], ...]`.
    fn ret(
        &mut self,
        names: &HashMap<&'a str, usize>,
        pending: &[PendingOp],
    ) -> Result<Vec<(PendingRef, String)>, ParseError> {
        let mut outs = Vec::new();
        if self.c.peek() != Some(b'%') {
            return Ok(outs);
        }
        loop {
            let v = self.value_ref(names, pending)?;
            let name = if self.c.eat_keyword("as") {
                self.c.string()?
            } else {
                String::new()
            };
            outs.push((v, name));
            if !self.c.eat(",") {
                return Ok(outs);
            }
        }
    }
}

/// Builds the graph from the pending ops (see the module docs).
fn build(
    name: String,
    scope: SymbolScope,
    assertions: Vec<ShapeAssertion>,
    pending: Vec<PendingOp>,
    outputs: Vec<(PendingRef, String)>,
) -> Graph {
    let mut g = Graph::new(&name);
    g.scope = scope;
    g.assertions = assertions;
    let mut ids: Vec<Option<NodeId>> = vec![None; pending.len()];
    let mut inputs: Vec<usize> = (0..pending.len())
        .filter(|&i| pending[i].op.kind() == OpKind::Input)
        .collect();
    let index_of = |p: &PendingOp| match &p.op {
        Op::Input(s) => s.index,
        _ => usize::MAX,
    };
    inputs.sort_by_key(|&i| (index_of(&pending[i]), i));
    let mut pending: Vec<Option<PendingOp>> = pending.into_iter().map(Some).collect();
    for i in inputs {
        let Some(p) = pending[i].take() else { continue };
        let ty = p
            .types
            .into_iter()
            .next()
            .unwrap_or_else(|| TensorType::scalar(DType::F32));
        let v = g.add_input("", ty);
        let n = g.node_mut(v.node);
        n.op = p.op;
        n.loc = p.loc;
        ids[i] = Some(v.node);
    }
    for i in 0..pending.len() {
        let Some(p) = pending[i].take() else { continue };
        // Operands refer to earlier ops, which are all built by now.
        let operands: Vec<ValueRef> = p
            .operands
            .iter()
            .filter_map(|&(j, k)| ids[j].map(|id| ValueRef::new(id, k)))
            .collect();
        let node = Node {
            op: p.op,
            outputs: p.types,
            regions: p.regions,
            loc: p.loc,
        };
        ids[i] = Some(g.add_node(node, &operands));
    }
    let order: Vec<NodeId> = ids.iter().flatten().copied().collect();
    g.set_order(order);
    let (outs, out_names): (Vec<ValueRef>, Vec<String>) = outputs
        .into_iter()
        .filter_map(|((j, k), n)| ids[j].map(|id| (ValueRef::new(id, k), n)))
        .unzip();
    g.set_outputs(outs, out_names);
    g
}
