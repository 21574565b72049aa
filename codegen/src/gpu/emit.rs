//! The LLVM side of the GPU kernels (feature `llvm`): each [`GpuKernel`]'s `{name}.core`
//! function, its NVPTX entry and PTX text ([`ptx`]), and its simt entry compiled for the host
//! ([`simt`]); see the parent module for the kernel ABI.

use super::{GpuKernel, SimtFn, MAX_PARAM_BYTES, PTX_FEATURES, SM, TRIPLE};
use crate::lower::{Emit, LowerError};
use crate::spec::{KernelSpec, StrideClass};
use crate::{CodegenError, Target};
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target as LlvmTarget, TargetMachine,
    TargetTriple,
};
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate, OptimizationLevel};

impl GpuKernel {
    /// Emits `{name}.core` (see the module docs).
    fn emit_core<'ctx>(
        &self,
        ctx: &'ctx Context,
        module: &Module<'ctx>,
        name: &str,
    ) -> Result<FunctionValue<'ctx>, LowerError> {
        let (nb, np) = (self.buffers(), self.params());
        let ptr = ctx.ptr_type(AddressSpace::default());
        let (i32t, i64t) = (ctx.i32_type(), ctx.i64_type());
        let mut sig: Vec<BasicMetadataTypeEnum> = vec![i32t.into(); 4];
        sig.extend(std::iter::repeat_n(
            BasicMetadataTypeEnum::from(ptr),
            nb + 1,
        ));
        let core = module.add_function(
            &format!("{name}.core"),
            ctx.void_type().fn_type(&sig, false),
            Some(Linkage::Internal),
        );
        core.add_attribute(
            AttributeLoc::Function,
            ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("alwaysinline"), 0),
        );
        let param = |k: usize| {
            core.get_nth_param(k as u32)
                .ok_or_else(|| LowerError::Other("missing parameter".into()))
        };
        let sreg: Vec<IntValue> = (0..4)
            .map(|k| param(k).map(|p| p.into_int_value()))
            .collect::<Result<_, _>>()?;
        let bufs: Vec<PointerValue> = (0..nb)
            .map(|k| param(4 + k).map(|p| p.into_pointer_value()))
            .collect::<Result<_, _>>()?;
        let block = param(4 + nb)?.into_pointer_value();
        let b = ctx.create_builder();
        let e = Emit::new(ctx, &b, module, Target::Gpu);
        let entry = ctx.append_basic_block(core, "entry");
        b.position_at_end(entry);
        // The parameters a kernel reads by position; a fusion reads its layout's through the
        // block itself (`prepare`), and only `n` here.
        let loaded = match self {
            GpuKernel::Fusion { .. } => 1,
            _ => np,
        };
        let params: Vec<IntValue> = (0..loaded)
            .map(|k| {
                // SAFETY: the block holds `np` parameters.
                let at = unsafe {
                    b.build_in_bounds_gep(i64t, block, &[i64t.const_int(k as u64, false)], "")?
                };
                Ok(b.build_load(i64t, at, "")?.into_int_value())
            })
            .collect::<Result<_, LowerError>>()?;
        let wide = |v: IntValue<'ctx>| b.build_int_z_extend(v, i64t, "");
        let (tid, ntid, ctaid, nctaid) = (
            wide(sreg[0])?,
            wide(sreg[1])?,
            wide(sreg[2])?,
            wide(sreg[3])?,
        );
        let start = b.build_int_add(b.build_int_mul(ctaid, ntid, "")?, tid, "")?;
        let stride = b.build_int_mul(ntid, nctaid, "")?;
        let prep = self.prepare(&e, block)?;
        let n = params[0];
        let pre = current(&b)?;
        let head = ctx.append_basic_block(core, "grid");
        let body = ctx.append_basic_block(core, "grid.body");
        let exit = ctx.append_basic_block(core, "exit");
        b.build_unconditional_branch(head)?;
        b.position_at_end(head);
        let i_phi = b.build_phi(i64t, "i")?;
        let i = i_phi.as_basic_value().into_int_value();
        let more = b.build_int_compare(IntPredicate::SLT, i, n, "")?;
        b.build_conditional_branch(more, body, exit)?;
        b.position_at_end(body);
        self.element(&e, core, name, &bufs, &params, &prep, i)?;
        let next = b.build_int_add(i, stride, "")?;
        let latch = current(&b)?;
        b.build_unconditional_branch(head)?;
        i_phi.add_incoming(&[(&start, pre), (&next, latch)]);
        b.position_at_end(exit);
        b.build_return(None)?;
        Ok(core)
    }

    /// A fusion's parameter array: its layout's parameters, read in place from the launch's
    /// parameter block (after `n`), never copied (a copy would sit in each thread's local
    /// memory).
    fn prepare<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        block: PointerValue<'ctx>,
    ) -> Result<Option<PointerValue<'ctx>>, LowerError> {
        let GpuKernel::Fusion { .. } = self else {
            return Ok(None);
        };
        let i64t = e.ctx.i64_type();
        // SAFETY: the block holds `n` and then the layout's parameters.
        let arr = unsafe {
            e.b.build_in_bounds_gep(i64t, block, &[i64t.const_int(1, false)], "")?
        };
        Ok(Some(arr))
    }

    /// Emits the work of element `i`.
    #[allow(clippy::too_many_arguments)]
    fn element<'ctx>(
        &self,
        e: &Emit<'_, 'ctx>,
        core: FunctionValue<'ctx>,
        name: &str,
        bufs: &[PointerValue<'ctx>],
        params: &[IntValue<'ctx>],
        prep: &Option<PointerValue<'ctx>>,
        i: IntValue<'ctx>,
    ) -> Result<(), LowerError> {
        match self {
            GpuKernel::Fusion { region, layout } => {
                let classes = vec![StrideClass::Any; layout.maps.len()];
                let spec = KernelSpec {
                    region,
                    layout,
                    classes: &classes,
                    in_place: &[],
                };
                let (body, _) =
                    crate::lower::emit_body(e.ctx, e.module, &spec, name, &[], Target::Gpu)?;
                let arr = prep.ok_or_else(|| LowerError::Other("no parameter array".into()))?;
                let one = e.ctx.i64_type().const_int(1, false);
                let mut args: Vec<inkwell::values::BasicMetadataValueEnum> =
                    bufs.iter().map(|&p| p.into()).collect();
                args.push(arr.into());
                args.push(i.into());
                args.push(e.b.build_int_add(i, one, "")?.into());
                e.b.build_call(body, &args, "")?;
                Ok(())
            }
            GpuKernel::Copy(c) => c.element(e, core, bufs, params, i),
            GpuKernel::Reduce(r) => r.element(e, core, bufs, params, i),
            GpuKernel::Gather(g) => g.element(e, bufs, params, i),
            GpuKernel::Scatter(s) => s.element(e, core, bufs, params, i),
            GpuKernel::Im2col(k) => k.element(e, bufs, params, i),
            GpuKernel::Window(k) => k.element(e, core, bufs, params, i),
            GpuKernel::Rng(k) => k.element(e, core, bufs, params, i),
        }
    }

    /// Builds the module of this kernel for `target` (`true`: NVPTX entry, else simt).
    fn build<'ctx>(
        &self,
        ctx: &'ctx Context,
        module: &Module<'ctx>,
        nvptx: bool,
    ) -> Result<String, LowerError> {
        let name = self.name();
        let core = self.emit_core(ctx, module, &name)?;
        let (nb, np) = (self.buffers(), self.params());
        let ptr = ctx.ptr_type(AddressSpace::default());
        let (i32t, i64t) = (ctx.i32_type(), ctx.i64_type());
        let void = ctx.void_type();
        let b = ctx.create_builder();
        if nvptx {
            // Buffers, then the parameter block: one `.param .align 8 .b8 [8·np]` read in
            // place (`byval` + `nvvm.grid_constant`: `ld.param`, or `cvta.param` where the
            // address is passed on), so no thread copies it into local memory.
            let sig: Vec<BasicMetadataTypeEnum> = vec![ptr.into(); nb + 1];
            let f = module.add_function(&name, void.fn_type(&sig, false), None);
            f.set_call_conventions(PTX_KERNEL_CC);
            let block_ty = i64t.array_type(np as u32);
            let at = AttributeLoc::Param(nb as u32);
            f.add_attribute(
                at,
                ctx.create_type_attribute(
                    Attribute::get_named_enum_kind_id("byval"),
                    block_ty.into(),
                ),
            );
            f.add_attribute(
                at,
                ctx.create_enum_attribute(Attribute::get_named_enum_kind_id("align"), 8),
            );
            f.add_attribute(at, ctx.create_string_attribute("nvvm.grid_constant", ""));
            let entry = ctx.append_basic_block(f, "entry");
            b.position_at_end(entry);
            let mut args: Vec<inkwell::values::BasicMetadataValueEnum> = Vec::new();
            for s in ["tid.x", "ntid.x", "ctaid.x", "nctaid.x"] {
                args.push(sreg(ctx, module, &b, s)?.into());
            }
            for k in 0..=nb {
                args.push(
                    f.get_nth_param(k as u32)
                        .ok_or_else(|| LowerError::Other("missing parameter".into()))?
                        .into(),
                );
            }
            b.build_call(core, &args, "")?;
            b.build_return(None)?;
            Ok(name)
        } else {
            let simt = format!("{name}.simt");
            let f = module.add_function(
                &simt,
                void.fn_type(
                    &[
                        ptr.into(),
                        i32t.into(),
                        i32t.into(),
                        i32t.into(),
                        i32t.into(),
                    ],
                    false,
                ),
                None,
            );
            let p = |k: u32| {
                f.get_nth_param(k)
                    .ok_or_else(|| LowerError::Other("missing parameter".into()))
            };
            let (argv, nctaid, ntid, b0, b1) = (
                p(0)?.into_pointer_value(),
                p(1)?.into_int_value(),
                p(2)?.into_int_value(),
                p(3)?.into_int_value(),
                p(4)?.into_int_value(),
            );
            let entry = ctx.append_basic_block(f, "entry");
            b.position_at_end(entry);
            let mut fixed: Vec<inkwell::values::BasicMetadataValueEnum> = Vec::new();
            for k in 0..=nb {
                // SAFETY: the caller passes `nb + np` slots: the buffers' pointers, then the
                // parameter block.
                let at = unsafe {
                    b.build_in_bounds_gep(i64t, argv, &[i64t.const_int(k as u64, false)], "")?
                };
                fixed.push(if k < nb {
                    b.build_load(ptr, at, "")?.into()
                } else {
                    at.into()
                });
            }
            // for ctaid in [b0, b1): for tid in [0, ntid): core(tid, ntid, ctaid, nctaid, ..)
            let outer = ctx.append_basic_block(f, "block");
            let outer_body = ctx.append_basic_block(f, "block.body");
            let inner = ctx.append_basic_block(f, "thread");
            let inner_body = ctx.append_basic_block(f, "thread.body");
            let outer_latch = ctx.append_basic_block(f, "block.next");
            let exit = ctx.append_basic_block(f, "exit");
            b.build_unconditional_branch(outer)?;
            b.position_at_end(outer);
            let c_phi = b.build_phi(i32t, "ctaid")?;
            let c = c_phi.as_basic_value().into_int_value();
            let more = b.build_int_compare(IntPredicate::ULT, c, b1, "")?;
            b.build_conditional_branch(more, outer_body, exit)?;
            b.position_at_end(outer_body);
            b.build_unconditional_branch(inner)?;
            b.position_at_end(inner);
            let t_phi = b.build_phi(i32t, "tid")?;
            let t = t_phi.as_basic_value().into_int_value();
            let more = b.build_int_compare(IntPredicate::ULT, t, ntid, "")?;
            b.build_conditional_branch(more, inner_body, outer_latch)?;
            b.position_at_end(inner_body);
            let mut args: Vec<inkwell::values::BasicMetadataValueEnum> =
                vec![t.into(), ntid.into(), c.into(), nctaid.into()];
            args.extend(fixed);
            b.build_call(core, &args, "")?;
            let t_next = b.build_int_add(t, i32t.const_int(1, false), "")?;
            b.build_unconditional_branch(inner)?;
            t_phi.add_incoming(&[(&i32t.const_zero(), outer_body), (&t_next, inner_body)]);
            b.position_at_end(outer_latch);
            let c_next = b.build_int_add(c, i32t.const_int(1, false), "")?;
            b.build_unconditional_branch(outer)?;
            c_phi.add_incoming(&[(&b0, entry), (&c_next, outer_latch)]);
            b.position_at_end(exit);
            b.build_return(None)?;
            Ok(simt)
        }
    }
}

