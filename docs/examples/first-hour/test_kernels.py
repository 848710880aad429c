import numpy as np
import pytest

import kernels

rng = np.random.default_rng(0)
A, B = rng.random((512, 512), dtype=np.float32), rng.random((512, 512), dtype=np.float32)
X, Y = rng.random(4_000_000, dtype=np.float32), rng.random(4_000_000, dtype=np.float32)
M = rng.random((2048, 2048), dtype=np.float32)


@pytest.mark.speed_of_light()
def test_matmul(roofline):
    roofline(kernels.matmul, A, B)


@pytest.mark.speed_of_light()
def test_fused(roofline):
    roofline(kernels.fused, X, Y)


@pytest.mark.speed_of_light()
def test_rowsum(roofline):
    roofline(kernels.rowsum, M)
