// Run under mpirun with 1 to 4 ranks: triggers and the agreed batch-size search.
#define BOOST_TEST_MODULE agreements_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "runtime_fixture.hpp"

#include "test_logging_capture.hpp"

#include <stdexcept>

using namespace lockstep;

namespace {
using lockstep_test::comm;
using lockstep_test::N;
using lockstep_test::R;
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

// Throws OutOfMemoryError when size exceeds this rank's synthetic budget.
void synthetic_memory(std::int64_t size, std::int64_t budget) {
    if (size > budget) {
        AllocatorStats stats;
        stats.limit_bytes = static_cast<std::size_t>(budget);
        throw OutOfMemoryError(Device::cpu(), static_cast<std::size_t>(size), stats);
    }
}
}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(trigger_on_one_rank_stops_every_rank_in_the_same_iteration) {
    for (int setter = 0; setter < N(); ++setter) {
        BOOST_TEST_CONTEXT("rank " << setter << " sets the trigger") {
            int stopped_at = -1;
            for (int iteration = 0; iteration < 10; ++iteration) {
                if (R() == setter && iteration == 3 + setter) set_trigger();
                if (check_trigger()) {
                    stopped_at = iteration;
                    break;
                }
            }
            BOOST_TEST(stopped_at == 3 + setter);
            // Every rank stopped at the same iteration.
            Tensor all = comm().allgather(Tensor::full({}, stopped_at, DType::Int32));
            for (auto v : all.to_vector<std::int32_t>()) BOOST_TEST(v == 3 + setter);
        }
    }
    // The check clears it: the next check is false everywhere.
    BOOST_TEST(!check_trigger());
    // Setting it twice before a check is one stop.
    set_trigger();
    set_trigger();
    BOOST_TEST(check_trigger());
    BOOST_TEST(!check_trigger());
}

BOOST_AUTO_TEST_CASE(triggers_belong_to_their_communicator) {
    Communicator other = comm().dup();
    set_trigger(other);
    BOOST_TEST(!check_trigger(comm()));
    BOOST_TEST(check_trigger(other));
}

BOOST_AUTO_TEST_CASE(halving_search_agrees_on_the_smallest_rank_budget) {
    // Rank r fits sizes up to 40 - 5 r; from 128 the halving tries 128, 64, 32, 16: the last rank decides.
    const std::int64_t budget = 40 - 5 * R();
    std::int64_t min_budget = 40 - 5 * (N() - 1);
    lockstep_test::CapturedBlocks captured;
    const auto result = find_executable_batch_size(128, [&](std::int64_t s) { synthetic_memory(s, budget); });
    std::int64_t expected = 128;
    int retries = 0;
    while (expected > min_budget) {
        expected /= 2;
        ++retries;
    }
    BOOST_TEST(result.batch_size == expected);
    BOOST_TEST(result.out_of_memory_retries == retries);
    BOOST_TEST(result.attempts == retries + 1);
    // Each retry is logged (on the main process, where the records are emitted).
    if (R() == 0) {
        int logged = 0;
        for (const auto& r : captured.records()) {
            if (contains(r.message, "every rank retries with")) ++logged;
        }
        BOOST_TEST(logged == retries);
    }
}

BOOST_AUTO_TEST_CASE(refine_upward_finds_the_exact_largest_size) {
    const std::int64_t budget = 37 + 3 * R();  // rank 0 has the least: 37
    BatchSizeOptions options;
    options.refine_upward = true;
    const auto result = find_executable_batch_size(
        100, [&](std::int64_t s) { synthetic_memory(s, budget); }, options);
    BOOST_TEST(result.batch_size == 37);
    // Other factors and a minimum.
    options.refine_upward = false;
    options.factor = 0.75;
    const auto r2 = find_executable_batch_size(
        100, [&](std::int64_t s) { synthetic_memory(s, budget); }, options);
    BOOST_TEST(r2.batch_size == 31);  // 100, 75, 56, 42, 31
}

