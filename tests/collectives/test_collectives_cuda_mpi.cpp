// Run under mpirun (2 and 3 ranks): every collective on CUDA tensors against the same collective on host tensors with
// the same values. The results must be equal element for element and live on the CUDA device. meson runs it twice:
// with LOCKSTEP_CUDA_AWARE=0 (staging through pinned host buffers, in 4 KiB chunks so that the pipelined path takes
// several chunks and a tail) and as MPI reports itself (device pointers where MPI is CUDA-aware). Exits 77 (skipped)
// on every rank where no CUDA device exists, before MPI starts.
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "runtime_fixture.hpp"

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

using namespace lockstep;

namespace {

const DType tested_dtypes[] = {DType::Float32, DType::Float64, DType::Int32,
                               DType::Int64,   DType::Float16, DType::BFloat16};
const Device gpu = Device::cuda(0);

using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;

// Small integers (exact in every tested dtype, sums included) that differ by rank and position.
Tensor values_for_rank(const Shape& shape, DType dtype, int salt) {
    Tensor t = Tensor::empty(shape, DType::Float64);
    double* p = t.data<double>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<double>((i * 7 + R() * 3 + salt) % 11 - 3);
    return ops::cast(t, dtype);
}

std::vector<double> as_doubles(const Tensor& t) {
    return ops::cast(t.to(Device::cpu()), DType::Float64).to_vector<double>();
}

void expect_same(const Tensor& on_gpu, const Tensor& on_cpu, const std::string& what) {
    BOOST_TEST_CONTEXT(what) {
        BOOST_TEST(on_gpu.device().is_cuda());
        BOOST_TEST((on_gpu.shape() == on_cpu.shape()));
        BOOST_TEST((on_gpu.dtype() == on_cpu.dtype()));
        const auto a = as_doubles(on_gpu);
        const auto b = as_doubles(on_cpu);
        BOOST_TEST(a == b, boost::test_tools::per_element());
    }
}

// 10007 elements: with 4 KiB chunks, several full chunks and a tail for every dtype.
const Shape big{10007};

}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(elementwise_collectives_match_the_host) {
    for (DType dtype : tested_dtypes) {
        const std::string d(dtype_name(dtype));
        const Tensor host = values_for_rank(big, dtype, 1);
        const Tensor dev = host.to(gpu);
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
            expect_same(comm().allreduce(dev, op), comm().allreduce(host, op), "allreduce " + d);
        }
        if (is_floating(dtype)) {
            expect_same(comm().allreduce(dev, ReduceOp::Mean), comm().allreduce(host, ReduceOp::Mean), "mean " + d);
        }
        Tensor in_place = dev.clone();
        comm().allreduce_(in_place, ReduceOp::Sum);
        expect_same(in_place, comm().allreduce(host, ReduceOp::Sum), "allreduce_ " + d);

        const int root = N() - 1;
        expect_same(comm().broadcast(dev, root), comm().broadcast(host, root), "broadcast " + d);
        Tensor bcast = dev.clone();
        comm().broadcast_(bcast, 0);
        expect_same(bcast, comm().broadcast(host, 0), "broadcast_ " + d);

        const Tensor reduced_dev = comm().reduce(dev, ReduceOp::Sum, root);
        const Tensor reduced_host = comm().reduce(host, ReduceOp::Sum, root);
        if (R() == root) {
            expect_same(reduced_dev, reduced_host, "reduce " + d);
        } else {
            BOOST_TEST(!reduced_dev.defined());
        }
    }
}

BOOST_AUTO_TEST_CASE(gathers_scatters_and_alltoall_match_the_host) {
    for (DType dtype : tested_dtypes) {
        const std::string d(dtype_name(dtype));
        const Tensor rows = values_for_rank({static_cast<std::int64_t>(N()) * 3, 5}, dtype, 2);
        const Tensor rows_dev = rows.to(gpu);
        expect_same(comm().allgather(rows_dev), comm().allgather(rows), "allgather " + d);
        Tensor into = Tensor::empty({rows.size(0) * N(), 5}, dtype, gpu);
        comm().allgather_into(rows_dev, into);
        expect_same(into, comm().allgather(rows), "allgather_into " + d);
        const Tensor g_dev = comm().gather(rows_dev, 0);
        const Tensor g_host = comm().gather(rows, 0);
        if (R() == 0) expect_same(g_dev, g_host, "gather " + d);
        expect_same(comm().scatter(rows_dev, 0), comm().scatter(rows, 0), "scatter " + d);
        expect_same(comm().reduce_scatter(rows_dev), comm().reduce_scatter(rows), "reduce_scatter " + d);
        expect_same(comm().alltoall(rows_dev), comm().alltoall(rows), "alltoall " + d);

        // First dimension differs by rank: uneven gather, padding, and the gather that drops a repeated tail.
        const Tensor uneven = values_for_rank({R() + 1, 4}, dtype, 3);
        const Tensor uneven_dev = uneven.to(gpu);
        expect_same(comm().gather_uneven(uneven_dev), comm().gather_uneven(uneven), "gather_uneven " + d);
        expect_same(comm().pad_across_processes(uneven_dev, 0, -1.0), comm().pad_across_processes(uneven, 0, -1.0),
                    "pad_across_processes " + d);
        expect_same(comm().gather_for_metrics(uneven_dev, 2), comm().gather_for_metrics(uneven, 2),
                    "gather_for_metrics " + d);
    }
}

