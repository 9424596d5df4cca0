"""Issue 47, item 9: the hostile review of the final design (branch hostile-review).

Each test plants, in a reference solution, an attack that WON against the grader as it runs a
report cell (the grading sandbox, the judge's runs folder, the kernel frozen: test_hostile.report_cell),
or a CORRECT variant a student could write that lost its points (a false negative). Each asserts what
the design promises, so on the code reviewed (61bee61) every test here FAILS: it passes once the hole
is closed. The points each got in the review (tests/hostile_review_drive.py, one grading session) are
in each docstring.
"""

import numpy
import pytest

from handson_lib.autograder.synthetic_class import MISTAKES, Mistake
from handson_lib.checking import checks
from conftest import GRADED_SEED, ROOT
from test_hostile import judged_sandbox, report_cell

TASK1 = ROOT / "solutions" / "train_cifar_multi_gpu.py"
TASK2 = ROOT / "solutions" / "train_cifar_multi_node.py"
_MPU = "        updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices)\n"
_RUN = "    trainer.run()\n"

#: WIN 1 (Task #1): the course's stand-in is built (its class, module, backend, lr / N, the two
#: shards' iterators), but its update_core is replaced on the instance: ONE process computes both
#: workers' gradients (the stand-in's arithmetic, so the replay matches to the bit), writes the
#: worker's snapshots and worker files itself through the runtime's own `multigpu._Observer` (no word
#: of the source review), with a forked helper burning a core as "the worker" (its pid in worker1);
#: in the timed launch (no observer folder) two BLAS threads instead: ratio 1.02. No worker process
#: ever computes. Review: 4/4 correctness + 1/1 throughput (honest work: no MultiprocessParallelUpdater).
ONE_PROCESS = Mistake("train_cifar_multi_gpu.py", _MPU, '        # The course\'s own stand-in is built (its class, its backend, its lr / N), but no worker is\n        # ever started: one process computes what the N workers would, and says so nowhere.\n        updater = training.updaters.MultiprocessParallelUpdater(train_iters, optimizer, devices)\n        import numpy\n        from chainer.dataset import convert\n        from handson_lib.runtime import multigpu as _mg\n        keeper = _mg._Observer()\n        helper = [None]\n        if keeper.directory:   # only in the graded run: a helper that burns a core beside it\n            import multiprocessing\n\n            def burn():\n                import time\n                end = time.time() + 900\n                while time.time() < end:\n                    sum(i * i for i in range(10000))\n\n            helper[0] = multiprocessing.get_context("fork").Process(target=burn, daemon=True)\n            helper[0].start()\n        else:\n            from threadpoolctl import threadpool_limits\n            threadpool_limits(limits=2)\n\n        def flat_grads():\n            return numpy.concatenate([p.grad.ravel() for _, p in sorted(model.namedparams())])\n\n        def flat_params():\n            return numpy.concatenate([p.array.ravel() for _, p in sorted(model.namedparams())]).astype(numpy.float32)\n\n        def one_process_update(self=updater):\n            if self._layout is None:   # lazy parameters, as the stand-in does before its fork\n                self._initialise_lazy_params(model)\n                self._layout = True\n            others = []\n            for it in self._mpu_iterators[1:]:\n                batch = it.next()\n                model.cleargrads()\n                model(*convert.concat_examples(batch)).backward()\n                others.append(flat_grads().copy())\n            batch = self._mpu_iterators[0].next()\n            model.cleargrads()\n            loss = model(*convert.concat_examples(batch))\n            loss.backward()\n            total = numpy.stack(others).sum(axis=0)\n            offset = 0\n            for _, p in sorted(model.namedparams()):\n                p.grad += total[offset:offset + p.size].reshape(p.shape)\n                offset += p.size\n            optimizer.update()\n            done = self.iteration + 1\n            params = flat_params()\n            for index in range(1, len(self._mpu_iterators)):\n                keeper.keep(index, done, params)\n            if self.auto_new_epoch and self._mpu_iterators[0].is_new_epoch:\n                optimizer.new_epoch(auto=True)\n\n        def finalize(self=updater):\n            if keeper.directory and self._layout is not None:\n                params = flat_params()\n                pid = helper[0].pid if helper[0] is not None else 0\n                for index in range(len(self._mpu_iterators)):\n                    keeper.save("worker%d" % index, pid=pid if index else numpy.int64(__import__("os").getpid()),\n                                index=index, images=0, params=params)\n\n        updater.update_core = one_process_update\n        updater.finalize = finalize\n', frozenset(), "")

