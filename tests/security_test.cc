// TLS, mutual TLS and the bearer token, end to end against a real slackswapd
// on loopback, with certificates made by openssl in the test: a CA, a server
// certificate for 127.0.0.1 and a client certificate, all signed by the CA,
// and a second CA nobody trusts.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "io/proto_file.h"
#include "slackswap/v1/planner_service.grpc.pb.h"
#include "tests/service_test_util.h"
#include "tests/slackswapd_process.h"

namespace slackswap {
namespace {

using ::slackswap::testutil::CommandResult;
using ::slackswap::testutil::FindOnPath;
using ::slackswap::testutil::RunCommand;
using ::slackswap::testutil::SetDeadline;
using ::slackswap::testutil::SlackswapdProcess;
using ::testing::HasSubstr;

// Certificates for one test suite, in a temporary directory.
class Pki {
 public:
  // One directory per test process: ctest runs tests in parallel.
  Pki()
      : dir_(::testing::TempDir() + "/slackswap_pki." +
             std::to_string(getpid())) {
    std::filesystem::create_directories(dir_);
    openssl_ = FindOnPath("openssl");
    if (openssl_.empty()) {
      error_ = "openssl is not on PATH (Debian package openssl)";
      return;
    }
    ok_ = MakeCa("ca") && MakeCa("rogue_ca") &&
          MakeLeaf("server", "ca", "subjectAltName=IP:127.0.0.1") &&
          MakeLeaf("client", "ca", "extendedKeyUsage=clientAuth") &&
          MakeLeaf("rogue_client", "rogue_ca", "extendedKeyUsage=clientAuth");
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Pem(const std::string& name) const {
    absl::StatusOr<std::string> pem = ReadFile(Path(name));
    EXPECT_TRUE(pem.ok()) << pem.status();
    return pem.value_or("");
  }

 private:
  bool Run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {openssl_};
    argv.insert(argv.end(), args.begin(), args.end());
    CommandResult r = RunCommand(argv);
    if (r.exit_status != 0) error_ += r.output;
    return r.exit_status == 0;
  }
  bool MakeCa(const std::string& name) {
    return Run({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=" + name, "-keyout", Path(name + ".key"), "-out",
                Path(name + ".crt")});
  }
  bool MakeLeaf(const std::string& name, const std::string& ca,
                const std::string& extension) {
    absl::Status written = WriteFile(Path(name + ".ext"), extension + "\n");
    if (!written.ok()) {
      error_ = written.ToString();
      return false;
    }
    return Run({"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name,
                "-keyout", Path(name + ".key"), "-out", Path(name + ".csr")}) &&
           Run({"x509", "-req", "-in", Path(name + ".csr"), "-CA",
                Path(ca + ".crt"), "-CAkey", Path(ca + ".key"),
                "-CAcreateserial", "-days", "2", "-extfile",
                Path(name + ".ext"), "-out", Path(name + ".crt")});
  }

  std::string dir_;
  std::string openssl_;
  std::string error_;
  bool ok_ = false;
};

const Pki& Certificates() {
  static const Pki* pki = new Pki();
  return *pki;
}

v1::ListWorkloadsResponse CallOrStatus(std::shared_ptr<grpc::Channel> channel,
                                       grpc::Status* status,
                                       const std::string& token = "",
                                       const std::string& scheme = "Bearer") {
  auto stub = v1::Planner::NewStub(channel);
  grpc::ClientContext ctx;
  SetDeadline(ctx, std::chrono::seconds(10));
  if (!token.empty()) ctx.AddMetadata("authorization", scheme + " " + token);
  v1::ListWorkloadsResponse resp;
  *status = stub->ListWorkloads(&ctx, v1::ListWorkloadsRequest(), &resp);
  return resp;
}

std::shared_ptr<grpc::Channel> TlsChannel(const SlackswapdProcess& server,
                                          const std::string& client = "") {
  const Pki& pki = Certificates();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pki.Pem("ca.crt");
  if (!client.empty()) {
    ssl.pem_cert_chain = pki.Pem(client + ".crt");
    ssl.pem_private_key = pki.Pem(client + ".key");
  }
  return grpc::CreateChannel(server.target(), grpc::SslCredentials(ssl));
}

TEST(SecurityTest, TlsServesTlsClientsAndRefusesPlaintext) {
  const Pki& pki = Certificates();
  ASSERT_TRUE(pki.ok()) << pki.error();
  SlackswapdProcess server({"--tls_cert=" + pki.Path("server.crt"),
                            "--tls_key=" + pki.Path("server.key")});
  ASSERT_TRUE(server.started()) << server.error();

  grpc::Status s;
  v1::ListWorkloadsResponse resp = CallOrStatus(TlsChannel(server), &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.workloads_size(), 3);

  CallOrStatus(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()),
      &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();

  // A client that does not trust the server's CA refuses it.
  grpc::SslCredentialsOptions untrusting;
  untrusting.pem_root_certs = pki.Pem("rogue_ca.crt");
  CallOrStatus(
      grpc::CreateChannel(server.target(), grpc::SslCredentials(untrusting)),
      &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);

  // The CLI over TLS: health, and a plan.
  CommandResult health =
      RunCommand({SLACKSWAP_BIN, "health", "--server", server.target(),
                  "--tls-ca", pki.Path("ca.crt")});
  EXPECT_EQ(health.exit_status, 0) << health.output;
  CommandResult plain =
      RunCommand({SLACKSWAP_BIN, "health", "--server", server.target()});
  EXPECT_EQ(plain.exit_status, 1);
  EXPECT_THAT(plain.output, HasSubstr("UNAVAILABLE"));
}

TEST(SecurityTest, MutualTlsRequiresAClientCertificateFromTheTrustedCa) {
  const Pki& pki = Certificates();
  ASSERT_TRUE(pki.ok()) << pki.error();
  SlackswapdProcess server({"--tls_cert=" + pki.Path("server.crt"),
                            "--tls_key=" + pki.Path("server.key"),
                            "--tls_client_ca=" + pki.Path("ca.crt")});
  ASSERT_TRUE(server.started()) << server.error();

  grpc::Status s;
  CallOrStatus(TlsChannel(server, "client"), &s);
  EXPECT_TRUE(s.ok()) << s.error_message();

  CallOrStatus(TlsChannel(server), &s);  // no client certificate
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  CallOrStatus(TlsChannel(server, "rogue_client"), &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);

  CommandResult cli =
      RunCommand({SLACKSWAP_BIN, "plan", "--workload", "gpt2-xl", "--layers",
                  "2", "--budget", "0.5", "--policy", "slackswap", "--server",
                  server.target(), "--tls-ca", pki.Path("ca.crt"), "--tls-cert",
                  pki.Path("client.crt"), "--tls-key", pki.Path("client.key")});
  EXPECT_EQ(cli.exit_status, 0) << cli.output;
  EXPECT_THAT(cli.output, HasSubstr("slackswap"));
}

TEST(SecurityTest, BearerTokenIsRequiredWhenConfigured) {
  const std::string token_file =
      ::testing::TempDir() + "/slackswap_token." + std::to_string(getpid());
  ASSERT_TRUE(WriteFile(token_file, "s3cret-token\n").ok());
  SlackswapdProcess server({"--auth_token_file=" + token_file});
  ASSERT_TRUE(server.started()) << server.error();
  auto channel =
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials());

