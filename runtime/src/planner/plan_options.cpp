// The planner's switches from the environment: every variable in one place
// (the table at PlanOptions, duet/planner.hpp).
#include <cstdlib>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "duet/error.hpp"
#include "duet/planner.hpp"

namespace duet {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return std::string(v == nullptr ? "" : v);
}

// The variable's value: empty where it is unset, else one of `allowed`;
// any other value is refused, naming the variable, the values it takes
// and the one it got ("DUET_X must be a, b or c, got 'd'").
std::string one_of(const char* name, const std::vector<std::string>& allowed) {
  const std::string value = env(name);
  if (value.empty()) return value;
  for (const std::string& a : allowed)
    if (value == a) return value;
  std::string list;
  for (std::size_t i = 0; i < allowed.size(); ++i)
    list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + allowed[i];
  throw Error(Status::invalid_argument, std::string(name) + " must be " + list + ", got '" + value + "'");
}

// The same for a count among `allowed` numbers; 0 where unset.
template <class Numbers>
int count_of(const char* name, const Numbers& allowed) {
  std::vector<std::string> words;
  for (int n : allowed) words.push_back(std::to_string(n));
  const std::string value = one_of(name, words);
  return value.empty() ? 0 : std::stoi(value);
}

// A positive count of `what` up to `most` from the variable; 0 where unset;
// anything else refused, naming the variable and the value it got.
std::int64_t positive_count(const char* name, const char* what, std::int64_t most) {
  const std::string value = env(name);
  if (value.empty()) return 0;
  std::int64_t n = -1;
  try {
    std::size_t used = 0;
    n = std::stoll(value, &used);
    if (used != value.size() || n > most) n = -1;
  } catch (const std::exception&) {
    n = -1;
  }
  require(n > 0, Status::invalid_argument,
          std::string(name) + " must be a positive count of " + what + ", got '" + value + "'");
  return n;
}

}  // namespace

PlanOptions plan_options_from_environment() {
  PlanOptions o;
  const std::string cluster = one_of("DUET_CLUSTER", {"0", "1", "portable", "prefer"});
  o.allow_clusters = cluster != "0";
  o.prefer_clusters = cluster == "prefer";
  if (cluster == "portable") o.max_cluster_blocks = kPortableClusterBlocks;
  const std::string strategy = one_of("DUET_STRATEGY", {"split_row", "split_stream", "grid_row"});
  o.force_split = strategy == "split_row";
  o.force_stream = strategy == "split_stream";
  o.force_grid_row = strategy == "grid_row";
  o.allow_grid_row = one_of("DUET_GRID_ROW", {"0", "1"}) != "0";
  o.grid_row_blocks = static_cast<int>(positive_count("DUET_GRID_BLOCKS", "blocks", 1 << 30));
  o.min_cluster_blocks = count_of("DUET_CLUSTER_BLOCKS", std::vector<int>{2, 4, 8, 16});
  o.block_vpt = count_of("DUET_BLOCK_VPT", kBlockVpt);
  o.stream_slack = positive_count("DUET_STREAM_SLACK", "chunks", std::numeric_limits<std::int64_t>::max());
  o.persistent = one_of("DUET_PERSISTENT", {"0", "1"}) == "1";
  o.max_waves = static_cast<int>(positive_count("DUET_WAVES", "waves", 1 << 20));
  const std::string fused_stash = one_of("DUET_FUSED_STASH", {"0", "1", "always"});
  o.fused_stash = fused_stash == "0"        ? FusedStash::off
                  : fused_stash == "always" ? FusedStash::always
                                            : FusedStash::planned;
  const std::string ahead = one_of("DUET_FUSED_AHEAD", {"0", "1", "always"});
  o.fused_ahead = ahead != "0";
  o.force_fused_ahead = ahead == "always";
  const std::string interleaved_stash = one_of("DUET_INTERLEAVED_STASH", {"0", "1", "always"});
  o.interleaved_stash = interleaved_stash == "0"        ? InterleavedStash::off
                        : interleaved_stash == "always" ? InterleavedStash::always
                                                        : InterleavedStash::past_registers;
  o.interleaved_stream_tiles = static_cast<int>(positive_count("DUET_STREAM_TILES", "tiles", 1 << 20));
  o.allow_interleaved_stream = one_of("DUET_INTERLEAVED_STREAM", {"0", "1"}) != "0";
  const std::string ring = one_of("DUET_INTERLEAVED_RING", {"0", "1", "always"});
  o.allow_interleaved_ring = ring != "0";
  o.force_interleaved_ring = ring == "always";
  const std::string slabs = one_of("DUET_INTERLEAVED_SLABS", {"0", "1", "always"});
  o.allow_interleaved_slabs = slabs != "0";
  o.force_interleaved_slabs = slabs == "always";
  o.interleaved_tile_bytes = count_of("DUET_INTERLEAVED_TILE", std::vector<int>{16, 32, 64, 128, 256, 512});
  return o;
}

}  // namespace duet
