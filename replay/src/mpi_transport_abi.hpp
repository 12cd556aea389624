// What pipesim calls in the MPI transport module (mpi_transport.cpp), looked up by name once it is loaded.
#pragma once

#include <cstddef>

#include "transport.hpp"

/// Starts MPI and returns the transport (owned by the caller, deleted through Transport's virtual
/// destructor); nullptr with a one-line reason in `error` when MPI cannot be used.
extern "C" pipesim::replay::Transport* pipesim_make_mpi_transport(char* error,
                                                                  std::size_t error_size) noexcept;
using MakeMpiTransport = decltype(&pipesim_make_mpi_transport);
inline constexpr const char* kMakeMpiTransportSymbol = "pipesim_make_mpi_transport";
