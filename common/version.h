// The version of this build: the semantic version from the VERSION file and
// the git commit it was built from, both set by CMake (cmake/version.cmake).
// One source for `slackswap --version`, `slackswapd --version`, the
// slackswap_build_info metric and the ServerInfo call.
//
//   std::cout << VersionLine("slackswap");  // "slackswap 0.2.0 (commit
//   1a2b3c)"
#ifndef SLACKSWAP_COMMON_VERSION_H_
#define SLACKSWAP_COMMON_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace slackswap {

// "0.2.0".
const char* Version();
// A short git commit, with "-dirty" when built from uncommitted changes;
// "unknown" when built outside a git checkout without SLACKSWAP_COMMIT.
const char* Commit();

// "PROGRAM VERSION (commit COMMIT)\n".
std::string VersionLine(absl::string_view program);

}  // namespace slackswap

#endif  // SLACKSWAP_COMMON_VERSION_H_
