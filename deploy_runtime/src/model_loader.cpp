// Loads a model: the file's bytes (mapped or copied, aligned) through the reader (model_reader.h),
// the graph passes, then one kernel per node, chosen by the registry or by Fast-Run.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "algo_policy.h"
#include "aligned_buffer.h"
#include "fast_run.h"
#include "graph_passes.h"
#include "graph.h"
#include "model_reader.h"
#include "op_kernel.h"
#include "op_registry.h"

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define QTK_HAVE_MMAP 1
#endif

namespace qtk {

Model::Impl::~Impl() = default;

namespace detail {
namespace {

// Creates each node's kernel (which checks its attributes and constants) and checks that the
// output shapes the file records are the ones the op computes from the file's input shapes.
void create_kernels(const Graph& g, const KernelPicker& pick, Model::Impl& impl) {
    std::vector<Shape> input_shapes;
    for (const Node& n : g.nodes) {
        CreatedKernel created = create_kernel(g, n, pick);
        const std::unique_ptr<OpKernel>& kernel = created.kernel;
        input_shapes.clear();
        for (uint32_t id : n.inputs) {
            input_shapes.push_back(g.values[id].shape);
        }
        const std::vector<Shape> computed = kernel->infer_shapes(input_shapes);
        for (size_t i = 0; i < n.outputs.size(); ++i) {
            const Value& out = g.values[n.outputs[i]];
            if (out.shape != computed[i]) {
                throw Error(node_label(n) + ": output '" + out.name + "' has shape " +
                            to_string(out.shape) + " in the file, but the op computes " +
                            to_string(computed[i]));
            }
        }
        impl.kernels.push_back(std::move(created.kernel));
        impl.algorithms.push_back(std::move(created.algorithm));
    }
}

TensorInfo tensor_info(const Value& v) {
    return TensorInfo{v.name, v.dtype, v.shape, v.scale, v.zero_point};
}

}  // namespace

std::unique_ptr<Model::Impl> parse_model(std::shared_ptr<const uint8_t> bytes, size_t size,
                                         const LoadOptions& options) {
    auto impl = std::make_unique<Model::Impl>();
    impl->graph = read_qmodel(bytes.get(), size);
    impl->size = size;
    if (options.optimize_graph) {
        fuse_residual_adds(impl->graph);
        fuse_lookups_into_adds(impl->graph);
        use_nhwc_layout(impl->graph, choose_nhwc);
    }
    if (options.fast_run_threads < 1) {
        throw Error("LoadOptions.fast_run_threads must be >= 1, got " +
                    std::to_string(options.fast_run_threads));
    }
    FastRunCache cache(options.fast_run == FastRun::kOff ? "" : options.fast_run_cache);
    const KernelPicker pick = options.fast_run == FastRun::kOff
                                  ? KernelPicker()
                                  : fast_run_picker(options.fast_run, cache,
                                                    options.fast_run_threads);
    try {
        create_kernels(impl->graph, pick, *impl);
    } catch (const Error& e) {
        // Node errors name the node; the prefix says they come from the file.
        fail_qmodel(e.what());
    }
    cache.save();
    for (uint32_t id : impl->graph.inputs) {
        impl->inputs.push_back(tensor_info(impl->graph.values[id]));
    }
    for (uint32_t id : impl->graph.outputs) {
        impl->outputs.push_back(tensor_info(impl->graph.values[id]));
    }
    impl->bytes = std::move(bytes);
    return impl;
}

namespace {

std::shared_ptr<const uint8_t> copy_aligned(const void* data, size_t size) {
    AlignedBytes buffer = allocate_aligned(size, "the model");
    if (size > 0) {
        std::memcpy(buffer.get(), data, size);
    }
    return std::shared_ptr<const uint8_t>(std::move(buffer));
}

// Reads the whole stream; used where the file cannot be mapped.
std::shared_ptr<const uint8_t> read_file(const std::string& path, size_t* size) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw Error("cannot open model file '" + path + "'");
    }
    const std::vector<char> data((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
    if (in.bad()) {
        throw Error("cannot read model file '" + path + "'");
    }
    *size = data.size();
    return copy_aligned(data.data(), data.size());
}

#ifdef QTK_HAVE_MMAP
// Maps a regular file read-only; nullptr where mapping fails (an empty file, say) and reading
// should be tried instead.
std::shared_ptr<const uint8_t> map_file(const std::string& path, size_t* size) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) {
        throw Error("cannot open model file '" + path + "': " + std::strerror(errno));
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error("model file '" + path + "' is not a regular file");
    }
    void* p = MAP_FAILED;
    if (st.st_size > 0) {
        *size = static_cast<size_t>(st.st_size);
        p = ::mmap(nullptr, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    ::close(fd);  // the mapping stays valid
    if (p == MAP_FAILED) {
        return nullptr;
    }
    const size_t mapped = *size;
    return std::shared_ptr<const uint8_t>(
        static_cast<const uint8_t*>(p),
        [mapped](const uint8_t* q) { ::munmap(const_cast<uint8_t*>(q), mapped); });
}
#endif

}  // namespace
}  // namespace detail

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
    size_t size = 0;
    std::shared_ptr<const uint8_t> bytes;
#ifdef QTK_HAVE_MMAP
    bytes = detail::map_file(path, &size);
#endif
    if (!bytes) {
        bytes = detail::read_file(path, &size);
    }
    try {
        return std::shared_ptr<const Model>(
            new Model(detail::parse_model(std::move(bytes), size, options)));
    } catch (const Error& e) {
        throw Error("model file '" + path + "': " + e.what());
    }
}

std::shared_ptr<const Model> Model::from_bytes(const void* data, size_t size,
                                               const LoadOptions& options) {
    if (data == nullptr && size > 0) {
        throw Error("Model::from_bytes: data is null");
    }
    return std::shared_ptr<const Model>(
        new Model(detail::parse_model(detail::copy_aligned(data, size), size, options)));
}

const std::string& Model::producer() const { return impl_->graph.producer; }
const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
size_t Model::node_count() const { return impl_->graph.nodes.size(); }

std::vector<std::string> Model::algorithms() const { return impl_->algorithms; }

std::vector<std::string> Model::op_names() const {
    std::vector<std::string> names;
    for (const detail::Node& n : impl_->graph.nodes) {
        names.push_back(n.op);
    }
    return names;
}

}  // namespace qtk
