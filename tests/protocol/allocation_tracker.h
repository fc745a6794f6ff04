// Records the largest single operator-new request while tracking is on, so tests can show
// that an attacker-chosen length is never used to size an allocation. The replacement
// operator new lives in allocation_tracker_test.cc (its own translation unit, so the
// compiler never inlines new/delete pairs across the replacement). Not thread-safe by
// intent: one test at a time turns it on.
#pragma once

#include <cstddef>

namespace gpuman::protocol::testing_alloc {

void StartTracking();
/// Stops tracking; returns the largest single allocation since StartTracking().
std::size_t StopTracking();

}  // namespace gpuman::protocol::testing_alloc