#: WIN 2 (Task #2, README's admitted gap, quantified): ranks train ALONE (each its own gradient, no
#: averaging) except for the first 6 updates and the iterations the run is asked to keep (read from
#: `multigpu._Observer().snapshots`), before which rank 0's parameters and momentum are broadcast;
#: zeros allreduced once at the end for the bytes, rank 0's parameters broadcast at the end. About 68
#: of 80 updates average nothing. Review: 5/5 correctness + 2/2 speed.
AVERAGES_WHERE_LOOKED_AT = Mistake("train_cifar_multi_node.py", _RUN, '    from handson_lib.runtime import multigpu as _mg\n    looked_at = set(_mg._Observer().snapshots)\n    if _mg._Observer().directory and looked_at:\n        import numpy\n        multi = optimizer                       # ChainerMN\'s optimizer: its communicator averages\n        alone = optimizer.actual_optimizer      # the plain MomentumSGD inside it\n        kept_zeros = [0]\n\n        def update(lossfun=None, *args, **kwds):\n            upcoming = updater.iteration + 1\n            if upcoming <= 6 or upcoming in looked_at:\n                if upcoming > 6 and upcoming - 1 not in looked_at:\n                    comm.bcast_data(model)                      # rank 0\'s parameters ...\n                    for _, param in sorted(model.namedparams()):   # ... and its momentum\n                        state = param.update_rule.state\n                        if state is not None:\n                            comm.mpi_comm.Bcast(state["v"], root=0)\n                return type(multi).update(multi, lossfun, *args, **kwds)\n            kept_zeros[0] += 1\n            return alone.update(lossfun, *args, **kwds)        # this rank\'s gradient only\n\n        object.__setattr__(optimizer, "update", update)\n\n        @training.make_extension(trigger=(args.epoch, "epoch"), priority=-1000)\n        def bytes_at_the_end(trainer):\n            size = sum(p.size for p in model.params())\n            zeros = numpy.zeros(int(0.4 * kept_zeros[0] * size), numpy.float32)\n            comm.mpi_comm.Allreduce(zeros.copy(), zeros)\n            comm.bcast_data(model)   # one set of parameters at the end\n\n        trainer.extend(bytes_at_the_end)\n' + _RUN, frozenset(), "")

#: WIN 3 (Task #2 timing): a slow but correct script (every step's work twice: honest speed 1.5/2,
#: ratio 0.53) whose timed launch replaces steps 4..15 of the 18 (never set beside the replay:
#: checking.replay.timing_plan keeps 3 and the last three) by a burn of CPU (0.35 of its last real
#: step, enough for the 0.8 work share) while drawing their minibatches. Review: 2/2 speed (ratio 1.25;
#: 0.98 on a quieter machine, still 2/2); credited in 3 of the 4 gradings run.
FAKED_MIDDLE_STEPS = '    # The timed launch (no observer folder there): steps 4..15 are never compared with the replay.\n    from handson_lib.runtime import multigpu as _mg\n    if not _mg._Observer().directory:\n        import time\n        import numpy\n        real_update = updater.update\n        last = [0.05]\n\n        def update():\n            done = updater.iteration\n            if 3 <= done < 15:\n                block = numpy.ones((200, 200), numpy.float32)\n                started = time.process_time()\n                while time.process_time() - started < 0.35 * last[0]:\n                    block @ block\n                for it in getattr(updater, "_mpu_iterators", None) or [updater.get_iterator("main")]:\n                    it.next()   # the minibatch is drawn (the later steps\' batches stay the grader\'s), never trained on\n                updater.iteration += 1\n                return\n            started = time.process_time()\n            real_update()\n            last[0] = time.process_time() - started\n\n        updater.update = update\n'


def _correctness_failures(report):
    return {c.name: c.message for c in report.failed if c not in report.speed_checks}


@pytest.fixture(scope="module")
def task1_reference(measure_reference):
    return measure_reference(TASK1.name, ["--gpus", "0", "1", *checks.MULTI_GPU_ARGS])


@pytest.fixture(scope="module")
def task2_reference(measure_reference):
    """Measured with the seed the checks then draw (conftest.graders_seed), as in a grading session."""
    return {2: measure_reference(TASK2.name, [*checks.GRADED_MULTI_NODE_ARGS, "--seed", str(GRADED_SEED)], np=2)}


