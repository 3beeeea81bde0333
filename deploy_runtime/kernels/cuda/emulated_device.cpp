// The CUDA kernels' host twins as a Device (src/device.h): memory is host memory, and each launch
// runs the kernel's GPU code for every thread in turn on the CPU (docs/cuda.md). It lets the CPU
// tests run a DeviceSession's whole plan (layouts, packing, arena offsets) through the GPU's code.
#include <chrono>
#include <cstring>

#include "aligned_buffer.h"
#include "conv2d_int8_dp4a.h"
#include "conv2d_int8_mma.h"
#include "device.h"

namespace qtk {
namespace {

class EmulatedCudaDevice final : public Device {
 public:
    explicit EmulatedCudaDevice(bool tensor_cores) : tensor_cores_(tensor_cores) {}

    std::string name() const override {
        return "emulated CUDA (host twins, " + conv2d_kernels()[0] + " first)";
    }
    // Both, as a GPU with tensor cores has them; `tensor_cores` puts mma first.
    std::vector<std::string> conv2d_kernels() const override {
        if (tensor_cores_) {
            return {"conv2d_int8_mma", "conv2d_int8_dp4a"};
        }
        return {"conv2d_int8_dp4a", "conv2d_int8_mma"};
    }

    void* allocate(size_t bytes) override {
        return detail::allocate_aligned(bytes, "the emulated device's memory").release();
    }
    void release(void* memory) override { detail::AlignedDelete()(static_cast<uint8_t*>(memory)); }
    void upload(void* device, const void* host, size_t bytes) override {
        std::memcpy(device, host, bytes);
    }
    void download(void* host, const void* device, size_t bytes) override {
        std::memcpy(host, device, bytes);
    }
    void synchronize() override {}  // each launch has run when it returns

    void conv2d(const cuda::Conv2dNchw4Params& p, size_t kernel) override {
        (conv2d_kernels()[kernel] == "conv2d_int8_mma" ? cuda::run_conv2d_mma_on_host
                                                       : cuda::run_conv2d_dp4a_on_host)(p);
    }
    void depthwise(const cuda::DepthwiseNchw4Params& p) override {
        cuda::run_depthwise_on_host(p);
    }
    void pool2d(const cuda::Pool2dNchw4Params& p) override { cuda::run_pool2d_on_host(p); }
    void add(const cuda::AddParams& p) override { cuda::run_add_on_host(p); }
    void concat(const cuda::ConcatParams& p) override { cuda::run_concat_on_host(p); }
    void lut(const cuda::LutParams& p) override { cuda::run_lut_on_host(p); }
    void mul(const cuda::MulParams& p) override { cuda::run_mul_on_host(p); }
    void gather_channels(const cuda::GatherChannelsParams& p) override {
        cuda::run_gather_channels_on_host(p);
    }
    void to_nchw4(const cuda::LayoutParams& p) override { cuda::run_to_nchw4_on_host(p); }
    void from_nchw4(const cuda::LayoutParams& p) override { cuda::run_from_nchw4_on_host(p); }

    double seconds(const std::function<void()>& work) override {
        const auto start = std::chrono::steady_clock::now();
        work();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }

 private:
    const bool tensor_cores_;
};

}  // namespace

std::shared_ptr<Device> emulated_cuda_device(bool tensor_cores) {
    return std::make_shared<EmulatedCudaDevice>(tensor_cores);
}

}  // namespace qtk
