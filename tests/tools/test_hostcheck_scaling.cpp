// The hostfile parser and the report over it are linear in the number of lines: a file of N lines that all name one
// host (the worst case for the per-host summaries, where every line's summary refers to the others) costs N times a
// line's work. Checked without clocks where possible: the allocations and bytes allocated while parsing 2 000 and
// 20 000 lines (200 and 2 000 in a sanitizer build; a summary or a string rebuilt from every earlier line grows with
// the square) must grow ten-fold, give or take the vectors' doubling. Work that allocates nothing (a search over
// earlier entries per line) is seen only in time: the CPU time of this thread, the fastest of a few runs at each
// size, is compared between the two sizes with a bound (30 where linear work gives 10 and quadratic work 100) that
// machine load cannot reach, since both sizes run on the same machine at the same time and the ratio, not the time,
// is judged.
#define BOOST_TEST_MODULE hostcheck_scaling
#include <boost/test/unit_test.hpp>

#include "hostfile.hpp"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>

namespace {

std::atomic<std::size_t> allocations{0};
std::atomic<std::size_t> allocated_bytes{0};

}  // namespace

// Every allocation of the program is counted; the tests read the difference over one call.
void* operator new(std::size_t size) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    allocated_bytes.fetch_add(size, std::memory_order_relaxed);
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
// The matching deletes (GCC cannot see that operator new above is malloc's, and warns of a mismatch).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
#pragma GCC diagnostic pop

using namespace lockstep::hostcheck;

