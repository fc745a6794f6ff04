// The MPS control daemons the gpuman daemon runs (docs/share.md, "MPS"): one
// `nvidia-cuda-mps-control -d` per GPU that carries a live MPS lease, as that lease's
// user, with CUDA_VISIBLE_DEVICES=<the GPU's UUID> and its own pipe and log directories
// (visibility::MpsDirectories). Started on a GPU's first MPS lease, told "quit" on its
// stdin (`echo quit | nvidia-cuda-mps-control`, without a shell) once the last one ended.
// What runs is recorded in the state db (mps_controls, schema 10), so that a daemon that
// restarts finds the controls still wanted (the control's pid file in its pipe directory
// says whether it lives) and stops the others.
//
// Both calls below wait for the control program (bounded by a timeout): `-d` returns once
// the control daemon is in the background, and "quit" once it was told. Owned by the
// daemon's event-loop thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/lease.h"
#include "store/lease_store.h"
#include "visibility/child_env.h"

namespace gpuman::daemon {

struct MpsControlOptions {
  /// [share] mps_control: an absolute path, or a name looked up on `search_path`.
  std::string program = "nvidia-cuda-mps-control";
  std::optional<std::string> search_path;  // the daemon's PATH
  std::string run_dir = "/run/gpuman/mps";  // [share] mps_dir
  int64_t timeout_ms = 10000;               // per run of the control program, then SIGKILL
};

class MpsControls {
 public:
  MpsControls(MpsControlOptions options, store::LeaseStore& store);

  /// The control program, or why MPS cannot be had here. Errors: kNotFound "--mps: the
  /// MPS control program nvidia-cuda-mps-control is not on the daemon's PATH (...); set
  /// [share] mps_control" (or "... /x: no such file" for a path).
  Result<std::string> Program() const;

  /// Makes GPU `uuid` run a control for `uid` (starting one when none runs) and returns
  /// where its clients find it. Errors: kConflict when another user's control runs there
  /// (the scheduler never allows it; a lease table edited by hand might), kNotFound (no
  /// program), kIo (its directories, or the program failed: "nvidia-cuda-mps-control -d
  /// for GPU-...: exited with status 1").
  Result<visibility::MpsClient> Ensure(const std::string& uuid, uint32_t uid, const std::string& user, int64_t now_ms);

  /// Brings the controls in line with `live` (every live lease): a control whose GPU no
  /// live MPS lease of its user holds is told to quit; a GPU with live MPS leases and no
  /// control gets one. `verify` (a daemon's start): a recorded control whose process is
  /// gone (its pid file names no live process) is started again. Failures are logged.
  void Reconcile(const std::vector<model::Lease>& live, bool verify, int64_t now_ms);

  /// The GPUs with a recorded control (tests).
  std::vector<std::string> RunningGpus();

 private:
  Status Start(const store::LeaseStore::MpsControl& control);
  Status Stop(const store::LeaseStore::MpsControl& control);
  bool Alive(const store::LeaseStore::MpsControl& control) const;
  // Runs the control program as `uid` with the GPU's environment; `payload` on its stdin.
  Status RunProgram(const store::LeaseStore::MpsControl& control, const std::vector<std::string>& args,
                    const std::string& payload);

  MpsControlOptions options_;
  store::LeaseStore& store_;
};

}  // namespace gpuman::daemon