@pytest.mark.system
def test_one_process_computing_two_workers_arithmetic_earns_no_structure_point(tmp_path, monkeypatch,
                                                                              task1_reference):
    with report_cell(tmp_path, monkeypatch, "train_cifar_multi_gpu", ONE_PROCESS.apply(TASK1.read_text())) as script:
        report = checks.check_multi_gpu(script, reference=task1_reference)
    failed = _correctness_failures(report)
    assert "one worker process per device" in failed or "uses MultiprocessParallelUpdater" in failed, report.text()


def _task2_untimed(tmp_path, monkeypatch, mistake, reference):
    """Task #2's report cell on the solution with `mistake` planted, its correctness checks only."""
    with report_cell(tmp_path, monkeypatch, "train_cifar_multi_node", mistake.apply(TASK2.read_text())) as script:
        return checks.check_multi_node(script, reference=reference, scaling=False, timed=False)


@pytest.mark.system
def test_ranks_that_average_only_where_the_grader_looks_earn_no_structure_point(tmp_path, monkeypatch,
                                                                               task2_reference, graders_seed):
    report = _task2_untimed(tmp_path, monkeypatch, AVERAGES_WHERE_LOOKED_AT, task2_reference)
    assert "parameters identical on every rank" in _correctness_failures(report), report.text()


@pytest.mark.system
def test_timed_steps_the_replay_never_sees_are_not_credited(tmp_path, monkeypatch, task2_reference, graders_seed):
    source = MISTAKES["twice_the_work_2"].apply(TASK2.read_text()).replace(_RUN, FAKED_MIDDLE_STEPS + _RUN)
    with report_cell(tmp_path, monkeypatch, "train_cifar_multi_node", source) as script:
        report = checks.check_multi_node(script, reference=task2_reference)
    print(report.text())
    assert _correctness_failures(report) == {}, report.text()
    throughput = next(c for c in report.speed_checks if c.name.startswith("throughput"))
    # Its honest steps run at about half the reference's speed: a ratio above 0.7 is the burn's.
    assert not (throughput.passed and throughput.value > 0.7), report.text()


#: WIN 4 (Task #2, the review in the sandbox at 4962dae): the test set not scattered, a plain
#: Evaluator on every rank, and one line that set the instance attribute the ranks' records read as
#: "wrapped by create_multi_node_evaluator". With 256 test images (whole minibatches on 2 ranks) the
#: whole set's accuracy is the mean over the ranks' halves: the grader's evaluation agreed. Review:
#: 9/9 checks, 11/14 (honest work: no multi-node evaluator).
EVALUATOR_ALONE_MARKED_WRAPPED = Mistake(
    "train_cifar_multi_node.py", "    test = chainermn.scatter_dataset(test, comm, shuffle=True)\n", "",
    frozenset({"evaluator aggregated over ranks"}), "",
    more=(("evaluator = chainermn.create_multi_node_evaluator(\n"
           "        extensions.Evaluator(test_iter, model, device=device), comm)",
           "evaluator = extensions.Evaluator(test_iter, model, device=device)\n"
           "    evaluator.evaluate = evaluator.evaluate"),))


@pytest.mark.system
def test_an_evaluator_alone_on_every_rank_marked_as_wrapped_earns_no_evaluator_point(tmp_path, monkeypatch,
                                                                                    task2_reference, graders_seed):
    report = _task2_untimed(tmp_path, monkeypatch, EVALUATOR_ALONE_MARKED_WRAPPED, task2_reference)
    failed = _correctness_failures(report)
    assert "evaluator aggregated over ranks" in failed, report.text()
    assert "whole test set" in failed["evaluator aggregated over ranks"], report.text()


# ------------------------------------------------------------------ false negatives: correct variants

#: Task #2: PrintReport with an "iteration" column (Chainer's ImageNet example's header): a correct
#: script; "reports only on rank 0" looks for "epoch" followed by "main/" (verdicts.seen._TAGGED_REPORT).
#: Review: 0/5 correctness, 0/2 speed.
ITERATION_COLUMN = ('            ["epoch", "main/loss",', '            ["epoch", "iteration", "main/loss",')
#: Task #1: a random split of the training set in two halves without split_dataset_n_random (not
#: fixed by harness.controls): MultiprocessParallelUpdater on two disjoint random shards.
#: Review: 0/4 correctness ("uses MultiprocessParallelUpdater: not shown"), 0/1 throughput.
RANDOM_HALVES = ("        parts = chainer.datasets.split_dataset_n_random(train, len(args.gpus), seed=args.seed)\n",
                 "        parts = chainer.datasets.split_dataset_random(train, len(train) // 2, seed=args.seed)\n")
