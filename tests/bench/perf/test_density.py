"""bench.perf.density's figures on fixed inputs, and one small real run of its main path."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.perf import density
from tests.conftest import needs_bwrap

ROOT = Path(__file__).resolve().parents[3]


def test_summary_is_the_nearest_rank_p50_and_p99():
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert density.summary(values) == (51.0, 99.0)  # ranks round(0.5 * 99) = 50 and round(0.99 * 99) = 98
    assert density.summary([3.0]) == (3.0, 3.0)
    with pytest.raises(ValueError):
        density.summary([])


def test_ratios_are_each_size_over_the_baseline_size():
    figures = {
        "local_n1_start_p50_ms": 40.0,
        "local_n1_exec_p50_ms": 2.0,
        "local_n1_exec_p99_ms": 30.0,
        "local_n1_mem_mb": 12.0,
        "local_n8_start_p50_ms": 160.0,
        "local_n8_exec_p50_ms": 10.0,
        "local_n8_exec_p99_ms": 150.0,
        "local_n8_mem_mb": 9.0,
        "local_n32_start_p50_ms": 600.0,  # its round failed before the busy phase
    }
    assert density.ratios(figures, "local", [1, 8, 32]) == {
        "local_n8_start_p50_ratio": 4.0,
        "local_n8_exec_p50_ratio": 5.0,
        "local_n8_exec_p99_ratio": 5.0,
        "local_n8_mem_ratio": 0.75,
        "local_n32_start_p50_ratio": 15.0,
    }


def test_largest_clean_is_the_end_of_the_clean_prefix():
    assert density.largest_clean({1: 0, 8: 0, 32: 0, 128: 0}) == 128
    assert density.largest_clean({1: 0, 8: 0, 32: 3, 128: 0}) == 8  # 128 after a failure does not count
    assert density.largest_clean({8: 0, 1: 0}) == 8
    assert density.largest_clean({1: 2}) == 0


def test_projection_prices_1000_sandboxes_at_the_measured_rates():
    figures = density.projection(n=32, per_sandbox_s=[1.0, 2.0, 3.0], round_wall_s=10.0)  # mean lifetime 2 s
    assert figures == {
        "projected_1000_sandbox_seconds": 2000.0,
        "projected_1000_wall_s": 320.0,  # ceil(1000 / 32) = 32 waves of 10 s
    }
    assert density.projection(1000, [1.0], 5.0)["projected_1000_wall_s"] == 5.0  # one wave
    assert density.projection(1, [0.5], 0.5, count=10) == {
        "projected_10_sandbox_seconds": 5.0,
        "projected_10_wall_s": 5.0,
    }


def test_projected_footprint_is_per_sandbox_size_times_1000():
    assert density.projected_footprint(mem_mb=8.0, storage_mb=0.5, memory_total_mb=4096.0) == {
        "projected_1000_concurrent_mem_gb": 1000 * 8.0 / 1024,
        "projected_1000_storage_gb": 1000 * 0.5 / 1024,
        "projected_1000_concurrent_fits_ram": 0,  # 8000 MB > 4096 MB
    }
    assert density.projected_footprint(2.0, 0.0, memory_total_mb=2048.0)["projected_1000_concurrent_fits_ram"] == 1
    assert "projected_1000_concurrent_fits_ram" not in density.projected_footprint(2.0, 0.0)


def test_leaks_count_what_is_new_after_the_round():
    before = {"processes": {10, 11}, "temp_dirs": {"sandbox-a"}, "containers": set()}
    after = {"processes": {10, 12, 13}, "temp_dirs": {"sandbox-a"}, "containers": {"c1"}}
    assert density.leaks(before, after) == {"processes": 2, "temp_dirs": 0, "containers": 1}
    assert density.leaks(before, before) == {"processes": 0, "temp_dirs": 0, "containers": 0}


def test_descendants_walk_the_whole_tree_and_nothing_else():
    parents = {1: 0, 100: 1, 101: 100, 102: 101, 103: 100, 200: 1, 201: 200}
    assert sorted(density.descendants(100, parents)) == [100, 101, 102, 103]
    assert density.descendants(201, parents) == [201]


def test_pss_is_read_from_smaps_rollup():
    text = (
        "55d0c0a00000-7ffd1b3f5000 ---p 00000000 00:00 0    [rollup]\n"
        "Rss:               13832 kB\nPss:               11628 kB\nPss_Anon:           7332 kB\n"
    )
    assert density.parse_pss_kb(text) == 11628
    assert density.pss_mb([os.getpid()]) > 1  # this process's own, from /proc
    with pytest.raises(ValueError):
        density.parse_pss_kb("Rss: 1 kB\n")


def test_the_table_marks_the_baseline_and_skipped_arms():
    figures = {
        "local_n1_errors": 0,
        "local_n1_start_p50_ms": 40.0,
        "local_n2_errors": 1,
        "local_n2_start_p50_ms": 80.0,
        "local_n2_start_p50_ratio": 2.0,
        "docker_skipped": "no engine",
    }
    table = density.markdown(figures, ["local", "docker"], [1, 2]).splitlines()
    assert table[2].startswith("| local | 1 | 40 / - |") and table[2].endswith("| 0 | baseline |")
    assert table[3].endswith("| 1 | 2.00, -, -, - |")
    assert table[4] == "| docker | - | skipped: no engine |||||||"


@pytest.mark.slow
@needs_bwrap
def test_two_local_sandboxes_run_the_main_path_and_leave_nothing(tmp_path):
    out = tmp_path / "density.json"
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the leak check's folders are ours alone
    done = subprocess.run(
        [sys.executable, "-m", "bench.perf.density", "--sizes", "1,2", "--arms", "local", "--idle", "0.2"]
        + ["--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["local_n1_errors"] == 0 and figures["local_n2_errors"] == 0
    assert figures["local_largest_clean_n"] == 2
    assert not [key for key in figures if "leaked" in key]
    # Both busy scripts ran: 2 rounds of 6 operations each (the task has visible tests).
    assert figures["local_n2_ops"] == 2 * 2 * 6 and figures["local_n2_busy_ops_per_s"] > 0
    assert 1 < figures["local_n2_mem_mb"] < 100  # bubblewrap, supervisor, shell: megabytes
    assert figures["local_n2_start_p50_ratio"] == pytest.approx(
        figures["local_n2_start_p50_ms"] / figures["local_n1_start_p50_ms"]
    )
    assert figures["local_projected_1000_sandbox_seconds_at_n1"] > 0 and "local_projected_1000_wall_s_at_n2" in figures
    assert figures["local_projected_1000_concurrent_mem_gb_at_n2"] == pytest.approx(
        1000 * figures["local_n2_mem_mb"] / 1024
    )
    assert "| local | 2 |" in done.stdout and "a projection, not a measurement" in done.stdout
    assert not list(tmp_path.glob("sandbox-*"))
