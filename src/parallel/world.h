#pragma once
// The MPI world mha runs in, and the few collectives the parallel modes
// need. MPI is started only when the process was launched by mpirun
// (OpenMPI's or PMIx's launch variables are set): a plain `mha run` never
// touches MPI and is one rank of a world of one. A build without MPI
// (cmake -DMHA_MPI=OFF) is always a world of one.
//
// No wait spins: a blocking MPI call in OpenMPI busy-polls, so a rank
// waiting for another (for its work while rank 0 reads the inputs, for the
// next K/V block, for rank 0's next command while it times a one-process
// baseline) would take a core the working rank needs. Every receive,
// broadcast, agreement and ring exchange here polls and sleeps instead
// (world.cpp, wait_idle), and MpiSession sets OpenMPI's
// mpi_yield_when_idle for the calls left blocking (sends, finalize) unless
// OMPI_MCA_mpi_yield_when_idle is already set.
#include <cstdint>
#include <string>
#include <vector>

namespace mha::parallel {

// True when this binary was built with MPI support.
bool mpi_built();

// Starts MPI when launched by mpirun; finalizes it on destruction. One per
// process, in main().
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

int rank();  // 0 without MPI
int size();  // 1 without MPI

// Collective: every rank passes its own error ("" when it has none) and gets
// the error of the lowest failing rank, prefixed "rank R: ", or "" when all
// succeeded. The one place ranks agree on success, so that a failure on any
// rank stops every rank at the same point instead of leaving the others
// waiting in a later collective.
std::string agree(const std::string& my_error);

// Point to point, any size (sent in pieces under MPI's int count limit).
void send_bytes(const std::string& bytes, int dest);
void send_bytes(const void* data, int64_t n, int dest);  // the same message, from a buffer
std::string recv_bytes(int source);
// Receives send_bytes' message from `source` through one piece-sized buffer
// and drops it; returns its size.
int64_t recv_bytes_dropped(int source);
// Rank `root`'s value of `v` on every rank.
int64_t broadcast_int(int64_t v, int root);
void barrier();
// Gathers `mine` (the same size on every rank) to rank 0, in rank order;
// other ranks get "".
std::string gather_bytes(const std::string& mine);

// One ring step's exchange: start() posts a non-blocking receive of
// `bytes` from `source` into `recv` and a send of `send` to `dest`, and
// returns at once so the caller computes while the block travels; wait()
// completes both. Neither buffer may be touched in between.
class RingExchange {
 public:
  RingExchange() = default;
  ~RingExchange() { wait(); }
  RingExchange(const RingExchange&) = delete;
  RingExchange& operator=(const RingExchange&) = delete;
  void start(const void* send, void* recv, int64_t bytes, int dest, int source);
  void wait();

 private:
  std::vector<void*> reqs_;  // MPI_Request*, kept opaque so this header needs no mpi.h
};

// Rank 0 -> rank `dest`: one integer (a command between bench rows).
void send_int(int64_t v, int dest);
// Receives send_int's integer from `source` (what bench workers wait on
// while rank 0 runs a one-process baseline).
int64_t recv_int_idle(int source);

// Total bytes this rank has sent through the functions above.
int64_t bytes_sent();

// Collective: every rank's {bytes_sent(), peak resident bytes (VmHWM,
// util/memory.h)}, on rank 0 as 2N values in rank order; {} elsewhere.
std::vector<int64_t> gather_rank_stats();

}  // namespace mha::parallel
