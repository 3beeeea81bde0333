// qtk._C: the deploy runtime (deploy_runtime/include/qtk/runtime.h) for Python.
//
// Every qtk::Error becomes qtk._C.QtkError, a ValueError; bad arguments (wrong dtype, shape, count
// or index) are QtkErrors naming the argument. Session.run releases the GIL while it computes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <mutex>

#include "qtk/device_session.h"
#include "qtk/runtime.h"

namespace py = pybind11;

void bind_arith(py::module_& m);  // arith_binding.cpp

namespace {

std::string type_name(const py::handle& obj) {
    return py::str(py::type::handle_of(obj).attr("__name__"));
}

// "float32 [1, 28, 28]" for an array, the type name for anything else.
std::string describe(const py::handle& obj) {
    if (!py::isinstance<py::array>(obj)) {
        return type_name(obj);
    }
    const py::array a = py::reinterpret_borrow<py::array>(obj);
    return std::string(py::str(a.dtype())) + " " +
           qtk::to_string(qtk::Shape(a.shape(), a.shape() + a.ndim()));
}

qtk::Shape shape_of(const py::array& a) { return qtk::Shape(a.shape(), a.shape() + a.ndim()); }

// An array that owns `values`, without copying them.
template <typename T>
py::array owning_array(const qtk::Shape& shape, std::vector<T>&& values) {
    auto* data = new std::vector<T>(std::move(values));
    py::capsule owner(data, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>(shape, data->data(), owner);
}

// An int8 or float32 array, by the output's dtype.
py::array to_numpy(qtk::Tensor&& t) {
    return t.dtype == qtk::DType::kFloat32 ? owning_array(t.shape, std::move(t.float_data))
                                           : owning_array(t.shape, std::move(t.data));
}

bool has_dtype(const py::handle& obj, qtk::DType dtype) {
    switch (dtype) {
        case qtk::DType::kFloat32:
            return py::isinstance<py::array_t<float>>(obj);
        case qtk::DType::kUInt8:  // an image input
            return py::isinstance<py::array_t<uint8_t>>(obj);
        default:
            return py::isinstance<py::array_t<int8_t>>(obj);
    }
}

template <typename T>
py::array_t<T, py::array::c_style> c_contiguous(const py::handle& obj) {
    return py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(obj);
}

py::list tensor_infos(const std::vector<qtk::TensorInfo>& infos) {
    py::list out;
    for (const qtk::TensorInfo& t : infos) {
        py::dict d;
        d["name"] = t.name;
        d["dtype"] = qtk::dtype_name(t.dtype);
        d["shape"] = py::cast(t.shape);
        d["scale"] = static_cast<double>(t.scale);
        d["zero_point"] = t.zero_point;
        out.append(d);
    }
    return out;
}

struct PyModel {
    std::shared_ptr<const qtk::Model> model;

    static PyModel from_bytes(const py::object& data, const qtk::LoadOptions& options) {
        Py_buffer view;
        if (PyObject_GetBuffer(data.ptr(), &view, PyBUF_SIMPLE) != 0) {
            PyErr_Clear();
            throw qtk::Error("Model.from_bytes: data must be a contiguous bytes-like object, got " +
                             type_name(data));
        }
        try {
            PyModel m{qtk::Model::from_bytes(view.buf, static_cast<size_t>(view.len), options)};
            PyBuffer_Release(&view);
            return m;
        } catch (...) {
            PyBuffer_Release(&view);
            throw;
        }
    }

    std::string repr() const {
        std::string inputs;
        for (const qtk::TensorInfo& t : model->inputs()) {
            inputs += (inputs.empty() ? "'" : ", '") + t.name + "' " + qtk::to_string(t.shape);
        }
        return "<qtk._C.Model producer='" + model->producer() +
               "' nodes=" + std::to_string(model->node_count()) + " inputs=[" + inputs + "]>";
    }
};

class PySession {
 public:
    PySession(const PyModel& m, int threads, bool profile, std::shared_ptr<qtk::Arena> arena,
              bool keep_intermediates)
        : session_(m.model,
                   qtk::SessionOptions{threads, profile, std::move(arena), keep_intermediates}) {}

    py::list intermediates() {
        std::vector<qtk::Intermediate> values;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            values = session_.intermediates();
        }
        py::list out;
        for (qtk::Intermediate& v : values) {
            py::dict d;
            d["value_id"] = v.value_id;
            d["value"] = v.value;
            d["node"] = v.node;
            d["op"] = v.op;
            d["data"] = to_numpy(std::move(v.tensor));
            out.append(d);
        }
        return out;
    }

    py::list profile() const {
        py::list out;
        for (const qtk::NodeProfile& n : session_.profile()) {
            py::dict d;
            d["name"] = n.name;
            d["op"] = n.op;
            d["algorithm"] = n.algorithm;
            d["seconds"] = n.seconds;
            d["runs"] = n.runs;
            d["macs"] = n.macs;
            d["last_start"] = n.last_start;
            d["last_seconds"] = n.last_seconds;
            py::list ranges;
            for (const qtk::ThreadRange& r : n.last_ranges) {
                ranges.append(py::make_tuple(r.thread, r.start, r.seconds));
            }
            d["last_ranges"] = ranges;
            out.append(d);
        }
        return out;
    }

    py::list run(const py::object& inputs) {
        const std::vector<qtk::TensorInfo>& infos = session_.model().inputs();
        if (!py::isinstance<py::sequence>(inputs) || py::isinstance<py::str>(inputs) ||
            py::isinstance<py::array>(inputs)) {
            throw qtk::Error("Session.run: inputs must be a list of arrays, got " +
                             type_name(inputs));
        }
        const py::sequence seq = py::reinterpret_borrow<py::sequence>(inputs);
        if (seq.size() != infos.size()) {
            std::string names;
            for (const qtk::TensorInfo& t : infos) {
                names += (names.empty() ? "'" : ", '") + t.name + "'";
            }
            throw qtk::Error("Session.run: the model has " + std::to_string(infos.size()) +
                             " inputs (" + names + "), got " + std::to_string(seq.size()) +
                             " arrays");
        }
        std::vector<py::array> arrays;  // keep the data alive
        std::vector<const void*> pointers;
        std::vector<qtk::Shape> shapes;
        std::vector<bool> quantize;  // float32 data for an int8 input: quantized in the run
        for (size_t i = 0; i < infos.size(); ++i) {
            const py::object obj = seq[i];
            const qtk::Shape& want = infos[i].shape;
            const qtk::DType dtype = infos[i].dtype;
            quantize.push_back(dtype == qtk::DType::kInt8 &&
                               has_dtype(obj, qtk::DType::kFloat32));
            bool fits = quantize.back() || has_dtype(obj, dtype);
            if (fits) {
                const qtk::Shape got = shape_of(py::reinterpret_borrow<py::array>(obj));
                fits = got.size() == want.size() && got[0] >= 1;
                for (size_t d = 1; fits && d < want.size(); ++d) {
                    fits = got[d] == want[d];
                }
            }
            if (!fits) {
                throw qtk::Error("input " + std::to_string(i) + " ('" + infos[i].name +
                                 "'): expected " +
                                 (dtype == qtk::DType::kInt8 ? "int8 (or float32)"
                                                             : qtk::dtype_name(dtype)) +
                                 " array of shape " + qtk::batch_shape_pattern(want) +
                                 " (any N >= 1), got " + describe(obj));
            }
            // Copies only a non-contiguous array.
            if (dtype == qtk::DType::kFloat32 || quantize.back()) {
                arrays.push_back(c_contiguous<float>(obj));
            } else if (dtype == qtk::DType::kUInt8) {
                arrays.push_back(c_contiguous<uint8_t>(obj));
            } else {
                arrays.push_back(c_contiguous<int8_t>(obj));
            }
            pointers.push_back(arrays.back().data());
            shapes.push_back(shape_of(arrays.back()));
        }
        std::vector<qtk::Tensor> outputs;
        {
            py::gil_scoped_release no_gil;
            std::lock_guard<std::mutex> lock(
                mutex_);  // one run at a time: the session has one arena, and one buffer per input
            quantized_.resize(infos.size());
            for (size_t i = 0; i < infos.size(); ++i) {
                if (quantize[i]) {  // into a buffer kept between runs: no allocation per run
                    const size_t count = static_cast<size_t>(arrays[i].size());
                    quantized_[i].resize(count);
                    session_.quantize_input(i, static_cast<const float*>(pointers[i]), count,
                                            quantized_[i].data());
                    pointers[i] = quantized_[i].data();
                }
            }
            outputs = session_.run(pointers, shapes);
        }
        py::list result;
        for (qtk::Tensor& t : outputs) {
            result.append(to_numpy(std::move(t)));
        }
        return result;
    }

    py::array_t<int8_t> quantize_input(int64_t index, const py::object& x) {
        check_index(index, session_.model().inputs().size(), "quantize_input", "input");
        if (!py::isinstance<py::array_t<float>>(x)) {
            throw qtk::Error("quantize_input: x must be a float32 array, got " + describe(x));
        }
        const auto in = c_contiguous<float>(x);
        py::array_t<int8_t> out(shape_of(in));
        session_.quantize_input(static_cast<size_t>(index), in.data(),
                                static_cast<size_t>(in.size()), out.mutable_data());
        return out;
    }

    py::array_t<float> dequantize_output(int64_t index, const py::object& q) {
        check_index(index, session_.model().outputs().size(), "dequantize_output", "output");
        // A float32 output is already float: a copy, so callers may dequantize every output.
        if (session_.model().outputs()[static_cast<size_t>(index)].dtype == qtk::DType::kFloat32) {
            if (!py::isinstance<py::array_t<float>>(q)) {
                throw qtk::Error("dequantize_output: output " + std::to_string(index) +
                                 " is float32, so q must be a float32 array, got " + describe(q));
            }
            const auto in = c_contiguous<float>(q);
            py::array_t<float> out(shape_of(in));
            std::memcpy(out.mutable_data(), in.data(),
                        static_cast<size_t>(in.size()) * sizeof(float));
            return out;
        }
        if (!py::isinstance<py::array_t<int8_t>>(q)) {
            throw qtk::Error("dequantize_output: q must be an int8 array, got " + describe(q));
        }
        const auto in = c_contiguous<int8_t>(q);
        py::array_t<float> out(shape_of(in));
        session_.dequantize_output(static_cast<size_t>(index), in.data(),
                                   static_cast<size_t>(in.size()), out.mutable_data());
        return out;
    }

    size_t arena_bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return session_.arena_bytes();
    }

