//! Definitions that keep two upstream objects — and everything they pull in — out of the `ebb`
//! binary, so that every command starts faster (a cold `ebb plan` is a few milliseconds).
//!
//! A static link pulls an archive member when an object already linked references a symbol it
//! defines, and a member brings its static constructors, which run before `main`. Two members
//! are pulled only for symbols nothing in Ebb calls, and drag in most of LLVM and MLIR:
//! - `llvm-sys`'s C wrappers of LLVM's `static inline` target initializers (`target.c`): inkwell
//!   references `LLVM_InitializeAllTargets` & co. beside the `LLVM_InitializeNative*` it calls,
//!   and the "all" wrappers reference every backend LLVM was built with (AArch64, AMDGPU, ARM,
//!   Hexagon, Mips, RISC-V, …);
//! - MLIR's `CAPI/RegisterEverything` (`mlirRegisterAllDialects`, `mlirRegisterAllPasses`,
//!   `mlirRegisterAllLLVMTranslations`), which melior wraps: every upstream dialect, pass and
//!   translation, and through them again every LLVM backend. The importer registers no dialect
//!   (it parses the generic form with unregistered dialects allowed).
//!
//! The binary's own objects define every symbol of both members (the linker reads them before
//! any archive), so neither member is linked: 659 → 416 static constructors, 85.5 → 77.5 MB.
//! A member pulled anyway by a new reference would make the link fail on a duplicate symbol —
//! loudly, not silently. Only this binary does this; the libraries (`ebb-capi`, the Python
//! module) link as before.
//!
//! Invariant: the LLVM wrappers do what `llvm-c/Target.h`'s inlines of the same name do, over
//! the backends linked (the host — `x86_64` or `aarch64` — and NVPTX; on another host the
//! native ones return 1, which inkwell reports as an error); the MLIR ones are never called by
//! Ebb and abort with a message naming themselves if anything does.

#[cfg(feature = "jit")]
mod llvm_targets {
    /// LLVM's `LLVMBool`: non-zero is true (here: failure).
    type LlvmBool = i32;

    /// Declares the host's initializers `LLVMInitialize<Arch><Part>` and wraps each in a
    /// function of this module's `host` named after the part, returning 0 (success).
    macro_rules! host {
        ($arch:literal, $($part:ident = $sym:ident),+) => {
            #[cfg(target_arch = $arch)]
            mod host {
                extern "C" {
                    $(fn $sym();)+
                }
                $(
                    /// The host backend's initializer of this part; 0 (success).
                    pub(super) fn $part() -> super::LlvmBool {
                        // SAFETY: LLVM's target initializers take no arguments, touch only
                        // LLVM's registry and may be called any number of times.
                        unsafe { $sym() };
                        0
                    }
                )+
            }
        };
    }

    host!(
        "x86_64",
        info = LLVMInitializeX86TargetInfo,
        target = LLVMInitializeX86Target,
        mc = LLVMInitializeX86TargetMC,
        asm_printer = LLVMInitializeX86AsmPrinter,
        asm_parser = LLVMInitializeX86AsmParser,
        disassembler = LLVMInitializeX86Disassembler
    );
    host!(
        "aarch64",
        info = LLVMInitializeAArch64TargetInfo,
        target = LLVMInitializeAArch64Target,
        mc = LLVMInitializeAArch64TargetMC,
        asm_printer = LLVMInitializeAArch64AsmPrinter,
        asm_parser = LLVMInitializeAArch64AsmParser,
        disassembler = LLVMInitializeAArch64Disassembler
    );
    /// No native backend on this host: every part fails (1).
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    mod host {
        pub(super) fn info() -> super::LlvmBool {
            1
        }
        pub(super) fn target() -> super::LlvmBool {
            1
        }
        pub(super) fn mc() -> super::LlvmBool {
            1
        }
        pub(super) fn asm_printer() -> super::LlvmBool {
            1
        }
        pub(super) fn asm_parser() -> super::LlvmBool {
            1
        }
        pub(super) fn disassembler() -> super::LlvmBool {
            1
        }
    }

