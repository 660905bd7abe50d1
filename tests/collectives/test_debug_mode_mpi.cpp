// Run under mpirun with 2, 3 and 4 ranks: debug mode turns mismatched collectives into the same exception on every
// rank, and costs exactly one MPI_Allgather per collective; with debug off lockstep makes no extra MPI call. Calls are
// counted through the MPI profiling interface: this program defines the MPI functions lockstep uses and forwards them
// to their PMPI_ versions.
#define BOOST_TEST_MODULE debug_mode_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "runtime_fixture.hpp"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>

using namespace lockstep;

namespace {
std::atomic<long> mpi_calls{0};
std::atomic<long> allgather_calls{0};
}  // namespace

extern "C" {
int MPI_Allgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c) {
    ++mpi_calls;
    ++allgather_calls;
    return PMPI_Allgather(s, sc, st, r, rc, rt, c);
}
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Allreduce(s, r, n, t, o, c);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Barrier(MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Barrier(c);
}
int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Reduce(s, r, n, t, o, root, c);
}
int MPI_Gather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Gather(s, sc, st, r, rc, rt, root, c);
}
int MPI_Scatter(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Scatter(s, sc, st, r, rc, rt, root, c);
}
int MPI_Reduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Reduce_scatter_block(s, r, n, t, o, c);
}
int MPI_Alltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Alltoall(s, sc, st, r, rc, rt, c);
}
int MPI_Allgatherv(const void* s, int sc, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt,
                   MPI_Comm c) {
    ++mpi_calls;
    return PMPI_Allgatherv(s, sc, st, r, rc, d, rt, c);
}
}

namespace {
using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;

// Runs fn and returns the mismatch message; fails the test if fn does not throw SignatureMismatchError.
std::string mismatch(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const SignatureMismatchError& e) {
        return e.what();
    }
    BOOST_ERROR("no SignatureMismatchError on rank " << R());
    return {};
}
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// The same text on every rank: rank 0's message is broadcast and compared.
bool same_on_every_rank(const std::string& text) {
    int length = static_cast<int>(text.size());
    PMPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string root_text(static_cast<std::size_t>(length), '\0');
    if (R() == 0) root_text = text;
    PMPI_Bcast(root_text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
    int same = root_text == text ? 1 : 0, all = 0;
    PMPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}
}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

namespace {
// What moved data or signatures: MPI calls, and the calls and signature exchanges that went through the node's
// shared-memory arena instead (its small-message path), so that the counts below hold on either path.
long moves() {
    const CommunicatorStats s = comm().stats();
    return mpi_calls + static_cast<long>(s.small_calls + s.shm_exchanges);
}
long exchanges() {
    return allgather_calls + static_cast<long>(comm().stats().shm_exchanges);
}
}  // namespace

BOOST_AUTO_TEST_CASE(debug_off_makes_no_extra_mpi_call) {
    comm().set_debug(false);
    const long calls = moves(), gathers = exchanges();
    (void)comm().allreduce(Tensor::ones({8}));
    (void)comm().broadcast(Tensor::ones({8}), 0);
    comm().barrier();
    BOOST_TEST(moves() - calls == 3);
    BOOST_TEST(exchanges() - gathers == 0);
}

