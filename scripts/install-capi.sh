#!/usr/bin/env bash
# Builds the C library (`cargo build --release -p ebb-capi`) and installs it under PREFIX
# (default /usr/local): PREFIX/lib/libebb_capi.so, PREFIX/include/ebb.h and the pkg-config file
# PREFIX/lib/pkgconfig/ebb.pc, so that a C or C++ program builds with
#   cc prog.c $(pkg-config --cflags --libs ebb)
# (with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix pkg-config does not search).
# EBB_CAPI_LIB=path/to/libebb_capi.so installs that library instead of building one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-/usr/local}"
lib="${EBB_CAPI_LIB:-}"
if [ -z "$lib" ]; then
  (cd "$root" && cargo build --release -p ebb-capi >&2)
  lib="$root/target/release/libebb_capi.so"
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$lib" "$prefix/lib/libebb_capi.so"
install -m 0644 "$root/capi/include/ebb.h" "$prefix/include/ebb.h"
cat > "$prefix/lib/pkgconfig/ebb.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: ebb
Description: Ebb's C ABI: load a plan, finalize it under a memory budget, read its decisions
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lebb_capi
PC
echo "installed libebb_capi.so, ebb.h and ebb.pc under $prefix" >&2
