// What the shape_ops rule files share (shape_ops.cpp, shape_ops_slice_pad.cpp,
// shape_ops_runtime_slice.cpp).
#pragma once

#include <string>

#include "kiln/backends/lowering.h"

namespace kiln::ms {

// The attributes this family reads, kind-checked: a wrong kind is a refusal, never a throw.
std::string shapeOpsAttributeReason(const Node& n);
// The check of shape ops that need nothing beyond their attributes' kinds.
std::string checkShapeOp(const Node& n, const lowering::OpContext&);

class LoweringContext;
// Slice with starts, ends, axes or steps fed at run time (shape_ops_runtime_slice.cpp).
Status lowerRuntimeSlice(LoweringContext& ctx, const Node& n, int rank);

} // namespace kiln::ms
