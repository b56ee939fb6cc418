#include "duet/device.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backend_registry.hpp"
#include "duet/error.hpp"
#include "log.hpp"
#include "validate.hpp"

namespace duet {

const DeviceProps& Device::props() const {
  // Properties never change while a process runs: query each device once.
  static std::mutex mutex;
  static std::map<std::pair<BackendKind, int>, std::unique_ptr<DeviceProps>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{backend_, ordinal_}];
  if (!slot) {
    slot = std::make_unique<DeviceProps>(detail::backend(backend_).device_props(ordinal_));
    log::debug("queried {}: {} ({}, {} SMs)", label(), slot->name, slot->arch, slot->sm_count);
  }
  return *slot;
}

std::string Device::label() const { return std::string(to_string(backend_)) + ":" + std::to_string(ordinal_); }

std::vector<Device> devices() {
  std::vector<Device> out;
  for (const auto* ops : detail::backends()) {
    const int n = ops->device_count();
    for (int i = 0; i < n; ++i) out.emplace_back(ops->kind, i);
  }
  return out;
}

int gpu_count() noexcept {
  int n = 0;
  for (const auto* ops : detail::backends())
    if (ops->kind != BackendKind::host) n += ops->device_count();
  return n;
}

Device device(BackendKind backend, int ordinal) {
  const auto& ops = detail::backend(backend);
  const int n = ops.device_count();
  if (ordinal < 0 || ordinal >= n) {
    std::string why = n == 0 ? ops.no_device_reason() : std::string();
    throw Error(Status::no_device, std::string(to_string(backend)) + " device " + std::to_string(ordinal) +
                                       " does not exist (" + std::to_string(n) + " found" +
                                       (why.empty() ? "" : ": " + why) + ")");
  }
  return Device(backend, ordinal);
}

Device device(const std::string& label) {
  const auto colon = label.find(':');
  const std::string name = label.substr(0, colon);
  int ordinal = 0;
  if (colon != std::string::npos) {
    const std::string num = label.substr(colon + 1);
    std::size_t used = 0;
    try {
      ordinal = std::stoi(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (num.empty() || used != num.size())
      throw Error(Status::invalid_argument, "bad device label '" + label + "' (expected e.g. cuda:0, hip:1, host)");
  }
  return device(backend_from_string(name), ordinal);
}

Device default_device() {
  for (const auto* ops : detail::backends())
    if (ops->device_count() > 0) return Device(ops->kind, 0);
  return Device(BackendKind::host, 0);
}

std::vector<BackendInfo> backend_info() {
  std::vector<BackendInfo> out;
  for (const auto* ops : detail::backends()) {
    const int n = ops->device_count();
    out.push_back({ops->kind, n, ops->runtime_version(), ops->driver_version(), ops->compiled_targets(),
                   n == 0 ? ops->no_device_reason() : std::string()});
  }
  return out;
}

Buffer::Buffer(const Device& dev, std::size_t bytes)
    : device_(dev), data_(detail::backend(dev.backend()).device_alloc(dev.ordinal(), bytes)), bytes_(bytes) {}
Buffer::~Buffer() {
  if (data_ != nullptr) detail::backend(device_.backend()).device_free(device_.ordinal(), data_);
}
Buffer::Buffer(Buffer&& o) noexcept : device_(o.device_), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    Buffer old(std::move(*this));
    device_ = o.device_;
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void Buffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  require(offset <= bytes_ && bytes <= bytes_ - offset, Status::invalid_argument, "upload past the end of the buffer");
  detail::backend(device_.backend()).copy_to_device(device_.ordinal(), static_cast<char*>(data_) + offset, host, bytes);
}
void Buffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  require(offset <= bytes_ && bytes <= bytes_ - offset, Status::invalid_argument, "download past the end of the buffer");
  detail::backend(device_.backend()).copy_to_host(device_.ordinal(), host, static_cast<const char*>(data_) + offset, bytes);
}
void Buffer::fill(int byte_value) {
  detail::backend(device_.backend()).fill_bytes(device_.ordinal(), data_, byte_value, bytes_);
}

Stream::Stream(const Device& dev)
    : device_(dev), handle_(detail::backend(dev.backend()).stream_create(dev.ordinal())) {}
Stream::~Stream() { detail::backend(device_.backend()).stream_destroy(device_.ordinal(), handle_); }

void synchronize(const Device& dev, void* stream) {
  detail::backend(dev.backend()).synchronize(dev.ordinal(), stream);
}

void copy_device_to_device(const Device& dev, void* dst, const void* src, std::size_t bytes, void* stream) {
  detail::backend(dev.backend()).copy_device_to_device(dev.ordinal(), dst, src, bytes, stream);
}

void copy_kernel(const Device& dev, void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  constexpr auto bad = Status::invalid_argument;
  require(dst != nullptr && src != nullptr, bad, [&] {
    return std::string(dst == nullptr ? "dst" : "src") + " is a null pointer (copying " + std::to_string(bytes) +
           " bytes)";
  });
  require(bytes <= std::size_t(detail::kMaxSpanBytes), bad, [&] {
    return "a copy of " + std::to_string(bytes) + " bytes is more than any device's address space (2^48)";
  });
  const auto n = static_cast<std::int64_t>(bytes);
  detail::check_apart(detail::span_of(src, n, "src"), "src", detail::span_of(dst, n, "dst"), "dst", false);
  detail::check_pointer_on(dev, src, "src");
  detail::check_pointer_on(dev, dst, "dst");
  detail::backend(dev.backend()).copy_kernel(dev.ordinal(), dst, src, bytes, stream);
}

Event::Event(const Device& dev) : device_(dev), handle_(detail::backend(dev.backend()).event_create(dev.ordinal())) {}
Event::~Event() { detail::backend(device_.backend()).event_destroy(device_.ordinal(), handle_); }
void Event::record(void* stream) { detail::backend(device_.backend()).event_record(device_.ordinal(), handle_, stream); }
float Event::elapsed_ms_since(const Event& start) const {
  require(start.device_ == device_, Status::invalid_argument, "events of two devices: " + start.device_.label() +
                                                                  " and " + device_.label());
  return detail::backend(device_.backend()).event_elapsed_ms(device_.ordinal(), start.handle_, handle_);
}

}  // namespace duet
