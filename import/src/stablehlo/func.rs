//! Module-level import: naming `@main`'s dynamic dimensions, inlining `func.call`s, importing
//! blocks and regions, and value bookkeeping ([`Frame`]).

use super::error::ImportError;
use super::mlir_text::{parse_string, parse_tensor_type};
use super::sym::{Elems, SymVal};
use super::{short_loc_in, ImportStats};
use ebb_ir::graph::MAX_IMPORT_REGION_DEPTH;
use ebb_ir::op::Literal;
use ebb_ir::{
    DType, DimExpr, Graph, Node, Op, OpKind, ShapeAssertion, SymbolScope, TensorType, ValueRef,
};
use melior::ir::block::BlockLike;
use melior::ir::operation::OperationLike;
use melior::ir::{BlockRef, Module, OperationRef, RegionLike, RegionRef, Value, ValueLike};
use std::collections::HashMap;

/// What the importer knows of one MLIR value: the graph value holding it, and/or its elements
/// as symbolic integers. At least one is set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entry {
    pub t: Option<ValueRef>,
    pub s: Option<SymVal>,
}

/// Values visible in one function body or region; regions see their parent's symbolic values.
pub(crate) struct Frame<'p> {
    vals: HashMap<usize, Entry>,
    parent: Option<&'p Frame<'p>>,
    /// For an MLIR value that stands for a host value passed around an `optimization_barrier`
    /// (`ops/placement.rs`), a result of that barrier: what a placement reading the value is
    /// ordered after.
    after: HashMap<usize, ValueRef>,
}

impl<'p> Frame<'p> {
    pub fn new(parent: Option<&'p Frame<'p>>) -> Self {
        Frame {
            vals: HashMap::new(),
            parent,
            after: HashMap::new(),
        }
    }

    /// Orders reads of `v` by a placement after the graph value `t`.
    pub fn set_after(&mut self, v: Value, t: ValueRef) {
        self.after.insert(key(v), t);
    }

    /// What a placement reading `v` is ordered after ([`Frame::set_after`]), in this frame.
    pub fn after(&self, v: Value) -> Option<ValueRef> {
        self.after.get(&key(v)).copied()
    }

    pub fn insert(&mut self, v: Value, e: Entry) {
        self.vals.insert(key(v), e);
    }

    /// The entry of `v`; from an enclosing frame only its symbolic part is visible.
    pub fn get(&self, v: Value) -> Option<Entry> {
        if let Some(e) = self.vals.get(&key(v)) {
            return Some(e.clone());
        }
        let mut p = self.parent;
        while let Some(f) = p {
            if let Some(e) = f.vals.get(&key(v)) {
                return Some(Entry {
                    t: None,
                    s: e.s.clone(),
                });
            }
            p = f.parent;
        }
        None
    }

    /// The entry of `v` in this frame only (not its enclosing frames).
    pub fn own(&self, v: Value) -> Option<&Entry> {
        self.vals.get(&key(v))
    }

    pub fn set_tensor(&mut self, v: Value, t: ValueRef) {
        self.vals.entry(key(v)).or_default().t = Some(t);
    }
}

pub(super) fn key(v: Value) -> usize {
    v.to_raw().ptr as usize
}

/// Importer state shared across functions.
pub(crate) struct Importer<'c, 'a> {
    pub file: String,
    funcs: HashMap<String, OperationRef<'c, 'a>>,
    pub scope: SymbolScope,
    pub assertions: Vec<ShapeAssertion>,
    depth: usize,
    /// Regions entered around the op being imported (at most
    /// [`ebb_ir::graph::MAX_IMPORT_REGION_DEPTH`]).
    region_depth: usize,
    /// Counter for fresh data symbols (see `ops::DATA_PREFIX`).
    pub data_syms: usize,
}

pub(crate) type R<T> = Result<T, ImportError>;

pub(crate) fn op_name(op: &OperationRef) -> String {
    op.name()
        .as_string_ref()
        .as_str()
        .unwrap_or("?")
        .to_string()
}

/// The op's location as [`super::short_loc`] prints it, with MLIR's name for the parsed buffer
/// (`-`) replaced by the file's name.
pub(crate) fn op_loc(op: &OperationRef, file: &str) -> String {
    short_loc_in(&op.location().to_string(), file)
}

