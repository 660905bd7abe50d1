#pragma once
// The set of handles the C interface has handed out and not taken back (internal). Every entry point asks it before
// it touches a handle, so that a freed, foreign or random pointer is an INVALID_ARGUMENT and never a dereference.
//
// The table: open addressing over a power-of-two array of words, each 0 (empty), a tombstone, or a handle's address
// with its kind in the low bits (handles are at least 8-aligned). Lookups take no lock: they read the current array
// through an atomic pointer and probe until they find the key or an empty word. Insertions and erasures hold a mutex;
// an insertion fills the first tombstone or empty word of its probe sequence, an erasure leaves a tombstone, so a
// word between a key's home and the key never becomes empty while the key lives, and a lookup never stops short.
// The array is at most half full (tombstones included). Past that a writer either grows it, into a new array at
// least twice as large that it publishes (the old one is kept, since lookups may still be reading it; they are never
// modified again, and the arrays double, so the kept ones take less memory than the current one), or, when few
// handles are live and the words are mostly tombstones, clears the array and puts the live keys back in place. Keys
// move only then, under a sequence count that is odd while it runs: a lookup that found its key is right whatever
// moved (keys are never invented), and one that did not checks that no such rebuild began or ended meanwhile, else
// looks again. So handles made and released without end (a binding's temporaries) take bounded memory.
//
// A lookup that races with the creation or the release of the very handle it asks about may answer either way; a
// caller that does that has a use-after-free of its own, which no answer can make safe. A handle released and then
// given out again at the same address reads as live: the C interface cannot tell those apart.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace lockstep::c_api {

// A handle's kind sits in the low bits of its key (3 is the tombstone, so the kinds skip it).
enum class HandleKind : std::uintptr_t { Tensor = 1, Communicator = 2, Request = 4 };

class LiveHandles {
public:
    LiveHandles() { current_.store(new_table(minimum_capacity), std::memory_order_release); }
    LiveHandles(const LiveHandles&) = delete;
    LiveHandles& operator=(const LiveHandles&) = delete;

    [[nodiscard]] bool contains(const void* handle, HandleKind kind) const noexcept {
        const std::uintptr_t key = key_of(handle, kind);
        if (key == 0) return false;
        while (true) {
            const std::uint64_t before = rebuilds_.load(std::memory_order_acquire);
            const Table* table = current_.load(std::memory_order_acquire);
            if ((before & 1U) == 0) {
                std::size_t i = home(key, table->mask);
                for (std::size_t probes = 0; probes <= table->mask; ++probes, i = (i + 1) & table->mask) {
                    const std::uintptr_t word = table->words[i].load(std::memory_order_acquire);
                    if (word == key) return true;
                    if (word == empty) break;
                }
                std::atomic_thread_fence(std::memory_order_acquire);
                if (rebuilds_.load(std::memory_order_relaxed) == before) return false;
            }
        }
    }

    // Adds a handle (new, so not in the set). May throw std::bad_alloc, leaving the set as it was.
    void insert(const void* handle, HandleKind kind) {
        const std::uintptr_t key = key_of(handle, kind);
        std::scoped_lock lock(mutex_);
        Table* table = current_.load(std::memory_order_relaxed);
        if ((table->used + 1) * 2 > table->mask + 1) table = rebuilt(table);
        std::size_t i = home(key, table->mask);
        while (true) {
            const std::uintptr_t word = table->words[i].load(std::memory_order_relaxed);
            if (word == empty || word == tombstone) {
                if (word == empty) ++table->used;
                table->words[i].store(key, std::memory_order_release);
                ++live_;
                return;
            }
            i = (i + 1) & table->mask;
        }
    }

    // Takes a handle out; false when it was not in the set (released or freed already, or never handed out).
    bool erase(const void* handle, HandleKind kind) noexcept {
        const std::uintptr_t key = key_of(handle, kind);
        if (key == 0) return false;
        std::scoped_lock lock(mutex_);
        Table* table = current_.load(std::memory_order_relaxed);
        for (std::size_t i = home(key, table->mask);; i = (i + 1) & table->mask) {
            const std::uintptr_t word = table->words[i].load(std::memory_order_relaxed);
            if (word == key) {
                table->words[i].store(tombstone, std::memory_order_release);
                --live_;
                return true;
            }
            if (word == empty) return false;
        }
    }

