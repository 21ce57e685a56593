#include "sim/node_simulator.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/format.h"
#include "common/saturating.h"
#include "common/status_macros.h"
#include "common/stop.h"
#include "sim/collective_model.h"
#include "sim/flow_network.h"
#include "sim/internal/rank_run.h"
#include "sim/link_load_recorder.h"

namespace slackswap {
namespace {

LinkCapacity Capacity(const LinkRates& r) {
  return {.h2d = r.h2d_gbps,
          .d2h = r.d2h_gbps,
          .both_h2d = r.bidir_h2d_gbps,
          .both_d2h = r.bidir_d2h_gbps};
}

LinkCapacity GpuLink(const Hardware& hw) {
  return {.h2d = hw.h2d_gbps,
          .d2h = hw.d2h_gbps,
          .both_h2d = hw.bidir_h2d_gbps,
          .both_d2h = hw.bidir_d2h_gbps};
}

LinkDir DirOf(int stream) {
  return stream == kD2HStream ? LinkDir::kD2H : LinkDir::kH2D;
}

// The node's links, and each rank's copies and each running collective's
// transfers as flows on them. A flow's rate is set on its copy whenever it
// may have changed: every flow the network says was touched whose rate
// differs from the one its copy has, and always the other direction of the
// same rank, whose rate the single-GPU simulator also resets at every start
// and end of a copy (so that one rank alone reproduces it bit for bit).
// Recording the links' load (record_load) reads those rates and changes
// none of them.
class NodeLinks final : public SharedLinks {
 public:
  NodeLinks(const Node& node, absl::Span<const RankStep> ranks,
            bool collectives, bool record_load)
      : node_(node), ranks_(ranks) {
    gpu_link_.assign(node.num_gpus, kNone);
    for (const RankStep& r : ranks) {
      gpu_link_[r.gpu] =
          AddLink(absl::StrCat("GPU ", r.gpu, " link"), GpuLink(node.gpu));
    }
    // Only the links some rank's transfers cross, each switch's and
    // socket's in index order.
    std::vector<bool> switch_used(node.switches.size(), false);
    std::vector<bool> socket_used(node.sockets.size(), false);
    for (const RankStep& r : ranks) {
      switch_used[node.SwitchOf(r.gpu)] = true;
      socket_used[node.SocketOf(r.gpu)] = true;
    }
    uplink_.assign(node.switches.size(), kNone);
    for (size_t sw = 0; sw < uplink_.size(); ++sw) {
      if (!switch_used[sw]) continue;
      uplink_[sw] =
          AddLink(absl::StrCat("switch ", node.switches[sw].name, " uplink"),
                  Capacity(node.switches[sw].uplink));
    }
    std::vector<int32_t> memory(node.sockets.size(), kNone);
    for (size_t s = 0; s < memory.size(); ++s) {
      if (!socket_used[s]) continue;
      memory[s] =
          AddLink(absl::StrCat("socket ", node.sockets[s].name, " memory"),
                  Capacity(node.sockets[s].memory));
    }
    if (collectives) AddPeerLinks(socket_used);
    // A link that carries everything that can ever cross it at full speed
    // never limits a flow: its flows leave it out of the network (the same
    // max-min rates, with fewer flows tied together to recompute), and it
    // is still counted. Only host copies cross the sockets' memory, and
    // the uplinks when no collective crosses the switches.
    std::vector<std::array<double, 2>> demand(caps_.size(), {0, 0});
    const bool peers_on_pcie = collectives && node.nvlink_gbps <= 0;
    paths_.resize(ranks.size());
    counted_paths_.resize(ranks.size());
    flow_of_.assign(ranks.size(), {kNone, kNone});
    for (size_t i = 0; i < ranks.size(); ++i) {
      const int32_t sw = node.SwitchOf(ranks[i].gpu);
      const int32_t socket = node.switches[sw].socket;
      for (int stream : {kD2HStream, kH2DStream}) {
        const LinkDir dir = DirOf(stream);
        counted_paths_[i][stream] = {{gpu_link_[ranks[i].gpu], dir},
                                     {uplink_[sw], dir},
                                     {memory[socket], dir}};
        if (stream == kD2HStream) {
          for (const Hop& hop : counted_paths_[i][stream]) {
            usage_[hop.link].ranks.push_back(static_cast<int32_t>(i));
          }
        }
        for (const Hop& hop : counted_paths_[i][stream]) {
          demand[hop.link][stream] +=
              OneWay(caps_[gpu_link_[ranks[i].gpu]], dir);
        }
      }
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
      for (int stream : {kD2HStream, kH2DStream}) {
        for (const Hop& hop : counted_paths_[i][stream]) {
          const bool shared_with_peers = peers_on_pcie &&
                                         hop.link != gpu_link_[ranks[i].gpu] &&
                                         IsUplink(hop.link);
          if (hop.link == gpu_link_[ranks[i].gpu] || shared_with_peers ||
              Slowest(caps_[hop.link], hop.dir) < demand[hop.link][stream]) {
            paths_[i][stream].push_back(hop);
          }
        }
      }
    }
    if (record_load) recorder_.emplace(net_.num_links());
  }

