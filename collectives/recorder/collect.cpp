#include "collect.hpp"

#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <cstdio>

namespace lockstep::detail {

nlohmann::json endpoint_json(const Endpoint& endpoint) {
    return {{"host", endpoint.host.str()},       {"port", endpoint.port},           {"pid", endpoint.pid},
            {"world_rank", endpoint.world_rank}, {"started_s", endpoint.started_s}, {"key", key_text(endpoint.key)}};
}

std::optional<Endpoint> endpoint_from_json(const nlohmann::json& j) {
    try {
        Endpoint e{};
        const std::string host = j.at("host").get<std::string>();
        const std::string key = j.at("key").get<std::string>();
        if (host.empty() || host.size() >= sizeof e.host || key.size() != 2 * e.key.size()) return std::nullopt;
        e.host.assign(host);
        e.port = j.at("port").get<std::int32_t>();
        e.pid = j.at("pid").get<std::int32_t>();
        e.world_rank = j.at("world_rank").get<std::int32_t>();
        e.started_s = j.value("started_s", std::uint32_t{0});
        for (std::size_t i = 0; i < e.key.size(); ++i) {
            unsigned value = 0;
            if (std::sscanf(key.c_str() + 2 * i, "%2x", &value) != 1) return std::nullopt;
            e.key[i] = static_cast<std::uint8_t>(value);
        }
        if (key_text(e.key) != key || e.port <= 0 || e.port > 65535 || e.pid <= 0 || e.world_rank < 0) {
            return std::nullopt;
        }
        return e;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

double clock_offset_us(double sent_us, double remote_us, double answered_us) {
    return (sent_us + answered_us) / 2.0 - remote_us;
}

namespace {

std::string this_host() {
    char name[HOST_NAME_MAX + 1] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return {};
    return name;
}

bool on_this_host(const Endpoint& e, const nlohmann::json& snapshot, const std::string& here) {
    const std::string host = e.host.str();
    if (host == "127.0.0.1" || host == "localhost") return true;
    const auto it = snapshot.find("host");
    return it != snapshot.end() && it->is_string() && it->get<std::string>() == here;
}

}  // namespace

CollectedTrace collect_trace(const std::vector<Endpoint>& remote, std::vector<nlohmann::json> local,
                             const TraceContext& context, Clock::time_point deadline) {
    CollectedTrace collected;
    std::vector<nlohmann::json> ranks = std::move(local);
    for (nlohmann::json& snapshot : ranks) snapshot["clock_offset_us"] = 0.0;
    const std::vector<Query> answers = ask_all(remote, "TRACE", deadline);
    const std::string here = this_host();
    for (std::size_t i = 0; i < remote.size(); ++i) {
        const Endpoint& e = remote[i];
        const Query& q = answers[i];
        const auto miss = [&](const std::string& why) {
            collected.missing.push_back(
                fmt::format("rank {} ({}:{}, pid {}): {}", e.world_rank, e.host.str(), e.port, e.pid, why));
        };
        if (!q.answer) {
            miss(q.failure.empty() ? std::string("no answer") : q.failure);
            continue;
        }
        nlohmann::json snapshot = nlohmann::json::parse(*q.answer, nullptr, false);
        if (!snapshot.is_object() || !snapshot.contains("calls")) {
            miss("a malformed answer");
            continue;
        }
        double offset = 0.0;
        if (const auto clock = snapshot.find("clock_us");
            clock != snapshot.end() && clock->is_number() && !on_this_host(e, snapshot, here)) {
            offset = clock_offset_us(q.sent_us, clock->get<double>(), q.answered_us);
        }
        snapshot["clock_offset_us"] = offset;
        ranks.push_back(std::move(snapshot));
    }
    std::sort(ranks.begin(), ranks.end(),
              [](const nlohmann::json& a, const nlohmann::json& b) { return a.value("rank", 0) < b.value("rank", 0); });
    collected.merged = merge_trace(ranks, context);
    return collected;
}

std::string trace_file_name(std::string_view reason, std::time_t when, long pid) {
    std::tm utc{};
    ::gmtime_r(&when, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    return fmt::format("lockstep-trace-{}-{}-{}.json", reason, stamp, pid);
}

std::string trace_written_text(const std::filesystem::path& file) {
    return fmt::format(
        "Trace of every process's last calls: {}\n"
        "  summary: {}.txt\n"
        "  open the JSON in https://ui.perfetto.dev or chrome://tracing, or draw it: lockstep trace show {}\n",
        file.string(), file.string(), file.string());
}

}  // namespace lockstep::detail
