#include "pipesim/sim/core/memory_budget.hpp"
#include "pipesim/sim/core/units.hpp"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

namespace pipesim::sim {

namespace {
struct Usable {
  double bytes = 0;
  const char* what = "physical memory";
};

Usable usable() {
  Usable u{static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE))};
  const std::pair<int, const char*> limits[] = {{RLIMIT_AS, "address-space limit (ulimit -v)"},
                                                {RLIMIT_DATA, "data limit (ulimit -d)"}};
  for (const auto& [resource, what] : limits) {
    rlimit limit{};
    if (::getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        static_cast<double>(limit.rlim_cur) < u.bytes)
      u = {static_cast<double>(limit.rlim_cur), what};
  }
  return u;
}
}  // namespace

double usable_memory_bytes() {
  return usable().bytes;
}

double default_memory_budget_bytes() {
  return 0.5 * usable_memory_bytes();
}

void configure_allocator() {
  rlimit as{}, data{};
  const bool limited = (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
                       (::getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
  if (limited) {
    // glibc reserves 64-128 MiB of address space for each thread's malloc arena; under a small limit the
    // reservation fails and every allocation of a worker thread retries it (a plan search took minutes
    // instead of a second under 64 MiB). One arena keeps allocation working within the limit.
    ::mallopt(M_ARENA_MAX, 1);
    return;
  }
  // A plan search builds and frees megabytes per candidate (the partition search's cut graph). glibc hands
  // such blocks back to the kernel when they are freed (mapped on their own above its threshold, or trimmed
  // from the top of the heap), and the next candidate faults them in again page by page: 190 K page faults,
  // an eighth of the GPT-3 search on 8,192 GPUs. Blocks up to 8 MiB now come from the heap, and up to 32 MiB
  // freed at its top stay there for the next one (9 K page faults; peak memory +13 MB for that search, none
  // for the Llama-3-70B one on 1,024 GPUs).
  ::mallopt(M_MMAP_THRESHOLD, 8 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 32 << 20);
}

std::string memory_limit_text() {
  const Usable u = usable();
  return fmt::format("{:.1f} GiB of {}", u.bytes / kBytesPerGiB, u.what);
}

}  // namespace pipesim::sim
