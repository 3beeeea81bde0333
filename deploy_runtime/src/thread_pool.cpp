#include "thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#endif

namespace qtk {
namespace detail {
namespace {

// Long enough to span the gap between two kernels' loops, short enough that an idle pool frees its
// cores at once.
constexpr std::chrono::microseconds kSpin{100};

// Ranges per thread. Each thread runs its own consecutive ranges first (the same part of every
// loop, so a layer mostly reads what the same core wrote for the layer before), then takes the
// last ranges of the thread with the most left: a core that a neighbour slows (a shared vCPU)
// ends up with fewer, where one range each left the other waiting.
constexpr int64_t kRangesPerThread = 4;

void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spins until done() or kSpin has passed. done() is read after every pause: a pause takes up to
// about 150 cycles, and reading it every 64 pauses left each side of a parallel_for about a
// microsecond late (2.0 against 0.85 us lost per call of 8 ranges of 1 us on 2 threads, Zen 5).
template <typename Done>
void spin_until(const Done& done) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1; !done(); ++i) {
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > until) {
            return;
        }
    }
}

}  // namespace

ThreadPool::ThreadPool(int threads) : next_(size_t(threads)), end_(size_t(threads)) {
    for (int i = 1; i < threads; ++i) {
        workers_.emplace_back([this, i] { worker_loop(i); });
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    work_ready_.notify_all();
    for (std::thread& t : workers_) {
        t.join();
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    parallel_for_slots(n, [&fn](int64_t, int64_t begin, int64_t end) { fn(begin, end); });
}

void ThreadPool::parallel_for_slots(
    int64_t n, const std::function<void(int64_t, int64_t, int64_t)>& fn) {
    if (n <= 0) {
        return;
    }
    if (workers_.empty() || n == 1) {
        if (range_log_ == nullptr) {
            fn(0, 0, n);
            return;
        }
        const auto start = std::chrono::steady_clock::now();
        fn(0, 0, n);
        range_log_->push_back({0, start, std::chrono::steady_clock::now()});
        return;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunks_ = std::min<int64_t>(n, threads() * kRangesPerThread);
    for (int t = 0; t < threads(); ++t) {
        next_[size_t(t)] = chunks_ * t / threads();
        end_[size_t(t)] = chunks_ * (t + 1) / threads();
    }
    chunks_done_ = 0;
    error_ = nullptr;
    ++generation_;
    work_ready_.notify_all();
    run_chunks(lock, 0);
    if (chunks_done_ != chunks_) {
        const int64_t chunks = chunks_;
        lock.unlock();
        spin_until([&] { return chunks_done_.load(std::memory_order_acquire) == chunks; });
        lock.lock();
    }
    work_done_.wait(lock, [this] { return chunks_done_ == chunks_; });
    fn_ = nullptr;
    if (error_) {
        std::rethrow_exception(error_);
    }
}

int64_t ThreadPool::claim(int thread) {
    const size_t own = size_t(thread);
    if (next_[own] < end_[own]) {
        return next_[own]++;
    }
    size_t victim = own;
    for (size_t t = 0; t < next_.size(); ++t) {
        if (end_[t] - next_[t] > end_[victim] - next_[victim]) {
            victim = t;
        }
    }
    return next_[victim] < end_[victim] ? --end_[victim] : -1;
}

void ThreadPool::run_chunks(std::unique_lock<std::mutex>& lock, int thread) {
    while (fn_ != nullptr) {
        const int64_t chunk = claim(thread);
        if (chunk < 0) {
            break;
        }
        const int64_t begin = n_ * chunk / chunks_;
        const int64_t end = n_ * (chunk + 1) / chunks_;
        const std::function<void(int64_t, int64_t, int64_t)>& fn = *fn_;
        std::vector<RangeTime>* log = range_log_;
        lock.unlock();
        std::exception_ptr error;
        const auto start = log ? std::chrono::steady_clock::now()
                               : std::chrono::steady_clock::time_point();
        try {
            fn(thread, begin, end);
        } catch (...) {
            error = std::current_exception();
        }
        const auto stop = log ? std::chrono::steady_clock::now()
                              : std::chrono::steady_clock::time_point();
        lock.lock();
        if (log) {
            log->push_back({thread, start, stop});
        }
        if (error && !error_) {
            error_ = error;
        }
        if (++chunks_done_ == chunks_) {
            work_done_.notify_one();
        }
    }
}

void ThreadPool::worker_loop(int thread) {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t seen = generation_;
    while (true) {
        if (!stopping_ && generation_ == seen) {
            lock.unlock();
            spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
            lock.lock();
        }
        work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) {
            return;
        }
        seen = generation_;
        run_chunks(lock, thread);
    }
}

}  // namespace detail
}  // namespace qtk
