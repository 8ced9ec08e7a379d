// Input-shape specifications: ATC's --input_shape (+ dynamic gear flags) and converter_lite's
// --inputShape, parsed by one parser and validated against a model's graph inputs.
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

enum class ShapeDialect { Atc, ConverterLite };

struct DimSpec {
  int64_t lo = 0; // static: lo == hi; "-1": lo 0, hi -1; "a~b": lo a, hi b (hi -1 = unbounded)
  int64_t hi = 0;
  bool ranged = false; // written as a~b
  bool isStatic() const { return !ranged && lo == hi && lo >= 0; }
  bool isUnknown() const { return !ranged && hi == -1; }
  std::string toString() const;
};

struct InputShapeSpec {
  std::string name; // empty in ATC's positional form
  size_t position = 0;
  std::vector<DimSpec> dims;
  std::string text; // the entry as written, for messages
  std::string dimsText() const;
};

struct ShapeSpec {
  ShapeDialect dialect = ShapeDialect::Atc;
  bool positional = false;
  std::vector<InputShapeSpec> inputs;
  bool hasDynamic() const; // any -1 or range
};

// Errors carry the drop-in CLI's code as Status::peerCode() (E10002, E10011, E10013 for ATC).
Expected<ShapeSpec> parseShapeSpec(const std::string& text, ShapeDialect dialect);

// Every disagreement between the spec and the graph's (non-initializer) inputs: unknown names
// (listing the real ones), rank mismatches, static dims that disagree (with the NCHW/NHWC
// transposition named and the right shape printed when that is the mistake).
std::vector<Status> validateShapeSpec(const ShapeSpec& spec, const Graph& graph);

// ATC dynamic gear flags (one of them at most) checked against the spec per ATC's rules.
struct DynamicProfiles {
  std::string batchSize;   // --dynamic_batch_size "1,2,4"
  std::string imageSize;   // --dynamic_image_size "224,224;448,448"
  std::string dims;        // --dynamic_dims "1,224;2,448"
  std::string inputFormat; // --input_format as given; "" reads as NCHW
  // Parsed gears, filled by validateDynamicProfiles.
  std::vector<std::vector<int64_t>> gears;
};
Status validateDynamicProfiles(DynamicProfiles& profiles, const std::string& inputShapeText,
                               const ShapeSpec* spec);

// The graph input a spec entry names (by name, or by position in the positional form).
Value* findSpecInput(const InputShapeSpec& entry, const Graph& graph);

} // namespace kiln
