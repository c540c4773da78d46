"""Kernels added one family per module, each mirroring its upstream benchmark script at
Liger-Kernel commit 02bac05 (the commit of the H200 CI rows re-measured): softmax, dyt,
fused_neighborhood_attention, multi_token_attention (with its sparse variant), group_norm,
jsd/kl_div/tvd (divergence), sparsemax, fused_linear_jsd,
distill_jsd_loss/distill_cosine_loss (distill), fused_linear_cross_entropy,
fused_linear_cpo_loss/fused_linear_simpo_loss (preference) and dpo_loss/kto_loss
(preference_ref); and, from the scripts at commit ab7fe2a (the H100 CI rows), embedding,
tiled_geglu/tiled_swiglu (tiled_mlp), fused_add_rms_norm, poly_norm, qwen2vl_mrope and mhc_coeffs/mhc_pre/mhc_post_res (mhc)."""

from __future__ import annotations

from .distill import SPECS as _DISTILL
from .divergence import SPECS as _DIVERGENCE
from .dyt import SPECS as _DYT
from .embedding import SPECS as _EMBEDDING
from .fused_add_rms_norm import SPECS as _FUSED_ADD_RMS_NORM
from .fused_linear_cross_entropy import SPECS as _FUSED_LINEAR_CROSS_ENTROPY
from .fused_linear_jsd import SPECS as _FUSED_LINEAR_JSD
from .group_norm import SPECS as _GROUP_NORM
from .mhc import SPECS as _MHC
from .multi_token_attention import SPECS as _MULTI_TOKEN_ATTENTION
from .neighborhood_attention import SPECS as _NEIGHBORHOOD_ATTENTION
from .poly_norm import SPECS as _POLY_NORM
from .preference import SPECS as _PREFERENCE
from .preference_ref import SPECS as _PREFERENCE_REF
from .qwen2vl_mrope import SPECS as _QWEN2VL_MROPE
from .softmax import SPECS as _SOFTMAX
from .sparsemax import SPECS as _SPARSEMAX
from .tiled_mlp import SPECS as _TILED_MLP

FAMILY_SPECS = (
    *_SOFTMAX,
    *_DYT,
    *_NEIGHBORHOOD_ATTENTION,
    *_MULTI_TOKEN_ATTENTION,
    *_GROUP_NORM,
    *_DIVERGENCE,
    *_SPARSEMAX,
    *_FUSED_LINEAR_JSD,
    *_DISTILL,
    *_FUSED_LINEAR_CROSS_ENTROPY,
    *_PREFERENCE,
    *_PREFERENCE_REF,
    *_EMBEDDING,
    *_TILED_MLP,
    *_FUSED_ADD_RMS_NORM,
    *_POLY_NORM,
    *_QWEN2VL_MROPE,
    *_MHC,
)
