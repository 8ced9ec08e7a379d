// .ms writer: serializes a lowered graph as a "MSL2" FlatBuffer (fp16 weights, weight-quant
// params with bit packing, .msw external weights) and writes it atomically.
#include "kiln/backends/ms_writer.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "kiln/support/atomic_file.h"
#include "kiln_proto/ms_model_generated.h"
#include "ms_lower.h"
#include "weight_coding.h"

namespace kiln {

namespace {

namespace fb = kiln::msfb;
using ms::MsGraph;
using ms::MsTensor;

constexpr uint32_t kMswMagic = 0x12345678;
constexpr uint64_t kMswHeaderSize = 4096;

uint16_t floatToHalf(float value) {
  uint32_t f;
  std::memcpy(&f, &value, 4);
  const uint32_t sign = (f >> 16) & 0x8000;
  const int32_t exp = static_cast<int32_t>((f >> 23) & 0xff);
  uint32_t mant = f & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  const int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00); // overflow → inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign); // underflow → ±0
    mant |= 0x800000;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half; // may carry into the exponent: ok
  return static_cast<uint16_t>(sign | half);
}

// The bytes a tensor stores: float16 for fp16 weights, bit-packed codes for odd bit widths.
struct StoredData {
  std::vector<uint8_t> converted; // when the bytes differ from the lowered ones
  const uint8_t* data = nullptr;
  size_t size = 0;
  int dataType = 0;
  int compressType = 0;
};

Expected<StoredData> storedData(const MsTensor& t, const MsWriteOptions& options) {
  StoredData s;
  s.dataType = t.dataType;
  s.compressType = t.compressType;
  if (!t.data) return s;
  s.data = t.data->data();
  s.size = t.data->size();
  if (options.fp16Weights && t.dataType == ms::kTypeFloat32 && !t.isQuantizedWeight) {
    const size_t count = s.size / 4;
    s.converted.resize(count * 2);
    for (size_t i = 0; i < count; ++i) {
      float f;
      std::memcpy(&f, s.data + i * 4, 4);
      uint16_t h = floatToHalf(f);
      std::memcpy(s.converted.data() + i * 2, &h, 2);
    }
    s.dataType = ms::kTypeFloat16;
  }
  if (t.isQuantizedWeight && !t.quantParams.empty()) {
    const int bits = t.quantParams[0].numBits;
    const bool wide = t.dataType == ms::kTypeInt16;
    const size_t count = s.size / (wide ? 2 : 1);
    const int64_t lo = -(int64_t{1} << (bits - 1)), hi = (int64_t{1} << (bits - 1)) - 1;
    std::vector<int64_t> codes(count);
    for (size_t i = 0; i < count; ++i) {
      if (wide) {
        int16_t v;
        std::memcpy(&v, s.data + i * 2, 2);
        codes[i] = v;
      } else {
        codes[i] = static_cast<int8_t>(s.data[i]);
      }
      if (codes[i] < lo || codes[i] > hi)
        return Status(ErrorCode::MsLowerBadAttribute,
                      fmt::format("weight '{}' holds code {} outside the {}-bit range [{}, {}]",
                                  t.name, codes[i], bits, lo, hi),
                      "pass the bit_num the weights were quantized with");
    }
    if (bits != 8 && bits != 16) {
      // BITPACKING (ms.md §3.3): biased to unsigned, LSB-first stream, bytes (≤ 7 bits) or
      // little-endian uint16 words (9..15 bits), last unit zero-padded.
      const uint64_t totalBits = static_cast<uint64_t>(count) * static_cast<uint64_t>(bits);
      const size_t unitBits = bits < 8 ? 8 : 16;
      const size_t units = static_cast<size_t>((totalBits + unitBits - 1) / unitBits);
      std::vector<uint8_t> packed(units * (unitBits / 8), 0);
      uint64_t pos = 0;
      for (int64_t code : codes) {
        const uint64_t u = static_cast<uint64_t>(code - lo);
        for (int b = 0; b < bits; ++b, ++pos)
          if ((u >> b) & 1) {
            // Stream bit `pos` → unit pos/unitBits, bit pos%unitBits; units are little endian.
            const uint64_t unit = pos / unitBits, bit = pos % unitBits;
            packed[static_cast<size_t>(unit * (unitBits / 8) + bit / 8)] |=
                static_cast<uint8_t>(1u << (bit % 8));
          }
      }
      s.converted = std::move(packed);
      s.dataType = bits < 8 ? ms::kTypeInt8 : ms::kTypeInt16;
      s.compressType = fb::WeightQuantCompressType_BITPACKING;
    }
    if (options.encodeWeights) {
      // converter_lite's enable_encode: INDEXING or SPARSE when smaller (ms.md §3.4); the stream
      // replaces the data, dataType stays int8 (≤ 8 bits) or int16.
      std::vector<int32_t> codes32(codes.begin(), codes.end());
      std::vector<int32_t> zeroPoints;
      for (const auto& q : t.quantParams)
        zeroPoints.push_back(q.zeroPoint);
      const size_t current = s.converted.empty() ? s.size : s.converted.size();
      auto indexing = ms::encodeIndexing(codes32, bits);
      auto sparse = ms::encodeSparse(codes32, bits, zeroPoints);
      bool sparseWins = sparse.size() < indexing.size();
      std::vector<uint8_t>& smaller = sparseWins ? sparse : indexing;
      if (smaller.size() < current) {
        s.converted = std::move(smaller);
        s.dataType = bits <= 8 ? ms::kTypeInt8 : ms::kTypeInt16;
        s.compressType =
            sparseWins ? fb::WeightQuantCompressType_SPARSE : fb::WeightQuantCompressType_INDEXING;
      }
    }
  }
  if (!s.converted.empty() || (s.size && s.dataType != t.dataType)) {
    s.data = s.converted.data();
    s.size = s.converted.size();
  }
  return s;
}

struct External {
  std::string location; // file name of the .msw beside the .ms
  std::vector<std::pair<const uint8_t*, size_t>> chunks;
};

// Serializes `g`; with `external` set, constant data goes to the .msw chunks instead.
Expected<flatbuffers::DetachedBuffer> serialize(const MsGraph& g, const MsWriteOptions& options,
                                                const std::vector<StoredData>& stored,
                                                External* external) {
  uint64_t dataBytes = 0;
  for (const auto& s : stored)
    dataBytes += s.size;
  flatbuffers::FlatBufferBuilder b(external ? 1 << 20 : static_cast<size_t>(dataBytes) + (1 << 20));
  uint64_t offset = kMswHeaderSize;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const MsTensor& t = g.tensors[i];
    const StoredData& s = stored[i];
    auto name = b.CreateString(t.name);
    auto dims = b.CreateVector(t.dims);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::ExternalData>>> ext;
    if (s.size && external && t.nodeType == ms::kNodeValue) {
      external->chunks.push_back({s.data, s.size});
      auto entry = fb::CreateExternalData(
          b, b.CreateString(std::to_string(s.data[0])), b.CreateString(external->location),
          static_cast<int64_t>(offset), static_cast<int64_t>(s.size));
      ext = b.CreateVector(std::vector<flatbuffers::Offset<fb::ExternalData>>{entry});
      offset += s.size;
    } else if (s.size) {
      data = b.CreateVector(s.data, s.size);
    }
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::QuantParam>>> quant;
    if (!t.quantParams.empty()) {
      std::vector<flatbuffers::Offset<fb::QuantParam>> params;
      for (const auto& q : t.quantParams)
        // min/max reset, narrowRange true, inited false as converter_lite saves them (ms.md §3.1).
        params.push_back(fb::CreateQuantParam(b, q.scale, q.zeroPoint, 0, 0, true, q.numBits, false,
                                              1.0f, q.meanCorr, q.dstDtype));
      quant = b.CreateVector(params);
    }
    tensors.push_back(fb::CreateTensor(
        b, t.nodeType, s.dataType, dims, static_cast<fb::Format>(t.format), 0, 0, data, quant, 0,
        name, false, static_cast<fb::WeightQuantCompressType>(s.compressType), ext));
  }
  std::vector<flatbuffers::Offset<fb::CNode>> nodes;
  for (const auto& n : g.nodes) {
    auto name = b.CreateString(n.name);
    auto value = n.attributes(b);
    auto primitive = fb::CreatePrimitive(b, static_cast<fb::PrimitiveType>(n.primitiveType), value);
    nodes.push_back(fb::CreateCNode(b, name, primitive, b.CreateVector(n.inputs),
                                    b.CreateVector(n.outputs),
                                    static_cast<fb::QuantType>(n.quantType)));
  }
  std::vector<flatbuffers::Offset<fb::SubGraph>> subgraphList;
  if (g.subgraphs.empty()) {
    std::vector<uint32_t> nodeIndices(g.nodes.size()), tensorIndices(g.tensors.size());
    for (uint32_t i = 0; i < nodeIndices.size(); ++i)
      nodeIndices[i] = i;
    for (uint32_t i = 0; i < tensorIndices.size(); ++i)
      tensorIndices[i] = i;
    subgraphList.push_back(fb::CreateSubGraph(
        b, b.CreateString(fmt::format("subgraph_0_{}", g.name.empty() ? "main_graph" : g.name)),
        b.CreateVector(g.inputs), b.CreateVector(g.outputs), b.CreateVector(nodeIndices),
        b.CreateVector(tensorIndices)));
  }
  for (const ms::MsSubGraph& sub : g.subgraphs) {
    // Every tensor the subgraph touches: its parameters, results and its nodes' tensors.
    std::set<uint32_t> touched(sub.inputs.begin(), sub.inputs.end());
    touched.insert(sub.outputs.begin(), sub.outputs.end());
    for (uint32_t n : sub.nodes) {
      touched.insert(g.nodes[n].inputs.begin(), g.nodes[n].inputs.end());
      touched.insert(g.nodes[n].outputs.begin(), g.nodes[n].outputs.end());
    }
    std::vector<uint32_t> tensorIndices(touched.begin(), touched.end());
    subgraphList.push_back(fb::CreateSubGraph(
        b, b.CreateString(sub.name), b.CreateVector(sub.inputs), b.CreateVector(sub.outputs),
        b.CreateVector(sub.nodes), b.CreateVector(tensorIndices)));
  }
  auto graphName = b.CreateString(g.name);
  auto version = b.CreateString(options.version);
  auto allTensors = b.CreateVector(tensors);
  auto allNodes = b.CreateVector(nodes);
  auto subgraphs = b.CreateVector(subgraphList);
  auto inputs = b.CreateVector(g.inputs);
  auto outputs = b.CreateVector(g.outputs);
  auto root = fb::CreateMetaGraph(b, graphName, version, /*fmkType ONNX*/ 2, inputs, outputs, 0,
                                  allNodes, allTensors, subgraphs);
  fb::FinishMetaGraphBuffer(b, root);
  flatbuffers::DetachedBuffer out = b.Release();
  // The same check the runtime runs before it loads anything (and `kiln inspect` runs).
  flatbuffers::Verifier verifier(out.data(), out.size());
  if (!fb::VerifyMetaGraphBuffer(verifier))
    return Status(ErrorCode::Internal, "the written .ms buffer fails FlatBuffers verification",
                  "report this as a kiln bug");
  return out;
}

