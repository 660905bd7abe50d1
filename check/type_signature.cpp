// MPI type signatures in canonical form (type_signature.hpp).

#include "type_signature.hpp"

#include "entry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace lockstep::check {
namespace {

// The kinds of basic types; a basic type's code is its kind and its size in bytes.
enum Kind : std::uint32_t {
    Character = 1,
    Signed,
    Unsigned,
    Floating,
    Complex,
    Logical,
    WideCharacter,
    Byte,
    Packed,
    Pair,   // MPI_FLOAT_INT and the other MINLOC/MAXLOC types: each its own code
    Other,  // a named type this table does not know: by name
};
constexpr std::uint32_t code(Kind kind, std::uint64_t size_or_index) {
    return (static_cast<std::uint32_t>(kind) << 24) | static_cast<std::uint32_t>(size_or_index & 0xffffff);
}

// Runs longer than this (a struct of many different members, repeated) are not expanded: the type compares by size.
constexpr std::size_t kMaxRuns = 1 << 14;

struct NamedType {
    MPI_Datatype handle;
    Kind kind;
    const char* name;
};

std::vector<NamedType> named_types() {
    return {
        {MPI_CHAR, Character, "MPI_CHAR"},
        {MPI_SIGNED_CHAR, Signed, "MPI_SIGNED_CHAR"},
        {MPI_UNSIGNED_CHAR, Unsigned, "MPI_UNSIGNED_CHAR"},
        {MPI_SHORT, Signed, "MPI_SHORT"},
        {MPI_UNSIGNED_SHORT, Unsigned, "MPI_UNSIGNED_SHORT"},
        {MPI_INT, Signed, "MPI_INT"},
        {MPI_UNSIGNED, Unsigned, "MPI_UNSIGNED"},
        {MPI_LONG, Signed, "MPI_LONG"},
        {MPI_UNSIGNED_LONG, Unsigned, "MPI_UNSIGNED_LONG"},
        {MPI_LONG_LONG_INT, Signed, "MPI_LONG_LONG"},
        {MPI_LONG_LONG, Signed, "MPI_LONG_LONG"},
        {MPI_UNSIGNED_LONG_LONG, Unsigned, "MPI_UNSIGNED_LONG_LONG"},
        {MPI_INT8_T, Signed, "MPI_INT8_T"},
        {MPI_INT16_T, Signed, "MPI_INT16_T"},
        {MPI_INT32_T, Signed, "MPI_INT32_T"},
        {MPI_INT64_T, Signed, "MPI_INT64_T"},
        {MPI_UINT8_T, Unsigned, "MPI_UINT8_T"},
        {MPI_UINT16_T, Unsigned, "MPI_UINT16_T"},
        {MPI_UINT32_T, Unsigned, "MPI_UINT32_T"},
        {MPI_UINT64_T, Unsigned, "MPI_UINT64_T"},
        {MPI_AINT, Signed, "MPI_AINT"},
        {MPI_OFFSET, Signed, "MPI_OFFSET"},
        {MPI_COUNT, Signed, "MPI_COUNT"},
        {MPI_FLOAT, Floating, "MPI_FLOAT"},
        {MPI_DOUBLE, Floating, "MPI_DOUBLE"},
        {MPI_LONG_DOUBLE, Floating, "MPI_LONG_DOUBLE"},
        {MPI_C_FLOAT_COMPLEX, Complex, "MPI_C_FLOAT_COMPLEX"},
        {MPI_C_DOUBLE_COMPLEX, Complex, "MPI_C_DOUBLE_COMPLEX"},
        {MPI_C_LONG_DOUBLE_COMPLEX, Complex, "MPI_C_LONG_DOUBLE_COMPLEX"},
        {MPI_CXX_FLOAT_COMPLEX, Complex, "MPI_CXX_FLOAT_COMPLEX"},
        {MPI_CXX_DOUBLE_COMPLEX, Complex, "MPI_CXX_DOUBLE_COMPLEX"},
        {MPI_CXX_LONG_DOUBLE_COMPLEX, Complex, "MPI_CXX_LONG_DOUBLE_COMPLEX"},
        {MPI_C_BOOL, Logical, "MPI_C_BOOL"},
        {MPI_CXX_BOOL, Logical, "MPI_CXX_BOOL"},
        {MPI_WCHAR, WideCharacter, "MPI_WCHAR"},
        {MPI_BYTE, Byte, "MPI_BYTE"},
        {MPI_PACKED, Packed, "MPI_PACKED"},
        {MPI_CHARACTER, Character, "MPI_CHARACTER"},
        {MPI_INTEGER, Signed, "MPI_INTEGER"},
        {MPI_REAL, Floating, "MPI_REAL"},
        {MPI_DOUBLE_PRECISION, Floating, "MPI_DOUBLE_PRECISION"},
        {MPI_COMPLEX, Complex, "MPI_COMPLEX"},
        {MPI_DOUBLE_COMPLEX, Complex, "MPI_DOUBLE_COMPLEX"},
        {MPI_LOGICAL, Logical, "MPI_LOGICAL"},
        {MPI_FLOAT_INT, Pair, "MPI_FLOAT_INT"},
        {MPI_DOUBLE_INT, Pair, "MPI_DOUBLE_INT"},
        {MPI_LONG_INT, Pair, "MPI_LONG_INT"},
        {MPI_2INT, Pair, "MPI_2INT"},
        {MPI_SHORT_INT, Pair, "MPI_SHORT_INT"},
        {MPI_LONG_DOUBLE_INT, Pair, "MPI_LONG_DOUBLE_INT"},
        {MPI_2REAL, Pair, "MPI_2REAL"},
        {MPI_2DOUBLE_PRECISION, Pair, "MPI_2DOUBLE_PRECISION"},
        {MPI_2INTEGER, Pair, "MPI_2INTEGER"},
    };
}

// A sequence of basic types: `root` repeated `reps` times (canonical once `canonicalize` ran).
struct Sequence {
    std::vector<TypeRun> root;
    std::uint64_t reps = 0;
    bool by_size = false;
};

struct Cache {
    std::mutex mutex;
    std::vector<NamedType> named;
    std::unordered_map<std::uint32_t, std::string> basic_names;  // code -> the name first seen for it
    std::unordered_map<MPI_Datatype, std::unique_ptr<TypeSignature>> types;
    std::atomic<std::uint64_t> generation{0};  // advanced under the lock whenever an entry of `types` goes
};

// The last type this thread looked up, valid while the cache's generation is the one it was found in.
struct LastFound {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    const TypeSignature* signature = nullptr;
    std::uint64_t generation = ~std::uint64_t{0};
};
thread_local LastFound last_found;

Cache& cache() {
    static auto* c = new Cache;  // never destroyed: entry points may run during static destruction
    return *c;
}

void append(std::vector<TypeRun>& runs, TypeRun run) {
    if (run.count == 0) return;
    if (!runs.empty() && runs.back().basic == run.basic) {
        runs.back().count += run.count;
    } else {
        runs.push_back(run);
    }
}

// Whether the sequence `runs` (of `length` basic types) repeats with period `d`: element i equals element i + d.
bool has_period(const std::vector<TypeRun>& runs, std::uint64_t length, std::uint64_t d) {
    // Two cursors, at 0 and at d, walk length - d elements run by run.
    std::size_t a = 0;
    std::uint64_t a_left = runs[0].count;
    std::size_t b = 0;
    std::uint64_t skip = d;
    while (skip >= runs[b].count) skip -= runs[b++].count;
    std::uint64_t b_left = runs[b].count - skip;
    std::uint64_t remaining = length - d;
    while (remaining > 0) {
        if (runs[a].basic != runs[b].basic) return false;
        const std::uint64_t step = std::min({a_left, b_left, remaining});
        remaining -= step;
        a_left -= step;
        b_left -= step;
        if (remaining == 0) break;
        if (a_left == 0) a_left = runs[++a].count;
        if (b_left == 0) b_left = runs[++b].count;
    }
    return true;
}

// The primitive root of a sequence: the shortest prefix it is a repetition of.
Sequence canonicalize(std::vector<TypeRun> runs, std::uint64_t reps) {
    if (runs.empty() || reps == 0) return Sequence{{}, 0, false};
    if (runs.size() == 1) return Sequence{{{runs[0].basic, 1}}, runs[0].count * reps, false};
    std::uint64_t length = 0;
    for (const auto& r : runs) length += r.count;
    // A period d shorter than the sequence divides its length, and the copy of the root that starts at d starts as
    // the sequence does: at a run boundary (when the root's first and last types differ), or `runs[0].count` before
    // the end of a run of the first type (when they are the same, the copies' seams merge into one run). The first
    // such d that is a period is the primitive root's.
    std::vector<std::uint64_t> candidates;
    std::uint64_t end = 0;
    for (const auto& r : runs) {
        end += r.count;
        candidates.push_back(end);
        if (r.basic == runs[0].basic && r.count >= runs[0].count) candidates.push_back(end - runs[0].count);
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    for (const std::uint64_t d : candidates) {
        if (d == 0 || d > length / 2) continue;
        if (length % d != 0 || !has_period(runs, length, d)) continue;
        std::vector<TypeRun> root;
        std::uint64_t left = d;
        for (const auto& r : runs) {
            const std::uint64_t take = std::min(left, r.count);
            append(root, {r.basic, take});
            left -= take;
            if (left == 0) break;
        }
        return Sequence{std::move(root), reps * (length / d), false};
    }
    return Sequence{std::move(runs), reps, false};
}

Sequence by_size() {
    return Sequence{{}, 0, true};
}

Sequence flatten(MPI_Datatype type, Cache& c, int depth);

Sequence named_sequence(MPI_Datatype type, Cache& c) {
    int size = 0;
    PMPI_Type_size(type, &size);
    if (size == 0) return Sequence{};  // MPI_LB, MPI_UB and other markers carry no data
    std::uint32_t basic = 0;
    const char* name = nullptr;
    for (std::size_t i = 0; i < c.named.size(); ++i) {
        if (c.named[i].handle != type) continue;
        const Kind kind = c.named[i].kind;
        if (kind == Byte || kind == Packed) return by_size();
        basic = code(kind, kind == Pair ? i : static_cast<std::uint64_t>(size));
        name = c.named[i].name;
        break;
    }
    std::string other_name;
    if (name == nullptr) {
        char text[MPI_MAX_OBJECT_NAME] = {};
        int length = 0;
        PMPI_Type_get_name(type, text, &length);
        other_name = text;
        basic = code(Other, std::hash<std::string>{}(other_name + "/" + std::to_string(size)));
    }
    c.basic_names.try_emplace(basic, name != nullptr ? std::string(name) : other_name);
    return Sequence{{{basic, 1}}, 1, false};
}

// `seq` repeated `times`, appended to `runs`; false when that would pass kMaxRuns.
bool append_repeated(std::vector<TypeRun>& runs, const Sequence& seq, std::uint64_t times) {
    if (seq.root.empty() || times == 0 || seq.reps == 0) return true;
    if (seq.root.size() == 1) {
        append(runs, {seq.root[0].basic, seq.root[0].count * seq.reps * times});
        return true;
    }
    const std::uint64_t copies = seq.reps * times;
    if (copies > kMaxRuns || runs.size() + copies * seq.root.size() > kMaxRuns) return false;
    for (std::uint64_t i = 0; i < copies; ++i) {
        for (const auto& r : seq.root) append(runs, r);
    }
    return true;
}

Sequence repeated(Sequence inner, std::uint64_t times) {
    if (inner.by_size) return inner;
    inner.reps *= times;
    if (inner.reps == 0) inner.root.clear();
    return inner;
}

Sequence flatten_derived(int combiner, const std::vector<int>& ints, const std::vector<MPI_Aint>& /*addresses*/,
                         const std::vector<MPI_Datatype>& types, MPI_Datatype whole, Cache& c, int depth) {
    const auto total = [](auto first, auto last) {
        std::uint64_t n = 0;
        for (auto it = first; it != last; ++it) n += static_cast<std::uint64_t>(std::max(*it, 0));
        return n;
    };
    switch (combiner) {
        case MPI_COMBINER_DUP:
        case MPI_COMBINER_RESIZED:
            return flatten(types[0], c, depth + 1);
        case MPI_COMBINER_CONTIGUOUS:
            return repeated(flatten(types[0], c, depth + 1), static_cast<std::uint64_t>(std::max(ints[0], 0)));
        case MPI_COMBINER_VECTOR:
        case MPI_COMBINER_HVECTOR:
        case MPI_COMBINER_INDEXED_BLOCK:
        case MPI_COMBINER_HINDEXED_BLOCK:
            return repeated(flatten(types[0], c, depth + 1), static_cast<std::uint64_t>(std::max(ints[0], 0)) *
                                                                 static_cast<std::uint64_t>(std::max(ints[1], 0)));
        case MPI_COMBINER_INDEXED:
        case MPI_COMBINER_HINDEXED:
            return repeated(flatten(types[0], c, depth + 1), total(ints.begin() + 1, ints.begin() + 1 + ints[0]));
        case MPI_COMBINER_SUBARRAY: {
            const int ndims = ints[0];
            return repeated(
                flatten(types[0], c, depth + 1),
                total(ints.begin() + 1 + ndims, ints.begin() + 1 + 2 * ndims) == 0 ? 0 : [&] {
                    std::uint64_t n = 1;
                    for (int d = 0; d < ndims; ++d) n *= static_cast<std::uint64_t>(ints[1 + ndims + d]);
                    return n;
                }());
        }
        case MPI_COMBINER_STRUCT: {
            std::vector<TypeRun> runs;
            for (int i = 0; i < ints[0]; ++i) {
                const Sequence member = flatten(types[static_cast<std::size_t>(i)], c, depth + 1);
                if (member.by_size) return by_size();
                if (!append_repeated(runs, member, static_cast<std::uint64_t>(std::max(ints[1 + i], 0)))) {
                    return by_size();
                }
            }
            return canonicalize(std::move(runs), 1);
        }
        case MPI_COMBINER_DARRAY: {
            // Some elements of the old type (which ones is the distribution's business): as many as the size says.
            const Sequence inner = flatten(types[0], c, depth + 1);
            int size = 0;
            int inner_size = 0;
            PMPI_Type_size(whole, &size);
            PMPI_Type_size(types[0], &inner_size);
            if (inner_size == 0 || size % inner_size != 0) return by_size();
            return repeated(inner, static_cast<std::uint64_t>(size / inner_size));
        }
        case MPI_COMBINER_F90_REAL:
        case MPI_COMBINER_F90_COMPLEX:
        case MPI_COMBINER_F90_INTEGER: {
            int size = 0;
            PMPI_Type_size(whole, &size);
            const Kind kind = combiner == MPI_COMBINER_F90_REAL      ? Floating
                              : combiner == MPI_COMBINER_F90_COMPLEX ? Complex
                                                                     : Signed;
            const std::uint32_t basic = code(kind, static_cast<std::uint64_t>(size));
            c.basic_names.try_emplace(basic, fmt::format("{}({} bytes)",
                                                         kind == Floating  ? "REAL"
                                                         : kind == Complex ? "COMPLEX"
                                                                           : "INTEGER",
                                                         size));
            return Sequence{{{basic, 1}}, 1, false};
        }
        default:
            return by_size();
    }
}

Sequence flatten(MPI_Datatype type, Cache& c, int depth) {
    if (depth > 64) return by_size();
    int num_ints = 0;
    int num_addresses = 0;
    int num_types = 0;
    int combiner = 0;
    if (PMPI_Type_get_envelope(type, &num_ints, &num_addresses, &num_types, &combiner) != MPI_SUCCESS) {
        return by_size();
    }
    if (combiner == MPI_COMBINER_NAMED) return named_sequence(type, c);
    std::vector<int> ints(static_cast<std::size_t>(num_ints));
    std::vector<MPI_Aint> addresses(static_cast<std::size_t>(num_addresses));
    std::vector<MPI_Datatype> types(static_cast<std::size_t>(num_types));
    if (PMPI_Type_get_contents(type, num_ints, num_addresses, num_types, ints.data(), addresses.data(), types.data()) !=
        MPI_SUCCESS) {
        return by_size();
    }
    Sequence seq = flatten_derived(combiner, ints, addresses, types, type, c, depth);
    // get_contents hands out new references to derived types.
    for (MPI_Datatype& t : types) {
        int ni = 0;
        int na = 0;
        int nt = 0;
        int comb = 0;
        PMPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
        if (comb != MPI_COMBINER_NAMED) PMPI_Type_free(&t);
    }
    return seq;
}

const char* combiner_name(int combiner) {
    switch (combiner) {
        case MPI_COMBINER_DUP:
            return "MPI_Type_dup";
        case MPI_COMBINER_CONTIGUOUS:
            return "MPI_Type_contiguous";
        case MPI_COMBINER_VECTOR:
            return "MPI_Type_vector";
        case MPI_COMBINER_HVECTOR:
            return "MPI_Type_create_hvector";
        case MPI_COMBINER_INDEXED:
            return "MPI_Type_indexed";
        case MPI_COMBINER_HINDEXED:
            return "MPI_Type_create_hindexed";
        case MPI_COMBINER_INDEXED_BLOCK:
            return "MPI_Type_create_indexed_block";
        case MPI_COMBINER_HINDEXED_BLOCK:
            return "MPI_Type_create_hindexed_block";
        case MPI_COMBINER_STRUCT:
            return "MPI_Type_create_struct";
        case MPI_COMBINER_SUBARRAY:
            return "MPI_Type_create_subarray";
        case MPI_COMBINER_DARRAY:
            return "MPI_Type_create_darray";
        case MPI_COMBINER_RESIZED:
            return "MPI_Type_create_resized";
        default:
            return "a derived datatype";
    }
}

std::uint64_t hash_runs(const std::vector<TypeRun>& runs) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    const auto mix = [&](std::uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    };
    for (const auto& r : runs) {
        mix(r.basic);
        mix(r.count);
    }
    return h;
}

std::unique_ptr<TypeSignature> make_signature(MPI_Datatype type, Cache& c) {
    auto sig = std::make_unique<TypeSignature>();
    int size = 0;
    PMPI_Type_size(type, &size);
    sig->size = static_cast<std::uint64_t>(std::max(size, 0));
    Sequence seq = flatten(type, c, 0);
    sig->by_size = seq.by_size;
    sig->root = std::move(seq.root);
    sig->reps = seq.reps;
    sig->root_hash = hash_runs(sig->root);
    char text[MPI_MAX_OBJECT_NAME] = {};
    int length = 0;
    PMPI_Type_get_name(type, text, &length);
    sig->name = text;
    if (sig->name.empty()) {
        int ni = 0;
        int na = 0;
        int nt = 0;
        int comb = 0;
        PMPI_Type_get_envelope(type, &ni, &na, &nt, &comb);
        sig->name = combiner_name(comb);
    }
    if (sig->by_size) {
        sig->root_text = "bytes";
    } else {
        std::string root;
        for (const auto& r : sig->root) {
            if (!root.empty()) root += ", ";
            const auto name = c.basic_names.find(r.basic);
            root += name != c.basic_names.end() ? name->second : "?";
            if (r.count != 1) root += fmt::format(" x{}", r.count);
        }
        sig->root_text = sig->root.size() == 1 && sig->root[0].count == 1 ? root : "{" + root + "}";
    }
    return sig;
}

}  // namespace

