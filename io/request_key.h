// Content addresses of requests and graphs: the cache's keys and the graph
// store's names. Both are SHA-256 digests of a canonical form, so requests
// that mean the same get the same key whatever their size or field order:
// unknown fields dropped, deterministic serialization (hashed as it is
// made, never held whole), policy names sorted and deduplicated, and a
// graph named by its digest whether it came inline or by reference
// (StepSpec.graph_sha256).
//
//   std::string hex = GraphDigest(request.mutable_step()->graph_inline());
//   std::string key = PlanRequestKey(request);  // 32 bytes
#ifndef SLACKSWAP_IO_REQUEST_KEY_H_
#define SLACKSWAP_IO_REQUEST_KEY_H_

#include <cstdint>
#include <string>

#include "slackswap/v1/graph.pb.h"
#include "slackswap/v1/planner_service.pb.h"

namespace slackswap {

// Lower-case hex SHA-256 of the graph's canonical bytes (unknown fields
// dropped, from `graph` too; then the deterministic serialization): what
// PutGraph returns and StepSpec.graph_sha256 names. The bytes are hashed as
// they are serialized, never held whole; `canonical_bytes`, if set, gets
// their count.
std::string GraphDigest(v1::OperatorGraph& graph,
                        int64_t* canonical_bytes = nullptr);

// The plan cache's key (32 raw bytes). Unknown fields do not count, except
// inside an inline graph: dropping those would visit (and allocate for)
// each of a million messages for a request that may be refused anyway, so
// such a graph is its own question (a cache miss, never a wrong answer).
// `req` is left as it was (its graph is set aside and put back, not
// copied).
std::string PlanRequestKey(v1::PlanRequest& req);

// The key of a Fit request's answer (32 raw bytes), for the shared tier:
// its deterministic serialization with unknown fields dropped (from `req`
// too), hashed as it is made. Fields in another order, or a graph inline
// instead of by digest, make another key: a miss, never a wrong answer.
std::string FitRequestKey(v1::FitRequest& req);
// The same for a Sweep.
std::string SweepRequestKey(v1::SweepRequest& req);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_REQUEST_KEY_H_
