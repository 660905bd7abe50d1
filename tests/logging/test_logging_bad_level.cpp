// Run with LOCKSTEP_LOG_LEVEL=loud: a logger that follows the default level cannot be made, and the error names the
// variable and the value; a logger given its level explicitly does not need the default.
#define BOOST_TEST_MODULE logging_bad_level
#include <boost/test/unit_test.hpp>

#include <lockstep/errors.hpp>
#include <lockstep/logging.hpp>

#include <string>

BOOST_AUTO_TEST_CASE(a_bad_level_in_the_environment_is_a_config_error) {
    try {
        (void)lockstep::get_logger("bad-level");
        BOOST_FAIL("LOCKSTEP_LOG_LEVEL=loud was accepted");
    } catch (const lockstep::ConfigError& e) {
        BOOST_TEST(e.source().find("LOCKSTEP_LOG_LEVEL") != std::string::npos, e.source());
        BOOST_TEST(std::string(e.what()).find("loud") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_CASE(an_explicit_level_does_not_consult_the_environment) {
    const auto log = lockstep::get_logger("explicit-level", lockstep::LogLevel::Info);
    BOOST_TEST((log.level() == lockstep::LogLevel::Info));
    BOOST_CHECK_NO_THROW(log.info("an explicit level works"));
    log.reset_level();
    BOOST_CHECK_THROW((void)log.level(), lockstep::ConfigError);
}
