// Command-line flags of one subcommand: --name=value, --name value, and
// boolean switches (--json). Unknown flags and stray arguments are errors.
//
//   absl::StatusOr<Flags> f = Flags::Parse(args, {"workload", "budget"},
//                                          {"json"});
//   std::string w = f->Get("workload").value_or("gpt2-xl");
#ifndef SLACKSWAP_CLI_FLAGS_H_
#define SLACKSWAP_CLI_FLAGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace slackswap {

class Flags {
 public:
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const std::set<std::string>& valued,
                                     const std::set<std::string>& switches);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  // INVALID_ARGUMENT naming the flag if the value is not an integer.
  absl::StatusOr<std::optional<int64_t>> GetInt(const std::string& name) const;
  absl::StatusOr<std::optional<double>> GetDouble(
      const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_FLAGS_H_
