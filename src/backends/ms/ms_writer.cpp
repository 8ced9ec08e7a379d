// .ms writer: serializes a lowered graph as a "MSL2" FlatBuffer (fp16 weights, weight-quant
// params with bit packing, .msw external weights) and writes it atomically.
#include "kiln/backends/ms_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <ostream>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "kiln/runtime/half_block.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/page_release.h"
#include "kiln/support/progress.h"
#include "kiln/support/sigbus_guard.h"
#include "ms_lower.h"
#include "ms_model_schema.h"
#include "weight_coding.h"

namespace kiln {

namespace {

namespace fb = kiln::msfb;
using ms::MsGraph;
using ms::MsTensor;

constexpr uint32_t kMswMagic = 0x12345678;
constexpr uint64_t kMswHeaderSize = 4096;

// The bytes a tensor stores: float16 for fp16 weights, bit-packed codes for odd bit widths.
// Nothing is copied here for weights stored as they are lowered or converted to float16: those
// bytes are produced while the output is written (emitStored), one tensor at a time, straight from
// the lowered buffer (for imported weights, the mapped model file). Only packed and encoded codes,
// already a fraction of the float weights, are materialised.
struct StoredData {
  std::vector<uint8_t> converted; // packed / encoded codes
  const Buffer* source = nullptr; // the lowered bytes
  const uint8_t* data = nullptr;  // the stored bytes, unless toHalf
  size_t size = 0;                // stored size
  bool toHalf = false;            // stored = float16 of the float32 source
  int dataType = 0;
  int compressType = 0;
  // Stored in another dimension order than the source (MsTensor::writePerm); empty: as is.
  std::vector<int64_t> perm, sourceDims;