  // REQUIRES: called once, before the first copy starts.
  void Bind(std::vector<std::unique_ptr<RankRun>>* runs) { runs_ = runs; }

  void Started(int32_t rank, int stream, int64_t now) override {
    const int32_t flow = net_.StartFlow(paths_[rank][stream]);
    Own(flow, {.rank = rank, .stream = stream});
    if (recorder_.has_value()) Record(flow);
    flow_of_[rank][stream] = flow;
    // The new copy's rate is set whatever it is.
    Update(rank, now, /*started=*/flow);
  }

  void Finished(int32_t rank, int stream, int64_t bytes, int64_t now) override {
    const int32_t flow = flow_of_[rank][stream];
    flow_of_[rank][stream] = kNone;
    owner_[flow] = Owner();
    Count(counted_paths_[rank][stream], bytes);
    if (recorder_.has_value()) {
      recorder_->SetRate(recorded_[flow].id, counted_paths_[rank][stream], now,
                         0);
    }
    net_.EndFlow(flow);
    Update(rank, now, /*started=*/kNone);
  }

  // Starts collective `op` of ranks[group[0]]'s graph on every rank of its
  // group: its latency, then its transfers (collective_model.h) as flows
  // between the group's GPUs.
  void StartCollective(const Collective& c, int64_t now) {
    Running& run = running_.emplace_back();
    run.members = c.group;
    const CollectivePlan plan = PlanCollective(
        c.kind, c.algorithm, c.bytes, static_cast<int32_t>(c.group.size()));
    // A group of one moves nothing and waits for no one: no latency.
    const int64_t latency =
        c.group.size() == 1
            ? 0
            : SaturatingAdd(
                  node_.collective_base_latency_ns,
                  SaturatingMul(plan.steps, node_.collective_hop_latency_ns));
    run.data_start = SaturatingAdd(now, latency);
    const int32_t slot = static_cast<int32_t>(running_.size()) - 1;
    for (const CollectiveFlow& f : plan.flows) {
      Copy copy;
      copy.tensor = 0;  // active
      copy.start = now;
      copy.data_start = run.data_start;
      copy.bytes_left = static_cast<double>(f.bytes);
      copy.updated = now;
      run.copies.push_back(copy);
      run.bytes.push_back(f.bytes);
      run.paths.push_back(
          PeerPath(ranks_[c.group[f.src]].gpu, ranks_[c.group[f.dst]].gpu));
    }
    run.flows.assign(plan.flows.size(), kNone);
    run.left = static_cast<int32_t>(plan.flows.size());
    for (size_t i = 0; i < run.flows.size(); ++i) {
      // Re-read: Update may not move `running_`, but keep no reference
      // across the network's calls all the same.
      const int32_t flow = net_.StartFlow(running_[slot].paths[i]);
      running_[slot].flows[i] = flow;
      Own(flow, {.collective = slot, .index = static_cast<int32_t>(i)});
      if (recorder_.has_value()) Record(flow);
      Update(kNone, now, flow);
    }
  }

  // When the next running collective's transfer (or latency, for one that
  // moves nothing) ends; kNeverNs when none runs.
  int64_t NextCollectiveEvent() const {
    int64_t next = kNeverNs;
    for (const Running& run : running_) {
      if (run.left == 0) {
        next = std::min(next, run.data_start);
        continue;
      }
      for (const Copy& c : run.copies) {
        if (c.active()) next = std::min(next, c.finish);
      }
    }
    return next;
  }

