#include "duet/cross_entropy.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "duet/error.hpp"
#include "fused_dispatch.hpp"
#include "validate.hpp"
#include "workspaces.hpp"

namespace duet {
namespace {

using detail::Layout;
using detail::layout_of;
using detail::Named;
constexpr Status bad = Status::invalid_argument;

void check_reduction(Reduction r) {
  require(r == Reduction::none || r == Reduction::mean || r == Reduction::sum, bad,
          [&] { return "unsupported reduction code " + std::to_string(static_cast<int>(r)); });
}

// What the forward and the backward share: the logits, the targets, the
// options, and one output matrix (the gradient, optional in the forward).
struct Common {
  DType dtype;
  std::int64_t rows, cols;
  const void* logits;
  std::int64_t logits_stride;
  IndexType target_type;
  const void* target;
  std::int64_t target_stride;
  const CrossEntropyOptions& options;
  void* grad;
  std::int64_t grad_stride;
};

// A vector of 4-byte elements of the call (loss, lse, grad_loss: float32;
// invalid_targets: int32), its name, and whether the call needs it.
struct Vector {
  const void* p;
  std::int64_t elems;
  const char* name;
  bool required;
  const char* elem_name = "float32";
};

// Checks everything (`grad_required`: the backward's output); `vectors` are
// the call's 4-byte vectors (absent ones null). Gives the tensors' layouts
// for the workspace check; returns false for an empty call.
bool validate(const Device& dev, const Common& c, bool grad_required, std::initializer_list<Vector> vectors,
              std::vector<Named>* layouts) {
  require(c.rows >= 0 && c.cols >= 0, bad, [&] {
    return "rows and cols must be >= 0, got " + std::to_string(c.rows) + " x " + std::to_string(c.cols);
  });
  detail::check_dtype(c.dtype);
  require(c.target_type == IndexType::i32 || c.target_type == IndexType::i64, bad,
          [&] { return "unsupported target index type code " + std::to_string(static_cast<int>(c.target_type)); });
  check_reduction(c.options.reduction);
  if (c.rows == 0) return false;
  require(c.cols >= 1, bad, [] { return std::string("cols (the vocabulary) must be >= 1 when rows > 0"); });
  detail::check_cols(c.cols);
  const float eps = c.options.label_smoothing;
  require(eps >= 0.0f && eps <= 1.0f, bad,
          [&] { return "label_smoothing must be in [0, 1], got " + std::to_string(eps); });
  const float z = c.options.z_loss;
  require(z >= 0.0f && std::isfinite(z), bad,
          [&] { return "z_loss must be finite and >= 0, got " + std::to_string(z); });
  require(c.target_stride >= 1, bad,
          [&] { return "target_stride must be >= 1, got " + std::to_string(c.target_stride); });

  const int elem = dtype_size(c.dtype);
  const std::string elem_name = to_string(c.dtype);
  detail::check_pointer(c.logits, elem, "logits", elem_name.c_str());
  detail::check_stride(c.logits_stride, c.cols, "logits");
  const int index_bytes = c.target_type == IndexType::i32 ? 4 : 8;
  detail::check_pointer(c.target, index_bytes, "target", c.target_type == IndexType::i32 ? "int32" : "int64");
  const Layout logits = layout_of(c.logits, c.rows, c.cols, c.logits_stride, elem, "logits");
  const Layout target = layout_of(c.target, c.rows, 1, c.target_stride, index_bytes, "target");
  layouts->push_back({logits, "logits"});
  layouts->push_back({target, "target"});
  detail::check_apart(target, "target", logits, "logits", false);
  require(c.grad != nullptr || !grad_required, bad, [] { return std::string("grad is a null pointer"); });
  Layout grad;
  if (c.grad != nullptr) {
    detail::check_pointer(c.grad, elem, "grad", elem_name.c_str());
    detail::check_stride(c.grad_stride, c.cols, "grad");
    grad = layout_of(c.grad, c.rows, c.cols, c.grad_stride, elem, "grad");
    detail::check_apart(logits, "logits", grad, "grad", true);
    detail::check_apart(target, "target", grad, "grad", false);
    layouts->push_back({grad, "grad"});
  }
  // Every float vector apart from the matrices, the targets and each other
  // (the reads are as unordered as the writes on a GPU).
  std::vector<Named> placed;
  for (const Vector& v : vectors) {
    if (v.p == nullptr && !v.required) continue;
    detail::check_pointer(v.p, 4, v.name, v.elem_name);
    const Layout l = detail::span_of(v.p, v.elems * 4, v.name);
    detail::check_apart(l, v.name, logits, "logits", false);
    detail::check_apart(l, v.name, target, "target", false);
    if (c.grad != nullptr) detail::check_apart(l, v.name, grad, "grad", false);
    for (const Named& other : placed) detail::check_apart(l, v.name, other.layout, other.name, false);
    placed.push_back({l, v.name});
    layouts->push_back({l, v.name});
  }
  detail::check_pointer_on(dev, c.logits, "logits");
  detail::check_pointer_on(dev, c.target, "target");
  if (c.grad != nullptr) detail::check_pointer_on(dev, c.grad, "grad");
  for (const Vector& v : vectors)
    if (v.p != nullptr) detail::check_pointer_on(dev, v.p, v.name);
  return true;
}

template <class Call>
Common common_of(const Call& call) {
  return {call.dtype,  call.rows,          call.cols,    call.logits, call.logits_stride, call.target_type,
          call.target, call.target_stride, call.options, call.grad,   call.grad_stride};
}

FusedArgs common_args(const Common& c) {
  FusedArgs a;
  a.dtype = c.dtype;
  a.rows = c.rows;
  a.cols = c.cols;
  a.x = c.logits;
  a.x_stride = c.logits_stride;
  a.out = c.grad;
  a.out_stride = c.grad != nullptr ? c.grad_stride : 0;
  a.target = c.target;
  a.target_type = c.target_type;
  a.target_stride = c.target_stride;
  a.ignore_index = c.options.ignore_index;
  a.label_smoothing = c.options.label_smoothing;
  a.z_loss = c.options.z_loss;
  a.reduction = c.options.reduction;
  return a;
}

FusedShape shape_of(const FusedArgs& a) {
  FusedShape s;
  s.op = a.op;
  s.dtype = a.dtype;
  s.rows = a.rows;
  s.cols = a.cols;
  s.gradient = a.op == FusedOp::cross_entropy && a.out != nullptr;
  return s;
}

// Launches with the caller's workspace (checked) or the per-stream cache's.
void launch(const Device& dev, FusedArgs& a, const std::optional<Workspace>& workspace,
            const std::vector<Named>& layouts, void* stream) {
  const FusedShape shape = shape_of(a);
  if (!dev.is_gpu()) return detail::launch_fused(dev, a, shape, stream);
  const std::int64_t needed = cross_entropy_workspace_bytes(a.rows, a.reduction);
  detail::Workspaces::Lease cached;
  if (workspace) {
    detail::check_workspace(dev, *workspace, needed, "cross_entropy_workspace_size", layouts);
    a.workspace = workspace->data;
  } else {
    cached = detail::workspaces().get(dev, stream, needed);
    a.workspace = cached.buffer->data();
  }
  detail::launch_fused(dev, a, shape, stream);
}

}  // namespace

std::size_t cross_entropy_workspace_size(const Device& dev, std::int64_t rows, Reduction reduction) {
  require(rows >= 0, bad, [&] { return "rows must be >= 0, got " + std::to_string(rows); });
  check_reduction(reduction);
  if (!dev.is_gpu() || rows == 0) return 0;
  require(rows <= detail::kMaxSpanBytes / 4, bad,
          [&] { return "rows " + std::to_string(rows) + " overflow any device's address space"; });
  return static_cast<std::size_t>(cross_entropy_workspace_bytes(rows, reduction));
}

void run(const Device& dev, const CrossEntropyCall& call) {
  const Common c = common_of(call);
  const std::int64_t loss_floats = call.options.reduction == Reduction::none ? call.rows : 1;
  std::vector<Named> layouts;
  if (!validate(dev, c, false,
                {{call.loss, loss_floats, "loss", true},
                 {call.lse, call.rows, "lse", false},
                 {call.invalid_targets, 1, "invalid_targets", false, "int32"}},
                &layouts))
    return;
  FusedArgs a = common_args(c);
  a.op = FusedOp::cross_entropy;
  a.loss = call.loss;
  a.lse = call.lse;
  a.invalid_targets = call.invalid_targets;
  launch(dev, a, call.workspace, layouts, call.stream);
}

void run(const Device& dev, const CrossEntropyBackwardCall& call) {
  const Common c = common_of(call);
  const std::int64_t grad_loss_floats = call.options.reduction == Reduction::none ? call.rows : 1;
  std::vector<Named> layouts;
  if (!validate(dev, c, true, {{call.lse, call.rows, "lse", true}, {call.grad_loss, grad_loss_floats, "grad_loss", true}},
                &layouts))
    return;
  FusedArgs a = common_args(c);
  a.op = FusedOp::cross_entropy_backward;
  a.lse = const_cast<float*>(call.lse);  // an input here (FusedArgs shares the field with the forward)
  a.grad_loss = call.grad_loss;
  launch(dev, a, call.workspace, layouts, call.stream);
}

}  // namespace duet
