// How a collective moves data, as the node simulator models it: the flows
// (which rank sends how many bytes to which) that it moves over the node's
// links (sim/flow_network.h), and the latency hops it waits.
//
//   CollectivePlan p = PlanCollective(CollectiveKind::kAllReduce,
//                                     CollectiveAlgorithm::kRing,
//                                     /*bytes=*/800, /*n=*/4);
//   // p.flows: 0->1, 1->2, 2->3, 3->0, 1200 bytes each; p.steps = 6
//   int64_t ns = CollectiveTimeNs(CollectiveKind::kAllReduce,
//                                 CollectiveAlgorithm::kRing, 800, 4,
//                                 /*link_bytes_per_ns=*/10,
//                                 /*hop_latency_ns=*/100);
//   // 6 x 100 + 1200 / 10 = 720
//
// The model (docs/SIMULATOR.md, "Collectives: the model"): ranks are
// 0..n-1 in group order. `bytes` is the buffer as PyTorch and NCCL count it:
// all-reduce, the tensor; all-gather, the gathered output; reduce-scatter,
// the input before scattering; all-to-all, each rank's send buffer;
// send/receive, the message.
//  - Ring (all-reduce, all-gather, reduce-scatter): rank r sends to
//    (r + 1) mod n one flow of ceil(f x bytes) bytes, f = 2(n-1)/n for
//    all-reduce and (n-1)/n for the others, after 2(n-1) or n-1 latency
//    hops. f is nccl-tests' bus-bandwidth factor (docs/SIMULATOR.md names
//    the source): the least a rank can send.
//  - Tree (all-reduce only; NCCL runs the other kinds as rings, and so does
//    the model): NCCL's double binary tree (docs/SIMULATOR.md names the
//    source). The tensor is split in two halves (the first
//    ceil(bytes / 2)), each reduced up one tree and broadcast back down it,
//    pipelined: every tree edge carries its half both ways at once. A rank
//    interior in one tree is a leaf in the other: it has at most four tree
//    edges in all, so it sends and receives at most 4 x ceil(bytes / 2),
//    about 2 x bytes. 2 x ceil(log2 n) latency hops (each tree is that
//    deep: up, then down).
//  - All-to-all: every rank sends ceil(bytes / n) to each of the n - 1
//    others at once; one latency hop.
//  - Send/receive: rank 0 sends `bytes` to rank 1 (the other ranks of a
//    larger group take no part); one latency hop.
// n = 1 is a no-op: no flows, no hops, no bytes. Flows of zero bytes are
// left out (a zero-byte collective still pays its hops). Byte counts
// saturate at INT64_MAX instead of overflowing.
//
// The latency is paid before the bytes move (a collective's hops are not
// spread through its transfer): simple, and exact for the large buffers
// whose bandwidth matters.
#ifndef SLACKSWAP_SIM_COLLECTIVE_MODEL_H_
#define SLACKSWAP_SIM_COLLECTIVE_MODEL_H_

#include <cstdint>
#include <vector>

#include "model/graph.h"

namespace slackswap {

// CollectiveKind and CollectiveAlgorithm: model/graph.h (ops carry them).

struct CollectiveFlow {
  int32_t src = 0;  // ranks, 0..n-1
  int32_t dst = 0;
  int64_t bytes = 0;
};

struct CollectivePlan {
  // The algorithm modeled: kRing for every kind but all-reduce, whatever
  // was asked.
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  // Ring: by sender. Tree: the first tree's edges by child rank (child to
  // parent, then parent to child), then the second tree's. All-to-all: by
  // sender, then receiver. All move at once.
  std::vector<CollectiveFlow> flows;
  // Latency hops, paid in sequence before the flows move.
  int64_t steps = 0;
  // The most bytes one rank sends or receives: on links of one rate per
  // rank and direction, the bytes that set the collective's transfer time.
  int64_t wire_bytes = 0;
};

// REQUIRES: bytes >= 0, n >= 1.
CollectivePlan PlanCollective(CollectiveKind kind,
                              CollectiveAlgorithm algorithm, int64_t bytes,
                              int32_t n);

// PlanCollective's wire_bytes and steps, without building the flows (O(1),
// O(n) for a tree). REQUIRES: bytes >= 0, n >= 1.
int64_t CollectiveWireBytes(CollectiveKind kind, CollectiveAlgorithm algorithm,
                            int64_t bytes, int32_t n);
int64_t CollectiveSteps(CollectiveKind kind, CollectiveAlgorithm algorithm,
                        int32_t n);

// The collective alone, each rank with a link of `link_bytes_per_ns` each
// way: hop_latency_ns x steps + CopyNs(wire_bytes, link_bytes_per_ns)
// (model/hardware.h), saturating at INT64_MAX. A ring all-reduce takes
// 2(n-1) x latency + 2(n-1)/n x bytes / bandwidth.
// REQUIRES: bytes >= 0, n >= 1, link_bytes_per_ns > 0, hop_latency_ns >= 0.
int64_t CollectiveTimeNs(CollectiveKind kind, CollectiveAlgorithm algorithm,
                         int64_t bytes, int32_t n, double link_bytes_per_ns,
                         int64_t hop_latency_ns);

}  // namespace slackswap

#endif  // SLACKSWAP_SIM_COLLECTIVE_MODEL_H_
