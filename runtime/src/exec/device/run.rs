//! Running a [`DeviceProgram`] on a [`Device`]: the commands issued in order, the host calls
//! answered by the CPU kernels, the memory model tracked ([`super::tracker`]), the outputs
//! read back (or handed out in device memory).

use super::program::{Cmd, DeviceProgram};
use super::tracker::Tracker;
use super::{Device, DeviceError, HostCall, Space, StepInput, StepTensor, COMPUTE};
use crate::error::ExecError;
use crate::exec::{OutType, Program};
use crate::tensor::{Data, Tensor};
use std::time::{Duration, Instant};

/// What a device run measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DeviceStats {
    /// The device's name.
    pub device: String,
    /// Peak of held and charged bytes (the plan's model, measured by the executor's record
    /// of every claim and release; equals the planned peak).
    pub peak_bytes: u64,
    /// Program point of that peak.
    pub peak_point: usize,
    /// Highest arena byte held.
    pub arena_high_water_bytes: u64,
    /// Highest scratch byte used by recompute temporaries (workspace is not held).
    pub scratch_high_water_bytes: u64,
    /// Wall time from the first command to the outputs read back.
    pub wall: Duration,
    /// Part of it spent in host calls.
    pub host_time: Duration,
    /// Device memory the device reports holding after the allocations (where it can).
    pub device_bytes: Option<u64>,
    /// Largest held and charged bytes during each program point.
    #[serde(skip)]
    pub per_point: Vec<u64>,
}

fn device_err(graph: &str, e: DeviceError) -> ExecError {
    match e {
        DeviceError::Host(e) => *e,
        e => ExecError::Plan {
            graph: graph.to_string(),
            msg: format!("device: {e}"),
        },
    }
}

/// A tensor of type `ty` from its little-endian bytes.
pub(crate) fn tensor_from_bytes(ty: &OutType, bytes: &[u8]) -> Tensor {
    let n: usize = ty.shape.iter().product();
    let mut d = Data::zeros(ty.dtype, n);
    let len = (n as u64 * ty.dtype.size_bytes()) as usize;
    if len > 0 && bytes.len() >= len {
        // SAFETY: `d` holds `n` elements of `len` bytes; every bit pattern read is one the
        // device wrote for this type (booleans as 0/1).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), d.as_mut_ptr(), len) };
    }
    Tensor::from_parts(ty.shape.clone(), d)
}

