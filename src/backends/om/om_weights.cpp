// Weight bytes of an .om written straight from their sources (om_internal.h WeightSource,
// WeightsLayout): the writer streams each constant from the lowered tensor's buffer, rearranges a
// FRACTAL_Z weight one tensor at a time and gives mapped pages back after each, so converting a
// model never holds WEIGHTS_DATA (or the file) in memory.
#include <algorithm>
#include <cstring>

#include "kiln/backends/om_formats.h"
#include "kiln/ir/tensor.h"
#include "kiln/support/page_release.h"
#include "om_internal.h"

namespace kiln::om {
namespace {

constexpr size_t kChunk = size_t{1} << 22; // bytes per write: progress moves, the stream copies less

bool emitZeros(const ByteSink& sink, uint64_t count) {
  static const std::vector<uint8_t> zeros(64 * 1024, 0);
  while (count > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(count, zeros.size()));
    if (!sink(zeros.data(), n)) return false;
    count -= n;
  }
  return true;
}

bool emitChunked(const ByteSink& sink, const uint8_t* data, uint64_t size) {
  for (uint64_t done = 0; done < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, kChunk));
    if (!sink(data + done, n)) return false;
    done += n;
  }
  return true;
}

} // namespace

WeightSource WeightSource::of(std::shared_ptr<const Buffer> buffer) {
  WeightSource s;
  s.size = buffer ? buffer->size() : 0;
  s.buffer = std::move(buffer);
  return s;
}

void WeightSource::makeFractal(std::vector<int64_t> plainDims, size_t bytesPerElement,
                               int64_t tileC0, int64_t groupCount) {
  fractal = true;
  origin = std::move(plainDims);
  elementBytes = bytesPerElement;
  c0 = tileC0;
  groups = groupCount;
  uint64_t count = 1;
  for (int64_t d : heavyDims(HeavyLayout::FractalZ, origin, c0, groups))
    count *= static_cast<uint64_t>(d);
  size = count * elementBytes;
}

bool WeightSource::emit(const ByteSink& sink) const {
  bool ok = true;
  if (fractal) {
    std::vector<uint8_t> heavy = toHeavy(HeavyLayout::FractalZ, buffer ? buffer->data() : nullptr,
                                         origin, elementBytes, c0, groups);
    heavy.resize(size, 0);
    ok = emitChunked(sink, heavy.data(), heavy.size());
  } else {
    const uint64_t have = buffer ? std::min<uint64_t>(buffer->size(), size) : 0;
    ok = emitChunked(sink, have ? buffer->data() : nullptr, have) && emitZeros(sink, size - have);
  }
  releasePages(buffer.get());
  return ok;
}

// Everything `emitter` streams, in one buffer (tests and in-memory builds).
template <typename Emitter> std::vector<uint8_t> collectBytes(const Emitter& emitter) {
  std::vector<uint8_t> out;
  out.reserve(emitter.size);
  emitter.emit([&](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return true;
  });
  return out;
}

std::vector<uint8_t> WeightSource::bytes() const { return collectBytes(*this); }

uint64_t WeightsLayout::append(WeightSource source) {
  const uint64_t offset = (size + kWeightAlign - 1) / kWeightAlign * kWeightAlign;
  size = offset + source.size;
  if (source.size > 0) pieces[offset] = std::move(source);
  return offset;
}

const WeightSource* WeightsLayout::at(uint64_t offset) const {
  auto it = pieces.find(offset);
  return it == pieces.end() ? nullptr : &it->second;
}

bool WeightsLayout::emit(const ByteSink& sink) const {
  uint64_t pos = 0;
  for (const auto& [offset, source] : pieces) {
    if (offset < pos || offset + source.size > size) return false; // overlapping pieces: a bug
    if (!emitZeros(sink, offset - pos) || !source.emit(sink)) return false;
    pos = offset + source.size;
  }
  return emitZeros(sink, size - pos);
}

std::vector<uint8_t> WeightsLayout::bytes() const { return collectBytes(*this); }

} // namespace kiln::om
