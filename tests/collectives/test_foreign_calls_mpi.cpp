// Run under mpirun with 2 and 3 ranks: calls another library carries (Communicator::begin_foreign/end_foreign). In
// debug mode one signature exchange per call, agreeing calls go through, and a call that differs on one rank throws
// the same SignatureMismatchError on every rank with each rank's signature (shape, dtype, root, reduce op, collective,
// call site); debug mode off compares nothing. Calls numbered as lockstep's own, outstanding several at a time and
// ended in any order; a communicator's foreign and own calls share one numbering.
#define BOOST_TEST_MODULE foreign_calls_mpi
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

#include "runtime_fixture.hpp"

#include <array>
#include <string>

using namespace lockstep;

namespace {
using lockstep_test::N;
using lockstep_test::R;

// A communicator of its own per test, in debug mode unless told otherwise, its calls carried by "a test".
Communicator carrier_comm(bool debug = true) {
    Communicator c = Communicator::world().dup({.debug = debug});
    c.set_carrier("a test");
    return c;
}

CallSite at(unsigned line) {
    CallSite site;
    site.file_name = "carried.py";
    site.line_number = line;
    return site;
}

bool last() {
    return R() == N() - 1;
}

// Begins and ends one call; returns the mismatch's error, or nothing when the call went through.
std::optional<SignatureMismatchError> mismatch_of(Communicator& c, const ForeignCall& call, unsigned line) {
    try {
        c.end_foreign(c.begin_foreign(call, at(line)));
    } catch (const SignatureMismatchError& e) {
        return e;
    }
    return std::nullopt;
}
}  // namespace

using lockstep_test::RuntimeFixture;
BOOST_TEST_GLOBAL_FIXTURE(RuntimeFixture);

BOOST_AUTO_TEST_CASE(agreeing_calls_are_checked_once_each) {
    Communicator c = carrier_comm();
    const std::array<std::int64_t, 2> shape = {2, 3};
    const std::uint64_t checks = c.stats().signature_checks;
    const std::uint64_t first =
        c.begin_foreign({.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = shape, .reduce_op = ReduceOp::Sum});
    c.end_foreign(first);
    c.end_foreign(c.begin_foreign({.op = OpKind::Broadcast, .dtype = DType::Int64, .shape = shape, .root = N() - 1}));
    c.end_foreign(c.begin_foreign({.op = OpKind::Barrier}));
    BOOST_TEST(c.stats().signature_checks - checks == 3u);
    BOOST_TEST(c.stats().collectives == first + 2);
}

BOOST_AUTO_TEST_CASE(a_call_that_differs_on_one_rank_throws_on_every_rank) {
    Communicator c = carrier_comm();
    const std::array<std::int64_t, 1> four = {4};
    const std::array<std::int64_t, 1> five = {5};
    const auto shape = last() ? std::span<const std::int64_t>(five) : std::span<const std::int64_t>(four);
    auto e = mismatch_of(c, {.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = shape}, last() ? 21 : 20);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(std::string(e->what()).find("shape") != std::string::npos);
    BOOST_TEST(std::string(e->what()).find("carried.py:21") != std::string::npos);
    BOOST_TEST(e->signatures().size() == static_cast<std::size_t>(N()));
    BOOST_TEST(e->signatures().back().shape == Shape{5});
    BOOST_TEST(e->signatures().front().shape == Shape{4});

    e = mismatch_of(c, {.op = OpKind::Allreduce, .dtype = last() ? DType::Int32 : DType::Float32, .shape = four}, 22);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(std::string(e->what()).find("dtype") != std::string::npos);
    e = mismatch_of(c, {.op = OpKind::Reduce, .dtype = DType::Float32, .shape = four, .root = last() ? 1 : 0}, 23);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(std::string(e->what()).find("root") != std::string::npos);
    e = mismatch_of(c,
                    {.op = OpKind::Allreduce,
                     .dtype = DType::Float32,
                     .shape = four,
                     .reduce_op = last() ? ReduceOp::Max : ReduceOp::Sum},
                    24);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(std::string(e->what()).find("reduce op") != std::string::npos);
    e = mismatch_of(c, {.op = last() ? OpKind::Allgather : OpKind::Allreduce, .dtype = DType::Float32, .shape = four},
                    25);
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(std::string(e->what()).find("mismatched operations") != std::string::npos);
    // Nothing is left on the board or half-done: the next call agrees.
    BOOST_TEST(!mismatch_of(c, {.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = four}, 26).has_value());
}

BOOST_AUTO_TEST_CASE(an_uneven_dimension_may_differ) {
    Communicator c = carrier_comm();
    const std::array<std::int64_t, 2> mine = {R() + 1, 3};
    BOOST_TEST(!mismatch_of(c, {.op = OpKind::Alltoallv, .dtype = DType::Float32, .shape = mine, .varying_dim = 0}, 30)
                    .has_value());
    const std::array<std::int64_t, 2> other = {1, last() ? 4 : 3};
    BOOST_TEST(mismatch_of(c, {.op = OpKind::Alltoallv, .dtype = DType::Float32, .shape = other, .varying_dim = 0}, 31)
                   .has_value());
}

BOOST_AUTO_TEST_CASE(debug_off_compares_nothing) {
    Communicator c = carrier_comm(false);
    const std::array<std::int64_t, 1> mine = {R() + 1};
    const std::uint64_t checks = c.stats().signature_checks;
    BOOST_TEST(!mismatch_of(c, {.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = mine}, 40).has_value());
    BOOST_TEST(c.stats().signature_checks == checks);
}

BOOST_AUTO_TEST_CASE(outstanding_calls_end_in_any_order) {
    Communicator c = carrier_comm();
    const std::array<std::int64_t, 1> four = {4};
    std::array<std::uint64_t, 3> numbers{};
    for (auto& n : numbers) n = c.begin_foreign({.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = four});
    BOOST_TEST(numbers[1] == numbers[0] + 1);
    BOOST_TEST(numbers[2] == numbers[1] + 1);
    c.end_foreign(numbers[1]);
    c.end_foreign(numbers[2]);
    c.end_foreign(numbers[0]);
    c.end_foreign(numbers[0]);  // again: nothing
    // lockstep's own collectives on the same communicator continue the numbering.
    const std::uint64_t before = c.stats().collectives;
    c.barrier();
    BOOST_TEST(c.stats().collectives == before + 1);
    const std::uint64_t next = c.begin_foreign({.op = OpKind::Barrier});
    BOOST_TEST(next == numbers[2] + 2);
    c.end_foreign(next);
}

BOOST_AUTO_TEST_CASE(a_rooted_call_needs_a_root_and_a_send_is_no_collective) {
    Communicator c = carrier_comm();
    const std::array<std::int64_t, 1> four = {4};
    BOOST_CHECK_THROW((void)c.begin_foreign({.op = OpKind::Broadcast, .dtype = DType::Float32, .shape = four}),
                      InvalidArgumentError);
    BOOST_CHECK_THROW((void)c.begin_foreign({.op = OpKind::Send, .dtype = DType::Float32, .shape = four}),
                      InvalidArgumentError);
    BOOST_TEST(!mismatch_of(c, {.op = OpKind::Allreduce, .dtype = DType::Float32, .shape = four}, 50).has_value());
}
