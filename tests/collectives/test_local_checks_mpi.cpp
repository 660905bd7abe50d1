// Run under mpirun with 2 and 3 ranks, debug mode off and a short watchdog timeout: an argument that every process
// can check on its own, wrong in the same way on every process, fails on every process with the same error type
// before any process makes an MPI call for it. A check made on some processes only would send the others into the
// payload, where they wait until the watchdog ends the job (a failing exit). Each operation is called through the
// C++ Communicator and, where the C interface checks arguments of its own (outputs of out-of-place forms), through
// lockstep.h.
#define BOOST_TEST_MODULE local_checks_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.h>
#include <lockstep.hpp>

#include "runtime_fixture.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;

// What a call threw, as a number every process can compare.
enum Outcome : std::int64_t {
    Returned = 0,
    WrongShape = LOCKSTEP_ERROR_SHAPE,
    Dtype = LOCKSTEP_ERROR_DTYPE,
    ReadOnly = LOCKSTEP_ERROR_READ_ONLY,
    Invalid = LOCKSTEP_ERROR_INVALID_ARGUMENT,
    OtherError = 100,
};

Outcome outcome_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const ShapeError&) {
        return WrongShape;
    } catch (const DTypeError&) {
        return Dtype;
    } catch (const ReadOnlyError&) {
        return ReadOnly;
    } catch (const InvalidArgumentError&) {
        return Invalid;
    } catch (const std::exception& e) {
        BOOST_TEST_MESSAGE("rank " << R() << ": " << e.what());
        return OtherError;
    }
    return Returned;
}

// Every process's outcome; the allgather also proves that the processes are still in step (a process left in the
// failed call's payload would pair it with this one, or wait, and the watchdog would end the job).
std::vector<std::int64_t> everyones(std::int64_t mine) {
    return comm().allgather(Tensor::from_data<std::int64_t>({mine}, {1})).to_vector<std::int64_t>();
}

// Makes `call` on every process and checks that each failed with `expected` without an MPI call of its own.
void fails_everywhere(const std::string& what, Outcome expected, const std::function<void()>& call) {
    BOOST_TEST_CONTEXT(what) {
        const std::uint64_t calls = comm().stats().mpi_calls;
        const Outcome mine = outcome_of(call);
        BOOST_TEST(comm().stats().mpi_calls == calls);  // nothing was sent or waited for
        const std::vector<std::int64_t> all = everyones(mine);
        BOOST_TEST(all == std::vector<std::int64_t>(static_cast<std::size_t>(N()), expected),
                   boost::test_tools::per_element());
    }
}

// The same for a call through the C interface: its status.
void c_fails_everywhere(const std::string& what, Outcome expected, const std::function<lockstep_status_t()>& call) {
    BOOST_TEST_CONTEXT(what) {
        const std::uint64_t calls = comm().stats().mpi_calls;
        const lockstep_status_t mine = call();
        BOOST_TEST(comm().stats().mpi_calls == calls);
        if (mine != expected) BOOST_TEST_MESSAGE("rank " << R() << ": " << lockstep_last_error());
        const std::vector<std::int64_t> all = everyones(mine);
        BOOST_TEST(all == std::vector<std::int64_t>(static_cast<std::size_t>(N()), expected),
                   boost::test_tools::per_element());
    }
}

// A C tensor of float32 zeros (or of `dtype`), released at the end of the scope.
struct CTensor {
    lockstep_tensor_t handle = nullptr;
    explicit CTensor(std::vector<std::int64_t> shape, lockstep_dtype_t dtype = LOCKSTEP_FLOAT32) {
        const lockstep_device_t cpu{LOCKSTEP_DEVICE_CPU, 0};
        BOOST_REQUIRE(lockstep_tensor_empty(shape.data(), static_cast<std::int32_t>(shape.size()), dtype, cpu,
                                            &handle) == LOCKSTEP_OK);
    }
    ~CTensor() { lockstep_tensor_release(handle); }
    CTensor(const CTensor&) = delete;
    CTensor& operator=(const CTensor&) = delete;
};

