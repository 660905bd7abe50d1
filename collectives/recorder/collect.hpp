#pragma once
// Collecting a trace over the watchdog's channel (internal): every rank's recorder snapshot asked at once ("TRACE
// KEY"), each rank's clock related to the asker's, merged into one trace file (trace_format.hpp). The process of a job
// that dumps (the hang reporter, a collective error's first rank) and `lockstep trace` outside the job both use it;
// it needs no MPI and no runtime.

#include "../watchdog/channel.hpp"
#include "trace_format.hpp"

#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::detail {

// An endpoint as the channel's PEERS answer and the job directory's rank files hold it: host, port, pid, world_rank,
// key (hex); and back, nullopt when a field is missing or malformed.
[[nodiscard]] nlohmann::json endpoint_json(const Endpoint& endpoint);
[[nodiscard]] std::optional<Endpoint> endpoint_from_json(const nlohmann::json& j);

// The offset to add to a clock reading `remote_us` of another host, taken while this process waited between
// `sent_us` and `answered_us` (its own realtime clock), to put it on this process's clock: the NTP estimate, which
// assumes the answer was taken halfway; its error is at most half the round trip.
[[nodiscard]] double clock_offset_us(double sent_us, double remote_us, double answered_us);

struct CollectedTrace {
    nlohmann::json merged;             // merge_trace's object
    std::vector<std::string> missing;  // "rank 3 (node2:40112): no answer in time", one per rank without a snapshot
};

// Asks every endpoint in `remote` for its snapshot at once, until `deadline`, and merges the answers with `local`
// (snapshots this process took itself, on its own clock). A rank that does not answer in time is named in `missing`
// and left out; it is never waited for past the deadline.
[[nodiscard]] CollectedTrace collect_trace(const std::vector<Endpoint>& remote, std::vector<nlohmann::json> local,
                                           const TraceContext& context, Clock::time_point deadline);

// The file name of a trace taken for `reason`: lockstep-trace-<reason>-<UTC time, YYYYMMDDTHHMMSSZ>-<pid>.json.
[[nodiscard]] std::string trace_file_name(std::string_view reason, std::time_t when, long pid);

// The lines that name a written trace and its summary and say how to open them.
[[nodiscard]] std::string trace_written_text(const std::filesystem::path& file);

}  // namespace lockstep::detail
