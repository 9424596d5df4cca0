"""Models used by the tasks.

- `SmallCNN`: two conv layers, trains in seconds on CPU; `batchnorm=False` (the default) keeps
  the data-parallel equivalence exact (N workers x batch b == 1 process x batch N*b).
- `ResNet18`: CIFAR-style ResNet with batch normalisation, for GPU runs.
- `MLP`: the three-layer perceptron of Chainer's MNIST example (seed 000's starting point).
"""

import chainer
import chainer.functions as F
import chainer.links as L


class SmallCNN(chainer.Chain):
    def __init__(self, n_class=10, batchnorm=False, width=32):
        super().__init__()
        self.batchnorm = batchnorm
        with self.init_scope():
            self.conv1 = L.Convolution2D(None, width, ksize=3, pad=1)
            self.conv2 = L.Convolution2D(width, 2 * width, ksize=3, pad=1)
            self.fc1 = L.Linear(None, 4 * width)
            self.fc2 = L.Linear(4 * width, n_class)
            if batchnorm:
                self.bn1 = L.BatchNormalization(width)
                self.bn2 = L.BatchNormalization(2 * width)

    def forward(self, x):
        h = self.conv1(x)
        if self.batchnorm:
            h = self.bn1(h)
        h = F.max_pooling_2d(F.relu(h), 2)
        h = self.conv2(h)
        if self.batchnorm:
            h = self.bn2(h)
        h = F.max_pooling_2d(F.relu(h), 2)
        return self.fc2(F.relu(self.fc1(h)))


class _BasicBlock(chainer.Chain):
    def __init__(self, in_ch, out_ch, stride):
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(in_ch, out_ch, 3, stride, 1, nobias=True)
            self.bn1 = L.BatchNormalization(out_ch)
            self.conv2 = L.Convolution2D(out_ch, out_ch, 3, 1, 1, nobias=True)
            self.bn2 = L.BatchNormalization(out_ch)
            if stride != 1 or in_ch != out_ch:
                self.project = L.Convolution2D(in_ch, out_ch, 1, stride, 0, nobias=True)
                self.bn_project = L.BatchNormalization(out_ch)
        if not hasattr(self, "project"):
            self.project = None

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        shortcut = x if self.project is None else self.bn_project(self.project(x))
        return F.relu(h + shortcut)


class ResNet18(chainer.Chain):
    """ResNet-18 for 32x32 inputs (larger inputs are pooled globally at the end)."""

    def __init__(self, n_class=10, widths=(64, 128, 256, 512)):
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(None, widths[0], 3, 1, 1, nobias=True)
            self.bn1 = L.BatchNormalization(widths[0])
            blocks, in_ch = [], widths[0]
            for i, width in enumerate(widths):
                for j in range(2):
                    stride = 2 if i > 0 and j == 0 else 1
                    blocks.append(_BasicBlock(in_ch, width, stride))
                    in_ch = width
            self.blocks = chainer.ChainList(*blocks)
            self.fc = L.Linear(in_ch, n_class)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        for block in self.blocks:
            h = block(h)
        h = F.average(h, axis=(2, 3))
        return self.fc(h)


class MLP(chainer.Chain):
    def __init__(self, n_units=1000, n_class=10):
        super().__init__()
        with self.init_scope():
            self.l1 = L.Linear(None, n_units)
            self.l2 = L.Linear(None, n_units)
            self.l3 = L.Linear(None, n_class)

    def forward(self, x):
        h = F.relu(self.l1(x))
        h = F.relu(self.l2(h))
        return self.l3(h)


#: The course's model classes by name: the grader rebuilds a trained one from the arguments it was
#: made with and evaluates it itself (checking/evidence.py).
CLASSES = {"SmallCNN": SmallCNN, "ResNet18": ResNet18, "MLP": MLP}

MODELS = {
    "cnn": lambda n_class: SmallCNN(n_class),
    "cnn-bn": lambda n_class: SmallCNN(n_class, batchnorm=True),
    "resnet18": lambda n_class: ResNet18(n_class),
    "mlp": lambda n_class: MLP(n_class=n_class),
}


def get_model(name="cnn", n_class=10, classifier=True):
    """A model by name, wrapped in `L.Classifier` unless `classifier=False`."""
    try:
        model = MODELS[name](n_class)
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None
    return L.Classifier(model) if classifier else model
