#include "local_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <sstream>

namespace lockstep::hostcheck {
namespace {

std::string expand_home(const std::string& path) {
    if (path.starts_with("~/")) {
        if (const char* home = std::getenv("HOME")) return std::string(home) + path.substr(1);
    }
    return path;
}

mpi_launcher::CommandResult run_quick(std::vector<std::string> argv, mpi_launcher::Clock::time_point deadline) {
    mpi_launcher::Command c;
    c.argv = std::move(argv);
    c.timeout = std::chrono::seconds(5);
    return mpi_launcher::run_command(c, deadline);
}

}  // namespace

SshClientConfig parse_ssh_config_dump(std::string_view text) {
    SshClientConfig cfg;
    std::istringstream in{std::string(text)};
    for (std::string line; std::getline(in, line);) {
        const auto space = line.find(' ');
        if (space == std::string::npos) continue;
        const std::string key = line.substr(0, space);
        const std::string value = line.substr(space + 1);
        if (key == "hostname") {
            cfg.hostname = value;
        } else if (key == "port") {
            int port = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), port);
            if (ec == std::errc{} && port >= 1 && port <= 65535) cfg.port = port;
        } else if (key == "user") {
            cfg.user = value;
        } else if (key == "identityfile") {
            cfg.identity_files.push_back(expand_home(value));
        } else if (key == "userknownhostsfile" || key == "globalknownhostsfile") {
            // User files first: that is where a remedy adds an entry. /dev/null is how configs switch a file off.
            std::vector<std::string> files;
            std::istringstream in_files(value);
            for (std::string f; in_files >> f;) {
                if (f != "/dev/null") files.push_back(expand_home(f));
            }
            auto where = key == "userknownhostsfile" ? cfg.known_hosts_files.begin() : cfg.known_hosts_files.end();
            cfg.known_hosts_files.insert(where, files.begin(), files.end());
        } else if (key == "stricthostkeychecking") {
            cfg.strict_host_key_checking = value;
        }
    }
    return cfg;
}

// These read text that ssh printed by hand, in one pass: std::regex recurses per character in libstdc++ and a long
// enough line overflows the stack.
std::string sha256_fingerprint(std::string_view text) {
    const auto at = text.find("SHA256:");
    if (at == std::string_view::npos) return {};
    std::size_t end = at + 7;
    while (end < text.size() && std::isspace(static_cast<unsigned char>(text[end])) == 0) ++end;
    if (end == at + 7) return {};
    return std::string(text.substr(at, end - at));
}

std::string key_file_too_open(std::string_view text) {
    constexpr std::string_view opening = "for '";
    constexpr std::string_view closing = "' are too open";
    for (std::size_t at = text.find(opening); at != std::string_view::npos; at = text.find(opening, at + 1)) {
        const std::size_t start = at + opening.size();
        const std::size_t quote = text.find('\'', start);
        if (quote == std::string_view::npos) return {};
        if (quote > start && text.substr(quote, closing.size()) == closing) {
            return std::string(text.substr(start, quote - start));
        }
    }
    return {};
}

std::string known_hosts_entry(const std::string& host, int port) {
    return port == 22 ? host : fmt::format("[{}]:{}", host, port);
}

LocalChecker::LocalChecker(SshAgent agent, mpi_launcher::Clock::time_point deadline)
    : agent_(std::move(agent)), deadline_(deadline) {}

std::optional<SshClientConfig> LocalChecker::client_config(const std::string& host,
                                                           const std::optional<std::string>& user) {
    if (!agent_.is_ssh) return std::nullopt;
    std::vector<std::string> argv = agent_.argv;
    argv.push_back("-G");
    if (user) {
        argv.push_back("-l");
        argv.push_back(*user);
    }
    argv.push_back(host);
    const auto r = run_quick(argv, deadline_);
    if (r.ending != mpi_launcher::CommandResult::Ending::Exited || r.exit_code != 0) return std::nullopt;
    return parse_ssh_config_dump(r.out);
}

std::string LocalChecker::agent_state() {
    if (agent_cache_) return *agent_cache_;
    const char* sock = std::getenv("SSH_AUTH_SOCK");
    if (sock == nullptr || *sock == '\0') {
        agent_cache_ = "no ssh-agent (SSH_AUTH_SOCK is not set)";
    } else {
        const auto r = run_quick({"ssh-add", "-l"}, deadline_);
        if (r.ending == mpi_launcher::CommandResult::Ending::Exited && r.exit_code == 0) {
            agent_cache_ = r.out;
        } else if (r.ending == mpi_launcher::CommandResult::Ending::Exited && r.exit_code == 1) {
            agent_cache_ = "the ssh-agent holds no key";
        } else {
            agent_cache_ = fmt::format("the ssh-agent at {} does not answer", sock);
        }
    }
    return *agent_cache_;
}

