// duet::Error: the one exception type duet throws. Each carries a status code
// that the C ABI returns unchanged (duet_status_t in duet/duet.h).
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>
#include <string_view>

#include "duet/export.h"

namespace duet {

enum class Status : int {
  success = 0,
  invalid_argument = 1,   // bad shape, stride, pointer, dtype, option
  no_device = 2,          // a device index that is not there
  unsupported = 3,        // valid request that this build or device cannot do
  out_of_memory = 4,
  vendor_error = 5,       // the CUDA/HIP runtime returned an error
  io_error = 6,           // a file could not be read or written
  parse_error = 7,        // malformed property file or report
  internal = 8,
};

DUET_API std::string_view to_string(Status s) noexcept;

class DUET_API Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// Throws Error(status, message) when `condition` is false.
inline void require(bool condition, Status status, const std::string& message) {
  if (!condition) throw Error(status, message);
}
// The same with the message built only on failure, for checks on every call
// (a dozen eager messages were a measurable part of a launch's host time).
template <class Message, class = std::enable_if_t<std::is_invocable_v<Message&>>>
inline void require(bool condition, Status status, Message&& message) {
  if (!condition) throw Error(status, message());
}

}  // namespace duet