const TypeSignature& type_signature(MPI_Datatype type) {
    Cache& c = cache();
    if (last_found.type == type && last_found.generation == c.generation.load(std::memory_order_acquire)) {
        return *last_found.signature;
    }
    std::scoped_lock lock(c.mutex);
    if (c.named.empty()) {
        for (const auto& n : named_types()) {
            if (n.handle != MPI_DATATYPE_NULL) c.named.push_back(n);
        }
    }
    auto& slot = c.types[type];
    if (!slot) slot = make_signature(type, c);
    last_found = {type, slot.get(), c.generation.load(std::memory_order_relaxed)};
    return *slot;
}

void forget_type_signature(MPI_Datatype type) {
    Cache& c = cache();
    std::scoped_lock lock(c.mutex);
    c.types.erase(type);
    c.generation.fetch_add(1, std::memory_order_release);
}

SideDigest side_digest(long long count, MPI_Datatype type) {
    SideDigest side{};
    side.present = 1;
    side.count = count;
    if (type == MPI_DATATYPE_NULL) return side;
    const TypeSignature& sig = type_signature(type);
    const auto n = static_cast<std::uint64_t>(std::max(count, 0LL));
    side.bytes = sig.size * n;
    side.by_size = sig.by_size ? 1 : 0;
    side.reps = sig.by_size ? 0 : sig.reps * n;
    side.root_hash = side.reps == 0 ? 0 : sig.root_hash;
    return side;
}

