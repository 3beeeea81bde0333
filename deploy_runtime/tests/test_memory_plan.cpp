// The memory planner: simultaneously live tensors never share bytes, offsets are aligned, the arena
// is at least the lower bound; plus known optima and the plans of real sessions.
#include <algorithm>

#include "check.h"
#include "memory_planner.h"
#include "model_builder.h"
#include "qtk/runtime.h"

using qtk::detail::MemoryPlan;
using qtk::detail::TensorLifetime;

namespace {

// Independent of the planner's own computation: step by step.
uint64_t peak_live_bytes(const std::vector<TensorLifetime>& tensors) {
    uint64_t peak = 0;
    size_t last = 0;
    for (const TensorLifetime& t : tensors) {
        last = std::max(last, t.last_step);
    }
    for (size_t step = 0; step <= last; ++step) {
        uint64_t live = 0;
        for (const TensorLifetime& t : tensors) {
            if (t.first_step <= step && step <= t.last_step) {
                live += t.bytes;
            }
        }
        peak = std::max(peak, live);
    }
    return peak;
}

void check_plan(const std::vector<TensorLifetime>& tensors, const MemoryPlan& plan) {
    CHECK_EQ(plan.offsets.size(), tensors.size());
    CHECK_EQ(plan.lower_bound, peak_live_bytes(tensors));
    CHECK(plan.arena_bytes >= plan.lower_bound);
    for (size_t i = 0; i < tensors.size(); ++i) {
        CHECK_EQ(plan.offsets[i] % qtk::detail::kArenaAlignment, 0u);
        CHECK(plan.offsets[i] + tensors[i].bytes <= plan.arena_bytes);
        for (size_t j = i + 1; j < tensors.size(); ++j) {
            const bool live_together = tensors[i].first_step <= tensors[j].last_step &&
                                       tensors[j].first_step <= tensors[i].last_step;
            const bool bytes_overlap = plan.offsets[i] < plan.offsets[j] + tensors[j].bytes &&
                                       plan.offsets[j] < plan.offsets[i] + tensors[i].bytes;
            if (live_together && bytes_overlap) {
                qtk_test::report_failure(__FILE__, __LINE__,
                                         "tensors " + std::to_string(i) + " and " +
                                             std::to_string(j) + " are live together and overlap");
            }
        }
    }
}

void test_random_lifetimes() {
    qtk_test::Rng rng(2024);
    for (int round = 0; round < 300; ++round) {
        const size_t steps = static_cast<size_t>(rng.uniform(1, 20));
        std::vector<TensorLifetime> tensors(static_cast<size_t>(rng.uniform(0, 40)));
        for (TensorLifetime& t : tensors) {
            t.first_step = static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(steps) - 1));
            t.last_step = static_cast<size_t>(
                rng.uniform(static_cast<int64_t>(t.first_step), static_cast<int64_t>(steps) - 1));
            t.bytes = static_cast<uint64_t>(rng.uniform(1, 5000));
        }
        check_plan(tensors, qtk::detail::plan_memory(tensors));
    }
}

void test_known_plans() {
    // A chain a -> b -> c -> d of equal tensors needs two slots.
    std::vector<TensorLifetime> chain = {{640, 0, 0}, {640, 0, 1}, {640, 1, 2}, {640, 2, 2}};
    MemoryPlan plan = qtk::detail::plan_memory(chain);
    check_plan(chain, plan);
    CHECK_EQ(plan.arena_bytes, 1280u);
    CHECK_EQ(plan.lower_bound, 1280u);
    // Disjoint lifetimes share offset 0; sizes that are not multiples of 64 are padded between.
    std::vector<TensorLifetime> disjoint = {{100, 0, 0}, {30, 1, 1}, {70, 2, 2}};
    plan = qtk::detail::plan_memory(disjoint);
    CHECK_EQ(plan.arena_bytes, 100u);
    std::vector<TensorLifetime> together = {{100, 0, 1}, {30, 0, 1}};
    plan = qtk::detail::plan_memory(together);
    CHECK_EQ(plan.offsets[1], 128u);
    CHECK_EQ(plan.arena_bytes, 158u);
    CHECK_EQ(plan.lower_bound, 130u);
    CHECK(qtk::detail::plan_memory({}).arena_bytes == 0);
}