  // Ends the transfers that end at `now`; calls done(members) for each
  // collective that is then complete, in start order.
  template <typename Done>
  void FinishCollectivesAt(int64_t now, const Done& done) {
    for (size_t slot = 0; slot < running_.size(); ++slot) {
      for (size_t i = 0; i < running_[slot].copies.size(); ++i) {
        Running& run = running_[slot];
        if (!run.copies[i].active() || run.copies[i].finish != now) continue;
        run.copies[i] = Copy();
        --run.left;
        const int32_t flow = run.flows[i];
        run.flows[i] = kNone;
        owner_[flow] = Owner();
        Count(run.paths[i], run.bytes[i]);
        if (recorder_.has_value()) {
          recorder_->SetRate(recorded_[flow].id, run.paths[i], now, 0);
        }
        net_.EndFlow(flow);
        Update(kNone, now, kNone);
      }
    }
    size_t kept = 0;
    for (size_t slot = 0; slot < running_.size(); ++slot) {
      Running& run = running_[slot];
      if (run.left == 0 && run.data_start <= now) {
        done(run.members);
        continue;
      }
      if (kept != slot) Rebind(slot, kept);
      ++kept;
    }
    running_.resize(kept);
  }

  bool collective_running() const { return !running_.empty(); }

  // The step ended at `now`: the flows still in flight (an infeasible
  // step's) stop loading the links there.
  void EndRecording(int64_t now) {
    if (!recorder_.has_value()) return;
    for (size_t f = 0; f < owner_.size(); ++f) {
      const Owner& o = owner_[f];
      if (o.rank == kNone && o.collective == kNone) continue;
      recorder_->SetRate(recorded_[f].id, CountedPath(o),
                         std::max(now, CopyOf(o).data_start), 0);
    }
  }

  // Usage over a step of `step_ns`, with each link's load over it (at most
  // `max_points` points, 0: every change) when recorded.
  std::vector<LinkUsage> Usage(int64_t step_ns, int32_t max_points) const {
    std::vector<LinkUsage> out = usage_;
    for (size_t l = 0; l < out.size(); ++l) {
      out[l].h2d_utilization =
          Utilization(out[l].h2d_bytes, caps_[l].h2d, step_ns);
      out[l].d2h_utilization =
          Utilization(out[l].d2h_bytes, caps_[l].d2h, step_ns);
      if (recorder_.has_value()) {
        out[l].load = recorder_->Series(static_cast<int32_t>(l), max_points);
      }
    }
    return out;
  }

 private:
  // A flow's copy: a rank's (rank, stream), or a running collective's
  // (collective, index).
  struct Owner {
    int32_t rank = kNone;
    int stream = 0;
    int32_t collective = kNone;
    int32_t index = 0;
  };

  struct Running {
    std::vector<int32_t> members;
    int64_t data_start = 0;
    std::vector<Copy> copies;
    std::vector<int64_t> bytes;
    std::vector<std::vector<Hop>> paths;
    std::vector<int32_t> flows;  // kNone once done
    int32_t left = 0;
  };

  static double OneWay(const LinkCapacity& c, LinkDir dir) {
    return dir == LinkDir::kH2D ? c.h2d : c.d2h;
  }
  // The least a direction gives: alone or while the other is busy.
  static double Slowest(const LinkCapacity& c, LinkDir dir) {
    return dir == LinkDir::kH2D ? std::min(c.h2d, c.both_h2d)
                                : std::min(c.d2h, c.both_d2h);
  }
  bool IsUplink(int32_t link) const {
    return std::find(uplink_.begin(), uplink_.end(), link) != uplink_.end();
  }

  static double Utilization(int64_t bytes, double rate, int64_t step_ns) {
    if (step_ns <= 0 || rate == std::numeric_limits<double>::infinity()) {
      return 0;
    }
    return static_cast<double>(bytes) / (rate * static_cast<double>(step_ns));
  }

  int32_t AddLink(std::string name, const LinkCapacity& capacity) {
    usage_.push_back({.name = std::move(name)});
    caps_.push_back(capacity);
    return net_.AddLink(capacity);
  }

  // GPU-to-GPU links: each rank's GPU's NVLink port, or, without NVLink,
  // the link between the sockets (PCIe peer traffic crosses the GPUs' own
  // links and the switches' uplinks, which exist already). Each carries
  // its full rate both ways at once, so one direction's flows never change
  // the other's rates (a ring's flows over NVLink are then each alone).
  void AddPeerLinks(const std::vector<bool>& socket_used) {
    nvlink_.assign(node_.num_gpus, kNone);
    if (node_.nvlink_gbps > 0) {
      const double r = node_.nvlink_gbps;
      for (const RankStep& rank : ranks_) {
        nvlink_[rank.gpu] =
            AddLink(absl::StrCat("GPU ", rank.gpu, " NVLink"),
                    {.h2d = r, .d2h = r, .both_h2d = r, .both_d2h = r});
      }
      return;
    }
    if (std::count(socket_used.begin(), socket_used.end(), true) > 1) {
      const double r = node_.inter_socket_gbps;
      inter_socket_ =
          AddLink("inter-socket link",
                  {.h2d = r, .d2h = r, .both_h2d = r, .both_d2h = r});
    }
  }

