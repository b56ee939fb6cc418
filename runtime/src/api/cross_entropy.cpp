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
  // The backward over a shard of the vocabulary (0 and 0 otherwise); vocab
  // is resolved by validate (0 becomes vocab_start + cols).
  std::int64_t vocab_start = 0;
  std::int64_t vocab = 0;
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

// Checks everything (`grad_required`: the backward's output) and resolves
// c.vocab; `vectors` are the call's 4-byte vectors (absent ones null). Gives
// the tensors' layouts for the workspace check; returns false for an empty
// call.
bool validate(const Device& dev, Common& c, bool grad_required, std::initializer_list<Vector> vectors,
              std::vector<Named>* layouts) {
  require(c.rows >= 0 && c.cols >= 0, bad, [&] {
    return "rows and cols must be >= 0, got " + std::to_string(c.rows) + " x " + std::to_string(c.cols);
  });
  detail::check_dtype(c.dtype);
  detail::check_index_type(c.target_type);
  detail::check_cross_entropy_options(c.options);
  c.vocab = detail::check_vocab(c.vocab_start, c.vocab, c.cols);
  if (c.rows == 0) return false;
  require(c.cols >= 1, bad, [] { return std::string("cols (the vocabulary) must be >= 1 when rows > 0"); });
  detail::check_cols(c.cols);

  const int elem = dtype_size(c.dtype);
  const std::string elem_name = to_string(c.dtype);
  detail::check_pointer(c.logits, elem, "logits", elem_name.c_str());
  detail::check_stride(c.logits_stride, c.cols, "logits");
  const Layout logits = layout_of(c.logits, c.rows, c.cols, c.logits_stride, elem, "logits");
  const Layout target = detail::check_targets(c.target, c.target_type, c.rows, c.target_stride);
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
  a.vocab_start = c.vocab_start;
  a.vocab = c.vocab;
  return a;
}

}  // namespace

namespace detail {

void check_reduction(Reduction r) {
  require(r == Reduction::none || r == Reduction::mean || r == Reduction::sum, bad,
          [&] { return "unsupported reduction code " + std::to_string(static_cast<int>(r)); });
}

void check_cross_entropy_options(const CrossEntropyOptions& o) {
  check_reduction(o.reduction);
  require(o.label_smoothing >= 0.0f && o.label_smoothing <= 1.0f, bad,
          [&] { return "label_smoothing must be in [0, 1], got " + std::to_string(o.label_smoothing); });
  require(o.z_loss >= 0.0f && std::isfinite(o.z_loss), bad,
          [&] { return "z_loss must be finite and >= 0, got " + std::to_string(o.z_loss); });
}

// Launches with the caller's workspace (checked) or the per-stream cache's.
void launch_with_ce_workspace(const Device& dev, FusedArgs& a, const std::optional<Workspace>& workspace,
                              const std::vector<Named>& layouts, void* stream) {
  const FusedShape shape = fused_shape(a);
  if (!dev.is_gpu()) return launch_fused(dev, a, shape, stream);
  const std::int64_t needed = cross_entropy_workspace_bytes(a.rows, a.reduction);
  Workspaces::Lease cached;
  if (workspace) {
    check_workspace(dev, *workspace, needed, "cross_entropy_workspace_size", layouts);
    a.workspace = workspace->data;
  } else {
    cached = workspaces().get(dev, stream, needed);
    a.workspace = cached.buffer->data();
  }
  launch_fused(dev, a, shape, stream);
}

}  // namespace detail

std::size_t cross_entropy_workspace_size(const Device& dev, std::int64_t rows, Reduction reduction) {
  require(rows >= 0, bad, [&] { return "rows must be >= 0, got " + std::to_string(rows); });
  detail::check_reduction(reduction);
  if (!dev.is_gpu() || rows == 0) return 0;
  require(rows <= detail::kMaxSpanBytes / 4, bad,
          [&] { return "rows " + std::to_string(rows) + " overflow any device's address space"; });
  return static_cast<std::size_t>(cross_entropy_workspace_bytes(rows, reduction));
}

void run(const Device& dev, const CrossEntropyCall& call) {
  Common c = common_of(call);
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
  detail::launch_with_ce_workspace(dev, a, call.workspace, layouts, call.stream);
}

void run(const Device& dev, const CrossEntropyBackwardCall& call) {
  Common c = common_of(call);
  c.vocab_start = call.vocab_start;
  c.vocab = call.vocab;
  const std::int64_t grad_loss_floats = call.options.reduction == Reduction::none ? call.rows : 1;
  std::vector<Named> layouts;
  if (!validate(dev, c, true, {{call.lse, call.rows, "lse", true}, {call.grad_loss, grad_loss_floats, "grad_loss", true}},
                &layouts))
    return;
  FusedArgs a = common_args(c);
  a.op = FusedOp::cross_entropy_backward;
  a.lse = const_cast<float*>(call.lse);  // an input here (FusedArgs shares the field with the forward)
  a.grad_loss = call.grad_loss;
  detail::launch_with_ce_workspace(dev, a, call.workspace, layouts, call.stream);
}

}  // namespace duet
