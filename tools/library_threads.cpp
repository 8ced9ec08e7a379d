// Linked into every kiln tool: the thread settings of two libraries that read them only from the
// environment, once, in their library constructors.
// - oneDNN's CPU runtime here is OpenMP (libgomp), whose idle workers spin for a while after each
//   parallel region unless OMP_WAIT_POLICY says PASSIVE. The executor's own thread pool runs the
//   other kernels right after, so spinning workers compete with it and, on a busy machine, with
//   everything else (bench/results.md "Library threads").
// - OpenBLAS starts one server thread per CPU at load, and each spins (sched_yield) for ~0.1 s of
//   CPU before it sleeps, although kiln runs OpenBLAS on one thread (nn_util.cpp) — a fifth of a
//   small conversion's CPU. OPENBLAS_NUM_THREADS=1 starts none.
// setenv() before those constructors does not help: libc's own initialiser resets the environment
// to the one the process started with. So the executable's .preinit_array (run before any library
// initialiser) re-executes the program once with the missing variables added. Values the user set
// are kept; if the re-exec fails, the run goes on.
#include <cstring>
#include <unistd.h>

namespace {

char kPassiveWait[] = "OMP_WAIT_POLICY=PASSIVE";
char kOneBlasThread[] = "OPENBLAS_NUM_THREADS=1";

bool names(const char* entry, const char* setting) {
  const char* equals = std::strchr(setting, '=');
  return std::strncmp(entry, setting, static_cast<size_t>(equals - setting) + 1) == 0;
}

void preferQuietLibraryThreads(int, char** argv, char** envp) {
  bool hasWait = false, hasBlas = false;
  size_t count = 0;
  for (; envp[count] != nullptr; ++count) {
    hasWait = hasWait || names(envp[count], kPassiveWait);
    hasBlas = hasBlas || names(envp[count], kOneBlasThread);
  }
  if (hasWait && hasBlas) return;
  // No allocation this early: the new environment lives on this frame until execve replaces it.
  char** env = static_cast<char**>(__builtin_alloca((count + 3) * sizeof(char*)));
  for (size_t i = 0; i < count; ++i)
    env[i] = envp[i];
  if (!hasWait) env[count++] = kPassiveWait;
  if (!hasBlas) env[count++] = kOneBlasThread;
  env[count] = nullptr;
  execve("/proc/self/exe", argv, env);
}

} // namespace

__attribute__((section(".preinit_array"), used)) static void (*const kPreferQuietLibraryThreads)(
    int, char**, char**) = &preferQuietLibraryThreads;
