"""A Python client for slackswapd (the slackswap.v1.Planner service).

    from slackswap.client import Client

    with Client("localhost:50051") as c:
        best = c.best_plan(graph, budget_fraction=0.5)   # a PolicyResult
        print(best["policy"], best["result"]["throughput_retained"])

Messages and stubs are generated from proto/slackswap/v1 (slackswap._protos:
at build time when the package is installed, else on first use), so every
RPC the .proto files declare is callable: the helpers below cover Plan,
Simulate, Sweep and ServerInfo; `client.call("Name", request)` reaches any
other, and `client.pb` holds the request classes (planner_service_pb2).

Pictures: `svg_path=` on plan() and simulate() has the server draw the
result (render_svg) and writes the self-contained SVG there (the chosen
policy's result for a plan; a panel per rank and per shared link for a
node), the same picture as `slackswap plan/simulate --svg`.

Graphs and plans may be given in any form slackswap.graph and
slackswap.plans read (dict, message, .json path). Results come back as
messages, or as dicts where they feed slackswap.torch.apply.

Runs under any Python with python3-grpcio and python3-protobuf.
"""

import grpc

from slackswap import _protos
from slackswap import plans as _plans

DEFAULT_HARDWARE = "a100-80gb-pcie4"
DEFAULT_TIMEOUT_S = 120.0
# As large as the server allows by default: an exported graph of a big
# model is tens of MB.
_MAX_MESSAGE = 256 << 20


