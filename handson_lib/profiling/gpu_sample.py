"""The workload of the course's second sample profile: a training loop on one NVIDIA GPU, written
with CuPy alone, run under Nsight Systems:

    nsys profile -t cuda,nvtx -o mlp python handson_lib/profiling/gpu_sample.py
    nsys export --type sqlite -o mlp.sqlite mlp.nsys-rep

A three-layer perceptron (3072-4096-4096-10, batch 256, SGD) on CIFAR-shaped random batches. It is
not the course's Chainer model: Chainer 7.8.1 needs Python 3.11, which the GPU machines that
recorded the profile did not have. What it keeps of a real training step is what the profile
exercise asks about:

- the host prepares each batch (a random crop and flip in NumPy): the GPU waits for it, so the
  timeline has gaps where nothing runs;
- the batch goes to the GPU on a copy stream of its own, while the compute stream still works;
- forward, backward and update are several kernels of different names (cuBLAS matrix products,
  CuPy's element-wise kernels, reductions), the matrix products taking most of the time;
- the update of the last layers runs on a third stream while the backward pass goes on, so kernels
  of two streams overlap: the time during which *some* kernel runs is the union of intervals;
- every tenth iteration reads the loss back to the host (a small device-to-host copy and a wait);
- NVTX ranges name the phases: `load batch (host)`, `copy batch`, `forward`, `backward`, `update`.
"""

import argparse

import numpy


def main(argv=None):
    import cupy
    from cupy.cuda import nvtx

    args = _arguments(argv)
    rng = numpy.random.default_rng(0)
    net = _Perceptron(cupy, rng, args.hidden, args.batchsize, args.lr)

    compute = cupy.cuda.Stream(non_blocking=True)
    copier = cupy.cuda.Stream(non_blocking=True)
    updater = cupy.cuda.Stream(non_blocking=True)
    pinned = cupy.cuda.alloc_pinned_memory(args.batchsize * net.sizes[0] * 4)
    host_batch = numpy.frombuffer(pinned, numpy.float32, args.batchsize * net.sizes[0]).reshape(args.batchsize, 3, 32, 32)
    images = rng.standard_normal((2048, 3, 40, 40), dtype=numpy.float32)
    labels = rng.integers(0, 10, 2048)

    for it in range(args.iterations):
        nvtx.RangePush(f"iteration {it}")
        nvtx.RangePush("load batch (host)")
        t = _load_batch(cupy, rng, images, labels, args.batchsize, it, copier, host_batch)
        nvtx.RangePop()

        nvtx.RangePush("copy batch")
        with copier:
            x = cupy.empty((args.batchsize, net.sizes[0]), dtype=cupy.float32)
            x.data.copy_from_host_async(host_batch.ctypes.data, x.nbytes, copier)
            ready = copier.record()
        nvtx.RangePop()

        with compute:
            compute.wait_event(ready)
            nvtx.RangePush("forward")
            activations, probs, loss = net.forward(x, t)
            nvtx.RangePop()

            nvtx.RangePush("backward")
            grads = net.backward(activations, probs, t, compute, updater, nvtx)
            nvtx.RangePop()

            nvtx.RangePush("update")
            net.update_first_layers(grads)
            compute.wait_event(updater.record())
            nvtx.RangePop()
            if it % 10 == 9:
                nvtx.RangePush("read loss")
                print(f"iteration {it + 1}: loss {float(loss):.3f}", flush=True)
                nvtx.RangePop()
        nvtx.RangePop()
    cupy.cuda.Device().synchronize()


def _arguments(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--batchsize", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=0.01)
    return parser.parse_args(argv)


def _load_batch(cupy, rng, images, labels, batchsize, it, copier, host_batch):
    """The host's part of an iteration: a random crop (and every other time a flip) of random
    images into the pinned buffer; the labels on the GPU."""
    pick = rng.integers(0, len(images), batchsize)
    dy, dx = rng.integers(0, 9, 2)
    crop = images[pick, :, dy:dy + 32, dx:dx + 32]
    if it % 2:
        crop = crop[..., ::-1]
    copier.synchronize()   # the pinned buffer is free again once the last copy is done
    host_batch[...] = crop
    return cupy.asarray(labels[pick])


class _Perceptron:
    """The three-layer perceptron: its weights and biases, and its own ReLU-gradient and SGD kernels."""

    def __init__(self, cupy, rng, hidden, batchsize, lr):
        self.cupy, self.batchsize, self.lr = cupy, batchsize, lr
        self.sizes = sizes = [3 * 32 * 32, hidden, hidden, 10]
        self.weights = [cupy.asarray((rng.standard_normal((a, b)) / numpy.sqrt(a)).astype(numpy.float32))
                        for a, b in zip(sizes, sizes[1:])]
        self.biases = [cupy.zeros(b, dtype=cupy.float32) for b in sizes[1:]]
        self.relu_grad = cupy.ElementwiseKernel("T dy, T y", "T dx", "dx = y > 0 ? dy : (T)0", "relu_grad")
        self.sgd = cupy.ElementwiseKernel("T g, T lr", "T w", "w -= lr * g", "sgd_update")

    def forward(self, x, t):
        """(activations, softmax probabilities, mean cross-entropy loss)."""
        cupy = self.cupy
        activations = [x]
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            y = activations[-1] @ w + b
            if i < len(self.weights) - 1:
                y = cupy.maximum(y, 0)
            activations.append(y)
        logits = activations[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        probs = cupy.exp(shifted)
        probs /= probs.sum(axis=1, keepdims=True)
        loss = -cupy.log(probs[cupy.arange(self.batchsize), t] + 1e-12).mean()
        return activations, probs, loss

    def backward(self, activations, probs, t, compute, updater, nvtx):
        """Every layer's (weight, bias) gradients; the last two layers are updated on the `updater`
        stream as soon as their gradients exist."""
        cupy, weights = self.cupy, self.weights
        grad = probs
        grad[cupy.arange(self.batchsize), t] -= 1
        grad *= numpy.float32(1 / self.batchsize)
        grads = [None] * len(weights)
        for i in reversed(range(len(weights))):
            gw, gb = activations[i].T @ grad, grad.sum(axis=0)
            grads[i] = (gw, gb)
            if i > 0:
                grad = self.relu_grad(grad @ weights[i].T, activations[i])
            if i == len(weights) - 1 or i == len(weights) - 2:
                # the last layers' update overlaps the rest of the backward pass
                done = compute.record()
                updater.wait_event(done)
                with updater:
                    nvtx.RangePush("update (overlapped)")
                    self.sgd(gw, cupy.float32(self.lr), weights[i])
                    self.sgd(gb, cupy.float32(self.lr), self.biases[i])
                    nvtx.RangePop()
        return grads

    def update_first_layers(self, grads):
        """SGD on the layers `backward` did not update."""
        for i in range(len(self.weights) - 2):
            self.sgd(grads[i][0], self.cupy.float32(self.lr), self.weights[i])
            self.sgd(grads[i][1], self.cupy.float32(self.lr), self.biases[i])


if __name__ == "__main__":
    main()
