#define BOOST_TEST_MODULE system
#include <boost/test/unit_test.hpp>

#include <lockstep.hpp>

using namespace lockstep;

namespace {
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_CASE(kernel_versions_parse) {
    struct Case {
        const char* release;
        std::optional<KernelVersion> expected;
    };
    const Case cases[] = {
        {"5.4.0-150-generic", KernelVersion{5, 4, 0}},
        {"6.1.0-18-amd64", KernelVersion{6, 1, 0}},
        {"4.4.0", KernelVersion{4, 4, 0}},
        {"5.15.133.1-microsoft-standard-WSL2", KernelVersion{5, 15, 133}},
        {"3.10", KernelVersion{3, 10, 0}},
        {"6.8.0+", KernelVersion{6, 8, 0}},
        {"", std::nullopt},
        {"linux", std::nullopt},
        {"5", std::nullopt},
        {"5.x", std::nullopt},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT("'" << c.release << "'") {
            const auto v = parse_kernel_version(c.release);
            BOOST_TEST(v.has_value() == c.expected.has_value());
            if (v && c.expected) BOOST_TEST((*v == *c.expected));
        }
    }
    BOOST_TEST(parse_kernel_version(kernel_release()).has_value());
}

BOOST_AUTO_TEST_CASE(old_kernels_get_the_hang_warning) {
    BOOST_TEST(kernel_warning("4.4.0").has_value());
    BOOST_TEST(contains(*kernel_warning("5.4.0-150-generic"), "5.4.0-150-generic is older than 5.5"));
    BOOST_TEST(!kernel_warning("5.5.0").has_value());
    BOOST_TEST(!kernel_warning("6.1.0-18-amd64").has_value());
    BOOST_TEST(!kernel_warning("garbage").has_value());
}

BOOST_AUTO_TEST_CASE(identical_inventories_give_no_warning) {
    DeviceInventory a{0, "n1", "cuda:0", "NVIDIA H200", std::size_t{140} << 30, 132, "6.1.0"};
    std::vector<DeviceInventory> same{a, a, a};
    for (int r = 0; r < 3; ++r) same[static_cast<std::size_t>(r)].rank = r;
    BOOST_TEST(!compare_inventories(same).has_value());
}

BOOST_AUTO_TEST_CASE(differing_inventories_name_the_ranks_the_smallest_memory_and_the_pace) {
    const DeviceInventory h200{0, "n1", "cuda:0", "NVIDIA H200", std::size_t{140} << 30, 132, "6.1.0"};
    DeviceInventory a100{3, "n2", "cuda:0", "NVIDIA A100-SXM4-40GB", std::size_t{40} << 30, 108, "6.1.0"};
    std::vector<DeviceInventory> inv;
    for (int r = 0; r < 8; ++r) {
        DeviceInventory e = (r == 3 || r == 5) ? a100 : h200;
        e.rank = r;
        inv.push_back(e);
    }
    const auto warning = compare_inventories(inv);
    BOOST_REQUIRE(warning.has_value());
    BOOST_TEST(contains(*warning, "Processes 0-2, 4, 6-7: cuda NVIDIA H200, 140.00 GiB, 132 SMs"));
    BOOST_TEST(contains(*warning, "Processes 3, 5: cuda NVIDIA A100-SXM4-40GB, 40.00 GiB, 108 SMs"));
    BOOST_TEST(contains(*warning, "smallest memory is 40.00 GiB (processes 3, 5)"));
    BOOST_TEST(contains(*warning, "slowest device paces all"));
    // CPU ranks with different caps differ too.
    DeviceInventory cpu0{0, "n1", "cpu", "Xeon", std::size_t{512} << 20, 2, "6.1.0"};
    DeviceInventory cpu1 = cpu0;
    cpu1.rank = 1;
    cpu1.memory_bytes = std::size_t{256} << 20;
    const auto w2 = compare_inventories({cpu0, cpu1});
    BOOST_REQUIRE(w2.has_value());
    BOOST_TEST(contains(*w2, "256.00 MiB (process 1)"));
}

BOOST_AUTO_TEST_CASE(straggler_report_names_the_rank_that_waits_least) {
    std::vector<StragglerRow> rows{{0, "n1", 10.0, 3.0}, {1, "n1", 10.0, 0.2}, {2, "n2", 10.0, 2.8}};
    const std::string text = format_straggler_report(rows);
    BOOST_TEST(contains(text, "| 1 | n1 | 10.000 | 9.800 | 0.200 | 2.0 % |"));
    BOOST_TEST(contains(text, "The others wait for rank 1 (n1)"));
    BOOST_TEST(contains(text, "median of 2.900 s"));
    std::vector<StragglerRow> balanced{{0, "n1", 10.0, 1.0}, {1, "n1", 10.0, 1.01}};
    BOOST_TEST(contains(format_straggler_report(balanced), "the ranks are balanced"));
}

BOOST_AUTO_TEST_CASE(host_facts_are_plausible) {
    const HostFacts f = host_facts();
    BOOST_TEST(f.cpu_cores >= 1);
    BOOST_TEST(f.ram_bytes > (std::size_t{64} << 20));
    BOOST_TEST(!f.cpu_model.empty());
    if (!cuda_built()) {
        BOOST_TEST(!cuda_runtime_version().has_value());
        BOOST_TEST(!cuda_device_facts(0).has_value());
    }
}
