#pragma once
// The program's communicators as the checking core knows them (debug mode): each with its shadow, a duplicate on
// which the signatures travel so that they never mix with the program's own messages, a job-wide identifier and the
// number of collectives the program made on it.
//
// The identifier is the same on every member without any exchange: the world and self communicators have fixed ones,
// and a communicator made from a parent is named by the parent's identifier, how many communicators had been made
// from that parent before (a collective count, the same on every member of the parent) and, for a split, the colour.

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lockstep::check {

struct CommunicatorRecord {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm shadow = MPI_COMM_NULL;
    MPI_Request shadow_pending = MPI_REQUEST_NULL;  // MPI_Comm_idup's: the shadow's own duplication, until first use
    std::uint64_t id = 0;                           // 0: unknown to some members, never compared
    std::uint64_t collectives = 0;                  // collectives the program made on it
    std::uint64_t children = 0;                     // communicators made from it
    int rank = 0;
    int size = 0;
    bool inter = false;
    const char* created_by = "";  // "MPI_Comm_split", "MPI_Init" for world and self
    const void* caller = nullptr;
};

// Mixes a part into an identifier.
[[nodiscard]] std::uint64_t mix_id(std::uint64_t id, std::uint64_t part) noexcept;

// The record of `comm`, made on first use (a collective PMPI_Comm_dup on its members, who all meet it at the same
// collective) for a communicator made by a function this library does not intercept. Null for MPI_COMM_NULL.
[[nodiscard]] CommunicatorRecord* find_communicator(MPI_Comm comm);
// How a new communicator's identifier is derived from its parent's.
enum class Derivation {
    EveryMember,  // every member of the parent made the call (dup, split, ...): the parent's creation count counts
    GroupOnly,    // only the new members did (MPI_Comm_create_group): `color` alone tells it from its siblings
};
// Registers `created`, made by `function` from `parent`, with `color` for a split: makes its shadow (collective over
// its members). A communicator without a parent the program holds (MPI_COMM_NULL: an intercommunicator's merge, a
// port's) gets identifier 0, left out of the comparison at MPI_Finalize. Does nothing for MPI_COMM_NULL.
void register_communicator(MPI_Comm created, MPI_Comm parent, const char* function, const void* caller,
                           std::uint64_t color = 0, Derivation derivation = Derivation::EveryMember);
// Registers the communicator of an MPI_Comm_idup of `parent`, not usable before the program's request completes: its
// shadow is a non-blocking duplication of the parent's shadow (same group), completed at its first use.
void register_nonblocking_dup(MPI_Comm created, MPI_Comm parent, const char* function, const void* caller);
// The program freed `comm`: its shadow goes too; its call count is kept for the comparison at MPI_Finalize.
void forget_communicator(MPI_Comm comm);
// The shadows of world and self, at MPI_Init.
void register_predefined_communicators();

// "MPI_COMM_WORLD", "the communicator of MPI_Comm_split at f (file:line)".
[[nodiscard]] std::string communicator_label(const CommunicatorRecord& comm);

// What MPI_Finalize compares: one row per communicator of two or more processes the program made, freed or not (rows
// with the same identifier are added up). A communicator of one process (MPI_COMM_SELF, a duplicate of it) is another
// communicator on every process, whatever its identifier.
struct CommunicatorCount {
    std::uint64_t id;
    std::uint64_t collectives;
    int size;
    std::string name;  // "MPI_COMM_WORLD", "MPI_Comm_split at f (file:line)"
};
[[nodiscard]] std::vector<CommunicatorCount> communicator_counts();
// Frees every shadow (at MPI_Finalize).
void free_shadows();

}  // namespace lockstep::check