std::vector<std::string> LocalChecker::key_findings(const std::string& key_file, bool& permissions_bad) {
    if (auto it = key_cache_.find(key_file); it != key_cache_.end()) {
        permissions_bad = key_permissions_cache_[key_file];
        return it->second;
    }
    std::vector<std::string> out;
    permissions_bad = false;
    struct stat st {};
    if (::stat(key_file.c_str(), &st) != 0) {
        // ssh lists its default keys whether they exist or not: a missing one is only news if none exists.
        key_cache_[key_file] = {};
        key_permissions_cache_[key_file] = false;
        return {};
    }
    if ((st.st_mode & 077) != 0) {
        permissions_bad = true;
        out.push_back(fmt::format("{} has mode {:04o}: ssh ignores private keys that others can read", key_file,
                                  st.st_mode & 07777));
    }
    // An empty passphrase opens an unprotected key; a protected one fails with "incorrect passphrase".
    const auto r = run_quick({"ssh-keygen", "-y", "-P", "", "-f", key_file}, deadline_);
    const bool protected_key = r.ending == mpi_launcher::CommandResult::Ending::Exited && r.exit_code != 0 &&
                               r.err.find("passphrase") != std::string::npos;
    if (protected_key) {
        const std::string agent = agent_state();
        const auto fp = run_quick({"ssh-keygen", "-l", "-f", key_file}, deadline_);
        const std::string fingerprint = sha256_fingerprint(fp.out);
        if (agent.starts_with("no ssh-agent") || agent.starts_with("the ssh-agent")) {
            out.push_back(fmt::format("{} is protected by a passphrase and {}: in batch mode ssh cannot use it",
                                      key_file, agent));
        } else if (!fingerprint.empty() && agent.find(fingerprint) == std::string::npos) {
            out.push_back(
                fmt::format("{} is protected by a passphrase and the ssh-agent does not hold it "
                            "(ssh-add {})",
                            key_file, key_file));
        }
    }
    key_cache_[key_file] = out;
    key_permissions_cache_[key_file] = permissions_bad;
    return out;
}

LocalFindings LocalChecker::explain(Problem problem, const std::string& host, const std::optional<std::string>& user,
                                    const std::vector<std::string>& addresses, const std::string& evidence) {
    LocalFindings f;
    f.context.host = host;
    f.context.user = user.value_or("");
    const auto cfg = client_config(host, user);
    if (cfg) {
        f.context.port = cfg->port;
        if (f.context.user.empty()) f.context.user = cfg->user;
        if (!cfg->known_hosts_files.empty()) f.context.known_hosts = cfg->known_hosts_files.front();
    }
    // The key ssh named in its own warning is the one to fix.
    f.context.key_file = key_file_too_open(evidence);
    if (!cfg) return f;

    if (problem == Problem::AuthDenied || problem == Problem::KeyPermissions) {
        bool any_key = false;
        for (const auto& key : cfg->identity_files) {
            struct stat st {};
            if (::stat(key.c_str(), &st) == 0) {
                any_key = true;
                if (f.context.key_file.empty()) f.context.key_file = key;
            }
            bool bad = false;
            for (auto& line : key_findings(key, bad)) f.details.push_back(std::move(line));
            if (bad) {
                f.refined = Problem::KeyPermissions;
                f.context.key_file = key;
            }
        }
        if (!any_key && !cfg->identity_files.empty()) {
            f.details.push_back(
                fmt::format("none of the identity files ssh tries exists ({}): create a key with "
                            "ssh-keygen -t ed25519",
                            fmt::join(cfg->identity_files, ", ")));
        }
    }
    if (problem == Problem::HostKeyUnknown || problem == Problem::HostKeyChanged) {
        std::vector<std::string> names{cfg->hostname.empty() ? host : cfg->hostname};
        for (const auto& a : addresses) {
            if (std::find(names.begin(), names.end(), a) == names.end()) names.push_back(a);
        }
        for (const auto& file : cfg->known_hosts_files) {
            struct stat st {};
            if (::stat(file.c_str(), &st) != 0) continue;
            for (const auto& name : names) {
                const std::string entry = known_hosts_entry(name, cfg->port);
                const auto r = run_quick({"ssh-keygen", "-F", entry, "-f", file}, deadline_);
                const bool found = r.ending == mpi_launcher::CommandResult::Ending::Exited && r.exit_code == 0;
                f.details.push_back(fmt::format("{} entry for '{}' in {}", found ? "an" : "no", entry, file));
            }
        }
        if (cfg->strict_host_key_checking == "false" || cfg->strict_host_key_checking == "no") {
            f.details.push_back("note: StrictHostKeyChecking is off in the ssh config for this host");
        }
    }
    return f;
}

}  // namespace lockstep::hostcheck
