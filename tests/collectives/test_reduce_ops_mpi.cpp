// The dtypes and reduce ops beyond the first release, and alltoallv, under mpirun (2 and 3 processes), against a
// closed-form oracle every process computes from every process's input. The same program runs three times (meson):
// with the small-message path (LOCKSTEP_SHM_SMALL_MAX), with the arena path only (LOCKSTEP_SHM_SMALL_MAX=0, every
// tensor in the arena), and with the arena off (LOCKSTEP_SHM=off: MPI); LOCKSTEP_TEST_PATH names which, and the
// communicator's statistics must show that path taken, so that each path's reduction kernels meet every pair of dtype
// and op: int16, uint16, uint32, uint64, complex64, complex128 (with the old dtypes) through sum, prod, max, min, mean,
// band, bor, bxor and premul_sum where defined. The pairs an op does not take are refused with the same DTypeError on
// every process, in debug mode too.
#define BOOST_TEST_MODULE reduce_ops_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>
#include <lockstep/shared_memory.hpp>

#include <mpi.h>

#include "runtime_fixture.hpp"

#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace lockstep;
using lockstep_test::comm;

namespace {

enum class Path { Small, Arena, Mpi };

Path expected_path() {
    const char* p = std::getenv("LOCKSTEP_TEST_PATH");
    const std::string path = p != nullptr ? p : "mpi";
    if (path == "small") return Path::Small;
    if (path == "arena") return Path::Arena;
    return Path::Mpi;
}

const DType tested[] = {DType::Int16, DType::UInt16, DType::UInt32, DType::UInt64,  DType::Complex64, DType::Complex128,
                        DType::Int8,  DType::Int32,  DType::Bool,   DType::Float32, DType::Float64,   DType::Float16};
const ReduceOp every_op[] = {ReduceOp::Sum,       ReduceOp::Prod,       ReduceOp::Max,
                             ReduceOp::Min,       ReduceOp::Mean,       ReduceOp::BitwiseAnd,
                             ReduceOp::BitwiseOr, ReduceOp::BitwiseXor, ReduceOp::PremulSum};

bool takes(ReduceOp op, DType d) {
    if (d == DType::Bool) return op != ReduceOp::Mean && op != ReduceOp::PremulSum;
    const bool bitwise = op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor;
    if (is_integral(d)) return !bitwise && op != ReduceOp::Mean && op != ReduceOp::PremulSum;
    if (is_complex(d)) return !bitwise && op != ReduceOp::Max && op != ReduceOp::Min;
    return !bitwise;
}
bool takes_bitwise_on_integers(ReduceOp op, DType d) {
    return is_integral(d) && (op == ReduceOp::BitwiseAnd || op == ReduceOp::BitwiseOr || op == ReduceOp::BitwiseXor);
}
bool defined_pair(ReduceOp op, DType d) {
    return takes(op, d) || takes_bitwise_on_integers(op, d);
}

double factor_of(int rank) {
    return rank + 0.5;
}

// Process q's element i, as the C++ type T: small values whose sums and products stay exact in every dtype, and for
// integers some high bits for the bitwise ops.
template <typename T>
T element(int q, std::int64_t i) {
    if constexpr (is_complex_v<T>) {
        using R = typename T::value_type;
        return T(static_cast<R>(i % 3 + q + 1), static_cast<R>((i + q) % 2) - R(0.5));
    } else if constexpr (std::is_same_v<T, bool>) {
        return (i + q) % 3 == 0;
    } else {
        return from_double<T>(static_cast<double>((i * 7 + q * 5) % 4 + 1));
    }
}

// Every process's input as a tensor of `count` elements (allocated by lockstep: in the arena where its threshold
// puts it).
Tensor input(DType dtype, int q, std::int64_t count) {
    Tensor t = Tensor::empty({count}, dtype);
    visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        T* p = static_cast<T*>(t.data());
        for (std::int64_t i = 0; i < count; ++i) p[i] = element<T>(q, i);
    });
    return t;
}

