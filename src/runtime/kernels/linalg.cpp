// Linear-algebra kernels: Det.
#include <cmath>
#include <utility>

#include "misc_util.h"

namespace kiln::rt {
namespace {

// Determinant of one row-major m×m matrix by LU with partial pivoting, in place.
double luDeterminant(double* a, int64_t m) {
  double det = 1;
  for (int64_t k = 0; k < m; ++k) {
    int64_t pivot = k;
    for (int64_t r = k + 1; r < m; ++r)
      if (std::fabs(a[r * m + k]) > std::fabs(a[pivot * m + k])) pivot = r;
    if (a[pivot * m + k] == 0) return 0;
    if (pivot != k) {
      for (int64_t col = 0; col < m; ++col)
        std::swap(a[k * m + col], a[pivot * m + col]);
      det = -det;
    }
    const double p = a[k * m + k];
    det *= p;
    for (int64_t r = k + 1; r < m; ++r) {
      const double f = a[r * m + k] / p;
      if (f == 0) continue;
      for (int64_t col = k + 1; col < m; ++col)
        a[r * m + col] -= f * a[k * m + col];
    }
  }
  return det;
}

Status det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!miscIsReal(x.dtype())) return ctx.unsupported("input dtype is not floating point");
  const auto& dims = x.dims();
  if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2])
    return ctx.fail("input must be (..., M, M)");
  const int64_t m = dims.back();
  std::vector<int64_t> outDims(dims.begin(), dims.end() - 2);
  int64_t batch = 1;
  for (int64_t v : outDims)
    batch *= v;
  std::vector<double> v = miscReadReal(x);
  std::vector<double> out(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b)
    out[static_cast<size_t>(b)] = luDeterminant(v.data() + b * m * m, m);
  ctx.setOutput(0, miscMakeReal(x.dtype(), outDims, out));
  return Status::ok();
}

KILN_REGISTER_KERNEL("Det", det);

} // namespace
} // namespace kiln::rt