/// A stack slot of type `ty` in `f`'s entry block (where SROA promotes it to registers).
pub(crate) fn entry_alloca<'ctx>(
    e: &Emit<'_, 'ctx>,
    f: FunctionValue<'ctx>,
    ty: inkwell::types::BasicTypeEnum<'ctx>,
) -> Result<PointerValue<'ctx>, LowerError> {
    let entry = f
        .get_first_basic_block()
        .ok_or_else(|| LowerError::Other("no entry block".into()))?;
    let b = e.ctx.create_builder();
    match entry.get_first_instruction() {
        Some(i) => b.position_before(&i),
        None => b.position_at_end(entry),
    }
    Ok(b.build_alloca(ty, "")?)
}

/// Emits `for (i = lo; i < hi; i++) body(i)` (signed compare) at the builder's position,
/// leaving the builder after the loop.
pub(crate) fn for_range<'ctx>(
    e: &Emit<'_, 'ctx>,
    f: FunctionValue<'ctx>,
    lo: IntValue<'ctx>,
    hi: IntValue<'ctx>,
    mut body: impl FnMut(IntValue<'ctx>) -> Result<(), LowerError>,
) -> Result<(), LowerError> {
    let b = e.b;
    let pre = current(b)?;
    let head = e.ctx.append_basic_block(f, "loop");
    let bb = e.ctx.append_basic_block(f, "loop.body");
    let exit = e.ctx.append_basic_block(f, "loop.exit");
    b.build_unconditional_branch(head)?;
    b.position_at_end(head);
    let phi = b.build_phi(lo.get_type(), "k")?;
    let k = phi.as_basic_value().into_int_value();
    let more = b.build_int_compare(IntPredicate::SLT, k, hi, "")?;
    b.build_conditional_branch(more, bb, exit)?;
    b.position_at_end(bb);
    body(k)?;
    let next = b.build_int_add(k, lo.get_type().const_int(1, false), "")?;
    let latch = current(b)?;
    b.build_unconditional_branch(head)?;
    phi.add_incoming(&[(&lo, pre), (&next, latch)]);
    b.position_at_end(exit);
    Ok(())
}

