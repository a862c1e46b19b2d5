// Two ranks as two hosts would run them: each in its own network namespace
// (its own interfaces and addresses), joined by a veth pair, with OpenMPI
// limited to TCP (`--mca btl tcp,self`) on that link. mpirun runs in the
// first namespace and starts the second rank through a launcher agent that
// enters the other namespace, as ssh would reach another machine. The
// head-parallel output must be the one-process run's, byte for byte, and
// the bytes rank 0 sent must have crossed the link.
//
// Creating namespaces needs root (CAP_NET_ADMIN) and iproute2's `ip`; where
// either is missing (CI machines vary) the test skips with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "mpirun_support.h"
#include "support/test_support.h"
#include "util/json_util.h"

namespace mha {
namespace {

// Two namespaces A (10.213.0.1) and B (10.213.0.2) joined by a veth pair,
// named after this process so that concurrent test runs do not collide;
// deleted (with their link) on destruction.
class TwoHosts {
 public:
  TwoHosts() : a_("mha" + std::to_string(getpid()) + "a"), b_("mha" + std::to_string(getpid()) + "b") {
    const std::string va = "v" + a_, vb = "v" + b_;  // at most 15 characters
    auto r = test::run_command("ip netns add " + a_ + " && ip netns add " + b_ + " && ip link add " + va +
                               " type veth peer name " + vb + " && ip link set " + va + " netns " + a_ +
                               " && ip link set " + vb + " netns " + b_ + " && ip -n " + a_ +
                               " addr add 10.213.0.1/24 dev " + va + " && ip -n " + b_ +
                               " addr add 10.213.0.2/24 dev " + vb + " && ip -n " + a_ + " link set " + va +
                               " up && ip -n " + b_ + " link set " + vb + " up && ip -n " + a_ +
                               " link set lo up && ip -n " + b_ + " link set lo up");
    ok_ = r.exit_code == 0;
    error_ = r.err;
    link_ = va;
  }
  ~TwoHosts() { test::run_command("ip netns del " + a_ + " 2>/dev/null; ip netns del " + b_ + " 2>/dev/null"); }
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  // Bytes sent on A's end of the link so far.
  int64_t tx_bytes() const {
    auto r = test::run_command("ip netns exec " + a_ + " cat /sys/class/net/" + link_ + "/statistics/tx_bytes");
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
  }

 private:
  std::string a_, b_, link_, error_;
  bool ok_ = false;
};

// `ranks` 1: the one-process run (head-parallel on one rank, the same
// grouped projection calls).
std::string config(int ranks) {
  return std::string(R"({"variant": "llama_attention", "params": {"hidden_size": 256, "num_attention_heads": 16,
    "num_key_value_heads": 4, "head_dim": 16, "attention_bias": true}, "weights": {"init": "torch", "seed": 5},
    "inputs": {"seed": 6, "x": {"randn": [3, 300, 256]}}, "backend": {"name": "cpu", "threads": 1})") +
         R"(, "parallel": {"heads": )" + std::to_string(ranks) + "}}";
}

TEST(TwoHostsOverTcp, HeadParallelMatchesOneProcess) {
  REQUIRE_MPI();
  if (geteuid() != 0) GTEST_SKIP() << "creating network namespaces needs root (CAP_NET_ADMIN)";
  if (test::run_command("command -v ip").exit_code != 0) GTEST_SKIP() << "no `ip` (iproute2) on this machine";
  TwoHosts hosts;
  if (!hosts.ok()) GTEST_SKIP() << "cannot create network namespaces here: " << hosts.error();

  test::TempDir dir;
  const std::string one = dir.file("one.json"), two = dir.file("two.json"), agent = dir.file("agent.sh");
  test::write_text(one, config(1));
  test::write_text(two, config(2));
  // OpenMPI calls its rsh agent as `agent HOST COMMAND...`; the only other
  // host is namespace B.
  test::write_text(agent, "#!/bin/sh\nshift\nexec ip netns exec " + hosts.b() + " sh -c \"$*\"\n");
  ASSERT_EQ(test::run_command("chmod +x " + agent).exit_code, 0);

  auto r1 = test::run_mha("run -c " + one + " -o " + dir.file("one.npy"));
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  const int64_t tx0 = hosts.tx_bytes();
  auto r2 = test::run_command(
      "ASAN_OPTIONS=detect_leaks=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 ip netns exec " +
      hosts.a() + " mpirun -q --host 10.213.0.1:1,10.213.0.2:1 -np 2 --mca plm_rsh_agent " + agent +
      " --mca btl tcp,self --mca btl_tcp_if_include 10.213.0.0/24 --mca oob_tcp_if_include 10.213.0.0/24 " +
      MHA_BINARY + " run -c " + two + " -o " + dir.file("two.npy") + " --json " + dir.file("two_report.json"));
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(test::read_text(dir.file("one.npy")), test::read_text(dir.file("two.npy"))) << "not bitwise equal";
  const auto report = ordered_json::parse(test::read_text(dir.file("two_report.json")));
  const int64_t sent = report.at("backend_info").at("parallel").at("bytes_sent_rank0").get<int64_t>();
  EXPECT_GT(sent, 0);
  EXPECT_GE(hosts.tx_bytes() - tx0, sent) << "rank 0's share did not cross the veth link";
}

}  // namespace
}  // namespace mha
