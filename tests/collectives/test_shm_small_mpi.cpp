// The small-message path through the node's arena (collectives/shm/shm_group.hpp, shm_small_max): under mpirun with
// 2, 3 and 4 processes (4 on 2 cores: oversubscribed), and with processes whose shm_small_max differ (an MPMD launch).
// Every op against the MPI path on the same inputs (bitwise for exact dtypes, every process and every rerun the same
// bits), sizes around a slot's and the limit's edges, 0 elements, views, sub-communicators, the limit the processes
// agree on, back-to-back calls whose inputs change at once (broadcast and reduce return before their readers finish),
// different calls meeting on the path, and debug mode's exchange through it.
#define BOOST_TEST_MODULE shm_small_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>
#include <lockstep/shared_memory.hpp>

#include <mpi.h>

#include "runtime_fixture.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace lockstep;
using lockstep_test::comm;

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes bytes_of(const Tensor& t) {
    Bytes b(t.nbytes());
    if (!b.empty()) std::memcpy(b.data(), t.data(), b.size());
    return b;
}

// The group's limit: the smallest shm_small_max of its processes (0 when the arena is off anywhere).
std::size_t group_limit() {
    unsigned long long mine = shared_memory_status().active ? config().shm_small_max : 0, least = 0;
    MPI_Allreduce(&mine, &least, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    return static_cast<std::size_t>(least);
}

bool same_on_every_rank(const Bytes& b) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::uint8_t c : b) h = (h ^ c) * 1099511628211ull;
    std::uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

// Values whose float sums round differently in another order; small integers for exact dtypes.
Tensor input(DType dtype, std::int64_t n, int rank, int salt = 0) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        const double x = std::sin(0.37 * double(i) + 1.3 * rank + salt) * 100.0 + 0.001 * rank;
        v[static_cast<std::size_t>(i)] = is_floating(dtype) ? x : double((i * 7 + rank * 3 + salt) % 5 + (rank % 2));
    }
    if (dtype == DType::Bool) {
        for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = double((i + rank) % 3 == 0);
    }
    return ops::cast(Tensor::from_data<double>(v, {n}), dtype);
}

bool exact(DType d) {
    return !is_floating(d);
}

// Both tensors' elements within a relative tolerance (floating) or bitwise equal (exact).
void check_close(const Tensor& got, const Tensor& want, DType dtype, const std::string& what) {
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST(got.numel() == want.numel());
        if (exact(dtype)) {
            BOOST_TEST((bytes_of(got) == bytes_of(want)));
            return;
        }
        const auto g = ops::cast(got, DType::Float64).to_vector<double>();
        const auto w = ops::cast(want, DType::Float64).to_vector<double>();
        double worst = 0.0;
        // Relative to the larger of 1 and the result: sums of terms near 100 that cancel keep their absolute error.
        const double tol = dtype == DType::Float16 ? 1e-1 : (dtype == DType::Float32 ? 1e-4 : 1e-10);
        for (std::size_t i = 0; i < g.size() && i < w.size(); ++i) {
            worst = std::max(worst, std::abs(g[i] - w[i]) / std::max(1.0, std::abs(w[i])));
        }
        BOOST_TEST(worst <= tol);
    }
}

struct Op {
    const char* name;
    std::function<Tensor(const Tensor&)> call;
};