lockstep_comm_t c_world() {
    lockstep_comm_t world = nullptr;
    BOOST_REQUIRE(lockstep_comm_world(&world) == LOCKSTEP_OK);
    return world;
}

struct DebugOff {
    DebugOff() {
        comm().set_debug(false);
        BOOST_TEST_REQUIRE(comm().timeout() > 0.0);  // a regression must end in the watchdog's report
    }
};

}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);
BOOST_FIXTURE_TEST_SUITE(debug_off, DebugOff)

BOOST_AUTO_TEST_CASE(allreduce) {
    const Tensor ints = Tensor::ones({4}, DType::Int32);
    fails_everywhere("mean of int32", Dtype, [&] { (void)comm().allreduce(ints, ReduceOp::Mean); });
    Tensor ints_in_place = ints.clone();
    fails_everywhere("in place, mean of int32", Dtype, [&] { comm().allreduce_(ints_in_place, ReduceOp::Mean); });
    fails_everywhere("mean of bool", Dtype,
                     [&] { (void)comm().allreduce(Tensor::ones({2}, DType::Bool), ReduceOp::Mean); });
    fails_everywhere("a reduce op outside the enum", Invalid,
                     [&] { (void)comm().allreduce(Tensor::ones({2}), static_cast<ReduceOp>(42)); });
    std::vector<float> values(4, 1.0f);
    Tensor read_only = Tensor::from_blob(values.data(), {4}, DType::Float32, Device::cpu(), {}, /*read_only=*/true);
    fails_everywhere("in place, read-only", ReadOnly, [&] { comm().allreduce_(read_only); });
    fails_everywhere("undefined", Invalid, [&] { (void)comm().allreduce(Tensor{}); });

    lockstep_comm_t world = c_world();
    CTensor in({4}), wrong_shape({5}), wrong_dtype({4}, LOCKSTEP_INT32);
    c_fails_everywhere("C: output of another shape", WrongShape,
                       [&] { return lockstep_allreduce(world, in.handle, wrong_shape.handle, LOCKSTEP_SUM, nullptr); });
    c_fails_everywhere("C: output of another dtype", Dtype,
                       [&] { return lockstep_allreduce(world, in.handle, wrong_dtype.handle, LOCKSTEP_SUM, nullptr); });
    c_fails_everywhere("C: an unknown reduce op", Invalid, [&] {
        return lockstep_allreduce(world, in.handle, in.handle, static_cast<lockstep_reduce_op_t>(42), nullptr);
    });
    c_fails_everywhere("C: mean of int32 in place", Dtype, [&] {
        return lockstep_allreduce(world, wrong_dtype.handle, wrong_dtype.handle, LOCKSTEP_MEAN, nullptr);
    });
}

BOOST_AUTO_TEST_CASE(broadcast) {
    const Tensor t = Tensor::ones({3});
    fails_everywhere("root out of range", Invalid, [&] { (void)comm().broadcast(t, N()); });
    fails_everywhere("negative root", Invalid, [&] { (void)comm().broadcast(t, -1); });
    Tensor in_place = t.clone();
    fails_everywhere("in place, root out of range", Invalid, [&] { comm().broadcast_(in_place, N() + 3); });
    fails_everywhere("undefined", Invalid, [&] { (void)comm().broadcast(Tensor{}, 0); });

    // Out of place through the C interface: the same wrong output on every process, root or not.
    lockstep_comm_t world = c_world();
    CTensor in({3}), out({3}), wrong_shape({4}), wrong_dtype({3}, LOCKSTEP_INT32);
    for (int root = 0; root < N(); ++root) {
        c_fails_everywhere("C: output of another shape, root " + std::to_string(root), WrongShape,
                           [&] { return lockstep_broadcast(world, in.handle, wrong_shape.handle, root, nullptr); });
        c_fails_everywhere("C: output of another dtype, root " + std::to_string(root), Dtype,
                           [&] { return lockstep_broadcast(world, in.handle, wrong_dtype.handle, root, nullptr); });
    }
    c_fails_everywhere("C: root out of range", Invalid,
                       [&] { return lockstep_broadcast(world, in.handle, in.handle, N(), nullptr); });
    c_fails_everywhere("C: out of place, root out of range", Invalid,
                       [&] { return lockstep_broadcast(world, in.handle, out.handle, -2, nullptr); });
}

