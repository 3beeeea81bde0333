// image_to_int8, reference: docs/quantization_spec.md section 23. A uint8 image [N, H, W, Cin]
// (channels last, as decoders give it) -> int8 [N, C, h, w]: an integer resize to size[0] x
// size[1] (nearest, or bilinear with 1/2048 weights and one rounding), the crop rows
// [top, top + h) and columns [left, left + w) of the resized image, output channel c read from
// source channel channels[c], then table[c][p]: normalize and quantize, tabulated at export.
// Only the cropped pixels are computed. Plain loops, the oracle for any faster kernel.
#include <algorithm>
#include <string>
#include <vector>

#include "op_kernel.h"
#include "thread_pool.h"

namespace qtk {
namespace detail {
namespace {

constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
constexpr int64_t kWeightOne = 2048;  // bilinear weights in units of 1/2048
constexpr int64_t kNearest = 0, kBilinear = 1;

// One output index's source taps along an axis of n_in resized to n_out (spec 23): nearest uses
// i0 only; bilinear reads i0 with weight 2048 - w and i1 with weight w.
struct Tap {
    int64_t i0, i1, w;
};

Tap resize_tap(int64_t o, int64_t n_in, int64_t n_out, int64_t interpolation) {
    if (interpolation == kNearest) {
        const int64_t i = std::min((2 * o + 1) * n_in / (2 * n_out), n_in - 1);
        return {i, i, 0};
    }
    const int64_t num = (2 * o + 1) * n_in - n_out;  // the source coordinate is num / den
    const int64_t den = 2 * n_out;
    if (num < 0) {
        return {0, 0, 0};
    }
    const int64_t i0 = std::min(num / den, n_in - 1);
    const int64_t r = num - (num / den) * den;
    return {i0, std::min(i0 + 1, n_in - 1), (2 * kWeightOne * r + den) / (2 * den)};
}

class ImageToInt8Reference final : public OpKernel {
 public:
    explicit ImageToInt8Reference(const NodeView& node) : OpKernel(node.label()) {
        node.expect_input_count(2);
        node.expect_output_count(1);
        node.expect_attrs({"size", "interpolation", "crop", "channels"});
        const Value& image = node.activation_input(0, DType::kUInt8);
        const Value& table = node.constant_input(1, "table", DType::kInt8, 2);
        node.output(0, DType::kInt8);
        if (image.shape.size() != 4) {
            node.fail("input 0 '" + image.name + "' must be a uint8 image [N, H, W, C], got " +
                      to_string(image.shape));
        }
        height_ = image.shape[1];
        width_ = image.shape[2];
        in_channels_ = image.shape[3];
        const std::vector<int64_t> size = node.ints("size", 2, 1, kMaxDim);
        interpolation_ = node.int_scalar("interpolation", kNearest, kBilinear);
        const std::vector<int64_t> crop = node.ints("crop", 4, 0, kMaxDim);
        channels_ = node.int_list("channels", 0, in_channels_ - 1);
        if (channels_.empty()) {
            node.fail("attribute 'channels' is empty; it holds one source channel per output "
                      "channel");
        }
        top_ = crop[0];
        left_ = crop[1];
        out_h_ = crop[2];
        out_w_ = crop[3];
        if (out_h_ < 1 || out_w_ < 1 || top_ + out_h_ > size[0] || left_ + out_w_ > size[1]) {
            node.fail("attribute 'crop' = [top " + std::to_string(top_) + ", left " +
                      std::to_string(left_) + ", height " + std::to_string(out_h_) +
                      ", width " + std::to_string(out_w_) +
                      "] is not a non-empty window inside the resized image 'size' = " +
                      to_string(Shape{size[0], size[1]}));
        }
        const Shape want_table{static_cast<int64_t>(channels_.size()), 256};
        if (table.shape != want_table) {
            node.fail("input 1 'table' has shape " + to_string(table.shape) + ", expected " +
                      to_string(want_table) + " (one row of 256 int8 values per output channel)");
        }
        table_ = reinterpret_cast<const int8_t*>(table.data);
        for (int64_t y = 0; y < out_h_; ++y) {
            rows_.push_back(resize_tap(top_ + y, height_, size[0], interpolation_));
        }
        for (int64_t x = 0; x < out_w_; ++x) {
            cols_.push_back(resize_tap(left_ + x, width_, size[1], interpolation_));
        }
    }

    std::vector<Shape> infer_shapes(const std::vector<Shape>& inputs) const override {
        const Shape& x = inputs[0];
        expect_rank(x, 4, "input");
        if (x[1] != height_ || x[2] != width_ || x[3] != in_channels_) {
            fail("input shape " + to_string(x) + " differs from the file's " +
                 batch_shape_pattern({1, height_, width_, in_channels_}));
        }
        return {{x[0], static_cast<int64_t>(channels_.size()), out_h_, out_w_}};
    }

    void run(const NodeIO& io, ThreadPool& pool) const override {
        const int64_t batch = (*io.input_shapes[0])[0];
        const int64_t channels = static_cast<int64_t>(channels_.size());
        const int64_t row_stride = width_ * in_channels_;
        pool.parallel_for(batch * channels, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const int64_t n = plane / channels, c = plane % channels;
                const uint8_t* image =
                    io.input<uint8_t>(0) + n * height_ * row_stride + channels_[c];
                const int8_t* table = table_ + c * 256;
                int8_t* y = io.output<int8_t>(0) + plane * out_h_ * out_w_;
                for (int64_t oy = 0; oy < out_h_; ++oy) {
                    const Tap& r = rows_[oy];
                    for (int64_t ox = 0; ox < out_w_; ++ox) {
                        const Tap& k = cols_[ox];
                        int64_t p;
                        if (interpolation_ == kNearest) {
                            p = image[r.i0 * row_stride + k.i0 * in_channels_];
                        } else {
                            const int64_t p00 = image[r.i0 * row_stride + k.i0 * in_channels_];
                            const int64_t p01 = image[r.i0 * row_stride + k.i1 * in_channels_];
                            const int64_t p10 = image[r.i1 * row_stride + k.i0 * in_channels_];
                            const int64_t p11 = image[r.i1 * row_stride + k.i1 * in_channels_];
                            const int64_t acc = (kWeightOne - r.w) * (kWeightOne - k.w) * p00 +
                                                (kWeightOne - r.w) * k.w * p01 +
                                                r.w * (kWeightOne - k.w) * p10 + r.w * k.w * p11;
                            p = (acc + (int64_t{1} << 21)) >> 22;
                        }
                        y[oy * out_w_ + ox] = table[p];
                    }
                }
            }
        });
    }

 private:
    int64_t height_ = 0, width_ = 0, in_channels_ = 0;
    int64_t interpolation_ = kNearest;
    int64_t top_ = 0, left_ = 0, out_h_ = 0, out_w_ = 0;
    std::vector<int64_t> channels_;  // the source channel of each output channel
    const int8_t* table_ = nullptr;  // [C, 256], in the model's bytes
    std::vector<Tap> rows_, cols_;   // the taps of each output row and column (crop included)
};

}  // namespace

std::unique_ptr<OpKernel> make_image_to_int8_reference(const NodeView& node) {
    return std::make_unique<ImageToInt8Reference>(node);
}

}  // namespace detail
}  // namespace qtk
