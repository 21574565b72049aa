//! Typed op payloads: the configuration of each op kind, parsed and validated once by the front
//! ends (StableHLO import, ONNX lowering) and the textual-IR parser ([`super::codec`]), then
//! read by passes, kernels and the plan checker as plain fields — never by a key string.
//!
//! Field names follow the StableHLO specification (section "Ops", each op's "Inputs"); integer
//! dimension lists are `si64` as in the spec and are checked against operand ranks by the op's
//! shape rule ([`crate::shape::infer`]).

use crate::dim::DimExpr;
use crate::dtype::DType;
use crate::graph::Relation;

/// `input`: a graph argument.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct InputSpec {
    /// Argument position (0-based) in the graph's inputs.
    pub index: usize,
    /// Pytree path or parameter name, may be empty.
    pub name: String,
    /// Donation: `Some(k)` when the caller gives the argument's buffer to the step and graph
    /// output `k` is its updated value (XLA's `input_output_alias`, JAX's `donate_argnums`,
    /// StableHLO's `tf.aliasing_output`). A donated input is resident only until its last
    /// read, after which its bytes may hold other values (its updated output among them).
    pub aliasing_output: Option<usize>,
}

/// `compare`'s `compare_type` (StableHLO spec, `compare`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum CompareType {
    /// IEEE comparison (NaN compares unordered).
    Float,
    /// Total order of floats (`-NaN < -Inf < ... < Inf < NaN`).
    TotalOrder,
    /// Signed integers.
    Signed,
    /// Unsigned integers.
    Unsigned,
}

impl CompareType {
    /// The spec spelling (`FLOAT`, `TOTALORDER`, `SIGNED`, `UNSIGNED`).
    pub fn name(self) -> &'static str {
        match self {
            CompareType::Float => "FLOAT",
            CompareType::TotalOrder => "TOTALORDER",
            CompareType::Signed => "SIGNED",
            CompareType::Unsigned => "UNSIGNED",
        }
    }

    /// Parses the spec spelling.
    pub fn from_name(s: &str) -> Option<CompareType> {
        Some(match s {
            "FLOAT" => CompareType::Float,
            "TOTALORDER" => CompareType::TotalOrder,
            "SIGNED" => CompareType::Signed,
            "UNSIGNED" => CompareType::Unsigned,
            _ => return None,
        })
    }
}

/// `compare`: `lhs direction rhs`, elementwise.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct CompareSpec {
    /// `comparison_direction`.
    pub direction: Relation,
    /// `compare_type`, when the producer gave one.
    pub compare_type: Option<CompareType>,
}

impl CompareSpec {
    /// Whether floats are compared in the total order (`compare_type = TOTALORDER`).
    pub fn total_order(&self) -> bool {
        self.compare_type == Some(CompareType::TotalOrder)
    }
}

/// `broadcast_in_dim`: operand dimension `i` becomes result dimension `dims[i]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BroadcastSpec {
    /// `broadcast_dimensions`, one per operand dimension.
    pub dims: Vec<i64>,
    /// Result shape (symbolic).
    pub shape: Vec<DimExpr>,
}

/// `slice`: `start:limit:stride` per dimension (symbolic bounds, constant strides in practice).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SliceSpec {
    /// `start_indices`.
    pub start: Vec<DimExpr>,
    /// `limit_indices`.
    pub limit: Vec<DimExpr>,
    /// `strides`.
    pub strides: Vec<DimExpr>,
}

/// `pad`: edge padding (may be negative) and interior padding per dimension.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct PadSpec {
    /// `edge_padding_low`.
    pub low: Vec<i64>,
    /// `edge_padding_high`.
    pub high: Vec<i64>,
    /// `interior_padding`.
    pub interior: Vec<i64>,
}

/// The kind of a `fusion` op (XLA's fusion kinds); serialized and printed as its
/// [`name`](FusionKind::name).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FusionKind {
    /// Loop fusion: every op of the region is evaluated at each element of the results, in
    /// row-major (flat index) order; the results share one element count.
    Loop,
    /// Input fusion: a `reduce` root over trailing dimensions with fused elementwise producers
    /// of its operand.
    Input,
}

impl FusionKind {
    /// Text spelling (`loop`, `input`).
    pub fn name(self) -> &'static str {
        match self {
            FusionKind::Loop => "loop",
            FusionKind::Input => "input",
        }
    }

    /// Parses [`FusionKind::name`]'s spelling.
    pub fn from_name(s: &str) -> Option<FusionKind> {
        match s {
            "loop" => Some(FusionKind::Loop),
            "input" => Some(FusionKind::Input),
            _ => None,
        }
    }
}

