// What the two shape_ops rule files share (shape_ops.cpp, shape_ops_slice_pad.cpp).
#pragma once

#include <string>

#include "kiln/backends/lowering.h"

namespace kiln::ms {

// The attributes this family reads, kind-checked: a wrong kind is a refusal, never a throw.
std::string shapeOpsAttributeReason(const Node& n);
// The check of shape ops that need nothing beyond their attributes' kinds.
std::string checkShapeOp(const Node& n, const lowering::OpContext&);

} // namespace kiln::ms
