// Sampler: the thread that gathers Frames (NVML snapshot, process owners, leases, jobs)
// so the UI thread never waits on the driver or the daemon. It owns every call into the
// collect function; the UI thread only reads the newest published Frame (an immutable
// shared_ptr swapped under a mutex) and polls wake_fd() to learn that one arrived.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "base/result.h"
#include "base/unique_fd.h"
#include "tui/top_model.h"

namespace gpuman::tui {

class Sampler {
 public:
  /// `collect` runs on the sampler thread only (after Start), once per `interval`,
  /// measured from the start of one collection to the start of the next.
  using Collect = std::function<Frame()>;
  Sampler(Collect collect, std::chrono::milliseconds interval);
  ~Sampler();  // Stop()
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  /// Publishes `first` (when given) and starts the thread, which waits one interval before
  /// its first collection when `first` was given. The thread runs with SIGWINCH, SIGINT and
  /// SIGTERM blocked, so those signals reach (and interrupt) the UI thread.
  /// Errors: kInternal when the wake pipe cannot be made.
  Status Start(std::shared_ptr<const Frame> first = nullptr);
  /// Asks the thread to stop and joins it (waits for a collection in progress).
  void Stop();

  /// The newest frame, or nullptr before the first. Any thread.
  std::shared_ptr<const Frame> Latest() const;
  /// Readable after each publication; the UI polls it. Any thread.
  int wake_fd() const { return wake_.read.get(); }
  /// Empties the wake pipe.
  void DrainWake();

 private:
  void Loop(bool wait_first);
  void Publish(Frame frame);

  Collect collect_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const Frame> latest_;  // guarded by mu_
  bool stop_ = false;                    // guarded by mu_
  uint64_t sequence_ = 0;                // sampler thread (and Start) only
  Pipe wake_;  // non-blocking; the sampler thread wakes the UI
  std::thread thread_;
};

}  // namespace gpuman::tui
