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
        // An If on a constant condition becomes its taken branch before anything else looks at
        // it: dead-node elimination then drops what only the other branch read, and neither
        // backend lowers a branch that never runs.
        "fold-constant-if",
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
        // Again, for conditions that only folding made constant (a shape test, say); the moved
        // nodes keep the types inference gave them inside the branch.
        "fold-constant-if",
        // Sequences whose length and element positions are now known become the tensors they
        // hold (neither target has a sequence type): after inference (static split counts) and
        // both If folds (a branch's sequence); before the loop rewrites, since a Loop that only
        // appends to a sequence is unrolled here.
        "eliminate-static-sequences",
        // A Scan becomes the Loop it is (a Gather per scan input), before its scan outputs are
        // carried below; it needs the sequence length inference just settled.
        "scan-to-loop",
        // Scan outputs of a Loop become carried state (the targets' loops only carry state); it
        // needs the static scan-output shapes inference just settled.
        "carry-loop-scan-outputs",
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
