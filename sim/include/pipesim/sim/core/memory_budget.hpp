// How much memory this process may use: physical memory, or less under `ulimit -v` / `ulimit -d`. Plans are
// sized against half of it unless --max-memory says otherwise.
#pragma once

#include <string>

namespace pipesim::sim {

/// The smaller of physical memory and this process's address-space and data limits, in bytes.
double usable_memory_bytes();
/// Half of usable_memory_bytes(): the default budget of --max-memory.
double default_memory_budget_bytes();
/// Sets up the C allocator for a pipesim process; call first thing, before starting threads. Under an
/// address-space or data limit it keeps within it (one malloc arena for all threads); otherwise it keeps
/// freed memory for reuse instead of giving it back to the kernel (a process runs one job and exits).
void configure_allocator();
/// usable_memory_bytes() in words, e.g. "11.8 GiB of physical memory" or "a 1.0 GiB address-space limit".
std::string memory_limit_text();

}  // namespace pipesim::sim
