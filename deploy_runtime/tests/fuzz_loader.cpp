// Fuzzing the loader: fuzz_one() loads arbitrary bytes and, when they load, runs one small batch.
// The only acceptable failure is qtk::Error; a crash, a sanitizer report or any other exception is
// a bug.
//
// Built two ways:
//   QTK_LIBFUZZER defined: the libFuzzer entry point (clang -fsanitize=fuzzer); seed it with the
//     files qtk_write_test_models writes.
//   otherwise: a deterministic ctest driver applying seeded mutations to valid builder models.
// The graph section is CRC-checked, so each input is also tried with file_size and CRC repaired;
// otherwise almost every mutation would stop at the checksum.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <string>

#include "model_builder.h"
#include "qtk/runtime.h"

namespace {

constexpr int64_t kMaxFuzzInputElements = 1 << 20;  // keeps each run fast

// How far an input got, for the driver's summary.
enum Outcome { kRefused, kLoaded, kRan, kOutcomes };

Outcome fuzz_one(const uint8_t* data, size_t size) {
    Outcome outcome = kRefused;
    try {
        const std::shared_ptr<const qtk::Model> model = qtk::Model::from_bytes(data, size);
        outcome = kLoaded;
        // Each input at a batch other than the file's, so the session re-plans. An input the
        // loader accepts may still need gigabytes of arena (2^31 - 1 elements each): such a model
        // is not run, nor planned (a 5 GB plan is an out-of-memory under libFuzzer).
        std::vector<qtk::Shape> shapes;
        std::vector<int64_t> counts;
        for (const qtk::TensorInfo& info : model->inputs()) {
            qtk::Shape shape = info.shape;
            shape[0] = 2;
            int64_t count = 1;
            for (int64_t d : shape) {
                count *= d;  // each dim below 2^31, and the product of the rest too
            }
            if (count > kMaxFuzzInputElements) {
                return outcome;
            }
            shapes.push_back(shape);
            counts.push_back(count);
        }
        qtk::Session session(model, {1});
        std::vector<std::vector<int8_t>> int8_buffers;
        std::vector<std::vector<float>> float_buffers;
        std::vector<const void*> inputs;
        for (size_t i = 0; i < shapes.size(); ++i) {
            const qtk::TensorInfo& info = model->inputs()[i];
            const int64_t count = counts[i];
            if (info.dtype == qtk::DType::kFloat32) {
                float_buffers.emplace_back(static_cast<size_t>(count), -0.7f);
                inputs.push_back(float_buffers.back().data());
            } else {
                int8_buffers.emplace_back(static_cast<size_t>(count), int8_t{-7});
                inputs.push_back(int8_buffers.back().data());
            }
        }
        session.run(inputs, shapes);
        outcome = kRan;
    } catch (const qtk::Error&) {
    }
    return outcome;
}

// Counts outcomes of the bytes as given and, where that differs, with the header repaired.
void fuzz_with_repair(const std::vector<uint8_t>& bytes, int* counts) {
    ++counts[fuzz_one(bytes.data(), bytes.size())];
    std::vector<uint8_t> repaired = bytes;
    qtk_test::refresh_header(repaired);
    if (repaired != bytes) {
        ++counts[fuzz_one(repaired.data(), repaired.size())];
    }
}

}  // namespace

#ifdef QTK_LIBFUZZER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    int counts[kOutcomes] = {};
    fuzz_with_repair(std::vector<uint8_t>(data, data + size), counts);
    return 0;
}

#else

namespace {

// One random structural edit of the file.
void mutate(std::vector<uint8_t>& bytes, qtk_test::Rng& rng) {
    static const uint32_t kU32Boundaries[] = {0,
                                              1,
                                              2,
                                              7,
                                              8,
                                              9,
                                              63,
                                              64,
                                              65,
                                              4096,
                                              4097,
                                              0x7FFFFFFF,
                                              0x80000000u,
                                              0xFFFFFFFEu,
                                              0xFFFFFFFFu,
                                              1u << 20,
                                              (1u << 20) + 1};
    static const uint64_t kU64Boundaries[] = {
        0,          1,          63,    64,        0x7FFFFFFF, 0x80000000ull, 0xFFFFFFFFull,
        1ull << 62, 1ull << 63, ~0ull, ~0ull - 63};
    const auto position = [&](size_t width) {
        return static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(bytes.size() - width)));
    };
    if (bytes.empty()) {
        bytes.push_back(static_cast<uint8_t>(rng.next()));
        return;
    }
    switch (rng.uniform(0, 8)) {
        case 0:
            bytes[position(1)] ^= static_cast<uint8_t>(1u << rng.uniform(0, 7));
            break;
        case 1:
            bytes[position(1)] = 0;
            break;
        case 2:
            bytes[position(1)] = 0xFF;
            break;
        case 3:
            bytes[position(1)] = static_cast<uint8_t>(rng.next());
            break;
        case 4:
            bytes.resize(
                static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(bytes.size()) - 1)));
            break;
        case 5: {
            const size_t at = position(0);
            const size_t n = static_cast<size_t>(rng.uniform(1, 16));
            for (size_t i = 0; i < n; ++i) {
                bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             static_cast<uint8_t>(rng.next()));
            }
            break;
        }
        case 6:
            if (bytes.size() >= 4) {
                qtk_test::put_u32(bytes, position(4),
                                  kU32Boundaries[rng.uniform(
                                      0, static_cast<int64_t>(std::size(kU32Boundaries)) - 1)]);
            }
            break;
        case 7:
            if (bytes.size() >= 8) {
                qtk_test::put_u64(bytes, position(8),
                                  kU64Boundaries[rng.uniform(
                                      0, static_cast<int64_t>(std::size(kU64Boundaries)) - 1)]);
            }
            break;
        default: {  // a small signed nudge to a u32, so counts and ids stay plausible
            if (bytes.size() >= 4) {
                const size_t at = position(4);
                uint32_t v = 0;
                for (int i = 0; i < 4; ++i) {
                    v |= uint32_t{bytes[at + i]} << (8 * i);
                }
                qtk_test::put_u32(bytes, at, v + static_cast<uint32_t>(rng.uniform(-3, 3)));
            }
            break;
        }
    }
}

}  // namespace

// test_fuzz_loader [iterations] [seed]: longer or different runs than the ctest default.
int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 20000;
    qtk_test::Rng rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20240601);
    // The models that together use every op and every dtype, and the smallest multi-input one.
    const std::vector<uint8_t> seeds[] = {
        qtk_test::sample_model().build(), qtk_test::int8_ops_model().build(),
        qtk_test::mixed_model().build(), qtk_test::add_model().build(),
        qtk_test::transformer_model().build(), qtk_test::int8_attention_model().build(),
        qtk_test::image_model().build()};
    int counts[kOutcomes] = {};
    for (int i = 0; i < iterations; ++i) {
        std::vector<uint8_t> bytes = seeds[i % std::size(seeds)];
        const int edits = static_cast<int>(rng.uniform(1, 4));
        for (int e = 0; e < edits; ++e) {
            mutate(bytes, rng);
        }
        try {
            fuzz_with_repair(bytes, counts);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "mutation %d: unexpected exception: %s\n", i, e.what());
            return 1;
        } catch (...) {
            std::fprintf(stderr, "mutation %d: unexpected non-standard exception\n", i);
            return 1;
        }
    }
    std::printf(
        "%d mutations: only qtk::Error was thrown (inputs refused %d, loaded but not run %d, ran "
        "%d)\n",
        iterations, counts[kRefused], counts[kLoaded], counts[kRan]);
    return 0;
}

#endif