// Runs `call` through the small-message path (checking it took it, once per call, and that a rerun gives the same
// bits on every process) and through MPI, and compares.
void against_mpi(const Op& op, const Tensor& x, DType dtype, bool small, bool same_everywhere = true) {
    const std::string what =
        std::string(op.name) + " " + std::string(dtype_name(dtype)) + "[" + std::to_string(x.numel()) + "]";
    const CommunicatorStats before = comm().stats();
    const Tensor through = op.call(x);
    const CommunicatorStats after = comm().stats();
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST(after.small_calls - before.small_calls == (small ? 1u : 0u));
        const Tensor again = op.call(x);  // on every process: a reduce's others get an undefined tensor
        if (through.defined()) {
            const Bytes first = bytes_of(through);
            BOOST_TEST((bytes_of(again) == first));  // run to run
        }
        if (same_everywhere) BOOST_TEST(same_on_every_rank(bytes_of(through)));
    }
    comm().set_shared_memory(false);
    const Tensor mpi = op.call(x);
    comm().set_shared_memory(true);
    BOOST_TEST(through.defined() == mpi.defined());
    if (through.defined()) check_close(through, mpi, dtype, what);
}

}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(every_op_dtype_and_size_against_the_mpi_path) {
    const int n = comm().size(), me = comm().rank();
    const std::size_t limit = group_limit();
    if (limit == 0 || n < 2) return;
    const DType dtypes[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                            DType::Int8,    DType::UInt8,   DType::Bool,  DType::Float16};
    for (DType dtype : dtypes) {
        const std::int64_t element = static_cast<std::int64_t>(dtype_size(dtype));
        const std::int64_t top = static_cast<std::int64_t>(limit) / element / n;  // so that n x top still fits
        // 0, 1, odd, a 16 KiB slot's edge (one round, two rounds), the largest the limit takes.
        std::vector<std::int64_t> sizes = {0, 1, 3, 17, 1000};
        for (std::int64_t s : {16384 / element - 1, 16384 / element, 16384 / element + 1, top})
            if (s > 0 && s <= top) sizes.push_back(s);
        for (std::int64_t len : sizes) {
            const Tensor x = input(dtype, len * n, me);
            // Reductions of float16 run in float32: the limit counts those bytes.
            const bool small = static_cast<std::size_t>(x.nbytes()) * (dtype == DType::Float16 ? 2 : 1) <= limit;
            // Broadcast, allgather and reduce take the path up to 8 KiB only (shm_group.hpp: shm_small_copy_max).
            const std::size_t copy_limit = std::min<std::size_t>(limit, 8192);
            const bool small_copy = static_cast<std::size_t>(x.nbytes()) <= copy_limit;
            const bool small_reduce =
                static_cast<std::size_t>(x.nbytes()) * (dtype == DType::Float16 ? 2 : 1) <= copy_limit;
            for (ReduceOp rop : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Prod}) {
                const std::string r = std::string(reduce_op_name(rop));
                against_mpi({("allreduce " + r).c_str(), [&](const Tensor& t) { return comm().allreduce(t, rop); }}, x,
                            dtype, small);
                against_mpi({("allreduce_ " + r).c_str(),
                             [&](const Tensor& t) {
                                 Tensor c = t.clone();
                                 comm().allreduce_(c, rop);
                                 return c;
                             }},
                            x, dtype, small);
                against_mpi(
                    {("reduce_scatter " + r).c_str(), [&](const Tensor& t) { return comm().reduce_scatter(t, rop); }},
                    x, dtype, small, false);
                for (int root = 0; root < n; ++root) {
                    against_mpi({("reduce " + r).c_str(), [&](const Tensor& t) { return comm().reduce(t, rop, root); }},
                                x, dtype, small_reduce, false);
                }
            }
            if (is_floating(dtype)) {
                against_mpi({"allreduce mean", [&](const Tensor& t) { return comm().allreduce(t, ReduceOp::Mean); }}, x,
                            dtype, small);
            }
            for (int root = 0; root < n; ++root) {
                against_mpi({"broadcast", [&](const Tensor& t) { return comm().broadcast(t, root); }}, x, dtype,
                            small_copy);
            }
            const Tensor part = input(dtype, len, me);
            against_mpi({"allgather", [&](const Tensor& t) { return comm().allgather(t); }}, part, dtype,
                        static_cast<std::size_t>(part.nbytes()) * static_cast<std::size_t>(n) <= copy_limit);
        }
    }
}

