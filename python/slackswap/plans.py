"""Plans and simulation results in Python: any form, read as dicts.

A plan arrives in one of the forms the service and the command line give
it (proto/slackswap/v1/plan.proto, report.proto):

* a slackswap.v1.Plan;
* a PolicyResult (one entry of `slackswap plan --json`'s `results`, or of
  the Plan RPC's report): its plan, and the simulator's result for it,
  which is the prediction a runtime compares its measurements with;
* a PlanReport or PlanResponse: one of its results, chosen by policy;
* any of them as a dict in the proto3 JSON mapping, as a generated
  message, or as a file (.json; .pb and .txtpb need the generated code,
  see slackswap.graph).

read_plan() returns (plan dict, SimulationResult dict or None); the dicts
use proto field names, int64 values as strings, enums by name, as
MessageToDict and the command line write them.

A plan for a node (the Plan RPC with StepSpec.node_name or node_inline)
is one plan that every rank runs, judged by simulating all the ranks
together: its PolicyResult carries `node` (NodeSimulation, a RankResult
per rank) and its PlanReport `node_name` and `ranks`. rank_plan(plan,
rank) is what rank R runs: the plan, and rank R's own simulated result
as the prediction; check_rank_graph() checks that a graph is rank R's of
the layout the plan was made for, as far as the report can tell.
"""

import collections
import json
import os

from slackswap import graph as _graph
from slackswap.errors import PlanError, PlanLayoutError, PlanRankError


def to_dict(value):
    """A message, a dict, or a .json file path, as a dict."""
    if isinstance(value, dict):
        return value
    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if not path.endswith(".json"):
            raise PlanError("%s: read .json plans here; .pb and .txtpb "
                            "through the generated messages" % path)
        with open(path) as f:
            return json.load(f)
    if hasattr(value, "DESCRIPTOR"):
        from google.protobuf import json_format
        return json_format.MessageToDict(value,
                                         preserving_proto_field_name=True)
    raise PlanError("want a plan as a dict, a message or a .json file, got "
                    "%s" % type(value).__name__)


def _chosen(plan, policy):
    """(d, report): the PolicyResult or Plan dict that `plan` names, and
    the PlanReport dict it was chosen from (None when plan is not a
    report)."""
    d = to_dict(plan)
    report = None
    if "report" in d and "results" not in d:  # a PlanResponse
        d = d["report"]
    if "results" in d:  # a PlanReport
        report = d
        results = d["results"]
        if policy is not None:
            results = [r for r in results if r.get("policy") == policy]
        if len(results) != 1:
            raise PlanError(
                "the report holds %d results%s: name one with policy= "
                "(it has %s)" % (
                    len(results), "" if policy is None else
                    " for policy %r" % policy,
                    ", ".join(r.get("policy", "?") for r in d["results"])
                    or "none"))
        d = results[0]
    return d, report


def _split(d):
    """(plan dict, simulation result dict or None) of a PolicyResult or
    Plan dict."""
    if "plan" in d:  # a PolicyResult
        return d["plan"], d.get("result")
    if "decisions" in d or "graph_name" in d or not d:
        return d, None
    raise PlanError("not a plan: a dict with keys %s" % ", ".join(sorted(d)))


def read_plan(plan, policy=None, rank=None):
    """(plan dict, simulation result dict or None) from any plan form.

    rank: None reads the plan as it is (on a node: the plan every rank
    runs, with the reported rank's result, the slowest); a rank reads
    rank_plan(plan, rank, policy), refused as it refuses."""
    if rank is not None:
        p = rank_plan(plan, rank, policy)
        return p.plan, p.result
    return _split(_chosen(plan, policy)[0])


RankPlan = collections.namedtuple(
    "RankPlan", "plan result node_name ranks rank rank_result")
RankPlan.__doc__ = """What one rank runs of a plan (rank_plan()).

plan: the plan dict the rank runs. result: its SimulationResult dict (a
node's: the rank's own, node.ranks[rank].result, when the PolicyResult
has it), or None. node_name, ranks: the node and its number of ranks (""
and 0 for one GPU). rank: the rank (None for one GPU). rank_result:
whether result is the rank's own RankResult."""


def _ints(values):
    return "{%s}" % ", ".join(str(v) for v in values)


