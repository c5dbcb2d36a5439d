"""lessonlib: the engine behind the course module "Attention, masks, and position"."""

from lessonlib.attention import (
    AttentionResult,
    MultiHeadParams,
    MultiHeadResult,
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
    dtype_bytes,
    loglog_slope,
    measure,
    score_matrix_bytes,
    tiled_attention,
)
from lessonlib.masks import (
    MASK_CONVENTIONS,
    MaskConvention,
    causal_mask,
    combine_masks,
    padding_mask,
    sliding_window_mask,
)
from lessonlib.position import (
    LearnedPositions,
    alibi_bias,
    alibi_slopes,
    inverse_permutation,
    permute,
    relative_position_bias,
    relative_position_bucket,
    rope,
    sinusoidal_positions,
)

__all__ = [
    "MASK_CONVENTIONS", "MaskConvention", "AttentionResult", "LearnedPositions", "Measurement", "MultiHeadParams", "MultiHeadResult",
    "alibi_bias", "alibi_slopes", "attention_scores", "causal_mask", "combine_masks", "dtype_bytes",
    "init_multi_head", "inverse_permutation", "loglog_slope", "masked_softmax", "measure",
    "merge_heads", "multi_head_attention", "padding_mask", "permute", "relative_position_bias",
    "relative_position_bucket", "rope", "scaled_dot_product_attention", "score_matrix_bytes",
    "sinusoidal_positions", "sliding_window_mask", "softmax", "split_heads", "tiled_attention",
]
