#include "parallel/world.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#ifdef MHA_HAVE_MPI
#include <mpi.h>
#include <sched.h>
#endif

#include "util/memory.h"

namespace mha::parallel {

namespace {

bool g_active = false;  // MPI_Init was called by MpiSession
int g_rank = 0, g_size = 1;
int64_t g_sent = 0;

[[noreturn]] void no_mpi() { throw std::logic_error("a collective was called in a world of one rank"); }

}  // namespace

#ifdef MHA_HAVE_MPI

bool mpi_built() { return true; }

namespace {
constexpr int64_t kPiece = INT_MAX / 2;  // bytes per MPI call: counts are int
// send_bytes' messages travel in pieces of this size, so that a receiver
// that drops a message (recv_bytes_dropped) needs one piece of memory.
constexpr int64_t kMessagePiece = int64_t{16} << 20;

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// OpenMPI binds each rank to one core when it starts two ranks or fewer,
// unless told otherwise (mpirun --bind-to, which sets the variable below).
// That confines a rank's thread pool (the cpu backend's "threads") to one
// core: a bench's one-process baseline with 2 threads on rank 0 ran at half
// the speed of the same process outside mpirun. Without an explicit binding
// policy, a rank may run on every core the system gives the process (the
// kernel keeps the mask within the cpuset; a failure leaves the binding).
void widen_default_binding() {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("OMPI_MCA_hwloc_base_binding_policy")) return;
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
  sched_setaffinity(0, sizeof all, &all);
}

// Completes `reqs` without holding a core: a rank waiting on another (the
// ring's next block, rank 0 reading inputs or timing a one-process
// baseline) would otherwise spin in OpenMPI's progress loop and take the
// core the working rank needs. It polls, yielding for the first
// millisecond (a message that is nearly there costs no sleep), then
// sleeping 200 us between polls.
void wait_idle(MPI_Request* reqs, int n) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}
}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return;
  // MPI_ERRORS_ARE_FATAL stays the handler: a failed call, or a rank that
  // died, aborts the whole job rather than leaving the others waiting.
  // Blocking calls outside wait_idle (MPI_Send, MPI_Finalize) yield the
  // core between polls instead of spinning, unless the user set it.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  MPI_Init(argc, argv);
  widen_default_binding();
  g_active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}

MpiSession::~MpiSession() {
  if (g_active) MPI_Finalize();
}

std::string agree(const std::string& my_error) {
  if (!g_active) return my_error;
  int mine = my_error.empty() ? g_size : g_rank, first = g_size;
  MPI_Request req;
  MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
  wait_idle(&req, 1);
  if (first == g_size) return "";
  std::string msg = first == g_rank ? my_error : std::string();
  int64_t n = broadcast_int(static_cast<int64_t>(msg.size()), first);
  msg.resize(static_cast<std::size_t>(n));
  MPI_Bcast(msg.data(), static_cast<int>(n), MPI_CHAR, first, MPI_COMM_WORLD);
  return "rank " + std::to_string(first) + ": " + msg;
}

void send_bytes(const void* data, int64_t n, int dest) {
  if (!g_active) no_mpi();
  const char* bytes = static_cast<const char*>(data);
  MPI_Send(&n, 1, MPI_INT64_T, dest, 0, MPI_COMM_WORLD);
  for (int64_t o = 0; o < n; o += kMessagePiece)
    MPI_Send(bytes + o, static_cast<int>(std::min(kMessagePiece, n - o)), MPI_CHAR, dest, 1, MPI_COMM_WORLD);
  g_sent += n + 8;
}

namespace {
// send_bytes' size header from `source`.
int64_t recv_size(int source) {
  int64_t n = 0;
  MPI_Request req;
  MPI_Irecv(&n, 1, MPI_INT64_T, source, 0, MPI_COMM_WORLD, &req);
  wait_idle(&req, 1);
  return n;
}

// Piece `o` of a message of n bytes from `source`, into `to`.
void recv_piece(char* to, int64_t o, int64_t n, int source) {
  MPI_Request req;
  MPI_Irecv(to, static_cast<int>(std::min(kMessagePiece, n - o)), MPI_CHAR, source, 1, MPI_COMM_WORLD, &req);
  wait_idle(&req, 1);
}
}  // namespace

