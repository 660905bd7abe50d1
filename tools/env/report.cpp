// Collects the environment report. Each fact comes from the library (system.hpp, config.hpp), from MPI before
// MPI_Init (MPI_Get_library_version and MPI_Get_version are allowed then), or from a file of the operating system.

#include "report.hpp"

#include <lockstep/allocator.hpp>
#include <lockstep/build_config.hpp>
#include <lockstep/communicator.hpp>
#include <lockstep/config.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/shared_memory.hpp>
#include <lockstep/system.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <fstream>
#include <map>

extern char** environ;

namespace lockstep::env {
namespace {

using nlohmann::json;

json optional_json(const std::optional<std::string>& value) {
    return value ? json(*value) : json(nullptr);
}

// /etc/os-release is KEY=value lines with optionally quoted values.
std::map<std::string, std::string> os_release() {
    std::map<std::string, std::string> fields;
    std::ifstream in("/etc/os-release");
    std::string line;
    while (std::getline(in, line)) {
        const std::size_t eq = line.find('=');
        if (eq == std::string::npos || line.starts_with("#")) continue;
        std::string value = line.substr(eq + 1);
        if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
            value = value.substr(1, value.size() - 2);
        }
        fields[line.substr(0, eq)] = value;
    }
    return fields;
}

json os_section() {
    const auto release = os_release();
    auto field = [&](const char* key) {
        const auto it = release.find(key);
        return it == release.end() ? json(nullptr) : json(it->second);
    };
    const std::string kernel = kernel_release();
    return {{"name", field("PRETTY_NAME")},
            {"id", field("ID")},
            {"version_id", field("VERSION_ID")},
            {"kernel", kernel},
            {"kernel_warning", optional_json(kernel_warning(kernel))}};
}

json mpi_section() {
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    json mpi;
    if (MPI_Get_library_version(library, &length) == MPI_SUCCESS) {
        std::string text(library, static_cast<std::size_t>(std::max(length, 0)));
        while (!text.empty() && (text.back() == '\n' || text.back() == '\0' || text.back() == ' ')) text.pop_back();
        mpi["library"] = text.substr(0, text.find('\n'));
        mpi["library_full"] = text;
    } else {
        mpi["library"] = nullptr;
        mpi["library_full"] = nullptr;
    }
    int major = 0;
    int minor = 0;
    mpi["standard"] =
        MPI_Get_version(&major, &minor) == MPI_SUCCESS ? json(fmt::format("{}.{}", major, minor)) : json(nullptr);
    try {
        mpi["cuda_aware"] = mpi_is_cuda_aware();
    } catch (const Error& e) {
        mpi["cuda_aware"] = nullptr;
        mpi["cuda_aware_error"] = e.what();
    }
    return mpi;
}

json cuda_section() {
    json gpus = json::array();
    for (int index = 0;; ++index) {
        const auto facts = cuda_device_facts(index);
        if (!facts) break;
        gpus.push_back({{"index", index},
                        {"name", facts->name},
                        {"memory_bytes", facts->memory_bytes},
                        {"multiprocessors", facts->multiprocessors},
                        {"compute_capability", fmt::format("{}.{}", facts->compute_major, facts->compute_minor)}});
    }
    return {{"built_with_cuda", LOCKSTEP_HAVE_CUDA != 0},
            {"runtime", optional_json(cuda_runtime_version())},
            {"driver", optional_json(cuda_driver_version())},
            {"gpus", gpus}};
}

json host_section() {
    const HostFacts facts = host_facts();
    return {{"hostname", host_name()},
            {"cpu_model", facts.cpu_model},
            {"cpu_cores", facts.cpu_cores},
            {"ram_bytes", facts.ram_bytes},
            {"shm_bytes", facts.shm_bytes}};
}

// The node's shared-memory arena: as this process has it when the runtime runs (env --all-ranks), else what a job
// would start with, from the Config and /dev/shm.
json shared_memory_section() {
    json section;
    const SharedMemoryStatus s = shared_memory_status();
    section["dev_shm_free_bytes"] = s.dev_shm_free_bytes;
    section["mode"] = std::string(shm_mode_name(s.mode));
    section["threshold_bytes"] = s.threshold_bytes;
    if (Runtime::initialized()) {
        section["active"] = s.active;
        section["arena_bytes"] = s.arena_bytes;
        section["used_bytes"] = s.used_bytes;
        section["fallbacks"] = s.fallbacks;
        section["local_processes"] = s.local_processes;
        section["local_index"] = s.local_index;
        section["backing"] = s.backing;
        section["reason"] = s.reason.empty() ? json(nullptr) : json(s.reason);
        return section;
    }
    section["active"] = nullptr;  // decided when a job starts
    std::string plan;
    try {
        const Config config = Config::resolve();
        if (config.shm == ShmMode::Off) {
            plan = "off: host tensors stay in private memory and collectives use MPI";
        } else if (config.shm_arena_size && *config.shm_arena_size > s.dev_shm_free_bytes) {
            plan = fmt::format(
                "a job would fall back to MPI: /dev/shm has {} free, less than one process's arena of "
                "{} (shm_arena_size); enlarge /dev/shm or lower LOCKSTEP_SHM_ARENA_SIZE",
                format_bytes(s.dev_shm_free_bytes), format_bytes(*config.shm_arena_size));
        } else {
            plan = fmt::format(
                "{}: processes that share a node map one arena in /dev/shm ({} per process); host "
                "tensors of {} or more live there and collectives on them bypass MPI",
                shm_mode_name(config.shm),
                config.shm_arena_size ? format_bytes(*config.shm_arena_size)
                                      : std::string("half the free space shared among them"),
                format_bytes(config.shm_threshold));
        }
    } catch (const ConfigError& e) {
        plan = std::string("unknown: ") + e.what();
    }
    section["reason"] = plan;
    return section;
}

json config_section() {
    json section;
    try {
        // The Runtime's Config when MPI is up under lockstep (env --all-ranks), else the same resolution ranks do.
        const Config config = Runtime::initialized() ? Runtime::get().config() : Config::resolve();
        section["file"] = optional_json(config.config_file);
        const auto file_source = config.sources.find("config_file");
        section["file_source"] = file_source == config.sources.end() ? json(nullptr) : json(file_source->second);
        json settings = json::object();
        auto add = [&](const char* key, json value) {
            const auto source = config.sources.find(key);
            settings[key] = {{"value", std::move(value)},
                             {"source", source == config.sources.end() ? std::string("default") : source->second}};
        };
        add("debug", config.debug);
        add("log_level", std::string(log_level_name(config.log_level)));
        add("timeout", config.timeout);
        add("cpu_memory_limit", config.cpu_memory_limit ? json(*config.cpu_memory_limit) : json(nullptr));
        add("seed", config.seed);
        add("cuda_aware", config.cuda_aware ? json(*config.cuda_aware) : json(nullptr));
        add("staging_chunk_bytes", config.staging_chunk_bytes);
        add("watchdog_host", optional_json(config.watchdog_host));
        add("trace_file", optional_json(config.trace_file));
        add("trace_dir", optional_json(config.trace_dir));
        add("shm", std::string(shm_mode_name(config.shm)));
        add("shm_arena_size", config.shm_arena_size ? json(*config.shm_arena_size) : json(nullptr));
        add("shm_threshold", config.shm_threshold);
        add("shm_small_max", config.shm_small_max);
        add("progress_thread", config.progress_thread);
        add("mpi_thread_level", std::string(thread_level_name(config.mpi_thread_level)));
        add("on_timeout", std::string(on_timeout_name(config.on_timeout)));
        add("trace_calls", config.trace_calls);
        add("hang_stacks", std::string(hang_stacks_name(config.hang_stacks)));
        if (config.num_processes) add("num_processes", *config.num_processes);
        if (config.num_machines) add("num_machines", *config.num_machines);
        if (config.mixed_precision) add("mixed_precision", *config.mixed_precision);
        if (config.compute_environment) add("compute_environment", *config.compute_environment);
        if (config.distributed_type) add("distributed_type", *config.distributed_type);
        section["settings"] = settings;
        section["described"] = config.describe();
        section["warnings"] = config.warnings;
        section["error"] = nullptr;
    } catch (const ConfigError& e) {
        section["file"] = nullptr;
        section["file_source"] = nullptr;
        section["settings"] = json::object();
        section["described"] = nullptr;
        section["warnings"] = json::array();
        section["error"] = e.what();
    }
    return section;
}

json environment_section() {
    std::map<std::string, std::string> chosen;
    for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string_view text(*entry);
        const std::size_t eq = text.find('=');
        if (eq == std::string_view::npos) continue;
        const std::string_view name = text.substr(0, eq);
        // PMI covers Hydra's PMI_* and PMIx's PMIX_*; SLURMD_NODENAME is the Slurm node a rank runs on.
        if (name.starts_with("LOCKSTEP_") || name.starts_with("OMPI_") || name.starts_with("PMI") ||
            name.starts_with("SLURM_") || name == "SLURMD_NODENAME") {
            chosen.emplace(name, text.substr(eq + 1));
        }
    }
    return chosen;
}

