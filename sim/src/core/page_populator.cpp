#include "core/page_populator.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>

#if defined(__linux__)
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include <cerrno>
#if !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older headers lack the name, older kernels answer EINVAL
#endif
#endif

namespace pipesim::sim {
namespace {

#if defined(__linux__)

/// One request is worked through a huge page at a time, so that a block given back waits at most for one.
constexpr std::uintptr_t kStep = kHugePageBytes;
constexpr std::uintptr_t kPage = 4096;

struct Range {
  std::uintptr_t begin = 0, end = 0;
  bool overlaps(std::uintptr_t b, std::uintptr_t e) const { return begin < e && b < end; }
};

struct State {
  std::mutex mutex;
  std::condition_variable queued;   // a request arrived
  std::condition_variable stepped;  // the step in progress ended
  std::deque<Range> requests;
  Range busy;  // the step in progress, empty when none
  bool started = false;
  bool unavailable = false;  // no thread could be started, or the kernel cannot populate
};

// Never destroyed (static destructors may still free blocks); replaced in a forked child, whose copy of the
// mutex and condition variables may be held by a thread that does not exist there.
State* g_state = new State;
State* g_abandoned = nullptr;  // the parent's state in a forked child, kept reachable

void* populate_loop(void*) {
  State& s = *g_state;
  std::unique_lock<std::mutex> lock(s.mutex);
  for (;;) {
    s.queued.wait(lock, [&s] { return !s.requests.empty(); });
    Range& r = s.requests.front();
    const std::uintptr_t begin = r.begin;
    const std::uintptr_t end = std::min(r.end, (begin & ~(kStep - 1)) + kStep);
    r.begin = end;
    if (r.begin >= r.end) s.requests.pop_front();
    s.busy = {begin, end};
    lock.unlock();
    const int failed = madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
    const int error = failed != 0 ? errno : 0;
    lock.lock();
    s.busy = {};
    if (error == EINVAL || error == ENOSYS) {  // a kernel before 5.14: nothing will be populated
      s.unavailable = true;
      s.requests.clear();
    }
    s.stepped.notify_all();
  }
  return nullptr;
}

void before_fork() {
  g_state->mutex.lock();
}
void after_fork_parent() {
  g_state->mutex.unlock();
}
void after_fork_child() {
  g_abandoned = g_state;
  g_state = new State;
}

/// Starts the thread; the caller holds the mutex. Its signals stay blocked (they go to the caller's
/// threads), and its stack is small: it only calls madvise.
void start_thread(State& s) {
  s.started = true;
  static const bool registered = pthread_atfork(before_fork, after_fork_parent, after_fork_child) == 0;
  pthread_attr_t attr;
  if (!registered || pthread_attr_init(&attr) != 0) {
    s.unavailable = true;
    return;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const bool ok = pthread_attr_setstacksize(&attr, std::size_t{64} << 10) == 0 &&
                  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                  pthread_create(&thread, &attr, populate_loop, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (!ok) s.unavailable = true;
}

#endif

}  // namespace

void populate_async(const void* p, std::size_t bytes) noexcept {
#if defined(__linux__)
  if (bytes == 0) return;
  // Whole pages inside the block: blocks are aligned to and sized in huge pages.
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const Range r{at & ~(kPage - 1), (at + bytes + kPage - 1) & ~(kPage - 1)};
  State& s = *g_state;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.started) start_thread(s);
    if (s.unavailable) return;
    try {
      s.requests.push_back(r);
    } catch (...) {  // out of memory: the pages are backed when touched, as without this
      return;
    }
  }
  s.queued.notify_one();
#else
  (void)p, (void)bytes;
#endif
}

void forget_populate(const void* block, std::size_t bytes) noexcept {
#if defined(__linux__)
  const auto begin = reinterpret_cast<std::uintptr_t>(block);
  const std::uintptr_t end = begin + bytes;
  State& s = *g_state;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!s.started) return;
  std::erase_if(s.requests, [&](const Range& r) { return r.overlaps(begin, end); });
  s.stepped.wait(lock, [&] { return !s.busy.overlaps(begin, end); });
#else
  (void)block, (void)bytes;
#endif
}

bool wait_for_populate() noexcept {
#if defined(__linux__)
  State& s = *g_state;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.stepped.wait(lock, [&] { return s.requests.empty() && s.busy.begin == s.busy.end; });
  return s.started && !s.unavailable;
#else
  return false;
#endif
}

}  // namespace pipesim::sim
