// torchrun's variables from an MPI launcher's. Which variable gives what, per launcher:
//
//                     Open MPI mpirun               Hydra mpirun        Slurm srun
//   RANK              OMPI_COMM_WORLD_RANK          PMI_RANK            SLURM_PROCID
//   WORLD_SIZE        OMPI_COMM_WORLD_SIZE          PMI_SIZE            SLURM_NTASKS (SLURM_NPROCS)
//   LOCAL_RANK        OMPI_COMM_WORLD_LOCAL_RANK    MPI_LOCALRANKID     SLURM_LOCALID
//   LOCAL_WORLD_SIZE  OMPI_COMM_WORLD_LOCAL_SIZE    MPI_LOCALNRANKS     SLURM_STEP_TASKS_PER_NODE (else
//                                                                       SLURM_TASKS_PER_NODE) at SLURM_NODEID
//   GROUP_RANK        (RANK - LOCAL_RANK) / LOCAL_WORLD_SIZE            SLURM_NODEID
//   GROUP_WORLD_SIZE  ceil(WORLD_SIZE / LOCAL_WORLD_SIZE)               SLURM_STEP_NUM_NODES (SLURM_NNODES)
//
// ROLE_RANK and ROLE_WORLD_SIZE equal RANK and WORLD_SIZE, ROLE_NAME is "default": one role, as under torchrun.
// (OMPI_COMM_WORLD_NODE_RANK is the rank among this node's processes of every job, not the node's index.)

#include "rank_env.hpp"

#include <stdexcept>

