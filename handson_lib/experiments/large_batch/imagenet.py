"""The seed's table (slide 36): ResNet-50 on ImageNet-1k in fewer and fewer hours as the total batch
grew, with the updates of 90 epochs and, given a scaling rule, the learning rate it gives."""

#: The seed's table (slide 36): ResNet-50 on ImageNet-1k, 90 epochs, single-crop top-1 accuracy.
IMAGENET_IN_15_MINUTES = (
    # team, hardware, software, total batch, time, top-1 accuracy (None: not given)
    ("He et al.", "P100 x 8", "Caffe", 256, "29 hr", 75.3),
    ("Goyal et al.", "P100 x 256", "Caffe2", 8192, "1 hr", 76.3),
    ("Codreanu et al.", "KNL 7250 x 720", "Intel Caffe", 11520, "62 min", 75.0),
    ("Cho et al.", "P100 x 256", "Torch", 8192, "50 min", None),
    ("You et al.", "Xeon 8160 x 1600", "Intel Caffe", 16000, "31 min", 75.3),
    ("Akiba et al. (ChainerMN)", "P100 x 1024", "Chainer", 32768, "15 min", 74.9),
)


IMAGENET_TRAIN_IMAGES = 1_281_167

GOYAL_BASE_LR, GOYAL_BASE_BATCH = 0.1, 256  # ResNet-50 reference: lr 0.1 for a batch of 256


def imagenet_table(epochs=90, scaling_rule=None):
    """The seed's table with derived columns: updates in ``epochs`` epochs of ImageNet-1k, and, given
    a ``scaling_rule(base_lr, base_batch, batch)``, the learning rate it gives from 0.1 at batch 256
    (Goyal et al.'s reference; Akiba et al. went beyond it with RMSprop warmup)."""
    return [{"team": team, "hardware": hardware, "software": software, "batch": batch, "time": time_,
             "top1": top1, "updates": round(epochs * IMAGENET_TRAIN_IMAGES / batch),
             "rule_lr": scaling_rule(GOYAL_BASE_LR, GOYAL_BASE_BATCH, batch) if scaling_rule else None}
            for team, hardware, software, batch, time_, top1 in IMAGENET_IN_15_MINUTES]


def print_imagenet_table(scaling_rule=None, print_fn=print):
    """The table of :func:`imagenet_table`; the "rule lr" column only when a rule is given."""
    rule_head = f" {'rule lr':>8s}" if scaling_rule else ""
    print_fn(f"{'team':25s} {'hardware':17s} {'software':11s} {'batch':>6s} {'time':>7s} "
             f"{'top-1':>6s} {'updates':>8s}{rule_head}")
    for row in imagenet_table(scaling_rule=scaling_rule):
        top1 = f"{row['top1']:.1f}%" if row["top1"] is not None else "-"
        rule_lr = f" {row['rule_lr']:8.2f}" if scaling_rule else ""
        print_fn(f"{row['team']:25s} {row['hardware']:17s} {row['software']:11s} {row['batch']:6d} "
                 f"{row['time']:>7s} {top1:>6s} {row['updates']:8d}{rule_lr}")
