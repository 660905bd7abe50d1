// The flight recorder's run-long wait profile (collectives/recorder/ring.hpp) and its ring, in one process: the
// profile's bins double in width (merging pairs) as the run outgrows them, losing no call and no wait; a ring keeps
// its last `capacity` entries and numbers them.
#define BOOST_TEST_MODULE recorder_profile
#include <boost/test/unit_test.hpp>

#include <collectives/recorder/ring.hpp>

#include <numeric>

using namespace lockstep;
using namespace lockstep::detail;

namespace {
std::int64_t sum(const std::vector<std::int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), std::int64_t{0});
}
}  // namespace

BOOST_AUTO_TEST_CASE(bins_widen_and_keep_every_call) {
    WaitProfile profile;
    const std::int64_t origin = 1000;
    profile.start(origin);
    profile.start(origin + 5);  // the first start stays
    const WaitProfile::View first = profile.view();
    BOOST_TEST(first.origin == origin);
    const std::int64_t width = std::int64_t{1} << first.shift;
    profile.add(origin, 7);                 // bin 0
    profile.add(origin + 3 * width, 11);    // bin 3
    profile.add(origin - 50, 1);            // before the start: bin 0
    profile.add(origin + 1000 * width, 5);  // past bin 255: the bins double until it fits (1000 < 256 * 4)
    const WaitProfile::View v = profile.view();
    BOOST_TEST(v.shift == first.shift + 2);
    BOOST_TEST(v.wait.size() == WaitProfile::bins);
    BOOST_TEST(sum(v.calls) == 4);
    BOOST_TEST(sum(v.wait) == 24);
    BOOST_TEST(v.calls[0] == 3);  // bins 0 and 3 merged into bin 0 after two doublings
    BOOST_TEST(v.wait[0] == 19);
    BOOST_TEST(v.calls[250] == 1);  // 1000 / 4
    BOOST_TEST(v.wait[250] == 5);
}

BOOST_AUTO_TEST_CASE(a_ring_keeps_its_last_entries) {
    CallRing ring(4);
    for (std::uint64_t i = 1; i <= 10; ++i) {
        std::uint64_t number = 0;
        RecordWord* slot = ring.open(number);
        BOOST_TEST(number == i - 1);
        put_word(slot, offsetof(RecordedCall, sequence), i);
        CallRing::close(slot);
        if (i == 10) {
            BOOST_TEST(CallRing::reopen(slot, number));
            put_word(slot, offsetof(RecordedCall, completed), std::int64_t{42});
            CallRing::close(slot);
            BOOST_TEST(!CallRing::reopen(slot, number - 4));  // an entry since overwritten is not touched
        }
    }
    std::uint64_t torn = 0;
    const std::vector<RecordedCall> kept = ring.read(torn);
    BOOST_TEST(torn == 0u);
    BOOST_TEST(ring.opened() == 10u);
    BOOST_REQUIRE_EQUAL(kept.size(), 4u);
    for (std::size_t i = 0; i < kept.size(); ++i) BOOST_TEST(kept[i].sequence == 7 + i);
    BOOST_TEST(kept[3].completed == 42);
    // An entry whose writer is inside it is left out.
    std::uint64_t number = 0;
    (void)ring.open(number);
    const std::vector<RecordedCall> partial = ring.read(torn);
    BOOST_TEST(torn == 1u);
    BOOST_TEST(partial.size() == 3u);
}
