"""nccl-tests import on real outputs (tests/data/nccl, see SOURCES.md there)."""

import pytest

from profiler.catalog_match import match_catalog
from profiler.nccl_tests import NcclTestsError, nccl_tests_device, parse_nccl_tests
from tests.support.paths import DATA_DIR

DATA = DATA_DIR / "nccl"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_all_reduce_with_rank_lines_and_test_name() -> None:
    samples = parse_nccl_tests(read("all_reduce_gh200_2x4.txt"))
    assert {s.op for s in samples} == {"all_reduce"}
    assert {(s.ranks, s.ranks_per_node, s.repeats) for s in samples} == {(8, 4, 20)}
    # 25 sizes, out-of-place and in-place each.
    assert len(samples) == 50
    largest = [s for s in samples if s.size_B == 134217728]
    assert [s.in_place for s in largest] == [False, True]
    assert largest[0].median_s == pytest.approx(1916.4e-6)
    # busbw recomputed from size and time matches nccl-tests' own column (122.57 GB/s).
    assert largest[0].busbw_GBps == pytest.approx(122.57, rel=2e-3)
    assert nccl_tests_device(read("all_reduce_gh200_2x4.txt")) == "NVIDIA GH200 120GB"


def test_bare_table_infers_op_and_ranks_from_bandwidth_ratio() -> None:
    text = read("all_reduce_nd96asr_table_only.txt")
    with pytest.raises(NcclTestsError, match="ranks_per_node"):
        parse_nccl_tests(text)
    samples = parse_nccl_tests(text, ranks_per_node=8)
    assert {(s.op, s.ranks, s.ranks_per_node) for s in samples} == {("all_reduce", 16, 8)}
    assert samples[-1].busbw_GBps == pytest.approx(187.51, rel=2e-3)
    assert nccl_tests_device(text) is None


def test_all_gather_needs_the_op_when_the_output_does_not_name_it() -> None:
    text = read("all_gather_a100_2x8.txt")
    with pytest.raises(NcclTestsError, match="all_gather or all_to_all"):
        parse_nccl_tests(text)
    samples = parse_nccl_tests(text, op="all_gather")
    assert {(s.ranks, s.ranks_per_node, s.repeats) for s in samples} == {(16, 8, 20)}
    assert len(samples) == 18
    assert samples[0].busbw_GBps == pytest.approx(30.02, rel=2e-3)
    device = nccl_tests_device(text)
    assert device == "NVIDIA A100-SXM4-80GB"
    matched = match_catalog(device)
    assert matched is not None and matched.name == "A100-80GB"


def test_two_runs_in_one_log() -> None:
    samples = parse_nccl_tests(read("alltoall_2x8_two_runs.txt"))
    assert {(s.op, s.ranks, s.ranks_per_node) for s in samples} == {("all_to_all", 16, 8)}
    assert len(samples) == 2 * 24 * 2  # two runs, 24 sizes, out-of-place + in-place
    first_run, second_run = samples[:48], samples[48:]
    assert first_run[0].median_s == pytest.approx(40.78e-6)
    assert second_run[0].median_s == pytest.approx(49.94e-6)


def test_a_name_that_contradicts_the_numbers_is_refused() -> None:
    with pytest.raises(NcclTestsError, match="does not match all_reduce on 16 ranks"):
        parse_nccl_tests(read("all_gather_a100_2x8.txt"), op="all_reduce")


def test_unsupported_and_broken_outputs() -> None:
    header = (
        "# Collective test starting: broadcast_perf\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "     1048576        262144     float    none       0    20.00   52.43   52.43      0"
        "    20.00   52.43   52.43      0\n"
    )
    with pytest.raises(NcclTestsError, match="broadcast_perf"):
        parse_nccl_tests(header, ranks_per_node=8)
    with pytest.raises(NcclTestsError, match="no nccl-tests results table"):
        parse_nccl_tests("NCCL INFO Bootstrap : Using eth0\n")
    original = read("all_reduce_gh200_2x4.txt")
    wrong = original.replace("1916.4   70.04  122.57      0", "1916.4   70.04  122.57      3")
    assert wrong != original
    with pytest.raises(NcclTestsError, match="3 wrong values"):
        parse_nccl_tests(wrong)
