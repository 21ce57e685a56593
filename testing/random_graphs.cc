#include "testing/random_graphs.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "testing/graph_builder.h"

namespace slackswap::testutil {

Graph RandomTrainingStep(uint32_t seed, const RandomStepOptions& options) {
  std::mt19937 rng(seed);
  auto log_uniform = [&rng](int64_t lo, int64_t hi) {
    std::uniform_real_distribution<double> u(std::log(static_cast<double>(lo)),
                                             std::log(static_cast<double>(hi)));
    return static_cast<int64_t>(std::exp(u(rng)));
  };
  auto chance = [&rng](double p) {
    return std::bernoulli_distribution(p)(rng);
  };
  GraphBuilder b;
  const int32_t input =
      b.Tensor("input", log_uniform(options.min_bytes, options.max_bytes),
               TensorKind::kInput);
  std::vector<int32_t> made = {input};  // every forward output so far
  struct Step {
    std::vector<int32_t> in, out;
    int64_t ns;
  };
  std::vector<Step> forward;
  for (int32_t i = 0; i < options.forward_ops; ++i) {
    Step s;
    s.in.push_back(made.back());
    if (made.size() > 2 && chance(options.skip)) {
      std::uniform_int_distribution<size_t> pick(0, made.size() - 2);
      s.in.push_back(made[pick(rng)]);
    }
    const int outputs = chance(options.second_output) ? 2 : 1;
    for (int o = 0; o < outputs; ++o) {
      s.out.push_back(
          b.Tensor(absl::StrCat("t", i, ".", o),
                   log_uniform(options.min_bytes, options.max_bytes)));
    }
    s.ns = log_uniform(options.min_ns, options.max_ns);
    b.Forward(absl::StrCat("f", i), s.ns, s.in, s.out);
    made.insert(made.end(), s.out.begin(), s.out.end());
    forward.push_back(std::move(s));
  }
  for (int32_t i = options.forward_ops - 1; i >= 0; --i) {
    const Step& s = forward[i];
    std::vector<int32_t> in = s.in;
    in.insert(in.end(), s.out.begin(), s.out.end());
    b.Backward(absl::StrCat("b", i), 2 * s.ns, in);
  }
  Graph g = b.Build();
  // Recipes: a cheaper rebuild from the op's own inputs (an elementwise
  // tail fused into its producer, say).
  for (const Step& s : forward) {
    for (int32_t t : s.out) {
      if (!chance(options.recipe)) continue;
      Rebuild r;
      r.inputs.assign(s.in.begin(), s.in.end());
      r.cost.duration_ns = std::max<int64_t>(1, s.ns / 2);
      g.tensors[t].rebuild = r;
    }
  }
  absl::Status indexed = IndexGraph(g);
  if (!indexed.ok()) std::abort();
  return g;
}

}  // namespace slackswap::testutil