/// LLVM's `ptx_kernel` calling convention (a kernel entry of an NVPTX module).
const PTX_KERNEL_CC: u32 = 71;

/// One window tap of a `convolution` or `reduce_window` (StableHLO spec, §convolution and
/// §reduce_window): output coordinate `out`, tap `tap`, at position
/// `out * stride + tap * tap_dilation - pad_low` of the base-dilated operand. Returns whether
/// the tap reads a real element (position non-negative, on a multiple of `base_dilation`, the
/// coordinate below `extent`: padding and dilation holes read nothing) and the operand
/// coordinate (`position / base_dilation`; meaningless where the tap is not real).
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_tap<'ctx>(
    b: &Builder<'ctx>,
    out: IntValue<'ctx>,
    stride: IntValue<'ctx>,
    tap: IntValue<'ctx>,
    tap_dilation: IntValue<'ctx>,
    pad_low: IntValue<'ctx>,
    base_dilation: IntValue<'ctx>,
    extent: IntValue<'ctx>,
) -> Result<(IntValue<'ctx>, IntValue<'ctx>), LowerError> {
    let pos = b.build_int_sub(
        b.build_int_add(
            b.build_int_mul(out, stride, "")?,
            b.build_int_mul(tap, tap_dilation, "")?,
            "",
        )?,
        pad_low,
        "",
    )?;
    grid_coordinate(b, pos, base_dilation, extent)
}

