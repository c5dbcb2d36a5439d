"""lessonlib: the engine behind the course module "Attention, masks, and position".

Everything here is the reference: the formula in plain NumPy. The same attention made fast
(threads, in-place buffers) lives in :mod:`lessonlib.fast` and is used only when called by name.
"""

from lessonlib.attention import (
    AttentionResult,
    FullyMasked,
    MultiHeadParams,
    MultiHeadResult,
    attention_entropy,
    attention_scores,
    init_multi_head,
    masked_softmax,
    merge_heads,
    multi_head_attention,
    scaled_dot_product_attention,
    softmax,
    split_heads,
)
from lessonlib.cost import (
    Measurement,
    TiledResult,
    dtype_bytes,
    loglog_slope,
    measure,
    score_matrix_bytes,
    tiled_attention,
)
from lessonlib.masks import (
    MASK_CONVENTIONS,
    PRECISION_FACTS,
    Align,
    MaskConvention,
    causal_mask,
    combine_masks,
    key_offsets,
    padding_mask,
    sliding_window_mask,
)
from lessonlib.position import (
    LearnedPositions,
    Pairing,
    alibi_bias,
    alibi_slopes,
    inverse_permutation,
    permute,
    relative_position_bias,
    relative_position_bucket,
    rope,
    sinusoidal_positions,
)
from lessonlib.probe import MaskSemantics, probe_mask_semantics

__all__ = [
    "MASK_CONVENTIONS", "PRECISION_FACTS", "Align", "AttentionResult", "FullyMasked", "Pairing",
    "LearnedPositions", "MaskConvention",
    "MaskSemantics", "Measurement", "MultiHeadParams", "MultiHeadResult", "TiledResult",
    "alibi_bias", "alibi_slopes", "attention_entropy", "attention_scores", "causal_mask", "combine_masks",
    "dtype_bytes", "key_offsets", "probe_mask_semantics",
    "init_multi_head", "inverse_permutation", "loglog_slope", "masked_softmax", "measure",
    "merge_heads", "multi_head_attention", "padding_mask", "permute", "relative_position_bias",
    "relative_position_bucket", "rope", "scaled_dot_product_attention", "score_matrix_bytes",
    "sinusoidal_positions", "sliding_window_mask", "softmax", "split_heads", "tiled_attention",
]