impl std::fmt::Display for FusionKind {
    /// [`FusionKind::name`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a value is placed (XLA's memory spaces, as JAX names them in `mhlo.memory_kind` and
/// in `annotate_device_placement`'s `_xla_buffer_placement` attribute); serialized and printed
/// as its [`name`](MemoryKind::name).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// Device memory (the arena).
    Device,
    /// Page-locked host memory, reachable by the device's copy engines.
    PinnedHost,
    /// Pageable host memory.
    UnpinnedHost,
}

impl MemoryKind {
    /// Text spelling, JAX's (`device`, `pinned_host`, `unpinned_host`).
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Device => "device",
            MemoryKind::PinnedHost => "pinned_host",
            MemoryKind::UnpinnedHost => "unpinned_host",
        }
    }

    /// Parses [`MemoryKind::name`]'s spelling.
    pub fn from_name(s: &str) -> Option<MemoryKind> {
        match s {
            "device" => Some(MemoryKind::Device),
            "pinned_host" => Some(MemoryKind::PinnedHost),
            "unpinned_host" => Some(MemoryKind::UnpinnedHost),
            _ => None,
        }
    }

    /// Whether the kind is host memory (pinned or not).
    pub fn is_host(self) -> bool {
        !matches!(self, MemoryKind::Device)
    }
}

impl std::fmt::Display for MemoryKind {
    /// [`MemoryKind::name`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `iota`: indices along `dimension` of a tensor of `shape` and `dtype`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct IotaSpec {
    /// `iota_dimension`.
    pub dimension: i64,
    /// Result shape.
    pub shape: Vec<DimExpr>,
    /// Result element type.
    pub dtype: DType,
}

/// `rng_bit_generator`'s algorithm (StableHLO spec, `rng_bit_generator`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum RngAlgorithm {
    /// The implementation's choice (Ebb: threefry2x32).
    Default,
    /// Threefry2x32 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC 2011).
    ThreeFry,
    /// Philox4x32 (same paper); Ebb generates its bits with threefry2x32 as well.
    Philox,
}

impl RngAlgorithm {
    /// StableHLO spelling (`DEFAULT`, `THREE_FRY`, `PHILOX`).
    pub fn name(self) -> &'static str {
        match self {
            RngAlgorithm::Default => "DEFAULT",
            RngAlgorithm::ThreeFry => "THREE_FRY",
            RngAlgorithm::Philox => "PHILOX",
        }
    }

    /// Parses [`RngAlgorithm::name`]'s spelling.
    pub fn from_name(s: &str) -> Option<RngAlgorithm> {
        [
            RngAlgorithm::Default,
            RngAlgorithm::ThreeFry,
            RngAlgorithm::Philox,
        ]
        .into_iter()
        .find(|a| a.name() == s)
    }
}

/// `rng_bit_generator`: random bits of `shape` and `dtype` (`ui32` or `ui64`) from a
/// `ui64[2]` state `[key, counter]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RngSpec {
    /// `rng_algorithm`.
    pub algorithm: RngAlgorithm,
    /// Shape of the bits.
    pub shape: Vec<DimExpr>,
    /// Element type of the bits.
    pub dtype: DType,
}

/// A window of `reduce_window` / `select_and_scatter` (StableHLO spec, `reduce_window`), with
/// the spec's defaults filled in: every list has one entry per window dimension, padding one
/// `(low, high)` pair. Window sizes and padding may be symbolic (`jnp.cumsum` over a symbolic
/// axis is a window `[1, S, 1]` padded by `S - 1`, from `stablehlo.dynamic_reduce_window`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Window {
    /// `window_dimensions`.
    pub dimensions: Vec<DimExpr>,
    /// `window_strides` (default 1).
    pub strides: Vec<i64>,
    /// `base_dilations` (default 1; always 1 for `select_and_scatter`).
    pub base_dilations: Vec<i64>,
    /// `window_dilations` (default 1; always 1 for `select_and_scatter`).
    pub window_dilations: Vec<i64>,
    /// `padding` as `(low, high)` per dimension (default 0).
    pub padding: Vec<(DimExpr, DimExpr)>,
}

impl Window {
    /// A window of `dimensions` with unit strides and dilations and no padding.
    pub fn new(dimensions: Vec<i64>) -> Window {
        Window::symbolic(dimensions.into_iter().map(DimExpr::constant).collect())
    }

    /// A window of symbolic `dimensions` with unit strides and dilations and no padding.
    pub fn symbolic(dimensions: Vec<DimExpr>) -> Window {
        let n = dimensions.len();
        Window {
            dimensions,
            strides: vec![1; n],
            base_dilations: vec![1; n],
            window_dilations: vec![1; n],
            padding: vec![(DimExpr::zero(), DimExpr::zero()); n],
        }
    }

    /// Sets constant `(low, high)` padding.
    pub fn with_padding(mut self, padding: &[(i64, i64)]) -> Window {
        self.padding = padding
            .iter()
            .map(|&(l, h)| (DimExpr::constant(l), DimExpr::constant(h)))
            .collect();
        self
    }

