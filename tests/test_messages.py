"""Messages a student reads, in the student's language (handson_lib.messages): the choice
of the language, the fall-backs to English, the Japanese catalogue in step with the code, and real
outputs in Japanese (`handson check`, the job-script linter, a missing dataset, the watchdog)."""

import io
import string
import sys

import pytest

from handson_lib import data, launch
from handson_lib.checking import checks
from handson_lib.authoring import translations
from handson_lib import messages
from handson_lib.messages_ja import MESSAGES
from handson_lib.runtime import training
from handson_lib.sites import jobscript
from handson_lib.sites.jobscript import lint

from conftest import ROOT, mutant

LOCALE_VARIABLES = ("HANDSON_LANG", "LC_ALL", "LC_MESSAGES", "LANG")


@pytest.fixture
def env(monkeypatch):
    """A clean slate: no language variable set, no note given yet."""
    for name in LOCALE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(messages, "_noted", set())
    return monkeypatch


def _fields(template):
    """The template's {fields} with their conversions and format specs."""
    return sorted((name, conversion or "", spec or "")
                  for _, name, spec, conversion in string.Formatter().parse(template) if name is not None)


# ------------------------------------------------------------------------------ the language

@pytest.mark.parametrize("variables, expected", [
    ({}, "en"),
    ({"HANDSON_LANG": "ja"}, "ja"),
    ({"HANDSON_LANG": "ja_JP.UTF-8"}, "ja"),
    ({"HANDSON_LANG": "en", "LANG": "ja_JP.UTF-8"}, "en"),      # HANDSON_LANG wins over the locale
    ({"LANG": "ja_JP.UTF-8"}, "ja"),
    ({"LC_ALL": "ja_JP.UTF-8", "LANG": "en_US.UTF-8"}, "ja"),   # LC_ALL wins over LANG
    ({"LC_ALL": "C.UTF-8", "LANG": "ja_JP.UTF-8"}, "en"),
    ({"LANG": "de_DE.UTF-8"}, "en"),                           # a locale the course lacks: English
])
def test_the_language_comes_from_handson_lang_then_the_locale(env, variables, expected):
    for name, value in variables.items():
        env.setenv(name, value)
    assert messages.language() == expected
    shown = messages.tr("{passed} of {total} checks passed", passed=7, total=8)
    assert shown == ("8 項目中 7 項目のチェックに合格しました" if expected == "ja" else "7 of 8 checks passed")


def test_an_unknown_handson_lang_notes_it_once_and_speaks_english(env, capsys):
    env.setenv("HANDSON_LANG", "klingon")
    env.setenv("LANG", "ja_JP.UTF-8")   # HANDSON_LANG, even unknown, decides
    for _ in range(3):
        assert messages.tr("{passed} of {total} checks passed", passed=1, total=2) == "1 of 2 checks passed"
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and "HANDSON_LANG='klingon'" in err and "English" in err, err


def test_a_template_without_translation_is_shown_in_english(env):
    env.setenv("HANDSON_LANG", "ja")
    template = "a message nobody has translated: {n} of them"   # a variable: not a tr() literal
    assert messages.tr(template, n=3) == "a message nobody has translated: 3 of them"
    assert messages.tr("runs to the end") == "最後まで実行できる"


# ------------------------------------------------------------------------------ the catalogue

def test_every_message_is_translated_and_no_translation_is_stale():
    assert translations.message_problems("ja") == []


@pytest.mark.parametrize("template", sorted(MESSAGES))
def test_every_translation_keeps_the_fields_of_its_template(template):
    translation = MESSAGES[template]
    assert _fields(translation) == _fields(template), (template, translation)
    assert any(ord(ch) > 0x2FFF for ch in translation), f"not Japanese: {translation!r}"


def test_check_names_stay_english_and_are_shown_translated(env):
    env.setenv("HANDSON_LANG", "ja")
    report = checks.Report("multi-node", "train.py")
    report.add("runs to the end", False, "x")
    report.add("scaling: 2 ranks vs your 1-rank run", True, "y", value=1.8)
    assert [c.name for c in report.failed] == ["runs to the end"]          # the identity: English
    assert [c.name for c in report.speed_checks] == ["scaling: 2 ranks vs your 1-rank run"]
    assert report.checks[0].line() == "  [FAIL] 最後まで実行できる: x"
    assert report.checks[1].line() == "  [PASS] スケーリング: 2 ランク対あなたの 1 ランクでの実行: y"
    env.delenv("HANDSON_LANG")
    assert report.checks[1].line() == "  [PASS] scaling: 2 ranks vs your 1-rank run: y"
    assert checks.check_title("a name no check has") == "a name no check has"


