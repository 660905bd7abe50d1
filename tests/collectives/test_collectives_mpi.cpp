// Run under mpirun with 2, 3 and 4 ranks: every collective against closed-form values, for each dtype family.
#define BOOST_TEST_MODULE collectives_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include <mpi.h>

#include <chrono>
#include <thread>

#include "runtime_fixture.hpp"

#include <cmath>

using namespace lockstep;

namespace {

const DType tested_dtypes[] = {DType::Float32, DType::Float64,  DType::Int32, DType::Int64,
                               DType::Float16, DType::BFloat16, DType::Int8};

// Every element as double, whatever the dtype.
std::vector<double> values(const Tensor& t) {
    Tensor f = ops::cast(t.to(Device::cpu()), DType::Float64);
    return f.to_vector<double>();
}
bool all_equal_to(const Tensor& t, double v) {
    for (double x : values(t)) {
        if (x != v) return false;
    }
    return true;
}
using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;
}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(allreduce_every_op_and_dtype) {
    const double n = N();
    const double factorial = std::tgamma(n + 1);
    for (DType dtype : tested_dtypes) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            Tensor t = Tensor::full({3, 2}, R() + 1, dtype);
            BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Sum), n * (n + 1) / 2));
            BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Prod), factorial));
            BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Max), n));
            BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Min), 1.0));
            if (is_floating(dtype)) BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Mean), (n + 1) / 2));
            Tensor in_place = t.clone();
            BOOST_TEST(&comm().allreduce_(in_place, ReduceOp::Sum) == &in_place);
            BOOST_TEST(all_equal_to(in_place, n * (n + 1) / 2));
            BOOST_TEST(all_equal_to(t, R() + 1));  // the out-of-place form left its input alone
            BOOST_TEST((comm().allreduce(t).dtype() == dtype));
        }
    }
}

BOOST_AUTO_TEST_CASE(half_precision_accumulates_in_float32) {
    // 0.1 in float16 summed over n ranks, rounded once, is what float32 accumulation gives.
    for (DType dtype : {DType::Float16, DType::BFloat16}) {
        Tensor t = Tensor::full({5}, 0.1, dtype);
        const float one = static_cast<float>(ops::cast(t, DType::Float32).to_vector<float>()[0]);
        Tensor expected =
            ops::cast(Tensor::full({5}, static_cast<double>(one * static_cast<float>(N())), DType::Float32), dtype);
        BOOST_TEST(values(comm().allreduce(t)) == values(expected));
    }
}

BOOST_AUTO_TEST_CASE(mean_of_integers_is_a_clear_error_and_the_communicator_goes_on) {
    Tensor t = Tensor::ones({2}, DType::Int32);
    try {
        (void)comm().allreduce(t, ReduceOp::Mean);
        BOOST_FAIL("no DTypeError");
    } catch (const DTypeError& e) {
        BOOST_TEST(std::string(e.what()).find("int32") != std::string::npos);
    }
    BOOST_TEST(all_equal_to(comm().allreduce(t), N()));
}

BOOST_AUTO_TEST_CASE(bool_reductions_are_any_and_all) {
    Tensor t = Tensor::full({2}, R() == 0 ? 1.0 : 0.0, DType::Bool);
    BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Max), 1.0));
    BOOST_TEST(all_equal_to(comm().allreduce(t, ReduceOp::Min), 0.0));
}

