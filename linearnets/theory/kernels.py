"""Kernel regression and kernel-target alignment."""
from __future__ import annotations

__all__ = ['kernel_regression', 'kernel_alignment']


def kernel_regression(K_train, K_test_train, Y, ridge=0.0):
    raise NotImplementedError("not implemented yet")


def kernel_alignment(K, y):
    raise NotImplementedError("not implemented yet")