/// The coordinate `pos / step` on a grid of `extent` points spaced `step` apart, and whether
/// `pos` is one of them (non-negative, a multiple of `step`, the coordinate below `extent`).
pub(crate) fn grid_coordinate<'ctx>(
    b: &Builder<'ctx>,
    pos: IntValue<'ctx>,
    step: IntValue<'ctx>,
    extent: IntValue<'ctx>,
) -> Result<(IntValue<'ctx>, IntValue<'ctx>), LowerError> {
    let zero = pos.get_type().const_zero();
    let nonneg = b.build_int_compare(IntPredicate::SGE, pos, zero, "")?;
    let safe = b.build_select(nonneg, pos, zero, "")?.into_int_value();
    let on_grid = b.build_int_compare(
        IntPredicate::EQ,
        b.build_int_unsigned_rem(safe, step, "")?,
        zero,
        "",
    )?;
    let at = b.build_int_unsigned_div(safe, step, "")?;
    let inside = b.build_int_compare(IntPredicate::SLT, at, extent, "")?;
    let real = b.build_and(nonneg, b.build_and(on_grid, inside, "")?, "")?;
    Ok((real, at))
}

fn current<'ctx>(b: &Builder<'ctx>) -> Result<inkwell::basic_block::BasicBlock<'ctx>, LowerError> {
    b.get_insert_block()
        .ok_or_else(|| LowerError::Other("no insert block".into()))
}

/// Reads the special register `%{reg}` (`tid.x`, ...).
fn sreg<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    b: &Builder<'ctx>,
    reg: &str,
) -> Result<IntValue<'ctx>, LowerError> {
    let name = format!("llvm.nvvm.read.ptx.sreg.{reg}");
    let f = module
        .get_function(&name)
        .unwrap_or_else(|| module.add_function(&name, ctx.i32_type().fn_type(&[], false), None));
    b.build_call(f, &[], "")?
        .try_as_basic_value()
        .basic()
        .map(|v| v.into_int_value())
        .ok_or_else(|| LowerError::Other(format!("{name} returns nothing")))
}