    size_t arena_lower_bound() {
        std::lock_guard<std::mutex> lock(mutex_);
        return session_.arena_lower_bound();
    }

 private:
    static void check_index(int64_t index, size_t count, const char* fn, const char* what) {
        if (index < 0 || static_cast<uint64_t>(index) >= count) {
            throw qtk::Error(std::string(fn) + ": " + what + " index " + std::to_string(index) +
                             " is out of range: the model has " + std::to_string(count) + " " +
                             what + "s");
        }
    }

    qtk::Session session_;
    std::mutex mutex_;
    std::vector<std::vector<int8_t>> quantized_;  // per graph input: float data quantized
};

// fast_run: "off", "use" or "search" (see qtk::FastRun).
qtk::FastRun fast_run_mode(const std::string& fast_run) {
    return fast_run == "off"      ? qtk::FastRun::kOff
           : fast_run == "use"    ? qtk::FastRun::kUse
           : fast_run == "search" ? qtk::FastRun::kSearch
                                  : throw qtk::Error("fast_run must be 'off', 'use' or 'search', "
                                                     "got '" + fast_run + "'");
}

qtk::DeviceOptions device_options(const std::string& fast_run, const std::string& cache) {
    qtk::DeviceOptions options;
    options.fast_run = fast_run_mode(fast_run);
    options.fast_run_cache = cache;
    return options;
}

