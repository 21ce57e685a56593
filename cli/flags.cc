#include "cli/flags.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace slackswap {

FlagSpecs Concat(std::initializer_list<FlagSpecs> groups) {
  FlagSpecs out;
  for (const FlagSpecs& g : groups) out.insert(out.end(), g.begin(), g.end());
  return out;
}

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                                   const FlagSpecs& specs, int max_positional) {
  auto find = [&specs](const std::string& name) -> const FlagSpec* {
    for (const FlagSpec& s : specs) {
      if (s.name == name) return &s;
    }
    return nullptr;
  };
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      if (!absl::StartsWith(arg, "-") &&
          static_cast<int>(flags.positional_.size()) < max_positional) {
        flags.positional_.push_back(arg);
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = find(name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (spec->is_switch()) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " takes no value"));
      }
      flags.values_[name] = "true";
      continue;
    }
    if (!value.has_value()) {
      if (i + 1 == args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (flags.values_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " given twice"));
    }
    flags.values_[name] = *value;
  }
  return flags;
}

std::optional<std::string> Flags::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::optional<int64_t>> Flags::GetInt(
    const std::string& name) const {
  std::optional<std::string> v = Get(name);
  if (!v.has_value()) return std::optional<int64_t>();
  int64_t out = 0;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be an integer, got '", *v, "'"));
  }
  return std::optional<int64_t>(out);
}

absl::StatusOr<std::optional<double>> Flags::GetDouble(
    const std::string& name) const {
  std::optional<std::string> v = Get(name);
  if (!v.has_value()) return std::optional<double>();
  double out = 0;
  if (!absl::SimpleAtod(*v, &out) || !std::isfinite(out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " must be a number, got '", *v, "'"));
  }
  return std::optional<double>(out);
}

}  // namespace slackswap
