#define BOOST_TEST_MODULE watchdog_board
#include <boost/test/unit_test.hpp>

// The watchdog's progress board (collectives/watchdog/board.hpp): a sequence lock written by the calling thread without
// a lock and read by the watchdog thread. A reader must never see a record made of two calls' fields.

#include <collectives/watchdog/board.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

using lockstep::detail::Board;
using lockstep::detail::CallRecord;

namespace {
// A record whose every field is derived from its call number, so that a torn read shows as a mismatch.
CallRecord record_for(std::uint64_t call) {
    CallRecord r;
    r.sequence = call;
    r.line = static_cast<unsigned>(call);
    r.message_tag = static_cast<int>(call % 1000003);
    r.root = static_cast<int>(call % 7);
    r.ndim = 8;
    for (int d = 0; d < 8; ++d) r.dims[d] = static_cast<std::int64_t>(call) + d;
    return r;
}
bool consistent(const CallRecord& r) {
    bool ok = r.line == static_cast<unsigned>(r.sequence) && r.message_tag == static_cast<int>(r.sequence % 1000003) &&
              r.root == static_cast<int>(r.sequence % 7) && r.ndim == 8;
    for (int d = 0; d < 8; ++d) ok = ok && r.dims[d] == static_cast<std::int64_t>(r.sequence) + d;
    return ok;
}
}  // namespace

BOOST_AUTO_TEST_CASE(current_and_last_follow_begin_and_end) {
    Board board(42, 3.5);
    auto snap = board.read();
    BOOST_REQUIRE(snap);
    BOOST_TEST(!snap->current);
    BOOST_TEST(!snap->last);

    board.begin(record_for(1));
    snap = board.read();
    BOOST_REQUIRE(snap);
    BOOST_TEST(snap->begun == 1u);
    BOOST_TEST(snap->ended == 0u);
    BOOST_REQUIRE(snap->current);
    BOOST_TEST(snap->current->sequence == 1u);
    BOOST_TEST(snap->current->comm_id == 42u);  // filled in from the board
    BOOST_TEST(snap->current->timeout == 3.5);
    BOOST_TEST(!snap->last);

    board.end();
    snap = board.read();
    BOOST_REQUIRE(snap);
    BOOST_TEST(!snap->current);
    BOOST_REQUIRE(snap->last);
    BOOST_TEST(snap->last->sequence == 1u);

    board.begin(record_for(2));
    snap = board.read();
    BOOST_REQUIRE(snap);
    BOOST_REQUIRE(snap->current);
    BOOST_REQUIRE(snap->last);
    BOOST_TEST(snap->current->sequence == 2u);
    BOOST_TEST(snap->last->sequence == 1u);  // the last completed call survives the next call's start
    BOOST_TEST(consistent(*snap->current));
    BOOST_TEST(consistent(*snap->last));
}

BOOST_AUTO_TEST_CASE(a_reader_never_sees_a_torn_record) {
    Board board(7, 1.0);
    // The writer makes at least this many calls, and goes on until the reader has made enough reads that raced with
    // it: how soon the reader's thread gets a core depends on the machine's load, which must not decide the verdict
    // (a bound of minutes only keeps a starved reader from running the test forever).
    constexpr std::uint64_t min_calls = 300000;
    constexpr std::uint64_t min_reads = 1000;
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> reads{0};
    std::uint64_t torn = 0, out_of_order = 0;
    std::thread reader([&] {
        while (!done.load(std::memory_order_acquire)) {
            const auto snap = board.read();
            if (!snap) continue;
            reads.fetch_add(1, std::memory_order_relaxed);
            if (snap->current && (!consistent(*snap->current) || snap->current->sequence != snap->begun)) ++torn;
            if (snap->last && (!consistent(*snap->last) || snap->last->sequence != snap->ended)) ++torn;
            if (snap->begun < snap->ended || snap->begun > snap->ended + 1) ++out_of_order;
        }
    });
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    std::uint64_t calls = 0;
    while (calls < min_calls ||
           (reads.load(std::memory_order_relaxed) < min_reads && std::chrono::steady_clock::now() < give_up)) {
        ++calls;
        board.begin(record_for(calls));
        board.end();
    }
    done.store(true, std::memory_order_release);
    reader.join();
    BOOST_TEST_MESSAGE(reads.load() << " consistent reads during " << calls << " calls");
    BOOST_TEST(reads.load() >= min_reads);
    BOOST_TEST(torn == 0u);
    BOOST_TEST(out_of_order == 0u);
    const auto final_snap = board.read();
    BOOST_REQUIRE(final_snap);
    BOOST_TEST(final_snap->ended == calls);
    BOOST_REQUIRE(final_snap->last);
    BOOST_TEST(final_snap->last->sequence == calls);
}

BOOST_AUTO_TEST_CASE(boards_sharing_a_count_order_their_completions) {
    // Calls on two communicators that end within one look of the watchdog thread: the shared count says which ended
    // last, so a report names the right "last completed" call.
    std::atomic<std::uint64_t> completions{0};
    Board world(1, 1.0, &completions);
    Board checks(2, 1.0, &completions);
    checks.begin(record_for(1));
    checks.end();
    world.begin(record_for(1));
    world.end();
    world.begin(record_for(2));
    world.end();
    const auto w = world.read();
    const auto c = checks.read();
    BOOST_REQUIRE(w);
    BOOST_REQUIRE(c);
    BOOST_TEST(c->last_order == 1u);
    BOOST_TEST(w->last_order == 3u);
    BOOST_TEST(Board(3, 1.0).read()->last_order == 0u);  // without a shared count: no order
}
