// A persistent pool of worker threads for the kernels' outer loops. A model runs hundreds of
// parallel_for calls, microseconds apart: idle workers spin for a short while before sleeping on a
// condition variable, so most calls cost no futex wake-up; and a call takes no lock, the threads
// meeting on a few atomics, each in its own cache line, since each line that moves between cores
// is a transfer of 100-300 ns (an empty call of 8 ranges on 2 threads lost 0.9 us with a mutex
// taken per range, 0.44 us without, Zen 5).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace qtk {
namespace detail {

class ThreadPool {
 public:
    // threads >= 1: threads - 1 workers plus the calling thread; 1 runs everything inline.
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int threads() const { return static_cast<int>(workers_.size()) + 1; }

    // Splits [0, n) into contiguous ranges (a few per thread: each thread runs its own share in
    // order, then takes what is left of the others') and calls fn(begin, end) once per range, the
    // caller taking a share; returns when all are done and rethrows the first exception.
    // Kernels compute each output element from its inputs alone, so the split never changes a byte.
    // Not reentrant: fn must not call parallel_for.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
    // As parallel_for, also passing the index of the thread running the range, below threads():
    // the slot of per-thread scratch that the range may use (ranges running at the same time
    // have different slots; one thread's ranges run one after another in its slot).
    void parallel_for_slots(int64_t n,
                            const std::function<void(int64_t slot, int64_t, int64_t)>& fn);

    // Profiling (Session with SessionOptions::profile): while a log is set, every range run is
    // appended to it with the thread that ran it (0 the caller, 1.. the workers), under a lock.
    // Set and reset it between parallel_for calls only. Unset, a range costs one branch.
    struct RangeTime {
        int thread;
        std::chrono::steady_clock::time_point start, end;
    };
    void set_range_log(std::vector<RangeTime>* log) { range_log_ = log; }

 private:
    using Fn = std::function<void(int64_t, int64_t, int64_t)>;

    // One thread's ranges not yet claimed, [next, end), tagged with the job they belong to, in one
    // word that its owner claims from the front and the other threads from the back.
    struct alignas(64) Share {
        std::atomic<uint64_t> ranges{0};
    };

    void worker_loop(int thread);
    // Runs ranges of job `tag` until none is left to claim. `thread`: 0 the caller, 1.. workers.
    void run_ranges(uint32_t tag, int thread);
    // `thread`'s next range of job `tag`, else the last one of the thread with the most left;
    // -1 when none is left (or the job is over).
    int64_t claim(uint32_t tag, int thread);

    std::vector<std::thread> workers_;
    std::unique_ptr<Share[]> shares_;

    // The current job. The caller writes it, tags the shares with it, then bumps tag_; a thread
    // reads it only after claiming a range of the job, so a late worker never runs a stale one.
    alignas(64) std::atomic<uint32_t> tag_{0};
    std::atomic<const Fn*> fn_{nullptr};
    std::atomic<int64_t> n_{0}, chunks_{0};
    std::vector<RangeTime>* range_log_ = nullptr;

    alignas(64) std::atomic<int64_t> chunks_done_{0};  // each thread adds its count once

    // Sleeping workers, and the rare paths: an exception, the range log.
    alignas(64) std::mutex mutex_;
    std::condition_variable work_ready_;
    std::atomic<int> sleepers_{0};
    std::atomic<bool> stopping_{false};
    std::exception_ptr error_;
};

}  // namespace detail
}  // namespace qtk
