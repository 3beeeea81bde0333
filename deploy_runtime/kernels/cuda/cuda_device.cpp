// A CUDA GPU as a Device (src/device.h): cudaMalloc'd memory, synchronous copies, and the kernels
// of this folder launched on one stream of their own. Built into qtk_cuda where QTK_CUDA is on.
#include <cuda_runtime.h>

#include <string>

#include "conv2d_int8_dp4a.h"
#include "conv2d_int8_mma.h"
#include "device.h"

namespace qtk {
namespace {

void check(cudaError_t error, const char* what) {
    if (error != cudaSuccess) {
        throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(error));
    }
}

class CudaDevice final : public Device {
 public:
    explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess || ordinal < 0 || ordinal >= count) {
            throw Error("cuda_device(" + std::to_string(ordinal) + "): this machine has " +
                        std::to_string(count) + " CUDA device(s); run on the CPU (qtk::Session)");
        }
        check(cudaSetDevice(ordinal), "cudaSetDevice");
        cudaDeviceProp properties{};
        check(cudaGetDeviceProperties(&properties, ordinal), "cudaGetDeviceProperties");
        name_ = std::string(properties.name) + ", compute capability " +
                std::to_string(properties.major) + "." + std::to_string(properties.minor);
        tensor_cores_ = properties.major >= 8;
        if (properties.major * 10 + properties.minor < 61) {
            throw Error("cuda_device(" + std::to_string(ordinal) + "): " + name_ +
                        " lacks dp4a (compute capability 6.1); run on the CPU (qtk::Session)");
        }
        check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
        check(cudaEventCreate(&start_), "cudaEventCreate");
        check(cudaEventCreate(&stop_), "cudaEventCreate");
    }
    ~CudaDevice() override {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
        cudaStreamDestroy(stream_);
    }

    std::string name() const override { return name_; }
    // Tensor cores (compute capability 8.0) first where the GPU has them; dp4a everywhere.
    std::vector<std::string> conv2d_kernels() const override {
        if (tensor_cores_) {
            return {"conv2d_int8_mma", "conv2d_int8_dp4a"};
        }
        return {"conv2d_int8_dp4a"};
    }

    void* allocate(size_t bytes) override {
        select();
        void* memory = nullptr;
        check(cudaMalloc(&memory, bytes == 0 ? 1 : bytes), "cudaMalloc");
        return memory;
    }
    void release(void* memory) override {
        select();
        cudaFree(memory);
    }
    void upload(void* device, const void* host, size_t bytes) override {
        select();
        check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "upload");
        check(cudaStreamSynchronize(stream_), "upload");
    }
    void download(void* host, const void* device, size_t bytes) override {
        select();
        check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "download");
        check(cudaStreamSynchronize(stream_), "the kernels or the download");
    }
    void synchronize() override {
        select();
        check(cudaStreamSynchronize(stream_), "the kernels");
    }

    void conv2d(const cuda::Conv2dNchw4Params& p, size_t kernel) override {
        select();
        launched(tensor_cores_ && kernel == 0 ? cuda::launch_conv2d_mma(p, stream_)
                                              : cuda::launch_conv2d_dp4a(p, stream_));
    }
    void depthwise(const cuda::DepthwiseNchw4Params& p) override {
        select();
        launched(cuda::launch_depthwise(p, stream_));
    }
    void pool2d(const cuda::Pool2dNchw4Params& p) override {
        select();
        launched(cuda::launch_pool2d(p, stream_));
    }
    void add(const cuda::AddParams& p) override {
        select();
        launched(cuda::launch_add(p, stream_));
    }
    void concat(const cuda::ConcatParams& p) override {
        select();
        launched(cuda::launch_concat(p, stream_));
    }
    void lut(const cuda::LutParams& p) override {
        select();
        launched(cuda::launch_lut(p, stream_));
    }
    void mul(const cuda::MulParams& p) override {
        select();
        launched(cuda::launch_mul(p, stream_));
    }
    void gather_channels(const cuda::GatherChannelsParams& p) override {
        select();
        launched(cuda::launch_gather_channels(p, stream_));
    }
    void to_nchw4(const cuda::LayoutParams& p) override {
        select();
        launched(cuda::launch_to_nchw4(p, stream_));
    }
    void from_nchw4(const cuda::LayoutParams& p) override {
        select();
        launched(cuda::launch_from_nchw4(p, stream_));
    }

    double seconds(const std::function<void()>& work) override {
        select();
        check(cudaEventRecord(start_, stream_), "cudaEventRecord");
        work();
        check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
        check(cudaEventSynchronize(stop_), "the kernels");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        return ms * 1e-3;
    }

 private:
    // Every call makes this GPU the calling thread's current one: sessions on several GPUs, or
    // other code that switches devices, may share the thread.
    void select() const { check(cudaSetDevice(ordinal_), "cudaSetDevice"); }
    void launched(int error) const { check(static_cast<cudaError_t>(error), "kernel launch"); }

    int ordinal_;
    std::string name_;
    bool tensor_cores_ = false;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;  // seconds()'s
};

}  // namespace

std::shared_ptr<Device> cuda_device(int ordinal) { return std::make_shared<CudaDevice>(ordinal); }

}  // namespace qtk
