"""Kernels added one family per module, each mirroring its upstream benchmark script at
Liger-Kernel commit 02bac05 (the commit of the H200 CI rows re-measured): softmax, dyt,
fused_neighborhood_attention, multi_token_attention (with its sparse variant)."""

from __future__ import annotations

from .dyt import SPECS as _DYT
from .multi_token_attention import SPECS as _MULTI_TOKEN_ATTENTION
from .neighborhood_attention import SPECS as _NEIGHBORHOOD_ATTENTION
from .softmax import SPECS as _SOFTMAX

FAMILY_SPECS = (*_SOFTMAX, *_DYT, *_NEIGHBORHOOD_ATTENTION, *_MULTI_TOKEN_ATTENTION)