namespace {

struct Work {
    std::size_t allocations = 0;
    std::size_t bytes = 0;
};

Work count_work(const std::function<void()>& f) {
    const std::size_t a = allocations.load();
    const std::size_t b = allocated_bytes.load();
    f();
    return {allocations.load() - a, allocated_bytes.load() - b};
}

double thread_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The fastest of `runs` runs, in CPU seconds of this thread.
double fastest_cpu_seconds(const std::function<void()>& f, int runs) {
    double best = 1e30;
    for (int i = 0; i < runs; ++i) {
        const double start = thread_cpu_seconds();
        f();
        best = std::min(best, thread_cpu_seconds() - start);
    }
    return best;
}

std::string repeated(const std::string& line, std::size_t n) {
    std::string text;
    text.reserve(line.size() * n);
    for (std::size_t i = 0; i < n; ++i) text += line;
    return text;
}

// The hostfile fuzz harness (fuzz/fuzz_hostfile.cpp): the parser in the detected form and in the one the first byte
// picks, then the report's table and JSON, as the command shows them.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

void parse_and_report(const std::string& text) {
    (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

// Sanitizer builds run this code some hundred times slower (nlohmann::json unoptimised, every access checked): they
// count the allocations of a tenth of the lines, and leave the timing to the plain build, where time means something.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif
constexpr std::size_t small = sanitized ? 200 : 2000;
constexpr std::size_t large = 10 * small;

// The files of one host on every line, in each form, and one with a few hosts taking turns (`line` is then several
// lines, and the file as many lines as the others).
struct Case {
    const char* name;
    std::string line;
    std::optional<HostfileFormat> format;
};

std::string file_of(const Case& c, std::size_t lines) {
    return repeated(c.line, lines / static_cast<std::size_t>(std::count(c.line.begin(), c.line.end(), '\n')));
}
const Case cases[] = {
    {"plain", "a\n", std::nullopt},
    {"openmpi", "node01 slots=2\n", std::nullopt},
    {"hydra", "node01:2\n", std::nullopt},
    {"plain read as openmpi", "a\n", HostfileFormat::OpenMpi},
    {"three hosts in turn", "a\nb\nc\n", std::nullopt},
};

}  // namespace

BOOST_AUTO_TEST_CASE(allocations_grow_with_the_lines_not_their_square) {
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.name) {
            const std::string few = file_of(c, small);
            const std::string many = file_of(c, large);
            for (const bool report : {false, true}) {
                BOOST_TEST_CONTEXT((report ? "parse and report" : "parse")) {
                    auto run = [&](const std::string& text) {
                        return count_work([&] {
                            if (report) {
                                parse_and_report(text);
                            } else {
                                (void)parse_hostfile(text, "many.hosts", c.format);
                            }
                        });
                    };
                    const Work w_few = run(few);
                    const Work w_many = run(many);
                    BOOST_TEST_MESSAGE(c.name << (report ? ", parse and report: " : ", parse: ") << w_few.allocations
                                              << " allocations, " << w_few.bytes << " bytes for " << small << " lines; "
                                              << w_many.allocations << ", " << w_many.bytes << " for " << large);
                    // Ten times the lines: ten times the allocations, and the bytes within the vectors' doubling.
                    BOOST_TEST(w_many.allocations <= 11 * w_few.allocations);
                    BOOST_TEST(w_many.bytes <= 25 * w_few.bytes);
                }
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(time_grows_with_the_lines_not_their_square, *boost::unit_test::enable_if<!sanitized>()) {
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.name) {
            const std::string few = file_of(c, small);
            const std::string many = file_of(c, large);
            const double t_few = fastest_cpu_seconds([&] { (void)parse_hostfile(few, "many.hosts", c.format); }, 5);
            const double t_many = fastest_cpu_seconds([&] { (void)parse_hostfile(many, "many.hosts", c.format); }, 3);
            BOOST_TEST_MESSAGE(c.name << ": " << t_few * 1e3 << " ms of CPU for " << small << " lines, " << t_many * 1e3
                                      << " ms for " << large);
            // Below a millisecond the clock's granularity and a cache miss weigh too much to judge a ratio.
            BOOST_TEST(t_many <= 30 * std::max(t_few, 1e-3));
        }
    }
    // The fuzz harness's whole work, on the first case only: it is the slowest.
    const std::string few = file_of(cases[0], small);
    const std::string many = file_of(cases[0], large);
    const double t_few = fastest_cpu_seconds([&] { parse_and_report(few); }, 3);
    const double t_many = fastest_cpu_seconds([&] { parse_and_report(many); }, 2);
    BOOST_TEST_MESSAGE("fuzz harness: " << t_few * 1e3 << " ms of CPU for " << small << " lines, " << t_many * 1e3
                                        << " ms for " << large);
    BOOST_TEST(t_many <= 30 * std::max(t_few, 1e-3));
}

// The same work, and the same results, as before: the summaries of a host on every line name the first few other
// lines and count the rest.
BOOST_AUTO_TEST_CASE(summaries_of_a_host_on_every_line) {
    const Hostfile hf = parse_hostfile(repeated("a\n", 12), "many.hosts");
    BOOST_REQUIRE_EQUAL(hf.lines.size(), 12U);
    BOOST_TEST(hf.lines[0].openmpi.summary ==
               "1 slot (no slots= given: 1 slot per line in OpenMPI 4; OpenMPI 5 counts cores); 12 in all with lines "
               "2, 3, 4, 5, 6, 7, 8, 9 and 3 more");
    BOOST_TEST(hf.lines[4].openmpi.summary ==
               "1 slot (no slots= given: 1 slot per line in OpenMPI 4; OpenMPI 5 counts cores); 12 in all with lines "
               "1, 2, 3, 4, 6, 7, 8, 9 and 3 more");
    BOOST_TEST(hf.lines[11].openmpi.summary ==
               "1 slot (no slots= given: 1 slot per line in OpenMPI 4; OpenMPI 5 counts cores); 12 in all with lines "
               "1, 2, 3, 4, 5, 6, 7, 8 and 3 more");
    const Hostfile two = parse_hostfile("a\nb\na\n", "two.hosts");
    BOOST_TEST(two.lines[2].openmpi.summary ==
               "1 slot (no slots= given: 1 slot per line in OpenMPI 4; OpenMPI 5 counts cores); 2 in all with line 1");
}
