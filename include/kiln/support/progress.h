// Progress of long conversion steps on stderr.
//
// Off unless a tool turns it on (enableProgress): the library stays silent for other callers.
// When on, a step shows progress only when stderr is a terminal and the conversion has already run
// for 2 s, as one line redrawn in place ("kiln: writing out.ms  1.2 / 6.0 GiB  20%") at most five
// times a second, ended with a newline when the step finishes. Build scripts capture stderr into
// logs, where a redrawn line is noise, so a non-terminal stderr gets nothing unless
// KILN_PROGRESS=1 is set, which prints a plain line per 10% instead; KILN_PROGRESS=0 turns it
// off everywhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kiln {

// Called once by a tool's main(); the 2 s count starts here.
void enableProgress();

// One step (weight quantization, writing a file) of `total` units (bytes).
class WriteProgress {
 public:
  WriteProgress(std::string label, uint64_t total);
  ~WriteProgress() { finish(); }
  WriteProgress(const WriteProgress&) = delete;
  WriteProgress& operator=(const WriteProgress&) = delete;
  void advance(uint64_t units);
  void finish();

 private:
  void draw(bool last);
  std::string label_;
  uint64_t total_ = 0, done_ = 0;
  int mode_ = 0;          // 0 off, 1 redrawn line, 2 plain lines
  bool drawn_ = false;    // something is on the line
  int lastDecile_ = -1;   // plain lines: last 10% step printed
  std::chrono::steady_clock::time_point lastDraw_{};
};

} // namespace kiln
