#pragma once
// `lockstep-rank-env`: the small program `lockstep launch` puts in front of the user's program on every rank. It reads
// the rank's place in the job from the variables its MPI launcher sets (Open MPI's mpirun, Hydra's mpirun, Slurm's
// srun), sets the variables torchrun gives its workers (RANK, WORLD_SIZE, LOCAL_RANK, ...) and then executes the
// program, so that a script written for torchrun runs unchanged. Per-rank values cannot travel through the launcher's
// forwarding of variables, which gives every rank the same value; hence a program that runs on the rank itself.
//
// This file holds the pure part (variables in, variables out), so that it can be tested without a launcher. It needs
// neither MPI nor the lockstep library.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::rank_env {

using Environment = std::map<std::string, std::string>;

// Something the launcher's variables do not say, or say in a form that cannot be read; the message names the variable.
struct RankEnvError {
    std::string message;
};

// Expands a Slurm host list ("node[01-03,7],gpu5", "a[1-2]b[3-4]") into host names, in order, keeping each range's
// zero padding. Throws std::invalid_argument naming the list for an unbalanced bracket or a bad range.
[[nodiscard]] std::vector<std::string> expand_hostlist(std::string_view list);

// Expands Slurm's tasks per node ("2(x3),1" means 2,2,2,1). Throws std::invalid_argument for a malformed list.
[[nodiscard]] std::vector<int> expand_tasks_per_node(std::string_view list);

// The launcher whose variables are read: the one `lockstep launch` started the job with.
enum class Source { OpenMpi, Hydra, Srun };
[[nodiscard]] std::optional<Source> parse_source(std::string_view name) noexcept;

// torchrun's variables for this rank, computed from `environment` (the rank's own, as the launcher started it).
// MASTER_ADDR and MASTER_PORT are left as they are when set; MASTER_ADDR otherwise comes from the Slurm node list
// (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST: its first host), else 127.0.0.1; MASTER_PORT otherwise is torchrun's
// default, 29500. GROUP_RANK is the node's index:
// Slurm's SLURM_NODEID; for mpirun, which does not say it, the index of the block of LOCAL_WORLD_SIZE ranks this rank
// is in (ranks placed by slot, the same number on every node, as mpirun does by default and as torchrun assumes).
// Throws RankEnvError when a variable the launcher should have set is missing or not a count.
[[nodiscard]] Environment torch_variables(Source source, const Environment& environment);

}  // namespace lockstep::rank_env