    extern "C" {
        fn LLVMInitializeNVPTXTargetInfo();
        fn LLVMInitializeNVPTXTarget();
        fn LLVMInitializeNVPTXTargetMC();
        fn LLVMInitializeNVPTXAsmPrinter();
    }

    /// `LLVMInitializeNativeTarget`: the host's target info, target and machine-code layer.
    #[no_mangle]
    extern "C" fn LLVM_InitializeNativeTarget() -> LlvmBool {
        host::info() | host::target() | host::mc()
    }

    /// `LLVMInitializeNativeAsmPrinter`: the host's assembly printer (object code emission).
    #[no_mangle]
    extern "C" fn LLVM_InitializeNativeAsmPrinter() -> LlvmBool {
        host::asm_printer()
    }

    /// `LLVMInitializeNativeAsmParser`: the host's assembly parser.
    #[no_mangle]
    extern "C" fn LLVM_InitializeNativeAsmParser() -> LlvmBool {
        host::asm_parser()
    }

    /// `LLVMInitializeNativeDisassembler`: the host's disassembler.
    #[no_mangle]
    extern "C" fn LLVM_InitializeNativeDisassembler() -> LlvmBool {
        host::disassembler()
    }

    /// `LLVMInitializeAllTargetInfos` over the backends linked: the host and NVPTX.
    #[no_mangle]
    extern "C" fn LLVM_InitializeAllTargetInfos() {
        let _ = host::info();
        // SAFETY: as in `host`.
        unsafe { LLVMInitializeNVPTXTargetInfo() };
    }

    /// `LLVMInitializeAllTargets` over the backends linked: the host and NVPTX.
    #[no_mangle]
    extern "C" fn LLVM_InitializeAllTargets() {
        let _ = host::target();
        // SAFETY: as in `host`.
        unsafe { LLVMInitializeNVPTXTarget() };
    }

    /// `LLVMInitializeAllTargetMCs` over the backends linked: the host and NVPTX.
    #[no_mangle]
    extern "C" fn LLVM_InitializeAllTargetMCs() {
        let _ = host::mc();
        // SAFETY: as in `host`.
        unsafe { LLVMInitializeNVPTXTargetMC() };
    }

    /// `LLVMInitializeAllAsmPrinters` over the backends linked: the host and NVPTX.
    #[no_mangle]
    extern "C" fn LLVM_InitializeAllAsmPrinters() {
        let _ = host::asm_printer();
        // SAFETY: as in `host`.
        unsafe { LLVMInitializeNVPTXAsmPrinter() };
    }

    /// `LLVMInitializeAllAsmParsers` over the backends linked: the host's (NVPTX has none).
    #[no_mangle]
    extern "C" fn LLVM_InitializeAllAsmParsers() {
        let _ = host::asm_parser();
    }

    /// `LLVMInitializeAllDisassemblers` over the backends linked: the host's (NVPTX has none).
    #[no_mangle]
    extern "C" fn LLVM_InitializeAllDisassemblers() {
        let _ = host::disassembler();
    }
}

#[cfg(feature = "stablehlo")]
mod mlir_registry {
    use std::ffi::c_void;

    /// Aborts: `what` is not linked into `ebb`.
    fn not_linked(what: &str) -> ! {
        eprintln!("ebb: {what} is not linked into this binary (see compiler/src/bin/ebb/link.rs)");
        std::process::abort()
    }

    /// `void mlirRegisterAllDialects(MlirDialectRegistry)`: not linked; aborts.
    #[no_mangle]
    extern "C" fn mlirRegisterAllDialects(_registry: *mut c_void) {
        not_linked("mlirRegisterAllDialects")
    }

    /// `void mlirRegisterAllLLVMTranslations(MlirContext)`: not linked; aborts.
    #[no_mangle]
    extern "C" fn mlirRegisterAllLLVMTranslations(_context: *mut c_void) {
        not_linked("mlirRegisterAllLLVMTranslations")
    }

    /// `void mlirRegisterAllPasses(void)`: not linked; aborts.
    #[no_mangle]
    extern "C" fn mlirRegisterAllPasses() {
        not_linked("mlirRegisterAllPasses")
    }
}
