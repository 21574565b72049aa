//! Loads kernels' object code into the process: one ORC `LLJIT` (LLVM's C API,
//! `llvm-c/LLJIT.h`) links each object (compiled now, or read from the on-disk cache) into
//! executable memory and resolves its calls to libm through the process's own symbols. The
//! memory lives as long as the process (the `LLJIT` is never disposed), as the kernel
//! function pointers handed out do.
//!
//! With `EBB_PERF_MAP` set, each linked kernel's entry (address, size from the object's
//! symbol table, symbol) is appended to `/tmp/perf-<pid>.map`, the file `perf report` reads to
//! name JIT code.

use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcLLJITAddObjectFile, LLVMOrcLLJITGetGlobalPrefix,
    LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup, LLVMOrcLLJITRef,
};
use llvm_sys::orc2::{
    LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess, LLVMOrcExecutorAddress,
    LLVMOrcJITDylibAddGenerator,
};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

/// The process's `LLJIT` and the kernels linked so far (symbol → address).
struct Loader {
    jit: LLVMOrcLLJITRef,
    loaded: HashMap<String, usize>,
}

// SAFETY: `LLJIT` is thread-safe; every use goes through the mutex of `loader()` anyway.
unsafe impl Send for Loader {}

/// The message of an `LLVMErrorRef` (consumed), `Ok` for no error.
fn check(err: LLVMErrorRef, what: &str) -> Result<(), String> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: `err` is an error LLVM returned; reading its message consumes it.
    unsafe {
        let msg = LLVMGetErrorMessage(err);
        let text = CStr::from_ptr(msg).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(msg);
        Err(format!("{what}: {text}"))
    }
}

impl Loader {
    fn new() -> Result<Loader, String> {
        use inkwell::targets::{InitializationConfig, Target};
        Target::initialize_native(&InitializationConfig::default())?;
        let mut jit: LLVMOrcLLJITRef = std::ptr::null_mut();
        // SAFETY: plain C API calls on handles LLVM just created; a null builder is the
        // default one (the host's target).
        unsafe {
            check(
                LLVMOrcCreateLLJIT(&mut jit, std::ptr::null_mut()),
                "creating LLJIT",
            )?;
            let mut gen = std::ptr::null_mut();
            check(
                LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                    &mut gen,
                    LLVMOrcLLJITGetGlobalPrefix(jit),
                    None,
                    std::ptr::null_mut(),
                ),
                "resolving the process's symbols",
            )?;
            LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit), gen);
        }
        Ok(Loader {
            jit,
            loaded: HashMap::new(),
        })
    }

    /// Links `object` (once per `symbol`) and returns the address of `symbol`.
    fn load(&mut self, object: &[u8], symbol: &str) -> Result<usize, String> {
        if let Some(&a) = self.loaded.get(symbol) {
            return Ok(a);
        }
        let name = CString::new(symbol).map_err(|e| e.to_string())?;
        let mut addr: LLVMOrcExecutorAddress = 0;
        // SAFETY: the buffer is a copy LLVM owns (AddObjectFile takes it); `name` outlives the
        // lookup.
        unsafe {
            let buf = llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(
                object.as_ptr().cast(),
                object.len(),
                name.as_ptr(),
            );
            let jd = LLVMOrcLLJITGetMainJITDylib(self.jit);
            check(
                LLVMOrcLLJITAddObjectFile(self.jit, jd, buf),
                "adding the kernel's object code",
            )?;
            check(
                LLVMOrcLLJITLookup(self.jit, &mut addr, name.as_ptr()),
                "linking the kernel",
            )?;
        }
        let addr = usize::try_from(addr).map_err(|e| e.to_string())?;
        if std::env::var_os("EBB_PERF_MAP").is_some() {
            perf_map(object, symbol, addr);
        }
        self.loaded.insert(symbol.to_string(), addr);
        Ok(addr)
    }
}

/// Appends `symbol`'s line (`addr size name`, hex) to `/tmp/perf-<pid>.map`; the size is the
/// symbol's in `object` (0 when it cannot be read). A debugging aid: errors are ignored.
fn perf_map(object: &[u8], symbol: &str, addr: usize) {
    use std::io::Write;
    let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(object, symbol);
    let mut size = 0;
    if let Ok(bin) = buf.create_binary_file(None) {
        if let Some(mut syms) = bin.get_symbols() {
            while let Some(s) = syms.next_symbol() {
                if s.get_name().and_then(|n| n.to_str().ok()) == Some(symbol) {
                    size = s.get_size();
                }
            }
        }
    }
    let path = format!("/tmp/perf-{}.map", std::process::id());
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "{addr:x} {size:x} {symbol}");
    }
}

fn loader() -> &'static Mutex<Result<Loader, String>> {
    static L: OnceLock<Mutex<Result<Loader, String>>> = OnceLock::new();
    L.get_or_init(|| Mutex::new(Loader::new()))
}

/// Links `object` into the process (once per `symbol`: a second call returns the first
/// address) and returns the address of its function `symbol`.
///
/// # Errors
/// LLJIT cannot be created, the object does not link, or it does not define `symbol`.
pub fn load(object: &[u8], symbol: &str) -> Result<usize, String> {
    let mut l = loader()
        .lock()
        .map_err(|_| "the kernel loader's lock is poisoned".to_string())?;
    match l.as_mut() {
        Ok(l) => l.load(object, symbol),
        Err(e) => Err(e.clone()),
    }
}
