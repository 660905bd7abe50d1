#include "resolve.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

namespace lockstep::hostcheck {
namespace {

std::string numeric_address(const sockaddr* sa) {
    char buffer[INET6_ADDRSTRLEN] = {};
    if (sa->sa_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buffer, sizeof buffer);
    } else if (sa->sa_family == AF_INET6) {
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buffer, sizeof buffer);
    }
    return buffer;
}

Resolution resolve_one(const std::string& name) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_CANONNAME;
    addrinfo* list = nullptr;
    Resolution r;
    const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &list);
    if (rc != 0) {
        r.error = ::gai_strerror(rc);
        return r;
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(list, &::freeaddrinfo);
    if (list != nullptr && list->ai_canonname != nullptr) r.canonical_name = list->ai_canonname;
    for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
        std::string text = numeric_address(a->ai_addr);
        if (!text.empty() && std::find(r.addresses.begin(), r.addresses.end(), text) == r.addresses.end()) {
            r.addresses.push_back(std::move(text));
        }
    }
    return r;
}

// Shared by the caller and the workers; a worker still inside getaddrinfo at the deadline keeps it alive.
struct ResolveState {
    std::mutex mutex;
    std::condition_variable finished_one;
    std::vector<std::string> names;
    std::vector<std::optional<Resolution>> results;
    std::size_t next = 0;
    std::size_t finished = 0;
    bool abandoned = false;
};

void resolve_worker(const std::shared_ptr<ResolveState>& state) {
    while (true) {
        std::size_t index = 0;
        {
            std::lock_guard lock(state->mutex);
            if (state->abandoned || state->next >= state->names.size()) return;
            index = state->next++;
        }
        Resolution r = resolve_one(state->names[index]);
        std::lock_guard lock(state->mutex);
        state->results[index] = std::move(r);
        ++state->finished;
        state->finished_one.notify_all();
    }
}

}  // namespace

std::vector<Resolution> resolve_names(const std::vector<std::string>& names, std::size_t parallel,
                                      mpi_launcher::Clock::time_point deadline) {
    auto state = std::make_shared<ResolveState>();
    state->names = names;
    state->results.resize(names.size());
    const std::size_t workers = std::clamp<std::size_t>(parallel, 1, std::max<std::size_t>(names.size(), 1));
    for (std::size_t i = 0; i < workers; ++i) std::thread(resolve_worker, state).detach();

    std::unique_lock lock(state->mutex);
    state->finished_one.wait_until(lock, deadline, [&] { return state->finished == names.size(); });
    state->abandoned = true;
    std::vector<Resolution> out(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (state->results[i]) {
            out[i] = *state->results[i];
        } else {
            out[i].timed_out = true;
            out[i].error = "the resolver did not answer in time";
        }
    }
    return out;
}

std::vector<std::string> local_addresses() {
    std::vector<std::string> out{"127.0.0.1", "::1"};
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owner(list, &::freeifaddrs);
    for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
        if (a->ifa_addr == nullptr) continue;
        std::string text = numeric_address(a->ifa_addr);
        if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(std::move(text));
    }
    return out;
}

namespace {

std::string lower_case(std::string text) {
    for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

}  // namespace

std::string this_machine_name() {
    utsname u{};
    if (::uname(&u) != 0) return {};
    return u.nodename;
}

ThisMachine this_machine(const std::string& canonical_name) {
    ThisMachine m;
    auto add = [&](const std::string& name) {
        const std::string n = lower_case(name);
        if (!n.empty() && std::find(m.names.begin(), m.names.end(), n) == m.names.end()) m.names.push_back(n);
    };
    add("localhost");
    const std::string name = this_machine_name();
    add(name);
    add(name.substr(0, name.find('.')));
    add(canonical_name);
    m.addresses = local_addresses();
    return m;
}

std::optional<std::string> local_reason(const std::string& host, const Resolution* resolution,
                                        const ThisMachine& machine) {
    const std::string name = lower_case(host);
    if (name == "localhost") return "localhost";
    if (std::find(machine.names.begin(), machine.names.end(), name) != machine.names.end()) {
        return "this machine's name";
    }
    auto local_address = [&](const std::string& a) {
        return std::find(machine.addresses.begin(), machine.addresses.end(), a) != machine.addresses.end();
    };
    if (local_address(name)) return "an address of this machine";
    if (resolution != nullptr) {
        // As the launchers decide: any one of the name's addresses on an interface of this machine.
        for (const auto& a : resolution->addresses) {
            if (local_address(a)) return fmt::format("resolves to {}, an address of this machine", a);
        }
    }
    return std::nullopt;
}

std::vector<std::vector<std::size_t>> same_machine_groups(const std::vector<std::string>& names,
                                                          const std::vector<Resolution>& resolutions,
                                                          const std::vector<std::string>& local) {
    // Union-find over name indices; two names join when they share a key (an address, or "this machine").
    std::vector<std::size_t> parent(names.size());
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](std::size_t i) {
        while (parent[i] != i) i = parent[i] = parent[parent[i]];
        return i;
    };
    std::map<std::string, std::size_t> owner_of_key;
    const std::set<std::string> local_set(local.begin(), local.end());
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto& addrs = resolutions[i].addresses;
        if (addrs.empty()) continue;
        std::vector<std::string> keys = addrs;
        if (std::all_of(addrs.begin(), addrs.end(), [&](const std::string& a) { return local_set.contains(a); })) {
            keys = {"this machine"};
        }
        for (const auto& key : keys) {
            auto [it, inserted] = owner_of_key.try_emplace(key, i);
            if (!inserted) parent[find(i)] = find(it->second);
        }
    }
    std::map<std::size_t, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < names.size(); ++i) groups[find(i)].push_back(i);
    std::vector<std::vector<std::size_t>> out;
    for (auto& [root, members] : groups) {
        std::set<std::string> distinct;
        for (auto m : members) distinct.insert(names[m]);
        if (distinct.size() > 1) out.push_back(std::move(members));
    }
    return out;
}

}  // namespace lockstep::hostcheck
