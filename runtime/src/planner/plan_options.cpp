// The planner's switches from the environment: every variable in one place
// (the table at PlanOptions, duet/planner.hpp).
#include <cstdlib>
#include <exception>
#include <string>

#include "duet/error.hpp"
#include "duet/planner.hpp"

namespace duet {

PlanOptions plan_options_from_environment() {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  PlanOptions o;
  const std::string cluster = env("DUET_CLUSTER");
  require(cluster.empty() || cluster == "0" || cluster == "1" || cluster == "portable" || cluster == "prefer",
          Status::invalid_argument, "DUET_CLUSTER must be 0, 1, portable or prefer, got '" + cluster + "'");
  o.allow_clusters = cluster != "0";
  o.prefer_clusters = cluster == "prefer";
  if (cluster == "portable") o.max_cluster_blocks = kPortableClusterBlocks;
  const std::string strategy = env("DUET_STRATEGY");
  require(strategy.empty() || strategy == "split_row" || strategy == "split_stream", Status::invalid_argument,
          "DUET_STRATEGY must be split_row or split_stream, got '" + strategy + "'");
  o.force_split = strategy == "split_row";
  o.force_stream = strategy == "split_stream";
  const std::string cluster_blocks = env("DUET_CLUSTER_BLOCKS");
  if (!cluster_blocks.empty()) {
    for (int n : {2, 4, 8, 16})
      if (cluster_blocks == std::to_string(n)) o.min_cluster_blocks = n;
    require(o.min_cluster_blocks > 0, Status::invalid_argument,
            "DUET_CLUSTER_BLOCKS must be 2, 4, 8 or 16, got '" + cluster_blocks + "'");
  }
  const std::string block_vpt = env("DUET_BLOCK_VPT");
  if (!block_vpt.empty()) {
    for (int v : kBlockVpt)
      if (block_vpt == std::to_string(v)) o.block_vpt = v;
    require(o.block_vpt > 0, Status::invalid_argument, "DUET_BLOCK_VPT must be 1, 2, 4 or 8, got '" + block_vpt + "'");
  }
  const std::string slack = env("DUET_STREAM_SLACK");
  if (!slack.empty()) {
    try {
      std::size_t used = 0;
      o.stream_slack = std::stoll(slack, &used);
      if (used != slack.size()) o.stream_slack = -1;
    } catch (const std::exception&) {
      o.stream_slack = -1;
    }
    require(o.stream_slack > 0, Status::invalid_argument,
            "DUET_STREAM_SLACK must be a positive count of chunks, got '" + slack + "'");
  }
  const std::string persistent = env("DUET_PERSISTENT");
  require(persistent.empty() || persistent == "0" || persistent == "1", Status::invalid_argument,
          "DUET_PERSISTENT must be 0 or 1, got '" + persistent + "'");
  o.persistent = persistent == "1";
  const std::string stash = env("DUET_FUSED_STASH");
  require(stash.empty() || stash == "0" || stash == "1", Status::invalid_argument,
          "DUET_FUSED_STASH must be 0 or 1, got '" + stash + "'");
  o.fused_stash = stash != "0";
  const std::string interleaved_stash = env("DUET_INTERLEAVED_STASH");
  require(interleaved_stash.empty() || interleaved_stash == "0" || interleaved_stash == "1" ||
              interleaved_stash == "always",
          Status::invalid_argument, "DUET_INTERLEAVED_STASH must be 0, 1 or always, got '" + interleaved_stash + "'");
  o.interleaved_stash = interleaved_stash != "0";
  o.interleaved_stash_always = interleaved_stash == "always";
  const std::string tile = env("DUET_INTERLEAVED_TILE");
  if (!tile.empty()) {
    for (int bytes : {16, 32, 64, 128})
      if (tile == std::to_string(bytes)) o.interleaved_tile_bytes = bytes;
    require(o.interleaved_tile_bytes > 0, Status::invalid_argument,
            "DUET_INTERLEAVED_TILE must be 16, 32, 64 or 128, got '" + tile + "'");
  }
  return o;
}

}  // namespace duet
