"""Issue 47 item 9 (hostile review): the correct variants of the false-negative hunt, written to
/tmp/w47h-attacks/v/NAME.py for tests/hostile_review_drive.py (run: python tests/hostile_review_variants.py)."""
from pathlib import Path
SOL = Path(__file__).resolve().parent.parent / "solutions"
OUT = Path("/tmp/w47h-attacks/v")
OUT.mkdir(parents=True, exist_ok=True)

MG = "train_cifar_multi_gpu.py"; MN = "train_cifar_multi_node.py"; MM = "train_mnist_multi_node.py"
SPLIT = "        parts = chainer.datasets.split_dataset_n_random(train, len(args.gpus), seed=args.seed)\n"
ITERS = "        train_iters = [chainer.iterators.SerialIterator(part, args.batchsize) for part in parts]\n"
SCATTER = ("    train = chainermn.scatter_dataset(train, comm, shuffle=True)\n"
           "    test = chainermn.scatter_dataset(test, comm, shuffle=True)\n")
TRAIN_ITER = "    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)\n"
PRINT_MN = '["epoch", "main/loss", "validation/main/loss", "main/accuracy", "validation/main/accuracy",\n             "elapsed_time"]'

V = {
 # Task #1
 "mg_split_random_halves": (MG, [(SPLIT, "        parts = chainer.datasets.split_dataset_random(train, len(train) // 2, seed=args.seed)\n")]),
 "mg_split_n": (MG, [(SPLIT, "        parts = chainer.datasets.split_dataset_n(train, len(args.gpus))\n")]),
 "mg_split_seedless": (MG, [(SPLIT, "        parts = chainer.datasets.split_dataset_n_random(train, len(args.gpus))\n")]),
 "mg_mp_iterator": (MG, [(ITERS, "        train_iters = [chainer.iterators.MultiprocessIterator(part, args.batchsize, n_processes=1) for part in parts]\n")]),
 "mg_shuffle_false": (MG, [(ITERS, "        train_iters = [chainer.iterators.SerialIterator(part, args.batchsize, shuffle=False) for part in parts]\n")]),
 # Task #2
 "mn_iteration_in_report": (MN, [('            ["epoch", "main/loss",', '            ["epoch", "iteration", "main/loss",')]),
 "mn_scatter_no_shuffle": (MN, [(SCATTER, "    train = chainermn.scatter_dataset(train, comm)\n    test = chainermn.scatter_dataset(test, comm)\n")]),
 "mn_shuffle_false": (MN, [(TRAIN_ITER, "    train_iter = chainer.iterators.SerialIterator(train, args.batchsize, shuffle=False)\n")]),
 "mn_mp_iterator": (MN, [(TRAIN_ITER, "    train_iter = chainer.iterators.MultiprocessIterator(train, args.batchsize, n_processes=1)\n")]),
 "mn_root_loads": (MN, [(SCATTER, "    if comm.rank != 0:\n        train, test = None, None\n" + SCATTER)]),
 "mn_whole_test_wrapped": (MN, [(SCATTER, "    train = chainermn.scatter_dataset(train, comm, shuffle=True)\n")]),
 "mn_printreport_on_stderr": (MN, [('"elapsed_time"]))', '"elapsed_time"], out=__import__("sys").stderr))')]),
 # MNIST conversion
 "mm_iteration_in_report": (MM, [('        extensions.PrintReport(["epoch", "main/loss",', '        extensions.PrintReport(["epoch", "iteration", "main/loss",')]),
 "mm_scatter_no_shuffle": (MM, [("    train = chainermn.scatter_dataset(train, comm, shuffle=True)\n    test = chainermn.scatter_dataset(test, comm, shuffle=True)\n",
                                 "    train = chainermn.scatter_dataset(train, comm)\n    test = chainermn.scatter_dataset(test, comm)\n")]),
}

def write():
    for name, (script, edits) in V.items():
        text = (SOL / script).read_text()
        for old, new in edits:
            assert old in text, (name, old)
            text = text.replace(old, new)
        (OUT / f"{name}.py").write_text(text)

if __name__ == "__main__":
    write()
    print("\n".join(V))