# ------------------------------------------------------------------------------ real outputs

def test_handson_check_tells_a_crash_in_japanese(run_handson, tmp_path):
    """`handson check multi-node` on a script that crashes on every rank right after start-up."""
    script = mutant(ROOT / "solutions" / "train_cifar_multi_node.py", tmp_path,
                    "    comm = chainermn.create_communicator(communicator_name)\n",
                    "    comm = chainermn.create_communicator(communicator_name)\n"
                    "    raise RuntimeError('planted crash')\n")
    r = run_handson("check", "multi-node", script, "--against", "self", "--timeout", "120",
                    env={"HANDSON_LANG": "ja"}, timeout=300)
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "を採点用ランチャーのもとで 2 ランクで実行しています" in out
    assert "  [FAIL] 最後まで実行できる: ランク " in out, out
    assert "が RuntimeError: planted crash で異常終了しました" in out
    assert "（他のランクは中断されました）" in out
    assert "  [FAIL] シャードが重ならない: 未確認: 実行が終わりませんでした" in out
    assert "  [FAIL] スケーリング: 2 ランク対あなたの 1 ランクでの実行: " in out
    assert "項目中 0 項目のチェックに合格しました -- 上の FAIL の行を見てください" in out
    assert "スクリプトの出力の最後の行:" in out
    assert "[PASS]" not in out and "runs to the end" not in out


def test_a_placeholder_group_is_refused_in_japanese(env):
    text = (ROOT / "solutions" / "run_multi_node_training.sh").read_text()
    env.setenv("HANDSON_LANG", "ja")
    [finding] = lint(text, "reedbush")
    assert finding.code == "placeholder" and finding.severity == "error"
    assert finding.message.startswith("グループ `gt00` はプレースホルダーです（"), finding.message
    assert "自分のグループ（ログインノードで `id -ng`）に置き換えてください。残したままのプレースホルダーのグループは、qsub の前にはエラーですが" in finding.message
    env.delenv("HANDSON_LANG")
    [english] = lint(text, "reedbush")
    assert english.message.startswith("group `gt00` is a placeholder (")


def test_a_missing_dataset_is_explained_in_japanese(env, tmp_path):
    env.setenv("HANDSON_LANG", "ja")
    missing = tmp_path / "nowhere" / "cifar-10-python.tar.gz"
    with pytest.raises(data.DatasetNotFoundError) as exc:
        data.get_dataset(missing, announce=False)
    message = str(exc.value)
    assert message.startswith(f"{missing} に CIFAR-10 が見つかりません。"), message
    assert "ログインノード" in message and "計算ノードはオフラインです" in message
    assert "https://www.cs.toronto.edu/~kriz/cifar.html" in message        # URLs and commands unchanged
    assert f"`handson data prepare --cifar {missing}`" in message


