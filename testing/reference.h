// Test-only access to ../shared/reference/reference.json, parsed into a
// google.protobuf.Struct (the product never reads this file).
//
//   const google::protobuf::Struct& ref = Reference();
//   double x = Number(ref, {"models", "gpt2-xl", "config", "L"});
#ifndef SLACKSWAP_TESTING_REFERENCE_H_
#define SLACKSWAP_TESTING_REFERENCE_H_

#include <initializer_list>
#include <string>

#include "google/protobuf/struct.pb.h"

namespace slackswap::testing {

// The parsed reference; aborts the test binary if the file is unreadable.
const google::protobuf::Struct& Reference();

// Walks object keys; aborts with the path if a key is missing.
const google::protobuf::Value& At(const google::protobuf::Struct& s,
                                  std::initializer_list<std::string> path);
double Number(const google::protobuf::Struct& s,
              std::initializer_list<std::string> path);

}  // namespace slackswap::testing

#endif  // SLACKSWAP_TESTING_REFERENCE_H_
