#include "common/shutdown_signal.h"

#include <semaphore.h>
#include <signal.h>

#include <atomic>
#include <cerrno>

namespace superserve {
namespace {

sem_t g_shutdown;
std::atomic<int> g_signal{0};

void OnSignal(int sig) {
  g_signal.store(sig);
  sem_post(&g_shutdown);  // async-signal-safe
}

}  // namespace

void InstallShutdownSignalHandlers() {
  sem_init(&g_shutdown, 0, 0);
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int WaitForShutdownSignal() {
  while (sem_wait(&g_shutdown) != 0 && errno == EINTR) {
  }
  return g_signal.load();
}

void RequestShutdown() { sem_post(&g_shutdown); }

}  // namespace superserve
