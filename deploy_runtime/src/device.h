// What a DeviceSession asks of a device (include/qtk/device_session.h): memory, copies, and the
// launch of each CUDA kernel of kernels/cuda/ on parameters whose pointers are that device's.
// Two devices implement it: the GPU (kernels/cuda/cuda_device.cpp, built with QTK_CUDA) and the
// kernels' host twins on the CPU (kernels/cuda/emulated_device.cpp, built everywhere).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "../kernels/cuda/add_int8.h"
#include "../kernels/cuda/concat_int8.h"
#include "../kernels/cuda/conv2d_int8_depthwise.h"
#include "../kernels/cuda/conv2d_int8_nchw4.h"
#include "../kernels/cuda/gather_channels_int8.h"
#include "../kernels/cuda/layout_int8.h"
#include "../kernels/cuda/lut_int8.h"
#include "../kernels/cuda/mul_int8.h"
#include "../kernels/cuda/pool2d_int8.h"
#include "qtk/device_session.h"

namespace qtk {

class Device {
 public:
    virtual ~Device() = default;

    virtual std::string name() const = 0;
    // The GEMM convolutions this device runs ("conv2d_int8_mma", "conv2d_int8_dp4a"), its default
    // first; conv2d() takes an index into them.
    virtual std::vector<std::string> conv2d_kernels() const = 0;

    // Errors throw qtk::Error naming the call and the device's message.
    virtual void* allocate(size_t bytes) = 0;
    virtual void release(void* memory) = 0;
    virtual void upload(void* device, const void* host, size_t bytes) = 0;
    virtual void download(void* host, const void* device, size_t bytes) = 0;
    virtual void synchronize() = 0;  // returns once every launch so far has finished

    // Kernel launches, in order on one stream; download() waits for them.
    virtual void conv2d(const cuda::Conv2dNchw4Params& p, size_t kernel) = 0;
    virtual void depthwise(const cuda::DepthwiseNchw4Params& p) = 0;
    virtual void pool2d(const cuda::Pool2dNchw4Params& p) = 0;
    virtual void add(const cuda::AddParams& p) = 0;
    virtual void concat(const cuda::ConcatParams& p) = 0;
    virtual void lut(const cuda::LutParams& p) = 0;
    virtual void mul(const cuda::MulParams& p) = 0;
    virtual void gather_channels(const cuda::GatherChannelsParams& p) = 0;
    virtual void to_nchw4(const cuda::LayoutParams& p) = 0;
    virtual void from_nchw4(const cuda::LayoutParams& p) = 0;

    // The seconds `work` (launches) takes on the device, waiting for what was launched before.
    virtual double seconds(const std::function<void()>& work) = 0;
};

}  // namespace qtk