  // What a transfer from GPU `src` to GPU `dst` crosses: out of one NVLink
  // port and into the other; or, over PCIe, out of src's own link, through
  // its switch (and up, across the sockets and down, between switches),
  // into dst's link. Across the sockets, "d2h" is the direction from the
  // lower-numbered socket.
  std::vector<Hop> PeerPath(int32_t src, int32_t dst) const {
    if (node_.nvlink_gbps > 0) {
      return {{nvlink_[src], LinkDir::kD2H}, {nvlink_[dst], LinkDir::kH2D}};
    }
    std::vector<Hop> path = {{gpu_link_[src], LinkDir::kD2H}};
    const int32_t sw_src = node_.SwitchOf(src);
    const int32_t sw_dst = node_.SwitchOf(dst);
    if (sw_src != sw_dst) {
      path.push_back({uplink_[sw_src], LinkDir::kD2H});
      const int32_t from = node_.switches[sw_src].socket;
      const int32_t to = node_.switches[sw_dst].socket;
      if (from != to) {
        path.push_back(
            {inter_socket_, from < to ? LinkDir::kD2H : LinkDir::kH2D});
      }
      path.push_back({uplink_[sw_dst], LinkDir::kH2D});
    }
    path.push_back({gpu_link_[dst], LinkDir::kH2D});
    return path;
  }

  void Own(int32_t flow, const Owner& owner) {
    if (static_cast<size_t>(flow) >= owner_.size()) {
      owner_.resize(flow + 1);
      if (recorder_.has_value()) recorded_.resize(flow + 1);
    }
    owner_[flow] = owner;
  }

  void Count(const std::vector<Hop>& path, int64_t bytes) {
    for (const Hop& hop : path) {
      int64_t& total = hop.dir == LinkDir::kH2D ? usage_[hop.link].h2d_bytes
                                                : usage_[hop.link].d2h_bytes;
      total = SaturatingAdd(total, bytes);
    }
  }

  // A collective moves from slot `from` to slot `to` (completed ones are
  // dropped): its flows' owners follow.
  void Rebind(size_t from, size_t to) {
    running_[to] = std::move(running_[from]);
    for (int32_t flow : running_[to].flows) {
      if (flow != kNone) owner_[flow].collective = static_cast<int32_t>(to);
    }
  }

  Copy& CopyOf(const Owner& o) {
    if (o.collective != kNone) return running_[o.collective].copies[o.index];
    return (*runs_)[o.rank]->copy(o.stream);
  }

  // Every link the copy crosses, those that never limit it included.
  const std::vector<Hop>& CountedPath(const Owner& o) const {
    if (o.collective != kNone) return running_[o.collective].paths[o.index];
    return counted_paths_[o.rank][o.stream];
  }

  // `rank`: the rank whose copy started or finished, or kNone. Its other
  // copy is reset whether or not the network touched it (its direction of
  // the GPU's link may have kept its capacity): its finish is recomputed
  // from now, as one GPU's is, and a changed rate is set once.
  void Update(int32_t rank, int64_t now, int32_t started) {
    if (rank != kNone) {
      for (int32_t f : flow_of_[rank]) {
        if (f != kNone && f != started) {
          CopyOf(owner_[f]).SetRate(now, net_.Rate(f));
        }
      }
    }
    for (int32_t f : net_.Touched()) {
      Copy& c = CopyOf(owner_[f]);
      const double rate = net_.Rate(f);
      if (f == started || rate != c.rate) c.SetRate(now, rate);
    }
    if (ABSL_PREDICT_FALSE(recorder_.has_value())) RecordRates(now);
  }

  // A new flow: its recorder id, no rate recorded yet.
  void Record(int32_t flow) {
    recorded_[flow] = {.id = recorder_->Open(), .rate = 0};
  }

  // The touched flows' rates that changed, as their copies now have them:
  // out of Update's loop, which stays as it was when nothing records.
  ABSL_ATTRIBUTE_NOINLINE void RecordRates(int64_t now) {
    for (int32_t f : net_.Touched()) {
      const Owner& o = owner_[f];
      const Copy& c = CopyOf(o);
      if (c.rate == recorded_[f].rate) continue;
      recorded_[f].rate = c.rate;
      // Its bytes move at the rate once its latency is over.
      recorder_->SetRate(recorded_[f].id, CountedPath(o),
                         std::max(now, c.data_start), c.rate);
    }
  }

  // Immutable after construction.
  const Node& node_;
  const absl::Span<const RankStep> ranks_;

