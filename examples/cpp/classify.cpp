// qtk_classify: loads a .qmodel, reads an image, runs the model and prints the top-5 classes.
//   qtk_classify model.qmodel image.ppm [--mean M[,M,M]] [--std S[,S,S]] [--top K] [--threads N]
// The image is a binary PNM (P5 grey or P6 RGB, 8 bits). A model exported with image= (its input
// is a uint8 image [N, H, W, C]) takes its pixels as they are, through Session::run_image: the
// runtime resizes, crops, orders channels and normalizes as training did, so the image must have
// the size and channel count the model was exported for (and its channel order: a PPM is RGB).
// For any other model the example prepares the input itself: scaled to [0, 1], normalized per
// channel by (x - mean) / std, converted to the model's channel count (grey to RGB by copying, RGB
// to grey by the mean of its channels) and resized to the model's input by the nearest pixel, then
// fed to the model's first input, quantized by the runtime where that input is int8. The scores
// are the first output, dequantized where it is int8.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "qtk/runtime.h"

namespace {

struct Image {
    int64_t height = 0, width = 0, channels = 0;
    std::vector<uint8_t> pixels;  // [height][width][channels]
};

// A PNM header token, skipping whitespace and '#' comments.
std::string next_token(std::istream& in) {
    std::string token;
    for (int c = in.get(); c != EOF; c = in.get()) {
        if (c == '#') {
            std::string comment;
            std::getline(in, comment);
        } else if (std::isspace(c)) {
            if (!token.empty()) {
                return token;
            }
        } else {
            token += static_cast<char>(c);
        }
    }
    return token;
}

Image read_pnm(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw qtk::Error("image '" + path + "': cannot open it");
    }
    const std::string magic = next_token(in);
    if (magic != "P5" && magic != "P6") {
        throw qtk::Error("image '" + path + "': not a binary PGM or PPM (P5 or P6); convert it, " +
                         "e.g. with ImageMagick's `convert photo.jpg photo.ppm`");
    }
    Image image;
    image.channels = magic == "P5" ? 1 : 3;
    try {
        image.width = std::stoll(next_token(in));
        image.height = std::stoll(next_token(in));
        if (std::stoll(next_token(in)) != 255) {
            throw qtk::Error("image '" + path + "': only 8-bit images (maxval 255) are read");
        }
    } catch (const std::logic_error&) {
        throw qtk::Error("image '" + path + "': a malformed PNM header");
    }
    if (image.width < 1 || image.height < 1 || image.width > 1 << 15 || image.height > 1 << 15) {
        throw qtk::Error("image '" + path + "': its size is out of range");
    }
    image.pixels.resize(size_t(image.height * image.width * image.channels));
    in.read(reinterpret_cast<char*>(image.pixels.data()), std::streamsize(image.pixels.size()));
    if (in.gcount() != std::streamsize(image.pixels.size())) {
        throw qtk::Error("image '" + path + "': the file ends before its pixels do");
    }
    return image;
}

// "0.5" or "0.485,0.456,0.406" -> one value per channel.
std::vector<float> per_channel(const std::string& text, int64_t channels) {
    std::vector<float> values;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        values.push_back(std::stof(item));
    }
    if (values.size() == 1) {
        values.resize(size_t(channels), values[0]);
    }
    if (int64_t(values.size()) != channels) {
        throw qtk::Error("--mean and --std take one value or one per channel (" +
                         std::to_string(channels) + ")");
    }
    return values;
}

// The image as the model's input [1, C, H, W], normalized.
std::vector<float> to_input(const Image& image, const qtk::Shape& shape,
                            const std::vector<float>& mean, const std::vector<float>& std_dev) {
    const int64_t channels = shape[1], height = shape[2], width = shape[3];
    std::vector<float> x(size_t(channels * height * width));
    for (int64_t c = 0; c < channels; ++c) {
        for (int64_t y = 0; y < height; ++y) {
            for (int64_t xx = 0; xx < width; ++xx) {
                const uint8_t* pixel =
                    image.pixels.data() +
                    ((y * image.height / height) * image.width + xx * image.width / width) *
                        image.channels;
                float value = 0.0f;
                if (image.channels == channels) {
                    value = pixel[c];
                } else if (image.channels == 1) {
                    value = pixel[0];
                } else {
                    value = (float(pixel[0]) + float(pixel[1]) + float(pixel[2])) / 3.0f;
                }
                x[size_t((c * height + y) * width + xx)] =
                    (value / 255.0f - mean[size_t(c)]) / std_dev[size_t(c)];
            }
        }
    }
    return x;
}