BOOST_AUTO_TEST_CASE(a_starting_size_below_one_is_refused) {
    int calls = 0;
    for (std::int64_t start : {std::int64_t{0}, std::int64_t{-4}}) {
        BOOST_CHECK_THROW((void)find_executable_batch_size(start, [&](std::int64_t) { ++calls; }),
                          InvalidArgumentError);
    }
    BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(exhaustion_is_the_familiar_error) {
    try {
        (void)find_executable_batch_size(8, [&](std::int64_t s) { synthetic_memory(s, R() == N() - 1 ? 0 : 100); });
        BOOST_FAIL("no error");
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()) == "No executable batch size found, reached zero.");
    }
    BatchSizeOptions options;
    options.minimum = 3;
    try {
        (void)find_executable_batch_size(
            8, [&](std::int64_t s) { synthetic_memory(s, 2); }, options);
        BOOST_FAIL("no error");
    } catch (const Error& e) {
        BOOST_TEST(contains(e.what(), "below the minimum of 3"));
    }
    BOOST_CHECK_THROW((void)find_executable_batch_size(8, [](std::int64_t) {}, {.factor = 1.0}), InvalidArgumentError);
}

BOOST_AUTO_TEST_CASE(other_errors_propagate_and_stop_every_rank) {
    const int thrower = N() - 1;
    try {
        (void)find_executable_batch_size(16, [&](std::int64_t) {
            if (R() == thrower) throw std::runtime_error("disk full");
        });
        BOOST_FAIL("no error");
    } catch (const DistributedOperationError& e) {
        BOOST_TEST(R() != thrower);
        BOOST_TEST(contains(e.what(), "rank " + std::to_string(thrower)));
    } catch (const std::runtime_error& e) {
        BOOST_TEST(R() == thrower);
        BOOST_TEST(std::string(e.what()) == "disk full");
    }
    comm().barrier();  // every rank left the search: nobody waits
}

BOOST_AUTO_TEST_CASE(batch_arithmetic) {
    BOOST_TEST(global_batch_size(32, 4) == 128);
    BOOST_TEST(per_process_batch_size(128, 4) == 32);
    BOOST_CHECK_THROW((void)per_process_batch_size(100, 3), InvalidArgumentError);
    BOOST_CHECK_THROW((void)global_batch_size(0, 3), InvalidArgumentError);
    lockstep_test::CapturedBlocks captured;
    BOOST_TEST(check_global_batch_size(32, 2, 128, 0.1) == 64);
    if (R() == 0) {
        bool warned = false;
        for (const auto& r : captured.records()) {
            warned = warned ||
                     (contains(r.message, "not the 128 this run was tuned for") &&
                      contains(r.message, "learning rate linearly to 0.05") && contains(r.message, "64 per process"));
        }
        BOOST_TEST(warned);
    }
}

BOOST_AUTO_TEST_CASE(seeding_gives_identical_tensors) {
    set_seed(42);
    Tensor a = Tensor::normal({64});
    set_seed(42);
    Tensor b = Tensor::normal({64});
    BOOST_TEST(a.to_vector<float>() == b.to_vector<float>());
    // Without device_specific every rank draws the same; with it, ranks differ and stay reproducible.
    Tensor all = comm().allgather(a);
    const auto v = all.to_vector<float>();
    for (int r = 1; r < N(); ++r) BOOST_TEST(std::equal(v.begin(), v.begin() + 64, v.begin() + 64 * r));
    set_seed(42, true);
    Tensor c = Tensor::normal({64});
    set_seed(42, true);
    BOOST_TEST(Tensor::normal({64}).to_vector<float>() == c.to_vector<float>());
    const auto w = comm().allgather(c).to_vector<float>();
    for (int r = 1; r < N(); ++r) BOOST_TEST(!std::equal(w.begin(), w.begin() + 64, w.begin() + 64 * r));
}
