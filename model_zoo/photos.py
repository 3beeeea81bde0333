"""Real photos that ship inside packages, as the pretrained networks of ``pretrained.py`` read them.

Sources (nothing is downloaded at run time):

- scikit-image's ``skimage.data`` photos, colour and grey;
- scikit-learn's two sample images and matplotlib's ``grace_hopper.jpg``;
- Debian's ``opencv-doc`` examples where they are unpacked (``apt-get download opencv-doc &&
  dpkg-deb -x opencv-doc_*.deb DIR``, then pass ``DIR`` or set ``QTK_OPENCV_DOC``): about 90
  photos in ``examples/data`` and 20 scene-text photos in ``examples/text``.

Every image comes back as ``(name, uint8 array [H, W, 3], RGB)``.
"""
import glob
import os

import numpy as np
import torch
from torch.nn import functional as F

SKIMAGE_COLOUR = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field",
                  "immunohistochemistry", "retina", "colorwheel"]
SKIMAGE_GREY = ["camera", "coins", "moon", "page", "text", "clock", "brick", "grass", "gravel"]
OPENCV_DOC_DIRS = ["/usr/share/doc/opencv-doc/examples"]


def _rgb(image):
    image = np.asarray(image)
    if image.dtype != np.uint8:
        image = (np.clip(image, 0, 1) * 255).round().astype(np.uint8)
    if image.ndim == 2:
        image = np.repeat(image[..., None], 3, axis=2)
    return np.ascontiguousarray(image[..., :3])


def _read(path):
    import matplotlib.image

    return _rgb(matplotlib.image.imread(path))


def package_photos():
    """scikit-image, scikit-learn and matplotlib photos, in a fixed order."""
    import matplotlib.cbook
    import skimage.data
    from sklearn.datasets import load_sample_images

    photos = [(name, _rgb(getattr(skimage.data, name)())) for name in SKIMAGE_COLOUR + SKIMAGE_GREY]
    sample = load_sample_images()
    photos += [(os.path.basename(f), _rgb(im)) for f, im in zip(sample.filenames, sample.images)]
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as file:
        import matplotlib.image

        photos.append(("grace_hopper.jpg", _rgb(matplotlib.image.imread(file, format="jpg"))))
    return photos


def _examples_under(folder):
    """``folder``'s opencv-doc examples folder (the one holding ``data``): the folder itself, its
    ``examples``, or the one a ``dpkg-deb -x`` into it unpacked; ``None`` if there is none."""
    for root in (folder, os.path.join(folder, "examples"),
                 os.path.join(folder, "usr/share/doc/opencv-doc/examples")):
        if os.path.isdir(os.path.join(root, "data")):
            return root
    return None


def opencv_doc_dir(directory=None):
    """The unpacked ``opencv-doc`` examples folder, or ``None`` where it is absent. A folder
    named by the caller or by ``$QTK_OPENCV_DOC`` must hold it: a wrong path is an error, not a
    study run without the photos."""
    named = directory or os.environ.get("QTK_OPENCV_DOC")
    if not named:
        return next(filter(None, map(_examples_under, OPENCV_DOC_DIRS)), None)
    root = _examples_under(named)
    if root is None:
        raise FileNotFoundError(
            f"{named}: no opencv-doc examples (a data folder) in it, its examples folder or its "
            f"usr/share/doc/opencv-doc/examples; unpack the package with "
            f"'apt-get download opencv-doc && dpkg-deb -x opencv-doc_*.deb {named}'")
    return root


def opencv_doc_photos(directory=None, subfolder="data"):
    """Photos of ``opencv-doc``'s ``examples/<subfolder>`` (masks, results and tiny images left
    out); empty where the package is not unpacked."""
    root = opencv_doc_dir(directory)
    if root is None:
        return []
    photos = []
    for path in sorted(glob.glob(os.path.join(root, subfolder, "*"))):
        name = os.path.basename(path)
        if not name.lower().endswith((".jpg", ".png")) or "mask" in name or "result" in name:
            continue
        image = _read(path)
        if min(image.shape[:2]) >= 64:
            photos.append((name, image))
    return photos


def lfw_faces():
    """scikit-image's LFW subset: 100 face crops and 100 non-face crops, 25x25 grey, as
    ``(images uint8 [200, 25, 25, 3], is_face bool [200])``."""
    import skimage.data

    images = skimage.data.lfw_subset()
    is_face = np.arange(len(images)) < 100
    return np.stack([_rgb(image) for image in images]), is_face


def to_tensor(images):
    """uint8 ``[N, H, W, 3]`` (or one ``[H, W, 3]``) -> float ``[N, 3, H, W]`` in 0..255."""
    x = torch.from_numpy(np.asarray(images)).float()
    if x.dim() == 3:
        x = x[None]
    return x.permute(0, 3, 1, 2).contiguous()


def resize_short_side(x, size):
    h, w = x.shape[2:]
    k = size / min(h, w)
    return F.interpolate(x, size=(max(size, round(h * k)), max(size, round(w * k))),
                         mode="bilinear", antialias=True, align_corners=False)


def center_crop(x, size):
    top, left = (x.shape[2] - size) // 2, (x.shape[3] - size) // 2
    return x[:, :, top:top + size, left:left + size]


def grid_crops(x, size, count):
    """Up to ``count`` crops of ``size`` spread evenly over the image (corners, then between)."""
    h, w = x.shape[2:]
    rows = max(1, round((count * h / w) ** 0.5))
    cols = max(1, -(-count // rows))
    crops = []
    for top in np.linspace(0, h - size, rows).round().astype(int):
        for left in np.linspace(0, w - size, cols).round().astype(int):
            crops.append(x[:, :, top:top + size, left:left + size])
    return torch.cat(crops[:count])