  FlowNetwork net_;
  std::vector<LinkUsage> usage_;
  std::vector<LinkCapacity> caps_;
  std::vector<int32_t> gpu_link_;
  std::vector<int32_t> uplink_;
  std::vector<int32_t> nvlink_;
  int32_t inter_socket_ = kNone;
  // Per rank and stream: the hops of its copies in the network (those that
  // can limit them) and all the links they cross; its flow in flight.
  std::vector<std::array<std::vector<Hop>, 2>> paths_;
  std::vector<std::array<std::vector<Hop>, 2>> counted_paths_;
  std::vector<std::array<int32_t, 2>> flow_of_;
  std::vector<Owner> owner_;
  std::vector<Running> running_;
  std::vector<std::unique_ptr<RankRun>>* runs_ = nullptr;
  // With record_load: the links' load, and by network flow id the
  // recorder's id of the flow that holds it and the rate last recorded.
  struct Recorded {
    int64_t id = 0;
    double rate = 0;  // the last recorded
  };
  std::optional<LinkLoadRecorder> recorder_;
  std::vector<Recorded> recorded_;
};

absl::Status CheckRanks(const Node& node, absl::Span<const RankStep> ranks) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError("ranks: a node step needs a rank");
  }
  if (static_cast<int64_t>(ranks.size()) > node.num_gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks: ", ranks.size(), " ranks on a node of ",
                     node.num_gpus, " GPUs (", node.name, ")"));
  }
  std::vector<int32_t> rank_on(node.num_gpus, kNone);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankStep& r = ranks[i];
    if (r.gpu < 0 || r.gpu >= node.num_gpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks[", i, "].gpu: GPU ", r.gpu, " does not exist (",
                       node.name, " has GPUs 0-", node.num_gpus - 1, ")"));
    }
    if (rank_on[r.gpu] != kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks[", i, "].gpu: GPU ", r.gpu,
                       " already runs ranks[", rank_on[r.gpu], "]"));
    }
    rank_on[r.gpu] = static_cast<int32_t>(i);
    if (r.graph == nullptr || r.durations == nullptr || r.schedule == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ranks[", i, "]: a rank needs a graph, durations and a schedule"));
    }
  }
  return absl::OkStatus();
}

// Per socket, the pool its ranks share, saying whose it is when it runs out.
std::vector<PinnedPool> Pools(const Node& node,
                              absl::Span<const RankStep> ranks) {
  std::vector<PinnedPool> pools(node.sockets.size());
  std::vector<std::vector<int32_t>> users(node.sockets.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    users[node.SocketOf(ranks[i].gpu)].push_back(static_cast<int32_t>(i));
  }
  for (size_t s = 0; s < pools.size(); ++s) {
    pools[s].capacity_bytes = node.sockets[s].pinned_host_memory_bytes;
    pools[s].where =
        absl::StrCat(" on socket ", node.sockets[s].name, ", shared by ranks ",
                     absl::StrJoin(users[s], ", "));
  }
  return pools;
}

// Where each collective op of each rank stands among its group's: the
// group's id and the op's place in that group's sequence. Ranks of a group
// must issue the same collectives in the same order (a real job would
// deadlock or corrupt otherwise): checked here, before any simulation.
struct CollectiveOrder {
  // Per distinct graph, by op: (group id, ordinal among the graph's
  // collectives on that group); (kNone, kNone) for an op that is none. The
  // ranks of a data-parallel step share one graph, and so one table.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> by_graph;
  std::vector<int32_t> graph_of;  // by rank: its graph's table
  bool any = false;

  // REQUIRES: `op` is a collective of rank `rank`'s graph.
  std::pair<int32_t, int32_t> At(int32_t rank, int32_t op) const {
    return by_graph[graph_of[rank]][op];
  }
};

std::string Describe(const Graph& g, int32_t op) {
  const Collective& c = *g.ops[op].collective;
  return absl::StrCat(g.OpLabel(op), " (", CollectiveKindName(c.kind), " of ",
                      c.bytes, " bytes on ranks {",
                      absl::StrJoin(c.group, ", "), "})");
}