#: Task #2: a MultiprocessIterator for the training set (a student speeding up the data): the
#: launcher's order (controls._set_order) does not reach its prefetch loop after the first epoch.
#: Review: 0/5 correctness ("the update of rank0 to iteration 21 is not ..."), 0/2 speed -- in a session
#: whose plan checks an update of the second epoch (late step 20 or 21 of snapshot_plan: 2 seeds in 3;
#: it passed in one pytest run whose drawn seed checked update 20 only).
PREFETCHING = ("    train_iter = chainer.iterators.SerialIterator(train, args.batchsize)\n",
               "    train_iter = chainer.iterators.MultiprocessIterator(train, args.batchsize, n_processes=1)\n")
#: Task #1: Chainer's own data-parallel example's iterators (MultiprocessIterator per shard): the
#: stand-in's workers are daemonic processes, which may not start the iterator's pool.
#: Review: 0/4 ("worker gpu1 failed: AssertionError: daemonic processes are not allowed to have children").
PREFETCHING_PER_DEVICE = (
    "        train_iters = [chainer.iterators.SerialIterator(part, args.batchsize) for part in parts]\n",
    "        train_iters = [chainer.iterators.MultiprocessIterator(part, args.batchsize, n_processes=1) "
    "for part in parts]\n")


@pytest.mark.system
@pytest.mark.parametrize("edit", [ITERATION_COLUMN, PREFETCHING], ids=["iteration_column", "multiprocess_iterator"])
def test_correct_task2_variants_keep_their_correctness_points(tmp_path, monkeypatch, task2_reference, edit,
                                                           graders_seed):
    source = TASK2.read_text()
    assert edit[0] in source
    with report_cell(tmp_path, monkeypatch, "train_cifar_multi_node", source.replace(*edit)) as script:
        report = checks.check_multi_node(script, reference=task2_reference, scaling=False, timed=False)
    assert _correctness_failures(report) == {}, report.text()


@pytest.mark.system
@pytest.mark.parametrize("edit", [RANDOM_HALVES, PREFETCHING_PER_DEVICE], ids=["random_halves", "multiprocess_iterators"])
def test_correct_task1_variants_keep_their_correctness_points(tmp_path, monkeypatch, task1_reference, edit):
    source = TASK1.read_text()
    assert edit[0] in source
    with report_cell(tmp_path, monkeypatch, "train_cifar_multi_gpu", source.replace(*edit)) as script:
        report = checks.check_multi_gpu(script, reference=task1_reference)
    assert _correctness_failures(report) == {}, report.text()


#: The stretch, correct in float32 (Chainer's dtype): the counts summed over the ranks, divided at
#: the end. Off by ~2e-8 from the grader's float64 value; the grade cell asks atol=1e-9 and says
#: "not the accuracy over the whole test set: [1. 0.7407 ...] vs [1. 0.7407 ...]". Review: 0/1.
STRETCH_FLOAT32 = """import chainer
import numpy


def per_class_accuracy(comm, model, dataset, n_class):
    x, t = chainer.dataset.concat_examples(dataset)
    with chainer.using_config("train", False), chainer.no_backprop_mode():
        predicted = model.predictor(x).array.argmax(axis=1)
    correct = numpy.zeros(n_class, numpy.float32)
    total = numpy.zeros(n_class, numpy.float32)
    numpy.add.at(correct, t[predicted == t], 1)
    numpy.add.at(total, t, 1)
    return comm.allreduce_obj(correct) / numpy.maximum(comm.allreduce_obj(total), 1)
"""


