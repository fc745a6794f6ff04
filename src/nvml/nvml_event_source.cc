#include "nvml/nvml_event_source.h"

#include <algorithm>

namespace gpuman::nvml {

Result<std::unique_ptr<NvmlXidEventSource>> NvmlXidEventSource::Create(const NvmlLibrary& lib, const Clock& clock) {
  auto create = lib.Get<nvmlEventSetCreate_fn>(Sym::kEventSetCreate);
  auto reg = lib.Get<nvmlDeviceRegisterEvents_fn>(Sym::kDeviceRegisterEvents);
  if (!create || !reg || !lib.Has(Sym::kEventSetWait) || !lib.Has(Sym::kEventSetFree)) {
    return MakeError(ErrorCode::kUnavailable, lib.path() + " has no NVML event API");
  }
  std::unique_ptr<NvmlXidEventSource> src(new NvmlXidEventSource(lib, clock));
  nvmlReturn_t rc = create(&src->set_);
  if (rc != NVML_SUCCESS) {
    src->set_ = nullptr;
    return MakeError(ErrorCode::kUnavailable, "nvmlEventSetCreate: " + lib.ErrorString(rc));
  }
  unsigned count = 0;
  rc = lib.Get<nvmlDeviceGetCount_fn>(Sym::kDeviceGetCount)(&count);
  if (rc != NVML_SUCCESS) return MakeError(ErrorCode::kUnavailable, "nvmlDeviceGetCount: " + lib.ErrorString(rc));
  auto handle_of = lib.Get<nvmlDeviceGetHandleByIndex_fn>(Sym::kDeviceGetHandleByIndex);
  auto uuid_of = lib.Get<nvmlDeviceGetString_fn>(Sym::kDeviceGetUuid);
  auto supported_of = lib.Get<nvmlDeviceGetULongLong_fn>(Sym::kDeviceGetSupportedEventTypes);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (handle_of(i, &dev) != NVML_SUCCESS) {
      src->notes_.push_back("GPU " + std::to_string(i) + ": no handle, no Xid events");
      continue;
    }
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (!uuid_of || uuid_of(dev, uuid, sizeof uuid) != NVML_SUCCESS) {
      src->notes_.push_back("GPU " + std::to_string(i) + ": no UUID, no Xid events");
      continue;
    }
    unsigned long long mask = nvmlEventTypeXidCriticalError;
    if (supported_of) {
      unsigned long long supported = 0;
      if (supported_of(dev, &supported) == NVML_SUCCESS) mask &= supported;
    }
    rc = mask ? reg(dev, mask, src->set_) : NVML_ERROR_NOT_SUPPORTED;
    if (rc != NVML_SUCCESS) {
      // NOT_SUPPORTED leaves the set usable (header); so do per-device failures here.
      src->notes_.push_back(std::string(uuid) + ": Xid events: " + lib.ErrorString(rc));
      continue;
    }
    src->gpus_[dev] = Gpu{static_cast<int>(i), uuid};
  }
  if (src->gpus_.empty()) {
    return MakeError(ErrorCode::kUnavailable, "no GPU accepts Xid event registration");
  }
  return src;
}

NvmlXidEventSource::~NvmlXidEventSource() {
  if (set_) lib_.Get<nvmlEventSetFree_fn>(Sym::kEventSetFree)(set_);
}

Result<std::vector<model::XidEvent>> NvmlXidEventSource::Wait(int timeout_ms) {
  std::vector<model::XidEvent> out;
  auto wait = lib_.Get<nvmlEventSetWait_fn>(Sym::kEventSetWait);
  unsigned timeout = static_cast<unsigned>(std::max(0, timeout_ms));
  for (int i = 0; i < 64; ++i) {  // drain what is queued, waiting only the first time
    nvmlEventData_t data{};
    data.gpuInstanceId = data.computeInstanceId = 0xFFFFFFFFu;
    nvmlReturn_t rc = wait(set_, &data, i == 0 ? timeout : 0);
    if (rc == NVML_ERROR_TIMEOUT) break;  // nothing (or an interrupt)
    if (rc != NVML_SUCCESS) {
      if (!out.empty()) break;
      return MakeError(ErrorCode::kUnavailable, std::string(lib_.SymbolName(Sym::kEventSetWait)) + ": " +
                                                    lib_.ErrorString(rc));
    }
    if (!(data.eventType & nvmlEventTypeXidCriticalError)) continue;
    model::XidEvent ev;
    ev.xid = static_cast<int>(data.eventData);
    ev.at_unix_ms = clock_.NowUnixMs();
    ev.source = "nvml_event";
    if (auto it = gpus_.find(data.device); it != gpus_.end()) {
      ev.gpu_uuid = it->second.uuid;
      ev.gpu_index = it->second.index;
    }
    out.push_back(std::move(ev));
  }
  return out;
}

}  // namespace gpuman::nvml
