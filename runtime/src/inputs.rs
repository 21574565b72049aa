//! Step inputs for `ebb run` and tests: seeded random tensors of the graph's input types at
//! the bindings, or the `in_i` arrays of a reference `.npz` (as written by `examples/export/`).

use crate::error::NpzError;
use crate::npz::Npz;
use crate::tensor::{Data, Tensor};
use ebb_ir::{Bindings, DType, Graph};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::path::Path;

/// Concrete shape of graph input `i` at `b`.
/// Element type and concrete shape of input `i` of `g` at `b`.
///
/// # Errors
/// A dimension that does not evaluate at `b`, or is negative.
pub fn input_shape(g: &Graph, i: usize, b: &Bindings) -> Result<(DType, Vec<usize>), String> {
    let id = g.inputs()[i];
    let t = g
        .node(id)
        .outputs
        .first()
        .ok_or_else(|| format!("input {i} has no type"))?;
    let mut dims = Vec::with_capacity(t.shape.len());
    for d in &t.shape {
        let v = d
            .eval(b)
            .map_err(|e| format!("input {i} (`{}`): {e}", g.input_name(id)))?;
        dims.push(usize::try_from(v).map_err(|_| format!("input {i}: dimension {d} = {v}"))?);
    }
    Ok((t.dtype, dims))
}

/// Seeded random inputs of `g` at `b`: floats uniform in [-0.5, 0.5), integers uniform in
/// [0, 4) (valid token ids, labels and step counts for every fixture), booleans fair coins.
/// The same seed gives the same tensors.
///
/// # Errors
/// A message when an input shape does not evaluate at `b`.
pub fn random_inputs(g: &Graph, b: &Bindings, seed: u64) -> Result<Vec<Tensor>, String> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out = Vec::with_capacity(g.inputs().len());
    for i in 0..g.inputs().len() {
        let (dtype, shape) = input_shape(g, i, b)?;
        let n: usize = shape.iter().product();
        let data = if dtype.is_float() {
            Data::F64((0..n).map(|_| rng.random_range(-0.5..0.5)).collect()).into_dtype(dtype)
        } else if dtype == DType::I1 {
            Data::I1((0..n).map(|_| rng.random_range(0..2) == 1).collect())
        } else {
            Data::I64((0..n).map(|_| rng.random_range(0..4)).collect()).into_dtype(dtype)
        };
        out.push(Tensor::new(shape, data).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// The `in_0..in_{n-1}` arrays (graph input order) and, when present, the `out_i` arrays of a
/// reference `.npz`. Only these arrays are read (decompressed): any other member is left
/// alone, whatever size it declares.
///
/// # Errors
/// [`NpzError`] when the file cannot be read or an `in_i` is missing.
pub fn npz_inputs(path: &Path, n_inputs: usize) -> Result<(Vec<Tensor>, Vec<Tensor>), NpzError> {
    let mut z = Npz::open(path)?;
    let names: std::collections::HashSet<String> = z.names().into_iter().collect();
    let mut ins = Vec::with_capacity(n_inputs);
    for i in 0..n_inputs {
        ins.push(z.get(&format!("in_{i}"))?);
    }
    let mut outs = Vec::new();
    while names.contains(&format!("out_{}", outs.len())) {
        outs.push(z.get(&format!("out_{}", outs.len()))?);
    }
    Ok((ins, outs))
}
