// Named pass pipelines. The order of each list is deliberate; the comment on each entry says why.
#include <fmt/format.h>

#include "kiln/passes/pass.h"

namespace kiln {

Expected<std::vector<std::string>> pipelineByName(const std::string& name) {
  if (name == "none") return std::vector<std::string>{};
  if (name == "default")
    return std::vector<std::string>{
        // CastLike becomes Cast before anything else, so no-op removal and both backends see a
        // Cast (they have no CastLike).
        "rewrite-castlike",
        // Identity/Dropout/no-op Casts first, so later pattern matches see producer → consumer
        // directly.
        "remove-noops",
        // Drops nodes and initializers nothing reads, before anything spends time on them.
        "eliminate-dead-nodes",
        // User shapes go in before inference, or inference would settle on the model's dynamic
        // dims.
        "fix-input-shapes",
        // Ops newer than the onnx library (Attention, RMSNormalization, RotaryEmbedding, Gelu ...)
        // become standard ops once the input shapes are fixed, so inference sees through them.
        "expand-new-ops",
        // Inference and folding to a fixpoint: shape sub-graphs fold once their inputs' shapes are
        // known.
        "settle-shapes",
        // Duplicate branches collapse first, so the rewrites below run once per branch, not per
        // copy.
        "eliminate-common-subexpressions",
        // Layout shuffles collapse before fusion, so fusion patterns see producer → consumer.
        "merge-transpose-reshape",
        // MatMul + Add become Gemm first, so a BatchNormalization after them can fold into it.
        "fuse-matmul-add",
        // Folds into Conv/ConvTranspose/Gemm whose weights settle-shapes turned into initializers.
        "fuse-batchnorm",
        // Last: drops the weights the fusions replaced and anything the merges left unread.
        "eliminate-dead-nodes",
    };
  return Status(ErrorCode::BadFlag, fmt::format("unknown pipeline '{}'", name),
                "use 'default' or 'none'");
}

} // namespace kiln
