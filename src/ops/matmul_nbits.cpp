// com.microsoft MatMulNBits: attribute decoding shared by the executor and the .ms lowering, and
// the schema (types, attributes, output shape) onnx's shape inference runs for it.
#include "ops/matmul_nbits.h"

#include <mutex>

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include "ops/attributes.h"

namespace kiln::ops {
namespace {

Status attributeError(const Node& node, const std::string& what) {
  return Status(ErrorCode::BadAttribute,
                fmt::format("node '{}' (MatMulNBits): {}", node.name(), what),
                "export the node as ONNX Runtime's quantizer writes it (bits 2, 4 or 8, "
                "block_size a power of two >= 16, K and N the weight's dims)");
}

// Y's shape: A's with the last dim replaced by N.
void inferMatMulNBits(onnx::InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  const onnx::AttributeProto* n = ctx.getAttribute("N");
  if (!n || !onnx::hasInputShape(ctx, 0)) return;
  const auto& a = onnx::getInputShape(ctx, 0);
  if (a.dim_size() < 1) fail_shape_inference("MatMulNBits: A must have rank >= 1");
  onnx::TensorShapeProto y;
  for (int i = 0; i + 1 < a.dim_size(); ++i)
    *y.add_dim() = a.dim(i);
  y.add_dim()->set_dim_value(n->i());
  onnx::updateOutputShape(ctx, 0, y);
}

} // namespace

Expected<MatMulNBitsShape> matMulNBitsShape(const Node& node) {
  MatMulNBitsShape s;
  KILN_ASSIGN_OR_RETURN(s.k, intAttr(node, "K", 0));
  KILN_ASSIGN_OR_RETURN(s.n, intAttr(node, "N", 0));
  KILN_ASSIGN_OR_RETURN(s.bits, intAttr(node, "bits", 4));
  KILN_ASSIGN_OR_RETURN(s.blockSize, intAttr(node, "block_size", 0));
  if (s.k <= 0 || s.n <= 0)
    return attributeError(node, fmt::format("K = {} and N = {} must be positive", s.k, s.n));
  if (s.bits != 2 && s.bits != 4 && s.bits != 8)
    return attributeError(node, fmt::format("bits = {} (2, 4 or 8)", s.bits));
  if (s.blockSize < 16 || (s.blockSize & (s.blockSize - 1)) != 0)
    return attributeError(node, fmt::format("block_size = {} (a power of two >= 16)", s.blockSize));
  s.blocks = (s.k + s.blockSize - 1) / s.blockSize;
  s.blobBytes = s.blockSize * s.bits / 8;
  return s;
}

void registerMicrosoftSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& domains = onnx::OpSchemaRegistry::DomainToVersionRange::Instance();
    if (!domains.Map().count(kMicrosoftDomain)) domains.AddDomainToVersion(kMicrosoftDomain, 1, 1);
    using A = onnx::AttributeProto;
    onnx::OpSchema schema;
    schema.SetName("MatMulNBits")
        .SetDomain(kMicrosoftDomain)
        .SinceVersion(1)
        .Attr("K", "reduction size (A's last dim)", A::INT)
        .Attr("N", "output columns", A::INT)
        .Attr("bits", "bits per weight code", A::INT, static_cast<int64_t>(4))
        .Attr("block_size", "codes per scale along K", A::INT)
        .Attr("accuracy_level", "minimum accuracy of A in the product", A::INT,
              static_cast<int64_t>(0))
        .Input(0, "A", "activations [..., K]", "T1")
        .Input(1, "B", "packed codes [N, blocks, blob bytes]", "T2")
        .Input(2, "scales", "one per block", "T1")
        .Input(3, "zero_points", "packed uint8 or A's float type", "T3", onnx::OpSchema::Optional)
        .Input(4, "g_idx", "block of each K index", "T4", onnx::OpSchema::Optional)
        .Input(5, "bias", "[N]", "T1", onnx::OpSchema::Optional)
        .Output(0, "Y", "[..., N]", "T1")
        .TypeConstraint("T1", {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"},
                        "float activations")
        .TypeConstraint("T2", {"tensor(uint8)", "tensor(int32)"}, "packed codes")
        .TypeConstraint("T3",
                        {"tensor(uint8)", "tensor(int32)", "tensor(float)", "tensor(float16)",
                         "tensor(bfloat16)"},
                        "zero points")
        .TypeConstraint("T4", {"tensor(int32)"}, "block indices")
        .TypeAndShapeInferenceFunction(inferMatMulNBits);
    onnx::OpSchemaRegistry::OpSchemaRegisterOnce registered(schema);
    (void)registered;
  });
}

} // namespace kiln::ops