absl::StatusOr<CollectiveOrder> OrderCollectives(
    absl::Span<const RankStep> ranks, const StopFn& stop) {
  CollectiveOrder order;
  const int32_t n = static_cast<int32_t>(ranks.size());
  order.graph_of.assign(ranks.size(), kNone);
  // Per group (its ranks, sorted): per member, its collectives in order.
  std::vector<std::vector<int32_t>> groups;
  absl::flat_hash_map<std::vector<int32_t>, int32_t> group_id;
  std::vector<std::vector<std::vector<int32_t>>> sequence;  // [group][rank]
  StopPoller poller(stop, 4096);
  // Without any collective there is nothing to order: each distinct graph
  // (the ranks often share one) is scanned once, not once per rank.
  std::vector<const Graph*> scanned;
  for (const RankStep& rank : ranks) {
    if (order.any) break;
    if (std::find(scanned.begin(), scanned.end(), rank.graph) !=
        scanned.end()) {
      continue;
    }
    scanned.push_back(rank.graph);
    for (const Op& op : rank.graph->ops) {
      if (poller.Stop()) return absl::CancelledError("node simulation stopped");
      if (op.collective.has_value()) {
        order.any = true;
        break;
      }
    }
  }
  if (!order.any) return order;
  // Each distinct graph's collectives with their groups' ids, found once
  // (the ranks of a data-parallel step share one graph); each rank then
  // checks only that it belongs to each group it issues on.
  struct Issued {
    int32_t op;
    int32_t group;
  };
  std::vector<std::vector<Issued>> issued_by;  // parallel to `scanned`
  scanned.clear();
  for (int32_t r = 0; r < n; ++r) {
    const Graph& g = *ranks[r].graph;
    const size_t known = static_cast<size_t>(
        std::find(scanned.begin(), scanned.end(), &g) - scanned.begin());
    if (known == scanned.size()) {
      scanned.push_back(&g);
      std::vector<Issued>& issued = issued_by.emplace_back();
      std::vector<int32_t> key;
      for (int32_t op = 0; op < static_cast<int32_t>(g.ops.size()); ++op) {
        if (poller.Stop()) {
          return absl::CancelledError("node simulation stopped");
        }
        if (!g.ops[op].collective.has_value()) continue;
        key = g.ops[op].collective->group;
        std::sort(key.begin(), key.end());
        auto [it, added] =
            group_id.try_emplace(key, static_cast<int32_t>(groups.size()));
        if (added) {
          groups.push_back(key);
          sequence.emplace_back(n);
        }
        issued.push_back({op, it->second});
      }
      std::vector<std::pair<int32_t, int32_t>>& table =
          order.by_graph.emplace_back(
              g.ops.size(), std::pair<int32_t, int32_t>{kNone, kNone});
      std::vector<int32_t> issued_on(groups.size(), 0);  // by group
      for (const Issued& c : issued) {
        table[c.op] = {c.group, issued_on[c.group]++};
      }
    }
    order.graph_of[r] = static_cast<int32_t>(known);
    for (const Issued& c : issued_by[known]) {
      if (poller.Stop()) return absl::CancelledError("node simulation stopped");
      const std::vector<int32_t>& members = groups[c.group];
      // The group's ranks, sorted: the largest last, this rank found by a
      // binary search.
      const auto where = [&] {
        return absl::StrCat("ranks[", r, "]: ", g.OpLabel(c.op));
      };
      if (members.back() >= n) {
        const std::vector<int32_t>& listed = g.ops[c.op].collective->group;
        const int32_t outside = *std::find_if(
            listed.begin(), listed.end(), [n](int32_t m) { return m >= n; });
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": collective.group names rank ", outside,
                         ", but the node step has ", n, " ranks"));
      }
      if (!std::binary_search(members.begin(), members.end(), r)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(), ": collective.group {",
                         absl::StrJoin(g.ops[c.op].collective->group, ", "),
                         "} does not include this rank (", r, ")"));
      }
      sequence[c.group][r].push_back(c.op);
    }
  }
  for (size_t gid = 0; gid < groups.size(); ++gid) {
    const int32_t first = groups[gid][0];
    const Graph& g0 = *ranks[first].graph;
    const std::vector<int32_t>& expected = sequence[gid][first];
    for (int32_t m : groups[gid]) {
      const Graph& g = *ranks[m].graph;
      const std::vector<int32_t>& got = sequence[gid][m];
      const auto group = [&] { return absl::StrJoin(groups[gid], ", "); };
      if (got.size() != expected.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ranks[", m, "] issues ", got.size(), " collectives on ranks {",
            group(), "} where ranks[", first, "] issues ", expected.size(),
            ": the ranks of a group must issue the same collectives in the "
            "same order"));
      }
      for (size_t k = 0; k < got.size(); ++k) {
        const Collective& a = *g0.ops[expected[k]].collective;
        const Collective& b = *g.ops[got[k]].collective;
        if (a.kind != b.kind || a.algorithm != b.algorithm ||
            a.bytes != b.bytes || a.group != b.group) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ranks[", m, "]: collective ", k, " on ranks {", group(), "} is ",
              Describe(g, got[k]), ", where ranks[", first, "]'s is ",
              Describe(g0, expected[k]),
              ": the ranks of a group must issue the same collectives in the "
              "same order"));
        }
      }
    }
  }
  return order;
}

