// CUDA_VISIBLE_DEVICES, the way the CUDA driver reads it.
//
// Why this file exists. NVML and nvidia-smi ignore CUDA_VISIBLE_DEVICES, so a tool that
// wants to say "your job will see these GPUs" has to apply CUDA's rules itself. The
// rules are short but full of traps, and CUDA applies every one of them silently: a
// typo does not fail, it just hides GPUs. So this parser never fails either; it returns
// what CUDA will do plus a diagnostic per entry saying why. The rules and their sources
// are in shared/reference/cuda-visible-devices.md; "guide" below is NVIDIA's CUDA
// Programming Guide, "PyTorch model" is torch/cuda/__init__.py, which mirrors the driver
// where the guide is silent.
//
// Index vs UUID vs prefix. An entry names a GPU in one of three ways:
//   * an integer, read like strtoul on its leading digits ("1gpu2" is 1, "+3" is 3, "-0"
//     is 0, surrounding whitespace is fine). It is an ordinal in CUDA's enumeration
//     order, NOT nvidia-smi's index unless CUDA_DEVICE_ORDER=PCI_BUS_ID (see Ordering);
//   * a full UUID as `nvidia-smi -L` prints it, "GPU-8932f937-d72c-…";
//   * a prefix of one, "GPU-8932f937". The prefix includes "GPU-" (MPS docs) and must
//     match exactly one GPU. We compare case-sensitively, as the PyTorch model does.
// UUIDs are the only form that means the same GPU to every tool, so gpuman emits full
// UUIDs (FormatCudaVisibleDevices) and only ever *reads* the other forms.
//
// One kind per list. The first entry fixes the kind (index, GPU-…, MIG-…); the first
// entry of another kind ends the list, so "GPU-123, 2" keeps only the UUID. Whitespace
// is stripped around integers only: " GPU-x" as a second entry is a kind change, and a
// list starting with a space is an integer list whose first entry is not a number.
//
// Malformed lists. CUDA keeps the entries before the first invalid one and drops the
// rest: "0,2,-1,1" exposes 0 and 2 (guide). Invalid means negative, not a number,
// out of range ("1,5,0" on two GPUs exposes one), an unknown or ambiguous UUID prefix,
// or a kind change. A first entry that is invalid therefore hides everything ("-1" is
// the idiom for "no GPU"). A duplicate is worse: it empties the whole set ("0,1,2,1"
// exposes nothing), also when two different prefixes resolve to the same GPU (PyTorch
// model; the guide is silent). We walk the list once, in order, so entries after the
// first invalid one are never examined for duplicates; the PyTorch model checks
// integer duplicates before range, so "1,5,1" on two GPUs is empty there and "1" here.
// NVIDIA does not document this corner; the diagnostics make it visible either way.
// Unset and empty differ: unset shows every GPU, "" shows none.
//
// MIG. Two forms: the MIG device UUID "MIG-<uuid>" (current drivers) and the older
// "MIG-GPU-<uuid>/<gi>/<ci>" (the GPU part may be a prefix). CUDA enumerates a single MIG
// device per process, so only the first MIG entry is visible; the others are reported
// as mig_hidden. Snapshots do not list MIG instances, so a "MIG-<uuid>" entry cannot be
// checked against the machine: we take it as valid and leave its parent GPU unknown. A
// "MIG-GPU-…" entry is checked through its parent's UUID prefix. (The rule that a listed
// MIG-enabled *physical* GPU contributes only its first MIG device is applied by the
// resolver, which knows the GPUs' MIG mode.)
//
// Ordering. CUDA numbers devices FASTEST_FIRST by default, "using a simple heuristic"
// that NVIDIA does not specify; CUDA_DEVICE_ORDER=PCI_BUS_ID makes the order nvidia-smi's.
// On a machine of identical GPUs the two agree. On a mixed machine we can only estimate
// FASTEST_FIRST (device_order.h: compute capability, then memory, then bus order) and
// every result built on it carries order_is_estimate, so that the CLI says "probably".
// Integer entries index into that order, which is why "CUDA_VISIBLE_DEVICES=0" on a
// display-GPU-plus-A100 box is usually not the GPU the user looked at in nvidia-smi.
//
// Read once. The driver reads the variable at cuInit; a launcher must put it in the
// child's environment before exec. Nothing here depends on that, but it is why the
// resolver models a *future* process from an environment map rather than asking CUDA.
#include "visibility/cuda_visible_devices.h"

