// Reads an OperatorGraph file straight into a Graph. A binary (.pb) file is
// streamed: each tensor and op is parsed and converted as it is read, so the
// file's bytes and the message are never in memory whole (a 10^6-op graph's
// message would take several times the Graph). Text and JSON files, and any
// binary file the stream does not take as it is (below), are read as
// ReadProtoFile and GraphFromProto read them, with their errors.
//
//   absl::StatusOr<Graph> g = ReadGraphFile("step.pb");
//
// The stream takes a file whose top-level fields are the graph's name,
// description, tensors and ops (tensors before ops, as protobuf writes
// them), each tensor and op parsed whole by its message's parser, so
// every field in them (an op's collective too) is read as the message
// reads it; anything else (unknown fields, tensors after ops, a file of 2 GiB
// or more) and any error goes the other way, so every file gets the answer
// and the error it got before.
#ifndef SLACKSWAP_IO_GRAPH_FILE_H_
#define SLACKSWAP_IO_GRAPH_FILE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/stop.h"
#include "model/graph.h"

namespace slackswap {

// The graph in `path` (.pb, .txtpb or .json), validated and indexed.
// Errors: ReadProtoFile's, or GraphFromProto's prefixed with "PATH: ".
// `stop` is polled: true ends it with CANCELLED.
absl::StatusOr<Graph> ReadGraphFile(const std::string& path,
                                    const StopFn& stop = nullptr);

// The stream alone, for a binary file: the graph, or nullopt when the
// stream does not take the file or finds an error in it (ReadGraphFile then
// reads it the other way); CANCELLED when `stop` says so.
absl::StatusOr<std::optional<Graph>> StreamGraphFile(const std::string& path,
                                                     const StopFn& stop);

}  // namespace slackswap

#endif  // SLACKSWAP_IO_GRAPH_FILE_H_