// Why no rank can move, and which: a rank held back by itself (its
// memory) first, since no collective could release it; else the first
// collective whose group has not all reached it.
std::pair<size_t, std::string> DescribeNodeDeadlock(
    absl::Span<const RankStep> ranks, const CollectiveOrder& order,
    const std::vector<std::unique_ptr<RankRun>>& runs) {
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i]->done() && runs[i]->CommHead() == kNone) {
      return {i, runs[i]->DescribeDeadlock()};
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i]->done()) continue;
    const Graph& g = *ranks[i].graph;
    const int32_t op = ranks[i].schedule->tasks[runs[i]->CommHead()].op;
    for (int32_t m : g.ops[op].collective->group) {
      const int32_t head = runs[m]->CommHead();
      if (head == kNone) {
        return {i, absl::StrCat("collective ", Describe(g, op),
                                " waits for rank ", m, ", which has finished")};
      }
      const int32_t other = ranks[m].schedule->tasks[head].op;
      if (order.At(m, other) == order.At(i, op)) continue;
      return {
          i, absl::StrCat("collective ", Describe(g, op), " waits for rank ", m,
                          ", which waits at collective ",
                          Describe(*ranks[m].graph, other),
                          ": the ranks issue their groups' collectives in "
                          "orders that wait for each other")};
    }
  }
  return {0, "no rank can make progress"};
}

}  // namespace