// "cuda", "cuda:N" (a build with QTK_CUDA) or "cuda-emulated" (the CUDA kernels' host twins).
std::shared_ptr<qtk::Device> device_named(const std::string& name) {
    if (name == "cuda-emulated") {
        return qtk::emulated_cuda_device();
    }
    if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
#if QTK_HAS_CUDA
        const std::string ordinal = name == "cuda" ? "0" : name.substr(5);
        if (ordinal.empty() || ordinal.size() > 3 ||
            ordinal.find_first_not_of("0123456789") != std::string::npos) {
            throw qtk::Error("device '" + name + "': expected 'cuda' or 'cuda:N'");
        }
        return qtk::cuda_device(std::stoi(ordinal));
#else
        throw qtk::Error("device '" + name + "': this qtk was built without CUDA; rebuild it where "
                         "nvcc is on the PATH with CMAKE_ARGS=-DQTK_CUDA=ON, or run on the CPU "
                         "(device='cpu')");
#endif
    }
    throw qtk::Error("device must be 'cpu', 'cuda', 'cuda:N' or 'cuda-emulated', got '" + name +
                     "'");
}

// A model on a device: int8 arrays in, int8 arrays out (qtk.runtime.DeviceSession quantizes).
class PyDeviceSession {
 public:
    PyDeviceSession(const PyModel& m, const std::string& device, const std::string& fast_run,
                    const std::string& cache)
        : session_(m.model, device_named(device), device_options(fast_run, cache)) {}

