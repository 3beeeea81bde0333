// Fast-Run: a search picks one of each layer's candidates and records it; a later load with the
// cache chooses the same kernels without timing; cache entries for another CPU, version or layer
// are ignored; a malformed cache is an error naming the line. Outputs never change.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "check.h"
#include "fast_run.h"
#include "model_builder.h"
#include "qtk/runtime.h"

namespace {

using Bytes = std::vector<uint8_t>;

const char* kCache = "test_fast_run.cache";

std::shared_ptr<const qtk::Model> load(const Bytes& bytes, qtk::FastRun mode) {
    qtk::LoadOptions options;
    options.fast_run = mode;
    options.fast_run_cache = kCache;
    return qtk::Model::from_bytes(bytes.data(), bytes.size(), options);
}

std::vector<std::vector<int8_t>> run(const std::shared_ptr<const qtk::Model>& model) {
    qtk::Session session(model);
    std::vector<int8_t> x(72);
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<int8_t>(i * 37 % 256 - 128);
    }
    std::vector<std::vector<int8_t>> outputs;
    for (const qtk::Tensor& t : session.run({x.data()}, {{1, 2, 6, 6}})) {
        outputs.push_back(t.data);
    }
    return outputs;
}

std::vector<std::string> cache_lines() {
    std::ifstream in(kCache);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] != '#') {
            lines.push_back(line);
        }
    }
    return lines;
}

void write_cache(const std::string& text) {
    std::ofstream(kCache, std::ios::trunc) << text;
}

void test_search_then_use() {
    std::remove(kCache);
    const Bytes bytes = qtk_test::sample_model().build();
    const auto plain = load(bytes, qtk::FastRun::kOff);
    const auto searched = load(bytes, qtk::FastRun::kSearch);
    // The sample's int8 ops with several algorithms: conv2d, linear, add and prelu only where a
    // vector ISA runs; concat, max_pool2d, avg_pool2d and global_avg_pool2d everywhere (portable
    // fast paths).
    const std::set<std::string> vector_ops = {"conv2d", "linear", "add", "prelu"};
    const std::set<std::string> portable_ops = {"concat", "max_pool2d", "avg_pool2d",
                                                "global_avg_pool2d"};
    size_t vector_layers = 0, portable_layers = 0;
    for (size_t i = 0; i < plain->op_names().size(); ++i) {
        const std::string op = plain->op_names()[i];
        if (vector_ops.count(op) + portable_ops.count(op) > 0) {
            ++(vector_ops.count(op) > 0 ? vector_layers : portable_layers);
            CHECK(searched->algorithms()[i].rfind(op + "_int8_", 0) == 0);
        } else {
            CHECK(searched->algorithms()[i] == "reference");
        }
    }
    CHECK(vector_layers > 0 && portable_layers > 0);
    // A layer with a single candidate (a CPU with no vector ISA) needs no search and no line.
    const bool several = qtk::detail::conv2d_algos(qtk::DType::kInt8).size() > 1 &&
                         plain->algorithms()[0] != "conv2d_int8_reference";
    CHECK_EQ(cache_lines().size(), (several ? vector_layers : 0u) + portable_layers);

    const auto used = load(bytes, qtk::FastRun::kUse);
    CHECK(used->algorithms() == searched->algorithms());
    CHECK(run(used) == run(plain));
    CHECK(run(searched) == run(plain));
    std::remove(kCache);
}

void test_cache_entries_must_match() {
    const Bytes bytes = qtk_test::sample_model().build();
    const auto plain = load(bytes, qtk::FastRun::kOff);
    if (plain->algorithms()[0] == "conv2d_int8_reference") {
        return;  // only the reference runs here: nothing to choose
    }
    // The first conv2d layer's key, as a search records it (the first conv2d line: keys sort by
    // op, then by input shape).
    std::remove(kCache);
    load(bytes, qtk::FastRun::kSearch);
    const std::vector<std::string> lines = cache_lines();
    const std::string line = *std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
        return l.find("\tconv2d_int8_") != std::string::npos;
    });
    const std::string key = line.substr(0, line.find('\t'));

    // A cached choice is honoured, even one that is not the default.
    write_cache(key + "\tconv2d_int8_reference\n");
    CHECK(load(bytes, qtk::FastRun::kUse)->algorithms()[0] == "conv2d_int8_reference");

    // Another qtk version (or CPU) does not match: the default choice stands.
    const std::string version = std::string("qtk ") + qtk::kVersion;
    std::string stale = key;
    stale.replace(stale.find(version), version.size(), "qtk 0.0.0-other");
    write_cache(stale + "\tconv2d_int8_reference\n");
    CHECK(load(bytes, qtk::FastRun::kUse)->algorithms()[0] == plain->algorithms()[0]);

    // An algorithm this build lacks is ignored too.
    write_cache(key + "\tconv2d_int8_from_the_future\n");
    CHECK(load(bytes, qtk::FastRun::kUse)->algorithms()[0] == plain->algorithms()[0]);
    std::remove(kCache);
}

void test_malformed_cache() {
    const Bytes bytes = qtk_test::sample_model().build();
    write_cache("# comment\nno tab on this line\n");
    CHECK_THROWS_WITH(load(bytes, qtk::FastRun::kUse), "line 2");
    std::remove(kCache);
}

}  // namespace

int main() {
    test_search_then_use();
    test_cache_entries_must_match();
    test_malformed_cache();
    return qtk_test::check_report();
}
