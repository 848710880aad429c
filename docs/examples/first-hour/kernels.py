import numpy as np


def matmul(a, b):
    return a @ b


def fused(x, y):
    return np.maximum(2 * x + y, 0)


def rowsum(x):
    return x.sum(axis=1)
