// Helpers for GPU cases: fresh random data, poisoned outputs, and the
// comparison against the double-precision reference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "duet/device.hpp"
#include "duet/reference.hpp"
#include "duet/softmax.hpp"
#include "plan_options_guard.hpp"

namespace duet::testing {

inline Device first_gpu() {
  for (const auto& d : devices())
    if (d.is_gpu()) return d;
  return Device(BackendKind::host, 0);
}

// GPUs of the backend first_gpu() comes from.
inline int gpus_of_first_backend() {
  int n = 0;
  const Device first = first_gpu();
  for (const auto& d : devices()) n += d.is_gpu() && d.backend() == first.backend();
  return n;
}

inline std::mt19937_64& rng() {
  static thread_local std::mt19937_64 g{std::random_device{}()};
  return g;
}

// Normal values with a spread wide enough that exp() spans many decades.
inline std::vector<float> random_values(std::size_t n, float scale = 4.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng());
  return v;
}

struct Case {
  Op op = Op::softmax;
  bool backward = false;
  DType dtype = DType::f32;
  std::int64_t rows = 1, cols = 1;
  std::int64_t in_stride = 0, out_stride = 0;  // 0: cols
  std::int64_t misalign = 0;                   // elements to shift every pointer by
  bool in_place = false;
  void* stream = nullptr;                      // nullptr: the default stream

  std::string name() const {
    return std::string(backward ? "bwd " : "") + (op == Op::softmax ? "softmax " : "log_softmax ") +
           to_string(dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
           (in_stride ? " in_stride " + std::to_string(in_stride) : "") +
           (out_stride ? " out_stride " + std::to_string(out_stride) : "") +
           (misalign ? " misalign " + std::to_string(misalign) : "") + (in_place ? " in-place" : "");
  }
};

struct Outcome {
  reference::Check check;
  std::string variant;
};

// Runs one case on `dev` with fresh random inputs and a NaN-poisoned output,
// and checks it against the double reference.
inline Outcome run_case(const Device& dev, const Case& c, const std::vector<float>* forced_input = nullptr) {
  const std::int64_t xs = c.in_stride ? c.in_stride : c.cols;
  const std::int64_t os = c.in_place ? xs : (c.out_stride ? c.out_stride : c.cols);
  const int es = dtype_size(c.dtype);
  const std::size_t in_elems = static_cast<std::size_t>((c.rows - 1) * xs + c.cols + c.misalign);
  const std::size_t out_elems = static_cast<std::size_t>((c.rows - 1) * os + c.cols + c.misalign);

  // Inputs, rounded through the dtype so the reference sees what the device reads.
  std::vector<float> x = forced_input ? *forced_input
                                      : reference::round_trip(random_values(static_cast<std::size_t>(c.rows * c.cols)), c.dtype);
  std::vector<float> g;
  if (c.backward) {
    // y must be a real (log-)softmax output for the backward formulas.
    const auto y = reference::forward(x, c.rows, c.cols, c.op);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(y[i]);
    x = reference::round_trip(x, c.dtype);
    g = reference::round_trip(random_values(x.size(), 1.0f), c.dtype);
  }
  auto scatter = [&](const std::vector<float>& dense, std::int64_t stride, std::size_t elems) {
    std::vector<float> full(elems, 0.0f);
    for (std::int64_t r = 0; r < c.rows; ++r)
      for (std::int64_t i = 0; i < c.cols; ++i)
        full[static_cast<std::size_t>(c.misalign + r * stride + i)] = dense[static_cast<std::size_t>(r * c.cols + i)];
    return reference::encode(full, c.dtype);
  };
  Buffer bx(dev, in_elems * es), bout(dev, out_elems * es), bg;
  bx.upload(scatter(x, xs, in_elems).data(), in_elems * es);
  if (!c.in_place) bout.fill(0xff);  // NaN in every dtype: an unwritten element shows
  if (c.backward) {
    bg = Buffer(dev, in_elems * es);
    bg.upload(scatter(g, xs, in_elems).data(), in_elems * es);
  }
  char* xp = static_cast<char*>(bx.data()) + c.misalign * es;
  char* op = c.in_place ? xp : static_cast<char*>(bout.data()) + c.misalign * es;
  SoftmaxCall call;
  call.op = c.op;
  call.backward = c.backward;
  call.dtype = c.dtype;
  call.rows = c.rows;
  call.cols = c.cols;
  call.x = xp;
  call.x_stride = xs;
  call.out = op;
  call.out_stride = os;
  if (c.backward) {
    call.dy = static_cast<char*>(bg.data()) + c.misalign * es;
    call.dy_stride = xs;
  }
  call.stream = c.stream;
  Outcome out;
  const Plan plan = plan_for(dev, call);
  out.variant = variant_name(plan.kernel);
  run(dev, call);
  synchronize(dev, c.stream);

  const Buffer& result = c.in_place ? bx : bout;
  const std::size_t res_elems = c.in_place ? in_elems : out_elems;
  std::vector<std::uint8_t> raw(res_elems * es);
  result.download(raw.data(), raw.size());
  // Nothing outside the rows is written: the gaps between strided rows and
  // the elements before a misaligned first row keep their bytes (the NaN
  // poison; in place, the input's zeros), so an edge pack that stored a
  // neighbour's element shows.
  {
    const std::vector<std::uint8_t> before =
        c.in_place ? scatter(x, xs, in_elems) : std::vector<std::uint8_t>(res_elems * es, 0xff);
    std::vector<bool> in_row(res_elems, false);
    for (std::int64_t r = 0; r < c.rows; ++r)
      for (std::int64_t i = 0; i < c.cols; ++i) in_row[static_cast<std::size_t>(c.misalign + r * os + i)] = true;
    for (std::size_t e = 0; e < res_elems; ++e)
      if (!in_row[e] && !std::equal(raw.begin() + e * es, raw.begin() + (e + 1) * es, before.begin() + e * es)) {
        out.check.ok = false;
        out.check.first_failure = "element " + std::to_string(e) + " outside the rows was written";
        return out;
      }
  }
  const auto full = reference::decode(raw.data(), res_elems, c.dtype);
  std::vector<float> got(static_cast<std::size_t>(c.rows * c.cols));
  for (std::int64_t r = 0; r < c.rows; ++r)
    for (std::int64_t i = 0; i < c.cols; ++i)
      got[static_cast<std::size_t>(r * c.cols + i)] = full[static_cast<std::size_t>(c.misalign + r * os + i)];
  const auto want = c.backward ? reference::backward(x, g, c.rows, c.cols, c.op) : reference::forward(x, c.rows, c.cols, c.op);
  const auto scale = c.backward ? reference::backward_scale(x, g, c.rows, c.cols, c.op) : std::vector<double>{};
  out.check = reference::compare(got, want, c.rows, c.cols, reference::default_tolerance(c.dtype),
                                 c.backward ? &scale : nullptr, reference::default_abs_floor(c.dtype));
  return out;
}

}  // namespace duet::testing
