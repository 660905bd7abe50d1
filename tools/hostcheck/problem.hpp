#pragma once
// The problem codes of hostcheck and the classification of ssh's own error text into them. Each code has one fixed
// remedy template; the evidence is always the exact text ssh (or the remote shell) printed, so a user can search for
// it. Codes are part of the JSON schema (docs/hostcheck.md): append, never rename.

#include <optional>
#include <string>
#include <string_view>

namespace lockstep::hostcheck {

enum class Problem {
    Dns,               // the name does not resolve
    Refused,           // nothing listens on the ssh port
    Timeout,           // no answer in time: filtered port, a hung sshd, a host that is down
    NoRoute,           // no route to host / network unreachable
    HostKeyUnknown,    // the host key is not in known_hosts and strict checking is on
    HostKeyChanged,    // known_hosts holds another key for this host
    AuthDenied,        // the server refused every key
    KeyPermissions,    // ssh ignored a private key (or config) because others can read it
    ConnectionClosed,  // the server closed the connection before authentication (MaxStartups, TCP wrappers)
    RemoteMpiMissing,  // ssh works but the MPI launcher daemons are not on the non-interactive PATH
    SameMachine,       // two different names reach the same machine: silent oversubscription
    MpiMismatch,       // the node runs another MPI implementation or version than the launching node
    Other,             // anything else; the evidence says what
};

[[nodiscard]] std::string_view to_string(Problem p) noexcept;
[[nodiscard]] std::optional<Problem> problem_from_string(std::string_view code) noexcept;

// What ssh printed, sorted into a code. `line` is the line of the text that decided it (empty when none did), the
// line a table shows.
struct Classification {
    Problem problem = Problem::Other;
    std::string line;
};

// Classifies the stderr of an ssh that failed (exit 255, no sentinel). Order matters: a key with bad permissions
// is reported before the "Permission denied" it causes, a changed key before "Host key verification failed", which
// both print.
[[nodiscard]] Classification classify_ssh_error(std::string_view ssh_stderr);

// The port ssh names in its own message ("connect to host h port 2222: ..."), 22 when it names none (or one that is
// not a port). Read by hand: the text comes from ssh and the remote side, and may be of any length.
[[nodiscard]] int ssh_port_in(std::string_view evidence) noexcept;

// Facts a remedy is written with.
struct RemedyContext {
    std::string host;  // as in the hostfile
    std::string user;  // login name, empty when ssh decides
    int port = 22;
    std::string known_hosts;     // the UserKnownHostsFile ssh uses, when known
    std::string key_file;        // the private key concerned, when known
    std::string missing_daemon;  // orted, prted, hydra_pmi_proxy ...
};

// One or two sentences: what to do, with the command to run where there is one.
[[nodiscard]] std::string remedy_for(Problem p, const RemedyContext& context);

// Keeps the last `max_bytes` of a text (ssh's decisive line is at the end), marking the cut.
[[nodiscard]] std::string clip_evidence(std::string_view text, std::size_t max_bytes = 4096);

}  // namespace lockstep::hostcheck
