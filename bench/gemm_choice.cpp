// Standalone benchmark (not linked into kiln) behind the choice of BLAS library for the executor's
// heavy kernels: times single-threaded row-major sgemm C[M,N] = A[M,K] * B[K,N] with OpenBLAS,
// Eigen and oneDNN on the shapes the PP-OCR det/rec convolutions produce.
//
// Build and run: see bench/gemm_choice.sh (the libraries come from Debian: libopenblas-dev,
// libeigen3-dev, libdnnl-dev).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <Eigen/Core>
#include <cblas.h>
#include <dnnl.h>

namespace {

struct Shape {
  const char* what;
  long m, n, k;
};

// The heaviest Conv calls of a traced `kiln run` of PP-OCRv4 det at 640x640 and rec at 48x320, as
// GEMMs: M = output channels, K = input channels * kh * kw, N = output height * width (a "band" is
// the slice of output rows kiln unfolds at a time).
const Shape kShapes[] = {
    {"det neck 3x3 96->24 @160x160, whole image", 24, 25600, 864},
    {"det neck 3x3 96->24 @160x160, one band (kiln)", 24, 160, 864},
    {"det neck 3x3 96->24 @80x80", 24, 6400, 864},
    {"det stem 3x3 s2 3->16 @320x320", 16, 102400, 27},
    {"det 1x1 16->32 @320x320", 32, 102400, 16},
    {"det 1x1 48->48 @160x160", 48, 25600, 48},
    {"det 1x1 12->96 @160x160", 96, 25600, 12},
    {"det 1x1 96->96 @80x80", 96, 6400, 96},
    {"det 1x1 192->192 @40x40", 192, 1600, 192},
    {"det 1x1 384->384 @20x20", 384, 400, 384},
    {"rec 1x1 240->240 @12x80", 240, 960, 240},
    {"rec 1x1 480->480 @6x80", 480, 480, 480},
    {"rec 1x1 480->480 @3x80", 480, 240, 480},
};

double nowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Median of `reps` timed calls after one warm-up.
template <typename Fn> double medianMs(int reps, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    double s = nowMs();
    fn();
    t.push_back(nowMs() - s);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

} // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  openblas_set_num_threads(1);
  Eigen::setNbThreads(1);
  std::printf("| shape | M | N | K | OpenBLAS ms | Eigen ms | oneDNN ms | max rel. diff |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  double total[3] = {0, 0, 0};
  for (const Shape& s : kShapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c0(s.m * s.n), c1(s.m * s.n), c2(s.m * s.n);
    unsigned seed = 7;
    auto next = [&] {
      seed = seed * 1103515245u + 12345u;
      return static_cast<float>((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    };
    for (float& v : a)
      v = next();
    for (float& v : b)
      v = next();
    double tb = medianMs(reps, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k,
                  b.data(), s.n, 0.0f, c0.data(), s.n);
    });
    Eigen::Map<const RowMat> ea(a.data(), s.m, s.k), eb(b.data(), s.k, s.n);
    Eigen::Map<RowMat> ec(c1.data(), s.m, s.n);
    double te = medianMs(reps, [&] { ec.noalias() = ea * eb; });
    double td = medianMs(reps, [&] {
      dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.n, 0.0f, c2.data(), s.n);
    });
    double diff = 0;
    for (size_t i = 0; i < c0.size(); ++i) {
      double ref = std::max(1e-3, static_cast<double>(std::fabs(c0[i])));
      diff = std::max({diff, std::fabs(c1[i] - c0[i]) / ref, std::fabs(c2[i] - c0[i]) / ref});
    }
    total[0] += tb;
    total[1] += te;
    total[2] += td;
    std::printf("| %s | %ld | %ld | %ld | %.3f | %.3f | %.3f | %.1e |\n", s.what, s.m, s.n, s.k, tb,
                te, td, diff);
  }
  std::printf("| total | | | | %.2f | %.2f | %.2f | |\n", total[0], total[1], total[2]);
  return 0;
}
