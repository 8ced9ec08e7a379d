// .ms TypeId numbers (formats/ms.md §2.2) and kiln DTypes: one table read both ways, by the
// lowering (DType → the id converter_lite writes) and the reader (any id, aliases included).
#pragma once

#include <optional>

#include "kiln/ir/dtype.h"

namespace kiln::ms {

// The canonical id for a dtype (String: kObjectTypeString 12); nullopt when .ms has none.
std::optional<int> typeIdOf(DType type);
// The dtype of an id, including the width-less aliases kNumberTypeInt (31), kNumberTypeUInt (36)
// and kNumberTypeFloat (41) older files use; nullopt for ids kiln does not read (String included:
// string tensors are not read).
std::optional<DType> dtypeOfTypeId(int id);

} // namespace kiln::ms
