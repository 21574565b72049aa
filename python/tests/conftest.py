"""Shared fixtures of the Python package's tests: the repository, the `ebb` CLI to compare with
(``EBB_BIN``, set by the Rust runner tests/tests/python.rs; else target/debug/ebb), and
plans compiled once per session."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import ebb

REPO = Path(os.environ.get("EBB_REPO", Path(__file__).resolve().parents[2]))
FIXTURES = REPO / "tests" / "fixtures" / "jax"


def ebb_cli(*args: str) -> dict:
    """Runs the `ebb` CLI with ``--json`` and returns its report."""
    exe = os.environ.get("EBB_BIN", str(REPO / "target" / "debug" / "ebb"))
    out = subprocess.run([exe, *args, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def gpt2_tiny() -> ebb.Plan:
    return ebb.compile(FIXTURES / "gpt2_tiny_adamw.mlir", device="h100-sxm-pcie5")


@pytest.fixture(scope="session")
def gpt2_tiny_file(gpt2_tiny, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plans") / "gpt2_tiny.plan.json"
    gpt2_tiny.save(path)
    return path
