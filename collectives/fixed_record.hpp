#pragma once
// Small fixed-size records that every rank contributes to one allgather (internal): the debug-mode signature, the
// watchdog's endpoints, the device inventory and the straggler row. A record is a trivially copyable struct whose
// strings are FixedText; it travels as raw bytes, the same layout on every rank of a job (one build of lockstep).

#include <lockstep/communicator.hpp>
#include <lockstep/tensor.hpp>

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <concepts>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace lockstep::detail {

template <typename T>
concept FixedRecord = std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>;

// A string of at most N - 1 characters in a zero-filled array.
template <std::size_t N>
struct FixedText {
    char chars[N];

    // Too long a text keeps its start, or with keep_end its end (file paths and scoped names end with what matters),
    // cut at a boundary between tokens where one is near: never in the middle of a name.
    void assign(std::string_view text, bool keep_end = false) noexcept {
        if (text.size() >= N) {
            const std::size_t cut = text.size() - (N - 1);  // characters that do not fit
            text = keep_end ? text.substr(cut + token_slack(text.substr(cut), true))
                            : text.substr(0, (N - 1) - token_slack(text.substr(0, N - 1), false));
        }
        std::memset(chars, 0, N);
        if (!text.empty()) std::memcpy(chars, text.data(), text.size());  // a default string_view's data() is null
    }
    [[nodiscard]] std::string str() const { return std::string(chars, ::strnlen(chars, N)); }
    [[nodiscard]] bool empty() const noexcept { return chars[0] == '\0'; }

private:
    // How many characters to drop from the cut end of `kept` so that it ends (or starts) at a token boundary, if one
    // lies within a quarter of the field.
    static std::size_t token_slack(std::string_view kept, bool at_front) noexcept {
        const auto boundary = [](char c) { return !(std::isalnum(static_cast<unsigned char>(c)) || c == '_'); };
        const std::size_t limit = std::min(kept.size(), N / 4);
        for (std::size_t i = 0; i < limit; ++i) {
            if (!at_front && boundary(kept[kept.size() - 1 - i])) return i;
            if (at_front && boundary(kept[i])) {
                while (i < kept.size() && boundary(kept[i])) ++i;  // "::name" starts at "name"
                return i;
            }
        }
        return 0;
    }
};

// Every rank's record in rank order, into `all` (resized; reused by callers on the per-call path), by one
// MPI_Allgather of raw bytes on a plain MPI communicator: for lockstep's own exchanges below the funnel. Returns
// MPI's return code for the caller to check and count.
template <FixedRecord T>
[[nodiscard]] int allgather_fixed(const T& mine, std::vector<T>& all, MPI_Comm comm, int size) {
    all.resize(static_cast<std::size_t>(size));
    return MPI_Allgather(&mine, sizeof(T), MPI_BYTE, all.data(), sizeof(T), MPI_BYTE, comm);
}

// Every rank's record in rank order, through the Communicator: a collective like any other (signature-checked in
// debug mode, watched by the watchdog).
template <FixedRecord T>
[[nodiscard]] std::vector<T> allgather_fixed(Communicator& comm, const T& mine, CallSite site = {}) {
    Tensor bytes = Tensor::empty({static_cast<std::int64_t>(sizeof(T))}, DType::UInt8);
    std::memcpy(bytes.data(), &mine, sizeof(T));
    const Tensor gathered = comm.allgather(bytes, site);
    std::vector<T> all(static_cast<std::size_t>(comm.size()));
    std::memcpy(static_cast<void*>(all.data()), gathered.data(), all.size() * sizeof(T));
    return all;
}

}  // namespace lockstep::detail