class Client:
    """A connection to one slackswapd. Every call carries a deadline
    (timeout seconds) and the metadata given (e.g. an authorization
    bearer token); grpc.RpcError comes through as raised by grpcio."""

    def __init__(self, target, timeout=DEFAULT_TIMEOUT_S, credentials=None,
                 metadata=()):
        self.protos = _protos.load()
        self.pb = self.protos.planner_service_pb2
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE),
                   ("grpc.max_send_message_length", _MAX_MESSAGE)]
        if credentials is None:
            self.channel = grpc.insecure_channel(target, options=options)
        else:
            self.channel = grpc.secure_channel(target, credentials,
                                               options=options)
        self.stub = self.protos.planner_service_pb2_grpc.PlannerStub(
            self.channel)
        self.timeout = timeout
        self.metadata = tuple(metadata)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        self.channel.close()

    def wait_ready(self, timeout=30.0):
        """Blocks until the channel connects (grpc.FutureTimeoutError)."""
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def call(self, method, request):
        """Any Planner RPC by name, with this client's deadline (a
        streaming one returns its iterator)."""
        rpc = getattr(self.stub, method)
        return rpc(request, timeout=self.timeout, metadata=self.metadata)

    # --- building requests ------------------------------------------------

    def graph_message(self, graph):
        from google.protobuf import json_format
        msg = self.protos.graph_pb2.OperatorGraph()
        if isinstance(graph, msg.__class__):
            return graph
        if isinstance(graph, (bytes, bytearray)):
            msg.ParseFromString(bytes(graph))
            return msg
        return json_format.ParseDict(_plans.read_graph(graph), msg)

    def step(self, graph=None, workload=None, hardware=DEFAULT_HARDWARE,
             node=None, ranks=0):
        """A StepSpec: an exported graph or a built-in workload (its name,
        or a WorkloadRef as a message or a dict, e.g. {"name": "gpt2-xl",
        "layers": 2, "tensor_parallel": 2, "data_parallel": 2}), on a
        catalog hardware profile, or on the first `ranks` GPUs (0: all) of
        a catalog node (whose GPU is the step's: hardware is not sent)."""
        if node is not None:
            spec = self.pb.StepSpec(node_name=node, ranks=ranks)
        else:
            spec = self.pb.StepSpec(hardware_name=hardware)
        if graph is not None:
            spec.graph_inline.CopyFrom(self.graph_message(graph))
        elif isinstance(workload, str):
            spec.workload.name = workload
        elif isinstance(workload, dict):
            from google.protobuf import json_format
            json_format.ParseDict(workload, spec.workload)
        elif workload is not None:
            spec.workload.CopyFrom(workload)
        else:
            raise ValueError("give a graph or a workload")
        return spec

    @staticmethod
    def _budget(request, budget_fraction, budget_bytes):
        if (budget_fraction is None) == (budget_bytes is None):
            raise ValueError("give one of budget_fraction and budget_bytes")
        if budget_fraction is not None:
            request.budget_fraction = budget_fraction
        else:
            request.budget_bytes = int(budget_bytes)

    # --- the RPCs ---------------------------------------------------------

    def server_info(self):
        return self.call("ServerInfo", self.pb.ServerInfoRequest())

    @staticmethod
    def _write_svg(response, path):
        if not response.svg:
            raise ValueError("the server sent no picture: no result to draw, "
                             "or a slackswapd from before render_svg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(response.svg)

    def plan(self, graph=None, *, workload=None, hardware=DEFAULT_HARDWARE,
             budget_fraction=None, budget_bytes=None, policies=(),
             timeline_points=0, include_reasons=False, node=None, ranks=0,
             svg_path=None):
        """The Plan RPC: a PlanResponse (report.results: one PolicyResult
        per policy, each simulated). No policies: all of them. With
        svg_path, the picture of the chosen policy's result (the fastest
        feasible one) is written there, and is response.svg too.

        With node (a catalog node, e.g. dgx-a100-80gb) the plan is the
        node's: one plan for every one of its first `ranks` GPUs (0: all),
        each counting on its share of the shared links, judged by
        simulating all the ranks together. The report then has node_name,
        ranks and the planned link rates, and each PolicyResult its node
        (a RankResult per rank); a built-in workload's layout
        (data_parallel, tensor_parallel, ... of WorkloadRef) gives the
        ranks their collectives. slackswap.torch.apply(result, graph,
        rank=R) runs rank R's."""
        request = self.pb.PlanRequest(
            step=self.step(graph, workload, hardware, node, ranks),
            policies=list(policies), timeline_points=timeline_points,
            include_reasons=include_reasons, render_svg=svg_path is not None)
        self._budget(request, budget_fraction, budget_bytes)
        response = self.call("Plan", request)
        if svg_path is not None:
            self._write_svg(response, svg_path)
        return response

    def best_plan(self, graph=None, *, policies=(), **kwargs):
        """The best plan the server finds under the budget: of the feasible
        results of the budgeted policies (the server's default set unless
        `policies` names others), the one that retains the most throughput
        (the earlier on a tie), as a PolicyResult dict for
        slackswap.torch.apply. ValueError when none is feasible. With
        node= (and ranks=), as plan(): the node's best plan, whose result
        is the node's verdict; apply it with rank=."""
        response = self.plan(graph, policies=policies, **kwargs)
        info = {p.name: p.unbudgeted_reference
                for p in self.server_info().policies}
        best = None
        for r in response.report.results:
            if info.get(r.policy, r.policy == "ideal"):
                continue  # the unbudgeted reference (ideal)
            if r.result.feasible and (
                    best is None or r.result.throughput_retained >
                    best.result.throughput_retained):
                best = r
        if best is None:
            raise ValueError("no policy finds a feasible plan for %s at this "
                             "budget: %s" % (
                                 response.report.graph_name, "; ".join(
                                     "%s: %s" % (r.policy,
                                                 r.result.infeasible_reason)
                                     for r in response.report.results)))
        return _plans.to_dict(best)

    def simulate(self, graph=None, plan=None, *, workload=None,
                 hardware=DEFAULT_HARDWARE, budget_fraction=None,
                 budget_bytes=None, timeline_points=0, node=None, ranks=0,
                 svg_path=None):
        """The Simulate RPC for a plan (any form slackswap.plans reads; None
        keeps everything): a SimulationResult message (on a node, the
        slowest rank's). With svg_path, the picture of the step is written
        there (on a node: a panel per rank and per shared link)."""
        from google.protobuf import json_format
        request = self.pb.SimulateRequest(
            step=self.step(graph, workload, hardware, node, ranks),
            timeline_points=timeline_points,
            render_svg=svg_path is not None)
        if plan is not None:
            plan_dict, _ = _plans.read_plan(plan)
            json_format.ParseDict(plan_dict, request.plan)
        if budget_fraction is not None or budget_bytes is not None:
            self._budget(request, budget_fraction, budget_bytes)
        response = self.call("Simulate", request)
        if svg_path is not None:
            self._write_svg(response, svg_path)
        return response.result

    def sweep(self, graph=None, *, workload=None, hardware=DEFAULT_HARDWARE,
              start=None, stop=None, step_fraction=None, policies=(),
              target=0.0):
        """The Sweep RPC: an iterator of SweepResponse messages.

        start, stop and step_fraction left as None are the server's
        defaults (0.1, 1.0 and 0.05, stated in the SweepRequest message).
        """
        request = self.pb.SweepRequest(
            step=self.step(graph, workload, hardware),
            policies=list(policies), target=target)
        if start is not None:
            setattr(request, "from", start)  # a Python keyword
        if stop is not None:
            request.to = stop
        if step_fraction is not None:
            request.step_fraction = step_fraction
        return self.call("Sweep", request)


def message_to_dict(message):
    """A message as a dict in the proto3 JSON mapping (field names)."""
    return _plans.to_dict(message)


__all__ = ["Client", "message_to_dict", "DEFAULT_HARDWARE"]
