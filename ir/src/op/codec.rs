//! The attribute codec: an [`Op`] as the named-attribute dictionary of the textual IR
//! ([`Op::to_attrs`]) and back ([`Op::from_attrs`]). This is the only module that knows
//! attribute names; the names are the StableHLO spec's.
//!
//! Printing is canonical: optional lists that hold only their defaults are left out (empty
//! batching dimensions of `dot_general`/`gather`/`scatter`, unit window strides and dilations,
//! zero window padding), so `from_attrs(to_attrs(op)) == op` and
//! `to_attrs(from_attrs(a)) == to_attrs(from_attrs(to_attrs(from_attrs(a))))`.
//! Parsing is strict: a missing required attribute, an attribute of the wrong kind, an unknown
//! attribute name, an unparsable enum spelling, or list lengths that disagree with each other
//! are errors naming the op and the attribute.

use super::attr::{Attr, AttrError, Attrs};
use super::schema::*;
use super::{Op, OpKind};
use crate::dim::DimExpr;
use crate::dtype::DType;
use crate::graph::Relation;

impl Op {
    /// The op's payload as a named-attribute dictionary (see the module docs).
    pub fn to_attrs(&self) -> Attrs {
        let mut a = Attrs::new();
        let mut put = |k: &str, v: Attr| {
            a.insert(k.to_string(), v);
        };
        let ints = |v: &[i64]| Attr::Ints(v.to_vec());
        let dims = |v: &[DimExpr]| Attr::Dims(v.to_vec());
        match self {
            Op::Input(s) => {
                put("index", Attr::I64(s.index as i64));
                put("name", Attr::Str(s.name.clone()));
                if let Some(k) = s.aliasing_output {
                    put("aliasing_output", Attr::I64(k as i64));
                }
            }
            Op::Constant(l) => put("value", Attr::Literal(l.clone())),
            Op::DimConstant(v) => put("values", dims(v)),
            Op::Convert(d) | Op::BitcastConvert(d) => put("dtype", Attr::DType(*d)),
            Op::ReducePrecision(r) => {
                put("exponent_bits", Attr::I64(r.exponent_bits.into()));
                put("mantissa_bits", Attr::I64(r.mantissa_bits.into()));
            }
            Op::Fusion(k) => put("kind", Attr::Str(k.name().into())),
            Op::Compare(c) => {
                put("comparison_direction", Attr::Str(c.direction.name().into()));
                if let Some(t) = c.compare_type {
                    put("compare_type", Attr::Str(t.name().into()));
                }
            }
            Op::BroadcastInDim(b) => {
                put("broadcast_dimensions", ints(&b.dims));
                put("shape", dims(&b.shape));
            }
            Op::Reshape(s) => put("shape", dims(s)),
            Op::Transpose(p) => put("permutation", ints(p)),
            Op::Concatenate(d) => put("dimension", Attr::I64(*d)),
            Op::Slice(s) => {
                put("start_indices", dims(&s.start));
                put("limit_indices", dims(&s.limit));
                put("strides", dims(&s.strides));
            }
            Op::DynamicSlice(s) => put("slice_sizes", dims(s)),
            Op::Pad(p) => {
                put("edge_padding_low", ints(&p.low));
                put("edge_padding_high", ints(&p.high));
                put("interior_padding", ints(&p.interior));
            }
            Op::Reverse(d) | Op::Reduce(d) => put("dimensions", ints(d)),
            Op::RngBitGenerator(r) => {
                put("rng_algorithm", Attr::Str(r.algorithm.name().into()));
                put("shape", dims(&r.shape));
                put("dtype", Attr::DType(r.dtype));
            }
            Op::Iota(i) => {
                put("iota_dimension", Attr::I64(i.dimension));
                put("shape", dims(&i.shape));
                put("dtype", Attr::DType(i.dtype));
            }
            Op::ReduceWindow(w) | Op::SelectAndScatter(w) => {
                // Constant sizes and padding print as integer lists (the form before they
                // could be symbolic), symbolic ones as `dims[..]`.
                put(
                    "window_dimensions",
                    match w.static_dimensions() {
                        Some(v) => ints(&v),
                        None => dims(&w.dimensions),
                    },
                );
                for (k, v) in [
                    ("window_strides", &w.strides),
                    ("base_dilations", &w.base_dilations),
                    ("window_dilations", &w.window_dilations),
                ] {
                    if v.iter().any(|&x| x != 1) {
                        put(k, ints(v));
                    }
                }
                match w.static_padding() {
                    Some(p) if p.iter().all(|&x| x == (0, 0)) => {}
                    Some(p) => put("padding", Attr::Ints(flatten(&p))),
                    None => put(
                        "padding",
                        Attr::Dims(
                            w.padding
                                .iter()
                                .flat_map(|(l, h)| [l.clone(), h.clone()])
                                .collect(),
                        ),
                    ),
                }
            }
            Op::DotGeneral(d) => {
                if !d.lhs_batch.is_empty() || !d.rhs_batch.is_empty() {
                    put("lhs_batching_dimensions", ints(&d.lhs_batch));
                    put("rhs_batching_dimensions", ints(&d.rhs_batch));
                }
                put("lhs_contracting_dimensions", ints(&d.lhs_contract));
                put("rhs_contracting_dimensions", ints(&d.rhs_contract));
                if let Some(t) = d.result_dtype {
                    put("dtype", Attr::DType(t));
                }
            }
            Op::Convolution(c) => {
                put("dimension_numbers", Attr::Str(c.dims.to_string()));
                put("window_strides", ints(&c.window_strides));
                put("padding", Attr::Ints(flatten(&c.padding)));
                put("lhs_dilation", ints(&c.lhs_dilation));
                put("rhs_dilation", ints(&c.rhs_dilation));
                put("feature_group_count", Attr::I64(c.feature_group_count));
                put("batch_group_count", Attr::I64(c.batch_group_count));
                if let Some(t) = c.result_dtype {
                    put("dtype", Attr::DType(t));
                }
            }
            Op::Gather(g) => {
                for (k, v) in [
                    ("offset_dims", &g.offset_dims),
                    ("collapsed_slice_dims", &g.collapsed_slice_dims),
                    ("operand_batching_dims", &g.operand_batching_dims),
                    (
                        "start_indices_batching_dims",
                        &g.start_indices_batching_dims,
                    ),
                    ("start_index_map", &g.start_index_map),
                ] {
                    if !v.is_empty() {
                        put(k, ints(v));
                    }
                }
                put("index_vector_dim", Attr::I64(g.index_vector_dim));
                put("slice_sizes", dims(&g.slice_sizes));
                put("indices_are_sorted", Attr::Bool(g.indices_are_sorted));
            }
            Op::Scatter(s) => {
                for (k, v) in [
                    ("update_window_dims", &s.update_window_dims),
                    ("inserted_window_dims", &s.inserted_window_dims),
                    ("input_batching_dims", &s.input_batching_dims),
                    (
                        "scatter_indices_batching_dims",
                        &s.scatter_indices_batching_dims,
                    ),
                    (
                        "scatter_dims_to_operand_dims",
                        &s.scatter_dims_to_operand_dims,
                    ),
                ] {
                    if !v.is_empty() {
                        put(k, ints(v));
                    }
                }
                put("index_vector_dim", Attr::I64(s.index_vector_dim));
                put("indices_are_sorted", Attr::Bool(s.indices_are_sorted));
                put("unique_indices", Attr::Bool(s.unique_indices));
            }
            Op::Sort(s) => {
                put("dimension", Attr::I64(s.dimension));
                put("is_stable", Attr::Bool(s.is_stable));
            }
            Op::AnnotateDevicePlacement(k) => put("memory_kind", Attr::Str(k.name().into())),
            Op::CustomCall(c) => {
                put("call_target_name", Attr::Str(c.target.clone()));
                if let Some(b) = &c.backend_config {
                    put("backend_config", Attr::Str(b.clone()));
                }
                if c.has_side_effect {
                    put("has_side_effect", Attr::Bool(true));
                }
            }
            _ => {}
        }
        a
    }

