#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace slackswap {

std::string VersionLine(absl::string_view program) {
  return absl::StrCat(program, " ", Version(), " (commit ", Commit(), ")\n");
}

}  // namespace slackswap
