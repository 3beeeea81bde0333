// A persistent pool of worker threads for the kernels' outer loops. A model runs hundreds of
// parallel_for calls, microseconds apart: idle workers (and a caller waiting for them) spin for a
// short while before sleeping on a condition variable, so most calls cost no futex wake-up.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
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
    // appended to it with the thread that ran it (0 the caller, 1.. the workers), under the pool's
    // lock. Set and reset it between parallel_for calls only. Unset, a range costs one branch.
    struct RangeTime {
        int thread;
        std::chrono::steady_clock::time_point start, end;
    };
    void set_range_log(std::vector<RangeTime>* log) { range_log_ = log; }

 private:
    void worker_loop(int thread);
    // Runs chunks of the current job until none is left; called with lock held, returns with it
    // held. `thread`: 0 the caller, 1.. the workers (for the range log).
    void run_chunks(std::unique_lock<std::mutex>& lock, int thread);
    // Under the lock: `thread`'s next range, else the last one of the thread with the most left;
    // -1 when none is left.
    int64_t claim(int thread);

    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable work_ready_;
    std::condition_variable work_done_;
    bool stopping_ = false;
    // Bumped for each job (under mutex_), so workers see a new one exactly once; atomic so that a
    // worker can spin on it without the lock.
    std::atomic<uint64_t> generation_{0};

    // The current job, guarded by mutex_.
    const std::function<void(int64_t, int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0;
    int64_t chunks_ = 0;
    std::vector<int64_t> next_, end_;  // per thread: its ranges [next, end) not yet claimed
    std::atomic<int64_t> chunks_done_{0};  // written under mutex_; the caller spins on it
    std::exception_ptr error_;
    std::vector<RangeTime>* range_log_ = nullptr;
};

}  // namespace detail
}  // namespace qtk
