// Test-only access to ../shared/reference/reference.json, parsed into a
// google.protobuf.Struct (the product never reads this file). The file sits
// beside the checkout, not in it: tests that need it skip, saying so, when it
// is absent.
//
//   TEST(Foo, MatchesTheReference) {
//     SLACKSWAP_SKIP_WITHOUT_REFERENCE();
//     const google::protobuf::Struct& ref = Reference();
//     double x = Number(ref, {"models", "gpt2-xl", "config", "L"});
//   }
#ifndef SLACKSWAP_TESTING_REFERENCE_H_
#define SLACKSWAP_TESTING_REFERENCE_H_

#include <initializer_list>
#include <string>

#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"
#include "model/hardware.h"

namespace slackswap::testutil {

// Where the reference is read from: $SLACKSWAP_REFERENCE_JSON when set, else
// the path CMake was given (-DSLACKSWAP_REFERENCE_JSON).
std::string ReferencePath();
// Whether that file exists.
bool HaveReference();

// The parsed reference; aborts the test binary if the file is unreadable
// (a test that reads it starts with SLACKSWAP_SKIP_WITHOUT_REFERENCE).
const google::protobuf::Struct& Reference();

// Walks object keys; aborts with the path if a key is missing.
const google::protobuf::Value& At(const google::protobuf::Struct& s,
                                  std::initializer_list<std::string> path);
double Number(const google::protobuf::Struct& s,
              std::initializer_list<std::string> path);

// `hw` as the frozen reference costs ops: its constant efficiencies alone,
// without the catalog's shape tables (model/efficiency.h).
Hardware FrozenCostModel(Hardware hw);

}  // namespace slackswap::testutil

// Skips the calling test (or fixture SetUp) when the reference is absent.
#define SLACKSWAP_SKIP_WITHOUT_REFERENCE()                        \
  if (!::slackswap::testutil::HaveReference())                    \
  GTEST_SKIP() << "reference data absent: "                       \
               << ::slackswap::testutil::ReferencePath()          \
               << " (shared/reference/ beside the checkout; set " \
                  "-DSLACKSWAP_REFERENCE_JSON or $SLACKSWAP_REFERENCE_JSON)"

#endif  // SLACKSWAP_TESTING_REFERENCE_H_
