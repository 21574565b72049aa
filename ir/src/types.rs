//! Tensor types with symbolic shapes.

use crate::dim::{DimError, DimExpr};
use crate::dtype::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A symbolic shape: one [`DimExpr`] per dimension (rank = length).
pub type Shape = Vec<DimExpr>;

/// A ranked tensor type with a symbolic shape, e.g. `f32[B,S,768]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first.
    pub shape: Shape,
}

impl TensorType {
    /// A tensor type from an element type and a shape.
    pub fn new(dtype: DType, shape: Shape) -> Self {
        TensorType { dtype, shape }
    }

    /// A rank-0 tensor.
    pub fn scalar(dtype: DType) -> Self {
        TensorType {
            dtype,
            shape: Vec::new(),
        }
    }

    /// A tensor with constant dimensions.
    pub fn fixed(dtype: DType, dims: &[i64]) -> Self {
        TensorType {
            dtype,
            shape: dims.iter().map(|&d| DimExpr::constant(d)).collect(),
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements: the product of the dimensions (1 for a scalar).
    ///
    /// Panics when a coefficient of the product leaves `i64`; a verified graph
    /// ([`crate::verify::verify`]) never has such a type. Use
    /// [`TensorType::checked_num_elements`] on unverified types.
    pub fn num_elements(&self) -> DimExpr {
        self.shape
            .iter()
            .cloned()
            .fold(DimExpr::constant(1), |acc, d| acc * d)
    }

    /// [`TensorType::num_elements`], with coefficient overflow an error.
    ///
    /// # Errors
    /// [`DimError::Overflow`] when a coefficient of the product leaves `i64`.
    pub fn checked_num_elements(&self) -> Result<DimExpr, DimError> {
        self.shape
            .iter()
            .try_fold(DimExpr::constant(1), |acc, d| acc.checked_mul(d))
    }

    /// Storage size in bytes: `num_elements * dtype.size_bytes()`.
    ///
    /// Panics like [`TensorType::num_elements`]; a verified graph never has a type whose
    /// size overflows. Use [`TensorType::checked_size_bytes`] on unverified types.
    pub fn size_bytes(&self) -> DimExpr {
        self.num_elements() * DimExpr::constant(self.dtype.size_bytes() as i64)
    }

    /// [`TensorType::size_bytes`], with coefficient overflow an error.
    ///
    /// # Errors
    /// [`DimError::Overflow`] when a coefficient of the size leaves `i64`.
    pub fn checked_size_bytes(&self) -> Result<DimExpr, DimError> {
        self.checked_num_elements()?
            .checked_scale(self.dtype.size_bytes() as i64)
    }

    /// The dimensions as constants, if all of them are.
    pub fn static_dims(&self) -> Option<Vec<i64>> {
        self.shape.iter().map(|d| d.as_const()).collect()
    }
}

impl fmt::Display for TensorType {
    /// Prints as `f32[B,S,768]`; a scalar prints as `f32[]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
