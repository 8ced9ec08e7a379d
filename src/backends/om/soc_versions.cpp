// The --soc_version table: every chip string known from the format notes, with its capabilities.
#include "kiln/backends/soc_versions.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "kiln/support/suggest.h"

namespace kiln {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kGiB = 1024 * 1024 * 1024;

// Tensor types every chip carries (AI Core where a kernel has them, AI CPU otherwise). The cube
// tile tables list fp16 (default), int8 and int4 for all 310/910/035 chips.
std::vector<DType> baseDTypes() {
  return {DType::Float32, DType::Float16, DType::Int8,  DType::UInt8,  DType::Int16, DType::UInt16,
          DType::Int32,   DType::UInt32,  DType::Int64, DType::UInt64, DType::Bool,  DType::Int4};
}

SocHardware hw(std::string aic, std::string ccec, int aiCores, int vectorCores, uint64_t l2,
               uint64_t l1, uint64_t l0c, uint64_t ub, int freq) {
  SocHardware h;
  h.aicVersion = std::move(aic);
  h.ccecVersion = std::move(ccec);
  h.aiCoreCount = aiCores;
  h.vectorCoreCount = vectorCores;
  h.l2Bytes = l2;
  h.l1Bytes = l1;
  h.l0cBytes = l0c;
  h.ubBytes = ub;
  h.cubeFreqMhz = freq;
  return h;
}

// Capabilities per family (format notes §4.4); individual chips add hardware numbers.
SocInfo familyDefaults(SocFamily family) {
  SocInfo s;
  s.family = family;
  s.coreTypes = {CoreType::AiCore};
  s.dtypes = baseDTypes();
  switch (family) {
  case SocFamily::Ascend310:
  case SocFamily::Ascend910:
  case SocFamily::Automotive: // nothing is stated for these beyond their names
    break;
  case SocFamily::Ascend310P:
    s.coreTypes.push_back(CoreType::VectorCore); // the only chips with vector-only cores
    break;
  case SocFamily::Ascend310B:
    s.bf16 = true;
    s.shapeRange = false;
    break;
  case SocFamily::Ascend910B:
  case SocFamily::Ascend910_93:
    s.bf16 = true;
    s.splitCubeVector = true;
    s.caffe = false;
    break;
  case SocFamily::Ascend950:
    s.bf16 = true;
    s.hif8 = true;
    s.splitCubeVector = true;
    s.caffe = false;
    s.ubFusion = false;
    break;
  case SocFamily::Ascend035:
    s.caffe = false;
    s.singleOp = false;
    s.shapeRange = false;
    s.mode30Only = true;
    break;
  }
  if (s.bf16) s.dtypes.push_back(DType::BFloat16);
  if (s.hif8) { // hifloat8 has no ONNX type; the FP8 output types do
    s.dtypes.push_back(DType::Float8E4M3FN);
    s.dtypes.push_back(DType::Float8E5M2);
  }
  return s;
}

SocInfo chip(std::string name, SocFamily family, std::string evidence,
             std::optional<SocHardware> hardware = std::nullopt) {
  SocInfo s = familyDefaults(family);
  s.name = std::move(name);
  s.evidence = std::move(evidence);
  s.hardware = std::move(hardware);
  return s;
}

std::vector<SocInfo> buildTable() {
  using F = SocFamily;
  std::vector<SocInfo> t;
  t.push_back(chip("Ascend310", F::Ascend310, "source",
                   hw("AIC-M-100", "dav-m100", 2, 0, 8 * kMiB, 1 * kMiB, 256 * kKiB, 253952, 680)));

  SocHardware b1 =
      hw("AIC-M-300", "dav-m300", 1, 1, 4 * kMiB, 1 * kMiB, 128 * kKiB, 248 * kKiB, 1024);
  b1.note = "UB 248-256 KiB and cube frequency 1024/1224 MHz differ between configurations";
  t.push_back(chip("Ascend310B1", F::Ascend310B, "source", b1));
  t.push_back(chip("Ascend310B4", F::Ascend310B, "user reports"));

  t.push_back(
      chip("Ascend310P1", F::Ascend310P, "source",
           hw("AIC-M-200", "dav-m200", 10, 8, 16 * kMiB, 1 * kMiB, 256 * kKiB, 256 * kKiB, 1060)));
  SocHardware p3 =
      hw("AIC-M-200", "dav-m200", 8, 7, 16 * kMiB, 1 * kMiB, 256 * kKiB, 256 * kKiB, 1060);
  p3.aiCpuCount = 16;
  t.push_back(chip("Ascend310P3", F::Ascend310P, "source", p3));
  t.push_back(chip("Ascend310P5", F::Ascend310P, "docs"));
  t.push_back(chip("Ascend310P7", F::Ascend310P, "docs"));

  auto c100 = [&](int cores, int freq) {
    return hw("AIC-C-100", "dav-c100", cores, 0, 32 * kMiB, 1 * kMiB, 256 * kKiB, 256 * kKiB, freq);
  };
  t.push_back(chip("Ascend910", F::Ascend910, "source"));
  t.push_back(chip("Ascend910A", F::Ascend910, "source", c100(32, 1000)));
  // First-generation 30-core SKU, not the A2 910B1..B4.
  t.push_back(chip("Ascend910B", F::Ascend910, "source", c100(30, 900)));
  t.push_back(chip("Ascend910ProA", F::Ascend910, "source", c100(32, 1100)));
  t.push_back(chip("Ascend910ProB", F::Ascend910, "source", c100(30, 1150)));
  t.push_back(chip("Ascend910PremiumA", F::Ascend910, "source", c100(32, 1220)));

  t.push_back(chip("Ascend910B1", F::Ascend910B, "source",
                   hw("AIC-C-220", "dav-c220-cube", 24, 48, 192 * kMiB, 512 * kKiB, 128 * kKiB,
                      192 * kKiB, 1850)));
  SocHardware a2b2 = hw("", "dav-c220", 24, 48, 192 * kMiB, 0, 0, 0, 0);
  a2b2.hbmBytes = 64 * kGiB;
  a2b2.note = "from a third-party platform configuration; L2 size not confirmed";
  t.push_back(chip("Ascend910B2", F::Ascend910B, "source", a2b2));
  t.push_back(chip("Ascend910B2C", F::Ascend910B, "source"));
  t.push_back(chip("Ascend910B3", F::Ascend910B, "source"));
  SocHardware a2b4 = hw("", "dav-c220", 20, 40, 96 * kMiB, 0, 0, 0, 1500);
  a2b4.hbmBytes = 32 * kGiB;
  a2b4.note = "from a third-party platform configuration";
  t.push_back(chip("Ascend910B4", F::Ascend910B, "source", a2b4));
  t.push_back(chip("Ascend910B4-1", F::Ascend910B, "source"));

  for (const char* name : {"Ascend910_9391", "Ascend910_9381", "Ascend910_9392", "Ascend910_9382",
                           "Ascend910_9372", "Ascend910_9362"})
    t.push_back(chip(name, F::Ascend910_93, "source"));

  // 950 strings are "<Chip Name>_<NPU Name>"; the NPU names are not known, so accept any.
  for (const char* prefix : {"Ascend950PR_", "Ascend950DT_"}) {
    SocHardware h;
    h.aiCoreCount = 0; // 28 or 32 cube cores depending on the part
    h.ubBytes = 248 * kKiB;
    h.note = "28/32 cube cores, UB 248 KiB (user reports)";
    SocInfo s = chip(prefix, F::Ascend950, "docs (name form only)", h);
    s.namePattern = true;
    t.push_back(std::move(s));
  }

  t.push_back(chip("Ascend035", F::Ascend035, "source",
                   hw("AIC-N-350", "dav-n350", 1, 0, 0, 0, 0, 32 * kKiB, 150)));
  t.push_back(chip("Ascend035A", F::Ascend035, "source"));
  t.push_back(chip("Ascend035B", F::Ascend035, "source"));

  for (const char* name : {"Ascend610", "BS9SX1AA", "BS9SX1AB", "BS9SX1AC", "MC62"})
    t.push_back(chip(name, F::Automotive, "source"));
  return t;
}

bool matchesPattern(const SocInfo& s, const std::string& value) {
  if (value.size() <= s.name.size() || value.compare(0, s.name.size(), s.name) != 0) return false;
  return std::all_of(value.begin() + s.name.size(), value.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0; });
}

} // namespace

