"""OperatorGraph values in Python, and writing them to files.

A graph is one of three forms of a slackswap.v1.OperatorGraph
(proto/slackswap/v1/graph.proto):

* a dict in the proto3 JSON mapping with proto field names (int64 fields as
  strings, enums by name), which is what the exporter builds and what
  needs no generated code;
* the generated message, when slackswap.v1.graph_pb2 is importable:
  generated code is never checked in; an installed package has it, and
  writing a .pb or .txtpb file makes it when needed (slackswap._protos:
  from $SLACKSWAP_PROTO_PYTHON, or with protoc from the checkout into a
  cache); python3-protobuf provides the runtime;
* its binary serialization (bytes), which needs the message class too.

write() takes any of them and writes the file format its extension names,
as the slackswap command line reads them: .json, .pb or .txtpb.
"""

import json


def message_class():
    """slackswap.v1.graph_pb2.OperatorGraph, or None without generated
    code."""
    try:
        from slackswap.v1 import graph_pb2
    except ImportError:
        return None
    return graph_pb2.OperatorGraph


def _need_message_class(what):
    """The message class, generated if need be the way the client's stubs
    are (slackswap._protos: $SLACKSWAP_PROTO_PYTHON, else protoc from the
    checkout into a cache), so .pb and .txtpb files can be written without
    installing anything."""
    cls = message_class()
    if cls is None:
        try:
            from slackswap import _protos
            cls = _protos.load().graph_pb2.OperatorGraph
        except Exception:  # no protoc, no checkout: say what is missing
            cls = None
    if cls is None:
        raise RuntimeError(
            "%s needs the generated module slackswap.v1.graph_pb2 (protoc "
            "--python_out=DIR -I proto proto/slackswap/v1/graph.proto, DIR "
            "on sys.path); without it use the dict form and .json" % what)
    return cls


def to_dict(graph):
    """The graph as a dict in the proto3 JSON mapping."""
    if isinstance(graph, dict):
        return graph
    if isinstance(graph, (bytes, bytearray)):
        graph = to_message(graph)
    from google.protobuf import json_format
    return json_format.MessageToDict(graph,
                                     preserving_proto_field_name=True)


def to_message(graph):
    """The graph as an OperatorGraph message (needs generated code)."""
    cls = _need_message_class("an OperatorGraph message")
    if isinstance(graph, cls):
        return graph
    msg = cls()
    if isinstance(graph, (bytes, bytearray)):
        msg.ParseFromString(bytes(graph))
        return msg
    from google.protobuf import json_format
    return json_format.ParseDict(graph, msg)


def to_bytes(graph):
    """The graph's binary serialization (needs generated code)."""
    if isinstance(graph, (bytes, bytearray)):
        return bytes(graph)
    return to_message(graph).SerializeToString(deterministic=True)


def write(graph, path):
    """Writes graph (dict, message or bytes) to path: .json (proto3 JSON,
    proto field names), .pb (binary) or .txtpb (text format)."""
    if path.endswith(".json"):
        with open(path, "w") as f:
            json.dump(to_dict(graph), f, indent=1)
            f.write("\n")
    elif path.endswith(".pb"):
        with open(path, "wb") as f:
            f.write(to_bytes(graph))
    elif path.endswith(".txtpb"):
        from google.protobuf import text_format
        with open(path, "w") as f:
            f.write(text_format.MessageToString(to_message(graph)))
    else:
        raise ValueError("%s: want a .json, .pb or .txtpb file" % path)