// The reduction of every process's element i, in double (or complex<double>), then stored as T.
template <typename T>
T reduced(ReduceOp op, int n, std::int64_t i) {
    if constexpr (is_complex_v<T>) {
        std::complex<double> acc = op == ReduceOp::Prod ? 1.0 : 0.0;
        for (int q = 0; q < n; ++q) {
            const std::complex<double> v(element<T>(q, i));
            if (op == ReduceOp::Prod) {
                acc *= v;
            } else {
                acc += op == ReduceOp::PremulSum ? factor_of(q) * v : v;
            }
        }
        if (op == ReduceOp::Mean) acc /= double(n);
        return T(acc);
    } else if constexpr (std::is_same_v<T, bool>) {
        bool any = false, all = true, odd = false;
        for (int q = 0; q < n; ++q) {
            const bool v = element<bool>(q, i);
            any = any || v;
            all = all && v;
            odd = odd != v;
        }
        if (op == ReduceOp::BitwiseXor) return odd;
        return op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::BitwiseOr ? any : all;
    } else if constexpr (std::is_integral_v<T>) {
        T acc = element<T>(0, i);
        for (int q = 1; q < n; ++q) {
            const T v = element<T>(q, i);
            switch (op) {
                case ReduceOp::Sum:
                    acc = static_cast<T>(acc + v);
                    break;
                case ReduceOp::Prod:
                    acc = static_cast<T>(acc * v);
                    break;
                case ReduceOp::Max:
                    acc = std::max(acc, v);
                    break;
                case ReduceOp::Min:
                    acc = std::min(acc, v);
                    break;
                case ReduceOp::BitwiseAnd:
                    acc = static_cast<T>(acc & v);
                    break;
                case ReduceOp::BitwiseOr:
                    acc = static_cast<T>(acc | v);
                    break;
                case ReduceOp::BitwiseXor:
                    acc = static_cast<T>(acc ^ v);
                    break;
                default:
                    break;
            }
        }
        return acc;
    } else {
        double acc = op == ReduceOp::Prod ? 1.0 : 0.0;
        for (int q = 0; q < n; ++q) {
            const double v = to_double(element<T>(q, i));
            switch (op) {
                case ReduceOp::Prod:
                    acc *= v;
                    break;
                case ReduceOp::Max:
                    acc = q == 0 ? v : std::max(acc, v);
                    break;
                case ReduceOp::Min:
                    acc = q == 0 ? v : std::min(acc, v);
                    break;
                case ReduceOp::PremulSum:
                    acc += factor_of(q) * v;
                    break;
                default:
                    acc += v;
            }
        }
        if (op == ReduceOp::Mean) acc /= n;
        return from_double<T>(acc);
    }
}

// Elements [lo, hi) of the reduction, as a tensor.
Tensor oracle(DType dtype, ReduceOp op, int n, std::int64_t lo, std::int64_t hi) {
    Tensor t = Tensor::empty({hi - lo}, dtype);
    visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        T* p = static_cast<T*>(t.data());
        for (std::int64_t i = lo; i < hi; ++i) p[i - lo] = reduced<T>(op, n, i);
    });
    return t;
}

// Element by element as doubles (a complex element as its two parts): exact for integers, within rounding otherwise.
std::vector<double> parts(const Tensor& t) {
    const Tensor host = t.to(Device::cpu()).clone();
    if (!is_complex(host.dtype())) return ops::cast(host, DType::Float64).to_vector<double>();
    Tensor view =
        Tensor::from_blob(const_cast<void*>(host.data()), {2 * host.numel()}, real_dtype(host.dtype()), Device::cpu());
    return ops::cast(view, DType::Float64).to_vector<double>();
}

void check_equal(const Tensor& got, const Tensor& want, const std::string& what) {
    BOOST_TEST_CONTEXT(what) {
        BOOST_REQUIRE(got.defined());
        BOOST_TEST(got.dtype() == want.dtype());
        BOOST_TEST(got.shape() == want.shape());
        const std::vector<double> g = parts(got), w = parts(want);
        BOOST_REQUIRE(g.size() == w.size());
        const double tol = want.dtype() == DType::Float16 ? 1e-2 : (is_integral(want.dtype()) ? 0.0 : 1e-6);
        for (std::size_t i = 0; i < g.size(); ++i) {
            BOOST_TEST(std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i])),
                       "element " << i << ": " << g[i] << " != " << w[i]);
        }
    }
}

Reduction reduction(ReduceOp op) {
    return op == ReduceOp::PremulSum ? premul_sum(factor_of(comm().rank())) : Reduction(op);
}

// The number of calls that took the path this run is for.
std::uint64_t path_calls(const CommunicatorStats& s, Path path) {
    if (path == Path::Small) return s.small_calls;
    if (path == Path::Arena) return s.shm_calls - s.small_calls;
    return s.collectives - s.shm_calls;
}