BOOST_AUTO_TEST_CASE(reduce) {
    const Tensor ints = Tensor::ones({4}, DType::Int32);
    for (int root = 0; root < N(); ++root) {
        fails_everywhere("mean of int32, root " + std::to_string(root), Dtype,
                         [&] { (void)comm().reduce(ints, ReduceOp::Mean, root); });
    }
    fails_everywhere("root out of range", Invalid, [&] { (void)comm().reduce(Tensor::ones({2}), ReduceOp::Sum, N()); });
    fails_everywhere("a reduce op outside the enum", Invalid,
                     [&] { (void)comm().reduce(Tensor::ones({2}), static_cast<ReduceOp>(-1), 0); });

    lockstep_comm_t world = c_world();
    CTensor in({4}), wrong_shape({2, 2});
    for (int root = 0; root < N(); ++root) {
        c_fails_everywhere("C: output of another shape, root " + std::to_string(root), WrongShape, [&] {
            return lockstep_reduce(world, in.handle, wrong_shape.handle, LOCKSTEP_SUM, root, nullptr);
        });
    }
    c_fails_everywhere("C: an unknown reduce op", Invalid, [&] {
        return lockstep_reduce(world, in.handle, in.handle, static_cast<lockstep_reduce_op_t>(-3), 0, nullptr);
    });
}

BOOST_AUTO_TEST_CASE(allgather) {
    const int n = N();
    const Tensor rows = Tensor::ones({2, 3});
    Tensor wrong_rows = Tensor::zeros({n * 2 + 1, 3});
    fails_everywhere("into, output of another shape", WrongShape, [&] { comm().allgather_into(rows, wrong_rows); });
    Tensor wrong_dtype = Tensor::zeros({n * 2, 3}, DType::Int32);
    fails_everywhere("into, output of another dtype", Dtype, [&] { comm().allgather_into(rows, wrong_dtype); });
    std::vector<float> values(static_cast<std::size_t>(n * 6), 0.0f);
    Tensor read_only = Tensor::from_blob(values.data(), {n * 2, 3}, DType::Float32, Device::cpu(), {}, true);
    fails_everywhere("into, read-only output", ReadOnly, [&] { comm().allgather_into(rows, read_only); });
    fails_everywhere("undefined", Invalid, [&] { (void)comm().allgather(Tensor{}); });

    lockstep_comm_t world = c_world();
    CTensor in({2, 3}), wrong({n * 2, 2});
    c_fails_everywhere("C: output of another shape", WrongShape,
                       [&] { return lockstep_allgather(world, in.handle, wrong.handle, nullptr); });
    c_fails_everywhere("C: output is the input", Invalid,
                       [&] { return lockstep_allgather(world, in.handle, in.handle, nullptr); });
}

BOOST_AUTO_TEST_CASE(gather) {
    const Tensor t = Tensor::ones({2});
    fails_everywhere("root out of range", Invalid, [&] { (void)comm().gather(t, N()); });
    fails_everywhere("undefined", Invalid, [&] { (void)comm().gather(Tensor{}, 0); });

    lockstep_comm_t world = c_world();
    CTensor in({2}), wrong({N() * 2 + 1});
    for (int root = 0; root < N(); ++root) {
        c_fails_everywhere("C: output of another shape, root " + std::to_string(root), WrongShape,
                           [&] { return lockstep_gather(world, in.handle, wrong.handle, root, nullptr); });
    }
}