#include <limits>
#include <map>

#include "base/strings.h"

namespace gpuman::visibility {
namespace {

constexpr std::string_view kGpuPrefix = "GPU-";
constexpr std::string_view kMigPrefix = "MIG-";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

EntryKind OwnKind(std::string_view text) {
  if (text.starts_with(kGpuPrefix)) return EntryKind::kGpuUuid;
  if (text.starts_with(kMigPrefix)) return EntryKind::kMigUuid;
  return EntryKind::kIndex;
}

const char* KindPhrase(EntryKind kind) {
  switch (kind) {
    case EntryKind::kIndex: return "an index";
    case EntryKind::kGpuUuid: return "a GPU UUID";
    case EntryKind::kMigUuid: return "a MIG device";
  }
  return "?";
}

const char* ListPhrase(EntryKind kind) {
  switch (kind) {
    case EntryKind::kIndex: return "a list of indices";
    case EntryKind::kGpuUuid: return "a list of GPU UUIDs";
    case EntryKind::kMigUuid: return "a list of MIG devices";
  }
  return "?";
}

std::string Quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

// An integer entry, strtoul-like: optional whitespace and sign, then leading digits.
void LexIndex(LexedEntry& entry) {
  const std::string_view t = Trim(entry.text);
  if (t.starts_with(kGpuPrefix) || t.starts_with(kMigPrefix)) {
    entry.kind = OwnKind(t);
    entry.lexical_error = std::string("kind change: ") + KindPhrase(entry.kind) + " in " +
                          ListPhrase(EntryKind::kIndex);
    return;
  }
  if (t.empty()) {
    entry.lexical_error = "empty entry";
    return;
  }
  size_t pos = 0;
  const bool is_negative = t[0] == '-';
  const bool has_sign = t[0] == '-' || t[0] == '+';
  if (has_sign) pos = 1;
  const size_t digits_start = pos;
  uint64_t value = 0;
  bool saturated = false;
  while (pos < t.size() && IsDigit(t[pos])) {
    const uint64_t digit = static_cast<uint64_t>(t[pos] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      saturated = true;
    } else {
      value = value * 10 + digit;
    }
    ++pos;
  }
  if (pos == digits_start) {
    entry.lexical_error = "not a number";
    return;
  }
  if (saturated) value = std::numeric_limits<uint64_t>::max();
  if (is_negative && value != 0) {
    entry.lexical_error = "negative index";
    return;
  }
  entry.number = value;
  std::string note;
  if (has_sign) note = std::string(t.substr(0, pos)) + " read as " + std::to_string(value);
  if (pos < t.size()) {
    if (!note.empty()) note += "; ";
    note += "trailing " + Quoted(t.substr(pos)) + " ignored";
  }
  entry.note = note;
}

// A MIG entry: "MIG-<uuid>" or "MIG-GPU-<uuid>/<gi>/<ci>".
void LexMig(LexedEntry& entry) {
  const std::string_view rest = std::string_view(entry.text).substr(kMigPrefix.size());
  if (rest.empty()) {
    entry.lexical_error = "MIG- with nothing after it";
    return;
  }
  if (rest.find('/') == std::string_view::npos) return;
  const std::vector<std::string> parts = Split(rest, '/');
  const auto all_digits = [](const std::string& s) {
    if (s.empty()) return false;
    for (char c : s) {
      if (!IsDigit(c)) return false;
    }
    return true;
  };
  if (parts.size() != 3 || !parts[0].starts_with(kGpuPrefix) || !all_digits(parts[1]) ||
      !all_digits(parts[2])) {
    entry.lexical_error = "malformed MIG entry: expected MIG-GPU-<uuid>/<gi>/<ci>";
  }
}

struct Match {
  std::vector<const model::DeviceSnapshot*> gpus;
};

// GPUs whose UUID starts with `prefix` (the prefix includes "GPU-").
Match MatchUuid(std::string_view prefix, const std::vector<model::DeviceSnapshot>& gpus) {
  Match m;
  for (const model::DeviceSnapshot& gpu : gpus) {
    if (gpu.uuid && std::string_view(*gpu.uuid).starts_with(prefix)) m.gpus.push_back(&gpu);
  }
  return m;
}

std::string DescribeMatch(std::string_view prefix, const Match& m) {
  if (m.gpus.empty()) return "unknown UUID: no GPU's UUID starts with " + Quoted(prefix);
  std::string out = "ambiguous UUID prefix: matches";
  for (size_t i = 0; i < m.gpus.size(); ++i) {
    out += (i == 0 ? " GPU " : ", GPU ") + std::to_string(m.gpus[i]->index);
  }
  return out;
}

}  // namespace

const char* EntryKindName(EntryKind kind) {
  switch (kind) {
    case EntryKind::kIndex: return "index";
    case EntryKind::kGpuUuid: return "gpu_uuid";
    case EntryKind::kMigUuid: return "mig_uuid";
  }
  return "index";
}

const char* EntryOutcomeName(EntryOutcome outcome) {
  switch (outcome) {
    case EntryOutcome::kVisible: return "visible";
    case EntryOutcome::kInvalid: return "invalid";
    case EntryOutcome::kIgnored: return "ignored";
    case EntryOutcome::kDuplicate: return "duplicate";
    case EntryOutcome::kCancelled: return "cancelled";
    case EntryOutcome::kMigHidden: return "mig_hidden";
  }
  return "visible";
}

std::vector<LexedEntry> LexCudaVisibleDevices(std::string_view value) {
  std::vector<LexedEntry> out;
  if (value.empty()) return out;
  const EntryKind list_kind = OwnKind(value);
  const std::vector<std::string> parts = Split(value, ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    LexedEntry entry;
    entry.position = static_cast<int>(i);
    entry.text = parts[i];
    entry.kind = OwnKind(entry.text);
    if (list_kind == EntryKind::kIndex) {
      LexIndex(entry);
    } else if (entry.kind != list_kind) {
      entry.lexical_error = std::string("kind change: ") +
                            (Trim(entry.text).empty() ? "an empty entry" : KindPhrase(entry.kind)) +
                            " in " + ListPhrase(list_kind);
      if (OwnKind(Trim(entry.text)) == list_kind) {
        entry.lexical_error += " (UUID entries are not trimmed: remove the space)";
      }
    } else if (list_kind == EntryKind::kMigUuid) {
      LexMig(entry);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

CudaVisibleDevices ParseCudaVisibleDevices(std::optional<std::string_view> value,
                                           const std::vector<model::DeviceSnapshot>& gpus,
                                           const std::vector<PhysicalIndex>& cuda_order) {
  CudaVisibleDevices result;
  if (!value) {
    for (PhysicalIndex index : cuda_order) result.devices.push_back({index, "", false});
    return result;
  }
  result.is_set = true;
  result.kind = OwnKind(*value);
  const std::vector<LexedEntry> lexed = LexCudaVisibleDevices(*value);

  std::map<std::string, int> seen;  // device key -> position of the entry that named it
  bool has_mig_visible = false;
  for (const LexedEntry& lex : lexed) {
    EntryDiagnostic diag{lex.position, lex.text, EntryOutcome::kVisible, lex.note, std::nullopt};
    if (result.truncated_at || result.duplicate_at) {
      diag.outcome = EntryOutcome::kIgnored;
      diag.reason = result.duplicate_at ? "not examined: a duplicate already emptied the set"
                                        : "after the end of the list (entry " +
                                              std::to_string(*result.truncated_at + 1) + ")";
      result.entries.push_back(std::move(diag));
      continue;
    }
    std::string error = lex.lexical_error;
    std::string key;  // identity of the device, for the duplicate rule
    ResolvedDevice device{std::nullopt, lex.text, false};
    if (error.empty()) {
      switch (result.kind) {
        case EntryKind::kIndex:
          if (*lex.number >= cuda_order.size()) {
            error = "out of range: CUDA numbers " + std::to_string(cuda_order.size()) +
                    " GPU(s) here" +
                    (cuda_order.empty()
                         ? std::string()
                         : " (0.." + std::to_string(cuda_order.size() - 1) + ")");
          } else {
            device.index = cuda_order[*lex.number];
          }
          break;
        case EntryKind::kGpuUuid: {
          const Match m = MatchUuid(lex.text, gpus);
          if (m.gpus.size() != 1) {
            error = DescribeMatch(lex.text, m);
          } else {
            device.index = PhysicalIndex{m.gpus[0]->index};
          }
          break;
        }
        case EntryKind::kMigUuid: {
          device.is_mig = true;
          const std::string_view rest = std::string_view(lex.text).substr(kMigPrefix.size());
          const size_t slash = rest.find('/');
          if (slash == std::string_view::npos) {
            key = lex.text;  // MIG device UUID: parent unknown to a snapshot
            if (diag.reason.empty()) diag.reason = "MIG device UUID: not checked against the GPUs";
            break;
          }
          const Match m = MatchUuid(rest.substr(0, slash), gpus);
          if (m.gpus.size() != 1) {
            error = "MIG parent: " + DescribeMatch(rest.substr(0, slash), m);
          } else {
            device.index = PhysicalIndex{m.gpus[0]->index};
            key = std::to_string(m.gpus[0]->index) + std::string(rest.substr(slash));
          }
          break;
        }
      }
    }
    if (!error.empty()) {
      diag.outcome = EntryOutcome::kInvalid;
      diag.reason = error;
      result.truncated_at = lex.position;
      result.entries.push_back(std::move(diag));
      continue;
    }
    diag.device = device.index;
    if (key.empty()) key = std::to_string(device.index->value);
    if (const auto it = seen.find(key); it != seen.end()) {
      diag.outcome = EntryOutcome::kDuplicate;
      diag.reason = "names the same device as entry " + std::to_string(it->second + 1) +
                    ": a duplicate empties the whole set";
      result.duplicate_at = lex.position;
      for (EntryDiagnostic& earlier : result.entries) {
        if (earlier.outcome == EntryOutcome::kVisible ||
            earlier.outcome == EntryOutcome::kMigHidden) {
          earlier.outcome = EntryOutcome::kCancelled;
          earlier.reason = "valid, but entry " + std::to_string(lex.position + 1) +
                           " is a duplicate and empties the set";
        }
      }
      result.devices.clear();
      result.mig_hidden_count = 0;
      result.entries.push_back(std::move(diag));
      continue;
    }
    seen.emplace(key, lex.position);
    if (device.is_mig && has_mig_visible) {
      diag.outcome = EntryOutcome::kMigHidden;
      diag.reason = "CUDA exposes only one MIG device per process";
      ++result.mig_hidden_count;
    } else {
      has_mig_visible = has_mig_visible || device.is_mig;
      result.devices.push_back(std::move(device));
    }
    result.entries.push_back(std::move(diag));
  }
  return result;
}

std::string FormatCudaVisibleDevices(const std::vector<std::string>& uuids) {
  std::string out;
  for (size_t i = 0; i < uuids.size(); ++i) {
    if (i > 0) out += ',';
    out += uuids[i];
  }
  return out;
}

}  // namespace gpuman::visibility
