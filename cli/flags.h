// Command-line flags of one subcommand, declared once (FlagSpec) for both
// parsing and help: --name=value, --name value, and switches (--json).
// Unknown flags and stray arguments are errors.
//
//   const FlagSpecs specs = {{"workload", "NAME", "a built-in workload"},
//                            {"json", "", "print JSON"}};
//   absl::StatusOr<Flags> f = Flags::Parse(args, specs);
//   std::string w = f->Get("workload").value_or("gpt2-xl");
#ifndef SLACKSWAP_CLI_FLAGS_H_
#define SLACKSWAP_CLI_FLAGS_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace slackswap {

struct FlagSpec {
  std::string name;
  // What the value is, for help ("NAME|FILE", "B"); empty for a switch.
  std::string value;
  std::string help;
  // The default, as help shows it; empty when there is none.
  std::string default_text;

  bool is_switch() const { return value.empty(); }
};
using FlagSpecs = std::vector<FlagSpec>;

// The groups, in order.
FlagSpecs Concat(std::initializer_list<FlagSpecs> groups);

class Flags {
 public:
  // Up to `max_positional` plain arguments are kept (Positional()); more are
  // errors.
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const FlagSpecs& specs,
                                     int max_positional = 0);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  // INVALID_ARGUMENT naming the flag if the value is not an integer.
  absl::StatusOr<std::optional<int64_t>> GetInt(const std::string& name) const;
  absl::StatusOr<std::optional<double>> GetDouble(
      const std::string& name) const;
  const std::vector<std::string>& Positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace slackswap

#endif  // SLACKSWAP_CLI_FLAGS_H_
