// CUDA_VISIBLE_DEVICES: parse a value exactly as the CUDA driver does and resolve it
// against a machine's GPUs, keeping a diagnostic for every entry; and format a value for
// a child process. Pure functions (no I/O, no getenv); thread-safe. The rules and their
// sources are in cuda_visible_devices.cc's essay and docs/visibility.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_snapshot.h"
#include "visibility/ids.h"

namespace gpuman::visibility {

/// What a list holds; fixed by its first entry (rule 7 of the reference).
enum class EntryKind { kIndex, kGpuUuid, kMigUuid };

/// "index", "gpu_uuid" or "mig_uuid".
const char* EntryKindName(EntryKind kind);

/// What became of one entry.
enum class EntryOutcome {
  kVisible,    // the entry names a device CUDA will expose
  kInvalid,    // this entry is invalid and ends the list
  kIgnored,    // after the end of the list (an earlier entry was invalid)
  kDuplicate,  // repeats an earlier device: the whole set becomes empty
  kCancelled,  // valid, but a later duplicate emptied the set
  kMigHidden,  // valid MIG device, but CUDA exposes only the first MIG device
};

/// "visible", "invalid", "ignored", "duplicate", "cancelled", "mig_hidden".
const char* EntryOutcomeName(EntryOutcome outcome);

/// One comma-separated entry as CUDA's parser reads it, before looking at any GPU.
struct LexedEntry {
  int position = 0;           // 0-based place in the list
  std::string text;           // exactly as written
  EntryKind kind = EntryKind::kIndex;  // the entry's own kind
  std::optional<uint64_t> number;      // kIndex entries read strtoul-like (saturating)
  std::string note;           // e.g. "trailing \"gpu2\" ignored"; "" when none
  std::string lexical_error;  // non-empty: invalid whatever the GPUs (negative, not a number,
                              // kind change, malformed MIG form)
};

/// Splits `value` on ',' and reads each entry. The list's kind is the first entry's; an
/// entry of another kind gets lexical_error "kind change …". Entries after the first
/// lexical error are still returned (with their own reading).
std::vector<LexedEntry> LexCudaVisibleDevices(std::string_view value);

struct EntryDiagnostic {
  int position = 0;  // 0-based
  std::string text;
  EntryOutcome outcome = EntryOutcome::kVisible;
  std::string reason;  // why the entry is not visible, or a note ("+3 read as 3"); may be ""
  std::optional<PhysicalIndex> device;  // the GPU it resolved to, when it did
};

/// One device CUDA will expose, in ordinal order.
struct ResolvedDevice {
  std::optional<PhysicalIndex> index;  // absent for a MIG-<uuid> entry (parent unknown)
  std::string entry;                   // the list entry that named it ("" when unset)
  bool is_mig = false;                 // the entry names a MIG device
};

struct CudaVisibleDevices {
  bool is_set = false;  // false: variable unset, every GPU is visible
  EntryKind kind = EntryKind::kIndex;
  std::vector<ResolvedDevice> devices;  // cuda:k is devices[k]
  std::vector<EntryDiagnostic> entries;
  std::optional<int> truncated_at;      // position of the entry that ended the list
  std::optional<int> duplicate_at;      // position of the entry that emptied the set
  int mig_hidden_count = 0;             // MIG entries dropped (single MIG device rule)
};

/// Resolves CUDA_VISIBLE_DEVICES (nullopt = unset) against `gpus`. `cuda_order` is CUDA's
/// enumeration order (EnumerateCuda); integer entries index into it. UUIDs and prefixes
/// ("GPU-8932f937", the prefix includes "GPU-") match case-sensitively and must be
/// unique. Never fails: problems are reported per entry, as CUDA silently applies them.
CudaVisibleDevices ParseCudaVisibleDevices(std::optional<std::string_view> value,
                                           const std::vector<model::DeviceSnapshot>& gpus,
                                           const std::vector<PhysicalIndex>& cuda_order);

/// The value to give a child: full UUIDs joined with ',' and no spaces ("GPU-a,GPU-b").
/// An empty list gives "" (which hides every GPU; it does not mean "all").
std::string FormatCudaVisibleDevices(const std::vector<std::string>& uuids);

}  // namespace gpuman::visibility