fn nvptx_machine() -> Result<TargetMachine, String> {
    LlvmTarget::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create(TRIPLE);
    let target = LlvmTarget::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            SM,
            PTX_FEATURES,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| format!("LLVM has no target machine for {TRIPLE}"))
}

/// The LLVM IR of `kernel` for the NVPTX target, before optimization (for inspection).
///
/// # Errors
/// [`CodegenError::Jit`] when the IR cannot be built or verified.
pub fn nvptx_ir(kernel: &GpuKernel) -> Result<String, CodegenError> {
    let ctx = Context::create();
    let module = ctx.create_module(&kernel.name());
    module.set_triple(&TargetTriple::create(TRIPLE));
    kernel
        .build(&ctx, &module, true)
        .map_err(|e| CodegenError::Jit(e.to_string()))?;
    module
        .verify()
        .map_err(|e| CodegenError::Jit(format!("invalid IR: {e}")))?;
    Ok(module.print_to_string().to_string())
}

/// The PTX text of `kernel` (entry [`GpuKernel::name`]), optimized at `-O3`; cached for the
/// life of the process by the entry's name (the structure hash: equal names, equal code), so
/// plans and schedule variants sharing a kernel compile it once.
///
/// # Errors
/// [`CodegenError::Jit`] when the kernel takes more than [`MAX_PARAM_BYTES`] of parameters
/// (no driver would load it), or when LLVM cannot build, verify or compile it (not cached).
pub fn ptx(kernel: &GpuKernel) -> Result<String, CodegenError> {
    type PtxCache = std::sync::Mutex<std::collections::HashMap<String, String>>;
    static CACHE: std::sync::OnceLock<PtxCache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let name = kernel.name();
    if let Some(text) = cache.lock().ok().and_then(|c| c.get(&name).cloned()) {
        return Ok(text);
    }
    let text = compile_ptx(kernel)?;
    if let Ok(mut c) = cache.lock() {
        c.insert(name, text.clone());
    }
    Ok(text)
}

/// [`ptx`] without the cache.
fn compile_ptx(kernel: &GpuKernel) -> Result<String, CodegenError> {
    let err = |e: String| CodegenError::Jit(format!("{}: {e}", kernel.name()));
    if kernel.param_bytes() > MAX_PARAM_BYTES {
        return Err(err(format!(
            "the kernel takes {} bytes of parameters ({} buffers, {} integers); CUDA allows \
             at most {MAX_PARAM_BYTES}",
            kernel.param_bytes(),
            kernel.buffers(),
            kernel.params()
        )));
    }
    let tm = nvptx_machine().map_err(err)?;
    let ctx = Context::create();
    let module = ctx.create_module(&kernel.name());
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    kernel
        .build(&ctx, &module, true)
        .map_err(|e| err(e.to_string()))?;
    module
        .verify()
        .map_err(|e| err(format!("invalid IR: {e}")))?;
    module
        .run_passes("default<O3>", &tm, PassBuilderOptions::create())
        .map_err(|e| err(e.to_string()))?;
    let buf = tm
        .write_to_memory_buffer(&module, FileType::Assembly)
        .map_err(|e| err(e.to_string()))?;
    String::from_utf8(buf.as_slice().to_vec()).map_err(|e| err(e.to_string()))
}

/// `kernel` compiled for the host with its simt entry (see the module docs), cached by key
/// for the life of the process. Optimized at `default<O1>` ([`crate::jit::Pipeline::CompileTime`]):
/// the simulated device checks a step's kernels; the same bits as at `-O3`.
///
/// # Errors
/// [`CodegenError::Jit`] when LLVM cannot build or compile the kernel.
pub fn simt(kernel: &GpuKernel) -> Result<SimtFn, CodegenError> {
    let k = kernel.clone();
    let addr = crate::jit::module(
        format!("simt\n{}", kernel.key()),
        Box::new(move |ctx, module| k.build(ctx, module, false).map_err(|e| e.to_string())),
        crate::jit::Pipeline::CompileTime,
    )?;
    // SAFETY: `addr` is the simt entry emitted by `build`, with the `SimtFn` ABI, kept alive
    // by its engine for the life of the process.
    Ok(unsafe { std::mem::transmute::<usize, SimtFn>(addr) })
}