    /// Parses and validates the payload of a `kind` op from its attribute dictionary (see the
    /// module docs). Errors: [`AttrError`] naming the op and the attribute.
    pub fn from_attrs(kind: OpKind, attrs: Attrs) -> Result<Op, AttrError> {
        let mut r = Reader { kind, attrs };
        let op = r.op()?;
        if let Some(name) = r.attrs.keys().next() {
            return Err(r.err(name, "is not an attribute of this op"));
        }
        Ok(op)
    }
}

fn flatten(p: &[(i64, i64)]) -> Vec<i64> {
    p.iter().flat_map(|&(l, h)| [l, h]).collect()
}

/// Takes attributes out of the dictionary, so that what is left over is unknown.
struct Reader {
    kind: OpKind,
    attrs: Attrs,
}

impl Reader {
    fn err(&self, name: &str, problem: &str) -> AttrError {
        AttrError {
            op: self.kind.name().into(),
            name: name.into(),
            problem: problem.into(),
        }
    }

    fn take(&mut self, name: &str) -> Result<Attr, AttrError> {
        self.attrs
            .remove(name)
            .ok_or_else(|| self.err(name, "is missing"))
    }

    fn opt(&mut self, name: &str) -> Option<Attr> {
        self.attrs.remove(name)
    }

