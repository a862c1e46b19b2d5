#pragma once
// `mpirun -np N mha op sdpa|sdpa-decode`: the op's heads split across the
// ranks (backends/ttsim/op_heads.h cuts the shares and joins the outputs).
// Rank 0 reads the inputs and sends rank r its share; every rank runs its
// share with run_tt_op; rank 0 gathers the outputs side by side and writes
// the one output, bit for bit the one-process op's. Failures on any rank
// end every rank with one line from rank 0 and exit code 2.
#include "backends/ttsim/ttsim_single_op.h"
#include "parallel/workers.h"

namespace mha::parallel {

// Rank 0: the whole op's result. Its report is rank 0's share's, with the
// whole inputs' and output's shapes and "parallel": {"mode", "ranks"}.
ttsim::OpResult run_op_heads(const ttsim::OpRequest& request, WorkerRelease& release);

// Every other rank, once rank 0 released it in op mode; returns the exit
// code (0, or 2 when the op failed on any rank).
int serve_op_heads();

}  // namespace mha::parallel
