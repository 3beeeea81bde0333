// Running a model on an accelerator (docs/cuda.md): qtk's CUDA kernels, byte-identical to the CPU.
//
//   auto model = qtk::Model::load("m.qmodel");
//   qtk::DeviceSession session(model, qtk::cuda_device());   // a build with QTK_CUDA
//   std::vector<qtk::Tensor> out = session.run({x.data()}, {{32, 3, 224, 224}});
//
// The session plans once per batch size: every activation in the NCHW4 layout of the CUDA
// kernels, in one device arena laid out by the CPU session's memory planner; the weights are packed
// and uploaded once when the session is made. A run copies the int8 graph inputs in (NCHW), turns
// them into NCHW4 on the device, runs every node's kernel there and returns the outputs as NCHW
// on the host: what qtk::Session returns, byte for byte. run_on_device takes and fills NCHW
// tensors in the device's memory instead, with no host copy. Ops without a device kernel fail at
// construction, naming the node, and shapes the kernels cannot take (a broadcast, a reshape that
// moves bytes) when their batch size is planned: the session never falls back to the CPU in the
// middle of a graph.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qtk/runtime.h"

namespace qtk {

// Where a DeviceSession's memory lives and its kernels run (src/device.h).
class Device;

// GPU `ordinal` (CUDA device numbering). Defined in the library qtk_cuda, which a build with
// QTK_CUDA makes; the tensor-core convolution where the GPU has compute capability 8.0 or more,
// else the dp4a one. Throws Error when there is no such GPU.
std::shared_ptr<Device> cuda_device(int ordinal = 0);

// The CUDA kernels' host twins on the CPU (each GPU thread's code run in turn, docs/cuda.md), as
// a device: the same plan, layouts, packing and kernel code as cuda_device() without a GPU, for
// tests. `tensor_cores` picks the mma convolution (else dp4a). Slow: emulation, one thread.
std::shared_ptr<Device> emulated_cuda_device(bool tensor_cores = true);

struct DeviceOptions {
    // Which GEMM convolution serves each layer where the device has several (mma and dp4a on a
    // GPU with tensor cores; the same bytes): kOff takes the device's default; kSearch times each
    // on the device when a batch size is first planned, kUse only reads the cache. The cache file
    // is the CPU's format, its keys naming the device (GPU model) and the batch size.
    FastRun fast_run = FastRun::kOff;
    std::string fast_run_cache;
};

class DeviceSession {
 public:
    // Reads the model's graph as the file holds it (the CPU's graph passes are CPU layout choices)
    // and uploads its constants. Throws Error naming the first node the device cannot run.
    DeviceSession(std::shared_ptr<const Model> model, std::shared_ptr<Device> device,
                  const DeviceOptions& options = {});
    ~DeviceSession();
    DeviceSession(const DeviceSession&) = delete;
    DeviceSession& operator=(const DeviceSession&) = delete;

    // As Session::run: int8 graph inputs, NCHW, any batch size; int8 outputs on the host.
    std::vector<Tensor> run(const std::vector<const void*>& inputs,
                            const std::vector<Shape>& input_shapes);
    // As run, with the graph inputs and outputs NCHW int8 in the device's memory (CUDA device
    // pointers for cuda_device(); host memory for emulated_cuda_device()): outputs[i] holds
    // output_shapes(N)[i]'s bytes. The session's kernels run on its own stream, which waits for
    // no other: the inputs must be written, and nothing else in flight may use these buffers,
    // when it is called (synchronize the producing stream first). Returns once the outputs are
    // written.
    void run_on_device(const std::vector<const void*>& inputs,
                       const std::vector<Shape>& input_shapes, const std::vector<void*>& outputs);
    // The graph outputs' shapes at batch size `batch` (planning it, as a run would).
    std::vector<Shape> output_shapes(int64_t batch);

    std::string device_name() const;
    std::vector<std::string> kernels() const;  // the kernel serving each node, in order
    size_t arena_bytes() const;                // the device arena of the last batch size
    // Waits for the device and returns the seconds each of `runs` runs of the kernels alone took
    // on it, on whatever the arena holds after the last run (timing only: no copies, no outputs).
    std::vector<double> time_runs(int runs);

    struct Impl;

 private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace qtk
