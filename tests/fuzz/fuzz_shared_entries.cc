// libFuzzer target: a value the shared tier reads back from Redis, which
// any client of that Redis (or a fault) may have written.
//
// The input is the value under a result's key. It must be refused unless it
// is sealed for that key; an opened payload is unpacked as a sweep's stream
// and parsed as a plan's, a fit's and each sweep message; the input is also
// checked as a graph's bytes against a digest and parsed as a graph. Whatever
// the bytes, the code must refuse or accept: never crash, hang or allocate
// without bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/shared_entries.h"
#include "slackswap/v1/graph.pb.h"
#include "slackswap/v1/planner_service.pb.h"

namespace {

using namespace slackswap;  // NOLINT: a fuzz target, not a library

// The request key the seeds were sealed for (tests/fuzz/corpus).
constexpr absl::string_view kKey = "fuzz-request-key";
// A fleet secret: each value is opened without one and with this one.
constexpr absl::string_view kSecret = "fuzz-fleet-secret-of-32-bytes-at";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view value(reinterpret_cast<const char*>(data), size);
  for (absl::string_view secret : {absl::string_view(), kSecret}) {
    absl::StatusOr<absl::string_view> payload = OpenResult(kKey, value, secret);
    if (!payload.ok()) continue;
    v1::PlanResponse plan;
    plan.ParseFromArray(payload->data(), static_cast<int>(payload->size()));
    v1::FitResponse fit;
    fit.ParseFromArray(payload->data(), static_cast<int>(payload->size()));
    std::vector<absl::string_view> messages;
    if (UnpackMessages(*payload, &messages)) {
      for (absl::string_view m : messages) {
        v1::SweepResponse msg;
        msg.ParseFromArray(m.data(), static_cast<int>(m.size()));
      }
    }
  }
  if (GraphBytesMatch(value, std::string(64, '0'))) return 0;
  v1::OperatorGraph graph;
  graph.ParseFromArray(value.data(), static_cast<int>(value.size()));
  return 0;
}