BOOST_AUTO_TEST_CASE(the_processes_agree_on_the_limit) {
    // Just above the group's limit: MPI (or the arena) on every process; at it: the small-message path everywhere.
    const std::size_t limit = group_limit();
    if (limit < 8 || comm().size() < 2) return;
    const auto at = static_cast<std::int64_t>(limit / 4);
    for (const std::int64_t len : {at, at + 1}) {
        const Tensor x = Tensor::full({len}, 1.0);
        const std::uint64_t small = comm().stats().small_calls;
        const Tensor y = comm().allreduce(x);
        BOOST_TEST(y.to_vector<float>()[0] == float(comm().size()));
        BOOST_TEST(comm().stats().small_calls - small == (len == at ? 1u : 0u), len);
    }
    // The barrier takes the path too.
    const std::uint64_t small = comm().stats().small_calls;
    comm().barrier();
    BOOST_TEST(comm().stats().small_calls - small == 1u);
}

BOOST_AUTO_TEST_CASE(views_and_sub_communicators) {
    const int n = comm().size(), me = comm().rank();
    if (group_limit() == 0 || n < 2) return;
    // A view at a different offset on each process, in place: the rest of its tensor is untouched.
    const std::int64_t k = 37, first = 1 + me;
    Tensor block = Tensor::full({k + n + 2}, -5.0);
    Tensor view = block.narrow_rows(first, first + k);
    ops::copy_(view, input(DType::Float32, k, me));
    const Tensor want = comm().allreduce(input(DType::Float32, k, me));
    comm().allreduce_(view);
    BOOST_TEST((bytes_of(view) == bytes_of(want)));
    const auto all = block.to_vector<float>();
    for (std::int64_t i = 0; i < std::int64_t(all.size()); ++i) {
        if (i < first || i >= first + k) BOOST_TEST(all[std::size_t(i)] == -5.0f, i);
    }
    // Into a view: an allgather and a broadcast.
    Tensor wide = Tensor::full({n * 3 + 2}, -5.0);
    Tensor rows = wide.narrow_rows(1, 1 + n * 3);
    comm().allgather_into(Tensor::full({3}, double(me)), rows);
    const auto w = wide.to_vector<float>();
    BOOST_TEST((w.front() == -5.0f && w.back() == -5.0f));
    for (int r = 0; r < n; ++r) BOOST_TEST(w[std::size_t(1 + 3 * r)] == float(r));
    // Even and odd processes each on their own communicator, at once.
    Communicator half = comm().split(me % 2, me);
    const std::uint64_t small = half.stats().small_calls;
    const Tensor sum = half.allreduce(Tensor::full({5}, double(me + 1)));
    double expected = 0;
    for (int r = me % 2; r < n; r += 2) expected += r + 1;
    BOOST_TEST(sum.to_vector<float>()[4] == float(expected));
    if (half.size() > 1) BOOST_TEST(half.stats().small_calls - small == 1u);
    const Tensor from = half.broadcast(Tensor::full({3}, double(me)), half.size() - 1);
    int last = me % 2;
    while (last + 2 < n) last += 2;
    BOOST_TEST(from.to_vector<float>()[0] == float(last));
}

BOOST_AUTO_TEST_CASE(inputs_changed_as_soon_as_a_call_returns) {
    // Broadcast's root and reduce's other processes return before their readers have read: what they hand over must
    // not be their tensor. One process is late by turns.
    const int n = comm().size(), me = comm().rank();
    if (group_limit() == 0 || n < 2) return;
    const int rounds = 200;
    int wrong = 0;
    Tensor src = Tensor::zeros({33});
    for (int i = 1; i <= rounds; ++i) {
        const int root = i % n;
        if (i % 17 == me) std::this_thread::sleep_for(std::chrono::microseconds(300));
        ops::fill_(src, double(i * 10 + me));
        Tensor got = me == root ? src : Tensor::zeros({33});
        comm().broadcast_(got, root);
        ops::fill_(src, -1.0);  // at once, on the root too
        if (got.to_vector<float>()[32] != float(i * 10 + root) && me != root) ++wrong;
        ops::fill_(src, double(i + me));
        const Tensor r = comm().reduce(src, ReduceOp::Sum, root);
        ops::fill_(src, -7.0);
        if (me == root && r.to_vector<float>()[0] != float(n * i + n * (n - 1) / 2)) ++wrong;
        ops::fill_(src, double(i * (me + 1)));
        comm().allreduce_(src);
        if (src.to_vector<float>()[5] != float(i * n * (n + 1) / 2)) ++wrong;
    }
    BOOST_TEST(wrong == 0, wrong << " wrong results in " << rounds << " rounds");
}

