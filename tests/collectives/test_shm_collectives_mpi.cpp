// The shared-memory collectives (collectives/shm/), run under mpirun: 2, 3 and 4 ranks on one node with
// LOCKSTEP_SHM_THRESHOLD=0 (every host tensor, 0 and 1 elements included, lies in the arena), 3 ranks of which one
// keeps its tensors private (LOCKSTEP_TEST_SHM_EXPECT=mixed, tests/collectives/shm_test.py mixed), and 2 + 2 and 2 + 1
// ranks on two nodes of the ssh test cluster (LOCKSTEP_TEST_EXPECT_NODES=2, tests/collectives/shm_test.py cluster).
//
// Every grid case makes the same call twice: through the arena (the communicator's default) and through MPI
// (set_shared_memory(false)). It checks which path each took (CommunicatorStats::shm_calls and hierarchical_calls),
// that both give the same bytes, that these equal the closed form, and that every rank holds the same bits (a hash of
// the result, compared through MPI). Inputs are small multiples of 0.5 (integers for integer dtypes), so that every
// sum and product is exact in every dtype and a closed form can be compared bit for bit.
//
// Which path a call must take: on one node every op goes through the arena; across nodes allreduce is hierarchical
// (arena, MPI between nodes, arena) when every node holds as many of the processes, and every other op takes the MPI
// path; when some rank's tensor is private, the MPI path. The last cases are adversarial: views at a different offset
// on each rank, inputs overwritten the moment a call returns while one rank is late by turns, and two threads with a
// communicator each.
#define BOOST_TEST_MODULE shm_collectives_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>
#include <lockstep/shared_memory.hpp>

#include <mpi.h>

#include "runtime_fixture.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace lockstep;

namespace {

using Bytes = std::vector<std::uint8_t>;

enum class Kind { Allreduce, ReduceScatter, Allgather, Broadcast, Reduce };
// Arena: through the arena on one node. Hierarchical: through the arena, spanning nodes. Mpi: not through the arena.
// Any: either (an allreduce across nodes whose processes are spread unevenly, or a communicator of one process).
enum class Path { Arena, Hierarchical, Mpi, Any };

const ReduceOp every_op[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean};

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
}

// The run where some processes keep their tensors private (a larger LOCKSTEP_SHM_THRESHOLD): always the MPI path.
bool mixed_run() {
    return env("LOCKSTEP_TEST_SHM_EXPECT").value_or("arena") == "mixed";
}

// Where the processes of a communicator are, found with MPI itself (not with lockstep's view of it).
struct Topology {
    MPI_Comm comm = MPI_COMM_NULL;  // this program's own communicator over the same processes, for its checks
    int size = 1;
    int rank = 0;
    int local_size = 1;
    int local_rank = 0;
    int nodes = 1;
    int node_color = 0;   // the lowest rank (in `comm`) on this process's node
    bool uniform = true;  // every node holds the same number of the processes
};

Topology topology_of(MPI_Comm comm) {
    Topology t;
    t.comm = comm;
    MPI_Comm_size(comm, &t.size);
    MPI_Comm_rank(comm, &t.rank);
    MPI_Comm local = MPI_COMM_NULL;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, t.rank, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &t.local_size);
    MPI_Comm_rank(local, &t.local_rank);
    t.node_color = t.rank;
    MPI_Bcast(&t.node_color, 1, MPI_INT, 0, local);
    MPI_Comm_free(&local);
    int leader = t.local_rank == 0 ? 1 : 0;
    MPI_Allreduce(&leader, &t.nodes, 1, MPI_INT, MPI_SUM, comm);
    int most = 0, least = 0;
    MPI_Allreduce(&t.local_size, &most, 1, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(&t.local_size, &least, 1, MPI_INT, MPI_MIN, comm);
    t.uniform = most == least;
    return t;
}

const Topology& world() {
    static const Topology t = topology_of(MPI_COMM_WORLD);
    return t;
}

using lockstep_test::comm;

Path expected_path(const Topology& t, Kind kind) {
    if (mixed_run()) return Path::Mpi;
    if (t.size == 1) return Path::Any;
    if (t.nodes == 1) return Path::Arena;
    if (kind != Kind::Allreduce) return Path::Mpi;
    return t.uniform && t.local_size > 1 ? Path::Hierarchical : Path::Any;
}

std::string_view path_name(Path p) {
    switch (p) {
        case Path::Arena:
            return "arena";
        case Path::Hierarchical:
            return "hierarchical";
        case Path::Mpi:
            return "MPI";
        case Path::Any:
            return "any";
    }
    return "?";
}

// Checks that exactly one collective ran since construction, and that it took `path`.
class PathProbe {
public:
    explicit PathProbe(const Communicator& c) : c_(c), before_(c.stats()) {}
    void expect(Path path) const {
        const CommunicatorStats after = c_.stats();
        const std::uint64_t shm = after.shm_calls - before_.shm_calls;
        const std::uint64_t hier = after.hierarchical_calls - before_.hierarchical_calls;
        BOOST_TEST(after.collectives - before_.collectives == 1u);
        BOOST_TEST_CONTEXT("expected path: " << path_name(path) << ", shm_calls +" << shm << ", hierarchical_calls +"
                                             << hier) {
            switch (path) {
                case Path::Arena:
                    BOOST_TEST((shm == 1u && hier == 0u));
                    break;
                case Path::Hierarchical:
                    BOOST_TEST((shm == 1u && hier == 1u));
                    break;
                case Path::Mpi:
                    BOOST_TEST((shm == 0u && hier == 0u));
                    break;
                case Path::Any:
                    BOOST_TEST((shm <= 1u && hier <= shm));
                    break;
            }
        }
    }

private:
    const Communicator& c_;
    CommunicatorStats before_;
};

