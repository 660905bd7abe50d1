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
    std::string canonical_name;          // the resolver's canonical name (the FQDN), empty when it gave none
    std::optional<std::string> error;    // the resolver's message when the name does not resolve
    bool timed_out = false;
};

[[nodiscard]] std::vector<Resolution> resolve_names(const std::vector<std::string>& names, std::size_t parallel,
                                                    mpi_launcher::Clock::time_point deadline);

// Addresses of this machine's interfaces, plus the loopback addresses.
[[nodiscard]] std::vector<std::string> local_addresses();

// This machine as the MPI launchers recognise it. Open MPI (opal_ifislocal) and Hydra (HYDU_sock_is_local) start a
// hostfile host's processes without ssh when it is named `localhost` or this machine's name, or when it resolves to
// an address of one of this machine's interfaces (127.0.0.1 and ::1 included). Other 127.x addresses are not this
// machine to them: 127.0.0.2 reaches it through the loopback route, but mpirun starts ssh for it as for any host.
struct ThisMachine {
    std::vector<std::string> names;      // localhost, uname -n, its short form and its canonical name; lower case
    std::vector<std::string> addresses;  // local_addresses()
};

// `canonical_name`: the resolver's canonical name for uname -n, when it was looked up.
[[nodiscard]] ThisMachine this_machine(const std::string& canonical_name = {});

// This machine's name, as uname -n gives it.
[[nodiscard]] std::string this_machine_name();

// Why `host` is this machine ("localhost", "this machine's name", "an address of this machine: 192.0.2.2"), or
// nullopt when the launchers would reach it over ssh. `resolution` is the host's, when it was resolved.
[[nodiscard]] std::optional<std::string> local_reason(const std::string& host, const Resolution* resolution,
                                                      const ThisMachine& machine);

// Groups (of indices into names) with two or more different names that reach one machine. `local` are this
// machine's addresses: every name resolving only to them is this machine.
[[nodiscard]] std::vector<std::vector<std::size_t>> same_machine_groups(const std::vector<std::string>& names,
                                                                        const std::vector<Resolution>& resolutions,
                                                                        const std::vector<std::string>& local);

}  // namespace lockstep::hostcheck
