// Ranks that wait do not spin (parallel/world.h): while rank 0 keeps its
// core busy for a second, each other rank waits for rank 0's release (as
// workers do while rank 0 reads a config), for a bench command (as they do
// while rank 0 times a one-process baseline), and in an agreement; the CPU
// time a waiting rank uses (getrusage: every thread of the process, OpenMPI's
// included) must stay far below the wall time it waited. A blocking MPI call
// in OpenMPI busy-polls: about 100 % of the wait. And a rank may use every
// core a plain process may (OpenMPI binds each of two ranks to one core by
// default, which halved a 2-thread one-process baseline under mpirun): at
// least as many cores as the process that started mpirun.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "parallel/collective.h"
#include "parallel/world.h"
#include "parallel/driver.h"
#include "mpirun_support.h"
#include "support/test_support.h"

namespace mha {
namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Rank 0's work: a second of arithmetic on one core.
void busy_second() {
  const auto t0 = std::chrono::steady_clock::now();
  volatile double x = 1.0;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) x = x * 1.0000001 + 1e-9;
}

// Runs `wait` on every rank but 0 and reports the CPU share of its wall time.
template <class Wait>
void expect_idle(const char* what, Wait&& wait) {
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  wait();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - c0;
  EXPECT_GT(wall, 0.5) << what << ": the rank did not wait for rank 0";
  EXPECT_LT(cpu, 0.2 * wall) << what << ": " << cpu << " s of CPU in " << wall << " s of waiting";
}

TEST(InsideMpirun, WaitingRanksDoNotSpin) {
  if (!std::getenv("MHA_TEST_INSIDE_MPIRUN")) GTEST_SKIP() << "run by IdleWait.WaitingRanksDoNotSpin";
  const int me = parallel::rank(), n = parallel::size();
  if (me == 0) {
    {
      parallel::WorkerRelease release;  // released with Stop when it goes
      busy_second();
    }
    busy_second();
    for (int r = 1; r < n; ++r) parallel::send_int(7, r);
    busy_second();
    parallel::collectively([] {});
    return;
  }
  expect_idle("release", [] { EXPECT_EQ(serve_rank(), 2); });
  expect_idle("bench command", [] { EXPECT_EQ(parallel::recv_int_idle(0), 7); });
  expect_idle("agreement", [] { parallel::collectively([] {}); });
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  return CPU_COUNT(&set);
}

TEST(InsideMpirun, RanksMayUseEveryCore) {
  if (!std::getenv("MHA_TEST_CPUS")) GTEST_SKIP() << "run by IdleWait.RanksMayUseEveryCore";
  // At least as many: under `taskset` mpirun hands its ranks every core of
  // the machine, more than the process that started it had.
  EXPECT_GE(allowed_cpus(), std::atoi(std::getenv("MHA_TEST_CPUS"))) << "rank " << parallel::rank();
}

TEST(IdleWait, RanksMayUseEveryCore) {
  REQUIRE_MPI();
  for (int ranks : {1, 2}) {
    auto r = test::run_command("MHA_TEST_CPUS=" + std::to_string(allowed_cpus()) + " " + test::mpirun(ranks) +
                               std::filesystem::read_symlink("/proc/self/exe").string() +
                               " --gtest_filter=InsideMpirun.RanksMayUseEveryCore 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  }
}

TEST(IdleWait, WaitingRanksDoNotSpin) {
  REQUIRE_MPI();
  auto r = test::run_command("MHA_TEST_INSIDE_MPIRUN=1 " + test::mpirun(2) +
                             std::filesystem::read_symlink("/proc/self/exe").string() +
                             " --gtest_filter=InsideMpirun.WaitingRanksDoNotSpin 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mha
