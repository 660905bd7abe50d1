#include "job_directory.hpp"

#include "collect.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lockstep::detail {

namespace {

std::string environment(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

// A folder of the job directory: made 0700 if missing, else accepted only as this user's own directory, not a link,
// that nobody else may enter.
bool private_folder(const std::filesystem::path& folder, std::string& why) {
    if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) {
        why = fmt::format("cannot create {}: {}", folder.string(), std::strerror(errno));
        return false;
    }
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        why = fmt::format("{} is not a directory", folder.string());
        return false;
    }
    if (st.st_uid != ::getuid() || (st.st_mode & 077) != 0) {
        why = fmt::format("{} is not private to this user (owner {}, mode {:o})", folder.string(), st.st_uid,
                          st.st_mode & 07777);
        return false;
    }
    return true;
}

std::filesystem::path rank_file(const std::filesystem::path& job, int world_rank) {
    return job / fmt::format("rank-{}.json", world_rank);
}

bool pid_exists(int pid) {
    return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

std::filesystem::path jobs_directory() {
    std::string base = environment("XDG_RUNTIME_DIR");
    if (base.empty()) base = "/tmp";
    return std::filesystem::path(base) / fmt::format("lockstep-{}", ::getuid()) / "jobs";
}

std::string job_id_from_environment() {
    std::string id = environment("LOCKSTEP_JOB_ID");
    if (id.empty()) id = environment("PMIX_NAMESPACE");
    if (id.empty()) id = environment("OMPI_MCA_orte_ess_jobid");
    if (id.empty() && !environment("SLURM_JOB_ID").empty()) {
        id = environment("SLURM_JOB_ID") + "." + environment("SLURM_STEP_ID");
    }
    if (id.empty()) id = std::to_string(::getppid());
    for (char& c : id) {
        const bool plain = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
        if (!plain) c = '_';
    }
    if (id.front() == '.') id.front() = '_';
    return id.substr(0, 128);
}

std::optional<std::filesystem::path> private_job_directory(const std::string& job, std::string& why) {
    const std::filesystem::path jobs = jobs_directory();
    std::error_code ec;
    std::filesystem::create_directories(jobs.parent_path().parent_path(), ec);  // XDG_RUNTIME_DIR or /tmp itself
    for (const auto& folder : {jobs.parent_path(), jobs, jobs / job}) {
        if (!private_folder(folder, why)) return std::nullopt;
    }
    return jobs / job;
}

void publish_endpoint(const Endpoint& self) {
    std::string why;
    const auto job = private_job_directory(job_id_from_environment(), why);
    if (!job) return;  // on-demand dumps are then unavailable for this process; nothing else depends on it
    const std::filesystem::path file = rank_file(*job, self.world_rank);
    const std::filesystem::path temporary = file.string() + fmt::format(".{}.tmp", self.pid);
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    const std::string text = endpoint_json(self).dump() + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written || ::rename(temporary.c_str(), file.c_str()) != 0) ::unlink(temporary.c_str());
}

void withdraw_endpoint(const Endpoint& self) {
    const std::filesystem::path job = jobs_directory() / job_id_from_environment();
    const std::filesystem::path file = rank_file(job, self.world_rank);
    std::ifstream in(file);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || j.value("pid", 0) != self.pid) return;  // another process's (a rerun of the same job id)
    ::unlink(file.c_str());
    ::rmdir(job.c_str());  // once the job's last process has gone
}

bool PublishedJob::alive() const {
    return std::any_of(ranks.begin(), ranks.end(), [](const PublishedRank& r) { return r.alive; });
}

std::vector<PublishedJob> published_jobs() {
    std::vector<PublishedJob> jobs;
    std::error_code ec;
    const std::filesystem::path root = jobs_directory();
    std::string why;
    if (!private_folder(root.parent_path(), why) || !private_folder(root, why)) return jobs;
    for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
        if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
        PublishedJob job{entry.path().filename().string(), entry.path(), {}};
        for (const auto& file : std::filesystem::directory_iterator(entry.path(), ec)) {
            const std::string name = file.path().filename().string();
            if (!name.starts_with("rank-") || !name.ends_with(".json") || file.is_symlink(ec)) continue;
            std::ifstream in(file.path());
            const auto endpoint = endpoint_from_json(nlohmann::json::parse(in, nullptr, false));
            if (!endpoint) continue;
            PublishedRank rank{file.path(), *endpoint, pid_exists(endpoint->pid)};
            if (!rank.alive) {
                std::filesystem::remove(file.path(), ec);
                continue;
            }
            job.ranks.push_back(rank);
        }
        if (job.ranks.empty()) {
            std::filesystem::remove(entry.path(), ec);  // fails, harmlessly, while a file is being written
            continue;
        }
        std::sort(job.ranks.begin(), job.ranks.end(), [](const PublishedRank& a, const PublishedRank& b) {
            return a.endpoint.world_rank < b.endpoint.world_rank;
        });
        jobs.push_back(std::move(job));
    }
    std::sort(jobs.begin(), jobs.end(), [](const PublishedJob& a, const PublishedJob& b) { return a.id < b.id; });
    return jobs;
}

}  // namespace lockstep::detail
