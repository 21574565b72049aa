#!/usr/bin/env bash
# Coverage-guided fuzzing of one of Ebb's input boundaries with libFuzzer (issue #15 item 6).
#
#   scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAGS...]
#   scripts/fuzz.sh list
#
# Targets (ebb_testkit::fuzz, and `capi` in fuzz/src/lib.rs): stablehlo_text onnx_proto ir_text
# plan_load dim_param npz cli_args py_step (the Python extension's step boundary: raw tensors
# with numpy dtype names) capi (the C ABI's plan queries with C strings and budgets). Targets
# with a dictionary in fuzz/dicts/TARGET.dict (the nesting-depth tokens of the text formats)
# get it. The corpus grows in fuzz/corpus/TARGET (seeded from the fixtures on first use);
# crashes, hangs (-timeout, 10 s) and inputs that allocate past -rss_limit_mb (4096) are
# written to fuzz/artifacts/TARGET/ and make the script exit non-zero. The run stops after
# SECONDS or 1,000,000 executions, whichever comes first (issue #15's bar).
#
# Why libFuzzer through the `libfuzzer-sys` crate and not `cargo fuzz`: only the stable
# toolchain is available, and cargo-fuzz's default AddressSanitizer needs nightly's
# `-Zsanitizer`. libFuzzer itself only needs SanitizerCoverage instrumentation, which rustc
# offers on stable (`-Cpasses=sancov-module` and LLVM options, the flags cargo-fuzz passes).
# Ebb is safe Rust, so the memory errors ASan would find are out of scope; panics, aborts,
# hangs, overflows (`overflow-checks` on) and runaway allocations are what is hunted.
# AFL++ would need its own compiler wrapper (cargo-afl) installed; libFuzzer ships inside
# libfuzzer-sys and builds with the machine's C++ compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
targets="stablehlo_text onnx_proto ir_text plan_load dim_param npz cli_args py_step capi"
if [[ "${1:-}" == "list" ]]; then
  echo "$targets" | tr ' ' '\n'
  exit 0
fi
if [[ $# -lt 2 ]]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAGS...] (targets: $targets)" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2
if ! grep -qw -- "$target" <<<"$targets"; then
  echo "unknown target \`$target\` (targets: $targets)" >&2
  exit 2
fi
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
# With an explicit --target, RUSTFLAGS reach the target's crates only, not build scripts and
# proc macros (which cannot link without libFuzzer's runtime).
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --manifest-path fuzz/Cargo.toml --target "$host" --bin "$target" --bin seeds
bin=fuzz/target/$host/release
if [[ ! -d fuzz/seeds/$target ]]; then
  "$bin/seeds" fuzz/seeds
fi
mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
dict=()
if [[ -f "fuzz/dicts/$target.dict" ]]; then
  dict=(-dict="fuzz/dicts/$target.dict")
fi
exec "$bin/$target" "fuzz/corpus/$target" "fuzz/seeds/$target" "${dict[@]}" \
  -max_total_time="$seconds" -runs=1000000 -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=4096 \
  -artifact_prefix="fuzz/artifacts/$target/" -print_final_stats=1 "$@"
