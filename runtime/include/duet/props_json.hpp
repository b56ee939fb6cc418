// Device properties as JSON: what `deviceinfo --json` prints and what
// `deviceinfo --props FILE` reads (schema "duet.device_props/1", snake_case
// keys, see tools/deviceinfo/devices/). Parsing is strict: a missing field, a
// wrong type or a value outside its range is an error naming the field.
//
// A GPU file must also describe a GPU that can exist ("<file>: <field> =
// <value>: <why>" otherwise):
//   - NVIDIA: warp_size 32; compute capability 3.0 (Kepler, the first with
//     warp shuffles) to 12.x (Blackwell), minor 0-9; arch "sm_<major><minor>"
//     (an "a" or "f" suffix allowed).
//   - AMD: warp_size 32 or 64; arch gfx + major + two hex digits of a family
//     duet knows (gfx9xx GCN5/CDNA .. gfx12xx RDNA4), then ":feature+/-"
//     target features; cc_major the arch's major.
//   - Both: max_threads_per_block, max_threads_per_sm, regs_per_sm and
//     regs_per_block at least one warp (NVIDIA: threads per block at most
//     threads per SM); smem_per_sm positive and at least
//     smem_reserved_per_block; smem_per_block_optin at most smem_per_sm.
#pragma once

#include <string>
#include <string_view>

#include "duet/export.h"
#include "duet/device_props.hpp"

namespace duet {

inline constexpr const char* kPropsSchema = "duet.device_props/1";

// {"schema": ..., "props": {...}} (pretty-printed with `indent` >= 0).
DUET_API std::string props_to_json(const DeviceProps& props, int indent = 2);
// Throws duet::Error(parse_error) naming `origin` and the offending field.
DUET_API DeviceProps props_from_json(const std::string& text, const std::string& origin = "<json>");
// Reads a regular file (links followed); duet::Error(io_error) if it is
// anything else (a FIFO, a directory, a device), cannot be read, or is over
// 1 MiB, without opening what is not a regular file.
DUET_API DeviceProps load_props_file(const std::string& path);

// `text` safe to print and to put in JSON: each byte that is not part of
// valid UTF-8, and each control character, as \xNN; the rest unchanged.
// (Property-file names are bytes; a file without "source" gets its name.)
DUET_API std::string printable(std::string_view text);

}  // namespace duet
