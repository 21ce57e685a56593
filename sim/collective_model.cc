#include "sim/collective_model.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/saturating.h"
#include "model/hardware.h"

namespace slackswap {
namespace {

CollectiveAlgorithm Modeled(CollectiveKind kind,
                            CollectiveAlgorithm algorithm) {
  // NCCL builds trees for all-reduce only.
  return kind == CollectiveKind::kAllReduce ? algorithm
                                            : CollectiveAlgorithm::kRing;
}

// ceil(k x bytes / n) without overflow, saturating. REQUIRES: 0 <= k <
// 2n, bytes >= 0, n >= 1.
int64_t ScaledCeil(int64_t bytes, int64_t k, int64_t n) {
  const int64_t q = bytes / n;
  // k x r < 2n x n <= 2^63 for any int32 n: exact.
  const int64_t kr = k * (bytes % n);
  return SaturatingAdd(SaturatingMul(k, q), kr / n + (kr % n != 0 ? 1 : 0));
}

int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

int64_t CeilLog2(int64_t n) {
  int64_t bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

// NCCL's binary tree over ranks 0..n-1 rooted at 0 (its ncclGetBtree;
// docs/SIMULATOR.md names the source), in which the odd ranks are leaves.
// With b the lowest set bit of r, r's parent is r with b cleared and the
// next bit up set, or with b cleared alone when that is out of range.
int32_t BtreeParent(int64_t r, int64_t n) {
  if (r == 0) return -1;
  const int64_t b = r & -r;
  const int64_t up = (r ^ b) | (b << 1);
  return static_cast<int32_t>(up < n ? up : r ^ b);
}

// The number of children of r: the root has one (the highest power of two
// below n); r with lowest set bit b has r - b/2 and r + p for the largest
// power of two p <= b/2 with r + p < n, if any; odd ranks have none.
int32_t BtreeChildren(int64_t r, int64_t n) {
  if (r == 0) return n > 1 ? 1 : 0;
  const int64_t low = (r & -r) >> 1;
  if (low == 0) return 0;
  for (int64_t p = low; p > 0; p >>= 1) {
    if (r + p < n) return 2;
  }
  return 1;
}

// Where rank r sits in the binary tree that tree `t` of the double binary
// tree is built from: the first tree is the binary tree itself; the second
// mirrors it (n even) or shifts it by one rank (n odd), so that a rank
// interior in one tree is a leaf in the other.
int64_t BtreePosition(int32_t t, int64_t r, int64_t n) {
  if (t == 0) return r;
  return n % 2 == 1 ? (r - 1 + n) % n : n - 1 - r;
}

int64_t RankFromPosition(int32_t t, int64_t pos, int64_t n) {
  if (t == 0) return pos;
  return n % 2 == 1 ? (pos + 1) % n : n - 1 - pos;
}

// The bytes each tree carries: the first takes the odd byte.
int64_t TreeHalf(int32_t t, int64_t bytes) {
  return t == 0 ? bytes - bytes / 2 : bytes / 2;
}

// A tree all-reduce's most bytes per rank: every tree edge carries its
// half both ways, so a rank sends (and receives) its half once per edge.
int64_t TreeWireBytes(int64_t bytes, int64_t n) {
  int64_t most = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t load = 0;
    for (int32_t t = 0; t < 2; ++t) {
      const int64_t pos = BtreePosition(t, r, n);
      const int64_t edges =
          BtreeChildren(pos, n) + (BtreeParent(pos, n) >= 0 ? 1 : 0);
      load = SaturatingAdd(load, SaturatingMul(edges, TreeHalf(t, bytes)));
    }
    most = std::max(most, load);
  }
  return most;
}

void AddFlow(int64_t src, int64_t dst, int64_t bytes,
             std::vector<CollectiveFlow>& flows) {
  if (bytes == 0) return;
  flows.push_back(
      {static_cast<int32_t>(src), static_cast<int32_t>(dst), bytes});
}

}  // namespace

int64_t CollectiveSteps(CollectiveKind kind, CollectiveAlgorithm algorithm,
                        int32_t n) {
  if (n <= 1) return 0;
  const int64_t ranks = n;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (Modeled(kind, algorithm) == CollectiveAlgorithm::kTree) {
        return 2 * CeilLog2(ranks);
      }
      return 2 * (ranks - 1);
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return ranks - 1;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      return 1;
  }
  return 0;
}

int64_t CollectiveWireBytes(CollectiveKind kind, CollectiveAlgorithm algorithm,
                            int64_t bytes, int32_t n) {
  if (n <= 1) return 0;
  const int64_t ranks = n;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (Modeled(kind, algorithm) == CollectiveAlgorithm::kTree) {
        return TreeWireBytes(bytes, ranks);
      }
      return ScaledCeil(bytes, 2 * (ranks - 1), ranks);
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return ScaledCeil(bytes, ranks - 1, ranks);
    case CollectiveKind::kAllToAll:
      return SaturatingMul(CeilDiv(bytes, ranks), ranks - 1);
    case CollectiveKind::kSendRecv:
      return bytes;
  }
  return 0;
}

CollectivePlan PlanCollective(CollectiveKind kind,
                              CollectiveAlgorithm algorithm, int64_t bytes,
                              int32_t n) {
  CollectivePlan plan;
  plan.algorithm = Modeled(kind, algorithm);
  plan.steps = CollectiveSteps(kind, algorithm, n);
  plan.wire_bytes = CollectiveWireBytes(kind, algorithm, bytes, n);
  if (n <= 1) return plan;
  const int64_t ranks = n;
  std::vector<CollectiveFlow>& flows = plan.flows;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      if (plan.algorithm == CollectiveAlgorithm::kTree) {
        flows.reserve(static_cast<size_t>(4 * (ranks - 1)));
        for (int32_t t = 0; t < 2; ++t) {
          const int64_t half = TreeHalf(t, bytes);
          for (int64_t r = 0; r < ranks; ++r) {
            const int32_t up = BtreeParent(BtreePosition(t, r, ranks), ranks);
            if (up < 0) continue;
            const int64_t parent = RankFromPosition(t, up, ranks);
            AddFlow(r, parent, half, flows);  // reduce
            AddFlow(parent, r, half, flows);  // broadcast
          }
        }
      } else {
        flows.reserve(static_cast<size_t>(ranks));
        for (int64_t r = 0; r < ranks; ++r) {
          AddFlow(r, (r + 1) % ranks, plan.wire_bytes, flows);
        }
      }
      break;
    case CollectiveKind::kAllToAll: {
      const int64_t chunk = CeilDiv(bytes, ranks);
      flows.reserve(static_cast<size_t>(ranks * (ranks - 1)));
      for (int64_t src = 0; src < ranks; ++src) {
        for (int64_t dst = 0; dst < ranks; ++dst) {
          if (src != dst) AddFlow(src, dst, chunk, flows);
        }
      }
      break;
    }
    case CollectiveKind::kSendRecv:
      AddFlow(0, 1, bytes, flows);
      break;
  }
  return plan;
}

int64_t CollectiveTimeNs(CollectiveKind kind, CollectiveAlgorithm algorithm,
                         int64_t bytes, int32_t n, double link_bytes_per_ns,
                         int64_t hop_latency_ns) {
  const int64_t latency =
      SaturatingMul(hop_latency_ns, CollectiveSteps(kind, algorithm, n));
  const int64_t wire = CollectiveWireBytes(kind, algorithm, bytes, n);
  return SaturatingAdd(latency,
                       CopyNs(static_cast<double>(wire), link_bytes_per_ns));
}

}  // namespace slackswap