BOOST_AUTO_TEST_CASE(broadcast_and_reduce) {
    const int root = N() - 1;
    for (DType dtype : tested_dtypes) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            Tensor t = Tensor::full({4}, R(), dtype);
            BOOST_TEST(all_equal_to(comm().broadcast(t, root), root));
            Tensor in_place = t.clone();
            comm().broadcast_(in_place, root);
            BOOST_TEST(all_equal_to(in_place, root));
            Tensor r = comm().reduce(Tensor::full({2, 2}, R() + 1, dtype), ReduceOp::Sum, 0);
            if (R() == 0) {
                BOOST_TEST(all_equal_to(r, N() * (N() + 1) / 2.0));
            } else {
                BOOST_TEST(!r.defined());
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(gather_and_allgather_concatenate_in_rank_order) {
    for (DType dtype : tested_dtypes) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            Tensor t = Tensor::from_data<double>({10.0 * R(), 10.0 * R() + 1}, {2});
            t = ops::cast(t, dtype);
            std::vector<double> expected;
            for (int r = 0; r < N(); ++r) {
                expected.push_back(10.0 * r);
                expected.push_back(10.0 * r + 1);
            }
            Tensor all = comm().allgather(t);
            BOOST_TEST(all.shape() == (Shape{2 * N()}));
            BOOST_TEST(values(all) == expected);
            Tensor g = comm().gather(t, 1 % N());
            if (R() == 1 % N()) {
                BOOST_TEST(values(g) == expected);
            } else {
                BOOST_TEST(!g.defined());
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(scatter_reduce_scatter_and_alltoall) {
    for (DType dtype : tested_dtypes) {
        BOOST_TEST_CONTEXT(dtype_name(dtype)) {
            Tensor whole = Tensor::arange(0, 2 * N(), 1, dtype).reshape({2 * N()});
            Tensor mine = comm().scatter(R() == 0 ? whole : Tensor::zeros({2 * N()}, dtype), 0);
            BOOST_TEST(values(mine) == (std::vector<double>{2.0 * R(), 2.0 * R() + 1}));

            Tensor rs = comm().reduce_scatter(whole, ReduceOp::Sum);
            BOOST_TEST(values(rs) == (std::vector<double>{2.0 * R() * N(), (2.0 * R() + 1) * N()}));

            // Block j of rank r holds 16 r + 4 j + k; rank r receives block r of every rank s.
            std::vector<double> send;
            for (int j = 0; j < N(); ++j) {
                for (int k = 0; k < 2; ++k) send.push_back(16.0 * R() + 4.0 * j + k);
            }
            Tensor a2a = comm().alltoall(ops::cast(Tensor::from_data(send, {2 * N()}), dtype));
            std::vector<double> expected;
            for (int s = 0; s < N(); ++s) {
                for (int k = 0; k < 2; ++k) expected.push_back(16.0 * s + 4.0 * R() + k);
            }
            BOOST_TEST(values(a2a) == expected);
        }
    }
    // A first dimension that does not split evenly is the same ShapeError on every rank.
    BOOST_CHECK_THROW((void)comm().scatter(Tensor::zeros({2 * N() + 1}), 0), ShapeError);
    BOOST_CHECK_THROW((void)comm().alltoall(Tensor::zeros({}, DType::Float32)), ShapeError);
}

BOOST_AUTO_TEST_CASE(into_forms_write_the_callers_tensor) {
    Tensor t = Tensor::full({2}, R(), DType::Int32);
    Tensor out = Tensor::zeros({2 * N()}, DType::Int32);
    BOOST_TEST(&comm().allgather_into(t, out) == &out);
    std::vector<double> expected;
    for (int r = 0; r < N(); ++r) expected.insert(expected.end(), {double(r), double(r)});
    BOOST_TEST(values(out) == expected);
    Tensor whole = Tensor::arange(0, 2 * N(), 1, DType::Float64);
    Tensor mine = Tensor::zeros({2}, DType::Float64);
    comm().reduce_scatter_into(whole, mine, ReduceOp::Mean);
    BOOST_TEST(values(mine) == (std::vector<double>{2.0 * R(), 2.0 * R() + 1}));
    Tensor wrong = Tensor::zeros({3}, DType::Int32);
    BOOST_CHECK_THROW(comm().allgather_into(t, wrong), ShapeError);
    Tensor half = Tensor::zeros({2 * N()}, DType::Float16), half_out = Tensor::zeros({2}, DType::Float16);
    BOOST_CHECK_THROW(comm().reduce_scatter_into(half, half_out), DTypeError);
    // Multi-dimensional: the first dimension scales, the others must match exactly.
    Tensor rows = Tensor::full({2, 3}, R(), DType::Float32);
    Tensor stacked = Tensor::zeros({2 * N(), 3});
    comm().allgather_into(rows, stacked);
    BOOST_TEST(stacked.at<float>({2 * N() - 1, 2}) == float(N() - 1));
    Tensor bad_trailing = Tensor::zeros({2 * N(), 4});
    BOOST_CHECK_THROW(comm().allgather_into(rows, bad_trailing), ShapeError);
    Tensor bad_rank = Tensor::zeros({2 * N() * 3});
    BOOST_CHECK_THROW(comm().allgather_into(rows, bad_rank), ShapeError);
    Tensor bad_dtype = Tensor::zeros({2 * N(), 3}, DType::Float64);
    BOOST_CHECK_THROW(comm().allgather_into(rows, bad_dtype),
                      DTypeError);  // an output of another dtype is a dtype error
    // A 0-d input gathers into a vector of one element per process.
    Tensor scalar = Tensor::full({}, R(), DType::Int64);
    Tensor per_rank = Tensor::zeros({N()}, DType::Int64);
    comm().allgather_into(scalar, per_rank);
    BOOST_TEST(per_rank.at<std::int64_t>({N() - 1}) == N() - 1);
    Tensor wrong_scalar_out = Tensor::zeros({N(), 1}, DType::Int64);
    BOOST_CHECK_THROW(comm().allgather_into(scalar, wrong_scalar_out), ShapeError);
    Tensor grid = Tensor::ones({2 * N(), 3});
    Tensor part = Tensor::zeros({2, 3});
    comm().reduce_scatter_into(grid, part);
    BOOST_TEST(part.at<float>({1, 2}) == float(N()));
    Tensor bad_part = Tensor::zeros({2, 2});
    BOOST_CHECK_THROW(comm().reduce_scatter_into(grid, bad_part), ShapeError);
    Tensor bad_rows = Tensor::zeros({2 * N(), 3});
    BOOST_CHECK_THROW(comm().reduce_scatter_into(grid, bad_rows), ShapeError);
}

BOOST_AUTO_TEST_CASE(zero_dimensional_tensors) {
    Tensor s = Tensor::full({}, R() + 1.0, DType::Float64);
    Tensor sum = comm().allreduce(s);
    BOOST_TEST(sum.dim() == 0);
    BOOST_TEST(sum.item<double>() == N() * (N() + 1) / 2.0);
    Tensor all = comm().allgather(s);
    BOOST_TEST(all.shape() == (Shape{N()}));
    BOOST_TEST(comm().broadcast(s, 0).item<double>() == 1.0);
}

BOOST_AUTO_TEST_CASE(send_and_recv_around_a_ring) {
    if (N() < 2) return;
    const int next = (R() + 1) % N(), prev = (R() + N() - 1) % N();
    Tensor out = Tensor::full({3}, R(), DType::Int64);
    Tensor in = Tensor::zeros({3}, DType::Int64);
    if (R() % 2 == 0) {
        comm().send(out, next, 7);
        comm().recv(in, prev, 7);
    } else {
        comm().recv(in, prev, 7);
        comm().send(out, next, 7);
    }
    BOOST_TEST(all_equal_to(in, prev));
    // A message shorter than the receive tensor is a ShapeError naming both sizes.
    if (R() == 0) {
        comm().send(Tensor::zeros({2}, DType::Int64), 1, 8);
    } else if (R() == 1) {
        Tensor big = Tensor::zeros({5}, DType::Int64);
        BOOST_CHECK_THROW(comm().recv(big, 0, 8), ShapeError);
    }
    BOOST_CHECK_THROW(comm().send(out, N(), 0), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(gather_of_uneven_first_dimensions) {
    // Rank r holds r + 1 rows of 3, every element r.
    Tensor t = Tensor::full({R() + 1, 3}, R(), DType::Float32);
    Tensor all = comm().gather_uneven(t);
    BOOST_TEST(all.shape() == (Shape{N() * (N() + 1) / 2, 3}));
    std::vector<double> expected;
    for (int r = 0; r < N(); ++r) {
        for (int i = 0; i < (r + 1) * 3; ++i) expected.push_back(r);
    }
    BOOST_TEST(values(all) == expected);
    // Ranks with no rows at all take part too.
    Tensor maybe_empty = R() == 0 ? Tensor::zeros({0, 2}) : Tensor::ones({1, 2});
    BOOST_TEST(comm().gather_uneven(maybe_empty).size(0) == N() - 1);
}

BOOST_AUTO_TEST_CASE(gather_for_metrics_drops_the_repeated_tail) {
    Tensor t = Tensor::full({2, 1}, R(), DType::Int64);
    const std::int64_t valid = 2 * N() - 1;  // the sampler repeated one sample to fill the last batch
    Tensor g = comm().gather_for_metrics(t, valid);
    BOOST_TEST(g.size(0) == valid);
    BOOST_TEST(values(g).back() == N() - 1.0);
    BOOST_TEST(comm().gather_for_metrics(t, 1000).size(0) == 2 * N());
    BOOST_CHECK_THROW((void)comm().gather_for_metrics(t, -1), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(pad_across_processes_pads_to_the_largest) {
    // Rank r holds [2, r + 1] of ones; dimension 1 is padded to N with -1.
    Tensor t = Tensor::ones({2, R() + 1}, DType::Float32);
    for (bool pad_first : {false, true}) {
        BOOST_TEST_CONTEXT("pad_first=" << pad_first) {
            Tensor p = comm().pad_across_processes(t, 1, -1.0, pad_first);
            BOOST_TEST(p.shape() == (Shape{2, N()}));
            std::vector<double> row;
            for (int i = 0; i < N(); ++i) {
                const bool data = pad_first ? i >= N() - (R() + 1) : i < R() + 1;
                row.push_back(data ? 1.0 : -1.0);
            }
            std::vector<double> expected = row;
            expected.insert(expected.end(), row.begin(), row.end());
            BOOST_TEST(values(p) == expected);
        }
    }
    Tensor rows = Tensor::full({R() + 1}, 5, DType::Int32);
    BOOST_TEST(comm().pad_across_processes(rows, 0).shape() == (Shape{N()}));
}

BOOST_AUTO_TEST_CASE(split_and_dup_make_independent_groups) {
    Communicator half = comm().split(R() % 2, R());
    int expected = 0, members = 0;
    for (int r = R() % 2; r < N(); r += 2) {
        expected += r;
        ++members;
    }
    BOOST_TEST(half.size() == members);
    BOOST_TEST(half.rank() == R() / 2);
    BOOST_TEST(all_equal_to(half.allreduce(Tensor::full({}, R(), DType::Int32)), expected));
    Communicator copy = comm().dup();
    BOOST_TEST(copy.size() == N());
    BOOST_TEST(copy.stats().collectives == 0u);  // its own call count
    copy.barrier();
    BOOST_TEST(copy.stats().collectives == 1u);
    BOOST_CHECK_THROW((void)comm().split(-1, 0), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(invalid_root_is_an_error_on_every_rank) {
    BOOST_CHECK_THROW((void)comm().broadcast(Tensor::zeros({1}), N()), InvalidArgumentError);
    BOOST_CHECK_THROW((void)comm().reduce(Tensor::zeros({1}), ReduceOp::Sum, -2), InvalidArgumentError);
    comm().barrier();  // and nobody was left behind
}

BOOST_AUTO_TEST_CASE(statistics_count_calls_and_time) {
    const auto before = comm().stats();
    comm().barrier();
    (void)comm().allreduce(Tensor::ones({4}));
    const auto after = comm().stats();
    BOOST_TEST(after.collectives == before.collectives + 2);
    // Debug off: exactly the payload calls, through MPI or the node's arena (its small-message path).
    BOOST_TEST(after.mpi_calls + after.small_calls == before.mpi_calls + before.small_calls + 2);
    BOOST_TEST(after.signature_checks == before.signature_checks);
    BOOST_TEST(after.wait_seconds >= before.wait_seconds);
}

BOOST_AUTO_TEST_CASE(wait_statistics_measure_the_time_spent_waiting_for_a_late_rank) {
    // Rank 0 arrives 300 ms late at a barrier: every other rank's wait grows by about that much, rank 0's barely.
    comm().barrier();
    const double before = comm().stats().wait_seconds;
    if (R() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    comm().barrier();
    double waited = comm().stats().wait_seconds - before;
    // No upper bound tied to the machine's load: rank 0 waited less than every other rank, each of which waited at
    // least most of the 300 ms, and a wrong tick rate (off by a factor of 1000 or more) would break the generous cap.
    std::vector<double> all(static_cast<std::size_t>(N()));
    BOOST_REQUIRE(MPI_Allgather(&waited, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int r = 1; r < N(); ++r) {
        const double w = all[static_cast<std::size_t>(r)];
        BOOST_TEST(w > 0.25, "rank " << r << " waited " << w << " s");
        BOOST_TEST(w < 30.0, "rank " << r << " waited " << w << " s");
        BOOST_TEST(all[0] < w, "rank 0 waited " << all[0] << " s, rank " << r << " " << w << " s");
    }
}
