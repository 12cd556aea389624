// Multi-node replay loads the MPI transport module on demand: linked in, MPI's libraries (OpenMPI, hwloc,
// libevent) would load and initialise at every pipesim process's start, replay or not.
#include <dlfcn.h>

#include <array>
#include <string>

#include "mpi_transport_abi.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/install_paths.hpp"
#include "transport.hpp"

namespace pipesim::replay {

std::unique_ptr<Transport> make_mpi_transport() {
  // RTLD_GLOBAL: OpenMPI's own plugins, which it opens at MPI_Init, resolve their symbols against libmpi.
  const std::string file = PIPESIM_MPI_MODULE_FILE;
  const std::string path = sim::find_module(file);
  const std::string valid = "; valid here: one node, without " + sim::spelled(sim::Option{"mpi"});
  if (path.empty())
    throw sim::InputError(sim::Option{"mpi"}, "",
                          "cannot load the MPI transport module: " + sim::module_search_text(file) + valid);
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (module == nullptr) {
    const char* why = dlerror();
    throw sim::InputError(
        sim::Option{"mpi"}, "",
        "cannot load the MPI transport module " + path + ": " + (why ? why : "unknown error") + valid);
  }
  auto make = reinterpret_cast<MakeMpiTransport>(dlsym(module, kMakeMpiTransportSymbol));
  if (make == nullptr)
    throw sim::InputError(sim::Option{"mpi"}, "",
                          "the MPI transport module has no entry point; rebuild pipesim");
  std::array<char, 512> error{};
  Transport* transport = make(error.data(), error.size());
  if (transport == nullptr) throw sim::InputError(sim::Option{"mpi"}, "", error.data());
  return std::unique_ptr<Transport>(transport);  // the module stays loaded: MPI finalizes at the end
}

}  // namespace pipesim::replay
