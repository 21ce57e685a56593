#include "io/request_key.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace slackswap {
namespace {

// A ZeroCopyOutputStream into a SHA-256: serializes into a fixed buffer
// that it hashes as it fills, so a message of any size is hashed without
// its serialization ever being held whole.
class HashingStream : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit HashingStream(Sha256* hash) : hash_(hash) {}
  ~HashingStream() override { Flush(); }

  bool Next(void** data, int* size) override {
    Flush();
    used_ = sizeof(buffer_);
    *data = buffer_;
    *size = sizeof(buffer_);
    return true;
  }
  void BackUp(int count) override { used_ -= count; }
  int64_t ByteCount() const override { return flushed_ + used_; }

 private:
  void Flush() {
    hash_->Update(absl::string_view(buffer_, used_));
    flushed_ += used_;
    used_ = 0;
  }

  Sha256* const hash_;
  char buffer_[64 << 10];
  int used_ = 0;
  int64_t flushed_ = 0;
};

// Feeds `msg`'s deterministic serialization to `hash`; returns its size.
int64_t HashDeterministic(const google::protobuf::Message& msg, Sha256& hash) {
  HashingStream stream(&hash);
  {
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    msg.SerializeWithCachedSizes(&out);
  }
  return stream.ByteCount();
}

// A request whose graph, if any, is named by digest, in canonical form:
// policy names sorted and deduplicated (the core reports results in
// registry order, so their order in the request means nothing).
std::string CanonicalKey(v1::PlanRequest canonical) {
  std::vector<std::string> names(canonical.policies().begin(),
                                 canonical.policies().end());
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  canonical.clear_policies();
  for (std::string& n : names) canonical.add_policies(std::move(n));
  canonical.ByteSizeLong();  // caches the sizes the serialization needs
  Sha256 hash;
  HashDeterministic(canonical, hash);
  return hash.Finish();
}

// Hex SHA-256 of `graph`'s deterministic serialization, as it is.
std::string DigestAsIs(const v1::OperatorGraph& graph,
                       int64_t* canonical_bytes) {
  graph.ByteSizeLong();  // caches the sizes the serialization needs
  Sha256 hash;
  const int64_t bytes = HashDeterministic(graph, hash);
  if (canonical_bytes != nullptr) *canonical_bytes = bytes;
  return Sha256Hex(hash.Finish());
}

// SHA-256 of `req`'s deterministic serialization, its unknown fields
// dropped first.
std::string KeyAsIs(google::protobuf::Message& req) {
  req.DiscardUnknownFields();
  req.ByteSizeLong();  // caches the sizes the serialization needs
  Sha256 hash;
  HashDeterministic(req, hash);
  return hash.Finish();
}

}  // namespace

std::string GraphDigest(v1::OperatorGraph& graph, int64_t* canonical_bytes) {
  graph.DiscardUnknownFields();
  return DigestAsIs(graph, canonical_bytes);
}

std::string PlanRequestKey(v1::PlanRequest& req) {
  v1::StepSpec* step = req.mutable_step();
  if (!step->has_graph_inline()) {
    v1::PlanRequest canonical = req;
    canonical.DiscardUnknownFields();
    return CanonicalKey(std::move(canonical));
  }
  // Set aside without a copy, on an arena or not (the unsafe_arena_ pair
  // moves the pointer only; the graph goes back where it was).
  v1::OperatorGraph* graph = step->unsafe_arena_release_graph_inline();
  v1::PlanRequest canonical = req;  // small: the graph is set aside
  step->unsafe_arena_set_allocated_graph_inline(graph);
  canonical.DiscardUnknownFields();
  canonical.mutable_step()->set_graph_sha256(
      DigestAsIs(step->graph_inline(), nullptr));
  return CanonicalKey(std::move(canonical));
}

std::string FitRequestKey(v1::FitRequest& req) { return KeyAsIs(req); }

std::string SweepRequestKey(v1::SweepRequest& req) { return KeyAsIs(req); }

}  // namespace slackswap
