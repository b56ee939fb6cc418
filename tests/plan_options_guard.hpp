// A test's guard over the planner's process-wide switches.
#pragma once

#include "duet/softmax.hpp"

namespace duet::testing {

// The planner's options as they were, set again when it goes out of scope
// (a test that changes them leaves the next test the process's own).
struct RestorePlanOptions {
  PlanOptions saved = plan_options();
  ~RestorePlanOptions() { set_plan_options(saved); }
};

}  // namespace duet::testing
