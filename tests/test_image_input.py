"""Image input in the graph (issue 21, spec 23): a .qmodel that takes uint8 photos and runs the
resize, center crop, channel order and normalize + quantize in the runtime gives the bytes of the
Quantized reference on net(preprocess(photo))."""
import numpy as np
import pytest
import torch
from torch import nn

import qtk
from conftest import assert_not_degenerate
from qtk.export.exporter import build_writer

skimage_data = pytest.importorskip("skimage.data")

SOURCE = (200, 240)  # every photo is cut to this size: one source size per model


def _photos():
    """uint8 [N, 200, 240, 3] RGB crops of scikit-image's bundled photos."""
    crops = []
    for name in ("astronaut", "coffee", "chelsea", "rocket"):
        image = getattr(skimage_data, name)()
        h, w = image.shape[:2]
        for top, left in ((0, 0), (h - SOURCE[0], w - SOURCE[1]),
                          ((h - SOURCE[0]) // 2, (w - SOURCE[1]) // 3)):
            crops.append(image[top:top + SOURCE[0], left:left + SOURCE[1], :3])
    return np.ascontiguousarray(np.stack(crops))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, stride=2, padding=1), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def _quantized_behind(preprocess, photos):
    """A small CNN whose BatchNorm statistics are re-estimated on preprocess(photos), then
    PTQ-calibrated on the same inputs."""
    torch.manual_seed(0)
    net = SmallCNN()
    x = preprocess(torch.from_numpy(photos))
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the batches
    net.train()
    with torch.no_grad():
        for batch in x.split(4):
            net(batch)
    prepared = qtk.prepare_ptq(net.eval())
    with torch.no_grad():
        prepared(x)
    return qtk.convert(prepared)


CONFIGS = [
    dict(size=(160, 192), crop=(128, 128), interpolation="bilinear", channel_order="rgb"),
    dict(size=(256, 300), crop=(224, 224), interpolation="bilinear", channel_order="bgr"),
    dict(size=(150, 177), crop=None, interpolation="nearest", channel_order="bgr"),
    dict(size=(300, 320), crop=(97, 131), interpolation="nearest", channel_order="rgb"),
    dict(size=None, crop=(160, 160), interpolation="bilinear", channel_order="bgr"),
    dict(size=None, crop=None, interpolation="nearest", channel_order="rgb"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_run_image_equals_the_quantized_reference(config):
    photos = _photos()
    source = photos[..., ::-1].copy() if config["channel_order"] == "bgr" else photos
    preprocess = qtk.ImagePreprocess(**config, mean=(0.485, 0.456, 0.406),
                                     std=(0.229, 0.224, 0.225))
    if config["channel_order"] == "bgr":  # the model sees RGB whatever the source's order
        rgb = qtk.ImagePreprocess(**dict(config, channel_order="rgb"))
        assert torch.equal(preprocess(torch.from_numpy(source)), rgb(torch.from_numpy(photos)))
    quantized = _quantized_behind(preprocess, source)
    data = qtk.export(quantized, torch.from_numpy(source[:1]), image=preprocess)
    session = qtk.runtime.load(data, threads=2)
    assert session.inputs[0]["dtype"] == "uint8"
    assert session.inputs[0]["shape"] == [1, *SOURCE, 3]
    assert session.model.op_names[0] == "image_to_int8"

    with qtk.int8_outputs(quantized), torch.no_grad():
        reference = quantized(preprocess(torch.from_numpy(source)))
    runtime = session.run_image(source, output="int8")
    assert np.array_equal(runtime, reference.numpy())
    assert_not_degenerate(reference, min_distinct=20)
    # one photo at a time, and a torch uint8 tensor: the same bytes
    single = session.run_image(torch.from_numpy(source[3:4]), output="int8")
    assert torch.equal(single, reference[3:4])
    # the float output is the dequantized reference
    assert torch.equal(torch.from_numpy(session.run_image(source)), quantized(
        preprocess(torch.from_numpy(source))))


def test_integer_resize_is_torchs_half_pixel_resize_within_rounding():
    """The oracle beside the spec: torch's float resize (align_corners=False). Ours rounds once
    (half a level) after weights rounded to 1/2048 (at most 1/4096 off on each axis, so 255 *
    2 / 4096 more): within 0.63 of torch's."""
    photos = torch.from_numpy(_photos()[:3])
    float_photos = photos.permute(0, 3, 1, 2).to(torch.float32)
    for size in ((160, 192), (256, 300), (37, 401)):
        unit = qtk.ImagePreprocess(size=size, mean=(0, 0, 0), std=(1, 1, 1))
        ours = unit(photos) * 255
        bilinear = nn.functional.interpolate(float_photos, size=size, mode="bilinear",
                                             align_corners=False)
        assert (ours - bilinear).abs().max() <= 0.5 + 255 * 2 / 4096 + 1e-4
        nearest = qtk.ImagePreprocess(size=size, interpolation="nearest", mean=(0, 0, 0),
                                      std=(1, 1, 1))(photos) * 255
        assert torch.equal(nearest.round(), nn.functional.interpolate(
            float_photos, size=size, mode="nearest-exact"))


def _image_writer(**config):
    photos = _photos()[:6]
    preprocess = qtk.ImagePreprocess(**config)
    quantized = _quantized_behind(preprocess, photos)
    example = torch.from_numpy(photos[:1])
    return build_writer(quantized, example, preprocess), photos


def _image_node(writer):
    return next(n for n in writer.nodes if n["op"] == "image_to_int8")


@pytest.mark.parametrize("attr, value, message", [
    ("crop", [40, 0, 128, 128], "attribute 'crop' = [top 40, left 0, height 128, width 128] is "
                                "not a non-empty window inside the resized image 'size' = "
                                "[160, 192]"),
    ("channels", [0, 3, 2], "attribute 'channels'[1] = 3 is outside [0, 2]"),
    ("interpolation", [2], "attribute 'interpolation'[0] = 2 is outside [0, 1]"),
    ("size", [160], "attribute 'size' must have 2 values"),
])
def test_corrupted_image_attributes_are_refused_by_name(attr, value, message):
    writer, _ = _image_writer(size=(160, 192), crop=(128, 128))
    _image_node(writer)["attrs"][attr] = value
    with pytest.raises(qtk.QtkError) as error:
        qtk.runtime.load(writer.to_bytes())
    assert "(image_to_int8)" in str(error.value) and message in str(error.value)


def test_image_output_shape_and_table_shape_are_checked():
    writer, _ = _image_writer(size=(160, 192), crop=(128, 128))
    _image_node(writer)["attrs"]["crop"] = [16, 32, 120, 128]  # a valid window, another size
    with pytest.raises(qtk.QtkError, match=r"has shape \[1, 3, 128, 128\] in the file, but the "
                                           r"op computes \[1, 3, 120, 128\]"):
        qtk.runtime.load(writer.to_bytes())
    writer, _ = _image_writer()
    table = next(v for v in writer.values if v["name"] == "image.table")
    table["data"], table["shape"] = table["data"][:2], [2, 256]
    with pytest.raises(qtk.QtkError, match=r"input 1 'table' has shape \[2, 256\], expected "
                                           r"\[3, 256\]"):
        qtk.runtime.load(writer.to_bytes())


def test_uint8_is_only_an_image_input():
    writer, _ = _image_writer()
    node = _image_node(writer)
    node["op"] = "lut"  # any other op reading the image
    with pytest.raises(qtk.QtkError, match="is uint8, which only an image_to_int8 node reads"):
        qtk.runtime.load(writer.to_bytes())


def test_wrong_input_dtype_names_the_input_and_uint8():
    writer, photos = _image_writer()
    session = qtk.runtime.load(writer.to_bytes())
    with pytest.raises(qtk.QtkError, match=r"input 0 \('image'\): expected a uint8 image "
                                           r"\[N, 200, 240, 3\], got float32"):
        session.run_image(photos.astype(np.float32))
    with pytest.raises(qtk.QtkError, match=r"input 0 \('image'\): expected uint8 array of shape "
                                           r"\[N, 200, 240, 3\]"):
        session._session.run([photos.astype(np.int8)])
    with pytest.raises(qtk.QtkError, match=r"expected uint8 array of shape \[N, 200, 240, 3\] "
                                           r"\(any N >= 1\), got uint8 \[2, 240, 200, 3\]"):
        session.run_image(np.ascontiguousarray(photos[:2].transpose(0, 2, 1, 3)))


def test_export_with_image_needs_a_quantized_input_and_a_uint8_example():
    preprocess = qtk.ImagePreprocess()
    photos = torch.from_numpy(_photos()[:1])
    with pytest.raises(TypeError, match="one uint8 example image"):
        qtk.export(SmallCNN(), photos.float(), image=preprocess)
    with pytest.raises(qtk.UnsupportedOpError, match="needs a converted model"):
        qtk.export(SmallCNN().eval(), photos, image=preprocess)  # a float model: float input


def test_run_image_needs_an_image_model():
    prepared = qtk.prepare_ptq(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()))
    prepared(torch.randn(2, 3, 9, 9))
    session = qtk.runtime.load(qtk.export(qtk.convert(prepared), torch.randn(1, 3, 9, 9)))
    with pytest.raises(qtk.QtkError, match="needs one uint8 image input"):
        session.run_image(np.zeros((1, 9, 9, 3), np.uint8))


@pytest.mark.parametrize("channel_order", ["rgb", "bgr"])
def test_qtk_run_gives_an_image_model_its_pixels(tmp_path, capsys, channel_order):
    """`qtk run` on a model exported with image=: a photo file is decoded, not resized, and
    reordered to BGR where the model was exported for BGR; a uint8 .npy goes in as it is. Both
    give run_image's bytes. inspect, bench and profile run it on pixels."""
    from PIL import Image

    from qtk import cli

    photos = _photos()[:4]
    source = photos[..., ::-1].copy() if channel_order == "bgr" else photos
    preprocess = qtk.ImagePreprocess(size=(100, 120), crop=(96, 96), channel_order=channel_order)
    path = tmp_path / "image.qmodel"
    qtk.export(_quantized_behind(preprocess, source), torch.from_numpy(source[:1]), path,
               image=preprocess)
    session = qtk.runtime.load(path)
    Image.fromarray(photos[2]).save(tmp_path / "photo.png")  # a file holds RGB
    cli.main(["run", str(path), "--input", str(tmp_path / "photo.png"), "--int8", "--output",
              str(tmp_path / "y.npy")])
    expected = session.run_image(source[2:3], output="int8")
    assert_not_degenerate(expected, min_distinct=4)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)

    np.save(tmp_path / "photos.npy", source)
    cli.main(["run", str(path), "--input", str(tmp_path / "photos.npy"), "--int8", "--output",
              str(tmp_path / "y.npy")])
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"),
                                  session.run_image(source, output="int8"))

    # the other subcommands feed it pixels too
    cli.main(["inspect", str(path)])
    assert "image_to_int8" in capsys.readouterr().out
    cli.main(["bench", str(path), "--runs", "2", "--warmup", "0"])
    cli.main(["profile", str(path), "--trace", str(tmp_path / "trace.json"), "--runs", "1"])
    assert "image_to_int8" in capsys.readouterr().out

    with pytest.raises(SystemExit, match="normalizes its images itself"):
        cli.main(["run", str(path), "--input", str(tmp_path / "photo.png"), "--mean", "0.5"])
    Image.fromarray(photos[2, :150]).save(tmp_path / "small.png")
    with pytest.raises(SystemExit, match="is 240 x 150 pixels, but the model takes 240 x 200"):
        cli.main(["run", str(path), "--input", str(tmp_path / "small.png")])
