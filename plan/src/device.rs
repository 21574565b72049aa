//! Device profiles: the throughput figures the runtime prices recompute and swap decisions
//! with ([`crate::cost`], the roofline time model).
//!
//! A profile gives compute throughput per kind of op ([`ComputeKind`]), device memory
//! bandwidth, host link bandwidth (one direction) and device memory. The named accelerator
//! profiles use vendor figures (dense, i.e. without structured sparsity):
//! * `a100-40g-pcie4`: NVIDIA A100 40GB PCIe, "NVIDIA A100 Tensor Core GPU" datasheet (2021):
//!   TF32 156 TFLOP/s, BF16 312 TFLOP/s, FP32 19.5 TFLOP/s, HBM2 1555 GB/s, 40 GB,
//!   PCIe Gen4 x16 64 GB/s both directions (32 GB/s each way).
//! * `h100-sxm-pcie5`: NVIDIA H100 SXM5 80GB, "NVIDIA H100 Tensor Core GPU" datasheet (2023):
//!   TF32 494.5 TFLOP/s and BF16 989.5 TFLOP/s dense (half the sparse figures), FP32
//!   67 TFLOP/s, HBM3 3.35 TB/s, 80 GB, PCIe Gen5 x16 128 GB/s both directions (64 GB/s each
//!   way).
//! * `h200-pcie5`: NVIDIA H200 SXM 141GB, "NVIDIA H200 Tensor Core GPU" datasheet (2024): the
//!   H100's compute, HBM3e 4.8 TB/s, 141 GB, PCIe Gen5 x16 (64 GB/s each way).
//!
//! `f32` matrix ops are priced at the TF32 tensor-core rate, the precision XLA uses for `f32`
//! `dot_general` on these GPUs by default (JAX's `default_matmul_precision`); other ops at the
//! FP32 vector rate (they are memory-bound on these devices anyway).
//!
//! `custom:flops=…,hbm=…,link=…[,half=…,vector=…,mem=…]` builds a profile from figures
//! (numbers with an optional `K`/`M`/`G`/`T`/`P` suffix, powers of 1000): `flops` matrix
//! FLOP/s (`half` and `vector` default to it), `hbm` memory bytes/s, `link` host-link bytes/s
//! per direction, `mem` device bytes. The `cpu` profile is measured on the machine by the
//! runtime (`ebb_runtime::device`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which device a profile describes: its identity, written (printed, serialized) as the
/// profile's name — `a100-40g-pcie4`, `h100-sxm-pcie5`, `h200-pcie5`, `cpu`, `custom:SPEC` —
/// so plan files, reports and JSON output carry the same text a bare name did.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum DeviceId {
    /// NVIDIA A100 40GB PCIe (`a100-40g-pcie4`).
    A100Pcie4,
    /// NVIDIA H100 SXM5 80GB with a PCIe Gen5 host link (`h100-sxm-pcie5`).
    H100SxmPcie5,
    /// NVIDIA H200 141GB with a PCIe Gen5 host link (`h200-pcie5`).
    H200Pcie5,
    /// This machine's CPU, measured by the runtime (`cpu`).
    Cpu,
    /// Figures given as `custom:SPEC`; holds `SPEC` (see the module docs).
    Custom(String),
    /// Any other name (a profile built by hand, or read from a file written elsewhere).
    Other(String),
}

impl DeviceId {
    /// The built-in accelerator profiles ([`DeviceProfile::named`] builds them), in the
    /// order of [`DeviceProfile::NAMED`].
    pub const BUILT_IN: [DeviceId; 3] = [
        DeviceId::A100Pcie4,
        DeviceId::H100SxmPcie5,
        DeviceId::H200Pcie5,
    ];
}

impl fmt::Display for DeviceId {
    /// The profile's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::A100Pcie4 => f.write_str("a100-40g-pcie4"),
            DeviceId::H100SxmPcie5 => f.write_str("h100-sxm-pcie5"),
            DeviceId::H200Pcie5 => f.write_str("h200-pcie5"),
            DeviceId::Cpu => f.write_str("cpu"),
            DeviceId::Custom(spec) => write!(f, "custom:{spec}"),
            DeviceId::Other(name) => f.write_str(name),
        }
    }
}

