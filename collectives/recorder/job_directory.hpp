#pragma once
// The job directory (internal): where the processes of running jobs publish their watchdog endpoints, so that
// `lockstep trace` can reach a job from outside it. Each process writes
// ${XDG_RUNTIME_DIR:-/tmp}/lockstep-<uid>/jobs/<job>/rank-<R>.json (its host, port, pid, world rank and channel key)
// when its watchdog starts and removes it when it exits normally. The directories are 0700 and the files 0600: the
// key, which is what the channel asks of a client, is readable by the job's user alone.

#include "../watchdog/endpoint.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::detail {

// ${XDG_RUNTIME_DIR:-/tmp}/lockstep-<uid>/jobs.
[[nodiscard]] std::filesystem::path jobs_directory();

// The job this process belongs to: LOCKSTEP_JOB_ID (`lockstep launch` sets it), else the launcher's job id
// (PMIX_NAMESPACE, OMPI_MCA_orte_ess_jobid, SLURM_JOB_ID.SLURM_STEP_ID), else the parent process's id; made safe as
// a file name.
[[nodiscard]] std::string job_id_from_environment();

// The job directory's folders, created 0700 where missing; nullopt, with `why` set, when one exists but is not a
// directory of this user's that only this user may enter (never followed through a symbolic link).
[[nodiscard]] std::optional<std::filesystem::path> private_job_directory(const std::string& job, std::string& why);

// Writes this process's rank file (quietly does nothing when the job directory cannot be made private), and removes
// it again (and the job's folder once empty).
void publish_endpoint(const Endpoint& self);
void withdraw_endpoint(const Endpoint& self);

// A published process of a job, as read back.
struct PublishedRank {
    std::filesystem::path file;
    Endpoint endpoint{};
    bool alive = false;  // its pid exists on this host
};
struct PublishedJob {
    std::string id;
    std::filesystem::path directory;
    std::vector<PublishedRank> ranks;  // by world rank
    [[nodiscard]] bool alive() const;
};

// The jobs with a published rank on this host. Rank files of processes that no longer exist are removed, and so are
// the folders of jobs left with none (a job ended by a signal or the watchdog leaves its files behind).
[[nodiscard]] std::vector<PublishedJob> published_jobs();

}  // namespace lockstep::detail