std::string recv_bytes(int source) {
  if (!g_active) no_mpi();
  const int64_t n = recv_size(source);
  std::string bytes(static_cast<std::size_t>(n), '\0');
  for (int64_t o = 0; o < n; o += kMessagePiece) recv_piece(bytes.data() + o, o, n, source);
  return bytes;
}

int64_t recv_bytes_dropped(int source) {
  if (!g_active) no_mpi();
  const int64_t n = recv_size(source);
  std::vector<char> piece(static_cast<std::size_t>(std::min(kMessagePiece, n)));
  for (int64_t o = 0; o < n; o += kMessagePiece) recv_piece(piece.data(), o, n, source);
  return n;
}

int64_t broadcast_int(int64_t v, int root) {
  if (!g_active) return v;
  MPI_Request req;
  MPI_Ibcast(&v, 1, MPI_INT64_T, root, MPI_COMM_WORLD, &req);
  wait_idle(&req, 1);
  if (g_rank == root) g_sent += 8;
  return v;
}

void barrier() {
  if (g_active) MPI_Barrier(MPI_COMM_WORLD);
}

std::string gather_bytes(const std::string& mine) {
  if (!g_active) return mine;
  if (g_rank != 0) {
    send_bytes(mine, 0);
    return "";
  }
  std::string all = mine;
  for (int r = 1; r < g_size; ++r) all += recv_bytes(r);
  return all;
}

void send_int(int64_t v, int dest) {
  if (!g_active) no_mpi();
  MPI_Send(&v, 1, MPI_INT64_T, dest, 3, MPI_COMM_WORLD);
  g_sent += 8;
}

int64_t recv_int_idle(int source) {
  if (!g_active) no_mpi();
  int64_t v = 0;
  MPI_Request req;
  MPI_Irecv(&v, 1, MPI_INT64_T, source, 3, MPI_COMM_WORLD, &req);
  wait_idle(&req, 1);
  return v;
}

void RingExchange::start(const void* send, void* recv, int64_t bytes, int dest, int source) {
  if (!g_active) no_mpi();
  reqs_.clear();
  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  for (int64_t o = 0; o < bytes; o += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, bytes - o));
    MPI_Request a, b;
    MPI_Irecv(r + o, n, MPI_CHAR, source, 2, MPI_COMM_WORLD, &a);
    MPI_Isend(s + o, n, MPI_CHAR, dest, 2, MPI_COMM_WORLD, &b);
    reqs_.push_back(reinterpret_cast<void*>(new MPI_Request(a)));
    reqs_.push_back(reinterpret_cast<void*>(new MPI_Request(b)));
  }
  g_sent += bytes;
}

void RingExchange::wait() {
  std::vector<MPI_Request> all;
  for (void* p : reqs_) {
    all.push_back(*static_cast<MPI_Request*>(p));
    delete static_cast<MPI_Request*>(p);
  }
  reqs_.clear();
  if (!all.empty()) wait_idle(all.data(), static_cast<int>(all.size()));
}

#else  // built without MPI: a world of one

bool mpi_built() { return false; }
MpiSession::MpiSession(int*, char***) { (void)g_active; }
MpiSession::~MpiSession() = default;
std::string agree(const std::string& my_error) { return my_error; }
void send_bytes(const void*, int64_t, int) { no_mpi(); }
std::string recv_bytes(int) { no_mpi(); }
int64_t recv_bytes_dropped(int) { no_mpi(); }
int64_t broadcast_int(int64_t v, int) { return v; }
void barrier() {}
std::string gather_bytes(const std::string& mine) { return mine; }
void send_int(int64_t, int) { no_mpi(); }
int64_t recv_int_idle(int) { no_mpi(); }
void RingExchange::start(const void*, void*, int64_t, int, int) { no_mpi(); }
void RingExchange::wait() {}

#endif

void send_bytes(const std::string& bytes, int dest) { send_bytes(bytes.data(), static_cast<int64_t>(bytes.size()), dest); }

int rank() { return g_rank; }
int size() { return g_size; }
int64_t bytes_sent() { return g_sent; }

std::vector<int64_t> gather_rank_stats() {
  const int64_t mine[2] = {bytes_sent(), peak_rss_bytes()};
  const std::string all = gather_bytes(std::string(reinterpret_cast<const char*>(mine), sizeof mine));
  std::vector<int64_t> v(all.size() / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), all.data(), v.size() * sizeof(int64_t));
  return v;
}

}  // namespace mha::parallel
