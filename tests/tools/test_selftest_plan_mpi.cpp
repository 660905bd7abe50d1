// Run under mpirun (2 and 3 ranks): where `lockstep test` runs its checks. Without a CUDA device on every rank the
// plan is the host only, with one line saying why (naming the ranks when only some lack one); the table names each
// row's device and carries that line. (On a GPU machine bench/gpu_check.sh runs the self-test on CUDA tensors.)
#define BOOST_TEST_MODULE selftest_plan
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "../../tools/selftest/selftest.hpp"
#include "runtime_fixture.hpp"

#include <string>
#include <vector>

using namespace lockstep;
using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(no_device_anywhere_runs_the_host_rows_and_says_so_once) {
    const selftest::DevicePlan plan = selftest::plan_devices(comm(), Device::cpu());
    BOOST_TEST(plan.devices == std::vector<Device>{Device::cpu()});
    BOOST_TEST(plan.note == "cuda: skipped (no CUDA device)");
}

BOOST_AUTO_TEST_CASE(a_device_on_some_ranks_only_names_the_ranks_without) {
    // Rank 0 claims a device, the others have none: no rank may run CUDA rows, or the collectives would not match.
    const selftest::DevicePlan plan = selftest::plan_devices(comm(), R() == 0 ? Device::cuda(0) : Device::cpu());
    BOOST_TEST(plan.devices == std::vector<Device>{Device::cpu()});
    const std::string expected = N() == 2 ? "cuda: skipped (no CUDA device on rank 1)"
                                          : "cuda: skipped (no CUDA device on ranks 1-" + std::to_string(N() - 1) + ")";
    BOOST_TEST(plan.note == expected);
}

BOOST_AUTO_TEST_CASE(the_table_names_each_rows_device_under_the_note) {
    const selftest::DevicePlan plan = selftest::plan_devices(comm(), Device::cpu());
    const auto results = selftest::run_selftest(comm(), plan.devices);
    BOOST_TEST(!results.empty());
    for (const auto& r : results) {
        BOOST_TEST(r.device == "cpu", r.name << " " << r.dtype);
        BOOST_TEST((r.passed() || r.skipped), r.name << " " << r.dtype);
    }
    const std::string table = selftest::render_table(results, N(), false, plan.note);
    BOOST_TEST(table.find("cuda: skipped (no CUDA device)\n") != std::string::npos);
    BOOST_TEST(table.find("  device  result\n") != std::string::npos);
    BOOST_TEST(table.find("allgather                            float32   cpu     pass\n") != std::string::npos, table);
}
