// The Ascend chips `--soc_version` may name: family, core types, data types and hardware numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/dtype.h"
#include "kiln/support/status.h"

namespace kiln {

enum class SocFamily {
  Ascend310,    // Atlas 200/300
  Ascend310B,   // Atlas 200I/500 A2
  Ascend310P,   // Atlas inference series (once "Ascend710")
  Ascend910,    // Atlas training, first generation (includes the 30-core "Ascend910B" SKU)
  Ascend910B,   // Atlas A2 training/inference
  Ascend910_93, // Atlas A3 (910C)
  Ascend950,    // Ascend 950PR / 950DT
  Ascend035,    // IPV350 / nano (mode 30 only)
  Automotive,   // Ascend610, BS9SX1A*, MC62: named in the compiler sources, capabilities unknown
};

// Marketing name of a family, e.g. "Atlas A2 training/inference (910B)".
const char* socFamilyName(SocFamily family);

enum class CoreType { AiCore, VectorCore };

// Numbers from the platform configuration of the chip. 0 means "not stated".
struct SocHardware {
  std::string aicVersion;  // "AIC-M-200"
  std::string ccecVersion; // "dav-m200"; the model attribute arch_type
  int aiCoreCount = 0;     // ai_core_cnt (cube cores on chips with split cores)
  int vectorCoreCount = 0; // vector_core_cnt (AIV cores on A2; vector-only cores on 310P)
  int aiCpuCount = 0;
  uint64_t l2Bytes = 0;
  uint64_t l1Bytes = 0;
  uint64_t l0cBytes = 0;
  uint64_t ubBytes = 0;
  int cubeFreqMhz = 0;
  uint64_t hbmBytes = 0;
  std::string note; // ranges or doubts the single numbers above cannot carry
};

struct SocInfo {
  // The exact --soc_version string, or for chips named "<ChipName>_<NPUName>" whose NPU names
  // are not known (950) the prefix ending in '_' (see namePattern).
  std::string name;
  bool namePattern = false; // `name` is a prefix; findSoc accepts prefix + [0-9A-Za-z]+
  SocFamily family;
  // Where the string comes from: "source", "docs", "user reports".
  std::string evidence;
  std::vector<CoreType> coreTypes; // VectorCore only where --core_type=VectorCore is honoured
  bool splitCubeVector = false;    // AI Core split into cube (AIC) and vector (AIV) cores
  std::vector<DType> dtypes;       // compute data types (bf16 / hif8-class only where present)
  bool bf16 = false;               // *_bf16 precision modes, mixed_bfloat16
  bool hif8 = false;               // mixed_hif8, cube_hif8, HIF8/FP8 output types
  bool caffe = true;               // Caffe models documented as supported
  bool singleOp = true;            // --singleop
  bool shapeRange = true;          // --input_shape_range / ranges "1~3" in --input_shape
  bool ubFusion = true;            // buffer (UB) fusion of kernels
  bool mode30Only = false;         // must be converted with --mode=30 (.exeom)
  std::optional<SocHardware> hardware;

  bool supportsDType(DType type) const;
  bool supportsCoreType(CoreType type) const;
};

// The chip for a --soc_version value (exact, case-sensitive as in ATC), nullptr when unknown.
const SocInfo* findSoc(const std::string& socVersion);
// Every accepted value in table order; pattern entries appear as e.g. "Ascend950PR_<NPU name>".
std::vector<std::string> socNames();
// The whole table.
const std::vector<SocInfo>& socTable();

// ATC's error for a --soc_version value no chip matches: ErrorCode::SocVersionUnknown with
// peer code E20101 and the valid values in the hint. An empty value gives E10054 instead.
Status unknownSocError(const std::string& socVersion);
// Ok when the value names a known chip, else unknownSocError.
Status checkSocVersion(const std::string& socVersion);

} // namespace kiln