BOOST_AUTO_TEST_CASE(send_and_recv_between_device_and_host) {
    // Rank 0 sends a device tensor to rank 1, which receives into a device tensor, then a host tensor: the bytes
    // are the same either way.
    const Tensor sent = values_for_rank(big, DType::Float32, 4);
    if (R() == 0) {
        comm().send(sent.to(gpu), 1, 5);
        comm().send(sent.to(gpu), 1, 6);
    } else if (R() == 1) {
        Tensor into_dev = Tensor::zeros(big, DType::Float32, gpu);
        comm().recv(into_dev, 0, 5);
        Tensor into_host = Tensor::zeros(big, DType::Float32);
        comm().recv(into_host, 0, 6);
        BOOST_TEST(into_dev.device().is_cuda());
        BOOST_TEST(as_doubles(into_dev) == as_doubles(into_host), boost::test_tools::per_element());
        // What rank 0 sent: rank 0's values.
        Tensor expected = Tensor::empty(big, DType::Float64);
        for (std::int64_t i = 0; i < expected.numel(); ++i) {
            expected.data<double>()[i] = static_cast<double>((i * 7 + 4) % 11 - 3);
        }
        BOOST_TEST(as_doubles(into_host) == expected.to_vector<double>(), boost::test_tools::per_element());
    }
    comm().barrier();
}

bool init_collectives_cuda() {
    boost::unit_test::framework::master_test_suite().p_name.value = "collectives_cuda";
    return true;
}

int main(int argc, char* argv[]) {
    if (cuda_device_count() == 0) {
        std::cout << "skipped: no CUDA device\n";
        return 77;
    }
    return boost::unit_test::unit_test_main(&init_collectives_cuda, argc, argv);
}

BOOST_AUTO_TEST_CASE(non_blocking_forms_match_the_host) {
    // Issued right after the kernels that write the tensors (on the legacy stream), waited for in reverse order, and
    // read by work queued after the wait.
    for (DType dtype : tested_dtypes) {
        const std::string d(dtype_name(dtype));
        const Tensor host = values_for_rank(big, dtype, 3);
        Tensor dev = host.to(gpu);
        Tensor in_place = dev.clone();
        Work a = comm().iallreduce_(in_place, ReduceOp::Sum);
        Work b = comm().iallreduce(dev, ReduceOp::Max);
        Work c = comm().ibroadcast(dev, N() - 1);
        Work g = comm().iallgather(dev);
        g.wait();
        c.wait();
        b.wait();
        a.wait();
        expect_same(in_place, comm().allreduce(host, ReduceOp::Sum), "iallreduce_ " + d);
        expect_same(b.result(), comm().allreduce(host, ReduceOp::Max), "iallreduce " + d);
        expect_same(c.result(), comm().broadcast(host, N() - 1), "ibroadcast " + d);
        expect_same(g.result(), comm().allgather(host), "iallgather " + d);
        // A ring of device tensors: the receive posted before the send.
        Tensor in = Tensor::zeros(big, dtype, gpu);
        Work r = comm().irecv(in, (R() + N() - 1) % N(), 11);
        Work s = comm().isend(dev, (R() + 1) % N(), 11);
        r.wait();
        s.wait();
        Tensor in_host = Tensor::zeros(big, dtype);
        Work rh = comm().irecv(in_host, (R() + N() - 1) % N(), 12);
        comm().isend(host, (R() + 1) % N(), 12).wait();
        rh.wait();
        expect_same(in, in_host, "irecv " + d);
    }
}