void test_session_plans() {
    const std::vector<uint8_t> bytes = qtk_test::sample_model().build();
    // The reference conv needs no workspace, so the bound below is the activations' alone.
    qtk_test::set_env("QTK_CONV_ALGO", "conv2d_int8_reference");
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    qtk_test::set_env("QTK_CONV_ALGO", nullptr);
    qtk::Session session(model);
    CHECK(session.arena_bytes() >= session.arena_lower_bound());
    // The sample's largest step: conv1 reads x (72) while a (144) is written... up to the concat,
    // where a (144), c (144) and d (288) are live: 576 bytes.
    CHECK_EQ(session.arena_lower_bound(), 576u);
    const size_t batch1 = session.arena_bytes();
    const std::vector<int8_t> x(5 * 72, 1);
    session.run({x.data()}, {{5, 2, 6, 6}});
    CHECK_EQ(session.arena_lower_bound(), 5u * 576u);
    CHECK(session.arena_bytes() >= session.arena_lower_bound());
    CHECK(session.arena_bytes() > batch1);

    // A fast conv's workspace is one more tensor of the plan, live while the conv runs.
    qtk::Session fast(qtk::Model::from_bytes(bytes.data(), bytes.size()));
    CHECK(fast.arena_lower_bound() >= 576u);
    CHECK(fast.arena_bytes() >= fast.arena_lower_bound());
}

// Two models run one after another share one Arena: it holds the larger plan, not the sum, and
// every output is what a session with its own arena computes, also after the Arena grows (a larger
// batch moves it) between the other session's runs.
void test_shared_arena() {
    const std::vector<uint8_t> sample = qtk_test::sample_model().build();
    const std::vector<uint8_t> ops = qtk_test::int8_ops_model().build();
    const auto a = qtk::Model::from_bytes(sample.data(), sample.size());
    const auto b = qtk::Model::from_bytes(ops.data(), ops.size());
    auto arena = std::make_shared<qtk::Arena>();
    qtk::SessionOptions shared;
    shared.arena = arena;
    qtk::Session a_shared(a, shared), b_shared(b, shared), a_own(a), b_own(b);
    auto inputs = [](size_t count) {
        std::vector<int8_t> x(count);
        for (size_t i = 0; i < count; ++i) {
            x[i] = static_cast<int8_t>(i * 29 % 256 - 128);
        }
        return x;
    };
    size_t largest = 0;
    for (int64_t batch : {1, 3, 1}) {
        const std::vector<int8_t> xa = inputs(static_cast<size_t>(batch) * 72);
        const std::vector<int8_t> xb = inputs(static_cast<size_t>(batch) * 120);
        for (int round = 0; round < 2; ++round) {
            const auto ya = a_shared.run({xa.data()}, {{batch, 2, 6, 6}});
            const auto yb = b_shared.run({xb.data()}, {{batch, 4, 6, 5}});
            CHECK(ya[0].data == a_own.run({xa.data()}, {{batch, 2, 6, 6}})[0].data);
            CHECK(yb[0].data == b_own.run({xb.data()}, {{batch, 4, 6, 5}})[0].data);
        }
        largest = std::max({largest, a_shared.arena_bytes(), b_shared.arena_bytes()});
        CHECK_EQ(arena->bytes(), largest);  // the larger plan of the two, not their sum
    }
}

// Float32 activations take 4 bytes per element: x -> clamp -> y -> quantize -> q.
void test_float_element_sizes() {
    qtk_test::ModelBuilder b;
    const uint32_t x = b.float_activation("x", {1, 4, 4, 4});
    const uint32_t y = b.float_activation("y", {1, 4, 4, 4});
    b.node("clamp", "clamp", {x}, {y}, {qtk_test::float_attr("bounds", {-1.0f, 1.0f})});
    const uint32_t q = b.activation("q", {1, 4, 4, 4}, 0.01f, 0);
    b.node("quantize", "quant", {y}, {q});
    b.inputs = {x};
    b.outputs = {q};
    const std::vector<uint8_t> bytes = b.build();
    qtk::Session session(qtk::Model::from_bytes(bytes.data(), bytes.size()));
    // clamp: x and y live, 256 bytes each; quantize: y (256) and q (64).
    CHECK_EQ(session.arena_lower_bound(), 512u);
    const std::vector<float> input(2 * 64, 3.0f);
    const std::vector<qtk::Tensor> out = session.run({input.data()}, {{2, 4, 4, 4}});
    CHECK_EQ(session.arena_lower_bound(), 1024u);
    CHECK(session.arena_bytes() >= session.arena_lower_bound());
    CHECK(out[0].data == std::vector<int8_t>(128, 100));  // clamped to 1.0, / 0.01
}