  uint8_t firstByte() const {
    if (!toHalf) return data[0];
    uint16_t half;
    rt::floatsToHalves(source->data(), &half, 1);
    return static_cast<uint8_t>(half & 0xff); // little endian: the low byte first
  }
};

// Element `first` onwards of a source tensor read in permuted order: out axis k walks source axis
// perm[k]. Copies `count` elements of `elem` bytes to `dst`, an odometer over the out index.
void gatherPermuted(const uint8_t* src, const std::vector<int64_t>& sourceDims,
                    const std::vector<int64_t>& perm, size_t elem, uint64_t first, size_t count,
                    uint8_t* dst) {
  const size_t rank = perm.size();
  std::vector<int64_t> srcStride(rank, 1), outDims(rank), stride(rank), idx(rank);
  for (size_t i = rank; i-- > 1;)
    srcStride[i - 1] = srcStride[i] * sourceDims[i];
  for (size_t k = 0; k < rank; ++k) {
    outDims[k] = sourceDims[static_cast<size_t>(perm[k])];
    stride[k] = srcStride[static_cast<size_t>(perm[k])];
  }
  uint64_t rest = first;
  int64_t offset = 0;
  for (size_t k = rank; k-- > 0;) {
    idx[k] = static_cast<int64_t>(rest % static_cast<uint64_t>(outDims[k]));
    rest /= static_cast<uint64_t>(outDims[k]);
    offset += idx[k] * stride[k];
  }
  const int64_t inner = outDims[rank - 1], innerStride = stride[rank - 1];
  auto run = [&](auto width) {
    constexpr size_t w = decltype(width)::value;
    size_t done = 0;
    while (done < count) {
      // The rest of the innermost axis, one strided run.
      const size_t n = std::min<size_t>(count - done, static_cast<size_t>(inner - idx[rank - 1]));
      const uint8_t* from = src + static_cast<size_t>(offset) * w;
      for (size_t i = 0; i < n; ++i)
        std::memcpy(dst + (done + i) * w, from + i * static_cast<size_t>(innerStride) * w, w);
      done += n;
      offset += static_cast<int64_t>(n) * innerStride;
      idx[rank - 1] += static_cast<int64_t>(n);
      for (size_t k = rank; k-- > 1 && idx[k] == outDims[k];) {
        offset -= idx[k] * stride[k];
        idx[k] = 0;
        ++idx[k - 1];
        offset += stride[k - 1];
      }
    }
  };
  switch (elem) {
  case 1:
    run(std::integral_constant<size_t, 1>{});
    break;
  case 2:
    run(std::integral_constant<size_t, 2>{});
    break;
  case 4:
    run(std::integral_constant<size_t, 4>{});
    break;
  default:
    run(std::integral_constant<size_t, 8>{});
    break;
  }
}

// Writes `s` through `sink(bytes, count)` in pieces; float16 conversion and the dimension
// permutation happen here, a chunk at a time. Gives the source's mapped pages back once they are
// written.
template <typename Sink> bool emitStored(const StoredData& s, Sink&& sink) {
  bool ok = true;
  const uint8_t* src = s.source ? s.source->data() : s.data;
  if (!s.perm.empty()) {
    uint64_t count = 1;
    for (int64_t d : s.sourceDims)
      count *= static_cast<uint64_t>(d);
    const size_t elem = count ? s.source->size() / count : 1;
    constexpr size_t kChunk = size_t{1} << 18; // elements per chunk
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(kChunk, count));
    std::vector<uint8_t> gathered(chunk * elem);
    std::vector<uint16_t> halves(s.toHalf ? chunk : 0);
    for (uint64_t done = 0; ok && done < count;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, count - done));
      gatherPermuted(src, s.sourceDims, s.perm, elem, done, n, gathered.data());
      if (s.toHalf) {
        rt::floatsToHalves(gathered.data(), halves.data(), n);
        ok = sink(reinterpret_cast<const uint8_t*>(halves.data()), n * 2);
      } else {
        ok = sink(gathered.data(), n * elem);
      }
      done += n;
    }
  } else if (s.toHalf) {
    constexpr size_t kChunk = size_t{1} << 19; // values per chunk: 1 MiB of float16
    std::vector<uint16_t> halves(std::min(kChunk, s.size / 2));
    for (size_t done = 0, count = s.size / 2; ok && done < count;) {
      const size_t n = std::min(kChunk, count - done);
      rt::floatsToHalves(src + done * 4, halves.data(), n);
      ok = sink(reinterpret_cast<const uint8_t*>(halves.data()), n * 2);
      done += n;
    }
  } else {
    ok = sink(s.data, s.size);
  }
  releasePages(s.source);
  return ok;
}

// --fp16=on keeps a weight float32 when a value lies beyond float16's range (it would be stored
// as inf); convertToMs names such weights in a note.
bool fitsFloat16(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 4 <= size; i += 4) {
    float v;
    std::memcpy(&v, data + i, 4);
    if (std::isfinite(v) && std::fabs(v) > 65504.0f) return false;
  }
  return true;
}