    fn int(&mut self, name: &str) -> Result<i64, AttrError> {
        match self.take(name)? {
            Attr::I64(v) => Ok(v),
            _ => Err(self.err(name, "is not an integer")),
        }
    }

    fn opt_int(&mut self, name: &str) -> Result<Option<i64>, AttrError> {
        match self.opt(name) {
            None => Ok(None),
            Some(Attr::I64(v)) => Ok(Some(v)),
            Some(_) => Err(self.err(name, "is not an integer")),
        }
    }

    fn int_or(&mut self, name: &str, default: i64) -> Result<i64, AttrError> {
        Ok(self.opt_int(name)?.unwrap_or(default))
    }

    fn ints(&mut self, name: &str) -> Result<Vec<i64>, AttrError> {
        match self.take(name)? {
            Attr::Ints(v) => Ok(v),
            _ => Err(self.err(name, "is not a list of integers")),
        }
    }

    /// An `Ints` list, or `default` repeated `n` times when missing or empty; other lengths
    /// than `n` are errors.
    fn ints_n(&mut self, name: &str, n: usize, default: i64) -> Result<Vec<i64>, AttrError> {
        let v = self.ints_or_empty(name)?;
        if v.is_empty() {
            return Ok(vec![default; n]);
        }
        if v.len() != n {
            return Err(self.err(name, &format!("has {} entries, expected {n}", v.len())));
        }
        Ok(v)
    }