absl::StatusOr<NodeSimResult> SimulateNode(const Node& node,
                                           absl::Span<const RankStep> ranks,
                                           const SimOptions& opts) {
  SLACKSWAP_RETURN_IF_ERROR(CheckRanks(node, ranks));
  if (opts.budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget_bytes must be >= 0 (0: no limit), got ", opts.budget_bytes));
  }
  SLACKSWAP_ASSIGN_OR_RETURN(const CollectiveOrder order,
                             OrderCollectives(ranks, opts.should_stop));
  std::vector<PinnedPool> pools = Pools(node, ranks);
  NodeLinks links(node, ranks, order.any, opts.record_link_load);
  std::vector<std::unique_ptr<RankRun>> runs;
  runs.reserve(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankStep& r = ranks[i];
    runs.push_back(std::make_unique<RankRun>(
        *r.graph, node.gpu, *r.durations, *r.schedule, opts,
        &pools[node.SocketOf(r.gpu)], &links, static_cast<int32_t>(i)));
  }
  links.Bind(&runs);

  // The collective first in line on rank r, if every rank of its group has
  // it first in line too (and none runs one): its op, else kNone.
  const auto ready_collective = [&](int32_t r) -> int32_t {
    const RankRun& run = *runs[r];
    const int32_t task = run.CommHead();
    if (task == kNone || run.comm_running()) return kNone;
    const int32_t op = ranks[r].schedule->tasks[task].op;
    const std::pair<int32_t, int32_t> at = order.At(r, op);
    for (int32_t m : ranks[r].graph->ops[op].collective->group) {
      const RankRun& other = *runs[m];
      const int32_t head = other.CommHead();
      if (head == kNone || other.comm_running()) return kNone;
      const int32_t other_op = ranks[m].schedule->tasks[head].op;
      if (order.At(m, other_op) != at) return kNone;
    }
    return op;
  };

  NodeSimResult result;
  int64_t now = 0;
  // Ranks that had an event at `now`: only they can start something (a
  // rank waits only for its own streams, its memory and its collectives;
  // another rank's copies change how fast its copies move, not whether
  // anything can start).
  std::vector<char> moved(runs.size(), true);  // bytes: read at every instant
  // A rank's stall is charged, and its clock moved, only when something of
  // its own ends (or the loop does): until then what holds its compute back
  // stays the same (another rank changes only its copies' rates), so one
  // charge per stretch adds up to the nanoseconds of one per instant,
  // without a pass over the ranks at every instant.
  const auto catch_up = [&runs](int64_t at) {
    for (const auto& run : runs) {
      if (run->done()) continue;
      run->AccountStall(at);
      run->AdvanceTo(at);
    }
  };
  // The ranks' communication streams as they were when the last pass
  // left no collective ready (starting one only makes others wait): until
  // one of them changes, a pass would start nothing.
  const auto comm_changes = [&runs] {
    int64_t changes = 0;
    for (const auto& run : runs) changes += run->comm_changes();
    return changes;
  };
  int64_t comm_seen = -1;
  StopPoller poller(opts.should_stop, 1024);
  while (result.feasible) {
    if (poller.Stop()) {
      return absl::CancelledError(
          absl::StrCat("node simulation stopped at ", FormatMs(now)));
    }
    // A rank's starts change other ranks' rates, never what they can start
    // (they share no memory but pinned memory, which only the ends of
    // copies give back; a collective starts below): one pass reaches this
    // instant's fixed point.
    for (size_t i = 0; i < runs.size() && result.feasible; ++i) {
      if (!moved[i]) continue;
      moved[i] = false;
      RankRun& run = *runs[i];
      run.StartWhatCan();  // nothing, on a rank that is done
      if (!run.feasible()) {
        result.feasible = false;
        result.infeasible_reason = absl::StrCat(
            "rank ", i, " (GPU ", ranks[i].gpu, "): ", run.infeasible_reason());
      }
    }
    if (!result.feasible) break;
    if (order.any && comm_changes() != comm_seen) {
      for (int32_t r = 0; r < static_cast<int32_t>(runs.size()); ++r) {
        const int32_t op = ready_collective(r);
        if (op == kNone) continue;
        const Collective& c = *ranks[r].graph->ops[op].collective;
        for (int32_t m : c.group) runs[m]->StartCommHead(now);
        links.StartCollective(c, now);
      }
      comm_seen = comm_changes();
    }
    int64_t next = links.NextCollectiveEvent();
    for (const auto& run : runs) next = std::min(next, run->NextEvent());
    if (next == kNeverNs) {
      // Nothing runs: every rank is done (the step ends), or they wait for
      // each other.
      if (std::all_of(runs.begin(), runs.end(),
                      [](const auto& run) { return run->done(); })) {
        break;
      }
      result.feasible = false;
      catch_up(now);
      auto [i, why] = DescribeNodeDeadlock(ranks, order, runs);
      runs[i]->Infeasible(why);
      result.infeasible_reason =
          absl::StrCat("rank ", i, " (GPU ", ranks[i].gpu, "): ", why);
      break;
    }
    if (next >= kTimeHorizonNs) return TimeHorizonError(next);
    now = next;
    // A done rank's next event is never.
    for (size_t i = 0; i < runs.size(); ++i) {
      if (runs[i]->FinishIfDue(now)) moved[i] = true;
    }
    links.FinishCollectivesAt(now, [&](const std::vector<int32_t>& members) {
      for (int32_t m : members) {
        runs[m]->AccountStall(now);
        runs[m]->FinishCommHead(now);
        moved[m] = true;
      }
    });
  }
  catch_up(now);

  result.ranks.reserve(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    RankRun& run = *runs[i];
    if (!result.feasible && run.feasible()) {
      run.Infeasible(
          absl::StrCat("stopped with the node: ", result.infeasible_reason));
    }
    SLACKSWAP_ASSIGN_OR_RETURN(SimResult r, run.Finish());
    result.events_processed += r.events_processed;
    result.step_ns = std::max(result.step_ns, r.step_ns);
    result.ideal_step_ns = std::max(result.ideal_step_ns, r.ideal_step_ns);
    result.ranks.push_back(std::move(r));
  }
  if (result.feasible && result.step_ns > 0) {
    result.throughput_retained =
        static_cast<double>(result.ideal_step_ns) / result.step_ns;
  }
  links.EndRecording(now);
  result.links = links.Usage(result.step_ns, opts.timeline_points);
  result.peak_pinned_bytes_per_socket.reserve(pools.size());
  for (const PinnedPool& p : pools) {
    result.peak_pinned_bytes_per_socket.push_back(p.peak_bytes);
  }
  return result;
}

size_t ReportedRank(const NodeSimResult& r) {
  if (!r.feasible) {
    for (size_t i = 0; i < r.ranks.size(); ++i) {
      if (!absl::StartsWith(r.ranks[i].infeasible_reason,
                            "stopped with the node")) {
        return i;
      }
    }
    return 0;
  }
  size_t slowest = 0;
  for (size_t i = 1; i < r.ranks.size(); ++i) {
    if (r.ranks[i].step_ns > r.ranks[slowest].step_ns) slowest = i;
  }
  return slowest;
}

SimResult ReportedResult(const NodeSimResult& r) {
  SimResult reported = r.ranks[ReportedRank(r)];
  if (!r.feasible) {
    reported.feasible = false;
    reported.infeasible_reason = r.infeasible_reason;
    reported.throughput_retained = 0;
  }
  return reported;
}

}  // namespace slackswap
