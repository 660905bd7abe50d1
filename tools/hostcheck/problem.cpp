#include "problem.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <utility>

namespace lockstep::hostcheck {

namespace {
constexpr std::array<std::pair<Problem, std::string_view>, 13> names{{
    {Problem::Dns, "dns"},
    {Problem::Refused, "refused"},
    {Problem::Timeout, "timeout"},
    {Problem::NoRoute, "no_route"},
    {Problem::HostKeyUnknown, "host_key_unknown"},
    {Problem::HostKeyChanged, "host_key_changed"},
    {Problem::AuthDenied, "auth_denied"},
    {Problem::KeyPermissions, "key_permissions"},
    {Problem::ConnectionClosed, "connection_closed"},
    {Problem::RemoteMpiMissing, "remote_mpi_missing"},
    {Problem::SameMachine, "same_machine"},
    {Problem::MpiMismatch, "mpi_mismatch"},
    {Problem::Other, "other"},
}};

// Patterns in the order they are tried; the texts are OpenSSH's (client, 7.x to 9.x) and glibc's resolver messages.
constexpr std::array<std::pair<Problem, std::string_view>, 26> patterns{{
    {Problem::KeyPermissions, "are too open"},
    {Problem::KeyPermissions, "UNPROTECTED PRIVATE KEY FILE"},
    {Problem::KeyPermissions, "Bad owner or permissions on"},
    {Problem::HostKeyChanged, "has changed and you have requested strict checking"},
    {Problem::HostKeyChanged, "REMOTE HOST IDENTIFICATION HAS CHANGED"},
    {Problem::HostKeyChanged, "POSSIBLE DNS SPOOFING DETECTED"},
    {Problem::HostKeyUnknown, "host key is known for"},
    {Problem::HostKeyUnknown, "Host key verification failed"},
    {Problem::AuthDenied, "Permission denied"},
    {Problem::AuthDenied, "Too many authentication failures"},
    {Problem::AuthDenied, "No more authentication methods"},
    {Problem::Dns, "Could not resolve hostname"},
    {Problem::Dns, "Name or service not known"},
    {Problem::Dns, "Temporary failure in name resolution"},
    {Problem::Dns, "nodename nor servname provided"},
    {Problem::Dns, "No address associated with hostname"},
    {Problem::Refused, "Connection refused"},
    {Problem::NoRoute, "No route to host"},
    {Problem::NoRoute, "Network is unreachable"},
    {Problem::Timeout, "Connection timed out"},
    {Problem::Timeout, "timed out during banner exchange"},
    {Problem::Timeout, "Operation timed out"},
    {Problem::ConnectionClosed, "kex_exchange_identification"},
    {Problem::ConnectionClosed, "ssh_exchange_identification"},
    {Problem::ConnectionClosed, "Connection reset by peer"},
    {Problem::ConnectionClosed, "Connection closed by"},
}};

std::string line_around(std::string_view text, std::size_t at) {
    const std::size_t begin = text.rfind('\n', at);
    const std::size_t end = text.find('\n', at);
    const std::size_t b = begin == std::string_view::npos ? 0 : begin + 1;
    std::string line(text.substr(b, end == std::string_view::npos ? text.npos : end - b));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    return line;
}

std::string last_line(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
    if (text.empty()) return {};
    return line_around(text, text.size() - 1);
}

}  // namespace

std::string_view to_string(Problem p) noexcept {
    for (const auto& [code, name] : names) {
        if (code == p) return name;
    }
    return "other";
}

std::optional<Problem> problem_from_string(std::string_view code) noexcept {
    for (const auto& [p, name] : names) {
        if (name == code) return p;
    }
    return std::nullopt;
}

Classification classify_ssh_error(std::string_view ssh_stderr) {
    for (const auto& [problem, pattern] : patterns) {
        if (const auto at = ssh_stderr.find(pattern); at != std::string_view::npos) {
            return {problem, line_around(ssh_stderr, at)};
        }
    }
    return {Problem::Other, last_line(ssh_stderr)};
}

int ssh_port_in(std::string_view evidence) noexcept {
    constexpr std::string_view mark = "port ";
    for (std::size_t at = evidence.find(mark); at != std::string_view::npos; at = evidence.find(mark, at + 1)) {
        const std::size_t start = at + mark.size();
        std::size_t end = start;
        while (end < evidence.size() && std::isdigit(static_cast<unsigned char>(evidence[end])) != 0) ++end;
        if (end == start) continue;
        int port = 0;
        const auto [stop, ec] = std::from_chars(evidence.data() + start, evidence.data() + end, port);
        return ec == std::errc{} && port >= 1 && port <= 65535 ? port : 22;
    }
    return 22;
}

std::string remedy_for(Problem p, const RemedyContext& c) {
    const std::string port_flag = c.port != 22 ? fmt::format("-p {} ", c.port) : "";
    const std::string login = c.user.empty() ? c.host : c.user + "@" + c.host;
    const std::string known_hosts = c.known_hosts.empty() ? "~/.ssh/known_hosts" : c.known_hosts;
    const std::string key_entry = c.port != 22 ? fmt::format("[{}]:{}", c.host, c.port) : c.host;
    switch (p) {
        case Problem::Dns:
            return fmt::format(
                "'{}' does not resolve here: correct the name in the hostfile, or add it to DNS or "
                "/etc/hosts on every node ('getent hosts {}' must answer)",
                c.host, c.host);
        case Problem::Refused:
            return fmt::format(
                "nothing accepts connections on {} port {}: start sshd there (systemctl start ssh), or "
                "if it listens on another port set Port for this host in ~/.ssh/config",
                c.host, c.port);
        case Problem::Timeout:
            return fmt::format(
                "{} did not answer in time: check that it is up, that no firewall drops port {}, and "
                "that its sshd is not hung; raise --timeout for slow links",
                c.host, c.port);
        case Problem::NoRoute:
            return fmt::format(
                "no network path to {}: check its address and this machine's routes "
                "('ip route get ADDRESS')",
                c.host);
        case Problem::HostKeyUnknown:
            return fmt::format(
                "{}'s host key is not in {}: check its fingerprint on the node (ssh-keygen -lf "
                "/etc/ssh/ssh_host_ed25519_key.pub), then add it with 'ssh-keyscan {}{} >> {}'; every "
                "node needs every other node's key too, so share one known_hosts file",
                c.host, known_hosts, port_flag, c.host, known_hosts);
        case Problem::HostKeyChanged:
            return fmt::format(
                "{} shows another host key than {} records: if the node was reinstalled, remove the old "
                "entry with \"ssh-keygen -R '{}' -f {}\" and add the new one after checking it; if not, "
                "treat it as a possible attack",
                c.host, known_hosts, key_entry, known_hosts);
        case Problem::AuthDenied:
            return fmt::format(
                "{} refused every key offered: authorise yours with 'ssh-copy-id {}-i {}.pub {}', check "
                "that ~/.ssh on the node is not group- or world-writable, and if the key has a "
                "passphrase load it with ssh-add",
                c.host, port_flag, c.key_file.empty() ? "~/.ssh/id_ed25519" : c.key_file, login);
        case Problem::KeyPermissions:
            return fmt::format("ssh ignores {} because others can read it: chmod 600 {} (and chmod 700 ~/.ssh)",
                               c.key_file.empty() ? "the private key" : c.key_file,
                               c.key_file.empty() ? "KEYFILE" : c.key_file);
        case Problem::ConnectionClosed:
            return fmt::format(
                "{} closed the connection before authentication: its sshd may be at MaxStartups (lower "
                "--fanout, or raise MaxStartups in its sshd_config), or AllowUsers, DenyUsers or "
                "/etc/hosts.deny refuse this client",
                c.host);
        case Problem::RemoteMpiMissing:
            return fmt::format(
                "ssh works, but {} is not on {}'s non-interactive PATH (the PATH of 'ssh {} cmd', which "
                "skips login scripts): install MPI there, or set PATH in ~/.bashrc above its "
                "interactive-only return, or start Open MPI's mpirun by its absolute path or with "
                "--prefix, which sets the nodes' PATH for its daemons",
                c.missing_daemon.empty() ? "the MPI launcher" : c.missing_daemon, c.host, c.host);
        case Problem::SameMachine:
            return "these names reach one machine, which MPI would count as separate nodes and oversubscribe: list the "
                   "machine once, with slots=N";
        case Problem::MpiMismatch:
            return "install the same MPI implementation and version on every node, or put the same one first on the "
                   "non-interactive PATH";
        case Problem::Other:
            return fmt::format("read the evidence; 'ssh -vvv -o BatchMode=yes {}{} true' shows each step", port_flag,
                               login);
    }
    return {};
}

std::string clip_evidence(std::string_view text, std::size_t max_bytes) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
    if (text.size() <= max_bytes) return std::string(text);
    std::string_view tail = text.substr(text.size() - max_bytes);
    // Cut at a line start so that the evidence does not begin mid-word.
    if (const auto nl = tail.find('\n'); nl != std::string_view::npos && nl + 1 < tail.size())
        tail.remove_prefix(nl + 1);
    return "[...]\n" + std::string(tail);
}

}  // namespace lockstep::hostcheck
