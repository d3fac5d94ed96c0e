// ThreadSanitizer annotations for Debian's Abseil synchronization library.
//
// Why: Debian builds libabsl_synchronization.so without -fsanitize=thread, so
// absl::Mutex, absl::CondVar and absl::Notification synchronise through
// atomics and futexes that ThreadSanitizer never sees. Every access that our
// code (or gRPC, which also uses absl::Mutex) guards with an absl::Mutex would
// then be reported as a data race. ThreadSanitizer does intercept pthread and
// std:: primitives; this file gives absl's the same happens-before edges:
// each wrapper calls the real function (found with dlsym(RTLD_NEXT)) and adds
// __tsan_acquire / __tsan_release on the object's address, exactly what
// Abseil's own ABSL_TSAN_MUTEX_* annotations do in an instrumented build.
//
// How: this is a shared library that the -DSUPERSERVE_SANITIZE=thread build
// links ahead of Abseil into every executable, so the dynamic linker binds
// these definitions first, for our code, gRPC and Abseil alike. It changes
// no behaviour: every call still runs Abseil's implementation.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/config.h"
#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

extern "C" {
void __tsan_acquire(void* addr);
void __tsan_release(void* addr);
}

namespace {

// The real definition of an Abseil symbol, by its mangled name with the
// inline namespace (e.g. "debian3") spliced in: `head` is the part after
// "_ZN4absl" + <namespace>, or after "_ZNK4absl" + <namespace> when `is_const`.
void* Real(const char* head, bool is_const = false) {
  const std::string ns = ABSL_INTERNAL_TOKEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(is_const ? "_ZNK4absl" : "_ZN4absl") +
                           std::to_string(ns.size()) + ns + head;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan_annotations: %s not found\n", name.c_str());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn RealFn(const char* head, bool is_const = false) {
  return reinterpret_cast<Fn>(Real(head, is_const));
}

// Abseil evaluates a Condition with the mutex held but inside its own code
// (in the waiter after it re-acquires, or in the thread that unlocks), and a
// waiter whose condition is false then releases the mutex inside Abseil too.
// So the condition is wrapped: acquire before it reads, release after (a
// release while still holding the mutex adds no edge a later Unlock would
// not add anyway).
struct AnnotatedCondition {
  const absl::Condition* condition;
  absl::Mutex* mu;
  static bool Eval(AnnotatedCondition* self) {
    __tsan_acquire(self->mu);
    const bool met = self->condition->Eval();
    __tsan_release(self->mu);
    return met;
  }
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = RealFn<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() {
  static auto real = RealFn<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::ReaderTryLock() {
  static auto real = RealFn<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = RealFn<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  AnnotatedCondition ctx{&cond, this};
  real(this, Condition(&AnnotatedCondition::Eval, &ctx));
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = RealFn<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  AnnotatedCondition ctx{&cond, this};
  bool met = real(this, Condition(&AnnotatedCondition::Eval, &ctx), timeout);
  __tsan_acquire(this);  // held on return either way
  return met;
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real =
      RealFn<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  AnnotatedCondition ctx{&cond, this};
  real(this, Condition(&AnnotatedCondition::Eval, &ctx));
  __tsan_acquire(this);
}

// Await releases the mutex while it waits and holds it again on return.
void Mutex::Await(const Condition& cond) {
  static auto real = RealFn<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  AnnotatedCondition ctx{&cond, this};
  real(this, Condition(&AnnotatedCondition::Eval, &ctx));
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = RealFn<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  AnnotatedCondition ctx{&cond, this};
  bool met = real(this, Condition(&AnnotatedCondition::Eval, &ctx), timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = RealFn<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  AnnotatedCondition ctx{&cond, this};
  bool met = real(this, Condition(&AnnotatedCondition::Eval, &ctx), deadline);
  __tsan_acquire(this);
  return met;
}

// CondVar waits release the mutex while waiting, like Await.
void CondVar::Wait(Mutex* mu) {
  static auto real = RealFn<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = RealFn<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = RealFn<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

// A Notification's first member is its atomic flag, which the inline
// HasBeenNotified() reads with an (instrumented) acquire load: releasing on
// `this` publishes Notify()'s prior writes to both kinds of waiter.
void Notification::Notify() {
  static auto real = RealFn<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static auto real =
      RealFn<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static auto real = RealFn<bool (*)(const Notification*, absl::Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", true);
  bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static auto real = RealFn<bool (*)(const Notification*, absl::Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", true);
  bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
