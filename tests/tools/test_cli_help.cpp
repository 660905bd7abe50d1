// Unit tests of the command line's shared parts (tools/subcommand.hpp): the nearest word for a mistake, and the help
// text's placeholders, bounds, defaults and usage line, on a parser built here.
#define BOOST_TEST_MODULE cli_help
#include <boost/test/unit_test.hpp>

#include "subcommand.hpp"

namespace lt = lockstep::tools;

namespace {
bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}
const std::vector<std::string> commands{"hostcheck", "launch", "config", "env", "test", "help", "version"};
}  // namespace

BOOST_AUTO_TEST_CASE(edit_distance_counts_a_swap_as_one) {
    BOOST_TEST(lt::edit_distance("launch", "launch") == 0u);
    BOOST_TEST(lt::edit_distance("lauch", "launch") == 1u);
    BOOST_TEST(lt::edit_distance("tset", "test") == 1u);
    BOOST_TEST(lt::edit_distance("", "env") == 3u);
    BOOST_TEST(lt::edit_distance("kitten", "sitting") == 3u);
}

BOOST_AUTO_TEST_CASE(nearest_word) {
    BOOST_TEST(lt::nearest("lauch", commands).value() == "launch");
    BOOST_TEST(lt::nearest("tset", commands).value() == "test");
    BOOST_TEST(lt::nearest("confg", commands).value() == "config");
    BOOST_TEST(lt::nearest("lau", commands).value() == "launch");  // a unique prefix
    BOOST_TEST(!lt::nearest("he", commands).has_value());          // too short to be a prefix of anything
    BOOST_TEST(!lt::nearest("frobnicate", commands).has_value());
    BOOST_TEST(!lt::nearest("xyz", commands).has_value());
    BOOST_TEST(!lt::nearest(std::string(100000, 'a'), commands).has_value());
    BOOST_TEST(lt::nearest("--dryrun", {"-h", "--help", "--dry-run", "--json"}).value() == "--dry-run");
}

BOOST_AUTO_TEST_CASE(help_without_parser_jargon) {
    CLI::App app{"Tools."};
    app.name("lockstep");
    CLI::App* sub = app.add_subcommand("demo", "lockstep demo [OPTIONS] THING\nDo a demo: the long explanation.");
    int count = 0;
    std::string colour = "auto";
    std::string level;
    std::string file;
    bool on = false;
    bool off = false;
    sub->add_option("-n,--count", count, "How many")->check(CLI::Range(1, 1 << 24));
    sub->add_option("--fanout", count, "At once")->check(CLI::Range(1, 4096));
    sub->add_option("--color", colour, "Colour")
        ->check(CLI::IsMember({"auto", "always", "never"}))
        ->capture_default_str();
    sub->add_option("--log-level", level, "Level");
    sub->add_option("--file", file, "A file")->option_text("PATH");
    sub->add_flag("--on", on, "On")->excludes(sub->add_flag("--off", off, "Off"));
    const auto formatter = lt::use_help_formatter(app);
    formatter->set_operands(sub, "THING");

    const std::string help = sub->help();
    BOOST_TEST(help.starts_with("Usage: lockstep demo [OPTIONS] THING\n\nDo a demo: the long explanation.\n"), help);
    BOOST_TEST(help.find("Usage:") == help.rfind("Usage:"), help);  // one usage line
    for (const char* jargon : {"TEXT", "INT", "Excludes", "REQUIRED", " in ["}) {
        BOOST_TEST(!contains(help, jargon), jargon << " in\n" << help);
    }
    BOOST_TEST(contains(help, "  -n, --count N"), help);
    BOOST_TEST(contains(help, "(at least 1)"), help);
    BOOST_TEST(contains(help, "(1 to 4096)"), help);
    BOOST_TEST(contains(help, "--color auto|always|never"), help);
    BOOST_TEST(contains(help, "(default: auto)"), help);
    BOOST_TEST(contains(help, "--log-level LEVEL"), help);
    BOOST_TEST(contains(help, "--file PATH"), help);
    BOOST_TEST(contains(help, "(not with --off)"), help);
    BOOST_TEST(contains(help, "Show this help and exit"), help);

    const std::string top = app.help();
    BOOST_TEST(contains(top, "Commands:\n  demo"), top);
    BOOST_TEST(contains(top, "Do a demo\n"), top);  // the first clause, without the usage line
}

BOOST_AUTO_TEST_CASE(wrap_keeps_words_and_indents) {
    const std::string text = lt::HelpFormatter::wrap("one two three four five six", 12, 2);
    BOOST_TEST(text == "one two\n  three four\n  five six");
    BOOST_TEST(lt::HelpFormatter::wrap("a\nb", 80, 0) == "a\nb");
    BOOST_TEST(lt::HelpFormatter::wrap(std::string(20, 'x') + " y", 10, 0) == std::string(20, 'x') + "\ny");
}