Bytes bytes_of(const Tensor& t) {
    Bytes b(t.nbytes());
    if (!b.empty()) t.copy_to_host(b.data());
    return b;
}

std::uint64_t fnv1a(const Bytes& b) {
    std::uint64_t h = 14695981039346656037ull;
    for (std::uint8_t x : b) {
        h ^= x;
        h *= 1099511628211ull;
    }
    return h;
}

// Whether every process of `peers` passes the same hash (one MPI_Allgather, outside lockstep).
bool same_on_every_rank(MPI_Comm peers, std::uint64_t hash) {
    int n = 0;
    MPI_Comm_size(peers, &n);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(n));
    MPI_Allgather(&hash, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, peers);
    for (std::uint64_t h : all) {
        if (h != hash) return false;
    }
    return true;
}

std::vector<double> values(const Tensor& t) {
    return ops::cast(t, DType::Float64).to_vector<double>();
}

// Every element as doubles, a complex one as its real and imaginary parts.
std::vector<double> parts(const Tensor& t) {
    if (!is_complex(t.dtype())) return values(t);
    const Tensor host = t.to(Device::cpu()).clone();
    return values(
        Tensor::from_blob(const_cast<void*>(host.data()), {2 * host.numel()}, real_dtype(host.dtype()), Device::cpu()));
}

// Element i of process r: small multiples of 0.5 (integers, or 0/1 for bool), so that sums and products of up to four
// of them are exact in every dtype and fit int8 and uint8.
double element(DType dtype, std::int64_t i, int r) {
    const std::int64_t k = (i * 5 + static_cast<std::int64_t>(r) * 3) % 7;
    if (dtype == DType::Bool) return k % 3 == 0 ? 1.0 : 0.0;
    if (dtype == DType::UInt8 || dtype == DType::UInt16 || dtype == DType::UInt32 || dtype == DType::UInt64) {
        return static_cast<double>((k + 1) % 4);
    }
    const double v = static_cast<double>(k - 3);
    return is_floating(dtype) ? v * 0.5 : v;
}

std::vector<double> elements(DType dtype, std::int64_t numel, int r, std::int64_t first = 0) {
    std::vector<double> v(static_cast<std::size_t>(numel));
    for (std::int64_t i = 0; i < numel; ++i) v[static_cast<std::size_t>(i)] = element(dtype, first + i, r);
    return v;
}

Tensor tensor_of(const std::vector<double>& v, const Shape& shape, DType dtype) {
    // No elements: Tensor::empty, because from_data of an empty vector passes memcpy a null pointer (UBSan).
    if (v.empty()) return Tensor::empty(shape, dtype);
    return ops::cast(Tensor::from_data<double>(v, shape), dtype);
}

Tensor input(DType dtype, const Shape& shape, int r) {
    return tensor_of(elements(dtype, shape_numel(shape), r), shape, dtype);
}

// The reduction of element i over `n` processes, in exact arithmetic.
double combine(ReduceOp op, DType dtype, std::int64_t i, int n) {
    double acc = element(dtype, i, 0);
    for (int r = 1; r < n; ++r) {
        const double x = element(dtype, i, r);
        switch (op) {
            case ReduceOp::Sum:
            case ReduceOp::Mean:
                acc = dtype == DType::Bool ? double(acc != 0 || x != 0) : acc + x;
                break;
            case ReduceOp::Prod:
                acc = dtype == DType::Bool ? double(acc != 0 && x != 0) : acc * x;
                break;
            case ReduceOp::Max:
                acc = std::max(acc, x);
                break;
            case ReduceOp::Min:
                acc = std::min(acc, x);
                break;
        }
    }
    return op == ReduceOp::Mean ? acc / n : acc;
}

// The closed form of a reduction over `n` processes, elements [first, first + count), rounded to the dtype once.
std::vector<double> reduced(DType dtype, ReduceOp op, int n, std::int64_t count, std::int64_t first = 0) {
    std::vector<double> v(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = combine(op, dtype, first + i, n);
    return values(tensor_of(v, {count}, dtype));
}

bool valid_op(DType dtype, ReduceOp op) {
    if (is_complex(dtype)) return op != ReduceOp::Max && op != ReduceOp::Min;
    return op != ReduceOp::Mean || is_floating(dtype);
}

// A mean over a process count that is not a power of two is not exact: the closed form is then within a tolerance.
double tolerance(DType dtype, ReduceOp op, int n) {
    if (op != ReduceOp::Mean || (n & (n - 1)) == 0) return 0.0;
    if (dtype == DType::Float16 || dtype == DType::BFloat16) return 1e-2;
    return dtype == DType::Float32 ? 1e-6 : 1e-13;
}

bool close_to(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (tol == 0.0 ? got[i] != want[i] : std::abs(got[i] - want[i]) > tol * std::max(1.0, std::abs(want[i])))
            return false;
    }
    return true;
}

bool expected_in_arena(const Tensor& t) {
    const SharedMemoryStatus s = shared_memory_status();
    return s.active && t.nbytes() >= s.threshold_bytes;
}

