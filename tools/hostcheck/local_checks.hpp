#pragma once
// Checks on the launching node that explain an authentication or host-key failure further than ssh's one line:
// which identity files ssh would offer (from `ssh -G`, which applies the user's config for that host), whether they
// exist and are private, whether a passphrase-protected key has an agent holding it, and whether known_hosts has an
// entry under the name or under the address.

#include "mpi_launcher/child_process.hpp"
#include "problem.hpp"
#include "ssh_agent.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::hostcheck {

// The part of `ssh -G` output these checks use.
struct SshClientConfig {
    std::string hostname;
    int port = 22;
    std::string user;
    std::vector<std::string> identity_files;     // ~ expanded
    std::vector<std::string> known_hosts_files;  // ~ expanded
    std::string strict_host_key_checking;
};

[[nodiscard]] SshClientConfig parse_ssh_config_dump(std::string_view ssh_g_output);

// The first `SHA256:...` fingerprint in ssh-keygen's output; empty when there is none.
[[nodiscard]] std::string sha256_fingerprint(std::string_view ssh_keygen_output);

// The key file ssh names in "Permissions 0644 for 'KEY' are too open"; empty when the text says no such thing.
[[nodiscard]] std::string key_file_too_open(std::string_view ssh_stderr);

// The host key entry name ssh looks up: "host" on port 22, "[host]:port" otherwise.
[[nodiscard]] std::string known_hosts_entry(const std::string& host, int port);

struct LocalFindings {
    std::vector<std::string> details;  // one finding per line, e.g. "no known_hosts entry for '[a]:2222' in ..."
    RemedyContext context;             // port, user, key file and known_hosts file for the remedy
    std::optional<Problem> refined;    // a more precise code found here (key_permissions under auth_denied)
};

// Caches per-key results, so that a thousand hosts that fail alike cost one check of each key.
class LocalChecker {
public:
    LocalChecker(SshAgent agent, mpi_launcher::Clock::time_point deadline);

    [[nodiscard]] LocalFindings explain(Problem problem, const std::string& host,
                                        const std::optional<std::string>& user,
                                        const std::vector<std::string>& addresses, const std::string& evidence);

private:
    std::optional<SshClientConfig> client_config(const std::string& host, const std::optional<std::string>& user);
    std::vector<std::string> key_findings(const std::string& key_file, bool& permissions_bad);
    std::string agent_state();

    SshAgent agent_;
    mpi_launcher::Clock::time_point deadline_;
    std::map<std::string, std::vector<std::string>> key_cache_;
    std::map<std::string, bool> key_permissions_cache_;
    std::optional<std::string> agent_cache_;
};

}  // namespace lockstep::hostcheck