def test_the_watchdog_says_why_it_stopped_a_run_in_japanese(env):
    env.setenv("HANDSON_LANG", "ja")
    res = launch.run_watched([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    assert res.timed_out
    assert "[watchdog] 1 秒で強制終了しました: 制限時間内に実行が終わりませんでした" in res.output, res.output


def test_an_unfinished_skeleton_and_the_lint_summary_speak_japanese(env, tmp_path):
    """The first error every skeleton run hits, and the last line of `handson jobscript lint`."""
    env.setenv("HANDSON_LANG", "ja")
    with pytest.raises(NotImplementedError) as exc:
        training.require_done("Task #2", comm=None, device="cpu")
    assert str(exc.value) == ("タスク#2 はまだ完成していません: `comm` が None のままです。"
                              "これを設定する `# PUT YOUR CODE HERE` の部分を埋めてください。")
    with pytest.raises(NotImplementedError, match="`train_iters`, `devices` が None のままです。これらを"):
        training.require_done("Task #1", train_iters=None, devices=None)
    script = tmp_path / "run_multi_node_training.sh"
    script.write_text((ROOT / "solutions" / "run_multi_node_training.sh").read_text())   # gt00: an error
    out = io.StringIO()
    assert jobscript.lint_main([str(script)], site="reedbush", out=out) == 1
    summary = out.getvalue().splitlines()[-1]
    assert summary == ("handson jobscript lint: 1 個のファイルを確認しました（Reedbush-H）: エラー 1 件、"
                       "警告 0 件。qsub の前にエラーを直してください"), summary
    env.delenv("HANDSON_LANG")
    with pytest.raises(NotImplementedError, match=r"^Task #2 is not complete: `comm` is still None\. Fill"):
        training.require_done("Task #2", comm=None)
    out = io.StringIO()
    jobscript.lint_main([str(script)], site="reedbush", out=out)
    assert out.getvalue().splitlines()[-1].endswith(": 1 error(s), 0 warning(s): fix the errors before qsub")


def test_a_job_run_here_is_described_in_japanese(env, tmp_path):
    """The block `handson jobscript run` prints before it runs a job script without a scheduler."""
    from handson_lib.sites.table import get_site
    script = tmp_path / "run_multi_node_training.sh"
    script.write_text((ROOT / "solutions" / "run_multi_node_training.sh").read_text())
    job = jobscript.LocalJob.of(script, timeout=30)
    env.setenv("HANDSON_LANG", "ja")
    out = io.StringIO()
    job.describe(get_site("reedbush"), 30, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == ("handson jobscript run: ここにはスケジューラがありません: run_multi_node_training.sh を "
                        "PBS ジョブとして実行されるのと同じように、いまここで実行します（Reedbush-H の規則）"), lines[0]
    assert any(line.startswith("  nodes      ") and " ランク、すべてこのマシン上（" in line for line in lines), lines
    assert any(line.endswith("（ウォッチドッグ: --timeout による 30 秒）") for line in lines), lines
    assert any(line.endswith("（標準出力と標準エラー出力、-j oe と同じ）") for line in lines), lines
    env.delenv("HANDSON_LANG")
    out = io.StringIO()
    job.describe(get_site("reedbush"), 30, out)
    english = out.getvalue()
    assert "no scheduler here: running run_multi_node_training.sh as a PBS job would run" in english
    assert "(watchdog: 30 s from --timeout)" in english and "ランク" not in english


def test_an_uncaught_error_aborts_the_ranks_with_a_japanese_line(env, capsys):
    import types
    from handson_lib.runtime import mpi
    aborted = []

    class World:   # rank 1 of 2, without starting MPI in the test process
        Get_rank, Get_size = staticmethod(lambda: 1), staticmethod(lambda: 2)
        Abort = staticmethod(aborted.append)
    env.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=types.SimpleNamespace(COMM_WORLD=World)))
    env.setattr(sys, "excepthook", lambda *exc: None)   # the hook chains to it
    env.setenv("HANDSON_LANG", "ja")
    hook = mpi.install_abort_hook()
    try:
        raise RuntimeError("planted")
    except RuntimeError as exc:
        hook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert "[rank 1] 捕捉されない RuntimeError が発生しました。どのランクも待ち続けないよう、全 2 ランクを中止します" in err, err
    assert "RuntimeError: planted" in err and aborted == [1]


def test_benchmark_outputs_speak_japanese_and_keep_their_english_records(env):
    """The prose around a benchmark's numbers (notebooks 04 to 06) in Japanese; the table rows, the
    numbers (the hidden answer `2,180,000` of notebook 04 included), the result dicts, the dataset's
    English description (what records keep) and the English edition's lines unchanged."""
    from handson_lib.experiments import allreduce, tuning

    def row(path):
        return {"path": path, "bytes": 2180000, "calls": 3, "iterations": 5, "time_s": 0.0012, "min_s": 0.001,
                "max_s": 0.002, "algbw_GBps": 1.5, "busbw_GBps": 1.2, "busbw_Gibps": 8.9,
                "traffic_bytes": 2180000.0, "correct": True}
    result = {"ranks": 2, "hosts": ["vm"], "communicator": "naive", "iterations": 5, "warmup": 2, "model": "cnn",
              "bytes": 2180000, "load_average": [1.71], "cpu_count": 2, "link": {},
              "results": [row("chainermn"), row("mpi4py"), row("p2p")]}
    english = allreduce.format_table(result).splitlines()
    assert english[:4] == [
        "allreduce benchmark: 2 rank(s) on 1 host(s) (vm), communicator naive, 5 timed iterations after 2 warm-up",
        "gradients of cnn: L = 2,180,000 bytes (2.079 MiB); allreduce traffic per rank = 2,180,000 bytes",
        "all ranks share one host: the bytes move through shared memory, not a network",
        "load average 1.71 at the start, on 2 CPU(s): a load above the CPU count means other processes shared "
        "them and the times are noisy"]
    assert english[-1] == " 2.079 MiB: ChainerMN busbw / raw MPI busbw = 1.00; busbw / P2P: ChainerMN 1.00, raw MPI 1.00"
    steps = tuning.plan_steps(["cudnn"], gpu=False)
    runs = {0: [{"iterations_per_sec": r / 32, "images_per_sec": r, "data_fraction": 0.1, "batchsize": 32}
                for r in (100, 110)]}
    measured = tuning.measure.assemble(steps, runs, {"source": "measured here", "repeats": 2, "device": "CPU", "model": "cnn"})
    tuning_english = tuning.table(measured)
    _, _, info = data.get_dataset("synthetic", n_train=40, n_test=20, announce=False)
    assert info.announcement == info.description == ("Using synthetic CIFAR-shaped data (offline stand-in, "
                                                     "NOT CIFAR-10): 40 train / 20 test, 3x32x32, 10 classes")

    env.setenv("HANDSON_LANG", "ja")
    japanese = allreduce.format_table(result).splitlines()
    assert japanese[0] == ("通信（allreduce）のベンチマーク: 1 ホスト（vm）上の 2 ランク、コミュニケータ naive、"
                           "ウォームアップ 2 イテレーションの後に 5 イテレーションを計測"), japanese[0]
    assert japanese[1].startswith("cnn の勾配: L = 2,180,000 バイト（2.079 MiB）。"), japanese[1]
    assert all(any(ord(ch) > 0x2FFF for ch in line) for line in japanese[:4] + japanese[-2:]), japanese
    assert japanese[4:-2] == english[4:-2]          # the header and the rows: code-like words and numbers
    lines = tuning.table(measured).splitlines()
    assert lines[0] == "このマシンでの計測: CPU、cnn。2 回の実行の中央値（ウォームアップを除く）", lines[0]
    assert lines[-2].endswith("  GPU が必要: 適用していません") and lines[-1].startswith("x base: ベースラインに対する")
    assert measured["steps"][1]["status"] == "needs a GPU: not applied"    # the result (its JSON) stays English
    out = []
    _, _, info = data.get_dataset("synthetic", n_train=40, n_test=20, print_fn=out.append)
    assert out == [info.announcement] and info.announcement.startswith("CIFAR と同じ形の合成データを使います（")
    assert info.description.startswith("Using synthetic CIFAR-shaped data (offline stand-in, NOT CIFAR-10): 40 train")

    env.delenv("HANDSON_LANG")
    assert allreduce.format_table(result).splitlines() == english and tuning.table(measured) == tuning_english


#: Mistakes a student makes in a job script, each giving lint a finding to say.
LINT_MISTAKES = [("select=2:mpiprocs=2:ompthreads=1", "select=2:mpiprocs=4:ompthreads=1"),
                 ("select=2:mpiprocs=2:ompthreads=1", "select=2:ngpus=2:mpiprocs=2:ompthreads=1"),
                 ("select=2:mpiprocs=2:ompthreads=1", "select=9:mpiprocs=2"),
                 ("#PBS -l walltime=00:15:00\n", ""), ("#PBS -q h-debug\n", ""),
                 ('mpiexec -n "$NP"', "mpiexec -n 9"), ("-x PYTHONUSERBASE ", "")]


def test_lint_in_japanese_spaces_its_words_and_counts_gpus_in_mai(env):
    """Issue 49: lint said 「GPU 2 個 しかありません」: the wrong counter, and a space between two
    Japanese words where a field ended. Every finding of a row of mistakes, rendered in Japanese:
    no half-width space between two Japanese characters, GPUs counted in 枚."""
    env.setenv("HANDSON_LANG", "ja")
    text = (ROOT / "solutions" / "run_multi_node_training.sh").read_text()
    said = []
    for old, new in LINT_MISTAKES:
        assert old in text, old
        said += [f.message for f in lint(text.replace(old, new), "reedbush")]
    assert len(said) > len(LINT_MISTAKES)
    japanese = r"[\u3040-\u30ff\u4e00-\u9fff々（）「」、。]"
    import re
    spaced = [m for m in said if re.search(rf"{japanese} {japanese}", m)]
    counted = [m for m in said if re.search(translations.JA_WORDS_GPU, m)]
    assert spaced == [] and counted == [], (spaced, counted)
    assert any("GPU 2 枚しかありません" in m for m in said), said
