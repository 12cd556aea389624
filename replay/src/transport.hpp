// Multi-node replay: one process per node of the plan, each running the streams of its node's devices. What
// the executor and the host backend need from the processes' messaging (MPI in mpi_transport.cpp): op
// completions and collective arrivals for the other nodes, cross-node transfer bytes, a common clock and the
// gathering of every node's op times on rank 0.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace pipesim::replay {

class Transport {
 public:
  enum class Message : std::int32_t { kDone = 1, kArrive = 2 };
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  /// Starts the thread that receives messages; `on_message(kind, value)` runs on it.
  virtual void listen(std::function<void(Message, std::int64_t)> on_message) = 0;
  virtual void send(int to, Message kind, std::int64_t value) = 0;
  /// Moves `bytes` to node `to` (a cross-node transfer); returns when they were sent.
  virtual void send_bytes(int to, std::int64_t bytes) = 0;
  virtual void barrier() = 0;
  /// This process's steady clock minus rank 0's, in ns (ping-pong estimate; 0 on rank 0).
  virtual std::int64_t clock_offset_ns() = 0;
  /// Rank 0 gets every rank's (op, start, end) triples appended to `all`; other ranks send theirs.
  virtual void gather(const std::vector<std::int64_t>& mine, std::vector<std::int64_t>& all) = 0;
};

/// The MPI transport (MPI_Init_thread with MPI_THREAD_MULTIPLE); throws sim::InputError when pipesim was
/// built without MPI or the library does not give multi-threaded support.
std::unique_ptr<Transport> make_mpi_transport();

}  // namespace pipesim::replay
