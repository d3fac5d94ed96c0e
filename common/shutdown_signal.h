#ifndef SUPERSERVE_COMMON_SHUTDOWN_SIGNAL_H_
#define SUPERSERVE_COMMON_SHUTDOWN_SIGNAL_H_

namespace superserve {

// Graceful shutdown on SIGINT/SIGTERM for servers. A handler (not sigwait:
// libraries may start threads during static initialisation, before main could
// block the signals) posts a semaphore that WaitForShutdownSignal waits on.
void InstallShutdownSignalHandlers();
// Blocks until SIGINT/SIGTERM or RequestShutdown(); returns the signal number
// (0 for RequestShutdown).
int WaitForShutdownSignal();
// Wakes WaitForShutdownSignal from inside the process.
void RequestShutdown();

}  // namespace superserve

#endif  // SUPERSERVE_COMMON_SHUTDOWN_SIGNAL_H_