/// Imports a parsed module (see the parent module docs).
pub(crate) fn import_module(module: &Module, file: &str) -> R<(Graph, ImportStats)> {
    let mut funcs = HashMap::new();
    let mut op = module.body().first_operation();
    while let Some(o) = op {
        if op_name(&o) == "func.func" {
            if let Some(name) = o
                .attribute("sym_name")
                .ok()
                .and_then(|a| parse_string(&a.to_string()))
            {
                funcs.insert(name, o);
            }
        }
        op = o.next_in_block();
    }
    let main = *funcs.get("main").ok_or_else(|| ImportError::Structure {
        file: file.into(),
        msg: "no function @main (is this a jax.export module?)".into(),
    })?;
    let mut imp = Importer {
        file: file.to_string(),
        funcs,
        scope: SymbolScope::new(),
        assertions: Vec::new(),
        depth: 0,
        region_depth: 0,
        data_syms: 0,
    };
    let mut g = Graph::new("main");
    let body = entry_block(&imp, &main)?;
    let names = super::dims::name_dimensions(&body, &imp.funcs);
    let mut frame = Frame::new(None);
    let mut placeholders = 0usize;
    for i in 0..body.argument_count() {
        let arg = body
            .argument(i)
            .map_err(|e| imp.structure(&e.to_string()))?;
        let mt = parse_tensor_type(&arg.r#type().to_string())
            .map_err(|m| imp.structure(&format!("@main argument {i}: {m}")))?;
        let mut shape = Vec::new();
        for (j, d) in mt.dims.iter().enumerate() {
            shape.push(match d {
                Some(k) => DimExpr::constant(*k),
                None => match names.get(&(i, j)) {
                    Some(e) => {
                        for s in e.symbols() {
                            imp.scope.declare(s.name());
                        }
                        e.clone()
                    }
                    None => {
                        placeholders += 1;
                        DimExpr::symbol(&imp.scope.declare(&format!("_arg{i}_d{j}")))
                    }
                },
            });
        }
        let v = g.add_input("", TensorType::new(mt.dtype, shape));
        frame.insert(
            Value::from(arg),
            Entry {
                t: Some(v),
                s: None,
            },
        );
    }
    let results = imp.import_block(&mut g, &mut frame, body)?;
    let mut outs = Vec::new();
    for (v, e) in results {
        outs.push(imp.tensor(&mut g, &mut frame, v, e)?);
    }
    let names = result_names(&main, outs.len());
    g.set_outputs(outs, names);
    g.scope = imp.scope.clone();
    g.assertions = std::mem::take(&mut imp.assertions);
    ebb_ir::verify::verify(&g).map_err(|source| ImportError::Verify {
        file: file.into(),
        source: Box::new(source),
    })?;
    let unresolved_dims = if placeholders == 0 {
        0
    } else {
        count_placeholder_dims(&g)
    };
    Ok((
        g,
        ImportStats {
            unresolved_dims,
            ..Default::default()
        },
    ))
}

fn count_placeholder_dims(g: &Graph) -> usize {
    let mut n = 0;
    for &id in g.order() {
        let node = g.node(id);
        for t in &node.outputs {
            n += t
                .shape
                .iter()
                .filter(|d| d.symbols().iter().any(|s| s.name().starts_with("_arg")))
                .count();
        }
        n += node
            .regions
            .iter()
            .map(count_placeholder_dims)
            .sum::<usize>();
    }
    n
}

/// `jax.result_info` of each result of `func`, or empty strings.
fn result_names(func: &OperationRef, n: usize) -> Vec<String> {
    let mut names = vec![String::new(); n];
    if let Ok(a) = func.attribute("res_attrs") {
        for (i, part) in a.to_string().split("}, {").enumerate().take(n) {
            if let Some(p) = part.find("jax.result_info = ") {
                // The quoted string only: other attributes may follow it
                // (`mhlo.memory_kind = "device"` in modules lowered for a GPU).
                let rest = &part[p + 18..];
                let end = rest
                    .char_indices()
                    .skip(1)
                    .find(|&(i, c)| c == '"' && !rest[..i].ends_with('\\'))
                    .map_or(rest.len(), |(i, _)| i + 1);
                names[i] =
                    parse_string(rest[..end].trim_end_matches(['}', ']'])).unwrap_or_default();
            }
        }
    }
    names
}

fn entry_block<'c, 'a>(imp: &Importer<'c, 'a>, func: &OperationRef<'c, 'a>) -> R<BlockRef<'c, 'a>> {
    func.region(0)
        .ok()
        .and_then(|r| r.first_block())
        .ok_or_else(|| imp.structure("function without a body"))
}

impl<'c, 'a> Importer<'c, 'a> {
    pub fn structure(&self, msg: &str) -> ImportError {
        ImportError::Structure {
            file: self.file.clone(),
            msg: msg.to_string(),
        }
    }

    pub fn op_error(&self, op: &OperationRef, msg: impl Into<String>) -> ImportError {
        ImportError::Op {
            file: self.file.clone(),
            op: op_name(op),
            loc: op_loc(op, &self.file),
            msg: msg.into(),
        }
    }

    /// Imports the ops of `block` into `g`; returns the terminator's operands with their entries.
    pub fn import_block(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        block: BlockRef<'c, 'a>,
    ) -> R<Vec<(Value<'c, 'a>, Entry)>> {
        let mut op = block.first_operation();
        while let Some(o) = op {
            let name = op_name(&o);
            if name == "func.return" || name == "stablehlo.return" {
                let mut out = Vec::new();
                for v in o.operands() {
                    let e = frame
                        .get(v)
                        .ok_or_else(|| self.op_error(&o, "returns an undefined value"))?;
                    out.push((v, e));
                }
                return Ok(out);
            }
            self.import_op(g, frame, o)?;
            op = o.next_in_block();
        }
        Err(self.structure("block without a terminator"))
    }

    /// The graph value of `v`, materializing a symbolic integer value as a `constant` (all
    /// elements constant) or `dim_constant` node when it is used as data.
    pub fn tensor(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        v: Value<'c, 'a>,
        e: Entry,
    ) -> R<ValueRef> {
        if let Some(t) = e.t {
            return Ok(t);
        }
        let Some(s) = e.s else {
            // A region reading an enclosing `constant` (a comparator's NaN or zero, as
            // `jnp.sort` writes it): the constant is imported again into this graph.
            if let Ok(r) = melior::ir::operation::OperationResult::try_from(v) {
                let owner = r.owner();
                if op_name(&owner) == "stablehlo.constant" {
                    self.import_op(g, frame, owner)?;
                    if let Some(e) = frame.own(v).filter(|e| e.t.is_some() || e.s.is_some()) {
                        return self.tensor(g, frame, v, e.clone());
                    }
                }
            }
            return Err(self.structure("value used before it is defined"));
        };
        let ty = TensorType::fixed(s.dtype, &s.shape);
        let node = match &s.elems {
            Elems::Int(vals) if vals.iter().all(|d| d.as_const().is_some()) => {
                let mut data = Vec::new();
                for d in vals {
                    let k = d.as_const().unwrap_or(0);
                    data.extend_from_slice(&k.to_le_bytes()[..s.dtype.size_bytes() as usize]);
                }
                let esz = s.dtype.size_bytes() as usize;
                let splat = data.len() >= esz && data.chunks(esz).all(|c| c == &data[..esz]);
                if splat {
                    data.truncate(esz);
                }
                let lit = Literal {
                    dtype: s.dtype,
                    splat,
                    data,
                };
                Node::new(Op::Constant(lit), vec![ty])
            }
            Elems::Int(vals) => Node::new(Op::DimConstant(vals.clone()), vec![ty]),
            Elems::Bool(preds) => {
                let mut data = Vec::new();
                for p in preds {
                    match p.decide(&self.scope) {
                        Some(b) => data.push(b as u8),
                        None => {
                            return Err(self.structure(&format!(
                                "the shape predicate `{p}` is used as data but cannot be \
                                 decided from the symbols' facts"
                            )))
                        }
                    }
                }
                let lit = Literal {
                    dtype: DType::I1,
                    splat: false,
                    data,
                };
                Node::new(Op::Constant(lit), vec![ty])
            }
        };
        let id = g.add_node(node, &[]);
        let t = ValueRef::new(id, 0);
        frame.set_tensor(v, t);
        Ok(t)
    }

    /// Inlines a `func.call` (`callee_attr` = `callee`) or a `stablehlo.composite` (its
    /// `decomposition`, e.g. `@chlo.sinh.impl`: JAX wraps the `chlo` ops it keeps as
    /// composites with their StableHLO decomposition): imports the function's body into `g`
    /// with the op's operands.
    pub fn inline_call(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        callee_attr: &str,
    ) -> R<()> {
        let callee = op
            .attribute(callee_attr)
            .map(|a| a.to_string())
            .unwrap_or_default();
        let callee = callee.trim_start_matches('@').to_string();
        let func = *self
            .funcs
            .get(&callee)
            .ok_or_else(|| self.op_error(&op, format!("calls unknown function @{callee}")))?;
        if self.depth > 64 {
            return Err(self.op_error(
                &op,
                "call depth exceeds 64 (recursive functions are not supported)",
            ));
        }
        let block = entry_block(self, &func)?;
        let mut inner = Frame::new(None);
        for (i, v) in op.operands().enumerate() {
            let e = frame
                .get(v)
                .ok_or_else(|| self.op_error(&op, "uses an undefined value"))?;
            let arg = block
                .argument(i)
                .map_err(|_| self.op_error(&op, "passes more arguments than the callee takes"))?;
            // Name graph inputs after the callee's parameter locations (`loc("p['w1']")`).
            if let Some(t) = e.t {
                if g.node(t.node).kind() == OpKind::Input && g.input_name(t.node).is_empty() {
                    let l = arg.location().to_string();
                    if let Some(n) = l
                        .strip_prefix("loc(")
                        .and_then(|s| s.strip_suffix(')'))
                        .and_then(parse_string)
                    {
                        if let Op::Input(spec) = &mut g.node_mut(t.node).op {
                            spec.name = n;
                        }
                    }
                }
            }
            inner.insert(Value::from(arg), e);
        }
        self.depth += 1;
        let results = self.import_block(g, &mut inner, block)?;
        self.depth -= 1;
        if results.len() != op.result_count() {
            return Err(self.op_error(&op, "callee returns a different number of results"));
        }
        for (i, (_, e)) in results.into_iter().enumerate() {
            let r = op
                .result(i)
                .map_err(|e| self.op_error(&op, e.to_string()))?;
            frame.insert(Value::from(r), e);
        }
        Ok(())
    }

    /// Imports region `r` as a nested graph whose inputs have types `arg_types` (and, where
    /// given, known symbolic values).
    pub fn import_region(
        &mut self,
        op: &OperationRef<'c, 'a>,
        r: RegionRef<'c, 'a>,
        args: &[(TensorType, Option<SymVal>)],
        parent: &Frame,
        name: &str,
    ) -> R<Graph> {
        self.import_region_capturing(op, r, args, &[], parent, name)
    }

    /// [`Importer::import_region`] for a region that also reads the enclosing values
    /// `captures` (a `case` branch): each becomes a region input after the block arguments,
    /// with the enclosing entry's type and symbolic value.
    pub fn import_region_capturing(
        &mut self,
        op: &OperationRef<'c, 'a>,
        r: RegionRef<'c, 'a>,
        args: &[(TensorType, Option<SymVal>)],
        captures: &[(Value<'c, 'a>, TensorType, Option<SymVal>)],
        parent: &Frame,
        name: &str,
    ) -> R<Graph> {
        let block = r
            .first_block()
            .ok_or_else(|| self.op_error(op, "empty region"))?;
        if block.argument_count() != args.len() {
            return Err(self.op_error(
                op,
                format!(
                    "region has {} arguments, expected {}",
                    block.argument_count(),
                    args.len()
                ),
            ));
        }
        if self.region_depth >= MAX_IMPORT_REGION_DEPTH {
            return Err(self.op_error(
                op,
                format!(
                    "regions nested more than {MAX_IMPORT_REGION_DEPTH} deep (Ebb imports at most \
                     {MAX_IMPORT_REGION_DEPTH} levels of nested regions)"
                ),
            ));
        }
        self.region_depth += 1;
        let g = self.region_body(op, block, args, captures, parent, name);
        self.region_depth -= 1;
        g
    }

    /// The body of [`Importer::import_region_capturing`], one region level deeper.
    fn region_body(
        &mut self,
        op: &OperationRef<'c, 'a>,
        block: BlockRef<'c, 'a>,
        args: &[(TensorType, Option<SymVal>)],
        captures: &[(Value<'c, 'a>, TensorType, Option<SymVal>)],
        parent: &Frame,
        name: &str,
    ) -> R<Graph> {
        let mut g = Graph::new(name);
        let mut frame = Frame::new(Some(parent));
        for (i, (ty, s)) in args.iter().enumerate() {
            let arg = block
                .argument(i)
                .map_err(|e| self.op_error(op, e.to_string()))?;
            let v = g.add_input("", ty.clone());
            frame.insert(
                Value::from(arg),
                Entry {
                    t: Some(v),
                    s: s.clone(),
                },
            );
        }
        for (v, ty, s) in captures {
            let t = g.add_input("", ty.clone());
            frame.insert(
                *v,
                Entry {
                    t: Some(t),
                    s: s.clone(),
                },
            );
        }
        let results = self.import_block(&mut g, &mut frame, block)?;
        let mut outs = Vec::new();
        for (v, e) in results {
            outs.push(self.tensor(&mut g, &mut frame, v, e)?);
        }
        let n = outs.len();
        g.set_outputs(outs, vec![String::new(); n]);
        Ok(g)
    }
}