    py::list run(const py::list& inputs) {
        std::vector<py::array> arrays;
        std::vector<const void*> pointers;
        std::vector<qtk::Shape> shapes;
        for (const py::handle obj : inputs) {
            if (!has_dtype(obj, qtk::DType::kInt8)) {
                throw qtk::Error("DeviceSession.run: inputs must be int8 arrays, got " +
                                 describe(obj));
            }
            arrays.push_back(c_contiguous<int8_t>(obj));
            pointers.push_back(arrays.back().data());
            shapes.push_back(shape_of(arrays.back()));
        }
        std::vector<qtk::Tensor> outputs;
        {
            py::gil_scoped_release no_gil;
            std::lock_guard<std::mutex> lock(mutex_);  // one run at a time: one device arena
            outputs = session_.run(pointers, shapes);
        }
        py::list result;
        for (qtk::Tensor& t : outputs) {
            result.append(to_numpy(std::move(t)));
        }
        return result;
    }

    // Pointers into the device's memory (qtk.runtime.DeviceSession.run_on_device checks the
    // tensors they come from).
    void run_on_device(const std::vector<uintptr_t>& inputs, const std::vector<qtk::Shape>& shapes,
                       const std::vector<uintptr_t>& outputs) {
        std::vector<const void*> in;
        std::vector<void*> out;
        for (uintptr_t p : inputs) {
            in.push_back(reinterpret_cast<const void*>(p));
        }
        for (uintptr_t p : outputs) {
            out.push_back(reinterpret_cast<void*>(p));
        }
        py::gil_scoped_release no_gil;
        std::lock_guard<std::mutex> lock(mutex_);
        session_.run_on_device(in, shapes, out);
    }
    std::vector<qtk::Shape> output_shapes(int64_t batch) {
        py::gil_scoped_release no_gil;  // planning may allocate, and wait for a run
        std::lock_guard<std::mutex> lock(mutex_);
        return session_.output_shapes(batch);
    }