BOOST_AUTO_TEST_CASE(debug_on_adds_exactly_one_allgather_per_collective) {
    comm().set_debug(true);
    const long calls = moves(), gathers = exchanges();
    (void)comm().allreduce(Tensor::ones({8}));
    (void)comm().broadcast(Tensor::ones({8}), 0);
    comm().barrier();
    BOOST_TEST(moves() - calls == 6);
    BOOST_TEST(exchanges() - gathers == 3);
    BOOST_TEST(comm().stats().signature_checks >= 3u);
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(every_op_with_mismatched_shapes_raises_on_every_rank) {
    comm().set_debug(true);
    // Rank r passes [1, 5] (rank 0) or [1, r + 1, 5]: exactly the per-process shapes must appear in the report.
    const Shape mine = R() == 0 ? Shape{1, 5} : Shape{1, R() + 1, 5};
    const int n = N();
    Tensor t = Tensor::ones(mine);
    Tensor divisible = Tensor::ones(R() == 0 ? Shape{n, 5} : Shape{n, R() + 1});
    const std::vector<std::pair<std::string, std::function<void()>>> ops_under_test = {
        {"lockstep::broadcast", [&] { (void)comm().broadcast(t, 0); }},
        {"lockstep::reduce", [&] { (void)comm().reduce(t, ReduceOp::Sum, 0); }},
        {"lockstep::allreduce", [&] { (void)comm().allreduce(t); }},
        {"lockstep::gather", [&] { (void)comm().gather(t, 0); }},
        {"lockstep::allgather", [&] { (void)comm().allgather(t); }},
        {"lockstep::scatter", [&] { (void)comm().scatter(divisible, 0); }},
        {"lockstep::reduce_scatter", [&] { (void)comm().reduce_scatter(divisible); }},
        {"lockstep::alltoall", [&] { (void)comm().alltoall(divisible); }},
    };
    for (const auto& [name, call] : ops_under_test) {
        BOOST_TEST_CONTEXT(name) {
            const std::string msg = mismatch(call);
            BOOST_TEST(contains(msg, "due to shape mismatches"));
            BOOST_TEST(contains(msg, "Operation: `" + name + "`"));
            const bool uses_divisible =
                name == "lockstep::scatter" || name == "lockstep::reduce_scatter" || name == "lockstep::alltoall";
            BOOST_TEST(contains(msg, "Process 0: " + shape_str(uses_divisible ? Shape{n, 5} : Shape{1, 5})));
            for (int r = 1; r < n; ++r) {
                const Shape theirs = uses_divisible ? Shape{n, r + 1} : Shape{1, r + 1, 5};
                BOOST_TEST(contains(msg, "Process " + std::to_string(r) + ": " + shape_str(theirs)), msg);
            }
            BOOST_TEST(same_on_every_rank(msg));
        }
    }
    // Uneven gather: only the trailing dimensions must agree.
    Tensor uneven = Tensor::ones({R() + 1, R() == 0 ? 3 : 4});
    const std::string msg = mismatch([&] { (void)comm().gather_uneven(uneven); });
    BOOST_TEST(contains(msg, "dimension 0 may differ"));
    BOOST_TEST((comm().gather_uneven(Tensor::ones({R() + 1, 3})).size(0) == n * (n + 1) / 2));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(dtype_op_kind_root_and_reduce_op_mismatches_are_detected) {
    comm().set_debug(true);
    const int last = N() - 1;
    std::string msg =
        mismatch([&] { (void)comm().allreduce(Tensor::ones({4}, R() == last ? DType::Float64 : DType::Float32)); });
    BOOST_TEST(contains(msg, "dtype mismatches"));
    BOOST_TEST(contains(msg, "Process " + std::to_string(last) + ": float64"));
    BOOST_TEST(same_on_every_rank(msg));

    // Rank `last` calls broadcast while the others call allreduce: caught, because the exchange is the same call.
    msg = mismatch([&] {
        if (R() == last) {
            (void)comm().broadcast(Tensor::ones({4}), 0);
        } else {
            (void)comm().allreduce(Tensor::ones({4}));
        }
    });
    BOOST_TEST(contains(msg, "mismatched operations"));
    BOOST_TEST(contains(msg, "`lockstep::broadcast`"));
    BOOST_TEST(contains(msg, "`lockstep::allreduce`"));
    BOOST_TEST(same_on_every_rank(msg));

    msg = mismatch([&] { (void)comm().broadcast(Tensor::ones({4}), R() == last ? 0 : last); });
    BOOST_TEST(contains(msg, "root mismatches"));
    BOOST_TEST(same_on_every_rank(msg));

    msg = mismatch([&] { (void)comm().allreduce(Tensor::ones({4}), R() == last ? ReduceOp::Max : ReduceOp::Sum); });
    BOOST_TEST(contains(msg, "reduce op mismatches"));
    BOOST_TEST(contains(msg, "Process " + std::to_string(last) + ": max"));
    BOOST_TEST(same_on_every_rank(msg));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(a_skipped_call_is_caught_at_the_next_call) {
    comm().set_debug(true);
    Communicator sub = comm().dup();
    Tensor x = Tensor::ones({3});
    // Rank 0 skips the allreduce (an early `continue`, say) and goes on to the broadcast the others call next.
    const std::string msg = mismatch([&] {
        if (R() != 0) (void)sub.allreduce(x);
        (void)sub.broadcast(x, 0);
    });
    BOOST_TEST(contains(msg, "mismatched operations"));
    BOOST_TEST(contains(msg, "Process 0: `lockstep::broadcast` (call #1)"));
    BOOST_TEST(same_on_every_rank(msg));
    BOOST_TEST(sub.allreduce(x).to_vector<float>()[0] == static_cast<float>(N()));  // all ranks still in step
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(the_exception_carries_json_and_the_call_site_and_the_job_goes_on) {
    comm().set_debug(true);
    try {
        (void)comm().allreduce(Tensor::ones({R() + 1}), ReduceOp::Sum, {"grad-sync"});
        BOOST_FAIL("no exception");
    } catch (const DistributedOperationError& base) {
        const auto* e = dynamic_cast<const SignatureMismatchError*>(&base);
        BOOST_REQUIRE(e != nullptr);
        const auto doc = nlohmann::json::parse(e->to_json());
        BOOST_TEST(doc["ranks"].size() == static_cast<std::size_t>(N()));
        BOOST_TEST(doc["ranks"][0]["file"] == "test_debug_mode_mpi.cpp");
        BOOST_TEST(doc["ranks"][0]["tag"] == "grad-sync");
        BOOST_TEST(doc["ranks"][0]["step"].is_null());  // no step was set
        BOOST_TEST(contains(e->what(), "test_debug_mode_mpi.cpp:"));
        BOOST_TEST(contains(e->what(), "Tag: 'grad-sync'"));
    }
    // Everybody threw before the payload: the next collective works on every rank.
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(N()));
    comm().set_debug(false);
}

namespace {
// Runs fn and returns the rejection's message; fails the test if fn does not throw CallRejectedError.
std::string rejected(const std::function<void()>& fn, bool* out_of_memory = nullptr) {
    try {
        fn();
    } catch (const CallRejectedError& e) {
        if (out_of_memory != nullptr) *out_of_memory = e.out_of_memory();
        BOOST_TEST(e.failures().size() == 1u);
        return e.what();
    }
    BOOST_ERROR("no CallRejectedError on rank " << R());
    return {};
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_local_error_on_one_rank_is_the_same_error_on_every_rank) {
    comm().set_debug(true);
    const int last = N() - 1;
    const bool odd_one = R() == last;
    const int n = N();
    const Tensor row = Tensor::ones({2, 3});
    // One rank's output tensor has the wrong shape.
    Tensor gathered = Tensor::zeros(odd_one ? Shape{n * 2 + 1, 3} : Shape{n * 2, 3});
    std::string msg = rejected([&] { comm().allgather_into(row, gathered); });
    BOOST_TEST(contains(msg, "Process " + std::to_string(last) + ": ShapeError: allgather_into: the output must be"),
               msg);
    BOOST_TEST(contains(msg, "no data was exchanged"));
    BOOST_TEST(same_on_every_rank(msg));
    Tensor part = Tensor::zeros(odd_one ? Shape{3, 3} : Shape{2, 3});
    msg = rejected([&] { comm().reduce_scatter_into(Tensor::ones({n * 2, 3}), part); });
    BOOST_TEST(contains(msg, "ShapeError: reduce_scatter_into"));
    BOOST_TEST(same_on_every_rank(msg));
    // An undefined tensor.
    Tensor undefined;
    Tensor defined = Tensor::ones({4});
    msg = rejected([&] { comm().allreduce_(odd_one ? undefined : defined); });
    BOOST_TEST(contains(msg, "Process " + std::to_string(last) + ": "), msg);
    BOOST_TEST(same_on_every_rank(msg));
    // A 0-d tensor to gather_uneven, a dimension out of range to pad_across_processes.
    msg = rejected([&] { (void)comm().gather_uneven(odd_one ? Tensor::ones({}) : Tensor::ones({2, 2})); });
    BOOST_TEST(contains(msg, "has no first dimension"));
    BOOST_TEST(same_on_every_rank(msg));
    msg = rejected([&] { (void)comm().pad_across_processes(Tensor::ones({2, 2}), odd_one ? 5 : 1); });
    BOOST_TEST(contains(msg, "InvalidArgumentError: pad_across_processes: dimension 5 is out of range"));
    BOOST_TEST(same_on_every_rank(msg));
    // Everybody threw before the payload: the ranks are still in step.
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(n));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(running_out_of_memory_on_one_rank_rejects_the_call_on_every_rank) {
    comm().set_debug(true);
    const int last = N() - 1;
    const Tensor big = Tensor::ones({1 << 20});  // 4 MiB: its result cannot be allocated under a 1 MiB cap
    Allocator& host = allocator_for(Device::cpu());
    const auto previous = host.stats().limit_bytes;
    host.empty_cache();
    if (R() == last) host.set_limit(host.stats().allocated_bytes + (std::size_t{1} << 20));
    bool out_of_memory = false;
    const std::string msg = rejected([&] { (void)comm().allreduce(big); }, &out_of_memory);
    host.set_limit(previous);
    BOOST_TEST(out_of_memory);
    BOOST_TEST(contains(msg, "Process " + std::to_string(last) + ": OutOfMemoryError"), msg);
    BOOST_TEST(same_on_every_rank(msg));
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(N()));
    comm().set_debug(false);
}

namespace {
// Runs fn and returns the message of the E it throws; fails the test if fn throws a CallRejectedError, anything else,
// or nothing.
template <typename E>
std::string raised(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const CallRejectedError& e) {
        BOOST_ERROR("a CallRejectedError instead of the type every rank failed with, on rank " << R() << ": "
                                                                                               << e.what());
        return {};
    } catch (const E& e) {
        return e.what();
    } catch (const std::exception& e) {
        BOOST_ERROR("another error on rank " << R() << ": " << e.what());
        return {};
    }
    BOOST_ERROR("no error on rank " << R());
    return {};
}
}  // namespace

// The type a program catches for an error every rank sees does not depend on debug mode: what every rank failed with
// is raised on every rank, with one message that says so.
BOOST_AUTO_TEST_CASE(an_error_every_rank_sees_is_raised_as_its_own_type_on_every_rank) {
    comm().set_debug(true);
    const int n = N();
    const std::string all = "Processes 0-" + std::to_string(n - 1) + ": ";
    const Tensor ints = Tensor::ones({4}, DType::Int32);
    long calls = moves();
    std::string msg = raised<DTypeError>([&] { (void)comm().allreduce(ints, ReduceOp::Mean); });
    BOOST_TEST(moves() - calls == 1);  // the signature exchange, and no payload
    BOOST_TEST(contains(msg, "Cannot run `lockstep::allreduce`"), msg);
    BOOST_TEST(contains(msg, "every process raised DTypeError checking its own arguments"), msg);
    BOOST_TEST(contains(msg, all + "lockstep::allreduce: the mean of int32[4] cpu is not defined"), msg);
    BOOST_TEST(contains(msg, "no data was exchanged"), msg);
    BOOST_TEST(same_on_every_rank(msg));
    Tensor in_place = ints.clone();
    msg = raised<DTypeError>([&] { comm().allreduce_(in_place, ReduceOp::Mean); });
    BOOST_TEST(same_on_every_rank(msg));
    msg = raised<DTypeError>([&] { (void)comm().reduce(ints, ReduceOp::Mean, n - 1); });
    BOOST_TEST(same_on_every_rank(msg));

    // Every rank's output is wrong, each in its own way: still one ShapeError, its messages grouped.
    Tensor gathered = Tensor::zeros({n * 2 + 1 + R(), 3});
    msg = raised<ShapeError>([&] { comm().allgather_into(Tensor::ones({2, 3}), gathered); });
    BOOST_TEST(contains(msg, "every process raised ShapeError"), msg);
    BOOST_TEST(contains(msg, "  - Process " + std::to_string(n - 1) + ": allgather_into: the output must be"), msg);
    BOOST_TEST(same_on_every_rank(msg));
    Tensor wrong_dtype = Tensor::zeros({n * 2, 3}, DType::Int64);
    msg = raised<DTypeError>([&] { comm().allgather_into(Tensor::ones({2, 3}), wrong_dtype); });
    BOOST_TEST(same_on_every_rank(msg));

    // Read-only everywhere, a 0-d tensor to gather_uneven, a dimension out of range, a reduce op outside the enum.
    std::vector<float> values(4, 1.0f);
    Tensor read_only = Tensor::from_blob(values.data(), {4}, DType::Float32, Device::cpu(), {}, /*read_only=*/true);
    msg = raised<ReadOnlyError>([&] { comm().allreduce_(read_only); });
    BOOST_TEST(contains(msg, all + "allreduce_: "), msg);
    BOOST_TEST(same_on_every_rank(msg));
    msg = raised<ShapeError>([&] { (void)comm().gather_uneven(Tensor::ones({})); });
    BOOST_TEST(same_on_every_rank(msg));
    msg = raised<InvalidArgumentError>([&] { (void)comm().pad_across_processes(Tensor::ones({2}), 3); });
    BOOST_TEST(same_on_every_rank(msg));
    msg = raised<InvalidArgumentError>([&] { (void)comm().allreduce(Tensor::ones({2}), static_cast<ReduceOp>(9)); });
    BOOST_TEST(same_on_every_rank(msg));
    // A layer above whose own check failed on every rank (Communicator::reject_call).
    msg = raised<InvalidArgumentError>([&] {
        comm().reject_call(OpKind::Allreduce, nullptr, -1, ReduceOp::Sum,
                           std::make_exception_ptr(InvalidArgumentError("int16 has no lockstep dtype")));
    });
    BOOST_TEST(contains(msg, all + "int16 has no lockstep dtype"), msg);
    BOOST_TEST(same_on_every_rank(msg));

    // The ranks are still in step.
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(n));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(running_out_of_memory_on_every_rank_is_an_out_of_memory_error_on_every_rank) {
    comm().set_debug(true);
    const Tensor big = Tensor::ones({1 << 20});  // 4 MiB: its result cannot be allocated under a 1 MiB cap
    Allocator& host = allocator_for(Device::cpu());
    const auto previous = host.stats().limit_bytes;
    host.empty_cache();
    host.set_limit(host.stats().allocated_bytes + (std::size_t{1} << 20));
    const std::string msg = raised<OutOfMemoryError>([&] { (void)comm().allreduce(big); });
    host.set_limit(previous);
    BOOST_TEST(contains(msg, "every process ran out of memory for `lockstep::allreduce`"), msg);
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(N()));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(failures_that_differ_between_ranks_stay_a_call_rejected_error) {
    comm().set_debug(true);
    const int last = N() - 1;
    // Every rank fails, but not with the same type: the last rank's mean of int32 (DTypeError) against the others'
    // undefined tensor (InvalidArgumentError).
    const Tensor ints = Tensor::ones({4}, DType::Int32);
    try {
        (void)comm().allreduce(R() == last ? ints : Tensor{}, ReduceOp::Mean);
        BOOST_ERROR("no error on rank " << R());
    } catch (const CallRejectedError& e) {
        BOOST_TEST(e.failures().size() == static_cast<std::size_t>(N()));
        const std::string msg = e.what();
        BOOST_TEST(contains(msg, "Process " + std::to_string(last) + ": DTypeError: lockstep::allreduce: the mean of"),
                   msg);
        BOOST_TEST(contains(msg, "Process 0: InvalidArgumentError: "), msg);
        BOOST_TEST(same_on_every_rank(msg));
    }
    // One rank fails, the others could run the call.
    try {
        (void)comm().allreduce(R() == last ? ints : ops::cast(ints, DType::Float32), ReduceOp::Mean);
        BOOST_ERROR("no error on rank " << R());
    } catch (const CallRejectedError& e) {
        BOOST_TEST(e.failures().size() == 1u);
        BOOST_TEST(e.failures()[0].type == "DTypeError");
        BOOST_TEST(same_on_every_rank(e.what()));
    }
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(N()));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(a_skipped_loop_step_is_caught_at_the_next_call_with_steps_set) {
    comm().set_debug(true);
    Communicator sub = comm().dup();
    Tensor x = Tensor::ones({3});
    // Rank 0 skips step 2 of the loop: its call numbers still pair with the others' (each rank counts its own calls),
    // but the step it set does not.
    std::string msg;
    try {
        for (std::uint64_t step = 1; step <= 4; ++step) {
            sub.set_step(step);
            if (R() == 0 && step == 2) continue;
            sub.allreduce_(x);
        }
        BOOST_ERROR("the skipped step went unnoticed");
    } catch (const SignatureMismatchError& e) {
        msg = e.what();
        const auto doc = nlohmann::json::parse(e.to_json());
        BOOST_TEST(doc["ranks"][0]["step"] == 3);
        BOOST_TEST(doc["ranks"][1]["step"] == 2);
    }
    BOOST_TEST(contains(msg, "step mismatches"), msg);
    BOOST_TEST(contains(msg, "Process 0: step 3"), msg);
    BOOST_TEST(contains(msg, ": step 2"), msg);
    BOOST_TEST(same_on_every_rank(msg));
    // The same loop without steps set pairs the wrong calls silently: what set_step is for.
    sub.set_step(0);
    BOOST_TEST(sub.allreduce(Tensor::ones({3})).to_vector<float>()[0] == static_cast<float>(N()));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(tags_are_compared_when_set) {
    comm().set_debug(true);
    const std::string msg = mismatch([&] { comm().barrier({R() == 0 ? "epoch-1" : "epoch-2"}); });
    BOOST_TEST(contains(msg, "tag mismatches"), msg);
    BOOST_TEST(contains(msg, "Process 0: 'epoch-1'"));
    BOOST_TEST(same_on_every_rank(msg));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(a_sub_communicator_report_names_world_ranks) {
    if (N() < 3) return;  // needs a sub-communicator whose ranks are not the world's
    comm().set_debug(true);
    Communicator odd = comm().split(R() == 0 ? 0 : 1, R());
    if (R() != 0) {
        const std::string msg = mismatch([&] { (void)odd.allreduce(Tensor::ones({odd.rank() + 1})); });
        BOOST_TEST(contains(msg, "World ranks of this communicator's processes: 0=1, 1=2"), msg);
    }
    comm().set_debug(false);
}

namespace {
// Runs fn and returns the rejection; fails the test if fn does not throw CallRejectedError.
std::vector<CallRejectedError::Failure> rejection_failures(const std::function<void()>& fn, std::string* message) {
    try {
        fn();
    } catch (const CallRejectedError& e) {
        *message = e.what();
        return e.failures();
    }
    BOOST_ERROR("no CallRejectedError on rank " << R());
    return {};
}

// Checks that every rank rejected the call for one reason: rank 1's target is read-only.
void check_rank_1_read_only(const std::vector<CallRejectedError::Failure>& failures, const std::string& message,
                            const std::string& op) {
    BOOST_REQUIRE(failures.size() == 1u);
    BOOST_TEST(failures[0].rank == 1);
    BOOST_TEST(failures[0].type == "ReadOnlyError");
    BOOST_TEST(contains(failures[0].message, op + ": "), failures[0].message);
    BOOST_TEST(contains(failures[0].message, "read-only"), failures[0].message);
    BOOST_TEST(contains(message, "Process 1: ReadOnlyError: " + op), message);
    BOOST_TEST(same_on_every_rank(message));
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_read_only_allreduce_target_on_one_rank_is_rejected_on_every_rank) {
    comm().set_debug(true);
    std::vector<float> values(4, static_cast<float>(R() + 1));
    Tensor t = Tensor::from_blob(values.data(), {4}, DType::Float32, Device::cpu(), {}, /*read_only=*/R() == 1);
    const long calls = moves();
    std::string message;
    const auto failures = rejection_failures([&] { comm().allreduce_(t); }, &message);
    BOOST_TEST(moves() - calls == 1);  // the signature exchange, and no payload
    check_rank_1_read_only(failures, message, "allreduce_");
    BOOST_TEST(values == std::vector<float>(4, static_cast<float>(R() + 1)));
    // The ranks are still in step, and a writable target on every rank works.
    Tensor writable = Tensor::from_blob(values.data(), {4}, DType::Float32, Device::cpu());
    comm().allreduce_(writable);
    BOOST_TEST(values[0] == static_cast<float>(N() * (N() + 1) / 2));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(a_read_only_broadcast_target_is_rejected_on_a_non_root_only) {
    comm().set_debug(true);
    std::vector<std::int32_t> values(3, R() + 10);
    Tensor t = Tensor::from_blob(values.data(), {3}, DType::Int32, Device::cpu(), {}, /*read_only=*/R() == 1);
    const long calls = moves();
    std::string message;
    const auto failures = rejection_failures([&] { comm().broadcast_(t, 0); }, &message);
    BOOST_TEST(moves() - calls == 1);
    check_rank_1_read_only(failures, message, "broadcast_");
    BOOST_TEST(values == std::vector<std::int32_t>(3, R() + 10));
    // The root only reads: its tensor may be read-only.
    Tensor root_only = Tensor::from_blob(values.data(), {3}, DType::Int32, Device::cpu(), {}, /*read_only=*/R() == 0);
    comm().broadcast_(root_only, 0);
    BOOST_TEST(values == std::vector<std::int32_t>(3, 10));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(read_only_outputs_of_the_into_forms_are_rejected_on_every_rank) {
    comm().set_debug(true);
    const int n = N();
    const Tensor row = Tensor::ones({2, 3});
    std::vector<float> gathered_values(static_cast<std::size_t>(n * 6), -1.0f);
    Tensor gathered = Tensor::from_blob(gathered_values.data(), {n * 2, 3}, DType::Float32, Device::cpu(), {},
                                        /*read_only=*/R() == 1);
    std::string message;
    auto failures = rejection_failures([&] { comm().allgather_into(row, gathered); }, &message);
    check_rank_1_read_only(failures, message, "allgather_into");
    BOOST_TEST(gathered_values == std::vector<float>(static_cast<std::size_t>(n * 6), -1.0f));

    std::vector<float> part_values(6, -1.0f);
    Tensor part =
        Tensor::from_blob(part_values.data(), {2, 3}, DType::Float32, Device::cpu(), {}, /*read_only=*/R() == 1);
    failures = rejection_failures([&] { comm().reduce_scatter_into(Tensor::ones({n * 2, 3}), part); }, &message);
    check_rank_1_read_only(failures, message, "reduce_scatter_into");
    BOOST_TEST(part_values == std::vector<float>(6, -1.0f));
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(n));
    comm().set_debug(false);
}

BOOST_AUTO_TEST_CASE(with_debug_off_a_read_only_target_throws_locally_before_any_mpi_call) {
    comm().set_debug(false);
    // Every rank's target is read-only, so every rank throws and none waits in a collective for the others (not so
    // for broadcast_, whose root would go on to the payload alone).
    const int n = N();
    std::vector<float> values(static_cast<std::size_t>(n * 2), 1.0f);
    Tensor t = Tensor::from_blob(values.data(), {n * 2}, DType::Float32, Device::cpu(), {}, /*read_only=*/true);
    const long calls = moves();
    BOOST_CHECK_THROW(comm().allreduce_(t), ReadOnlyError);
    BOOST_CHECK_THROW(comm().allgather_into(Tensor::ones({2}), t), ReadOnlyError);
    Tensor part = t.narrow_rows(0, 2);  // a view of a read-only tensor is read-only
    BOOST_CHECK_THROW(comm().reduce_scatter_into(Tensor::ones({n * 2}), part), ReadOnlyError);
    BOOST_TEST(moves() - calls == 0);
    BOOST_TEST(values == std::vector<float>(static_cast<std::size_t>(n * 2), 1.0f));
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(N()));
}