BOOST_AUTO_TEST_CASE(different_calls_meet_and_every_process_throws_without_a_watchdog) {
    // Without a watchdog timeout the processes that meet different calls on the path throw the same error (with one,
    // they wait for its report, as tests/collectives/watchdog_test.py checks through hang_program).
    const int n = comm().size(), me = comm().rank();
    if (group_limit() == 0 || n < 2) return;
    Communicator unwatched(MPI_COMM_WORLD, {.debug = false, .timeout = 0.0});
    std::string message;
    try {
        if (me == 0) {
            (void)unwatched.allgather(Tensor::ones({1}));
        } else {
            (void)unwatched.allreduce(Tensor::ones({n}));
        }
    } catch (const DistributedOperationError& e) {
        message = e.what();
    }
    BOOST_TEST(message.find("made different collective calls") != std::string::npos, message);
    BOOST_TEST(message.find("lockstep::allgather") != std::string::npos, message);
    BOOST_TEST(message.find("lockstep::allreduce") != std::string::npos, message);
    // The processes are in step again: the next call works.
    BOOST_TEST(unwatched.allreduce(Tensor::ones({2})).to_vector<float>()[0] == float(n));
}

BOOST_AUTO_TEST_CASE(debug_mode_exchanges_signatures_on_the_path) {
    const int n = comm().size();
    if (group_limit() == 0 || n < 2) return;
    Communicator debug(MPI_COMM_WORLD, {.debug = true});
    const CommunicatorStats before = debug.stats();
    (void)debug.allreduce(Tensor::ones({4}));
    debug.barrier();
    const CommunicatorStats after = debug.stats();
    BOOST_TEST(after.signature_checks - before.signature_checks == 2u);
    BOOST_TEST(after.shm_exchanges - before.shm_exchanges == 2u);
    BOOST_TEST(after.mpi_calls == before.mpi_calls);  // neither the exchanges nor the payloads went through MPI
    // A mismatch is still caught before any data moves, with the same error on every process.
    std::string message;
    try {
        (void)debug.allreduce(Tensor::ones({debug.rank() == 0 ? 3 : 4}));
    } catch (const SignatureMismatchError& e) {
        message = e.what();
    }
    BOOST_TEST(!message.empty());
    BOOST_TEST(same_on_every_rank(Bytes(message.begin(), message.end())));
}

BOOST_AUTO_TEST_CASE(mpi_gets_the_thread_level_the_setting_asks_for) {
    // The runtime initialised MPI itself, at mpi_thread_level (LOCKSTEP_MPI_THREAD_LEVEL); below multiple the
    // progress thread is off and non-blocking collectives run inside wait().
    int asked = MPI_THREAD_MULTIPLE;
    switch (config().mpi_thread_level) {
        case ThreadLevel::Single:
            asked = MPI_THREAD_SINGLE;
            break;
        case ThreadLevel::Funneled:
            asked = MPI_THREAD_FUNNELED;
            break;
        case ThreadLevel::Serialized:
            asked = MPI_THREAD_SERIALIZED;
            break;
        case ThreadLevel::Multiple:
            break;
    }
    const int got = Runtime::get().thread_level();
    BOOST_TEST(got >= asked);
    if (asked < MPI_THREAD_MULTIPLE) BOOST_TEST(got == asked);  // Open MPI and MPICH give what is asked
    Communicator c = comm().dup();
    BOOST_TEST(c.progress_thread() == (got == MPI_THREAD_MULTIPLE));
    Work w = c.iallreduce(Tensor::ones({3}));
    BOOST_TEST(w.result().to_vector<float>()[2] == float(c.size()));
}