    std::string device_name() const { return session_.device_name(); }
    std::vector<std::string> kernels() {
        std::lock_guard<std::mutex> lock(mutex_);  // a run's plan may be choosing them
        return session_.kernels();
    }
    size_t arena_bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return session_.arena_bytes();
    }

 private:
    qtk::DeviceSession session_;
    std::mutex mutex_;
};

qtk::LoadOptions load_options(const std::string& fast_run, const std::string& cache, int threads,
                              bool optimize_graph) {
    qtk::LoadOptions options;
    options.fast_run = fast_run_mode(fast_run);
    options.fast_run_cache = cache;
    options.fast_run_threads = threads;
    options.optimize_graph = optimize_graph;
    return options;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
    m.doc() = "qtk deploy runtime (C++), used by qtk.runtime";
    m.attr("version") = qtk::kVersion;
    m.def("measure_int8_peak", &qtk::measure_int8_peak, py::arg("seconds") = 0.2,
          "One core's int8 multiply-accumulate peak (MACs/s): AVX-512 VNNI's vpdpbusd, else AVX2's "
          "vpmaddwd + vpaddd; 0 without either.");
    m.def("measure_binary_peak", &qtk::measure_binary_peak, py::arg("seconds") = 0.2,
          "One core's binary product peak (products/s): AVX-512 VPOPCNTDQ's vpopcntq, else AVX2's "
          "nibble-table popcount (vpshufb); 0 without either.");
    m.def(
        "measure_core_to_core",
        [](double seconds) {
            const qtk::CoreToCore c = qtk::measure_core_to_core(seconds);
            return py::make_tuple(c.own_ns_per_kib, c.other_ns_per_kib);
        },
        py::arg("seconds") = 0.2,
        "(own, other): ns per KiB to read what this core, or the other of two threads, just wrote.");
    py::register_exception<qtk::Error>(m, "QtkError", PyExc_ValueError);

    py::class_<PyModel>(m, "Model",
                        "A loaded, validated .qmodel; immutable and shareable between sessions.")
        .def_static(
            "load",
            [](const py::object& path, const std::string& fast_run, const std::string& cache,
               int threads, bool optimize_graph) {
                const std::string p =
                    py::module_::import("os").attr("fspath")(path).cast<std::string>();
                return PyModel{
                    qtk::Model::load(p, load_options(fast_run, cache, threads, optimize_graph))};
            },
            py::arg("path"), py::arg("fast_run") = "off", py::arg("fast_run_cache") = "",
            py::arg("fast_run_threads") = 1, py::arg("optimize_graph") = true,
            "Loads (memory-maps) a .qmodel file (str or os.PathLike); QtkError names what is "
            "wrong with a bad file. fast_run 'use' or 'search' chooses each layer's algorithm by "
            "Fast-Run with the cache file fast_run_cache, timing with fast_run_threads. "
            "optimize_graph=False skips the runtime's graph passes (fused residual adds and "
            "lookups, channels-last regions).")
        .def_static(
            "from_bytes",
            [](const py::object& data, const std::string& fast_run, const std::string& cache,
               int threads, bool optimize_graph) {
                return PyModel::from_bytes(
                    data, load_options(fast_run, cache, threads, optimize_graph));
            },
            py::arg("data"), py::arg("fast_run") = "off", py::arg("fast_run_cache") = "",
            py::arg("fast_run_threads") = 1, py::arg("optimize_graph") = true,
            "Loads a .qmodel from bytes (copied); as load().")
        .def_property_readonly(
            "algorithms", [](const PyModel& m) { return m.model->algorithms(); },
            "The algorithm serving each node, in execution order ('reference' for ops with one).")
        .def_property_readonly(
            "inputs", [](const PyModel& m) { return tensor_infos(m.model->inputs()); },
            "Graph inputs: list of {'name', 'dtype', 'shape', 'scale', 'zero_point'}; dtype is "
            "'int8', 'float32' or 'uint8' (an image input; these two with scale and zero_point 0); "
            "shape[0] is the example batch.")
        .def_property_readonly(
            "outputs", [](const PyModel& m) { return tensor_infos(m.model->outputs()); },
            "Graph outputs, like inputs.")
        .def_property_readonly("producer", [](const PyModel& m) { return m.model->producer(); })
        .def_property_readonly(
            "op_names", [](const PyModel& m) { return m.model->op_names(); },
            "The nodes' ops in execution order.")
        .def("__repr__", &PyModel::repr);

    py::class_<qtk::Arena, std::shared_ptr<qtk::Arena>>(
        m, "Arena",
        "Activation memory shared by sessions that run one after another (never at once): it "
        "holds the largest of their plans instead of the sum.")
        .def(py::init<>())
        .def_property_readonly("bytes", &qtk::Arena::bytes);

    py::class_<PyDeviceSession>(m, "DeviceSession",
                                "A model on a device (qtk/device_session.h): int8 in, int8 out.")
        .def(py::init<const PyModel&, const std::string&, const std::string&,
                      const std::string&>(),
             py::arg("model"), py::arg("device"), py::arg("fast_run") = "off",
             py::arg("fast_run_cache") = "")
        .def("run", &PyDeviceSession::run, py::arg("inputs"))
        .def("run_on_device", &PyDeviceSession::run_on_device, py::arg("inputs"),
             py::arg("shapes"), py::arg("outputs"))
        .def("output_shapes", &PyDeviceSession::output_shapes, py::arg("batch"))
        .def_property_readonly("device_name", &PyDeviceSession::device_name)
        .def_property_readonly("kernels", &PyDeviceSession::kernels)
        .def_property_readonly("arena_bytes", &PyDeviceSession::arena_bytes);

    py::class_<PySession>(m, "Session",
                          "Runs a Model on int8 (and, for float32 graph inputs, float32) arrays; "
                          "owns the activation arena and threads.")
        .def(py::init<const PyModel&, int, bool, std::shared_ptr<qtk::Arena>, bool>(),
             py::arg("model"), py::arg("threads") = 1, py::arg("profile") = false,
             py::arg("arena") = nullptr, py::arg("keep_intermediates") = false)
        .def("profile", &PySession::profile,
             "Per node (with profile=True): name, op, algorithm, seconds summed over runs, runs, "
             "the multiply-accumulates of one run (conv2d, linear), and the last run's "
             "last_start (seconds since the session was created), last_seconds and last_ranges: "
             "(thread, start, seconds) of each range of its parallel loops, thread 0 the caller.")
        .def("intermediates", &PySession::intermediates,
             "With keep_intermediates=True, after a run: the graph inputs, then every node's "
             "outputs in execution order, as dicts of value_id, value (name), node, op and data "
             "(an int8 or float32 array).")
        .def("run", &PySession::run, py::arg("inputs"),
             "Runs the model on a list of arrays, one per graph input in its dtype (int8, or "
             "float32 for a float32 input; any batch N >= 1; float32 data for an int8 input is "
             "quantized with its (scale, zero_point) as quantize_input does), and returns the "
             "outputs as int8 or float32 arrays by their dtype.")
        .def("quantize_input", &PySession::quantize_input, py::arg("index"), py::arg("x"),
             "float32 array -> int8 array with graph input `index`'s (scale, zero_point); a "
             "float32 input takes float data directly (QtkError).")
        .def("dequantize_output", &PySession::dequantize_output, py::arg("index"), py::arg("q"),
             "int8 array -> float32 array with graph output `index`'s (scale, zero_point); for a "
             "float32 output, a copy of the float32 array.")
        .def_property_readonly("arena_bytes", &PySession::arena_bytes,
                               "Arena size of the current memory plan.")
        .def_property_readonly("arena_lower_bound", &PySession::arena_lower_bound,
                               "Most bytes live at any one step of the current plan.");

    py::module_ arith =
        m.def_submodule("arith", "qtk/arithmetic.h elementwise over 1-D arrays (for tests).");
    bind_arith(arith);
}