Expected<StoredData> storedData(const MsTensor& t, const MsWriteOptions& options) {
  StoredData s;
  s.dataType = t.dataType;
  s.compressType = t.compressType;
  if (!t.data) return s;
  s.source = t.data.get();
  s.data = t.data->data();
  s.size = t.data->size();
  if (!t.writePerm.empty()) {
    s.perm = t.writePerm;
    s.sourceDims = t.sourceDims;
  }
  if (options.fp16Weights && t.dataType == ms::kTypeFloat32 && !t.isQuantizedWeight &&
      fitsFloat16(s.data, s.size)) {
    s.toHalf = true;
    s.size = s.size / 4 * 2;
    s.data = nullptr;
    s.dataType = ms::kTypeFloat16;
  }
  if (t.isQuantizedWeight && !t.quantParams.empty()) {
    const int bits = t.quantParams[0].numBits;
    const bool wide = t.dataType == ms::kTypeInt16;
    const size_t count = s.size / (wide ? 2 : 1);
    const int32_t lo = -(int32_t{1} << (bits - 1)), hi = (int32_t{1} << (bits - 1)) - 1;
    auto code = [&](size_t i) -> int32_t {
      if (!wide) return static_cast<int8_t>(s.data[i]);
      int16_t v;
      std::memcpy(&v, s.data + i * 2, 2);
      return v;
    };
    for (size_t i = 0; i < count; ++i) {
      const int32_t c = code(i);
      if (c < lo || c > hi)
        return Status(ErrorCode::MsLowerBadAttribute,
                      fmt::format("weight '{}' holds code {} outside the {}-bit range [{}, {}]",
                                  t.name, c, bits, lo, hi),
                      "pass the bit_num the weights were quantized with");
    }
    const bool pack = bits != 8 && bits != 16;
    const bool encode = options.encodeWeights && !t.modelCodes;
    if (pack || encode) {
      // The codes in stored order: a permuted tensor's are gathered first.
      std::vector<uint8_t> gathered;
      if (!s.perm.empty()) {
        gathered.resize(s.size);
        gatherPermuted(s.data, s.sourceDims, s.perm, wide ? 2 : 1, 0, count, gathered.data());
        s.data = gathered.data();
      }
      std::vector<int32_t> codes(count);
      for (size_t i = 0; i < count; ++i)
        codes[i] = code(i);
      s.data = s.source->data();
      if (pack) {
        // BITPACKING (ms.md §3.3): biased to unsigned, LSB-first stream, bytes (≤ 7 bits) or
        // little-endian uint16 words (9..15 bits), last unit zero-padded.
        const uint64_t totalBits = static_cast<uint64_t>(count) * static_cast<uint64_t>(bits);
        const size_t unitBits = bits < 8 ? 8 : 16;
        const size_t units = static_cast<size_t>((totalBits + unitBits - 1) / unitBits);
        std::vector<uint8_t> packed(units * (unitBits / 8), 0);
        uint64_t pos = 0;
        for (int32_t c : codes) {
          const uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(c) - lo);
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
      if (encode) {
        // converter_lite's enable_encode: INDEXING or SPARSE when smaller (ms.md §3.4); the
        // stream replaces the data, dataType stays int8 (≤ 8 bits) or int16.
        std::vector<int32_t> zeroPoints;
        for (const auto& q : t.quantParams)
          zeroPoints.push_back(q.zeroPoint);
        const size_t current = s.converted.empty() ? s.size : s.converted.size();
        // Sizes first (exact): a stream is written only when it is the one kept.
        const size_t indexing = ms::indexingSize(codes, bits);
        const size_t sparse = ms::sparseSize(codes, bits, zeroPoints);
        bool sparseWins = sparse < indexing;
        if ((sparseWins ? sparse : indexing) < current) {
          s.converted = sparseWins ? ms::encodeSparse(codes, bits, zeroPoints)
                                   : ms::encodeIndexing(codes, bits);
          s.dataType = bits <= 8 ? ms::kTypeInt8 : ms::kTypeInt16;
          s.compressType = sparseWins ? fb::WeightQuantCompressType_SPARSE
                                      : fb::WeightQuantCompressType_INDEXING;
        }
      }
    }
  }
  if (!s.converted.empty()) {
    s.toHalf = false;
    s.perm.clear(); // the stream is in stored order already
    s.data = s.converted.data();
    s.size = s.converted.size();
  }
  return s;
}

// The QuantParam of each row of a MsRowQuant tensor: its block's scale and its zero point moved to
// the stored codes (bit packing biases a b-bit code q by 2^(b-1), so the model's zero point z
// becomes z - 2^(b-1)); written as converter_lite saves them (ms.md §3.1).
flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::QuantParam>>>
rowQuantParams(flatbuffers::FlatBufferBuilder& b, const ms::MsRowQuant& q) {
  std::vector<flatbuffers::Offset<fb::QuantParam>> params(static_cast<size_t>(q.rows));
  const uint8_t* scales = q.scales->data();
  const uint8_t* zeroPoints = q.zeroPoints ? q.zeroPoints->data() : nullptr;
  const int32_t bias = 1 << (q.bits - 1);
  for (int64_t r = 0; r < q.rows; ++r) {
    float scale;
    if (q.scaleIsHalf) {
      uint16_t h;
      std::memcpy(&h, scales + 2 * r, 2);
      scale = rt::halfToFloat(h);
    } else {
      std::memcpy(&scale, scales + 4 * r, 4);
    }
    int32_t zeroPoint = 0;
    if (zeroPoints) {
      const int64_t column = r / q.blocks, bit = (r % q.blocks) * q.bits;
      const uint8_t byte = zeroPoints[column * q.zeroPointRowBytes + bit / 8];
      zeroPoint = ((byte >> (bit % 8)) & ((1 << q.bits) - 1)) - bias;
    }
    params[static_cast<size_t>(r)] = fb::CreateQuantParam(b, scale, zeroPoint, 0, 0, true, q.bits,
                                                          false, 1.0f, 0.0f, ms::kTypeInt8);
  }
  return b.CreateVector(params);
}

// Where a constant's bytes go in the serialized FlatBuffer: left unwritten by the builder (the
// builder reserves them without touching the pages) and filled while the file is written.
struct Hole {
  uint64_t position; // in the finished buffer
  const StoredData* stored;
};

struct External {
  std::string location; // file name of the .msw beside the .ms
  std::vector<const StoredData*> chunks;
};

// Serializes `g`. With `external` set, constant data goes to the .msw chunks instead; otherwise
// the data vectors are reserved in the buffer and listed in `holes` for the caller to fill.
Expected<flatbuffers::DetachedBuffer> serialize(const MsGraph& g, const MsWriteOptions& options,
                                                const std::vector<StoredData>& stored,
                                                External* external, std::vector<Hole>& holes) {
  uint64_t dataBytes = 0;
  for (const auto& s : stored)
    dataBytes += s.size;
  // Reserve room for everything up front: a growing builder copies what it holds, which would
  // touch (and so make resident) the reserved data pages.
  // A QuantParam table takes about 28 bytes with its vtable share and offset.
  uint64_t quantParams = 0;
  for (const auto& t : g.tensors)
    quantParams +=
        t.quantParams.size() + (t.rowQuant ? static_cast<uint64_t>(t.rowQuant->rows) : 0);
  const uint64_t metaEstimate =
      (uint64_t{2} << 20) + 1024 * (g.tensors.size() + g.nodes.size()) + 32 * quantParams;
  flatbuffers::FlatBufferBuilder b(
      external ? static_cast<size_t>(metaEstimate)
               : static_cast<size_t>(dataBytes + 16 * g.tensors.size() + metaEstimate));
  uint64_t offset = kMswHeaderSize;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  std::vector<std::pair<flatbuffers::uoffset_t, const StoredData*>> reserved;
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const MsTensor& t = g.tensors[i];
    const StoredData& s = stored[i];
    auto name = b.CreateString(t.name);
    auto dims = b.CreateVector(t.dims);
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::ExternalData>>> ext;
    if (s.size && external && t.nodeType == ms::kNodeValue) {
      external->chunks.push_back(&s);
      auto entry = fb::CreateExternalData(
          b, b.CreateString(std::to_string(s.firstByte())), b.CreateString(external->location),
          static_cast<int64_t>(offset), static_cast<int64_t>(s.size));
      ext = b.CreateVector(std::vector<flatbuffers::Offset<fb::ExternalData>>{entry});
      offset += s.size;
    } else if (s.size) {
      // The same layout CreateVector(bytes) gives, without writing the bytes.
      uint8_t* unused = nullptr;
      const flatbuffers::uoffset_t at = b.CreateUninitializedVector(s.size, 1, &unused);
      reserved.emplace_back(at, &s);
      data = flatbuffers::Offset<flatbuffers::Vector<uint8_t>>(at);
    }
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::QuantParam>>> quant;
    if (!t.quantParams.empty()) {
      std::vector<flatbuffers::Offset<fb::QuantParam>> params;
      for (const auto& q : t.quantParams)
        // min/max reset, narrowRange true, inited false as converter_lite saves them (ms.md §3.1).
        params.push_back(fb::CreateQuantParam(b, q.scale, q.zeroPoint, 0, 0, true, q.numBits, false,
                                              1.0f, q.meanCorr, q.dstDtype));
      quant = b.CreateVector(params);
    } else if (t.rowQuant) {
      quant = rowQuantParams(b, *t.rowQuant);
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
  // An offset counts from the end of the buffer; a vector's bytes follow its 4-byte length.
  for (const auto& [at, data] : reserved)
    holes.push_back({out.size() - at + 4, data});
  std::sort(holes.begin(), holes.end(),
            [](const Hole& a, const Hole& b) { return a.position < b.position; });
  // The same check the runtime runs before it loads anything (and `kiln inspect` runs).
  flatbuffers::Verifier verifier(out.data(), out.size(), ms::kVerifierMaxDepth,
                                 ms::kVerifierMaxTables);
  if (!fb::VerifyMetaGraphBuffer(verifier))
    return Status(ErrorCode::Internal, "the written .ms buffer fails FlatBuffers verification",
                  "report this as a kiln bug");
  return out;
}

struct Built {
  ms::MsGraph lowered;            // owns the buffers `stored` points into
  std::vector<StoredData> stored; // one per tensor; `holes` and `external` point into it
  flatbuffers::DetachedBuffer model;
  std::vector<Hole> holes;            // inline constant data, written with the model
  std::unique_ptr<External> external; // set when the weights go to a .msw file
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
  Built out;
  out.lowered = std::move(*lowered);
  uint64_t dataBytes = 0;
  out.stored.reserve(out.lowered.tensors.size());
  for (const MsTensor& t : out.lowered.tensors) {
    auto s = storedData(t, options);
    if (!s) return s.status();
    dataBytes += s->size;
    out.stored.push_back(std::move(*s));
  }
  // Room for everything but the data (names, dims, nodes), so the inline build never overflows.
  uint64_t quantParams = 0;
  for (const MsTensor& t : out.lowered.tensors)
    quantParams +=
        t.quantParams.size() + (t.rowQuant ? static_cast<uint64_t>(t.rowQuant->rows) : 0);
  const uint64_t metaEstimate = (uint64_t{1} << 16) +
                                512 * (out.lowered.tensors.size() + out.lowered.nodes.size()) +
                                32 * quantParams;
  const uint64_t limit =
      std::min<uint64_t>(options.externalDataThreshold, std::numeric_limits<int32_t>::max());
  if (dataBytes + metaEstimate < limit) {
    auto buffer = serialize(out.lowered, options, out.stored, nullptr, out.holes);
    if (!buffer) return buffer.status();
    if (buffer->size() < limit) {
      out.model = std::move(*buffer);
      return out;
    }
    out.holes.clear();
  }
  if (mswLocation.empty())
    return Status(ErrorCode::MsModelTooLarge,
                  fmt::format("the .ms buffer would hold {} bytes of weights, past the {}-byte "
                              "limit of one FlatBuffer",
                              dataBytes, limit),
                  "write the model to a file (kiln convert --to ms), which puts the weights in a "
                  ".msw file beside it");
  out.external = std::make_unique<External>();
  out.external->location = mswLocation;
  auto buffer = serialize(out.lowered, options, out.stored, out.external.get(), out.holes);
  if (!buffer) return buffer.status();
  // Without weights only the FlatBuffers offset range (2 GiB) bounds the graph itself.
  if (buffer->size() >= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    return Status(ErrorCode::MsModelTooLarge,
                  fmt::format("the .ms graph without weights still needs {} bytes", buffer->size()),
                  "split the model");
  out.model = std::move(*buffer);
  return out;
}

// Streams pieces of output to `os`; counts what went through for the progress line.
struct StreamSink {
  std::ostream& os;
  WriteProgress* progress;
  bool operator()(const uint8_t* bytes, size_t count) {
    os.write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(count));
    if (progress) progress->advance(count);
    return static_cast<bool>(os);
  }
};

Status writeFailed(const std::string& path) {
  return Status(ErrorCode::FileWriteFailed, fmt::format("{}: write failed", path),
                "check free space and permissions");
}

// The .ms file: the serialized model with each constant's bytes written into its place.
Status writeModel(const std::string& path, const Built& built, WriteProgress* progress) {
  return writeFileAtomically(path, [&](std::ostream& os) {
    StreamSink sink{os, progress};
    const uint8_t* buffer = built.model.data();
    uint64_t pos = 0;
    bool ok = true;
    for (const Hole& h : built.holes) {
      ok = ok && sink(buffer + pos, static_cast<size_t>(h.position - pos)) &&
           emitStored(*h.stored, sink);
      pos = h.position + h.stored->size;
    }
    ok = ok && sink(buffer + pos, static_cast<size_t>(built.model.size() - pos));
    return ok ? Status::ok() : writeFailed(path);
  });
}

// .msw: 4096-byte header (magic, "checksum" = first model byte), then every constant's bytes in
// tensor order (ms.md §6.3), each streamed from its source.
Status writeWeights(const std::string& path, const Built& built, WriteProgress* progress) {
  return writeFileAtomically(path, [&](std::ostream& os) {
    StreamSink sink{os, progress};
    std::vector<uint8_t> header(kMswHeaderSize, 0);
    const uint32_t checksum = built.model.size() == 0 ? 0 : built.model.data()[0];
    std::memcpy(header.data(), &kMswMagic, 4);
    std::memcpy(header.data() + 4, &checksum, 4);
    bool ok = sink(header.data(), header.size());
    for (const StoredData* chunk : built.external->chunks)
      ok = ok && emitStored(*chunk, sink);
    return ok ? Status::ok() : writeFailed(path);
  });
}

} // namespace

Expected<std::vector<uint8_t>> buildMsBuffer(const Model& model, const MsWriteOptions& options) {
  auto built = build(model, options, "");
  if (!built) return built.status();
  std::vector<uint8_t> out(built->model.data(), built->model.data() + built->model.size());
  for (const Hole& h : built->holes) {
    uint8_t* at = out.data() + h.position;
    emitStored(*h.stored, [&](const uint8_t* bytes, size_t count) {
      std::memcpy(at, bytes, count);
      at += count;
      return true;
    });
  }
  return out;
}

Status writeMsFile(const Model& model, const MsWriteOptions& options, const std::string& path) {
  const std::string mswPath = path + "w";
  const std::string location = std::filesystem::path(mswPath).filename().string();
  auto built = build(model, options, location);
  if (!built) return built.status();
  uint64_t total = built->model.size();
  for (const StoredData& s : built->stored)
    total += s.size;
  // Both targets are checked before either is written: a refused .ms must not leave (or, on the
  // cleanup below, delete) a .msw.
  KILN_TRY(checkOutputTarget(path));
  if (built->external) KILN_TRY(checkOutputTarget(mswPath));
  WriteProgress progress("writing " + path, total);
  int pairGuard = -1;
  if (built->external) {
    Status s = writeWeights(mswPath, *built, &progress);
    if (!s) return s;
    pairGuard = guardUnfinishedOutput(mswPath); // until its .ms is in place
  }
  Status s = writeModel(path, *built, &progress);
  releaseUnfinishedOutput(pairGuard);
  if (!s && built->external) {
    std::error_code ec;
    std::filesystem::remove(mswPath, ec); // no half-written model pair
  }
  progress.finish();
  return s;
}

} // namespace kiln
