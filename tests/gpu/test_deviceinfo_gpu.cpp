// deviceinfo, a process of its own, prints the plan a call launches on a
// live GPU: the vendor's answers included.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "duet/softmax.hpp"
#include "gpu_fixture.hpp"
#include "tool_runner.hpp"

using nlohmann::json;
using duet::testing::quoted;
using duet::testing::Result;
using duet::testing::run;

TEST_CASE("deviceinfo --plan on a GPU prints the plan a call launches: 216 shapes, every family, three dtypes, both directions") {
  // The first GPU's plans, from deviceinfo (a process of its own) and from
  // plan_for on contiguous tensors, must agree in every launch field.
  const duet::Device dev = duet::testing::first_gpu();
  // Row lengths at every family's boundaries, aligned and odd: flat_rows,
  // group_rows, block_row, block_row_smem, cluster_row, split_stream.
  const std::vector<std::int64_t> cols = {1,     3,     8,     9,      33,     64,     77,     128,    255,
                                          256,   1000,  1024,   1025,   2048,   4097,   8192,   12289,  16384,
                                          24576, 32768, 32769, 40000,  65536,  65537,  98304,  131072, 131073,
                                          200000, 262144, 262145, 300001, 524288, 1048576, 1048577, 2097152, 4194304};
  const std::int64_t max_bytes = 8 * (std::int64_t(1) << 20) * 4;  // 8 rows of 4M f32
  duet::Buffer x(dev, static_cast<std::size_t>(max_bytes)), dy(dev, static_cast<std::size_t>(max_bytes)),
      out(dev, static_cast<std::size_t>(max_bytes));
  int compared = 0;
  for (duet::DType dt : {duet::DType::f32, duet::DType::f16, duet::DType::bf16})
    for (bool backward : {false, true}) {
      std::string plans;
      std::vector<std::int64_t> rows_of;
      for (std::int64_t c : cols) {
        const std::int64_t rows = std::max<std::int64_t>(1, std::min<std::int64_t>(4096, (max_bytes / duet::dtype_size(dt)) / c));
        rows_of.push_back(rows);
        if (!plans.empty()) plans += ',';
        plans += std::to_string(rows) + "x" + std::to_string(c) + ":" + duet::to_string(dt);
      }
      const Result r = run(quoted(DUET_DEVICEINFO) + " " + "--device 0 --json --plan " + plans + (backward ? " --backward" : ""));
      INFO(r.out.substr(0, 2000));
      REQUIRE(r.code == 0);
      const json doc = json::parse(r.out);
      REQUIRE(doc["plans"].size() == cols.size());
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const json& shown = doc["plans"][i];
        duet::SoftmaxCall call;
        call.dtype = dt;
        call.backward = backward;
        call.rows = rows_of[i];
        call.cols = cols[i];
        call.x = x.data();
        call.x_stride = cols[i];
        call.out = out.data();
        call.out_stride = cols[i];
        if (backward) {
          call.dy = dy.data();
          call.dy_stride = cols[i];
        }
        const duet::Plan launched = duet::plan_for(dev, call);
        INFO(duet::to_string(dt), backward ? " backward " : " ", rows_of[i], " x ", cols[i]);
        CHECK(shown["variant"] == duet::variant_name(launched.kernel));
        CHECK(shown["grid"] == launched.geometry.grid);
        CHECK(shown["block"] == launched.geometry.block);
        CHECK(shown["dynamic_smem_bytes"] == launched.launch.dynamic_smem_bytes);
        CHECK(shown["resident_blocks"] == launched.resident_blocks);
        // A row's parts: a cluster's blocks, grid_row's blocks, or split
        // chunks, each under its own key.
        if (launched.chunks_per_row > 0) {
          if (shown.contains("cluster"))
            CHECK(shown.at("cluster").at("blocks") == launched.chunks_per_row);
          else if (shown.contains("grid_row"))
            CHECK(shown.at("grid_row").at("blocks_per_row") == launched.chunks_per_row);
          else
            CHECK(shown.at("split").at("chunks_per_row") == launched.chunks_per_row);
        }
        ++compared;
      }
    }
  CHECK(compared == 216);
}
