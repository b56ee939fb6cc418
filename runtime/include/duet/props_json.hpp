// Device properties as JSON: what `deviceinfo --json` prints and what
// `deviceinfo --props FILE` reads (schema "duet.device_props/1", snake_case
// keys, see tools/deviceinfo/devices/). Parsing is strict: a missing field, a
// wrong type or a value outside its range is an error naming the field.
#pragma once

#include <string>

#include "duet/export.h"
#include "duet/device_props.hpp"

namespace duet {

inline constexpr const char* kPropsSchema = "duet.device_props/1";

// {"schema": ..., "props": {...}} (pretty-printed with `indent` >= 0).
DUET_API std::string props_to_json(const DeviceProps& props, int indent = 2);
// Throws duet::Error(parse_error) naming `origin` and the offending field.
DUET_API DeviceProps props_from_json(const std::string& text, const std::string& origin = "<json>");
// Reads a file; duet::Error(io_error) if it cannot be read (or is over 1 MiB).
DUET_API DeviceProps load_props_file(const std::string& path);

}  // namespace duet
