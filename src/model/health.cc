#include "model/health.h"

#include <algorithm>

namespace gpuman::model {

const char* SeverityName(Severity s) { return s == Severity::kFatal ? "fatal" : "warning"; }

bool HealthReport::has_fatal() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::kFatal; });
}

}  // namespace gpuman::model