// A model exported with image=: its pixels go in as they are, the runtime preprocesses them.
qtk::Tensor run_image_model(qtk::Session& session, const Image& image, const std::string& path,
                            bool normalization_given) {
    const qtk::TensorInfo& input = session.model().inputs()[0];
    if (normalization_given) {
        throw qtk::Error("the model normalizes its images itself (it was exported with image=); "
                         "leave out --mean and --std");
    }
    const qtk::Shape shape{1, image.height, image.width, image.channels};
    if (!std::equal(shape.begin() + 1, shape.end(), input.shape.begin() + 1)) {
        throw qtk::Error("image '" + path + "' is " + qtk::to_string(shape) +
                         " (N, height, width, channels), but the model takes uint8 images " +
                         qtk::batch_shape_pattern(input.shape) +
                         ", the size it was exported for: its resize and crop start from there");
    }
    return session.run_image(image.pixels.data(), shape).at(0);
}

// Any other model: the float input prepared here, quantized by the runtime for an int8 input.
qtk::Tensor run_tensor_model(qtk::Session& session, const Image& image,
                             const std::string& mean_text, const std::string& std_text) {
    const qtk::TensorInfo& input = session.model().inputs()[0];
    qtk::Shape shape = input.shape;
    shape[0] = 1;
    const std::vector<float> x = to_input(image, shape, per_channel(mean_text, shape[1]),
                                          per_channel(std_text, shape[1]));
    std::vector<int8_t> quantized;
    const void* data = x.data();
    if (input.dtype == qtk::DType::kInt8) {
        quantized.resize(x.size());
        session.quantize_input(0, x.data(), x.size(), quantized.data());
        data = quantized.data();
    }
    return session.run({data}, {shape}).at(0);
}

int classify(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr,
                     "usage: qtk_classify model.qmodel image.ppm [--mean M[,M,M]] "
                     "[--std S[,S,S]] [--top K] [--threads N]\n");
        return 2;
    }
    std::string mean_text = "0", std_text = "1";
    bool normalization_given = false;
    int top = 5, threads = 1;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string option = argv[i];
        if (option == "--mean") {
            mean_text = argv[i + 1];
            normalization_given = true;
        } else if (option == "--std") {
            std_text = argv[i + 1];
            normalization_given = true;
        } else if (option == "--top") {
            top = std::max(1, std::atoi(argv[i + 1]));
        } else if (option == "--threads") {
            threads = std::max(1, std::atoi(argv[i + 1]));
        } else {
            throw qtk::Error("unknown option " + option);
        }
    }
    const auto model = qtk::Model::load(argv[1]);
    const qtk::TensorInfo& input = model->inputs().at(0);
    if (input.shape.size() != 4) {
        throw qtk::Error("the model's input is " + qtk::to_string(input.shape) +
                         "; an image model takes [N, C, H, W], or [N, H, W, C] uint8 images");
    }
    const Image image = read_pnm(argv[2]);
    qtk::Session session(model, {threads});
    const qtk::Tensor out = input.dtype == qtk::DType::kUInt8
                                ? run_image_model(session, image, argv[2], normalization_given)
                                : run_tensor_model(session, image, mean_text, std_text);
    std::vector<float> scores = out.float_data;
    if (out.dtype == qtk::DType::kInt8) {
        scores.resize(out.data.size());
        session.dequantize_output(0, out.data.data(), out.data.size(), scores.data());
    }
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    const size_t k = std::min(order.size(), size_t(top));
    // Highest score first; equal scores (int8 outputs tie often) by class index.
    std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                      [&](size_t a, size_t b) {
                          return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
                      });
    for (size_t i = 0; i < k; ++i) {
        std::printf("%zu %.6f\n", order[i], double(scores[order[i]]));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return classify(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "qtk_classify: %s\n", e.what());
        return 1;
    }
}
