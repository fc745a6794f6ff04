// The replacement allocation functions behind allocation_tracker.h. No tests here: any
// use of new in this file would let the compiler pair the replacement with its inlined
// delete and warn.
#include "allocation_tracker.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_tracking{false};
std::atomic<std::size_t> g_largest{0};
}  // namespace

// Replacing the global allocation functions is allowed in a program; these only forward
// to malloc/free and note the size.
void* operator new(std::size_t size) {
  if (g_tracking.load(std::memory_order_relaxed)) {
    std::size_t prev = g_largest.load(std::memory_order_relaxed);
    while (size > prev && !g_largest.compare_exchange_weak(prev, size)) {
    }
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace gpuman::protocol::testing_alloc {

void StartTracking() {
  g_largest = 0;
  g_tracking = true;
}

std::size_t StopTracking() {
  g_tracking = false;
  return g_largest.load();
}

}  // namespace gpuman::protocol::testing_alloc
