// Writes test models as .qmodel files into a directory: a seed corpus for the libFuzzer target,
// and inputs for qtk_run and for smoke tests of the Python binding.
//   qtk_write_test_models <dir>
#include <cstdio>
#include <fstream>

#include "model_builder.h"

namespace {

bool write(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    if (!out) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return false;
    }
    std::printf("wrote %s\n", path.c_str());
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: qtk_write_test_models <dir>\n");
        return 1;
    }
    const std::string dir = argv[1];
    const bool ok = write(dir + "/sample.qmodel", qtk_test::sample_model().build()) &&
                    write(dir + "/int8_ops.qmodel", qtk_test::int8_ops_model().build()) &&
                    write(dir + "/mixed.qmodel", qtk_test::mixed_model().build()) &&
                    write(dir + "/add.qmodel", qtk_test::add_model().build()) &&
                    write(dir + "/transformer.qmodel", qtk_test::transformer_model().build()) &&
                    write(dir + "/int8_attention.qmodel",
                          qtk_test::int8_attention_model().build()) &&
                    write(dir + "/image.qmodel", qtk_test::image_model().build());
    return ok ? 0 : 1;
}
