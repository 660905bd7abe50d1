// `lockstep trace`: a trace of a running job, taken from outside it (docs/tracing.md, "Taking a trace").
//   lockstep trace [--job ID] [-o FILE] [--text]   every rank's last calls, merged into FILE
//   lockstep trace list                           the live jobs of this user on this host
//   lockstep trace show FILE [-o PNG] [--calls N] [--whole-run] [--title T]  the trace drawn as a picture
//                                                 (trace_show.py)
// The job directory (collectives/recorder/job_directory.hpp) gives one rank's endpoint and key; that rank's PEERS
// answer gives every rank's; every rank is asked for TRACE at once.

#include "../subcommand.hpp"

#include <collectives/recorder/collect.hpp>
#include <collectives/recorder/job_directory.hpp>

#include <lockstep/config.hpp>
#include <lockstep/errors.hpp>

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>

#ifndef LOCKSTEP_DATADIR_FROM_BINDIR
#define LOCKSTEP_DATADIR_FROM_BINDIR "../share"
#endif
#ifndef LOCKSTEP_DATADIR_INSTALLED
#define LOCKSTEP_DATADIR_INSTALLED "/usr/local/share"
#endif

namespace lockstep::tools {
namespace {

namespace d = lockstep::detail;

// How long a dump waits for the ranks' answers.
constexpr auto trace_deadline = std::chrono::seconds(10);

struct CommandLine {
    std::vector<std::string> words;  // list | show FILE | nothing
    std::optional<std::string> job;
    std::optional<std::string> output;
    bool text = false;
    std::optional<int> calls;
    bool whole_run = false;
    std::optional<std::string> title;
};

std::string ranks_text(const d::PublishedJob& job) {
    std::string pids;
    for (const auto& r : job.ranks) pids += fmt::format("{}{}", pids.empty() ? "" : ", ", r.endpoint.pid);
    return fmt::format("{} rank{} on this host (pid {})", job.ranks.size(), job.ranks.size() == 1 ? "" : "s", pids);
}

int run_list() {
    const std::vector<d::PublishedJob> jobs = d::published_jobs();
    if (jobs.empty()) {
        fmt::print("No running lockstep job of this user on this host ({}).\n", d::jobs_directory().string());
        return 0;
    }
    for (const auto& job : jobs) fmt::print("{}  {}\n", job.id, ranks_text(job));
    return 0;
}

// The job to trace: the one named, or the only live one.
std::optional<d::PublishedJob> choose_job(const std::optional<std::string>& wanted) {
    const std::vector<d::PublishedJob> jobs = d::published_jobs();
    if (wanted) {
        for (const auto& job : jobs) {
            if (job.id == *wanted) return job;
        }
        fmt::print(stderr, "lockstep trace: no running job '{}' of this user on this host", *wanted);
        if (jobs.empty()) {
            fmt::print(stderr, " (there is none).\n");
        } else {
            std::vector<std::string> ids;
            for (const auto& job : jobs) ids.push_back(job.id);
            fmt::print(stderr, "; running: {}.\n", fmt::join(ids, ", "));
        }
        return std::nullopt;
    }
    if (jobs.empty()) {
        fmt::print(stderr,
                   "lockstep trace: no running lockstep job of this user on this host (none in {}). A job's processes "
                   "publish themselves there when their watchdog starts.\n",
                   d::jobs_directory().string());
        return std::nullopt;
    }
    if (jobs.size() > 1) {
        fmt::print(stderr, "lockstep trace: {} jobs are running; name one with --job:\n", jobs.size());
        for (const auto& job : jobs) fmt::print(stderr, "  {}  {}\n", job.id, ranks_text(job));
        return std::nullopt;
    }
    return jobs.front();
}

// Every rank of the job: the first published rank that answers PEERS names them all; without an answer, the ranks
// published on this host.
std::vector<d::Endpoint> job_ranks(const d::PublishedJob& job) {
    for (const auto& rank : job.ranks) {
        const auto answers = d::ask_all({rank.endpoint}, "PEERS", d::Clock::now() + d::ask_deadline);
        if (!answers.front().answer) continue;
        const nlohmann::json j = nlohmann::json::parse(*answers.front().answer, nullptr, false);
        if (!j.is_object() || !j.contains("peers") || !j["peers"].is_array()) continue;
        std::vector<d::Endpoint> peers;
        for (const auto& p : j["peers"]) {
            if (auto e = d::endpoint_from_json(p)) peers.push_back(*e);
        }
        if (!peers.empty()) return peers;
    }
    std::vector<d::Endpoint> local;
    for (const auto& rank : job.ranks) local.push_back(rank.endpoint);
    return local;
}

// In trace_dir (created if missing, as the job's own dumps do), else the working directory.
std::filesystem::path default_output() {
    const std::string name = d::trace_file_name("demand", std::time(nullptr), ::getpid());
    try {
        if (const auto& dir = config().trace_dir) {
            std::error_code ec;
            std::filesystem::create_directories(*dir, ec);
            return std::filesystem::path(*dir) / name;
        }
    } catch (const Error&) {
        // a malformed setting: the working directory
    }
    return name;
}

int run_dump(const CommandLine& cl) {
    const auto job = choose_job(cl.job);
    if (!job) return 1;
    const std::vector<d::Endpoint> ranks = job_ranks(*job);
    int expected = 0;
    for (const auto& e : ranks) expected = std::max(expected, e.world_rank + 1);
    const d::TraceContext context{"demand", job->id, expected, {}};
    d::CollectedTrace trace;
    try {
        trace = d::collect_trace(ranks, {}, context, d::Clock::now() + trace_deadline);
    } catch (const std::exception& e) {
        fmt::print(stderr, "lockstep trace: the answers of job {} could not be merged: {}\n", job->id, e.what());
        return 1;
    }
    const std::filesystem::path file = cl.output ? std::filesystem::path(*cl.output) : default_output();
    try {
        d::write_trace(file, trace.merged);
    } catch (const std::exception& e) {
        fmt::print(stderr, "lockstep trace: {}\n", e.what());
        return 1;
    }
    if (cl.text) std::cout << d::trace_summary(trace.merged) << std::flush;
    fmt::print("Job {}: {} of {} ranks answered.\n{}", job->id, ranks.size() - trace.missing.size(), ranks.size(),
               d::trace_written_text(file));
    for (const auto& missing : trace.missing) fmt::print(stderr, "lockstep trace: no trace of {}\n", missing);
    return trace.missing.empty() ? 0 : 1;
}

// trace_show.py: beside the program in a build tree, else in <datadir>/lockstep of the installation the program
// belongs to (found relative to the program, as the commands module is), else where it was installed.
std::optional<std::filesystem::path> find_renderer() {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::vector<std::filesystem::path> candidates;
    if (!ec) {
        candidates.push_back(self.parent_path() / "trace_show.py");
        candidates.push_back(self.parent_path() / LOCKSTEP_DATADIR_FROM_BINDIR / "lockstep" / "trace_show.py");
    }
    candidates.push_back(std::filesystem::path(LOCKSTEP_DATADIR_INSTALLED) / "lockstep" / "trace_show.py");
    for (const auto& path : candidates) {
        if (std::filesystem::is_regular_file(path, ec)) return path;
    }
    return std::nullopt;
}

int run_show(const CommandLine& cl) {
    if (cl.words.size() != 2) {
        fmt::print(
            stderr,
            "lockstep trace show: give one trace file: lockstep trace show FILE [-o PNG] [--calls N] [--whole-run]\n");
        return 2;
    }
    const std::string& file = cl.words[1];
    const auto script = find_renderer();
    if (!script) {
        fmt::print(stderr, "lockstep trace show: the renderer trace_show.py is not installed with this program\n");
        return 1;
    }
    const char* chosen = std::getenv("LOCKSTEP_PYTHON");
    const std::string python = chosen != nullptr && *chosen != '\0' ? chosen : "/usr/bin/python3";
    const std::string output = cl.output ? *cl.output : std::filesystem::path(file).replace_extension(".png").string();
    std::vector<std::string> words{python, script->string(), file, "--output", output};
    if (cl.calls) {
        words.emplace_back("--calls");
        words.push_back(std::to_string(*cl.calls));
    }
    if (cl.whole_run) words.emplace_back("--whole-run");
    if (cl.title) {
        words.emplace_back("--title");
        words.push_back(*cl.title);
    }
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    std::cout.flush();
    ::execv(python.c_str(), argv.data());
    fmt::print(stderr, "lockstep trace show: cannot run {}: {} (set LOCKSTEP_PYTHON to a Python with matplotlib)\n",
               python, std::strerror(errno));
    return 1;
}

int run(const CommandLine& cl) {
    if (cl.words.empty()) return run_dump(cl);
    if (cl.words.front() == "show") return run_show(cl);
    if (cl.words.front() == "list" && cl.words.size() == 1) return run_list();
    fmt::print(stderr,
               "lockstep trace: unexpected argument '{}'; usage: lockstep trace [--job ID] [-o FILE] [--text], "
               "lockstep trace list, lockstep trace show FILE [-o PNG] [--calls N]\n",
               cl.words.front() == "list" ? cl.words[1] : cl.words.front());
    return 2;
}

}  // namespace

Subcommand add_trace_command(CLI::App& parent) {
    auto cl = std::make_shared<CommandLine>();
    CLI::App* app = parent.add_subcommand(
        "trace",
        "Take a trace of a running job's last calls from outside it: every rank is asked through its watchdog and "
        "the answers are merged into one file that Perfetto (https://ui.perfetto.dev) and chrome://tracing open, "
        "with a text summary beside it. 'trace list' lists the running jobs; 'trace show FILE' draws a trace as a "
        "PNG.");
    app->footer(
        "The jobs are those of this user with a process on this host: each process publishes its watchdog's address\n"
        "and key in ${XDG_RUNTIME_DIR:-/tmp}/lockstep-<uid>/jobs/<job>/ (readable by this user only).\n"
        "The default FILE is lockstep-trace-demand-<time>-<pid>.json in LOCKSTEP_TRACE_DIR (default: here).\n"
        "show runs LOCKSTEP_PYTHON (default /usr/bin/python3) on trace_show.py; its default PNG is FILE with .png.\n"
        "Exit status: 0 written with every rank; 1 no running job, several jobs and no --job, ranks that did not\n"
        "answer (the file has the others), or the file cannot be written; 2 usage error.");
    app->add_option("action", cl->words, "list, or show FILE; none: take a trace")->type_name("[list | show FILE]");
    app->add_option("--job", cl->job, "The job to trace (as 'lockstep trace list' names it); default: the only one");
    app->add_option("-o,--output", cl->output, "Where to write the trace (with show: the PNG)");
    app->add_flag("--text", cl->text, "Also print the text summary");
    app->add_option("--calls", cl->calls, "With show: draw the last N collectives")->check(CLI::Range(1, 1 << 30));
    app->add_flag("--whole-run", cl->whole_run,
                  "With show: draw each rank's share of time spent waiting over the whole run instead");
    app->add_option("--title", cl->title, "With show: the picture's title");
    return Subcommand{app, [cl] { return run(*cl); }};
}

}  // namespace lockstep::tools
