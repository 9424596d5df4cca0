"""The training images as the talk's loader sees them: JPEG bytes decoded and augmented (random
crop, resize, flip) in float32, so that `MultiprocessIterator` has work to hide."""

import io
import os

from handson_lib import data

class DecodeAugment:
    """JPEG bytes -> random crop (50-100 % of the area) -> resize -> random flip -> float32 CHW.

    The talk's loader did the same on ImageNet (random crop + flip). It works in float32 whatever
    Chainer's dtype: NumPy float16 is slow, the talk's own finding. Each process draws its own
    random numbers (forked MultiprocessIterator workers would otherwise repeat the same ones).
    """

    def __init__(self, blobs, labels, out_size=32, seed=0):
        self.blobs = blobs
        self.labels = labels
        self.out_size = out_size
        self.seed = seed
        self._rng = None
        self._pid = None

    def __len__(self):
        return len(self.blobs)

    def _random(self):
        import numpy
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._rng = numpy.random.default_rng([self.seed, self._pid])
        return self._rng

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        import numpy
        from PIL import Image
        rng = self._random()
        image = Image.open(io.BytesIO(self.blobs[index]))
        image.load()
        width, height = image.size
        side = int(min(width, height) * numpy.sqrt(rng.uniform(0.5, 1.0)))
        left = int(rng.integers(0, width - side + 1))
        top = int(rng.integers(0, height - side + 1))
        image = image.resize((self.out_size, self.out_size), Image.BILINEAR,
                             box=(left, top, left + side, top + side))
        x = numpy.asarray(image, dtype=numpy.float32) * numpy.float32(1.0 / 255.0)
        x = x[None] if x.ndim == 2 else x.transpose(2, 0, 1)
        if rng.random() < 0.5:
            x = x[:, :, ::-1]
        return numpy.ascontiguousarray(x), self.labels[index]


def encoded_dataset(dataset="synthetic", n_images=512, source_size=64, out_size=32, seed=0):
    """(DecodeAugment, description): `n_images` training images stored as JPEG bytes."""
    import numpy
    from PIL import Image
    if dataset == "synthetic":
        train, _ = data.synthetic_cifar(n_train=n_images, n_test=10, seed=seed, size=source_size,
                                        dtype=numpy.float32)
        what = f"synthetic CIFAR-shaped images at {source_size}px (not CIFAR-10)"
    else:
        train, _, info = data.get_dataset(dataset, ndim=3, n_train=n_images, seed=seed,
                                          dtype=numpy.float32, announce=False)
        what = info.description
    x, labels = train._datasets
    x, labels = x[:n_images], numpy.asarray(labels[:n_images], dtype=numpy.int32)
    pixels = numpy.clip(x * 255.0 + 0.5, 0, 255).astype(numpy.uint8)
    blobs = []
    for image in pixels:
        picture = Image.fromarray(image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0))
        buffer = io.BytesIO()
        picture.save(buffer, format="JPEG", quality=90)
        blobs.append(buffer.getvalue())
    return (DecodeAugment(blobs, labels, out_size=out_size, seed=seed),
            f"{len(blobs)} JPEG images ({what}), decoded + random crop + resize to {out_size}px + flip")
