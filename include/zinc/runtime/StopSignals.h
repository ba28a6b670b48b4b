//===- StopSignals.h - SIGTERM and SIGINT as a request to stop cleanly ----===//
//
// A scheduler's SIGTERM or a user's Ctrl-C should not leave a partial
// checkpoint behind or lose the trace of the steps done: the handlers only
// record the signal, and the step loop (RunOptions::stopRequested) finishes
// the step in flight, abandons a checkpoint being written, writes metrics
// and trace, and returns. A second signal of either kind ends the process at
// once, as it would without the handlers.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_STOPSIGNALS_H
#define ZINC_RUNTIME_STOPSIGNALS_H

namespace zinc::rt {

/// Installs the recording handlers for SIGTERM and SIGINT.
void installStopSignals();

/// The signal that asked the run to stop (SIGTERM or SIGINT), or 0.
int stopSignal();

} // namespace zinc::rt

#endif
