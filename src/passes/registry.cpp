// The one list of passes: CLI name → factory.
#include <functional>
#include <map>

#include "kiln/passes/pass.h"

namespace kiln {

std::unique_ptr<Pass> makeRemoveNoopsPass();
std::unique_ptr<Pass> makeRewriteCastLikePass();
std::unique_ptr<Pass> makeExpandNewOpsPass();
std::unique_ptr<Pass> makeConvertFp16Pass();
std::unique_ptr<Pass> makeDecomposeQuantPass();
std::unique_ptr<Pass> makeDemoteFloat64Pass();
std::unique_ptr<Pass> makeWidenIntegersPass();
std::unique_ptr<Pass> makeEliminateDeadNodesPass();
std::unique_ptr<Pass> makeFixInputShapesPass();
std::unique_ptr<Pass> makeFoldConstantsPass();
std::unique_ptr<Pass> makeFoldConstantIfPass();
std::unique_ptr<Pass> makeEliminateStaticSequencesPass();
std::unique_ptr<Pass> makeCarryLoopScanOutputsPass();
std::unique_ptr<Pass> makeScanToLoopPass();
std::unique_ptr<Pass> makeInferShapesPass();
std::unique_ptr<Pass> makePropagateShapeValuesPass();
std::unique_ptr<Pass> makeQuantizeWeightsPass();
std::unique_ptr<Pass> makeSettleShapesPass();
std::unique_ptr<Pass> makeFuseBatchNormPass();
std::unique_ptr<Pass> makeFuseMatMulAddPass();
std::unique_ptr<Pass> makeFuseQdqPass();
std::unique_ptr<Pass> makeMergeTransposeReshapePass();
std::unique_ptr<Pass> makeSinkTransposesPass();
std::unique_ptr<Pass> makeFuseRoundPass();
std::unique_ptr<Pass> makeFuseDynamicQuantPass();
std::unique_ptr<Pass> makeFuseHalfCastPass();
std::unique_ptr<Pass> makeEliminateCommonSubexpressionsPass();
std::unique_ptr<Pass> makeExpandRnnPass();
std::unique_ptr<Pass> makeExpandConvPoolPass();
std::unique_ptr<Pass> makeExpandGridSamplePass();
std::unique_ptr<Pass> makeExpandFunctionsPass();

namespace {

const std::map<std::string, std::function<std::unique_ptr<Pass>()>, std::less<>>& factories() {
  static const std::map<std::string, std::function<std::unique_ptr<Pass>()>, std::less<>> table = {
      {"carry-loop-scan-outputs", makeCarryLoopScanOutputsPass},
      {"convert-fp16", makeConvertFp16Pass},
      {"decompose-quant", makeDecomposeQuantPass},
      {"demote-float64", makeDemoteFloat64Pass},
      {"widen-integers", makeWidenIntegersPass},
      {"eliminate-dead-nodes", makeEliminateDeadNodesPass},
      {"expand-conv-pool", makeExpandConvPoolPass},
      {"expand-grid-sample", makeExpandGridSamplePass},
      {"eliminate-static-sequences", makeEliminateStaticSequencesPass},
      {"expand-rnn", makeExpandRnnPass},
      {"fix-input-shapes", makeFixInputShapesPass},
      {"fold-constants", makeFoldConstantsPass},
      {"fold-constant-if", makeFoldConstantIfPass},
      {"infer-shapes", makeInferShapesPass},
      {"propagate-shape-values", makePropagateShapeValuesPass},
      {"quantize-weights", makeQuantizeWeightsPass},
      {"scan-to-loop", makeScanToLoopPass},
      {"settle-shapes", makeSettleShapesPass},
      {"remove-noops", makeRemoveNoopsPass},
      {"rewrite-castlike", makeRewriteCastLikePass},
      {"expand-new-ops", makeExpandNewOpsPass},
      {"fuse-batchnorm", makeFuseBatchNormPass},
      {"fuse-half-cast", makeFuseHalfCastPass},
      {"fuse-matmul-add", makeFuseMatMulAddPass},
      {"fuse-qdq", makeFuseQdqPass},
      {"fuse-round", makeFuseRoundPass},
      {"fuse-dynamic-quant", makeFuseDynamicQuantPass},
      {"merge-transpose-reshape", makeMergeTransposeReshapePass},
      {"sink-transposes", makeSinkTransposesPass},
      {"eliminate-common-subexpressions", makeEliminateCommonSubexpressionsPass},
      {"expand-functions", makeExpandFunctionsPass},
  };
  return table;
}

} // namespace

std::unique_ptr<Pass> createPass(std::string_view name) {
  auto it = factories().find(name);
  return it == factories().end() ? nullptr : it->second();
}

std::vector<std::string> passNames() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : factories())
    out.push_back(name);
  return out;
}

} // namespace kiln
