//! The CUDA device (placeholder until the driver-API implementation lands).