    fn padding(&mut self, n: usize) -> Result<Vec<(i64, i64)>, AttrError> {
        let v = self.ints_n("padding", 2 * n, 0)?;
        Ok(v.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }

    fn ints_or_empty(&mut self, name: &str) -> Result<Vec<i64>, AttrError> {
        match self.opt(name) {
            None => Ok(Vec::new()),
            Some(Attr::Ints(v)) => Ok(v),
            Some(_) => Err(self.err(name, "is not a list of integers")),
        }
    }

    fn dims(&mut self, name: &str) -> Result<Vec<DimExpr>, AttrError> {
        match self.take(name)? {
            Attr::Dims(v) => Ok(v),
            _ => Err(self.err(name, "is not a list of dimensions")),
        }
    }

    fn str(&mut self, name: &str) -> Result<String, AttrError> {
        match self.take(name)? {
            Attr::Str(v) => Ok(v),
            _ => Err(self.err(name, "is not a string")),
        }
    }

    fn opt_str(&mut self, name: &str) -> Result<Option<String>, AttrError> {
        match self.opt(name) {
            None => Ok(None),
            Some(Attr::Str(v)) => Ok(Some(v)),
            Some(_) => Err(self.err(name, "is not a string")),
        }
    }

    fn bool_or(&mut self, name: &str, default: bool) -> Result<bool, AttrError> {
        match self.opt(name) {
            None => Ok(default),
            Some(Attr::Bool(v)) => Ok(v),
            Some(_) => Err(self.err(name, "is not a boolean")),
        }
    }

    fn dtype(&mut self, name: &str) -> Result<DType, AttrError> {
        match self.take(name)? {
            Attr::DType(v) => Ok(v),
            _ => Err(self.err(name, "is not an element type")),
        }
    }

    fn opt_dtype(&mut self, name: &str) -> Result<Option<DType>, AttrError> {
        match self.opt(name) {
            None => Ok(None),
            Some(Attr::DType(v)) => Ok(Some(v)),
            Some(_) => Err(self.err(name, "is not an element type")),
        }
    }

    fn window(&mut self) -> Result<Window, AttrError> {
        let dimensions = self.ints_or_dims("window_dimensions")?;
        let n = dimensions.len();
        let padding = match self.opt("padding") {
            Some(Attr::Dims(v)) if v.len() == 2 * n => v
                .chunks_exact(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect(),
            Some(Attr::Dims(v)) => {
                return Err(self.err(
                    "padding",
                    &format!("has {} entries, expected {}", v.len(), 2 * n),
                ))
            }
            other => {
                if let Some(a) = other {
                    self.attrs.insert("padding".into(), a);
                }
                self.padding(n)?
                    .into_iter()
                    .map(|(l, h)| (DimExpr::constant(l), DimExpr::constant(h)))
                    .collect()
            }
        };
        Ok(Window {
            strides: self.ints_n("window_strides", n, 1)?,
            base_dilations: self.ints_n("base_dilations", n, 1)?,
            window_dilations: self.ints_n("window_dilations", n, 1)?,
            padding,
            dimensions,
        })
    }

    /// A list of integers or of dimensions, as dimensions.
    fn ints_or_dims(&mut self, name: &str) -> Result<Vec<DimExpr>, AttrError> {
        match self.take(name)? {
            Attr::Ints(v) => Ok(v.into_iter().map(DimExpr::constant).collect()),
            Attr::Dims(v) => Ok(v),
            _ => Err(self.err(name, "is not a list of integers or dimensions")),
        }
    }

    fn op(&mut self) -> Result<Op, AttrError> {
        use OpKind as K;
        if let Some(op) = Op::simple(self.kind) {
            return Ok(op);
        }
        Ok(match self.kind {
            K::Input => {
                let index = self.int("index")?;
                let index = usize::try_from(index).map_err(|_| self.err("index", "is negative"))?;
                let aliasing_output = match self.opt_int("aliasing_output")? {
                    Some(k) => Some(
                        usize::try_from(k)
                            .map_err(|_| self.err("aliasing_output", "is negative"))?,
                    ),
                    None => None,
                };
                Op::Input(InputSpec {
                    index,
                    name: self.opt_str("name")?.unwrap_or_default(),
                    aliasing_output,
                })
            }
            K::Constant => match self.take("value")? {
                Attr::Literal(l) => Op::Constant(l),
                _ => return Err(self.err("value", "is not a literal")),
            },
            K::DimConstant => Op::DimConstant(self.dims("values")?),
            K::Convert => Op::Convert(self.dtype("dtype")?),
            K::BitcastConvert => Op::BitcastConvert(self.dtype("dtype")?),
            K::ReducePrecision => {
                let e = self.int("exponent_bits")?;
                let m = self.int("mantissa_bits")?;
                Op::ReducePrecision(
                    super::ReducePrecisionSpec::new(e, m)
                        .map_err(|msg| self.err("exponent_bits", &msg))?,
                )
            }
            K::Fusion => {
                let k = self.str("kind")?;
                Op::Fusion(
                    FusionKind::from_name(&k)
                        .ok_or_else(|| self.err("kind", "is not loop/input"))?,
                )
            }
            K::Compare => {
                let d = self.str("comparison_direction")?;
                let direction = Relation::from_name(&d)
                    .ok_or_else(|| self.err("comparison_direction", "is not EQ/NE/GE/GT/LE/LT"))?;
                let compare_type = match self.opt_str("compare_type")? {
                    None => None,
                    Some(t) => Some(CompareType::from_name(&t).ok_or_else(|| {
                        self.err("compare_type", "is not FLOAT/TOTALORDER/SIGNED/UNSIGNED")
                    })?),
                };
                Op::Compare(CompareSpec {
                    direction,
                    compare_type,
                })
            }
            K::BroadcastInDim => Op::BroadcastInDim(BroadcastSpec {
                dims: self.ints("broadcast_dimensions")?,
                shape: self.dims("shape")?,
            }),
            K::Reshape => Op::Reshape(self.dims("shape")?),
            K::Transpose => Op::Transpose(self.ints("permutation")?),
            K::Concatenate => Op::Concatenate(self.int("dimension")?),
            K::Slice => Op::Slice(SliceSpec {
                start: self.dims("start_indices")?,
                limit: self.dims("limit_indices")?,
                strides: self.dims("strides")?,
            }),
            K::DynamicSlice => Op::DynamicSlice(self.dims("slice_sizes")?),
            K::Pad => Op::Pad(PadSpec {
                low: self.ints("edge_padding_low")?,
                high: self.ints("edge_padding_high")?,
                interior: self.ints("interior_padding")?,
            }),
            K::Reverse => Op::Reverse(self.ints("dimensions")?),
            K::Reduce => Op::Reduce(self.ints("dimensions")?),
            K::Iota => Op::Iota(IotaSpec {
                dimension: self.int("iota_dimension")?,
                shape: self.dims("shape")?,
                dtype: self.dtype("dtype")?,
            }),
            K::RngBitGenerator => {
                let a = self.str("rng_algorithm")?;
                Op::RngBitGenerator(RngSpec {
                    algorithm: RngAlgorithm::from_name(&a).ok_or_else(|| {
                        self.err("rng_algorithm", "is not DEFAULT/THREE_FRY/PHILOX")
                    })?,
                    shape: self.dims("shape")?,
                    dtype: self.dtype("dtype")?,
                })
            }
            K::ReduceWindow => Op::ReduceWindow(self.window()?),
            K::SelectAndScatter => Op::SelectAndScatter(self.window()?),
            K::DotGeneral => Op::DotGeneral(DotDims {
                lhs_batch: self.ints_or_empty("lhs_batching_dimensions")?,
                rhs_batch: self.ints_or_empty("rhs_batching_dimensions")?,
                lhs_contract: self.ints_or_empty("lhs_contracting_dimensions")?,
                rhs_contract: self.ints_or_empty("rhs_contracting_dimensions")?,
                result_dtype: self.opt_dtype("dtype")?,
            }),
            K::Convolution => {
                let text = self.str("dimension_numbers")?;
                let dims = ConvDimensionNumbers::parse(&text).ok_or_else(|| {
                    self.err(
                        "dimension_numbers",
                        &format!("`{text}` is not of the form [b,0,1,f]x[o,i,0,1]->[b,0,1,f]"),
                    )
                })?;
                let n = dims.input_spatial.len();
                if dims.kernel_spatial.len() != n || dims.output_spatial.len() != n {
                    return Err(self.err(
                        "dimension_numbers",
                        "input, kernel and output have different spatial ranks",
                    ));
                }
                let spec = ConvSpec {
                    window_strides: self.ints_n("window_strides", n, 1)?,
                    padding: self.padding(n)?,
                    lhs_dilation: self.ints_n("lhs_dilation", n, 1)?,
                    rhs_dilation: self.ints_n("rhs_dilation", n, 1)?,
                    dims,
                    feature_group_count: self.int_or("feature_group_count", 1)?,
                    batch_group_count: self.int_or("batch_group_count", 1)?,
                    result_dtype: self.opt_dtype("dtype")?,
                };
                if spec.feature_group_count < 1 || spec.batch_group_count < 1 {
                    return Err(self.err("feature_group_count", "group counts must be >= 1"));
                }
                Op::Convolution(spec)
            }
            K::Gather => Op::Gather(GatherDims {
                offset_dims: self.ints_or_empty("offset_dims")?,
                collapsed_slice_dims: self.ints_or_empty("collapsed_slice_dims")?,
                operand_batching_dims: self.ints_or_empty("operand_batching_dims")?,
                start_indices_batching_dims: self.ints_or_empty("start_indices_batching_dims")?,
                start_index_map: self.ints_or_empty("start_index_map")?,
                index_vector_dim: self.int("index_vector_dim")?,
                slice_sizes: self.dims("slice_sizes")?,
                indices_are_sorted: self.bool_or("indices_are_sorted", false)?,
            }),
            K::Scatter => Op::Scatter(ScatterDims {
                update_window_dims: self.ints_or_empty("update_window_dims")?,
                inserted_window_dims: self.ints_or_empty("inserted_window_dims")?,
                input_batching_dims: self.ints_or_empty("input_batching_dims")?,
                scatter_indices_batching_dims: self
                    .ints_or_empty("scatter_indices_batching_dims")?,
                scatter_dims_to_operand_dims: self.ints_or_empty("scatter_dims_to_operand_dims")?,
                index_vector_dim: self.int("index_vector_dim")?,
                indices_are_sorted: self.bool_or("indices_are_sorted", false)?,
                unique_indices: self.bool_or("unique_indices", false)?,
            }),
            K::Sort => Op::Sort(SortSpec {
                dimension: self.int("dimension")?,
                is_stable: self.bool_or("is_stable", false)?,
            }),
            K::AnnotateDevicePlacement => {
                let k = self.str("memory_kind")?;
                Op::AnnotateDevicePlacement(MemoryKind::from_name(&k).ok_or_else(|| {
                    self.err("memory_kind", "is not device/pinned_host/unpinned_host")
                })?)
            }
            K::CustomCall => Op::CustomCall(CustomCallSpec {
                target: self.str("call_target_name")?,
                backend_config: self.opt_str("backend_config")?,
                has_side_effect: self.bool_or("has_side_effect", false)?,
            }),
            // Payload-free kinds returned through `Op::simple` above.
            _ => return Err(self.err("", "has no payload (internal: not a payload-free kind)")),
        })
    }
}
