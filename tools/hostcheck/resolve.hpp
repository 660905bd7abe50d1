#pragma once
// Name resolution of every host, in parallel and bounded in time: getaddrinfo cannot be cancelled, so it runs on
// worker threads that own their state, and the caller stops waiting at the deadline.
//
// "Same machine" groups are the names that lead to one machine: names sharing an address, or names that all resolve
// to this machine (loopback, or an address of one of its interfaces). Two such names in a hostfile make MPI place
// ranks as if there were two nodes: silent oversubscription.

#include "mpi_launcher/child_process.hpp"

#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

struct Resolution {
    std::vector<std::string> addresses;  // numeric, IPv4 and IPv6, in resolver order without repeats
    std::optional<std::string> error;    // the resolver's message when the name does not resolve
    bool timed_out = false;
};

[[nodiscard]] std::vector<Resolution> resolve_names(const std::vector<std::string>& names, std::size_t parallel,
                                                    mpi_launcher::Clock::time_point deadline);

// Addresses of this machine's interfaces, plus the loopback addresses.
[[nodiscard]] std::vector<std::string> local_addresses();

// Groups (of indices into names) with two or more different names that reach one machine. `local` are this
// machine's addresses: every name resolving only to them is this machine.
[[nodiscard]] std::vector<std::vector<std::size_t>> same_machine_groups(const std::vector<std::string>& names,
                                                                        const std::vector<Resolution>& resolutions,
                                                                        const std::vector<std::string>& local);

}  // namespace lockstep::hostcheck