bool same_text_on_every_rank(const std::string& text) {
    std::uint64_t h = 1469598103934665603ull;
    for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    std::uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(every_dtype_and_op_on_this_path) {
    const int n = comm().size(), me = comm().rank();
    const Path path = expected_path();
    // The paths this run can take: the arena must be there for the arena paths.
    if (path != Path::Mpi && !comm().shared_memory()) {
        BOOST_TEST_MESSAGE("the node's arena is not usable here: nothing to check on this path");
        return;
    }
    for (DType dtype : tested) {
        // Element counts per process: none, one, odd, and several cache blocks (16 KiB) of the kernels.
        for (std::int64_t per : {std::int64_t{0}, std::int64_t{1}, std::int64_t{17}, std::int64_t{3000}}) {
            const std::int64_t count = per * n;
            for (ReduceOp op : every_op) {
                if (!defined_pair(op, dtype)) continue;
                const std::string what = std::string(dtype_name(dtype)) + " " + std::string(reduce_op_name(op)) + "[" +
                                         std::to_string(count) + "]";
                const Tensor x = input(dtype, me, count);
                const Tensor kept = x.clone();
                const Tensor whole = oracle(dtype, op, n, 0, count);
                const CommunicatorStats before = comm().stats();
                check_equal(comm().allreduce(x, reduction(op)), whole, "allreduce " + what);
                Tensor y = x.clone();
                comm().allreduce_(y, reduction(op));
                check_equal(y, whole, "allreduce_ " + what);
                check_equal(comm().reduce_scatter(x, reduction(op)), oracle(dtype, op, n, per * me, per * (me + 1)),
                            "reduce_scatter " + what);
                const int root = n - 1;
                const Tensor r = comm().reduce(x, reduction(op), root);
                if (me == root) check_equal(r, whole, "reduce " + what);
                check_equal(x, kept, "the input is left alone: " + what);
                const CommunicatorStats after = comm().stats();
                // Every call of a non-empty tensor on the path of this run (the small path takes what fits its limit;
                // empty tensors may go either way).
                if (count > 0 &&
                    (path != Path::Small || x.nbytes() * 2 <= std::min<std::size_t>(config().shm_small_max, 8192))) {
                    BOOST_TEST(path_calls(after, path) - path_calls(before, path) == 4u, what);
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(pairs_an_op_does_not_take_are_refused_on_every_rank) {
    const int me = comm().rank();
    for (bool debug : {false, true}) {
        comm().set_debug(debug);
        for (DType dtype : tested) {
            for (ReduceOp op : every_op) {
                if (defined_pair(op, dtype)) continue;
                const Tensor x = input(dtype, me, 6);
                std::string text;
                try {
                    (void)comm().allreduce(x, reduction(op));
                    BOOST_ERROR("allreduce " << dtype_name(dtype) << " " << reduce_op_name(op) << " was not refused");
                } catch (const DTypeError& e) {
                    text = e.what();
                }
                BOOST_TEST(text.find(std::string(reduce_op_name(op))) != std::string::npos, text);
                BOOST_TEST(text.find(std::string(dtype_name(dtype))) != std::string::npos, text);
                BOOST_TEST(same_text_on_every_rank(text), text);
            }
        }
    }
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(alltoallv_uneven_and_empty_blocks) {
    const int n = comm().size(), me = comm().rank();
    // Rows of [src, dst, k]; process s sends (2 s + d) % 3 rows to d, several of them none.
    const auto rows_to = [](int s, int d) { return std::int64_t{(2 * s + d) % 3}; };
    std::vector<std::int64_t> send(static_cast<std::size_t>(n)), recv(static_cast<std::size_t>(n));
    std::vector<std::int64_t> mine, expected;
    for (int j = 0; j < n; ++j) {
        send[static_cast<std::size_t>(j)] = rows_to(me, j);
        recv[static_cast<std::size_t>(j)] = rows_to(j, me);
        for (std::int64_t k = 0; k < rows_to(me, j); ++k) mine.insert(mine.end(), {me, j, k});
        for (std::int64_t k = 0; k < rows_to(j, me); ++k) expected.insert(expected.end(), {j, me, k});
    }
    const auto rows = [](const std::vector<std::int64_t>& v) { return static_cast<std::int64_t>(v.size() / 3); };
    const Tensor x = Tensor::from_data<std::int64_t>(mine, {rows(mine), 3});
    const Tensor want = Tensor::from_data<std::int64_t>(expected, {rows(expected), 3});
    for (bool debug : {false, true}) {
        comm().set_debug(debug);
        check_equal(comm().alltoallv(x, send, recv), want, "alltoallv");
        Tensor out = Tensor::full({rows(expected), 3}, -1.0, DType::Int64);
        comm().alltoallv_into(x, send, out, recv);
        check_equal(out, want, "alltoallv_into");
        Work w = comm().ialltoallv(x, send, recv);
        check_equal(w.result(), want, "ialltoallv");
        // Nothing at all to move.
        const std::vector<std::int64_t> none(static_cast<std::size_t>(n), 0);
        const Tensor empty = Tensor::empty({0, 3}, DType::Complex128);
        BOOST_TEST(comm().alltoallv(empty, none, none).shape() == (Shape{0, 3}));
    }
    // Debug mode: process 0 expects one row more from the last process than it sends: the same error everywhere.
    comm().set_debug(true);
    std::vector<std::int64_t> wrong = recv;
    if (me == 0) wrong[static_cast<std::size_t>(n - 1)] += 1;
    std::string text;
    try {
        (void)comm().alltoallv(x, send, wrong);
        BOOST_ERROR("mismatched counts were not refused");
    } catch (const DistributedOperationError& e) {
        text = e.what();
    }
    BOOST_TEST(text.find("Process 0 expects") != std::string::npos, text);
    BOOST_TEST(same_text_on_every_rank(text), text);
    comm().set_debug(false);
    // Counts that do not add up to the rows are refused by each process alone (all pass them).
    const std::vector<std::int64_t> none(static_cast<std::size_t>(n), 0);
    BOOST_CHECK_THROW((void)comm().alltoallv(Tensor::zeros({1, 3}, DType::Int64), none, recv), ShapeError);
}