impl DeviceProgram {
    /// Runs the program on `dev` with `inputs` (graph input order), calling `on_point(p)` as
    /// point `p` is issued. Returns the outputs (read back to the host, or with `on_device`
    /// copied into device allocations the caller owns: [`Device::export`]) and what was
    /// measured.
    ///
    /// # Errors
    /// [`ExecError`]: inputs that do not match, a device failure, a host kernel failure, or a
    /// claim on bytes still held (a bug in the plan or the lowering).
    pub fn run(
        &self,
        prog: &Program,
        dev: &mut dyn Device,
        inputs: Vec<StepInput>,
        on_device: bool,
        on_point: &mut dyn FnMut(usize),
    ) -> Result<(Vec<StepTensor>, DeviceStats), ExecError> {
        let g = prog.g;
        let name = g.name.clone();
        let derr = |e: DeviceError| device_err(&name, e);
        if inputs.len() != prog.prep.inputs.len() {
            return Err(ExecError::InputCount {
                graph: name.clone(),
                expected: prog.prep.inputs.len(),
                got: inputs.len(),
            });
        }
        for (i, (t, ty)) in inputs.iter().zip(&prog.prep.inputs).enumerate() {
            let (dtype, shape) = match t {
                StepInput::Host(t) => (t.dtype(), t.shape()),
                StepInput::Device { dtype, shape, .. } => (*dtype, shape.as_slice()),
            };
            if dtype != ty.dtype || shape != ty.shape.as_slice() {
                return Err(ExecError::InputMismatch {
                    graph: name.clone(),
                    index: i,
                    name: g.input_name(g.inputs()[i]).to_string(),
                    expected: crate::exec::fmt_type(ty.dtype, &ty.shape),
                    got: crate::exec::fmt_type(dtype, shape),
                });
            }
        }
        let t0 = Instant::now();
        dev.alloc(Space::Arena, self.stats.arena_bytes)
            .map_err(derr)?;
        dev.alloc(Space::Scratch, self.stats.scratch_bytes)
            .map_err(derr)?;
        dev.alloc_host_pool(self.stats.pool_bytes).map_err(derr)?;
        let device_bytes = dev.device_bytes();
        let mut tracker = Tracker::default();
        let mut host_time = Duration::ZERO;
        let types = &self.types;
        let mut host =
            |call: &HostCall, bytes: Vec<Vec<u8>>| -> Result<(Vec<Vec<u8>>, u64), ExecError> {
                let t = Instant::now();
                let s = &prog.prep.steps[call.step];
                let operands: Vec<Tensor> = s
                    .operands
                    .iter()
                    .zip(&bytes)
                    .map(|(&v, b)| tensor_from_bytes(&types[v as usize], b))
                    .collect();
                let (results, transient) = prog.run_kernel(call.step, s, operands, None)?;
                host_time += t.elapsed();
                Ok((results.iter().map(Tensor::to_le_bytes).collect(), transient))
            };
        for cmd in &self.cmds {
            match cmd {
                Cmd::Point(p) => {
                    if *p > 0 {
                        on_point(*p - 1);
                    }
                    tracker.point(*p);
                }
                Cmd::Claim { range, value } => {
                    tracker
                        .claim(*range, *value)
                        .map_err(|msg| ExecError::Plan {
                            graph: name.clone(),
                            msg,
                        })?
                }
                Cmd::Release { range } => tracker.release(*range),
                Cmd::Charge(b) => tracker.charge(*b),
                Cmd::Input { index, dst, .. } => match &inputs[*index] {
                    StepInput::Host(t) => dev.upload(COMPUTE, *dst, &t.to_le_bytes()),
                    StepInput::Device { ptr, dtype, shape } => {
                        let n: usize = shape.iter().product();
                        let bytes = n as u64 * dtype.size_bytes();
                        dev.upload_device(COMPUTE, *dst, *ptr, bytes)
                    }
                }
                .map_err(derr)?,
                Cmd::Work { stream, work, .. } => {
                    use super::lower::Work;
                    match work {
                        Work::Launch(l) => dev.launch(*stream, l),
                        Work::Gemm(gm) => dev.gemm(*stream, gm),
                        Work::Copy { t, bytes } => dev.copy(*stream, *t, *bytes),
                        Work::Upload { dst, data } => dev.upload(*stream, *dst, data),
                    }
                    .map_err(derr)?
                }
                Cmd::Host { call, charge, .. } => {
                    let t = dev.host_call(COMPUTE, call, &mut host).map_err(derr)?;
                    if *charge {
                        tracker.charge(t);
                    }
                }
                Cmd::Record { stream, event } => dev.record(*stream, *event).map_err(derr)?,
                Cmd::Wait { stream, event } => dev.wait(*stream, *event).map_err(derr)?,
            }
        }
        dev.synchronize().map_err(derr)?;
        if !prog.prep.steps.is_empty() {
            on_point(prog.prep.steps.len() - 1);
        }
        let mut outs = Vec::with_capacity(self.outputs.len());
        for (r, ty) in &self.outputs {
            if on_device {
                outs.push(StepTensor::Device {
                    buf: dev.export(*r).map_err(derr)?,
                    dtype: ty.dtype,
                    shape: ty.shape.clone(),
                });
                continue;
            }
            let bytes = if r.bytes == 0 {
                Vec::new()
            } else {
                dev.download(*r).map_err(derr)?
            };
            outs.push(StepTensor::Host(tensor_from_bytes(ty, &bytes)));
        }
        let stats = DeviceStats {
            device: dev.name().to_string(),
            peak_bytes: tracker.peak,
            peak_point: tracker.peak_point,
            arena_high_water_bytes: tracker.high_water[0],
            scratch_high_water_bytes: tracker.high_water[1],
            wall: t0.elapsed(),
            host_time,
            device_bytes,
            per_point: tracker.per_point,
        };
        Ok((outs, stats))
    }
}