    /// The window sizes when they are all constants.
    pub fn static_dimensions(&self) -> Option<Vec<i64>> {
        self.dimensions.iter().map(DimExpr::as_const).collect()
    }

    /// The padding when it is all constant.
    pub fn static_padding(&self) -> Option<Vec<(i64, i64)>> {
        self.padding
            .iter()
            .map(|(l, h)| Some((l.as_const()?, h.as_const()?)))
            .collect()
    }

    /// Applies `f` to every symbolic size and padding.
    pub fn map_dims(&mut self, f: &dyn Fn(&DimExpr) -> DimExpr) {
        self.dimensions.iter_mut().for_each(|d| *d = f(d));
        for (l, h) in &mut self.padding {
            *l = f(l);
            *h = f(h);
        }
    }
}

/// `dot_general` dimension numbers (StableHLO spec, `dot_general`) and the result type.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct DotDims {
    /// `lhs_batching_dimensions`.
    pub lhs_batch: Vec<i64>,
    /// `rhs_batching_dimensions`.
    pub rhs_batch: Vec<i64>,
    /// `lhs_contracting_dimensions`.
    pub lhs_contract: Vec<i64>,
    /// `rhs_contracting_dimensions`.
    pub rhs_contract: Vec<i64>,
    /// Result element type when it differs from the lhs's (mixed precision), else `None`.
    pub result_dtype: Option<DType>,
}

impl DotDims {
    /// A `dot_general` without batching dimensions contracting `lhs` with `rhs` (a matmul is
    /// `DotDims::contracting(&[1], &[0])`).
    pub fn contracting(lhs: &[i64], rhs: &[i64]) -> DotDims {
        DotDims {
            lhs_contract: lhs.to_vec(),
            rhs_contract: rhs.to_vec(),
            ..DotDims::default()
        }
    }
}

/// Convolution dimension numbers (StableHLO spec, `convolution`, `input_batch_dimension` ...):
/// positions of the batch, feature and spatial dimensions in the input, kernel and output.
/// Text form `[b,0,1,f]x[o,i,0,1]->[b,0,1,f]` (spatial dimensions numbered in order).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ConvDimensionNumbers {
    /// Input batch dimension.
    pub input_batch: usize,
    /// Input feature dimension.
    pub input_feature: usize,
    /// Input spatial dimensions, in spatial order.
    pub input_spatial: Vec<usize>,
    /// Kernel output-feature dimension.
    pub kernel_output_feature: usize,
    /// Kernel input-feature dimension.
    pub kernel_input_feature: usize,
    /// Kernel spatial dimensions, in spatial order.
    pub kernel_spatial: Vec<usize>,
    /// Output batch dimension.
    pub output_batch: usize,
    /// Output feature dimension.
    pub output_feature: usize,
    /// Output spatial dimensions, in spatial order.
    pub output_spatial: Vec<usize>,
}

impl ConvDimensionNumbers {
    /// Parses `[b, 0, 1, f]x[o, i, 0, 1]->[b, 0, 1, f]` (whitespace ignored). `None` when the
    /// text is malformed or a part's letters or spatial numbers are missing or repeated.
    pub fn parse(s: &str) -> Option<ConvDimensionNumbers> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rest) = s.split_once('x')?;
        let (rhs, out) = rest.split_once("->")?;
        let part = |p: &str, a: char, b: char| -> Option<(usize, usize, Vec<usize>)> {
            let p = p.strip_prefix('[')?.strip_suffix(']')?;
            let items: Vec<&str> = p.split(',').collect();
            let one = |c: char| {
                let mut it = items
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| **x == c.to_string());
                let (i, _) = it.next()?;
                it.next().is_none().then_some(i)
            };
            let (ia, ib) = (one(a)?, one(b)?);
            let mut sp: Vec<(usize, usize)> = Vec::new();
            for (pos, x) in items.iter().enumerate() {
                if pos == ia || pos == ib {
                    continue;
                }
                sp.push((x.parse::<usize>().ok()?, pos));
            }
            sp.sort();
            if sp.iter().enumerate().any(|(k, (n, _))| *n != k) {
                return None;
            }
            Some((ia, ib, sp.into_iter().map(|(_, p)| p).collect()))
        };
        let (input_batch, input_feature, input_spatial) = part(lhs, 'b', 'f')?;
        let (kernel_output_feature, kernel_input_feature, kernel_spatial) = part(rhs, 'o', 'i')?;
        let (output_batch, output_feature, output_spatial) = part(out, 'b', 'f')?;
        Some(ConvDimensionNumbers {
            input_batch,
            input_feature,
            input_spatial,
            kernel_output_feature,
            kernel_input_feature,
            kernel_spatial,
            output_batch,
            output_feature,
            output_spatial,
        })
    }
}