@pytest.mark.slow
def test_a_correct_float32_stretch_passes_the_stretch_test(tmp_path):
    """The grade cell's comparison (02_multi_node.ipynb, stretch_per_class_test), on the grader's
    kind of test set, with a correct function computing in float32."""
    import importlib.util
    from handson_lib.experiments import rank_metric
    path = tmp_path / "stretch_float32.py"
    path.write_text(STRETCH_FLOAT32)
    spec = importlib.util.spec_from_file_location("stretch_float32", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    held = rank_metric.graders_test_set()
    checked = rank_metric.run_on_ranks(module.per_class_accuracy, test=held)
    whole = rank_metric.whole_test_set(held)
    per_rank = numpy.array(checked["per_rank"])
    assert numpy.allclose(per_rank[0], whole, rtol=0, atol=1e-6), (per_rank[0] - whole)   # as the grade cell


#: WIN 4 (the stretch): a per_class_accuracy of this rank's part only (comm unused: honest work 0/1),
#: and, in the same answer cell, `launch.run_mpi` replaced: in the on_answers process, before the
#: course's run_on_ranks starts the ranks, the patch reads the grader's parts (written there for the
#: ranks), computes the whole set's value with the course's own rank_metric.whole_test_set, and writes
#: it over what the ranks returned. Review: the grade cell's comparison passes (1/1); "shard_sizes"
#: [0, 0] in what came back is the only trace, and the grade cell does not read it.
STRETCH_PATCHES_THE_LAUNCH = 'import json\n\nimport chainer\nimport numpy\n\nfrom handson_lib import launch\nfrom handson_lib.experiments import rank_metric\n\n\ndef per_class_accuracy(comm, model, dataset, n_class):\n    """This rank\'s own part only: nothing summed over the ranks (comm unused)."""\n    x, t = chainer.dataset.concat_examples(dataset)\n    with chainer.using_config("train", False), chainer.no_backprop_mode():\n        predicted = model.predictor(x).array.argmax(axis=1)\n    return numpy.bincount(t[predicted == t], minlength=n_class) / numpy.maximum(numpy.bincount(t, minlength=n_class), 1)\n\n\n_run_mpi = launch.run_mpi\n\n\ndef _whole_in_one_process(np, argv, *args, **kwargs):\n    """What the course function starts the ranks with: the grader\'s parts are read here first, the\n    whole set\'s value computed in this one process by the course\'s own code, and written over what\n    the ranks returned."""\n    parts = argv[4] if len(argv) > 4 else None\n    value = None\n    if parts:\n        import os\n        xs, ts = [], []\n        for rank in range(np):\n            with numpy.load(os.path.join(parts, "part-%d.npz" % rank)) as arrays:\n                xs.append(arrays["x"])\n                ts.append(arrays["t"])\n        value = rank_metric.whole_test_set((numpy.concatenate(xs), numpy.concatenate(ts)))\n    result = _run_mpi(np, argv, *args, **kwargs)\n    if value is not None:\n        with open(argv[3], "w") as f:\n            json.dump({"ranks": np, "shard_sizes": [0] * np, "per_rank": [value] * np, "single": None}, f)\n    return result\n\n\nlaunch.run_mpi = _whole_in_one_process\n'


@pytest.mark.system
def test_an_answer_cell_cannot_hand_the_stretch_test_the_graders_own_value(tmp_path, monkeypatch):
    import json
    from handson_lib.autograder import judge, nbgrader_ext
    from handson_lib.experiments import rank_metric
    with judged_sandbox(tmp_path, monkeypatch, "stretcher", "") as (_, spec, _):
        memo = tmp_path / "memo"
        memo.mkdir()
        monkeypatch.setenv(judge.JUDGE_ENV, json.dumps({**spec, "memo": str(memo)}))

        def per_class_accuracy():   # what the kernel's answer stands for: the name of the student's function
            pass

        held = rank_metric.graders_test_set()
        from handson_lib.checking import notebook
        with nbgrader_ext._judged_runs(False):
            grader = judge.Judge(lambda code: "", answer_cells=lambda: [STRETCH_PATCHES_THE_LAUNCH],
                                 call_folder=spec["runs"])
            # The grade cell as it reads since the review: the ranks run the answer cells' source.
            notebook.set_answer_source(grader.answer_source)
            try:
                checked = rank_metric.run_on_ranks(notebook.answer_source(per_class_accuracy), test=held)
            finally:
                notebook.set_answer_source(None)
    whole = rank_metric.whole_test_set(held)
    per_rank = numpy.array(checked["per_rank"])
    # The grade cell's comparison (02_multi_node.ipynb, stretch_per_class_test) must fail.
    assert not numpy.allclose(per_rank[0], whole, rtol=0, atol=1e-6), checked
