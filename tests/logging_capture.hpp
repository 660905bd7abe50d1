#pragma once
// Test-side views of lockstep's log output: a Boost.Log sink that keeps lockstep's record blocks of one route (what a
// host application's sink would see), a redirect of file descriptor 2 into a file, and small file helpers.

#include <lockstep/logging.hpp>

#include <boost/log/attributes/value_extraction.hpp>
#include <boost/log/core.hpp>
#include <boost/log/sinks/basic_sink_backend.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/make_shared.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lockstep_test {

class BlockCollector : public boost::log::sinks::basic_sink_backend<boost::log::sinks::synchronized_feeding> {
public:
    void consume(const boost::log::record_view& record) {
        auto block =
            boost::log::extract<std::shared_ptr<const lockstep::LogBlock>>(lockstep::log_attributes::records, record);
        if (block && *block) blocks.push_back(**block);
    }
    std::vector<lockstep::LogBlock> blocks;
};

// Collects the blocks whose route has `route_bit` while it lives.
class CapturedBlocks {
public:
    explicit CapturedBlocks(unsigned route_bit = lockstep::log_route::console)
        : sink_(boost::make_shared<Sink>(boost::make_shared<BlockCollector>())) {
        sink_->set_filter([route_bit](const boost::log::attribute_value_set& values) {
            auto route = boost::log::extract<unsigned>(lockstep::log_attributes::route, values);
            return route && (*route & route_bit) != 0;
        });
        boost::log::core::get()->add_sink(sink_);
    }
    ~CapturedBlocks() { boost::log::core::get()->remove_sink(sink_); }
    CapturedBlocks(const CapturedBlocks&) = delete;
    CapturedBlocks& operator=(const CapturedBlocks&) = delete;

    [[nodiscard]] std::vector<lockstep::LogBlock> blocks() const { return sink_->locked_backend()->blocks; }
    // Every record of every block, in order.
    [[nodiscard]] std::vector<lockstep::LogRecord> records() const {
        std::vector<lockstep::LogRecord> all;
        for (const auto& block : blocks()) all.insert(all.end(), block.begin(), block.end());
        return all;
    }

private:
    using Sink = boost::log::sinks::synchronous_sink<BlockCollector>;
    boost::shared_ptr<Sink> sink_;
};

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
    std::vector<std::string> lines;
    std::istringstream in(read_file(path));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// A fresh folder under the system's temporary folder, removed with its contents on destruction.
class TemporaryDirectory {
public:
    TemporaryDirectory() {
        std::string pattern = (std::filesystem::temp_directory_path() / "lockstep-logging-XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = pattern;
    }
    ~TemporaryDirectory() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TemporaryDirectory(const TemporaryDirectory&) = delete;
    TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

private:
    std::filesystem::path path_;
};

// Points file descriptor 2 at a file while it lives; text() reads what was written so far.
class RedirectedStderr {
public:
    explicit RedirectedStderr(const std::filesystem::path& file) : file_(file) {
        std::fflush(stderr);
        saved_ = ::dup(STDERR_FILENO);
        const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (saved_ < 0 || fd < 0) throw std::runtime_error("cannot redirect stderr");
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
    }
    ~RedirectedStderr() { restore(); }
    RedirectedStderr(const RedirectedStderr&) = delete;
    RedirectedStderr& operator=(const RedirectedStderr&) = delete;

    void restore() {
        if (saved_ < 0) return;
        std::fflush(stderr);
        ::dup2(saved_, STDERR_FILENO);
        ::close(saved_);
        saved_ = -1;
    }
    [[nodiscard]] std::string text() const { return read_file(file_); }

private:
    std::filesystem::path file_;
    int saved_ = -1;
};

}  // namespace lockstep_test
