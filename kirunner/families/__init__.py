"""Kernels added one family per module, each mirroring its upstream benchmark script at
Liger-Kernel commit 02bac05 (the commit of the H200 CI rows re-measured): softmax, dyt."""

from __future__ import annotations

from .dyt import SPECS as _DYT
from .softmax import SPECS as _SOFTMAX

FAMILY_SPECS = (*_SOFTMAX, *_DYT)