    // How many arrays the set has made so far (the current one and those kept): bounded by the most handles ever live
    // at once, not by how many were made.
    [[nodiscard]] std::size_t arrays_made() {
        std::scoped_lock lock(mutex_);
        return tables_.size();
    }

private:
    struct Table {
        std::size_t mask = 0;
        std::size_t used = 0;  // words not empty (live and tombstones); under mutex_
        std::unique_ptr<std::atomic<std::uintptr_t>[]> words;
    };
    static constexpr std::uintptr_t empty = 0;
    static constexpr std::uintptr_t tombstone = 3;  // low bits 3: no kind
    static constexpr std::size_t minimum_capacity = 64;

    // 0 for a pointer no handle can have (NULL, misaligned).
    static std::uintptr_t key_of(const void* handle, HandleKind kind) noexcept {
        const auto address = reinterpret_cast<std::uintptr_t>(handle);
        if (address == 0 || (address & 7U) != 0) return 0;
        return address | static_cast<std::uintptr_t>(kind);
    }
    static std::size_t home(std::uintptr_t key, std::size_t mask) noexcept {
        return static_cast<std::size_t>(((key >> 3U) * 0x9E3779B97F4A7C15ULL) >> 17U) & mask;
    }
    // Allocates an empty table of `capacity` words (a power of two), kept for the life of the set (under mutex_).
    Table* new_table(std::size_t capacity) {
        auto table = std::make_unique<Table>();
        table->mask = capacity - 1;
        table->words = std::make_unique<std::atomic<std::uintptr_t>[]>(capacity);
        for (std::size_t i = 0; i < capacity; ++i) table->words[i].store(empty, std::memory_order_relaxed);
        tables_.reserve(tables_.size() + 1);
        tables_.push_back(std::move(table));
        return tables_.back().get();
    }
    static void put(Table& table, std::uintptr_t key) {
        std::size_t j = home(key, table.mask);
        while (table.words[j].load(std::memory_order_relaxed) != empty) j = (j + 1) & table.mask;
        table.words[j].store(key, std::memory_order_relaxed);
        ++table.used;
    }
    // A full table (under mutex_) made room in: the live keys in a larger new table, published, or, when at most a
    // quarter of the words would be live, in this one again, without its tombstones.
    Table* rebuilt(Table* table) {
        const std::size_t capacity = table->mask + 1;
        std::vector<std::uintptr_t> keys;
        keys.reserve(live_);
        for (std::size_t i = 0; i < capacity; ++i) {
            const std::uintptr_t word = table->words[i].load(std::memory_order_relaxed);
            if (word != empty && word != tombstone) keys.push_back(word);
        }
        if ((live_ + 1) * 4 > capacity) {
            Table* larger = new_table(std::max(minimum_capacity, std::bit_ceil((live_ + 1) * 4)));
            for (const std::uintptr_t key : keys) put(*larger, key);
            current_.store(larger, std::memory_order_release);
            return larger;
        }
        rebuilds_.store(rebuilds_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // odd: moving
        std::atomic_thread_fence(std::memory_order_release);
        for (std::size_t i = 0; i < capacity; ++i) table->words[i].store(empty, std::memory_order_relaxed);
        table->used = 0;
        for (const std::uintptr_t key : keys) put(*table, key);
        rebuilds_.store(rebuilds_.load(std::memory_order_relaxed) + 1, std::memory_order_release);  // even: done
        return table;
    }

    std::mutex mutex_;
    std::size_t live_ = 0;                        // under mutex_
    std::vector<std::unique_ptr<Table>> tables_;  // every table made, the current one last; under mutex_
    std::atomic<Table*> current_{nullptr};
    std::atomic<std::uint64_t> rebuilds_{0};  // odd while keys move within the current table
};

// The one set of the process (never destroyed: handles are released from thread-exit and atexit code too).
inline LiveHandles& live_handles_set() {
    static LiveHandles* const set = new LiveHandles();
    return *set;
}

}  // namespace lockstep::c_api