struct Built {
  std::vector<uint8_t> model;
  std::vector<uint8_t> weights; // .msw contents; empty when the weights are inline
};

Expected<Built> build(const Model& model, const MsWriteOptions& options,
                      const std::string& mswLocation) {
  if (options.weightQuantBits < 0 || options.weightQuantBits > 16)
    return Status(
        ErrorCode::BadFlag,
        fmt::format("weight-quant bit width {} is outside 1..16", options.weightQuantBits),
        "pass bit_num between 1 and 16");
  auto lowered = ms::lowerToMs(model, options);
  if (!lowered) return lowered.status();
  std::vector<StoredData> stored;
  uint64_t dataBytes = 0;
  for (const MsTensor& t : lowered->tensors) {
    auto s = storedData(t, options);
    if (!s) return s.status();
    dataBytes += s->size;
    stored.push_back(std::move(*s));
  }
  // Room for everything but the data (names, dims, nodes), so the inline build never overflows.
  const uint64_t metaEstimate =
      (uint64_t{1} << 16) + 512 * (lowered->tensors.size() + lowered->nodes.size());
  const uint64_t limit =
      std::min<uint64_t>(options.externalDataThreshold, std::numeric_limits<int32_t>::max());
  Built out;
  if (dataBytes + metaEstimate < limit) {
    auto buffer = serialize(*lowered, options, stored, nullptr);
    if (!buffer) return buffer.status();
    if (buffer->size() < limit) {
      out.model.assign(buffer->data(), buffer->data() + buffer->size());
      return out;
    }
  }
  if (mswLocation.empty())
    return Status(ErrorCode::MsModelTooLarge,
                  fmt::format("the .ms buffer would hold {} bytes of weights, past the {}-byte "
                              "limit of one FlatBuffer",
                              dataBytes, limit),
                  "write the model to a file (kiln convert --to ms), which puts the weights in a "
                  ".msw file beside it");
  External external;
  external.location = mswLocation;
  auto buffer = serialize(*lowered, options, stored, &external);
  if (!buffer) return buffer.status();
  // Without weights only the FlatBuffers offset range (2 GiB) bounds the graph itself.
  if (buffer->size() >= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    return Status(ErrorCode::MsModelTooLarge,
                  fmt::format("the .ms graph without weights still needs {} bytes", buffer->size()),
                  "split the model");
  out.model.assign(buffer->data(), buffer->data() + buffer->size());
  // .msw: 4096-byte header (magic, "checksum" = first model byte), then every constant's bytes in
  // tensor order (ms.md §6.3).
  uint64_t total = kMswHeaderSize;
  for (const auto& c : external.chunks)
    total += c.second;
  out.weights.assign(static_cast<size_t>(total), 0);
  const uint32_t checksum = out.model.empty() ? 0 : out.model[0];
  std::memcpy(out.weights.data(), &kMswMagic, 4);
  std::memcpy(out.weights.data() + 4, &checksum, 4);
  size_t pos = kMswHeaderSize;
  for (const auto& c : external.chunks) {
    std::memcpy(out.weights.data() + pos, c.first, c.second);
    pos += c.second;
  }
  return out;
}

Status writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  return writeFileAtomically(path, [&](std::ostream& os) {
    os.write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
    if (!os)
      return Status(ErrorCode::FileWriteFailed, fmt::format("{}: write failed", path),
                    "check free space and permissions");
    return Status::ok();
  });
}

} // namespace

Expected<std::vector<uint8_t>> buildMsBuffer(const Model& model, const MsWriteOptions& options) {
  auto built = build(model, options, "");
  if (!built) return built.status();
  return std::move(built->model);
}

Status writeMsFile(const Model& model, const MsWriteOptions& options, const std::string& path) {
  const std::string mswPath = path + "w";
  const std::string location = std::filesystem::path(mswPath).filename().string();
  auto built = build(model, options, location);
  if (!built) return built.status();
  if (!built->weights.empty()) {
    Status s = writeBytes(mswPath, built->weights);
    if (!s) return s;
  }
  Status s = writeBytes(path, built->model);
  if (!s && !built->weights.empty()) {
    std::error_code ec;
    std::filesystem::remove(mswPath, ec); // no half-written model pair
  }
  return s;
}

} // namespace kiln
