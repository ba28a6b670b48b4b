//===- StopSignals.cpp - SIGTERM and SIGINT as a request to stop cleanly --===//
#include "zinc/runtime/StopSignals.h"
#include <csignal>
#include <initializer_list>

namespace zinc::rt {

static volatile sig_atomic_t received = 0;

static void recordStop(int signal) {
  if (!received) {
    received = signal;
    return;
  }
  // Asked twice: end now, as the signal would have without the handler
  // (raised while blocked, it is delivered when the handler returns).
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void installStopSignals() {
  struct sigaction action = {};
  action.sa_handler = recordStop;
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGTERM);
  sigaddset(&action.sa_mask, SIGINT);
  // SA_RESTART keeps the I/O in flight from failing with EINTR.
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGTERM, SIGINT})
    ::sigaction(signal, &action, nullptr);
}

int stopSignal() { return received; }

} // namespace zinc::rt