impl std::fmt::Display for ConvDimensionNumbers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = |a: usize, ac: char, b: usize, bc: char, sp: &[usize]| -> String {
            let mut items = vec![String::new(); sp.len() + 2];
            items[a] = ac.to_string();
            items[b] = bc.to_string();
            for (k, &p) in sp.iter().enumerate() {
                if let Some(slot) = items.get_mut(p) {
                    *slot = k.to_string();
                }
            }
            format!("[{}]", items.join(","))
        };
        write!(
            f,
            "{}x{}->{}",
            part(
                self.input_batch,
                'b',
                self.input_feature,
                'f',
                &self.input_spatial
            ),
            part(
                self.kernel_output_feature,
                'o',
                self.kernel_input_feature,
                'i',
                &self.kernel_spatial
            ),
            part(
                self.output_batch,
                'b',
                self.output_feature,
                'f',
                &self.output_spatial
            )
        )
    }
}

/// `convolution` configuration (StableHLO spec, `convolution`), defaults filled in: every list
/// has one entry per spatial dimension.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ConvSpec {
    /// `window_strides` (default 1).
    pub window_strides: Vec<i64>,
    /// `padding` as `(low, high)` per spatial dimension (default 0).
    pub padding: Vec<(i64, i64)>,
    /// `lhs_dilation` (default 1).
    pub lhs_dilation: Vec<i64>,
    /// `rhs_dilation` (default 1).
    pub rhs_dilation: Vec<i64>,
    /// Dimension numbers.
    pub dims: ConvDimensionNumbers,
    /// `feature_group_count` (≥ 1).
    pub feature_group_count: i64,
    /// `batch_group_count` (≥ 1).
    pub batch_group_count: i64,
    /// Result element type when it differs from the input's, else `None`.
    pub result_dtype: Option<DType>,
}

impl ConvSpec {
    /// A convolution with dimension numbers `dims` and the spec's defaults: unit strides and
    /// dilations, no padding, group counts 1, the input's element type.
    pub fn new(dims: ConvDimensionNumbers) -> ConvSpec {
        let n = dims.input_spatial.len();
        ConvSpec {
            window_strides: vec![1; n],
            padding: vec![(0, 0); n],
            lhs_dilation: vec![1; n],
            rhs_dilation: vec![1; n],
            dims,
            feature_group_count: 1,
            batch_group_count: 1,
            result_dtype: None,
        }
    }
}

/// `gather` dimension numbers (StableHLO spec, `gather`).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct GatherDims {
    /// `offset_dims`.
    pub offset_dims: Vec<i64>,
    /// `collapsed_slice_dims`.
    pub collapsed_slice_dims: Vec<i64>,
    /// `operand_batching_dims`.
    pub operand_batching_dims: Vec<i64>,
    /// `start_indices_batching_dims`.
    pub start_indices_batching_dims: Vec<i64>,
    /// `start_index_map`.
    pub start_index_map: Vec<i64>,
    /// `index_vector_dim`.
    pub index_vector_dim: i64,
    /// `slice_sizes` (symbolic).
    pub slice_sizes: Vec<DimExpr>,
    /// `indices_are_sorted`.
    pub indices_are_sorted: bool,
}

/// `scatter` dimension numbers (StableHLO spec, `scatter`).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct ScatterDims {
    /// `update_window_dims`.
    pub update_window_dims: Vec<i64>,
    /// `inserted_window_dims`.
    pub inserted_window_dims: Vec<i64>,
    /// `input_batching_dims`.
    pub input_batching_dims: Vec<i64>,
    /// `scatter_indices_batching_dims`.
    pub scatter_indices_batching_dims: Vec<i64>,
    /// `scatter_dims_to_operand_dims`.
    pub scatter_dims_to_operand_dims: Vec<i64>,
    /// `index_vector_dim`.
    pub index_vector_dim: i64,
    /// `indices_are_sorted`.
    pub indices_are_sorted: bool,
    /// `unique_indices`.
    pub unique_indices: bool,
}

/// `sort` configuration.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct SortSpec {
    /// `dimension` to sort along.
    pub dimension: i64,
    /// `is_stable`.
    pub is_stable: bool,
}

/// `custom_call` configuration.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct CustomCallSpec {
    /// `call_target_name`.
    pub target: String,
    /// `backend_config`, when given.
    pub backend_config: Option<String>,
    /// `has_side_effect`.
    pub has_side_effect: bool,
}

impl CustomCallSpec {
    /// A call of `target` without backend config or declared side effect.
    pub fn new(target: &str) -> CustomCallSpec {
        CustomCallSpec {
            target: target.to_string(),
            ..CustomCallSpec::default()
        }
    }
}
