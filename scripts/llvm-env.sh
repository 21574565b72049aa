# Source this file (`source /path/to/ebb/scripts/llvm-env.sh`) before building a crate outside
# this repository that depends on Ebb's crates (ebb-runtime, ebb-pipeline, ...): it exports the
# three variables this repository's .cargo/config.toml sets, pointing melior's MLIR bindings,
# inkwell's LLVM bindings and the TableGen tool at LLVM/MLIR 22 (`llvm-config-22 --prefix`;
# scripts/setup-debian.sh installs it). Without them the bindings' build scripts take the first
# `llvm-config` on PATH, which may be another LLVM (Debian 12's default is 14).
_ebb_llvm_prefix="$(llvm-config-22 --prefix 2>/dev/null || echo /usr/lib/llvm-22)"
if [ ! -x "$_ebb_llvm_prefix/bin/llvm-config" ]; then
  echo "llvm-env.sh: no LLVM 22 at $_ebb_llvm_prefix: run scripts/setup-debian.sh" >&2
  unset _ebb_llvm_prefix
  return 1 2>/dev/null || exit 1
fi
export MLIR_SYS_220_PREFIX="$_ebb_llvm_prefix"
export LLVM_SYS_221_PREFIX="$_ebb_llvm_prefix"
export TABLEGEN_220_PREFIX="$_ebb_llvm_prefix"
unset _ebb_llvm_prefix