SideDigest digest(const SideSignature& side) noexcept {
    return SideDigest{side.root_hash, side.reps, side.bytes, side.count, side.by_size, side.present};
}

SideSignature with_names(const SideDigest& d, const SideSignature& named) noexcept {
    SideSignature side = named;
    side.root_hash = d.root_hash;
    side.reps = d.reps;
    side.bytes = d.bytes;
    side.count = d.count;
    side.by_size = d.by_size;
    side.present = d.present;
    return side;
}

SideSignature side_signature(long long count, MPI_Datatype type) {
    SideSignature side = with_names(side_digest(count, type), SideSignature{});
    if (type == MPI_DATATYPE_NULL) {
        side.type.assign("MPI_DATATYPE_NULL");
        return side;
    }
    const TypeSignature& sig = type_signature(type);
    side.type.assign(sig.name);
    side.root.assign(sig.root_text);
    return side;
}

bool signatures_match(const SideDigest& a, const SideDigest& b) noexcept {
    if (a.by_size != 0 || b.by_size != 0) return a.bytes == b.bytes;
    return a.reps == b.reps && (a.reps == 0 || a.root_hash == b.root_hash);
}

bool signatures_match(const SideSignature& a, const SideSignature& b) noexcept {
    return signatures_match(digest(a), digest(b));
}

std::string describe(const SideSignature& side) {
    const std::string type = side.type.str();
    std::string text = fmt::format("{} x {}", side.count, type);
    if (side.by_size != 0)
        return side.count == 1 && type != "MPI_BYTE" ? fmt::format("{} ({} bytes)", text, side.bytes) : text;
    const std::string root = side.root.str();
    if (root == type || side.reps == 0) return text;
    return fmt::format("{} (= {} x {})", text, side.reps, root);
}

}  // namespace lockstep::check

using namespace lockstep::check;

LOCKSTEP_CHECK_ENTRY int MPI_Type_free(MPI_Datatype* type) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Type_free(type));
    if (!debug_mode) return PMPI_Type_free(type);
    forget_type_signature(*type);
    if (postpone_type_free(*type)) {
        *type = MPI_DATATYPE_NULL;  // as MPI_Type_free leaves it
        return MPI_SUCCESS;
    }
    return PMPI_Type_free(type);
}
