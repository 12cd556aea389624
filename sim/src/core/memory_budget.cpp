#include "pipesim/sim/memory_budget.hpp"

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

void fit_allocator_to_limits() {
  rlimit as{}, data{};
  const bool limited = (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
                       (::getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
  // glibc reserves 64-128 MiB of address space for each thread's malloc arena; under a small limit the
  // reservation fails and every allocation of a worker thread retries it (a plan search took minutes instead
  // of a second under 64 MiB). One arena keeps allocation working within the limit.
  if (limited) ::mallopt(M_ARENA_MAX, 1);
}

std::string memory_limit_text() {
  const Usable u = usable();
  return fmt::format("{:.1f} GiB of {}", u.bytes / 1073741824.0, u.what);
}

}  // namespace pipesim::sim
