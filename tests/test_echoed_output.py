"""What a check or a notebook cell shows of a run: readable, and one run's numbers alike in every cell."""

from handson_lib.checking import checks, notebook, watchdog


def test_a_checks_echoed_output_has_no_terminal_control_sequences():
    """Chainer's PrintReport writes ESC[J before each line: the report showed `[J1  2.16 ...`."""
    output = "epoch  main/loss\n\x1b[J1  2.16545\n\x1b[J2  1.91322\n\x1b[4A\x1b[J"
    assert watchdog._tail(output) == "epoch  main/loss\n1  2.16545\n2  1.91322"


def test_the_throughput_table_says_whose_clock_its_images_per_second_are(capsys, monkeypatch):
    """01 showed one run as `Throughput: 502.93` (the script's clock) and 503.0 in the table of the
    next cell (the observer's): two clocks, not a rounding, and the table says so."""
    monkeypatch.setenv("HANDSON_LANG", "en")
    notebook.print_table([("one device", 503.0, 1.0), ("two devices", 880.456, 1.7507)])
    out = capsys.readouterr().out
    assert "503.0" in out and "880.5" in out and "1.75x" in out, out
    assert "observer" in out and "`Throughput:` line" in out, out
