//! Loop metadata for the vectorizer (LLVM LangRef, "`llvm.loop`"): a row's remainder loop asks
//! for its tail to be folded into masked vector iterations
//! (`llvm.loop.vectorize.predicate.enable`), so the last `L mod 64` elements of a row run
//! as at most four masked vector iterations instead of a scalar epilogue.
//!
//! Invariant: the metadata only steers the vectorizer; LLVM keeps each element's operations
//! and every ordered reduction's order, so the kernel's bits are those without it.

use inkwell::context::Context;
use inkwell::values::{AsValueRef, InstructionValue};
use llvm_sys::core::{
    LLVMConstInt, LLVMGetMDKindIDInContext, LLVMInt1TypeInContext, LLVMInt32TypeInContext,
    LLVMMDNodeInContext2, LLVMMDStringInContext2, LLVMMetadataAsValue, LLVMSetMetadata,
    LLVMValueAsMetadata,
};
use llvm_sys::debuginfo::{LLVMMetadataReplaceAllUsesWith, LLVMTemporaryMDNode};
use llvm_sys::prelude::LLVMMetadataRef;

/// Marks `latch` (the loop's back-edge branch) with a loop ID asking the vectorizer to
/// vectorize the loop with its tail folded by masking (`llvm.loop.vectorize.enable`,
/// `llvm.loop.vectorize.predicate.enable`) and without interleaving
/// (`llvm.loop.interleave.count` = 1: the loop runs fewer than 64 iterations).
pub(crate) fn fold_tail(ctx: &Context, latch: InstructionValue<'_>) {
    let c = ctx.raw();
    // SAFETY: every call gets the live context `c` and metadata made in it; the strings'
    // pointers and lengths describe live buffers; the temporary node is replaced (and freed
    // by LLVM) once the loop ID that refers to it exists, which makes the ID refer to itself
    // as LangRef requires of a loop ID's first operand; `latch` is a live instruction.
    unsafe {
        let s = |t: &str| LLVMMDStringInContext2(c, t.as_ptr().cast(), t.len());
        let yes = LLVMValueAsMetadata(LLVMConstInt(LLVMInt1TypeInContext(c), 1, 0));
        let one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), 1, 0));
        let pair = |k: &str, v: LLVMMetadataRef| {
            let mut ops = [s(k), v];
            LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len())
        };
        let enable = pair("llvm.loop.vectorize.enable", yes);
        let predicate = pair("llvm.loop.vectorize.predicate.enable", yes);
        let interleave = pair("llvm.loop.interleave.count", one);
        let tmp = LLVMTemporaryMDNode(c, std::ptr::null_mut(), 0);
        let mut ops = [tmp, enable, predicate, interleave];
        let id = LLVMMDNodeInContext2(c, ops.as_mut_ptr(), ops.len());
        LLVMMetadataReplaceAllUsesWith(tmp, id);
        let kind = "llvm.loop";
        let kind = LLVMGetMDKindIDInContext(c, kind.as_ptr().cast(), kind.len() as u32);
        LLVMSetMetadata(latch.as_value_ref(), kind, LLVMMetadataAsValue(c, id));
    }
}