BOOST_AUTO_TEST_CASE(scatter) {
    const Tensor indivisible = Tensor::ones({N() * 2 + 1});
    for (int root = 0; root < N(); ++root) {
        fails_everywhere("first dimension not a multiple, root " + std::to_string(root), WrongShape,
                         [&] { (void)comm().scatter(indivisible, root); });
    }
    fails_everywhere("root out of range", Invalid, [&] { (void)comm().scatter(Tensor::ones({N()}), -1); });

    // Every process passes the root's input, and the same output of the wrong shape.
    lockstep_comm_t world = c_world();
    CTensor in({N() * 2}), wrong({3});
    for (int root = 0; root < N(); ++root) {
        c_fails_everywhere("C: output of another shape, root " + std::to_string(root), WrongShape,
                           [&] { return lockstep_scatter(world, in.handle, wrong.handle, root, nullptr); });
    }
}

BOOST_AUTO_TEST_CASE(reduce_scatter) {
    const int n = N();
    fails_everywhere("first dimension not a multiple", WrongShape,
                     [&] { (void)comm().reduce_scatter(Tensor::ones({n * 2 + 1})); });
    fails_everywhere("mean of int32", Dtype,
                     [&] { (void)comm().reduce_scatter(Tensor::ones({n * 2}, DType::Int32), ReduceOp::Mean); });
    const Tensor whole = Tensor::ones({n * 2, 3});
    Tensor wrong_shape = Tensor::zeros({3, 3});
    fails_everywhere("into, output of another shape", WrongShape,
                     [&] { comm().reduce_scatter_into(whole, wrong_shape); });
    Tensor wrong_dtype = Tensor::zeros({2, 3}, DType::Float64);
    fails_everywhere("into, output of another dtype", Dtype, [&] { comm().reduce_scatter_into(whole, wrong_dtype); });
    Tensor half_out = Tensor::zeros({2, 3}, DType::Float16);
    fails_everywhere("into, float16", Dtype,
                     [&] { comm().reduce_scatter_into(ops::cast(whole, DType::Float16), half_out); });

    lockstep_comm_t world = c_world();
    CTensor in({n * 2}), wrong({n * 2});
    c_fails_everywhere("C: output of another shape", WrongShape,
                       [&] { return lockstep_reduce_scatter(world, in.handle, wrong.handle, LOCKSTEP_SUM, nullptr); });
}

BOOST_AUTO_TEST_CASE(alltoall) {
    fails_everywhere("first dimension not a multiple", WrongShape,
                     [&] { (void)comm().alltoall(Tensor::ones({N() * 2 + 1})); });
    fails_everywhere("0-d", WrongShape, [&] { (void)comm().alltoall(Tensor::ones({})); });

    lockstep_comm_t world = c_world();
    CTensor in({N() * 2}), wrong({N() * 2 + 1});
    c_fails_everywhere("C: output of another shape", WrongShape,
                       [&] { return lockstep_alltoall(world, in.handle, wrong.handle, nullptr); });
}

BOOST_AUTO_TEST_CASE(gather_uneven_and_padding) {
    fails_everywhere("gather_uneven of a 0-d tensor", WrongShape,
                     [&] { (void)comm().gather_uneven(Tensor::ones({})); });
    fails_everywhere("pad_across_processes, dimension out of range", Invalid, [&] {
        (void)comm().pad_across_processes(Tensor::ones({2, 2}), 2);
    });

    lockstep_comm_t world = c_world();
    c_fails_everywhere("C: gather_uneven without a result pointer", Invalid, [&] {
        CTensor in({2});
        return lockstep_gather_uneven(world, in.handle, nullptr, nullptr);
    });
}

// After all that the processes are in step: a collective of every kind still gives the closed-form result.
BOOST_AUTO_TEST_CASE(the_processes_are_still_in_step) {
    const int n = N();
    BOOST_TEST(comm().allreduce(Tensor::ones({2})).to_vector<float>()[0] == static_cast<float>(n));
    BOOST_TEST(comm().broadcast(Tensor::full({2}, R() + 5.0), n - 1).to_vector<float>()[0] ==
               static_cast<float>(n + 4));
    BOOST_TEST(comm().gather_uneven(Tensor::ones({R() + 1})).size(0) == n * (n + 1) / 2);
}

BOOST_AUTO_TEST_SUITE_END()
