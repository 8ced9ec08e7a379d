// Maps an exception that reached a tool's main to a coded error (kiln/support/exception_status.h).
#include "kiln/support/exception_status.h"

#include <exception>
#include <new>
#include <stdexcept>

namespace kiln {

Status statusFromCurrentException() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return Status(ErrorCode::RuntimeOutOfMemory,
                  "out of memory: the model or the inputs ask for more memory than there is",
                  "check the model's shapes and the input sizes (kiln inspect); a damaged file "
                  "can ask for any size");
  } catch (const std::length_error& e) {
    return Status(ErrorCode::RuntimeOutOfMemory,
                  fmt::format("out of memory: a size too large to allocate ({})", e.what()),
                  "check the model's shapes and the input sizes (kiln inspect); a damaged file "
                  "can ask for any size");
  } catch (const std::exception& e) {
    return Status(ErrorCode::Internal, fmt::format("unexpected exception: {}", e.what()),
                  "report it with the model and the command line");
  } catch (...) {
    return Status(ErrorCode::Internal, "unexpected exception of unknown type",
                  "report it with the model and the command line");
  }
}

} // namespace kiln