struct Case {
    Communicator& c;
    const Topology& topo;
    Kind kind;
    std::function<Tensor()> call;             // makes the call (in-place forms on a fresh copy of their input)
    std::optional<std::vector<double>> want;  // the closed form; nullopt: the call returns an undefined tensor here
    double tol = 0.0;
    bool same_everywhere = true;  // the result is the same on every process (allreduce, allgather, broadcast)
};

// The call through the arena and through MPI: the path each took, the same bytes, the closed form, and the same bits
// on every process.
void check(const Case& k) {
    Tensor shm;
    {
        PathProbe probe(k.c);
        shm = k.call();
        probe.expect(expected_path(k.topo, k.kind));
    }
    Tensor mpi;
    {
        k.c.set_shared_memory(false);
        PathProbe probe(k.c);
        mpi = k.call();
        probe.expect(Path::Mpi);
        k.c.set_shared_memory(true);
    }
    BOOST_TEST(shm.defined() == k.want.has_value());
    BOOST_TEST(mpi.defined() == k.want.has_value());
    if (!shm.defined() || !mpi.defined()) return;
    BOOST_TEST((shm.dtype() == mpi.dtype()));
    BOOST_TEST(shm.shape() == mpi.shape());
    if (is_complex(shm.dtype())) {
        // Complex products of exact values are exact, but the sign of a zero imaginary part depends on the order the
        // processes' factors meet in: equal values, not necessarily equal bytes.
        BOOST_TEST(parts(shm) == parts(mpi), "the arena and MPI give different values");
    } else {
        BOOST_TEST((bytes_of(shm) == bytes_of(mpi)), "the arena and MPI give different bytes");
    }
    BOOST_TEST(close_to(values(shm), *k.want, k.tol), "not the closed form");
    if (k.same_everywhere) BOOST_TEST(same_on_every_rank(k.topo.comm, fnv1a(bytes_of(shm))), "ranks differ");
}

std::string describe(DType dtype, std::optional<ReduceOp> op, const Shape& shape, std::string_view form) {
    std::ostringstream s;
    s << form << " " << dtype_name(dtype) << shape_str(shape);
    if (op) s << " " << reduce_op_name(*op);
    return s.str();
}

Shape rows_of(const Shape& shape, std::int64_t rows) {
    Shape s = shape;
    if (s.empty()) return {rows};
    s[0] = rows;
    return s;
}

}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(the_arena_is_mapped_and_its_name_is_gone) {
    const Topology& t = world();
    std::printf("rank %d: local_size %d, nodes %d\n", t.rank, t.local_size, t.nodes);
    std::fflush(stdout);
    if (auto nodes = env("LOCKSTEP_TEST_EXPECT_NODES")) BOOST_TEST_REQUIRE(t.nodes == std::stoi(*nodes));

    const SharedMemoryStatus s = shared_memory_status();
    BOOST_TEST(s.active, "reason: " << s.reason);
    BOOST_TEST(s.reason.empty(), s.reason);
    const std::string mode = env("LOCKSTEP_SHM").value_or("auto");
    BOOST_TEST(shm_mode_name(s.mode) == mode);
    BOOST_TEST(s.local_processes == t.local_size);
    BOOST_TEST(s.local_index == t.local_rank);
    BOOST_TEST(s.backing.find("/dev/shm") != std::string::npos, s.backing);
    if (auto size = env("LOCKSTEP_SHM_ARENA_SIZE")) BOOST_TEST(s.arena_bytes == parse_bytes(*size));
    if (auto threshold = env("LOCKSTEP_SHM_THRESHOLD")) BOOST_TEST(s.threshold_bytes == parse_bytes(*threshold));
    BOOST_TEST(s.fallbacks == 0u);
    // Across nodes the arena serves the hierarchical allreduce, which pairs the processes of equal local index: with
    // nodes of unequal process counts the communicator may leave the arena aside (every call then takes the MPI path).
    if (t.uniform) BOOST_TEST(comm().shared_memory());

    // A block of a size nobody has used yet: the segment's use grows by it, and the tensor lies in the arena.
    const std::size_t used = s.used_bytes;
    Tensor big = Tensor::zeros({3 * 1024 * 1024 + 7}, DType::UInt8);
    BOOST_TEST(big.in_shared_memory() == expected_in_arena(big));
    if (!big.in_shared_memory()) return;  // this process keeps its tensors private (the mixed run)
    BOOST_TEST(in_shared_memory(big.data(), big.nbytes()));
    BOOST_TEST(shared_memory_status().used_bytes >= used + big.nbytes());
    std::vector<std::uint8_t> heap(64);
    BOOST_TEST(!in_shared_memory(heap.data(), heap.size()));
    BOOST_TEST(big.narrow_rows(10, 20).in_shared_memory());
    // Where it lies: an offset in this process's own segment of the object, carried by views.
    const std::optional<std::uint64_t> offset = big.shared_memory_offset();
    BOOST_TEST_REQUIRE(offset.has_value());
    BOOST_TEST(*offset / s.arena_bytes == static_cast<std::uint64_t>(s.local_index));
    BOOST_TEST(big.narrow_rows(10, 20).shared_memory_offset().value_or(0) == *offset + 10);
    if (s.threshold_bytes > 512) BOOST_TEST(!Tensor::ones({4}).shared_memory_offset().has_value());

    // The pages are a POSIX shared-memory object whose name was unlinked: /proc/self/maps shows it as deleted and
    // /dev/shm no longer lists it.
    const auto address = reinterpret_cast<std::uintptr_t>(big.data());
    std::ifstream maps("/proc/self/maps");
    std::string line, mapping;
    while (std::getline(maps, line)) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream in(line);
        in >> std::hex >> lo >> dash >> hi;
        if (address >= lo && address < hi) mapping = line;
    }
    BOOST_TEST_MESSAGE("arena mapping: " << mapping);
    const auto at = mapping.find("/dev/shm/");
    BOOST_TEST_REQUIRE(at != std::string::npos, "the arena is not a /dev/shm mapping: " << mapping);
    BOOST_TEST(mapping.find(" (deleted)") != std::string::npos, "the arena's name was not unlinked: " << mapping);
    std::string name = mapping.substr(at);
    name = name.substr(0, name.find(" (deleted)"));
    BOOST_TEST(!std::filesystem::exists(name), name << " is still in /dev/shm");
}

