// Reading .om files into executable IR: container checks, then the root ModelDef raised to ONNX
// ops with constants taken from WEIGHTS_DATA (or the external weight files beside the model).
#include <filesystem>

#include <fmt/format.h>

#include "kiln/support/mapped_file.h"
#include "om_internal.h"

namespace kiln {

Expected<Model> readOmBuffer(const uint8_t* data, size_t size, const std::string& displayName) {
  auto container = om::parseContainer(data, size, displayName);
  if (!container) return container.status();
  const om::OmHeader& h = container->header;
  if (h.modelType == om::kFlowModelType)
    return Status(ErrorCode::OmReadUnsupported,
                  fmt::format("{}: a flow model (model type 3) holds several sub-models; kiln "
                              "reads single models",
                              displayName),
                  "use `kiln inspect` to see its parts");
  const om::ModelBlock& block = container->blocks.front();
  const om::Partition* def = block.find(om::kModelDef);
  if (!def)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: at byte {}: the first model block has no MODEL_DEF partition",
                              displayName, block.tableOffset),
                  "the file is damaged; convert the model again");
  auto modelDef = om::parseModelDef(*def, displayName);
  if (!modelDef) return modelDef.status();
  const om::Partition* weights = block.find(om::kWeightsData);
  std::string baseDir = std::filesystem::path(displayName).parent_path().string();
  return om::raiseModelDef(*modelDef, weights ? weights->data : nullptr,
                           weights ? weights->size : 0, baseDir, displayName);
}

Expected<Model> readOmFile(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  return readOmBuffer((*file)->data(), (*file)->size(), path);
}

} // namespace kiln
