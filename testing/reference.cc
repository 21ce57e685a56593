#include "testing/reference.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "google/protobuf/util/json_util.h"

namespace slackswap::testutil {

std::string ReferencePath() {
  const char* env = std::getenv("SLACKSWAP_REFERENCE_JSON");
  return env != nullptr && *env != '\0' ? env : SLACKSWAP_REFERENCE_JSON;
}

bool HaveReference() { return std::ifstream(ReferencePath()).good(); }

const google::protobuf::Struct& Reference() {
  static const google::protobuf::Struct* ref = [] {
    const std::string path = ReferencePath();
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      std::abort();
    }
    std::stringstream text;
    text << in.rdbuf();
    auto* s = new google::protobuf::Struct;
    auto status = google::protobuf::util::JsonStringToMessage(text.str(), s);
    if (!status.ok()) {
      std::fprintf(stderr, "cannot parse %s: %s\n", path.c_str(),
                   status.ToString().c_str());
      std::abort();
    }
    return s;
  }();
  return *ref;
}

const google::protobuf::Value& At(const google::protobuf::Struct& s,
                                  std::initializer_list<std::string> path) {
  const google::protobuf::Struct* cur = &s;
  const google::protobuf::Value* v = nullptr;
  std::string walked;
  for (const std::string& key : path) {
    walked += "/" + key;
    if (cur == nullptr) {
      std::fprintf(stderr, "reference.json: %s is not an object\n",
                   walked.c_str());
      std::abort();
    }
    auto it = cur->fields().find(key);
    if (it == cur->fields().end()) {
      std::fprintf(stderr, "reference.json: no %s\n", walked.c_str());
      std::abort();
    }
    v = &it->second;
    cur = v->has_struct_value() ? &v->struct_value() : nullptr;
  }
  return *v;
}

double Number(const google::protobuf::Struct& s,
              std::initializer_list<std::string> path) {
  return At(s, path).number_value();
}

Hardware FrozenCostModel(Hardware hw) {
  hw.attention_efficiency.clear();
  hw.gemm_efficiency = {};
  return hw;
}

}  // namespace slackswap::testutil
