#include "duet/error.hpp"

namespace duet {

std::string_view to_string(Status s) noexcept {
  switch (s) {
    case Status::success: return "success";
    case Status::invalid_argument: return "invalid argument";
    case Status::no_device: return "no such device";
    case Status::unsupported: return "unsupported";
    case Status::out_of_memory: return "out of memory";
    case Status::vendor_error: return "vendor runtime error";
    case Status::io_error: return "I/O error";
    case Status::parse_error: return "parse error";
    case Status::internal: return "internal error";
  }
  return "unknown status";
}

}  // namespace duet
