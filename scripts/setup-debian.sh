#!/usr/bin/env bash
# Installs the system packages Ebb builds against on Debian 12: LLVM/MLIR 22, and COIN-OR CBC,
# the MILP solver of `ebb_plan::exact` (feature `exact`; linked as a shared library).
# Idempotent: packages already installed are left alone; runs as root or through sudo.
set -euo pipefail
pkgs=(llvm-22-dev libmlir-22-dev mlir-22-tools libclang-22-dev libpolly-22-dev zlib1g-dev libzstd-dev build-essential pkg-config coinor-libcbc-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
test -x /usr/lib/llvm-22/bin/mlir-tblgen || { echo "setup: /usr/lib/llvm-22/bin/mlir-tblgen missing after install" >&2; exit 1; }

# Python: the pinned JAX environment .venv-jax (examples/export/make_env.sh: the exporters,
# `ebb bench --xla`) with pytest, where the tests run the `ebb` Python package's tests.
# Debian's python3 (with venv) is installed when no python3 can make a virtual environment.
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing python3 python3-venv" >&2
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends python3 python3-venv
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$(bash "$root/examples/export/make_env.sh")"
"$py" -c 'import pytest' >/dev/null 2>&1 || "$py" -m pip install -q -r "$root/python/requirements-test.txt" >&2
# ebb.torch.export's tests: torch, onnxscript and onnx in the same environment (the torch wheel on
# PyPI is the CUDA build, about 4 GB with its nvidia-* libraries; only the CPU is used).
"$py" -c 'import torch, onnxscript' >/dev/null 2>&1 || "$py" -m pip install -q -r "$root/python/requirements-torch.txt" >&2
