// Built without MPI: multi-node replay says so.
#include "pipesim/sim/core/error.hpp"
#include "transport.hpp"

namespace pipesim::replay {

std::unique_ptr<Transport> make_mpi_transport() {
  throw sim::InputError(
      sim::Option{"mpi"}, "",
      "pipesim was built without MPI (install libopenmpi-dev and rebuild); valid here: one node, "(
          "without " + sim::spelled(sim::Option{"mpi"})));
}

}  // namespace pipesim::replay
