"""The example project's CUDA budgets (``example_project/budgets.py``) hold to the rule they state: each
is :data:`CUPY_SHARE` of its good variant's lowest attained fraction on the H200, so the good variant
passes, the same kernel made 2x slower fails, and the bad variant fails."""

from __future__ import annotations

import math
import sys

import pytest
from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "example_project"))

from budgets import BUDGETS, CUPY_MEASURED, CUPY_SHARE


@pytest.mark.parametrize("kernel", sorted(CUPY_MEASURED))
def test_a_cuda_budget_passes_the_good_kernel_and_fails_it_2x_slower_and_the_bad_one(kernel: str) -> None:
    good, bad = CUPY_MEASURED[kernel]
    budget = BUDGETS[kernel]["cupy"]
    assert budget == math.floor(CUPY_SHARE * good * 100) / 100
    assert good / 2 < budget < good
    assert bad is None or bad < budget


def test_every_cuda_budget_was_measured() -> None:
    assert {k for k, v in BUDGETS.items() if "cupy" in v} == set(CUPY_MEASURED)
