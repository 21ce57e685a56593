#include "testing/hostile_graphs.h"

#include <string>

#include "absl/container/flat_hash_set.h"

namespace slackswap::testutil {
namespace {

constexpr int64_t kTensorBytes = 1 << 20;
constexpr int64_t kOpNs = 1000;

v1::Tensor* AddTensor(v1::OperatorGraph& g, int64_t id, int64_t bytes) {
  v1::Tensor* t = g.add_tensors();
  t->set_id(id);
  t->set_size_bytes(bytes);
  return t;
}

v1::Op* AddOp(v1::OperatorGraph& g, int64_t id, v1::Phase phase) {
  v1::Op* op = g.add_ops();
  op->set_id(id);
  op->set_phase(phase);
  op->mutable_cost()->set_duration_ns(kOpNs);
  return op;
}

}  // namespace

v1::OperatorGraph ChainGraph(int64_t links) {
  v1::OperatorGraph g;
  g.set_name("chain");
  g.mutable_tensors()->Reserve(static_cast<int>(links));
  g.mutable_ops()->Reserve(static_cast<int>(2 * links));
  for (int64_t i = 0; i < links; ++i) {
    AddTensor(g, i, kTensorBytes);
    v1::Op* f = AddOp(g, i, v1::PHASE_FORWARD);
    if (i > 0) f->add_input_ids(i - 1);
    f->add_output_ids(i);
  }
  for (int64_t i = links - 1; i >= 0; --i) {
    AddOp(g, 2 * links - 1 - i, v1::PHASE_BACKWARD)->add_input_ids(i);
  }
  return g;
}

v1::OperatorGraph ForwardChainGraph(int64_t ops) {
  v1::OperatorGraph g;
  g.set_name("forward_chain");
  for (int64_t i = 0; i < ops; ++i) {
    AddTensor(g, i, kTensorBytes);
    v1::Op* f = AddOp(g, i, v1::PHASE_FORWARD);
    if (i > 0) f->add_input_ids(i - 1);
    f->add_output_ids(i);
  }
  AddOp(g, ops, v1::PHASE_BACKWARD)->add_input_ids(ops - 1);
  return g;
}

v1::OperatorGraph DuplicateInputGraph(int64_t copies) {
  v1::OperatorGraph g;
  g.set_name("duplicates");
  AddTensor(g, 0, kTensorBytes);
  AddTensor(g, 1, kTensorBytes);
  AddOp(g, 0, v1::PHASE_FORWARD)->add_output_ids(0);
  v1::Op* f = AddOp(g, 1, v1::PHASE_FORWARD);
  f->mutable_input_ids()->Reserve(static_cast<int>(copies));
  for (int64_t i = 0; i < copies; ++i) f->add_input_ids(0);
  f->add_output_ids(1);
  v1::Op* b = AddOp(g, 2, v1::PHASE_BACKWARD);
  for (int64_t i = 0; i < copies; ++i) b->add_input_ids(0);
  b->add_input_ids(1);
  return g;
}

v1::OperatorGraph FanOutGraph(int64_t width) {
  v1::OperatorGraph g;
  g.set_name("fan_out");
  AddTensor(g, 0, kTensorBytes);
  AddOp(g, 0, v1::PHASE_FORWARD)->add_output_ids(0);
  for (int64_t i = 1; i <= width; ++i) {
    AddTensor(g, i, kTensorBytes);
    v1::Op* f = AddOp(g, i, v1::PHASE_FORWARD);
    f->add_input_ids(0);
    f->add_output_ids(i);
  }
  for (int64_t i = width; i >= 1; --i) {
    AddOp(g, 2 * width + 1 - i, v1::PHASE_BACKWARD)->add_input_ids(i);
  }
  return g;
}

v1::Plan RecomputeEverything(const v1::OperatorGraph& g) {
  absl::flat_hash_set<int64_t> forward_outputs;
  absl::flat_hash_set<int64_t> saved;
  for (const v1::Op& op : g.ops()) {
    if (op.phase() == v1::PHASE_FORWARD) {
      forward_outputs.insert(op.output_ids().begin(), op.output_ids().end());
    } else {
      for (int64_t in : op.input_ids()) {
        if (forward_outputs.contains(in)) saved.insert(in);
      }
    }
  }
  v1::Plan plan;
  for (const v1::Tensor& t : g.tensors()) {
    if (!saved.contains(t.id())) continue;
    v1::Decision* d = plan.add_decisions();
    d->set_tensor_id(t.id());
    d->set_action(v1::ACTION_RECOMPUTE);
  }
  return plan;
}

}  // namespace slackswap::testutil
