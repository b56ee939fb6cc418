#include "workspaces.hpp"

namespace duet::detail {

Workspaces::Lease Workspaces::get(const Device& dev, void* stream, std::int64_t bytes) {
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = slots_[{dev.backend(), dev.ordinal(), stream}];
    if (!s) s = std::make_unique<Slot>();
    slot = s.get();
  }
  Lease lease{std::unique_lock<std::mutex>(slot->mutex), nullptr};
  if (!slot->buffer || slot->buffer->size() < static_cast<std::size_t>(bytes))
    slot->buffer = std::make_shared<Buffer>(dev, static_cast<std::size_t>(bytes));
  lease.buffer = slot->buffer;
  return lease;
}

Workspaces& workspaces() {
  static auto* w = new Workspaces();
  return *w;
}

}  // namespace duet::detail