// keep_intermediates: every activation lives to the end of the run, so the bound is at least their
// sum, the outputs are unchanged and intermediates() returns each value as it was computed.
void test_keep_intermediates() {
    const std::vector<uint8_t> bytes = qtk_test::sample_model().build();
    qtk_test::set_env("QTK_CONV_ALGO", "conv2d_int8_reference");  // no workspace
    const auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    qtk_test::set_env("QTK_CONV_ALGO", nullptr);
    qtk::SessionOptions options;
    options.keep_intermediates = true;
    qtk::Session kept(model, options), plain(model);
    CHECK_THROWS_WITH(plain.intermediates(), "keep_intermediates");
    CHECK_THROWS_WITH(kept.intermediates(), "not run");
    CHECK(kept.arena_bytes() >= kept.arena_lower_bound());
    std::vector<int8_t> x(2 * 72);
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<int8_t>(i * 37 % 256 - 128);
    }
    const std::vector<qtk::Tensor> want = plain.run({x.data()}, {{2, 2, 6, 6}});
    const std::vector<qtk::Tensor> got = kept.run({x.data()}, {{2, 2, 6, 6}});
    CHECK(got[0].data == want[0].data && got[1].data == want[1].data);
    const std::vector<qtk::Intermediate> values = kept.intermediates();
    CHECK_EQ(values.size(), 12u);  // the input and eleven node outputs
    size_t sum = 0;
    for (const qtk::Intermediate& v : values) {
        sum += v.tensor.data.size();
    }
    CHECK_EQ(sum, 2u * 1059u);  // x 72, a b c 144, d 288, e f g 72, h 32, i j 8, out 3
    CHECK(kept.arena_lower_bound() >= sum && plain.arena_lower_bound() < sum);
    CHECK(values.front().value == "x" && values.front().node.empty());
    CHECK(values.front().tensor.data == x);
    CHECK(values[1].value == "a" && values[1].node == "conv1" && values[1].op == "conv2d");
    CHECK(values[1].tensor.shape == qtk::Shape({2, 4, 6, 6}));
    CHECK(values[5].value == "e" && values[5].tensor.data == want[1].data);
    CHECK(values.back().value == "out" && values.back().node == "fc");
    CHECK(values.back().tensor.data == want[0].data);
}

// With profile, each node's last run: its start and time, and the ranges of its parallel loops
// by thread, inside the node's time.
void test_profile_timeline() {
    const std::vector<uint8_t> bytes = qtk_test::sample_model().build();
    qtk::SessionOptions options;
    options.threads = 2;
    options.profile = true;
    qtk::Session session(qtk::Model::from_bytes(bytes.data(), bytes.size()), options);
    const std::vector<int8_t> x(8 * 72, 5);
    session.run({x.data()}, {{8, 2, 6, 6}});
    const std::vector<qtk::NodeProfile> first = session.profile();
    session.run({x.data()}, {{8, 2, 6, 6}});
    const std::vector<qtk::NodeProfile> nodes = session.profile();
    size_t ranges = 0;
    for (size_t k = 0; k < nodes.size(); ++k) {
        const qtk::NodeProfile& n = nodes[k];
        CHECK(n.last_start > first[k].last_start && n.last_seconds >= 0.0);
        CHECK(n.seconds >= n.last_seconds);
        if (k + 1 < nodes.size()) {
            CHECK(n.last_start + n.last_seconds <= nodes[k + 1].last_start);
        }
        for (const qtk::ThreadRange& r : n.last_ranges) {
            CHECK(r.thread >= 0 && r.thread < 2);
            CHECK(r.start >= n.last_start && r.start + r.seconds <= n.last_start + n.last_seconds);
        }
        ranges += n.last_ranges.size();
    }
    CHECK(ranges > 0);
}

}  // namespace

int main() {
    test_random_lifetimes();
    test_known_plans();
    test_session_plans();
    test_shared_arena();
    test_float_element_sizes();
    test_keep_intermediates();
    test_profile_timeline();
    return qtk_test::check_report();
}
