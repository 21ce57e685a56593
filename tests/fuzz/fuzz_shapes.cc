// libFuzzer target, structure-aware: the input bytes are a recipe for a
// graph of the shapes that break planners (long chains, wide fan-outs, an
// input listed many times, unsaved forward chains, rebuild recipes, sizes
// and costs near the limits), a hardware profile and a request, which then
// go through validation, planning with the chosen policies, simulation of a
// chosen plan, and a short sweep, as slackswapd runs them. Byte-level
// mutation of a serialized request rarely makes a chain of 50,000 links;
// this makes one from a few bytes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/planning_core.h"
#include "io/convert.h"
#include "model/hardware.h"
#include "tests/fuzz/fuzz_core.h"

namespace {

using namespace slackswap;  // NOLINT: a fuzz target, not a library

// Reads integers off the front of the input; zeros once it runs out.
class Recipe {
 public:
  Recipe(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool Empty() const { return size_ == 0; }

  uint64_t Bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes && size_ > 0; ++i, ++data_, --size_) {
      v = (v << 8) | *data_;
    }
    return v;
  }
  // In [lo, hi].
  int64_t Int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    const int bytes = span <= 256          ? 1
                      : span <= 65536      ? 2
                      : span <= (1u << 24) ? 3
                                           : 8;
    return lo +
           static_cast<int64_t>(span == 0 ? Bits(bytes) : Bits(bytes) % span);
  }
  bool Bool() { return Bits(1) & 1; }
  // In [1, max], log-uniform: mostly small, now and then as large as asked
  // (a long chain is slow under the sanitizers; a fuzzer wants many runs).
  int64_t Count(int64_t max) {
    int e = 0;
    while (e < 62 && (int64_t{2} << e) <= max) ++e;
    const int64_t lo = int64_t{1} << Int(0, e);
    return std::min(max, Int(lo, 2 * lo - 1));
  }
  // A size: mostly ordinary, sometimes at the extremes. (Choices put the
  // common case first: an input that runs out reads zeros.)
  int64_t Bytes() {
    switch (Int(0, 15)) {
      case 13:
        return 0;
      case 14:
        return int64_t{1} << Int(40, 62);
      case 15:
        return std::numeric_limits<int64_t>::max() / Int(1, 4);
      default:
        return Int(1, int64_t{1} << 30);
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

class GraphMaker {
 public:
  explicit GraphMaker(Recipe& r) : r_(r) {}

  v1::OperatorGraph Make() {
    g_.set_name("fuzz");
    for (int64_t i = r_.Int(0, 2); i > 0; --i) {
      NewTensor(r_.Bytes(),
                i == 1 ? v1::TENSOR_KIND_INPUT : v1::TENSOR_KIND_PARAMETER);
    }
    Forward({}, {NewTensor(r_.Bytes())});
    const int segments = static_cast<int>(r_.Int(1, 12));
    for (int s = 0; s < segments && g_.ops_size() < kFuzzMaxOps; ++s) {
      switch (r_.Int(0, 5)) {
        case 0:
          Chain(r_.Count(50'000), /*saved=*/true);
          break;
        case 1:
          Chain(r_.Count(50'000), /*saved=*/false);
          break;
        case 2:
          FanOut(r_.Count(20'000));
          break;
        case 3:
          Duplicates(r_.Count(100'000));
          break;
        case 4:
          RebuildRecipe();
          break;
        default:
          RandomOp();
          break;
      }
    }
    Backward();
    return std::move(g_);
  }

 private:
  int64_t NewTensor(int64_t bytes,
                    v1::TensorKind kind = v1::TENSOR_KIND_ACTIVATION) {
    v1::Tensor* t = g_.add_tensors();
    t->set_id(g_.tensors_size() - 1);
    t->set_size_bytes(bytes);
    t->set_kind(kind);
    return t->id();
  }

  int64_t AnyTensor() { return r_.Int(0, g_.tensors_size() - 1); }

  v1::Op* Forward(std::vector<int64_t> in, std::vector<int64_t> out) {
    v1::Op* op = g_.add_ops();
    op->set_id(g_.ops_size() - 1);
    op->set_phase(v1::PHASE_FORWARD);
    for (int64_t i : in) op->add_input_ids(i);
    for (int64_t o : out) op->add_output_ids(o);
    Cost(op->mutable_cost());
    if (r_.Int(0, 7) == 0) op->set_workspace_bytes(r_.Bytes());
    for (int64_t o : out) {
      if (saved_next_) saved_.push_back(o);
    }
    return op;
  }

  void Cost(v1::OpCost* c) {
    switch (r_.Int(0, 3)) {
      case 3:
        c->set_duration_ns(r_.Int(0, int64_t{1} << 40));
        break;
      case 2:
        c->set_flops(static_cast<double>(r_.Bits(6)));
        // Now and then no kind, which must be refused.
        c->set_kind(
            static_cast<v1::OpKind>(r_.Int(0, 63) == 0 ? 0 : r_.Int(1, 4)));
        c->set_bytes_accessed(r_.Bytes());
        // Now and then a kernel shape, in or out of range, for the
        // efficiency tables (some kinds must refuse one).
        if (r_.Int(0, 3) == 0) {
          v1::KernelShape* s = c->mutable_shape();
          s->set_m(r_.Int(0, int64_t{1} << 33));
          s->set_n(r_.Int(0, int64_t{1} << 20));
          s->set_k(r_.Int(0, 512));
          s->set_causal(r_.Int(0, 1) == 1);
        }
        break;
      default:
        c->set_duration_ns(r_.Int(1, 100'000));
        break;
    }
  }

  void Chain(int64_t links, bool saved) {
    saved_next_ = saved;
    int64_t prev = AnyTensor();
    for (int64_t i = 0; i < links && g_.ops_size() < kFuzzMaxOps; ++i) {
      const int64_t t = NewTensor(r_.Int(1, 1 << 20));
      Forward({prev}, {t});
      prev = t;
    }
    saved_next_ = true;
    saved_.push_back(prev);
  }

  void FanOut(int64_t width) {
    const int64_t from = AnyTensor();
    for (int64_t i = 0; i < width && g_.ops_size() < kFuzzMaxOps; ++i) {
      Forward({from}, {NewTensor(r_.Int(1, 1 << 20))});
    }
  }

  void Duplicates(int64_t copies) {
    const int64_t x = AnyTensor();
    std::vector<int64_t> in(copies, x);
    Forward(in, {NewTensor(r_.Bytes())});
  }

  void RebuildRecipe() {
    const int64_t input = AnyTensor();
    const int64_t t = NewTensor(r_.Int(1, 1 << 20));
    Forward({input}, {t});
    v1::Rebuild* rebuild = g_.mutable_tensors(t)->mutable_rebuild();
    if (r_.Bool()) rebuild->add_input_ids(r_.Bool() ? input : t);
    Cost(rebuild->mutable_cost());
  }

  void RandomOp() {
    std::vector<int64_t> in;
    for (int64_t i = r_.Int(0, 6); i > 0; --i) in.push_back(AnyTensor());
    std::vector<int64_t> out;
    for (int64_t i = r_.Int(0, 3); i > 0; --i)
      out.push_back(NewTensor(r_.Bytes()));
    Forward(in, out);
  }

  // Backward ops reading a subset of the saved tensors, latest first, some
  // making gradients read again later.
  void Backward() {
    std::vector<int64_t> reads = saved_;
    std::reverse(reads.begin(), reads.end());
    const int64_t stride = r_.Int(1, 8);
    for (size_t i = 0; i < reads.size() && g_.ops_size() < kFuzzMaxOps + 1000;
         i += stride) {
      v1::Op* op = g_.add_ops();
      op->set_id(g_.ops_size() - 1);
      op->set_phase(v1::PHASE_BACKWARD);
      for (size_t j = i; j < std::min(reads.size(), i + stride); ++j) {
        op->add_input_ids(reads[j]);
      }
      Cost(op->mutable_cost());
    }
  }

  Recipe& r_;
  v1::OperatorGraph g_;
  std::vector<int64_t> saved_;
  bool saved_next_ = true;
};

v1::StepSpec Step(Recipe& r) {
  v1::StepSpec step;
  *step.mutable_graph_inline() = GraphMaker(r).Make();
  const std::vector<Hardware>& catalog = HardwareCatalog();
  if (r.Int(0, 3) == 3) {
    v1::HardwareProfile hw =
        HardwareToProto(catalog[r.Int(0, catalog.size() - 1)]);
    switch (r.Int(0, 4)) {
      case 0:
        hw.set_d2h_gbps(std::ldexp(1.0, static_cast<int>(r.Int(-1100, 60))));
        break;
      case 4:
        hw.set_h2d_gbps(static_cast<double>(r.Int(1, 100'000)) / 1000);
        break;
      case 1:
        hw.set_duplex(v1::DUPLEX_HALF);
        hw.set_copy_engines(static_cast<int32_t>(r.Int(1, 2)));
        break;
      case 2:
        hw.set_pinned_host_memory_bytes(r.Bytes());
        break;
      default:
        hw.set_transfer_latency_us(
            static_cast<double>(r.Int(0, int64_t{1} << 32)));
        break;
    }
    *step.mutable_hardware_inline() = hw;
  } else {
    step.set_hardware_name(catalog[r.Int(0, catalog.size() - 1)].name);
  }
  return step;
}

// With SLACKSWAP_FUZZ_VERBOSE set, one line per input: what was asked and
// what came back (for triaging a corpus).
void Report(int rpc, const v1::StepSpec& step, const absl::Status& s) {
  static const bool verbose = std::getenv("SLACKSWAP_FUZZ_VERBOSE") != nullptr;
  if (!verbose) return;
  std::fprintf(stderr, "rpc %d: %d ops, %d tensors: %s\n", rpc,
               step.graph_inline().ops_size(),
               step.graph_inline().tensors_size(),
               s.ToString().substr(0, 160).c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Recipe r(data, size);
  const int rpc = static_cast<int>(r.Int(0, 2));
  const v1::StepSpec step = Step(r);
  if (rpc == 0) {
    v1::PlanRequest req;
    *req.mutable_step() = step;
    req.set_budget_fraction(static_cast<double>(r.Int(1, 1200)) / 1000);
    const std::vector<std::string> names = {
        "ideal", "recompute_only", "swap_only", "capuchin", "slackswap"};
    for (int64_t i = r.Int(0, 3); i > 0; --i) {
      req.add_policies(names[r.Int(0, names.size() - 1)]);
    }
    req.set_include_reasons(r.Bool());
    Report(rpc, step, FuzzCore().PlanStep(req, FuzzTimeLimit()).status());
  } else if (rpc == 1) {
    v1::SimulateRequest req;
    *req.mutable_step() = step;
    const v1::OperatorGraph& g = step.graph_inline();
    for (int64_t i = r.Int(0, 64); i > 0 && g.tensors_size() > 0; --i) {
      v1::Decision* d = req.mutable_plan()->add_decisions();
      d->set_tensor_id(r.Int(0, g.tensors_size() - 1));
      d->set_action(static_cast<v1::Action>(r.Int(1, 3)));
      if (d->action() == v1::ACTION_SWAP) {
        d->set_prefetch_after_op_id(r.Int(0, g.ops_size()));
      }
    }
    if (r.Bool())
      req.set_budget_fraction(static_cast<double>(r.Int(1, 1000)) / 1000);
    req.set_budget_covers_all_memory(r.Bool());
    req.set_timeline_points(static_cast<int32_t>(r.Int(0, 64)));
    Report(rpc, step, FuzzCore().SimulateStep(req, FuzzTimeLimit()).status());
  } else {
    v1::SweepRequest req;
    *req.mutable_step() = step;
    req.set_from(0.2);
    req.set_to(0.9);
    req.set_step_fraction(0.35);
    req.add_policies("slackswap");
    if (r.Bool()) req.set_target(0.9);
    Report(
        rpc, step,
        FuzzCore().SweepBudgets(req, FuzzTimeLimit(),
                                [](const v1::SweepResponse&) { return true; }));
  }
  return 0;
}