def rank_plan(plan, rank, policy=None):
    """What rank `rank` runs of `plan` (any form read_plan() reads), as a
    RankPlan; PlanRankError when the rank does not fit the plan.

    A plan is a node's when its PlanReport has `ranks` (> 0) or its
    PolicyResult has `node`; such a plan needs a rank in [0, ranks). A
    PolicyResult or report without either is a single-GPU plan, and a
    bare Plan says nothing of a node (every rank of a node runs the same
    Plan): both refuse a rank. Every rank runs the PolicyResult's plan
    today, with its own simulated result as the prediction; this is the
    one place a plan that differs per rank would be chosen."""
    d, report = _chosen(plan, policy)
    plan_dict, result = _split(d)
    node = d.get("node") if "plan" in d else None
    rank_results = list((node or {}).get("ranks") or [])
    ranks = int((report or {}).get("ranks") or 0) or len(rank_results)
    node_name = ((report or {}).get("node_name") or
                 (node or {}).get("node_name") or "")
    if not ranks:
        if rank is None:
            return RankPlan(plan_dict, result, "", 0, None, False)
        if "plan" in d or report is not None:
            raise PlanRankError(
                "rank=%r given for a single-GPU plan (graph %r on %s): "
                "leave rank out, or plan for a node (node=, ranks=)" % (
                    rank, plan_dict.get("graph_name", ""),
                    plan_dict.get("hardware_name") or "one GPU"))
        raise PlanRankError(
            "rank=%r given for a bare Plan, which does not say whether it "
            "is a node's: give the node's PolicyResult or PlanReport, or "
            "leave rank out" % (rank,))
    where = "%d ranks of node %s" % (ranks, node_name or "?")
    if rank is None:
        raise PlanRankError(
            "a plan for %s: name the rank that runs it with rank= (one "
            "of 0 to %d)" % (where, ranks - 1))
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise PlanRankError("rank must be an int, not %r (the plan is for "
                            "%s)" % (rank, where))
    if not 0 <= rank < ranks:
        raise PlanRankError(
            "rank %d is outside the plan's ranks [0, %d): it is for %s" % (
                rank, ranks, where))
    own = next((r for r in rank_results if int(r.get("rank", 0)) == rank),
               None)
    if own is not None and "result" in own:
        return RankPlan(plan_dict, own["result"], node_name, ranks, rank,
                        True)
    return RankPlan(plan_dict, result, node_name, ranks, rank, False)


def check_rank_graph(graph, rank_plan_):
    """PlanLayoutError when `graph` (any form read_graph() reads) is not
    rank R's graph of the layout the node plan `rank_plan_` (a RankPlan)
    was made for; nothing for a single-GPU plan.

    What the report records of the graph the plan was made for is its
    name (Plan.graph_name, checked by slackswap.torch.apply), the node's
    number of ranks, and each rank's simulated result: no digest of the
    graph. So this checks what can be compared honestly:

    * each collective's group (Op.collective.group) names only ranks in
      [0, ranks) and includes rank R, the rule the node simulator refuses
      a step by: a graph of a layout with more ranks, or another rank's
      graph (tensor parallelism with data parallelism or FSDP: the ranks'
      groups differ) is refused, naming the op and its group;
    * the graph's static bytes (tensors no op makes: parameters, inputs)
      equal rank R's simulated static_bytes (node.ranks[R].result), when
      the plan carries the rank's result: another tensor or model
      parallel split is refused.

    A graph that differs from the plan's only in collectives that still
    pass the rule (e.g. the step without its all-reduces) is not caught:
    that would need the report to carry a digest of the rank's graph."""
    p = rank_plan_
    if not p.ranks:
        return
    g = read_graph(graph)
    name = g.get("name", "")
    ops = g.get("ops") or []
    for op in ops:
        c = op.get("collective")
        if c is None:
            continue
        group = [int(m) for m in c.get("group") or []]
        what = "op %s (%s) has collective.group %s" % (
            op.get("id", 0), op.get("name", ""), _ints(group))
        beyond = [m for m in group if m >= p.ranks]
        if beyond:
            raise PlanLayoutError(
                "graph %r was built for another layout: its %s, naming "
                "rank %d, but the plan is for %d ranks of node %s" % (
                    name, what, beyond[0], p.ranks, p.node_name or "?"))
        if p.rank not in group:
            raise PlanLayoutError(
                "graph %r is not rank %d's: its %s, without rank %d (a "
                "graph of another rank or layout; `slackswap workload "
                "--rank %d` writes rank %d's)" % (
                    name, p.rank, what, p.rank, p.rank, p.rank))
    if p.rank_result and p.result is not None:
        made = {int(t) for op in ops for t in op.get("output_ids") or []}
        static = sum(int(t.get("size_bytes") or 0)
                     for t in g.get("tensors") or []
                     if int(t.get("id", 0)) not in made)
        planned = int(p.result.get("static_bytes") or 0)
        if static != planned:
            raise PlanLayoutError(
                "graph %r is not the one rank %d's plan was simulated "
                "with: static_bytes (tensors no op makes: parameters, "
                "inputs) is %d in the graph, %d in the plan's "
                "node.ranks[%d].result" % (name, p.rank, static, planned,
                                           p.rank))


def read_graph(graph):
    """An OperatorGraph in any form (dict, message, bytes, .json path) as a
    dict."""
    if isinstance(graph, (str, os.PathLike)):
        return to_dict(graph)
    return _graph.to_dict(graph)
