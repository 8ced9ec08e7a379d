// Progress lines on stderr (see progress.h for when they show).
#include "kiln/support/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln {
namespace {

std::atomic<bool> gEnabled{false};
std::chrono::steady_clock::time_point gStart;

constexpr auto kQuiet = std::chrono::seconds(2);
constexpr auto kRedraw = std::chrono::milliseconds(200);

// 0 off, 1 redrawn line on a terminal, 2 plain lines (KILN_PROGRESS=1 without a terminal).
int progressMode() {
  if (!gEnabled.load()) return 0;
  const char* env = std::getenv("KILN_PROGRESS");
  if (env && std::strcmp(env, "0") == 0) return 0;
  if (::isatty(STDERR_FILENO)) return 1;
  return env && std::strcmp(env, "1") == 0 ? 2 : 0;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", static_cast<double>(bytes) / (1u << 30));
  return text;
}

} // namespace

void enableProgress() {
  gStart = std::chrono::steady_clock::now();
  gEnabled = true;
}

WriteProgress::WriteProgress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), mode_(progressMode()) {}

void WriteProgress::advance(uint64_t units) {
  done_ += units;
  if (mode_ == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - gStart < kQuiet) return;
  if (mode_ == 1 && drawn_ && now - lastDraw_ < kRedraw) return;
  lastDraw_ = now;
  draw(false);
}

void WriteProgress::finish() {
  if (mode_ == 0) return;
  if (drawn_) draw(true);
  mode_ = 0;
}

void WriteProgress::draw(bool last) {
  const uint64_t done = std::min(done_, total_);
  const int percent = total_ ? static_cast<int>(done * 100 / total_) : 100;
  if (mode_ == 2) {
    if (percent / 10 == lastDecile_ && (!last || percent == 100)) return;
    lastDecile_ = percent / 10;
    std::fprintf(stderr, "kiln: %s %s / %s GiB %d%%\n", label_.c_str(), gib(done).c_str(),
                 gib(total_).c_str(), percent);
    drawn_ = !last;
    return;
  }
  std::fprintf(stderr, "\r\033[Kkiln: %s  %s / %s GiB  %d%%%s", label_.c_str(), gib(done).c_str(),
               gib(total_).c_str(), percent, last ? "\n" : "");
  std::fflush(stderr);
  drawn_ = !last;
}

} // namespace kiln