BOOST_AUTO_TEST_CASE(allreduce_every_dtype_op_and_size) {
    const Topology& t = world();
    const int n = t.size;
    const Shape shapes[] = {{}, {0}, {1}, {n + 1}, {3, 5, 7}, {1031}, {33333}};
    for (DType dtype : all_dtypes) {
        for (const Shape& shape : shapes) {
            const Tensor x = input(dtype, shape, t.rank);
            BOOST_TEST(x.in_shared_memory() == expected_in_arena(x));
            for (ReduceOp op : every_op) {
                if (!valid_op(dtype, op)) continue;
                const auto want = reduced(dtype, op, n, shape_numel(shape));
                BOOST_TEST_CONTEXT(describe(dtype, op, shape, "allreduce")) {
                    check({comm(), t, Kind::Allreduce, [&] { return comm().allreduce(x, op); }, want,
                           tolerance(dtype, op, n)});
                    BOOST_TEST(bytes_of(x) == bytes_of(input(dtype, shape, t.rank)), "the input changed");
                }
                BOOST_TEST_CONTEXT(describe(dtype, op, shape, "allreduce_")) {
                    check({comm(), t, Kind::Allreduce,
                           [&] {
                               Tensor y = x.clone();
                               Tensor& same = comm().allreduce_(y, op);
                               BOOST_TEST(&same == &y);
                               return y;
                           },
                           want, tolerance(dtype, op, n)});
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(mean_of_integers_is_refused_before_the_arena) {
    const Tensor t = Tensor::ones({5}, DType::Int32);
    const std::uint64_t shm_calls = comm().stats().shm_calls;
    BOOST_CHECK_THROW((void)comm().allreduce(t, ReduceOp::Mean), DTypeError);
    BOOST_TEST(comm().stats().shm_calls == shm_calls);
    // The refused call moved nothing; the next one works.
    PathProbe probe(comm());
    BOOST_TEST(values(comm().allreduce(t)) == std::vector<double>(5, double(comm().size())));
    probe.expect(expected_path(world(), Kind::Allreduce));
}

BOOST_AUTO_TEST_CASE(half_types_accumulate_in_float32) {
    // Element 0: process 0 holds 2048 (float16) or 256 (bfloat16), where the type's spacing is 2; every other process
    // holds 1. Summed in the 16-bit type the ones are lost one by one; in float32 they add up, and the total is rounded
    // once. The other elements are 0.1 on every process, whose float32 sum rounded once is the closed form too.
    const Topology& t = world();
    const int n = t.size;
    for (DType dtype : {DType::Float16, DType::BFloat16}) {
        const double big = dtype == DType::Float16 ? 2048.0 : 256.0;
        std::vector<double> mine(9, 0.1);
        mine[0] = t.rank == 0 ? big : 1.0;
        const Tensor x = tensor_of(mine, {9}, dtype);
        const float tenth = ops::cast(tensor_of({0.1}, {1}, dtype), DType::Float32).to_vector<float>()[0];
        float tenths = 0.0f;
        for (int r = 0; r < n; ++r) tenths += tenth;
        std::vector<double> want(9, static_cast<double>(tenths));
        want[0] = big + (n - 1);
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            check(
                {comm(), t, Kind::Allreduce, [&] { return comm().allreduce(x); }, values(tensor_of(want, {9}, dtype))});
            Tensor rounded_once = tensor_of({big + (n - 1)}, {1}, dtype);
            BOOST_TEST(values(comm().allreduce(x))[0] == values(rounded_once)[0]);
        }
    }
}

BOOST_AUTO_TEST_CASE(inexact_sums_are_the_same_bits_everywhere_and_every_time) {
    // Values whose float32 sums round: the order of the additions shows in the last bits. Every process must get the
    // same bits, in place or not, call after call; MPI's own order may differ in the last bits only.
    const Topology& t = world();
    std::vector<double> v(33333);
    for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = std::sin(0.37 * double(i) + 1.3 * t.rank) * 100.0 + 0.001 * t.rank;
    for (DType dtype : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            const Tensor x = tensor_of(v, {std::int64_t(v.size())}, dtype);
            PathProbe probe(comm());
            const Tensor first = comm().allreduce(x);
            probe.expect(expected_path(t, Kind::Allreduce));
            const Bytes bits = bytes_of(first);
            BOOST_TEST(same_on_every_rank(t.comm, fnv1a(bits)));
            for (int again = 0; again < 3; ++again) BOOST_TEST((bytes_of(comm().allreduce(x)) == bits));
            Tensor y = x.clone();
            comm().allreduce_(y);
            BOOST_TEST((bytes_of(y) == bits), "in place differs from out of place");
            for (ReduceOp op : {ReduceOp::Mean, ReduceOp::Prod}) {
                const Bytes once = bytes_of(comm().allreduce(x, op));
                BOOST_TEST(same_on_every_rank(t.comm, fnv1a(once)));
                BOOST_TEST((bytes_of(comm().allreduce(x, op)) == once));
            }
            comm().set_shared_memory(false);
            const std::vector<double> by_mpi = values(comm().allreduce(x));
            comm().set_shared_memory(true);
            const std::vector<double> got = values(first);
            const double tol = dtype == DType::Float64 ? 1e-12 : dtype == DType::Float32 ? 1e-5 : 2e-2;
            double worst = 0;
            for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - by_mpi[i]));
            BOOST_TEST(worst <= tol * 400.0, "largest difference from the MPI path: " << worst);
        }
    }
}

BOOST_AUTO_TEST_CASE(reduce_scatter_every_dtype_op_and_size) {
    const Topology& t = world();
    const int n = t.size;
    // [n k, ...]: k = 0, 1 and 7 rows of 3 (odd widths), and one long 1-d tensor whose slices are odd.
    const Shape shapes[] = {{0, 3}, {n, 3}, {7 * n, 3}, {1031 * n}};
    for (DType dtype : all_dtypes) {
        for (const Shape& shape : shapes) {
            const Tensor x = input(dtype, shape, t.rank);
            BOOST_TEST(x.in_shared_memory() == expected_in_arena(x));
            const std::int64_t numel = shape_numel(shape);
            const std::int64_t mine = numel / n;
            Shape out_shape = rows_of(shape, shape[0] / n);
            for (ReduceOp op : every_op) {
                if (!valid_op(dtype, op)) continue;
                const auto want = reduced(dtype, op, n, mine, mine * t.rank);
                BOOST_TEST_CONTEXT(describe(dtype, op, shape, "reduce_scatter")) {
                    check({comm(), t, Kind::ReduceScatter, [&] { return comm().reduce_scatter(x, op); }, want,
                           tolerance(dtype, op, n), false});
                }
                // The into form: float32, float64 and integer dtypes (half types allocate their accumulator anyway).
                if (dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Bool) continue;
                BOOST_TEST_CONTEXT(describe(dtype, op, shape, "reduce_scatter_into")) {
                    check({comm(), t, Kind::ReduceScatter,
                           [&] {
                               Tensor out = Tensor::full(out_shape, 1.0, dtype);
                               Tensor& same = comm().reduce_scatter_into(x, out, op);
                               BOOST_TEST(&same == &out);
                               return out;
                           },
                           want, tolerance(dtype, op, n), false});
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(allgather_every_dtype_and_size) {
    const Topology& t = world();
    const int n = t.size;
    const Shape shapes[] = {{}, {0, 3}, {1}, {5, 3}, {1001}};
    for (DType dtype : all_dtypes) {
        for (const Shape& shape : shapes) {
            const Tensor x = input(dtype, shape, t.rank);
            const std::int64_t numel = shape_numel(shape);
            std::vector<double> all;
            for (int r = 0; r < n; ++r) {
                auto part = elements(dtype, numel, r);
                all.insert(all.end(), part.begin(), part.end());
            }
            const auto want = values(tensor_of(all, {std::int64_t(all.size())}, dtype));
            const Shape out_shape = rows_of(shape, (shape.empty() ? 1 : shape[0]) * n);
            BOOST_TEST_CONTEXT(describe(dtype, std::nullopt, shape, "allgather")) {
                check({comm(), t, Kind::Allgather,
                       [&] {
                           Tensor g = comm().allgather(x);
                           BOOST_TEST(g.shape() == out_shape);
                           return g;
                       },
                       want});
            }
            BOOST_TEST_CONTEXT(describe(dtype, std::nullopt, shape, "allgather_into")) {
                check({comm(), t, Kind::Allgather,
                       [&] {
                           Tensor out = Tensor::zeros(out_shape, dtype);
                           Tensor& same = comm().allgather_into(x, out);
                           BOOST_TEST(&same == &out);
                           return out;
                       },
                       want});
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(broadcast_every_root_dtype_and_size) {
    const Topology& t = world();
    const int n = t.size;
    const Shape shapes[] = {{0}, {1}, {n + 1, 3}, {1031}};
    for (DType dtype : all_dtypes) {
        for (const Shape& shape : shapes) {
            const Tensor x = input(dtype, shape, t.rank);
            for (int root = 0; root < n; ++root) {
                const auto want = values(input(dtype, shape, root));
                BOOST_TEST_CONTEXT(describe(dtype, std::nullopt, shape, "broadcast") << " from " << root) {
                    check({comm(), t, Kind::Broadcast, [&] { return comm().broadcast(x, root); }, want});
                    BOOST_TEST(bytes_of(x) == bytes_of(input(dtype, shape, t.rank)), "the input changed");
                }
                BOOST_TEST_CONTEXT(describe(dtype, std::nullopt, shape, "broadcast_") << " from " << root) {
                    check({comm(), t, Kind::Broadcast,
                           [&] {
                               Tensor y = x.clone();
                               Tensor& same = comm().broadcast_(y, root);
                               BOOST_TEST(&same == &y);
                               return y;
                           },
                           want});
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(copies_of_a_mebibyte_and_more) {
    // From 1 MiB the arena's copies take another instruction sequence (rep movsb where the processor has fast string
    // moves): broadcast, allgather and an allreduce of odd sizes just over it, against the closed form and MPI.
    const Topology& t = world();
    const int n = t.size;
    const Shape big = {262147};  // 1 MiB + 12 bytes of float32
    const Tensor x = input(DType::Float32, big, t.rank);
    for (int root = 0; root < n; ++root) {
        const auto want = values(input(DType::Float32, big, root));
        BOOST_TEST_CONTEXT("broadcast of 1 MiB + 12 bytes from " << root) {
            check({comm(), t, Kind::Broadcast, [&] { return comm().broadcast(x, root); }, want});
        }
    }
    std::vector<double> gathered;
    const Shape part = {131075, 2};  // per process: 1 MiB + 24 bytes of float32
    for (int r = 0; r < n; ++r) {
        auto p = elements(DType::Float32, shape_numel(part), r);
        gathered.insert(gathered.end(), p.begin(), p.end());
    }
    const Tensor mine = input(DType::Float32, part, t.rank);
    BOOST_TEST_CONTEXT("allgather of 1 MiB + 24 bytes per process") {
        check({comm(), t, Kind::Allgather, [&] { return comm().allgather(mine); }, gathered});
    }
    BOOST_TEST_CONTEXT("allreduce of 1 MiB + 12 bytes") {
        check({comm(), t, Kind::Allreduce, [&] { return comm().allreduce(x); },
               reduced(DType::Float32, ReduceOp::Sum, n, shape_numel(big)),
               tolerance(DType::Float32, ReduceOp::Sum, n)});
    }
}

BOOST_AUTO_TEST_CASE(reduce_every_root_dtype_op_and_size) {
    const Topology& t = world();
    const int n = t.size;
    const Shape shapes[] = {{1}, {n + 1}, {1031}};
    for (DType dtype : all_dtypes) {
        for (const Shape& shape : shapes) {
            const Tensor x = input(dtype, shape, t.rank);
            for (ReduceOp op : every_op) {
                if (!valid_op(dtype, op)) continue;
                for (int root : {0, n - 1}) {
                    std::optional<std::vector<double>> want;
                    if (t.rank == root) want = reduced(dtype, op, n, shape_numel(shape));
                    BOOST_TEST_CONTEXT(describe(dtype, op, shape, "reduce") << " to " << root) {
                        check({comm(), t, Kind::Reduce, [&] { return comm().reduce(x, op, root); }, want,
                               tolerance(dtype, op, n), false});
                    }
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(sub_communicators_use_the_arena_of_their_node) {
    // Even and odd ranks (not contiguous in the node's segments), and one communicator per node.
    const Topology& w = world();
    for (int split = 0; split < 2; ++split) {
        const int color = split == 0 ? w.rank % 2 : w.node_color;
        MPI_Comm mine = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, color, w.rank, &mine);
        const Topology t = topology_of(mine);
        Communicator sub = comm().split(color, w.rank);
        BOOST_TEST_REQUIRE(sub.size() == t.size);
        BOOST_TEST(sub.rank() == t.rank);
        const int n = t.size;
        BOOST_TEST_CONTEXT((split == 0 ? "even/odd ranks" : "ranks of one node") << ", " << n << " processes") {
            const DType dtype = DType::Float32;
            const Tensor x = input(dtype, {2 * n + 1}, t.rank);
            // The element values are those of the process's rank in the sub-communicator.
            check({sub, t, Kind::Allreduce, [&] { return sub.allreduce(x); },
                   reduced(dtype, ReduceOp::Sum, n, 2 * n + 1)});
            const Tensor rows = input(dtype, {3 * n}, t.rank);
            check({sub, t, Kind::ReduceScatter, [&] { return sub.reduce_scatter(rows, ReduceOp::Max); },
                   reduced(dtype, ReduceOp::Max, n, 3, 3 * t.rank), 0.0, false});
            std::vector<double> all;
            for (int r = 0; r < n; ++r) {
                auto part = elements(dtype, 2 * n + 1, r);
                all.insert(all.end(), part.begin(), part.end());
            }
            check({sub, t, Kind::Allgather, [&] { return sub.allgather(x); }, all});
            check({sub, t, Kind::Broadcast, [&] { return sub.broadcast(x, n - 1); },
                   values(input(dtype, {2 * n + 1}, n - 1))});
            std::optional<std::vector<double>> want;
            if (t.rank == 0) want = reduced(dtype, ReduceOp::Min, n, 2 * n + 1);
            check({sub, t, Kind::Reduce, [&] { return sub.reduce(x, ReduceOp::Min, 0); }, want, 0.0, false});
        }
        MPI_Comm_free(&mine);
    }
}

BOOST_AUTO_TEST_CASE(shared_memory_can_be_turned_off_per_communicator) {
    CommunicatorOptions options;
    options.shared_memory = false;
    Communicator off(MPI_COMM_WORLD, options);
    BOOST_TEST(!off.shared_memory());
    const Tensor x = input(DType::Float32, {1031}, off.rank());
    PathProbe probe(off);
    BOOST_TEST(values(off.allreduce(x)) == reduced(DType::Float32, ReduceOp::Sum, off.size(), 1031));
    probe.expect(Path::Mpi);
    // And back on: the arena again (where it can be used).
    off.set_shared_memory(true);
    PathProbe again(off);
    BOOST_TEST(values(off.allreduce(x)) == reduced(DType::Float32, ReduceOp::Sum, off.size(), 1031));
    again.expect(expected_path(world(), Kind::Allreduce));
}

BOOST_AUTO_TEST_CASE(debug_mode_checks_signatures_before_the_arena) {
    const Topology& t = world();
    const int n = t.size;
    const bool last = t.rank == n - 1;
    CommunicatorOptions options;
    options.debug = true;
    Communicator dbg(MPI_COMM_WORLD, options);
    BOOST_TEST_REQUIRE(dbg.debug());
    // The last process passes one element more: every process throws the same error, and nothing moved.
    Tensor x = input(DType::Float32, {last ? n + 2 : n + 1}, t.rank);
    const Bytes before = bytes_of(x);
    const CommunicatorStats s0 = dbg.stats();
    bool mismatch = false;
    try {
        dbg.allreduce_(x);
    } catch (const SignatureMismatchError&) {
        mismatch = true;
    }
    BOOST_TEST(mismatch);
    BOOST_TEST(bytes_of(x) == before, "a mismatched call changed the tensor");
    BOOST_TEST(dbg.stats().shm_calls == s0.shm_calls);
    BOOST_TEST(dbg.stats().signature_checks == s0.signature_checks + 1);

    // A wrong output on the last process only: the same CallRejectedError everywhere, nothing written.
    const Tensor y = input(DType::Int32, {4}, t.rank);
    Tensor out = Tensor::full({last ? 4 * n + 1 : 4 * n}, -7.0, DType::Int32);
    bool rejected = false;
    try {
        dbg.allgather_into(y, out);
    } catch (const CallRejectedError& e) {
        rejected = e.failures().size() == 1 && e.failures()[0].rank == n - 1;
    }
    BOOST_TEST(rejected);
    BOOST_TEST(values(out) == std::vector<double>(std::size_t(out.numel()), -7.0));
    BOOST_TEST(dbg.stats().shm_calls == s0.shm_calls);

    // A call that agrees goes through the arena, after its signature check.
    Tensor z = input(DType::Float32, {n + 1}, t.rank);
    const CommunicatorStats s1 = dbg.stats();
    check(
        {dbg, t, Kind::Allreduce, [&] { return dbg.allreduce(z); }, reduced(DType::Float32, ReduceOp::Sum, n, n + 1)});
    BOOST_TEST(dbg.stats().signature_checks == s1.signature_checks + 2);  // the arena's call and the MPI path's
}

BOOST_AUTO_TEST_CASE(different_calls_meet_in_the_arena_and_all_throw) {
    // Debug mode off: the last process broadcasts while the others allreduce a tensor of the same size. Their
    // descriptors meet in the arena, and every process throws the same error naming each one's call, rather than
    // pairing the calls and returning wrong results. The communicator stays usable.
    const Topology& t = world();
    if (t.nodes != 1 || t.size < 2 || mixed_run()) return;  // only a one-node communicator in the arena
    const int n = t.size;
    const bool last = t.rank == n - 1;
    Communicator c(MPI_COMM_WORLD);
    BOOST_TEST_REQUIRE(!c.debug());
    Tensor x = input(DType::Float32, {1031}, t.rank);
    std::string text;
    try {
        if (last) {
            c.broadcast_(x, 0);
        } else {
            c.allreduce_(x);
        }
    } catch (const DistributedOperationError& e) {
        text = e.what();
    }
    BOOST_TEST(text.find("made different collective calls") != std::string::npos, text);
    BOOST_TEST(text.find("lockstep::broadcast") != std::string::npos, text);
    BOOST_TEST(text.find("lockstep::allreduce") != std::string::npos, text);
    BOOST_TEST(same_on_every_rank(t.comm, fnv1a(Bytes(text.begin(), text.end()))), "the texts differ: " << text);
    // Sizes that differ are told too.
    Tensor y = input(DType::Float32, {last ? 2048 : 1031}, t.rank);
    std::string sizes;
    try {
        c.allreduce_(y);
    } catch (const DistributedOperationError& e) {
        sizes = e.what();
    }
    BOOST_TEST(sizes.find("of 8192 bytes") != std::string::npos, sizes);
    const Tensor z = input(DType::Float32, {1031}, t.rank);
    check({c, t, Kind::Allreduce, [&] { return c.allreduce(z); }, reduced(DType::Float32, ReduceOp::Sum, n, 1031)});
}

BOOST_AUTO_TEST_CASE(views_at_other_offsets_on_each_rank) {
    // Each process passes rows of a larger arena tensor, starting at a row of its own: the peers' data is found at
    // each process's own offset, and in-place results stay inside the view.
    const Topology& t = world();
    const int n = t.size;
    const std::int64_t k = 1031, first = 1 + t.rank;
    Tensor block = Tensor::full({k + n + 2}, -5.0);
    Tensor view = block.narrow_rows(first, first + k);
    ops::copy_(view, input(DType::Float32, {k}, t.rank));
    BOOST_TEST(view.in_shared_memory() == expected_in_arena(block));
    const auto want = reduced(DType::Float32, ReduceOp::Sum, n, k);
    check({comm(), t, Kind::Allreduce, [&] { return comm().allreduce(view); }, want});
    PathProbe probe(comm());
    comm().allreduce_(view);
    probe.expect(expected_path(t, Kind::Allreduce));
    const std::vector<double> all = values(block);
    BOOST_TEST(std::vector<double>(all.begin() + first, all.begin() + first + k) == want);
    // Nothing outside the view was written.
    bool outside_untouched = true;
    for (std::int64_t i = 0; i < std::int64_t(all.size()); ++i) {
        if ((i < first || i >= first + k) && all[std::size_t(i)] != -5.0) outside_untouched = false;
    }
    BOOST_TEST(outside_untouched);

    // allgather_into a view of a larger tensor, and a broadcast into a view.
    Tensor wide = Tensor::full({n * 7 + 3, 2}, -5.0);
    Tensor rows = wide.narrow_rows(2, 2 + n * 7);
    const Tensor mine = input(DType::Float32, {7, 2}, t.rank);
    std::vector<double> gathered;
    for (int r = 0; r < n; ++r) {
        auto part = elements(DType::Float32, 14, r);
        gathered.insert(gathered.end(), part.begin(), part.end());
    }
    PathProbe gather_probe(comm());
    comm().allgather_into(mine, rows);
    gather_probe.expect(expected_path(t, Kind::Allgather));
    BOOST_TEST(values(rows) == gathered);
    const std::vector<double> w = values(wide);
    BOOST_TEST((w[0] == -5.0 && w[3] == -5.0 && w[w.size() - 1] == -5.0 && w[w.size() - 2] == -5.0));

    Tensor target = block.narrow_rows(first, first + 5);
    ops::copy_(target, input(DType::Float32, {5}, t.rank));
    PathProbe bcast_probe(comm());
    comm().broadcast_(target, n - 1);
    bcast_probe.expect(expected_path(t, Kind::Broadcast));
    BOOST_TEST(values(target) == values(input(DType::Float32, {5}, n - 1)));
    BOOST_TEST(values(block)[std::size_t(first - 1)] == -5.0);
}

BOOST_AUTO_TEST_CASE(back_to_back_calls_do_not_race) {
    // Each call's inputs are overwritten as soon as it returns, and one process is late by turns: a process must not
    // leave a call while a peer still reads its tensor, nor read a peer's tensor before the peer has arrived.
    const Topology& t = world();
    const int n = t.size;
    const std::int64_t len = 50000;
    Tensor grad = Tensor::zeros({len});
    Tensor src = Tensor::zeros({len});
    Tensor rows = Tensor::zeros({n * 4001});
    int wrong = 0;
    const Path allreduce_path = expected_path(t, Kind::Allreduce);
    const CommunicatorStats before = comm().stats();
    const int rounds = 60;
    for (int i = 1; i <= rounds; ++i) {
        if (t.rank == i % n) std::this_thread::sleep_for(std::chrono::microseconds(500));
        const double mine = i * (t.rank + 1.0);
        const double sum = i * n * (n + 1) / 2.0;
        ops::fill_(grad, mine);
        comm().allreduce_(grad);
        if (grad.to_vector<float>()[std::size_t(len - 1)] != float(sum)) ++wrong;
        ops::fill_(grad, -1.0);  // at once: a peer still reading it would see -1

        ops::fill_(src, mine);
        const Tensor out = comm().allreduce(src, ReduceOp::Max);
        ops::fill_(src, -1.0);
        if (out.to_vector<float>()[0] != float(i * n)) ++wrong;

        const int root = i % n;
        ops::fill_(src, mine);
        comm().broadcast_(src, root);
        const float got = src.to_vector<float>()[std::size_t(len / 2)];
        ops::fill_(src, -1.0);
        if (got != float(i * (root + 1.0))) ++wrong;

        ops::fill_(rows, mine);
        const Tensor part = comm().reduce_scatter(rows);
        ops::fill_(rows, -1.0);
        if (part.to_vector<float>()[0] != float(sum)) ++wrong;

        ops::fill_(src, mine);
        const Tensor gathered = comm().allgather(src.narrow_rows(0, 3));
        ops::fill_(src, -1.0);
        const auto g = gathered.to_vector<float>();
        for (int r = 0; r < n; ++r) {
            if (g[std::size_t(3 * r + 2)] != float(i * (r + 1.0))) ++wrong;
        }
    }
    BOOST_TEST(wrong == 0, wrong << " wrong results in " << rounds << " rounds");
    const CommunicatorStats after = comm().stats();
    if (allreduce_path == Path::Arena) BOOST_TEST(after.shm_calls - before.shm_calls == 5u * rounds);
}

BOOST_AUTO_TEST_CASE(two_threads_on_two_communicators) {
    // Two communicators used at the same time from two threads: the arena's synchronisation of one must not be
    // confused with the other's.
    const Topology& t = world();
    const int n = t.size;
    if (Runtime::get().thread_level() < MPI_THREAD_MULTIPLE) return;
    Communicator a = comm().dup();
    Communicator b = comm().dup();
    const int rounds = 100;
    int wrong[2] = {0, 0};
    auto work = [&](Communicator& c, int which) {
        Tensor x = Tensor::zeros({20000 + which * 7});
        for (int i = 1; i <= rounds; ++i) {
            ops::fill_(x, (which + 1) * 1000.0 + i * (t.rank + 1.0));
            c.allreduce_(x);
            const double want = n * (which + 1) * 1000.0 + i * n * (n + 1) / 2.0;
            if (x.to_vector<float>()[std::size_t(x.numel() - 1)] != float(want)) ++wrong[which];
        }
    };
    std::thread other([&] { work(b, 1); });
    work(a, 0);
    other.join();
    BOOST_TEST(wrong[0] == 0);
    BOOST_TEST(wrong[1] == 0);
    if (expected_path(t, Kind::Allreduce) == Path::Arena) {
        BOOST_TEST(a.stats().shm_calls == std::uint64_t(rounds));
        BOOST_TEST(b.stats().shm_calls == std::uint64_t(rounds));
    }
}