const char* socFamilyName(SocFamily family) {
  switch (family) {
  case SocFamily::Ascend310:
    return "Atlas 200/300 (Ascend 310)";
  case SocFamily::Ascend310B:
    return "Atlas 200I/500 A2 (310B)";
  case SocFamily::Ascend310P:
    return "Atlas inference series (310P)";
  case SocFamily::Ascend910:
    return "Atlas training (Ascend 910 first generation)";
  case SocFamily::Ascend910B:
    return "Atlas A2 training/inference (910B)";
  case SocFamily::Ascend910_93:
    return "Atlas A3 (910C / 910_93)";
  case SocFamily::Ascend950:
    return "Ascend 950PR / 950DT";
  case SocFamily::Ascend035:
    return "IPV350 / nano";
  case SocFamily::Automotive:
    return "automotive / other";
  }
  return "unknown";
}

bool SocInfo::supportsDType(DType type) const {
  return std::find(dtypes.begin(), dtypes.end(), type) != dtypes.end();
}

bool SocInfo::supportsCoreType(CoreType type) const {
  return std::find(coreTypes.begin(), coreTypes.end(), type) != coreTypes.end();
}

const std::vector<SocInfo>& socTable() {
  static const std::vector<SocInfo> table = buildTable();
  return table;
}

const SocInfo* findSoc(const std::string& socVersion) {
  for (const SocInfo& s : socTable()) {
    if (s.namePattern ? matchesPattern(s, socVersion) : s.name == socVersion) return &s;
  }
  return nullptr;
}

std::vector<std::string> socNames() {
  std::vector<std::string> names;
  for (const SocInfo& s : socTable())
    names.push_back(s.namePattern ? s.name + "<NPU name>" : s.name);
  return names;
}

Status unknownSocError(const std::string& socVersion) {
  if (socVersion.empty()) {
    return Status(ErrorCode::SocVersionUnknown,
                  "The required parameter --soc_version for ATC is empty. Another possible reason "
                  "is that the values of some parameters are not enclosed by quotation marks "
                  "(\"\").",
                  fmt::format("pass --soc_version=<chip>, one of: {}", fmt::join(socNames(), ", ")))
        .withPeerCode("E10054");
  }
  // A chip name in the wrong case or one character off is named back (ascend310p3 → Ascend310P3).
  const std::string near = closestSpelling(socVersion, socNames());
  return Status(ErrorCode::SocVersionUnknown,
                fmt::format("Value [{}] for parameter [--soc_version] is invalid. Reason: The "
                            "corresponding platform configuration file cannot be found based on "
                            "the configured soc_version. Valid values: {}",
                            socVersion, fmt::join(socNames(), ", ")),
                near.empty() ? std::string("pass one of the values listed as --soc_version")
                             : fmt::format("did you mean --soc_version={}? (names are "
                                           "case-sensitive)",
                                           near))
      .withPeerCode("E20101");
}

Status checkSocVersion(const std::string& socVersion) {
  if (findSoc(socVersion)) return Status::ok();
  return unknownSocError(socVersion);
}

} // namespace kiln