impl From<&str> for DeviceId {
    /// The identity a name spells ([`DeviceId::Other`] for a name Ebb does not define).
    fn from(name: &str) -> Self {
        match name {
            "a100-40g-pcie4" => DeviceId::A100Pcie4,
            "h100-sxm-pcie5" => DeviceId::H100SxmPcie5,
            "h200-pcie5" => DeviceId::H200Pcie5,
            "cpu" => DeviceId::Cpu,
            _ => match name.strip_prefix("custom:") {
                Some(spec) => DeviceId::Custom(spec.to_string()),
                None => DeviceId::Other(name.to_string()),
            },
        }
    }
}

impl From<String> for DeviceId {
    fn from(name: String) -> Self {
        DeviceId::from(name.as_str())
    }
}

impl From<DeviceId> for String {
    fn from(id: DeviceId) -> Self {
        id.to_string()
    }
}

/// The kind of compute unit an op runs on, which selects its throughput in a profile.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeKind {
    /// Elementwise, reductions, data movement: the vector FLOP rate.
    #[default]
    Vector,
    /// `dot_general`/`convolution` on `f32`/`f64` operands.
    Matrix,
    /// `dot_general`/`convolution` on `bf16`/`f16` operands.
    MatrixHalf,
}

/// Throughput figures of one device (all rates per second).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// Which device it is; serialized as the profile's name (`h100-sxm-pcie5`, `cpu`,
    /// `custom:…`).
    pub name: DeviceId,
    /// FLOP/s of [`ComputeKind::Matrix`] ops.
    pub matrix_flops: f64,
    /// FLOP/s of [`ComputeKind::MatrixHalf`] ops.
    pub matrix_half_flops: f64,
    /// FLOP/s of [`ComputeKind::Vector`] ops.
    pub vector_flops: f64,
    /// Device memory bandwidth, bytes/s (bytes read plus bytes written).
    pub memory_bandwidth: f64,
    /// Host link bandwidth in one direction, bytes/s (an offload and its reload each pay it).
    pub link_bandwidth: f64,
    /// Device memory, bytes (0 when unknown).
    pub memory_bytes: i64,
    /// Where the figures come from.
    pub source: String,
}

/// Why a profile name or specification is not understood.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// Not a known profile.
    #[error("unknown device `{0}` (known: cpu, {known}, custom:flops=…,hbm=…,link=…)", known = DeviceProfile::NAMED.join(", "))]
    Unknown(String),
    /// A `custom:` specification that does not parse.
    #[error("device `{spec}`: {reason}")]
    Custom {
        /// The specification.
        spec: String,
        /// What is wrong.
        reason: String,
    },
}

impl Default for DeviceProfile {
    /// `h100-sxm-pcie5`: the library default (the CLI defaults to the measured `cpu`).
    fn default() -> Self {
        DeviceProfile::h100_sxm_pcie5()
    }
}