json identity_section() {
    const ProcessIdentity id = current_identity();
    return {{"rank", id.rank}, {"size", id.size}, {"local_rank", id.local_rank}, {"source", id.source}};
}

std::string bytes_text(const json& value) {
    return value.is_number_unsigned() || value.is_number_integer() ? format_bytes(value.get<std::size_t>()) : "unknown";
}

std::string text_or(const json& value, std::string_view fallback) {
    if (value.is_string()) return value.get<std::string>();
    if (value.is_null()) return std::string(fallback);
    return value.dump();
}

}  // namespace

json collect_report() {
    json report;
    report["schema"] = report_schema;
    report["lockstep"] = {{"version", LOCKSTEP_VERSION}, {"git_commit", LOCKSTEP_GIT_COMMIT}};
    report["os"] = os_section();
    report["compiler"] = __VERSION__;
    report["mpi"] = mpi_section();
    report["cuda"] = cuda_section();
    report["host"] = host_section();
    report["config"] = config_section();
    report["shared_memory"] = shared_memory_section();
    report["environment"] = environment_section();
    report["identity"] = identity_section();
    return report;
}

bool report_has_problem(const json& report) {
    return !report["config"]["error"].is_null();
}

std::string render_markdown(const json& r, bool colour) {
    const std::string warn_on = colour ? "\033[33m" : "";
    const std::string error_on = colour ? "\033[31m" : "";
    const std::string off = colour ? "\033[0m" : "";
    std::string out = "## lockstep environment\n\n";
    out += fmt::format("- lockstep: {} (git {})\n", text_or(r["lockstep"]["version"], "unknown"),
                       text_or(r["lockstep"]["git_commit"], "unknown"));
    out += fmt::format("- OS: {}\n", text_or(r["os"]["name"], "unknown (no /etc/os-release)"));
    out += fmt::format("- Kernel: {}\n", text_or(r["os"]["kernel"], "unknown"));
    if (!r["os"]["kernel_warning"].is_null()) {
        out += fmt::format("  - {}**Warning:** {}{}\n", warn_on, text_or(r["os"]["kernel_warning"], ""), off);
    }
    out += fmt::format("- Compiler: {}\n", text_or(r["compiler"], "unknown"));
    out += fmt::format("- MPI library: {}\n", text_or(r["mpi"]["library"], "unknown"));
    out += fmt::format("- MPI standard: {}\n", text_or(r["mpi"]["standard"], "unknown"));
    out += fmt::format("- MPI CUDA-aware: {}\n", r["mpi"]["cuda_aware"].is_boolean()
                                                     ? (r["mpi"]["cuda_aware"].get<bool>() ? "yes" : "no")
                                                     : "unknown");
    out += fmt::format("- lockstep built with CUDA: {}\n", r["cuda"]["built_with_cuda"].get<bool>() ? "yes" : "no");
    out += fmt::format("- CUDA runtime: {}\n", text_or(r["cuda"]["runtime"], "none"));
    out += fmt::format("- CUDA driver: {}\n", text_or(r["cuda"]["driver"], "none"));
    const json& gpus = r["cuda"]["gpus"];
    if (gpus.empty()) {
        out += "- GPUs: none\n";
    } else {
        out += fmt::format("- GPUs: {}\n", gpus.size());
        for (const auto& gpu : gpus) {
            out += fmt::format("  - cuda:{}: {}, {}, compute capability {}, {} SMs\n", gpu["index"].get<int>(),
                               text_or(gpu["name"], "?"), bytes_text(gpu["memory_bytes"]),
                               text_or(gpu["compute_capability"], "?"), gpu["multiprocessors"].get<int>());
        }
    }
    out += fmt::format("- Host: {}\n", text_or(r["host"]["hostname"], "unknown"));
    out += fmt::format("- CPU: {} ({} logical cores)\n", text_or(r["host"]["cpu_model"], "unknown"),
                       r["host"]["cpu_cores"].get<int>());
    out += fmt::format("- RAM: {}\n", bytes_text(r["host"]["ram_bytes"]));
    out += fmt::format("- /dev/shm: {}\n", bytes_text(r["host"]["shm_bytes"]));
    const json& id = r["identity"];
    out += fmt::format("- Process: rank {} of {} (from {})\n", id["rank"].get<int>(), id["size"].get<int>(),
                       text_or(id["source"], "unknown"));

    const json& config = r["config"];
    out += "\n### Config\n\n";
    if (!config["error"].is_null()) {
        out += fmt::format("{}**Error:** {}{}\n", error_on, text_or(config["error"], ""), off);
    } else {
        out += fmt::format("File: {} ({})\n\n", text_or(config["file"], "none"), text_or(config["file_source"], ""));
        out += "```\n" + text_or(config["described"], "") + "```\n";
        for (const auto& warning : config["warnings"]) {
            out += fmt::format("\n{}**Warning:** {}{}\n", warn_on, text_or(warning, ""), off);
        }
    }

    const json& shm = r["shared_memory"];
    out += "\n### Shared memory\n\n";
    if (shm["active"].is_null()) {
        out += fmt::format("- Arena: {}\n", text_or(shm["reason"], "unknown"));
    } else if (shm["active"].get<bool>()) {
        out += fmt::format("- Arena: active, {} per process for {} processes of this node, {} in use ({})\n",
                           bytes_text(shm["arena_bytes"]), shm["local_processes"].get<int>(),
                           bytes_text(shm["used_bytes"]), text_or(shm["backing"], ""));
        out += fmt::format("- Host blocks of {} or more come from it\n", bytes_text(shm["threshold_bytes"]));
    } else {
        out += fmt::format("- Arena: not in use: {}\n", text_or(shm["reason"], "unknown"));
    }
    out += fmt::format("- /dev/shm free: {}\n", bytes_text(shm["dev_shm_free_bytes"]));

    out += "\n### Environment variables (LOCKSTEP_*, OMPI_*, PMI*, SLURM_*, SLURMD_NODENAME)\n\n";
    if (r["environment"].empty()) {
        out += "none set\n";
    } else {
        out += "```\n";
        for (const auto& [name, value] : r["environment"].items())
            out += fmt::format("{}={}\n", name, text_or(value, ""));
        out += "```\n";
    }
    return out;
}

}  // namespace lockstep::env
