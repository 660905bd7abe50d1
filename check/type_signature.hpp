#pragma once
// MPI type signatures, compared as MPI's type-matching rule compares them: a datatype is flattened (its envelope and
// contents, recursively) to its sequence of basic types, displacements left out. One element's sequence is kept in a
// canonical form, its primitive root (a run-length-encoded sequence that is not itself a repetition) and how many
// times the root repeats, so that `count x type` is compared as a whole sequence without expanding any count:
// 4 x MPI_INT, 1 x contiguous(4, MPI_INT) and 2 x contiguous(2, MPI_INT) are all (MPI_INT) x 4.
//
// Basic types compare by kind and size (a signed integer of 4 bytes, a float of 8 bytes): the same C type under two
// names (MPI_LONG and MPI_INT64_T, MPI_INT and Fortran's MPI_INTEGER on this platform) matches, which MPI leaves to
// the implementation and which real programs rely on. A signature that holds MPI_PACKED (which matches any type) or
// MPI_BYTE (raw storage, which programs mix with typed data), or a type this code cannot flatten, compares by size in
// bytes only: no false alarm on a correct program comes first.

#include "../collectives/fixed_record.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::check {

// A run of one basic type: kind and size (an opaque code) and how many in a row.
struct TypeRun {
    std::uint32_t basic;
    std::uint64_t count;
    bool operator==(const TypeRun&) const = default;
};

// One element of a datatype: `root` repeated `reps` times.
struct TypeSignature {
    std::vector<TypeRun> root;
    std::uint64_t reps = 0;
    std::uint64_t root_hash = 0;
    std::uint64_t size = 0;  // bytes of one element (MPI_Type_size)
    bool by_size = false;    // compared by size only (MPI_BYTE, MPI_PACKED, a type that could not be flattened)
    std::string name;        // "MPI_INT", the name the program gave the type, or what made it ("MPI_Type_vector")
    std::string root_text;   // "MPI_INT", "{MPI_INT, MPI_DOUBLE x2}"
};

// The signature of one element of `type` (cached per handle; MPI_Type_free drops the entry). Thread-safe.
[[nodiscard]] const TypeSignature& type_signature(MPI_Datatype type);
void forget_type_signature(MPI_Datatype type);

// `count` elements of a datatype as it travels in a signature record.
struct SideSignature {
    std::uint64_t root_hash;
    std::uint64_t reps;  // root repetitions in all `count` elements; 0: an empty signature
    std::uint64_t bytes;
    std::int64_t count;
    std::uint32_t by_size;       // 1: compared by size only
    std::uint32_t present;       // 1: this side is part of the call on this process
    detail::FixedText<32> type;  // the datatype's name
    detail::FixedText<48> root;  // the root's text
};
static_assert(detail::FixedRecord<SideSignature> && sizeof(SideSignature) % 8 == 0);

// What of a side must agree, without the names: what travels on every call (the names only with a report).
struct SideDigest {
    std::uint64_t root_hash;
    std::uint64_t reps;
    std::uint64_t bytes;
    std::int64_t count;
    std::uint32_t by_size;
    std::uint32_t present;
};
static_assert(detail::FixedRecord<SideDigest> && sizeof(SideDigest) % 8 == 0);

[[nodiscard]] SideSignature side_signature(long long count, MPI_Datatype type);
[[nodiscard]] SideDigest side_digest(long long count, MPI_Datatype type);
[[nodiscard]] SideDigest digest(const SideSignature& side) noexcept;
// A side with the numbers of `d` and the names of `named` (the same side as `d` describes, from a report's records).
[[nodiscard]] SideSignature with_names(const SideDigest& d, const SideSignature& named) noexcept;
// Whether data sent as `a` can be received as `b` (or the other way): equal sequences of basic types, or equal sizes
// when either compares by size.
[[nodiscard]] bool signatures_match(const SideDigest& a, const SideDigest& b) noexcept;
[[nodiscard]] bool signatures_match(const SideSignature& a, const SideSignature& b) noexcept;
// "4 x MPI_INT", "1 x row (= 4 x MPI_DOUBLE)", "0 elements".
[[nodiscard]] std::string describe(const SideSignature& side);

}  // namespace lockstep::check
