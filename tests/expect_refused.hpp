// A call duet must refuse: it throws duet::Error with `status` and a message
// that mentions `mentions`.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "duet/error.hpp"

namespace duet::testing {

template <class Call>
void expect_refused(Call&& call, const char* mentions, Status status = Status::invalid_argument) {
  try {
    call();
    FAIL("accepted a bad call");
  } catch (const Error& e) {
    INFO(std::string(e.what()));
    CHECK(e.status() == status);
    CHECK(std::string(e.what()).find(mentions) != std::string::npos);
  }
}

}  // namespace duet::testing
