// Errors of the kernels: thrown inside the library as KernelError, returned at the C
// interface as a ge_status with the message kept for the calling thread (ge_last_error).
#pragma once

#include "graphemb_kernels.h"

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ge {

class KernelError : public std::runtime_error {
 public:
  KernelError(ge_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  ge_status status() const { return status_; }

 private:
  ge_status status_;
};

// The message of the parts streamed together ("graphemb_kernels.", name, ": ", ...).
template <typename... Parts>
std::string message(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Throws KernelError(status, message(parts...)) when `ok` is false.
template <typename... Parts>
inline void require(bool ok, ge_status status, const Parts&... parts) {
  if (!ok) throw KernelError(status, message(parts...));
}

// Keeps `text` as the calling thread's last error.
void set_last_error(const std::string& text);

// Runs body() and turns what it throws into a status (and the thread's last error): the
// one way out of every function of the C interface, so no exception crosses it.
template <typename Body>
int guarded(Body&& body) {
  try {
    body();
    return GE_OK;
  } catch (const KernelError& error) {
    set_last_error(error.what());
    return error.status();
  } catch (const std::bad_alloc&) {
    set_last_error("graphemb_kernels: out of memory");
    return GE_MEMORY_ERROR;
  } catch (const std::exception& error) {
    set_last_error(error.what());
    return GE_RUNTIME_ERROR;
  } catch (...) {
    set_last_error("graphemb_kernels: unknown error");
    return GE_RUNTIME_ERROR;
  }
}

// Memory from the caller's allocator: KernelError(GE_CALLBACK_ERROR) when it fails (the
// caller holds the reason).
template <typename T>
T* allocate(ge_allocate allocate, void* context, int64_t slot, int64_t count) {
  void* memory = nullptr;
  if (allocate(context, slot, count, &memory) != 0 || (memory == nullptr && count > 0)) {
    throw KernelError(GE_CALLBACK_ERROR,
                      message("graphemb_kernels: the allocator failed for slot ", slot));
  }
  return static_cast<T*>(memory);
}

}  // namespace ge
