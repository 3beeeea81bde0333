#include "thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

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

// A share's word: the job's tag in the high half, next and end in 16 bits each.
constexpr int64_t kMaxRanges = 0xffff;
uint64_t pack(uint32_t tag, int64_t next, int64_t end) {
    return uint64_t(tag) << 32 | uint64_t(next) << 16 | uint64_t(end);
}
uint32_t tag_of(uint64_t word) { return uint32_t(word >> 32); }
int64_t next_of(uint64_t word) { return int64_t(word >> 16 & 0xffff); }
int64_t end_of(uint64_t word) { return int64_t(word & 0xffff); }

void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// Spins until done() or kSpin has passed; returns done(). done() is read after every pause: a
// pause takes up to about 150 cycles, and reading it every 64 pauses left each side of a
// parallel_for about a microsecond late (2.0 against 0.85 us lost per call of 8 ranges of 1 us on
// 2 threads, Zen 5).
template <typename Done>
bool spin_until(const Done& done) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1; !done(); ++i) {
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > until) {
            return done();
        }
    }
    return true;
}

// The CPU each worker keeps, indexed by thread (0, the caller's, unused); empty: none. Where the
// pool takes every CPU this thread may run on, each worker keeps its own, the caller the first:
// left free, the scheduler at times ran both threads of a 2-thread pool on one vCPU for whole
// turns of a benchmark (shufflenet_v2 int8 at 2 threads: turns of 0.82 ms among 0.55 ones, none
// with the worker pinned; Zen 5 VM). QTK_PIN_THREADS=0 leaves every thread free; =1 pins as far
// as there are CPUs, also for a pool that takes only some of them.
std::vector<int> worker_cpus(int threads) {
#if defined(__linux__)
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (threads < 2 || sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        return {};
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &allowed)) {
            cpus.push_back(cpu);
        }
    }
    const char* setting = std::getenv("QTK_PIN_THREADS");
    const std::string pin = setting ? setting : "";
    const int count = static_cast<int>(cpus.size());
    if (pin == "0" || threads > count || (pin != "1" && threads != count)) {
        return {};
    }
    return cpus;
#else
    (void)threads;
    return {};
#endif
}

void keep_cpu(int cpu) {
#if defined(__linux__)
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);  // a refusal leaves it free
#else
    (void)cpu;
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) : shares_(new Share[size_t(std::max(threads, 1))]) {
    const std::vector<int> cpus = worker_cpus(threads);
    for (int i = 1; i < threads; ++i) {
        const int cpu = cpus.empty() ? -1 : cpus[size_t(i)];
        workers_.emplace_back([this, i, cpu] {
            if (cpu >= 0) {
                keep_cpu(cpu);
            }
            worker_loop(i);
        });
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

void ThreadPool::parallel_for_slots(int64_t n, const Fn& fn) {
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
    const int64_t chunks = std::min({n, threads() * kRangesPerThread, kMaxRanges});
    const uint32_t tag = tag_.load(std::memory_order_relaxed) + 1;
    fn_.store(&fn, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    chunks_done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    for (int t = 0; t < threads(); ++t) {
        shares_[size_t(t)].ranges.store(
            pack(tag, chunks * t / threads(), chunks * (t + 1) / threads()),
            std::memory_order_release);
    }
    tag_.store(tag, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        work_ready_.notify_all();
    }
    run_ranges(tag, 0);
    // Every range is claimed: wait for those still running on workers.
    while (!spin_until([&] {
        return chunks_done_.load(std::memory_order_acquire) == chunks;
    })) {
        std::this_thread::yield();
    }
    if (error_) {
        std::rethrow_exception(error_);
    }
}

int64_t ThreadPool::claim(uint32_t tag, int thread) {
    std::atomic<uint64_t>& own = shares_[size_t(thread)].ranges;
    uint64_t word = own.load(std::memory_order_acquire);
    while (tag_of(word) == tag && next_of(word) < end_of(word)) {
        if (own.compare_exchange_weak(word, word + (uint64_t(1) << 16),
                                      std::memory_order_acquire)) {
            return next_of(word);
        }
    }
    while (true) {
        int victim = -1;
        int64_t most = 0;
        uint64_t victim_word = 0;
        for (int t = 0; t < threads(); ++t) {
            const uint64_t w = shares_[size_t(t)].ranges.load(std::memory_order_acquire);
            if (tag_of(w) == tag && end_of(w) - next_of(w) > most) {
                victim = t;
                most = end_of(w) - next_of(w);
                victim_word = w;
            }
        }
        if (victim < 0) {
            return -1;
        }
        if (shares_[size_t(victim)].ranges.compare_exchange_strong(
                victim_word, victim_word - 1, std::memory_order_acquire)) {
            return end_of(victim_word) - 1;
        }
    }
}

void ThreadPool::run_ranges(uint32_t tag, int thread) {
    int64_t done = 0;
    for (int64_t chunk = claim(tag, thread); chunk >= 0; chunk = claim(tag, thread)) {
        const Fn& fn = *fn_.load(std::memory_order_relaxed);
        const int64_t n = n_.load(std::memory_order_relaxed);
        const int64_t chunks = chunks_.load(std::memory_order_relaxed);
        const int64_t begin = n * chunk / chunks, end = n * (chunk + 1) / chunks;
        std::vector<RangeTime>* log = range_log_;
        const auto start = log ? std::chrono::steady_clock::now()
                               : std::chrono::steady_clock::time_point();
        try {
            fn(thread, begin, end);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!error_) {
                error_ = std::current_exception();
            }
        }
        if (log) {
            const auto stop = std::chrono::steady_clock::now();
            std::lock_guard<std::mutex> lock(mutex_);
            log->push_back({thread, start, stop});
        }
        ++done;
    }
    if (done > 0) {
        chunks_done_.fetch_add(done, std::memory_order_release);
    }
}

void ThreadPool::worker_loop(int thread) {
    uint32_t seen = tag_.load(std::memory_order_acquire);
    const auto has_job = [&] {
        return stopping_.load(std::memory_order_acquire) ||
               tag_.load(std::memory_order_seq_cst) != seen;
    };
    while (true) {
        if (!spin_until(has_job)) {
            // sleepers_ is raised before has_job() is read again, and the caller bumps tag_ before
            // reading sleepers_ (both sequentially consistent): one of the two sees the other.
            std::unique_lock<std::mutex> lock(mutex_);
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            work_ready_.wait(lock, has_job);
            sleepers_.fetch_sub(1, std::memory_order_relaxed);
        }
        if (stopping_.load(std::memory_order_acquire)) {
            return;
        }
        seen = tag_.load(std::memory_order_acquire);
        run_ranges(seen, thread);
    }
}

}  // namespace detail
}  // namespace qtk
