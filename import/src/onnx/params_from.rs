//! The element types of an ONNX Runtime optimizer model's sequence inputs, read from its
//! training model (`ebb import OPTIMIZER.onnx --params-from TRAINING.onnx`).
//!
//! ORT's optimizer model (`onnxblock` artifacts) takes `params`, `gradients` and the moments as
//! tensor sequences whose element types it does not state: they are the training model's
//! trainable parameters, in the order the artifacts were generated with. The training model
//! names them: each trainable parameter `p` is a graph input with a gradient accumulation
//! buffer input `p_grad.accumulation.buffer`. The elements are those parameters, in the
//! training model's input order (the order of every ORT fixture's sequences; checked against
//! the exporter's record by the tests).

use super::{decode_model, import_model, ImportOptions, OnnxError};
use ebb_ir::TensorType;
use std::collections::HashSet;
use std::path::Path;

/// Suffix of the gradient accumulation buffer input of a trainable parameter.
pub const GRAD_BUFFER_SUFFIX: &str = "_grad.accumulation.buffer";

/// The trainable parameters of the ORT training model at `path`: `(name, type)` in input
/// order.
///
/// # Errors
/// The training model's import errors, and [`OnnxError::Structure`] when it has no gradient
/// accumulation buffer inputs (not an ORT training model).
pub fn trainable_parameters(path: &Path) -> Result<Vec<(String, TensorType)>, OnnxError> {
    let bytes = ebb_ir::fsio::read_regular(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let file = path.display().to_string();
    let model = decode_model(&bytes, &file)?;
    let (g, _) = import_model(&model, &file, path.parent(), &ImportOptions::default())?;
    let names: HashSet<&str> = g.inputs().iter().map(|&id| g.input_name(id)).collect();
    let params: Vec<(String, TensorType)> = g
        .inputs()
        .iter()
        .filter(|&&id| names.contains(format!("{}{GRAD_BUFFER_SUFFIX}", g.input_name(id)).as_str()))
        .filter_map(|&id| {
            let t = g.node(id).outputs.first()?.clone();
            Some((g.input_name(id).to_string(), t))
        })
        .collect();
    if params.is_empty() {
        return Err(OnnxError::Structure {
            file,
            msg: format!(
                "no trainable parameters: an ONNX Runtime training model has an input \
                 `<param>{GRAD_BUFFER_SUFFIX}` per parameter, this one has none"
            ),
        });
    }
    Ok(params)
}

/// Import options whose unlisted sequence inputs take the trainable parameters of the ORT
/// training model at `training` as their elements.
///
/// # Errors
/// As [`trainable_parameters`].
pub fn options_from_training(training: &Path) -> Result<ImportOptions, OnnxError> {
    Ok(ImportOptions {
        default_sequence_elements: Some(
            trainable_parameters(training)?
                .into_iter()
                .map(|(_, t)| t)
                .collect(),
        ),
        ..ImportOptions::default()
    })
}
