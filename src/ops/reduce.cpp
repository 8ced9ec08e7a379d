// reduce ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"
#include "ops/validate.h"

namespace kiln::ops {

KILN_OP_FP16("CumSum", kFp16BlockByDefault);
KILN_OP_FP16("ReduceL1", kFp16BlockByDefault);
KILN_OP_FP16("ReduceL2", kFp16BlockByDefault);
KILN_OP_FP16("ReduceLogSum", kFp16BlockByDefault);
KILN_OP_FP16("ReduceLogSumExp", kFp16BlockByDefault);
KILN_OP_FP16("ReduceMean", kFp16BlockByDefault);
KILN_OP_FP16("ReduceProd", kFp16BlockByDefault);
KILN_OP_FP16("ReduceSum", kFp16BlockByDefault);
KILN_OP_FP16("ReduceSumSquare", kFp16BlockByDefault);

namespace {

std::string reduceCheck(const NodeFacts& node) { return axesAttrReason(node, "axes"); }
std::string argCheck(const NodeFacts& node) { return axisAttrReason(node, "axis"); }

} // namespace

KILN_OP_CHECK("ReduceL1", reduceCheck);
KILN_OP_CHECK("ReduceL2", reduceCheck);
KILN_OP_CHECK("ReduceLogSum", reduceCheck);
KILN_OP_CHECK("ReduceLogSumExp", reduceCheck);
KILN_OP_CHECK("ReduceMax", reduceCheck);
KILN_OP_CHECK("ReduceMean", reduceCheck);
KILN_OP_CHECK("ReduceMin", reduceCheck);
KILN_OP_CHECK("ReduceProd", reduceCheck);
KILN_OP_CHECK("ReduceSum", reduceCheck);
KILN_OP_CHECK("ReduceSumSquare", reduceCheck);
KILN_OP_CHECK("ArgMax", argCheck);
KILN_OP_CHECK("ArgMin", argCheck);

} // namespace kiln::ops
