// What the C APIs (libpm/c_api.cc, kvstore/c_api.cc) share: no exception
// crosses into C. Not a public header.
#ifndef LIBPM_C_GUARD_H_
#define LIBPM_C_GUARD_H_

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "pm/status.h"

namespace pm {

// Runs fn, which returns a Status, and turns an exception that escapes it
// into one: std::bad_alloc is kNoSpace, std::length_error (a length past
// what a string or vector holds) kInvalidArgument, anything else kIOError
// (starting threads throws std::system_error).
template <typename F>
Status status_of(F&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status::no_space("out of memory");
  } catch (const std::length_error&) {
    return Status::invalid_argument("a length is out of range");
  } catch (const std::exception& e) {
    return Status::io_error(std::string("unexpected error: ") + e.what());
  } catch (...) {
    return Status::io_error("unexpected error");
  }
}

// Keeps s's message as a thread's last error (pm_errormsg, kv_errormsg).
// Never throws: a message that cannot be copied leaves "out of memory",
// which fits any string's buffer.
inline void set_last_error(std::string* last, const Status& s) noexcept {
  try {
    *last = s.message();
  } catch (const std::bad_alloc&) {
    *last = "out of memory";
  }
}

// A handle or output argument that must not be NULL.
inline Status non_null(const void* p, const char* what) {
  if (p != nullptr) return Status();
  return Status::invalid_argument(std::string(what) + " is NULL");
}

}  // namespace pm

#endif  // LIBPM_C_GUARD_H_
