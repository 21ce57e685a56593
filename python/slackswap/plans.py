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
"""

import json
import os

from slackswap import graph as _graph
from slackswap.errors import PlanError


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


def read_plan(plan, policy=None):
    """(plan dict, simulation result dict or None) from any plan form."""
    d = to_dict(plan)
    if "report" in d and "results" not in d:  # a PlanResponse
        d = d["report"]
    if "results" in d:  # a PlanReport
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
    if "plan" in d:  # a PolicyResult
        return d["plan"], d.get("result")
    if "decisions" in d or "graph_name" in d or not d:
        return d, None
    raise PlanError("not a plan: a dict with keys %s" % ", ".join(sorted(d)))


def read_graph(graph):
    """An OperatorGraph in any form (dict, message, bytes, .json path) as a
    dict."""
    if isinstance(graph, (str, os.PathLike)):
        return to_dict(graph)
    return _graph.to_dict(graph)
