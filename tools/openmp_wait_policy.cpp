// Linked into every kiln tool. oneDNN's CPU runtime here is OpenMP (libgomp), whose idle workers
// spin for a while after each parallel region unless OMP_WAIT_POLICY says PASSIVE. The executor's
// own thread pool runs the other kernels right after, so spinning workers compete with it and, on
// a busy machine, with everything else (bench/results.md "OpenMP wait policy").
//
// libgomp reads the variable once, in its library constructor, and setenv() before that does not
// help: libc's own initialiser resets the environment to the one the process started with. So the
// executable's .preinit_array (run before any library initialiser) re-executes the program once
// with the variable added. A policy the user set is kept; if the re-exec fails, the run goes on.
#include <cstring>
#include <unistd.h>

namespace {

constexpr char kPolicyName[] = "OMP_WAIT_POLICY=";

void preferPassiveOpenMpWait(int, char** argv, char** envp) {
  size_t count = 0;
  for (; envp[count] != nullptr; ++count)
    if (std::strncmp(envp[count], kPolicyName, sizeof(kPolicyName) - 1) == 0) return;
  // No allocation this early: the new environment lives on this frame until execve replaces it.
  char** withPolicy = static_cast<char**>(__builtin_alloca((count + 2) * sizeof(char*)));
  for (size_t i = 0; i < count; ++i)
    withPolicy[i] = envp[i];
  static char passive[] = "OMP_WAIT_POLICY=PASSIVE";
  withPolicy[count] = passive;
  withPolicy[count + 1] = nullptr;
  execve("/proc/self/exe", argv, withPolicy);
}

} // namespace

__attribute__((section(".preinit_array"), used)) static void (*const kPreferPassiveOpenMpWait)(
    int, char**, char**) = &preferPassiveOpenMpWait;
