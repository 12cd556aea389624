// The MPI transport of multi-node replay, a module of its own (built when CMake finds MPI; Debian's
// OpenMPI) that pipesim loads only for `replay --mpi`: every other command starts without MPI's libraries.
// Control messages are one int64; transfer bytes go as MPI messages of up to 16 MB that a receiver thread
// drains.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include <mpi.h>

#include "mpi_transport_abi.hpp"
#include "pipesim/calibrate/operand_values.hpp"
#include "transport.hpp"

namespace pipesim::replay {

namespace {

constexpr int kTagData = 10, kTagStop = 11, kTagClock = 12;
constexpr std::int64_t kChunk = std::int64_t{16} << 20;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (!initialized)
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    else
      MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      throw std::runtime_error(
          "the MPI library does not support MPI_THREAD_MULTIPLE; valid: an MPI that does (OpenMPI 4)");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
    data_.resize(static_cast<std::size_t>(kChunk));
    sink_.resize(static_cast<std::size_t>(kChunk));
    for (std::size_t i = 0; i < data_.size(); ++i)
      data_[i] = static_cast<char>(calibrate::operand_byte(11, i));
  }

  ~MpiTransport() override {
    if (listener_.joinable()) {
      std::int64_t stop = 0;
      MPI_Send(&stop, 1, MPI_INT64_T, rank_, kTagStop, MPI_COMM_WORLD);
      listener_.join();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }

  void listen(std::function<void(Message, std::int64_t)> on_message) override {
    listener_ = std::thread([this, on = std::move(on_message)] {
      for (;;) {
        MPI_Status st;
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == kTagData) {
          int count = 0;
          MPI_Get_count(&st, MPI_BYTE, &count);
          MPI_Recv(sink_.data(), count, MPI_BYTE, st.MPI_SOURCE, kTagData, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          continue;
        }
        std::int64_t value = 0;
        MPI_Recv(&value, 1, MPI_INT64_T, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (st.MPI_TAG == kTagStop) return;
        on(static_cast<Message>(st.MPI_TAG), value);
      }
    });
  }

  void send(int to, Message kind, std::int64_t value) override {
    MPI_Send(&value, 1, MPI_INT64_T, to, static_cast<int>(kind), MPI_COMM_WORLD);
  }

  void send_bytes(int to, std::int64_t bytes) override {
    for (std::int64_t left = bytes; left > 0;) {
      const auto n = static_cast<int>(std::min(left, kChunk));
      MPI_Send(data_.data(), n, MPI_BYTE, to, kTagData, MPI_COMM_WORLD);
      left -= n;
    }
  }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  std::int64_t clock_offset_ns() override {
    // Rank 0 pings every rank a few times; the reply with the shortest round trip gives the offset.
    std::int64_t mine = 0;
    for (int r = 1; r < ranks_; ++r) {
      if (rank_ == 0) {
        std::int64_t best_rtt = INT64_MAX, offset = 0;
        for (int k = 0; k < 16; ++k) {
          const std::int64_t t1 = steady_ns();
          std::int64_t theirs = 0;
          MPI_Send(&t1, 1, MPI_INT64_T, r, kTagClock, MPI_COMM_WORLD);
          MPI_Recv(&theirs, 1, MPI_INT64_T, r, kTagClock, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          const std::int64_t t2 = steady_ns();
          if (t2 - t1 < best_rtt) best_rtt = t2 - t1, offset = theirs - (t1 + t2) / 2;
        }
        MPI_Send(&offset, 1, MPI_INT64_T, r, kTagClock, MPI_COMM_WORLD);
      } else if (rank_ == r) {
        for (int k = 0; k < 16; ++k) {
          std::int64_t t1 = 0;
          MPI_Recv(&t1, 1, MPI_INT64_T, 0, kTagClock, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          const std::int64_t now = steady_ns();
          MPI_Send(&now, 1, MPI_INT64_T, 0, kTagClock, MPI_COMM_WORLD);
        }
        MPI_Recv(&mine, 1, MPI_INT64_T, 0, kTagClock, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    }
    return mine;
  }

  void gather(const std::vector<std::int64_t>& mine, std::vector<std::int64_t>& all) override {
    const int n = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(ranks_)), displs(static_cast<std::size_t>(ranks_));
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < ranks_; ++r) {
      displs[static_cast<std::size_t>(r)] = total;
      total += counts[static_cast<std::size_t>(r)];
    }
    std::vector<std::int64_t> buf(rank_ == 0 ? static_cast<std::size_t>(total) : 0);
    MPI_Gatherv(mine.data(), n, MPI_INT64_T, buf.data(), counts.data(), displs.data(), MPI_INT64_T, 0,
                MPI_COMM_WORLD);
    all.insert(all.end(), buf.begin(), buf.end());
  }

 private:
  int rank_ = 0, ranks_ = 1;
  std::thread listener_;
  std::vector<char> data_, sink_;
};

}  // namespace

}  // namespace pipesim::replay

extern "C" __attribute__((visibility("default"))) pipesim::replay::Transport* pipesim_make_mpi_transport(
    char* error, std::size_t error_size) noexcept {
  try {
    return new pipesim::replay::MpiTransport();
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
  } catch (...) {
    std::snprintf(error, error_size, "MPI could not be started");
  }
  return nullptr;
}