  grpc::Status s;
  CallOrStatus(channel, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("bearer token"));
  CallOrStatus(channel, &s, "wrong-token");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  CallOrStatus(channel, &s, "s3cret-token");
  EXPECT_TRUE(s.ok()) << s.error_message();
  // The scheme is case-insensitive (RFC 7235); the token is not.
  CallOrStatus(channel, &s, "s3cret-token", "bearer");
  EXPECT_TRUE(s.ok()) << s.error_message();
  CallOrStatus(channel, &s, "s3cret-token", "BEARER");
  EXPECT_TRUE(s.ok()) << s.error_message();
  CallOrStatus(channel, &s, "S3CRET-TOKEN", "bearer");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  CallOrStatus(channel, &s, "s3cret-token", "Basic");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Streams too.
  {
    auto stub = v1::Planner::NewStub(channel);
    grpc::ClientContext ctx;
    SetDeadline(ctx, std::chrono::seconds(10));
    v1::SweepRequest req;
    req.mutable_step()->mutable_workload()->set_name("gpt2-xl");
    req.mutable_step()->set_hardware_name("a100-80gb-pcie4");
    auto reader = stub->Sweep(&ctx, req);
    v1::SweepResponse msg;
    EXPECT_FALSE(reader->Read(&msg));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }

  // The CLI with and without the token.
  CommandResult without =
      RunCommand({SLACKSWAP_BIN, "table", "--server", server.target()});
  EXPECT_EQ(without.exit_status, 1);
  EXPECT_THAT(without.output, HasSubstr("UNAUTHENTICATED"));
  CommandResult with = RunCommand(
      {SLACKSWAP_BIN, "workload", "--workload", "llama-7b", "--layers", "1",
       "--out", ::testing::TempDir() + "/slackswap_w.json", "--server",
       server.target(), "--auth-token-file", token_file});
  EXPECT_EQ(with.exit_status, 0) << with.output;

  // Health stays open for Kubernetes probes.
  CommandResult health =
      RunCommand({SLACKSWAP_BIN, "health", "--server", server.target()});
  EXPECT_EQ(health.exit_status, 0) << health.output;
}

TEST(SecurityTest, MetricsPortServesOnlyMetrics) {
  SlackswapdProcess server({});
  ASSERT_TRUE(server.started()) << server.error();
  for (const char* path :
       {"/", "/metricsx", "/metrics/../etc/passwd", "/debug", "/healthz"}) {
    slackswap::testutil::HttpResponse r =
        slackswap::testutil::HttpGet(server.metrics_port(), path);
    EXPECT_NE(r.status, 0) << path << ": " << r.error;
    EXPECT_NE(r.status, 200) << path;
  }
  slackswap::testutil::HttpResponse metrics =
      slackswap::testutil::HttpGet(server.metrics_port(), "/metrics");
  EXPECT_EQ(metrics.status, 200) << metrics.error;
  EXPECT_THAT(metrics.body, HasSubstr("slackswap_build_info"));
}

}  // namespace
}  // namespace slackswap
