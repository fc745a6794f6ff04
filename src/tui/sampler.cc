#include "tui/sampler.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuman::tui {

Sampler::Sampler(Collect collect, std::chrono::milliseconds interval)
    : collect_(std::move(collect)), interval_(std::max(interval, std::chrono::milliseconds(10))) {}

Sampler::~Sampler() {
  Stop();
}

Status Sampler::Start(std::shared_ptr<const Frame> first) {
  auto wake = MakePipe(O_NONBLOCK);
  if (!wake) return MakeError(ErrorCode::kInternal, "sampler wake " + wake.error().message);
  wake_ = std::move(*wake);
  const bool have_first = first != nullptr;
  if (first) {
    auto copy = std::make_shared<Frame>(*first);
    copy->sequence = ++sequence_;
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = std::move(copy);
  }
  // The new thread inherits this mask: terminal signals go to the UI thread instead.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGWINCH);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  thread_ = std::thread([this, have_first] { Loop(have_first); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return {};
}

void Sampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const Frame> Sampler::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Sampler::DrainWake() {
  char buf[64];
  while (wake_.read && read(wake_.read.get(), buf, sizeof buf) > 0) {
  }
}

void Sampler::Publish(Frame frame) {
  frame.sequence = ++sequence_;
  auto published = std::make_shared<const Frame>(std::move(frame));
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = std::move(published);
  }
  const char byte = 1;
  // A full pipe already says "something new"; nothing to do on EAGAIN.
  [[maybe_unused]] ssize_t n = write(wake_.write.get(), &byte, 1);
}

void Sampler::Loop(bool wait_first) {
  auto next = std::chrono::steady_clock::now();
  if (wait_first) next += interval_;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_until(lock, next, [this] { return stop_; })) return;
    }
    next = std::chrono::steady_clock::now() + interval_;
    Frame frame = collect_();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
    }
    Publish(std::move(frame));
    // A collection slower than the interval starts the next one at once, never a backlog.
    next = std::max(next, std::chrono::steady_clock::now());
  }
}

}  // namespace gpuman::tui
