// image_to_int8 (docs/quantization_spec.md section 23) against tiny cases computed by hand, and
// the loader's checks of its uint8 input and attributes.
#include <cstdint>
#include <vector>

#include "check.h"
#include "model_builder.h"
#include "qtk/runtime.h"

using qtk_test::AttrSpec;
using qtk_test::ModelBuilder;

namespace {

constexpr uint8_t kUInt8 = 6;

struct ImageCase {
    std::vector<int64_t> image_dims;  // [N, H, W, Cin]
    std::vector<int64_t> size, crop, channels;
    int64_t interpolation;
    std::vector<int64_t> output_dims;  // [N, C, h, w]
};

// table[c][p] = p - 128 for channel 0 and 127 - p for channel 1, so the int8 output shows the
// resized pixel itself.
ModelBuilder image_model(const ImageCase& c) {
    ModelBuilder b;
    const uint32_t x = b.activation("image", c.image_dims, 0.0f, 0);
    b.values[x].dtype = kUInt8;
    std::vector<int8_t> table;
    for (size_t ch = 0; ch < c.channels.size(); ++ch) {
        for (int p = 0; p < 256; ++p) {
            table.push_back(static_cast<int8_t>(ch == 0 ? p - 128 : 127 - p));
        }
    }
    const uint32_t t =
        b.weight("image.table", {static_cast<int64_t>(c.channels.size()), 256}, table);
    const uint32_t y = b.activation("x", c.output_dims, 0.1f, 0);
    b.inputs = {x};
    b.outputs = {y};
    b.node("image_to_int8", "image", {x, t}, {y},
           {AttrSpec("size", c.size), AttrSpec("interpolation", {c.interpolation}),
            AttrSpec("crop", c.crop), AttrSpec("channels", c.channels)});
    return b;
}

std::vector<int8_t> run(const ImageCase& c, const std::vector<uint8_t>& pixels) {
    const std::vector<uint8_t> bytes = image_model(c).build();
    auto model = qtk::Model::from_bytes(bytes.data(), bytes.size());
    qtk::Session session(model);
    return session.run_image(pixels.data(), c.image_dims)[0].data;
}

std::vector<int8_t> minus_128(const std::vector<int>& pixels) {
    std::vector<int8_t> out;
    for (int p : pixels) {
        out.push_back(static_cast<int8_t>(p - 128));
    }
    return out;
}

// 2x2 -> 4x4 bilinear. Taps of 2 -> 4: o = 0 lies before the first centre (0, 0, w 0); o = 1:
// coordinate (3*2 - 4) / 8 = 0.25 -> (0, 1, w 512); o = 2: 0.75 -> (0, 1, 1536); o = 3: 1.25 ->
// (1, 1, 512). Element (1, 1): (1536*1536*0 + 1536*512*100 + 512*1536*200 + 512*512*40 + 2^21)
// >> 22 = (246415360 + 2097152) >> 22 = 59.
void test_bilinear_2x2_to_4x4() {
    const ImageCase c{{1, 2, 2, 1}, {4, 4}, {0, 0, 4, 4}, {0}, 1, {1, 1, 4, 4}};
    const std::vector<int8_t> expected =
        minus_128({0, 25, 75, 100, 50, 59, 76, 85, 150, 126, 79, 55, 200, 160, 80, 40});
    CHECK(run(c, {0, 100, 200, 40}) == expected);
}

// 2x2 -> 3x3 bilinear, cropped to the 2x2 bottom-right: taps of 2 -> 3 are (0, 0, 0),
// (0, 1, 1024) and (1, 1, (4096 + 6) / 12 = 341), so rows 1..2, columns 1..2 of
// [[0, 50, 100], [100, 85, 70], [200, 120, 40]].
void test_bilinear_crop() {
    const ImageCase c{{1, 2, 2, 1}, {3, 3}, {1, 1, 2, 2}, {0}, 1, {1, 1, 2, 2}};
    CHECK(run(c, {0, 100, 200, 40}) == minus_128({85, 70, 120, 40}));
}

// 3x3 with 2 channels (c0 = 10 * index, c1 = 200 + index) -> 2x2 nearest: source index
// ((2 o + 1) * 3) / 4 = 0 and 2; crop the right column (left 1, width 1); channels swapped.
void test_nearest_crop_and_channel_order() {
    std::vector<uint8_t> pixels;
    for (int i = 0; i < 9; ++i) {
        pixels.push_back(static_cast<uint8_t>(10 * i));
        pixels.push_back(static_cast<uint8_t>(200 + i));
    }
    const ImageCase c{{1, 3, 3, 2}, {2, 2}, {0, 1, 2, 1}, {1, 0}, 0, {1, 2, 2, 1}};
    // output channel 0 reads source channel 1 (table p - 128) at source (0, 2) and (2, 2):
    // 202 and 208; output channel 1 reads source channel 0 (table 127 - p): 20 and 80.
    const std::vector<int8_t> expected = {202 - 128, 208 - 128, 127 - 20, 127 - 80};
    CHECK(run(c, pixels) == expected);
}

void test_batch_of_two_is_two_images() {
    const ImageCase c{{1, 2, 2, 1}, {4, 4}, {0, 0, 4, 4}, {0}, 1, {1, 1, 4, 4}};
    const std::vector<uint8_t> bytes = image_model(c).build();
    qtk::Session session(qtk::Model::from_bytes(bytes.data(), bytes.size()), {2});
    const std::vector<uint8_t> two = {0, 100, 200, 40, 0, 100, 200, 40};
    const std::vector<int8_t> out = session.run_image(two.data(), {2, 2, 2, 1})[0].data;
    const std::vector<int8_t> once = run(c, {0, 100, 200, 40});
    CHECK(std::vector<int8_t>(out.begin(), out.begin() + 16) == once);
    CHECK(std::vector<int8_t>(out.begin() + 16, out.end()) == once);
}

void check_refused(const ModelBuilder& b, const char* message) {
    const std::vector<uint8_t> bytes = b.build();
    CHECK_THROWS_WITH(qtk::Model::from_bytes(bytes.data(), bytes.size()), message);
}

void test_loader_refusals() {
    const ImageCase c{{1, 2, 2, 1}, {4, 4}, {0, 0, 4, 4}, {0}, 1, {1, 1, 4, 4}};
    ModelBuilder b = image_model(c);
    b.nodes[0].attrs[2] = AttrSpec("crop", {1, 0, 4, 4});
    check_refused(b, "attribute 'crop' = [top 1, left 0, height 4, width 4] is not a non-empty "
                     "window inside the resized image 'size' = [4, 4]");
    b = image_model(c);
    b.nodes[0].attrs[3] = AttrSpec("channels", {1});
    check_refused(b, "attribute 'channels'[0] = 1 is outside [0, 0]");
    b = image_model(c);
    b.values[2].dims = {1, 1, 4, 3};
    check_refused(b, "has shape [1, 1, 4, 3] in the file, but the op computes [1, 1, 4, 4]");
    b = image_model(c);
    b.values[0].scale = 0.5f;
    check_refused(b, "scale 0.500000 must be 0 for a uint8 activation");
    b = image_model(c);
    b.values[1].dtype = kUInt8;
    check_refused(b, "uint8 is for an image graph input only, not for constants");
    b = image_model(c);  // the image read by another op
    b.node("clamp", "after", {0}, {b.activation("z", {1, 2, 2, 1}, 0.1f, 0)},
           {AttrSpec("clamp", {-128, 127})});
    check_refused(b, "is uint8, which only an image_to_int8 node reads");
    b = image_model(c);
    b.outputs = {0};
    check_refused(b, "is uint8; outputs are int8 or float32 activations");
}

void test_run_image_needs_a_uint8_input() {
    ModelBuilder b;
    const uint32_t x = b.activation("x", {1, 4}, 0.1f, 0);
    const uint32_t y = b.activation("y", {1, 4}, 0.1f, 0);
    b.inputs = {x};
    b.outputs = {y};
    b.node("clamp", "c", {x}, {y}, {AttrSpec("clamp", {-128, 127})});
    const std::vector<uint8_t> bytes = b.build();
    qtk::Session session(qtk::Model::from_bytes(bytes.data(), bytes.size()));
    const uint8_t pixels[4] = {};
    CHECK_THROWS_WITH(session.run_image(pixels, {1, 4}),
                      "run_image: the model's graph input 0 ('x') is int8");
}

void test_quantize_input_refuses_the_image() {
    const ImageCase c{{1, 2, 2, 1}, {4, 4}, {0, 0, 4, 4}, {0}, 1, {1, 1, 4, 4}};
    const std::vector<uint8_t> bytes = image_model(c).build();
    qtk::Session session(qtk::Model::from_bytes(bytes.data(), bytes.size()));
    const float x = 0.5f;
    int8_t q = 0;
    CHECK_THROWS_WITH(session.quantize_input(0, &x, 1, &q),
                      "input 0 is uint8; pass the uint8 image itself (run_image)");
}

}  // namespace

int main() {
    test_bilinear_2x2_to_4x4();
    test_bilinear_crop();
    test_nearest_crop_and_channel_order();
    test_batch_of_two_is_two_images();
    test_loader_refusals();
    test_run_image_needs_a_uint8_input();
    test_quantize_input_refuses_the_image();
    return qtk_test::check_report();
}