namespace lockstep::rank_env {
namespace {

std::invalid_argument bad_list(std::string_view what, std::string_view list, std::string_view why) {
    return std::invalid_argument(std::string(what) + " '" + std::string(list) + "': " + std::string(why));
}

// A non-negative decimal number of at most 9 digits; nullopt otherwise.
std::optional<int> parse_count(std::string_view text) {
    if (text.empty() || text.size() > 9) return std::nullopt;
    int value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    return value;
}

// Splits on the commas outside brackets.
std::vector<std::string_view> split_top_level(std::string_view list) {
    std::vector<std::string_view> parts;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
        if (list[i] == '[') ++depth;
        if (list[i] == ']') --depth;
        if (list[i] == ',' && depth == 0) {
            parts.push_back(list.substr(start, i - start));
            start = i + 1;
        }
    }
    parts.push_back(list.substr(start));
    return parts;
}

// The names of one host expression: the text up to its first bracket, each number of the bracket, then (recursively)
// the rest of the expression after each.
void expand_host(std::string_view list, std::string_view host, std::vector<std::string>& out) {
    const std::size_t open = host.find('[');
    if (open == std::string_view::npos) {
        if (host.find(']') != std::string_view::npos) throw bad_list("host list", list, "']' without '['");
        out.emplace_back(host);
        return;
    }
    const std::size_t close = host.find(']', open);
    if (close == std::string_view::npos) throw bad_list("host list", list, "'[' without ']'");
    const std::string_view prefix = host.substr(0, open);
    const std::string_view ranges = host.substr(open + 1, close - open - 1);
    const std::string_view rest = host.substr(close + 1);
    if (ranges.empty()) throw bad_list("host list", list, "empty brackets");
    std::vector<std::string> tails;  // {""} when nothing follows the bracket
    expand_host(list, rest, tails);
    std::size_t start = 0;
    while (start <= ranges.size()) {
        std::size_t comma = ranges.find(',', start);
        if (comma == std::string_view::npos) comma = ranges.size();
        const std::string_view range = ranges.substr(start, comma - start);
        const std::size_t dash = range.find('-');
        const std::string_view low_text = range.substr(0, dash);
        const std::string_view high_text = dash == std::string_view::npos ? low_text : range.substr(dash + 1);
        const auto low = parse_count(low_text);
        const auto high = parse_count(high_text);
        if (!low || !high || *high < *low) {
            throw bad_list("host list", list, "'" + std::string(range) + "' is not a number or a range low-high");
        }
        // The width of the low bound is kept ("01-10": 01 ... 10), as Slurm does.
        for (int n = *low; n <= *high; ++n) {
            std::string number = std::to_string(n);
            if (number.size() < low_text.size()) number.insert(0, low_text.size() - number.size(), '0');
            for (const auto& tail : tails) out.push_back(std::string(prefix) + number + tail);
        }
        start = comma + 1;
    }
}

std::optional<std::string> get(const Environment& environment, const std::string& name) {
    const auto it = environment.find(name);
    if (it == environment.end() || it->second.empty()) return std::nullopt;
    return it->second;
}

// The first of `names` that is set, as a count.
int count(const Environment& environment, std::initializer_list<const char*> names, std::string_view launcher) {
    for (const char* name : names) {
        const auto value = get(environment, name);
        if (!value) continue;
        if (const auto n = parse_count(*value)) return *n;
        throw RankEnvError{std::string(name) + "='" + *value + "' is not a count"};
    }
    throw RankEnvError{std::string(*names.begin()) + " is not set; was this program started by " +
                       std::string(launcher) + "?"};
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
    std::vector<std::string> hosts;
    int depth = 0;
    for (const char c : list) {
        depth += c == '[' ? 1 : c == ']' ? -1 : 0;
        if (depth < 0 || depth > 1) throw bad_list("host list", list, "unbalanced brackets");
    }
    if (depth != 0) throw bad_list("host list", list, "'[' without ']'");
    for (const auto host : split_top_level(list)) {
        if (!host.empty()) expand_host(list, host, hosts);
    }
    return hosts;
}

std::vector<int> expand_tasks_per_node(std::string_view list) {
    std::vector<int> counts;
    for (const auto item : split_top_level(list)) {
        const std::size_t paren = item.find('(');
        const auto tasks = parse_count(item.substr(0, paren));
        int repeat = 1;
        if (paren != std::string_view::npos) {
            if (!item.ends_with(')') || item.substr(paren + 1, 1) != "x") {
                throw bad_list("tasks per node", list, "expected N or N(xM)");
            }
            const auto times = parse_count(item.substr(paren + 2, item.size() - paren - 3));
            if (!times || *times < 1) throw bad_list("tasks per node", list, "expected N or N(xM)");
            repeat = *times;
        }
        if (!tasks) throw bad_list("tasks per node", list, "expected N or N(xM)");
        counts.insert(counts.end(), static_cast<std::size_t>(repeat), *tasks);
    }
    return counts;
}

std::optional<Source> parse_source(std::string_view name) noexcept {
    if (name == "openmpi") return Source::OpenMpi;
    if (name == "hydra") return Source::Hydra;
    if (name == "srun") return Source::Srun;
    return std::nullopt;
}

Environment torch_variables(Source source, const Environment& environment) {
    int rank = 0;
    int world_size = 0;
    int local_rank = 0;
    int local_world_size = 0;
    int group_rank = 0;
    int group_world_size = 0;
    if (source == Source::Srun) {
        constexpr std::string_view srun = "srun";
        rank = count(environment, {"SLURM_PROCID"}, srun);
        world_size = count(environment, {"SLURM_NTASKS", "SLURM_NPROCS"}, srun);
        local_rank = count(environment, {"SLURM_LOCALID"}, srun);
        group_rank = count(environment, {"SLURM_NODEID"}, srun);
        std::vector<int> per_node;
        for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
            const auto value = get(environment, name);
            if (!value) continue;
            try {
                per_node = expand_tasks_per_node(*value);
            } catch (const std::invalid_argument& e) {
                throw RankEnvError{std::string(name) + ": " + e.what()};
            }
            break;
        }
        if (per_node.empty())
            throw RankEnvError{"SLURM_STEP_TASKS_PER_NODE is not set; was this program started by srun?"};
        if (static_cast<std::size_t>(group_rank) >= per_node.size()) {
            throw RankEnvError{"SLURM_STEP_TASKS_PER_NODE does not list node " + std::to_string(group_rank) +
                               " (SLURM_NODEID)"};
        }
        local_world_size = per_node[static_cast<std::size_t>(group_rank)];
        group_world_size = static_cast<int>(per_node.size());
        if (const auto nodes = get(environment, "SLURM_STEP_NUM_NODES")) {
            group_world_size = parse_count(*nodes).value_or(group_world_size);
        }
    } else {
        const bool open_mpi = source == Source::OpenMpi;
        const std::string_view launcher = open_mpi ? "Open MPI's mpirun" : "Hydra's mpirun";
        rank = count(environment, {open_mpi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK"}, launcher);
        world_size = count(environment, {open_mpi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE"}, launcher);
        local_rank = count(environment, {open_mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID"}, launcher);
        local_world_size = count(environment, {open_mpi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "MPI_LOCALNRANKS"}, launcher);
        if (local_world_size < 1) throw RankEnvError{"the launcher says this node has no ranks"};
        group_rank = (rank - local_rank) / local_world_size;
        group_world_size = (world_size + local_world_size - 1) / local_world_size;
    }
    if (rank >= world_size || local_rank >= local_world_size) {
        throw RankEnvError{"rank " + std::to_string(rank) + " of " + std::to_string(world_size) + ", local rank " +
                           std::to_string(local_rank) + " of " + std::to_string(local_world_size) +
                           ": the launcher's variables disagree"};
    }

    Environment out{
        {"RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(world_size)},
        {"LOCAL_RANK", std::to_string(local_rank)},
        {"LOCAL_WORLD_SIZE", std::to_string(local_world_size)},
        {"GROUP_RANK", std::to_string(group_rank)},
        {"GROUP_WORLD_SIZE", std::to_string(group_world_size)},
        {"ROLE_RANK", std::to_string(rank)},
        {"ROLE_WORLD_SIZE", std::to_string(world_size)},
        {"ROLE_NAME", "default"},
    };
    if (const auto address = get(environment, "MASTER_ADDR")) {
        out["MASTER_ADDR"] = *address;
    } else {
        out["MASTER_ADDR"] = "127.0.0.1";
        for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
            const auto list = get(environment, name);
            if (!list) continue;
            try {
                const auto hosts = expand_hostlist(*list);
                if (!hosts.empty()) out["MASTER_ADDR"] = hosts.front();
            } catch (const std::invalid_argument& e) {
                throw RankEnvError{std::string(name) + ": " + e.what()};
            }
            break;
        }
    }
    // torchrun's default port, when the launcher chose none.
    out["MASTER_PORT"] = get(environment, "MASTER_PORT").value_or("29500");
    return out;
}

}  // namespace lockstep::rank_env