impl DeviceProfile {
    /// Names of the built-in accelerator profiles.
    pub const NAMED: [&'static str; 3] = ["a100-40g-pcie4", "h100-sxm-pcie5", "h200-pcie5"];

    /// NVIDIA A100 40GB PCIe (see the module docs for the figures and their source).
    pub fn a100_40g_pcie4() -> Self {
        DeviceProfile {
            name: DeviceId::A100Pcie4,
            matrix_flops: 156e12,
            matrix_half_flops: 312e12,
            vector_flops: 19.5e12,
            memory_bandwidth: 1555e9,
            link_bandwidth: 32e9,
            memory_bytes: 40 << 30,
            source: "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB PCIe".into(),
        }
    }

    /// NVIDIA H100 SXM5 80GB with a PCIe Gen5 host link (see the module docs).
    pub fn h100_sxm_pcie5() -> Self {
        DeviceProfile {
            name: DeviceId::H100SxmPcie5,
            matrix_flops: 494.5e12,
            matrix_half_flops: 989.5e12,
            vector_flops: 67e12,
            memory_bandwidth: 3.35e12,
            link_bandwidth: 64e9,
            memory_bytes: 80 << 30,
            source: "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM, dense".into(),
        }
    }

    /// NVIDIA H200 141GB with a PCIe Gen5 host link (see the module docs).
    pub fn h200_pcie5() -> Self {
        DeviceProfile {
            name: DeviceId::H200Pcie5,
            memory_bandwidth: 4.8e12,
            memory_bytes: 141_000_000_000,
            source: "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM, dense".into(),
            ..DeviceProfile::h100_sxm_pcie5()
        }
    }

    /// A built-in accelerator profile or a `custom:` specification (see the module docs).
    /// `cpu` is not handled here: it is measured by the runtime.
    ///
    /// # Errors
    /// [`DeviceError::Unknown`] for another name, [`DeviceError::Custom`] for a bad
    /// specification.
    pub fn named(name: &str) -> Result<DeviceProfile, DeviceError> {
        match DeviceId::from(name) {
            DeviceId::A100Pcie4 => Ok(DeviceProfile::a100_40g_pcie4()),
            DeviceId::H100SxmPcie5 => Ok(DeviceProfile::h100_sxm_pcie5()),
            DeviceId::H200Pcie5 => Ok(DeviceProfile::h200_pcie5()),
            DeviceId::Custom(spec) => {
                DeviceProfile::custom(&spec).map_err(|reason| DeviceError::Custom {
                    spec: name.to_string(),
                    reason,
                })
            }
            DeviceId::Cpu | DeviceId::Other(_) => Err(DeviceError::Unknown(name.to_string())),
        }
    }

    /// Parses `flops=…,hbm=…,link=…[,half=…,vector=…,mem=…]`.
    fn custom(spec: &str) -> Result<DeviceProfile, String> {
        let (mut flops, mut half, mut vector, mut hbm, mut link, mut mem) =
            (None, None, None, None, None, 0i64);
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not KEY=VALUE"))?;
            let x = parse_si(value.trim()).ok_or_else(|| {
                format!("{key}: `{value}` is not a positive number (e.g. 312T, 1.5e12, 64G)")
            })?;
            match key.trim() {
                "flops" => flops = Some(x),
                "half" => half = Some(x),
                "vector" => vector = Some(x),
                "hbm" => hbm = Some(x),
                "link" => link = Some(x),
                "mem" => mem = x as i64,
                k => {
                    return Err(format!(
                        "unknown key `{k}` (flops, half, vector, hbm, link, mem)"
                    ))
                }
            }
        }
        let need = |v: Option<f64>, k: &str| v.ok_or_else(|| format!("`{k}=` is required"));
        let flops = need(flops, "flops")?;
        Ok(DeviceProfile {
            name: DeviceId::Custom(spec.to_string()),
            matrix_flops: flops,
            matrix_half_flops: half.unwrap_or(flops),
            vector_flops: vector.unwrap_or(flops),
            memory_bandwidth: need(hbm, "hbm")?,
            link_bandwidth: need(link, "link")?,
            memory_bytes: mem,
            source: "given on the command line".into(),
        })
    }

    /// FLOP/s of ops of `kind`.
    pub fn flops(&self, kind: ComputeKind) -> f64 {
        match kind {
            ComputeKind::Vector => self.vector_flops,
            ComputeKind::Matrix => self.matrix_flops,
            ComputeKind::MatrixHalf => self.matrix_half_flops,
        }
    }

    /// Roofline time of one op (or fused group), µs: `max(flops / compute, bytes / memory
    /// bandwidth)` with `bytes` read plus written (Williams et al., "Roofline", CACM 2009).
    pub fn op_us(&self, flops: f64, bytes: f64, kind: ComputeKind) -> f64 {
        (flops / self.flops(kind)).max(bytes / self.memory_bandwidth) * 1e6
    }

    /// Time to move `bytes` over the host link in one direction, µs.
    pub fn transfer_us(&self, bytes: f64) -> f64 {
        bytes / self.link_bandwidth * 1e6
    }

    /// True when every rate is finite and positive.
    pub fn is_valid(&self) -> bool {
        [
            self.matrix_flops,
            self.matrix_half_flops,
            self.vector_flops,
            self.memory_bandwidth,
            self.link_bandwidth,
        ]
        .iter()
        .all(|x| x.is_finite() && *x > 0.0)
    }
}

/// A positive finite number with an optional `K`/`M`/`G`/`T`/`P` suffix (powers of 1000).
fn parse_si(s: &str) -> Option<f64> {
    let (num, scale) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E') => {
            let scale = match c.to_ascii_uppercase() {
                'K' => 1e3,
                'M' => 1e6,
                'G' => 1e9,
                'T' => 1e12,
                'P' => 1e15,
                _ => return None,
            };
            (&s[..i], scale)
        }
        _ => (s, 1.0),
    };
    let x = num.parse::<f64>().ok()? * scale;
    (x.is_finite() && x > 0.0).then_some(x)
}
