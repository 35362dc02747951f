"""``jobs/decode.py``: captures decoded by Spark tasks into the dataset ``pwcap decode``
writes, row for row, on local Spark and on separate executor processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fuzz.pcapfile import Capture, read_pcap, tcp_segment, write_pcap
from pwcap import cli
from pwcap.capture.records import CHUNK
from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import decode_captures
from pwcap.decode.inputs import InputError
from pwcap.decode.spark import driver, tasks, writing
from pwcap.decode.spark.driver import main
from pwcap.decode.spark.listing import list_captures
from pwcap.decode.spark.tasks import decode_tasks
from pwcap.decode.spark.writing import write_dataset
from pwcap.tables.schema import TABLES, arrow_schema
from tests.bench_scripts import load_bench
from tests.conftest import sample_keylog_paths
from tests.test_decode_jobs import assert_same_dataset, rows
from tests.test_decode_series import ORIGINAL, split_pcap

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_pcaps"


def test_a_folder_by_uri_is_listed_as_the_same_folder_by_path():
    by_path, skipped_by_path = list_captures([str(SAMPLES)])
    by_uri, skipped_by_uri = list_captures([f"file://{SAMPLES}"])
    assert [(c.name, c.size) for c in by_uri] == [(c.name, c.size) for c in by_path]
    assert len(skipped_by_uri) == len(skipped_by_path) > 0


def test_a_glob_by_uri_picks_the_matching_files_only():
    listed, _ = list_captures([f"file://{SAMPLES}/kafka07_*.pcap"])
    names = sorted(c.name for c in listed)
    assert names and all(n.startswith("kafka07_") and n.endswith(".pcap") for n in names)
    assert names == sorted(p.name for p in SAMPLES.glob("kafka07_*.pcap"))


@pytest.mark.parametrize("missing", ["file:///no/such/folder", "/no/such/folder"])
def test_a_missing_input_is_an_input_error(missing):
    with pytest.raises(InputError, match="no such"):
        list_captures([missing])


def test_spark_tasks_write_the_dataset_pwcap_decode_writes(spark, sample_dataset, tmp_path):
    captures, _ = list_captures([str(SAMPLES)])
    options = DecodeOptions(tls_keylogs=sample_keylog_paths())  # as the sample dataset's
    write_dataset(spark, captures, options, str(tmp_path / "out"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(TABLES)
    assert_same_dataset(sample_dataset, tmp_path / "out")


def test_a_task_reads_its_capture_a_chunk_at_a_time(tmp_path, monkeypatch):
    """The function every task runs streams its capture from the filesystem: no read
    asks for more than the reader's chunk, however large the capture."""
    capture = tmp_path / "big.pcap"
    load_bench("bench_decode").write_capture(capture, "small", 3 * CHUNK)
    [listed], _ = list_captures([f"file://{capture}"])
    asked: list[int] = []
    read = tasks._Named.read

    def recorded(self, size=-1):
        asked.append(size)
        return read(self, size)

    monkeypatch.setattr(tasks._Named, "read", recorded)
    batch = pa.RecordBatch.from_pylist([{**asdict(listed), "share": 0, "shares": 1}])
    decoded = sum(out.num_rows for out in decode_tasks(DecodeOptions())(iter([batch])))
    assert decoded > 0
    assert listed.size > 2 * CHUNK  # a capture no single read could take
    assert len(asked) > 2 and all(0 < size <= CHUNK for size in asked)


def test_what_a_task_packs_unpacks_to_the_tables_pwcap_decode_writes(tmp_path):
    """A task hands Spark each batch of rows packed as one row; unpacked table by table,
    they are the rows, columns and types ``pwcap decode`` writes."""
    capture = SAMPLES / "pulsar_shared_two_consumers.pcap"
    decode_captures([capture], tmp_path / "expected")
    [listed], _ = list_captures([str(capture)])
    batch = pa.RecordBatch.from_pylist([{**asdict(listed), "share": 0, "shares": 1}])
    packed = pa.Table.from_batches(list(decode_tasks(DecodeOptions())(iter([batch]))))
    assert packed.schema == tasks.PACKED
    for table in TABLES:
        own = packed.filter(pc.equal(packed["table"], table))["data"]
        batches = [batch for data in own for batch in tasks.unpacked(data.as_buffer())]
        unpacked = pa.Table.from_batches(batches, arrow_schema(table))
        expected = pq.read_table(tmp_path / "expected" / table)
        assert unpacked.schema == expected.schema.remove_metadata(), table
        assert unpacked.to_pylist() == expected.to_pylist(), table


def test_the_commit_keeps_the_files_of_the_attempt_that_succeeded(tmp_path):
    """A task attempt that failed after writing (its files there, never reported)
    and a retry that succeeded: the committed folder holds the retry's rows, once, and a
    file for each table no task wrote a row of."""
    capture = SAMPLES / "pulsar_shared_two_consumers.pcap"
    decode_captures([capture], tmp_path / "expected")
    [listed], _ = list_captures([str(capture)])
    task = pa.RecordBatch.from_pylist([{**asdict(listed), "share": 0, "shares": 1}])
    write = writing.write_parts(str(tmp_path / "out"))
    failed, retried = (
        next(write(decode_tasks(DecodeOptions())(iter([task])))).to_pylist()[0] for _ in "ab"
    )
    assert set(failed["files"]).isdisjoint(retried["files"])
    writing.commit(str(tmp_path / "out"), [(retried["files"], retried["rows"], retried["shares"])])
    assert_same_dataset(tmp_path / "expected", tmp_path / "out")


@pytest.mark.parametrize("loss", ["missing", "short"])
def test_the_commit_refuses_part_files_the_driver_does_not_find_as_their_task_wrote_them(
    tmp_path, loss
):
    """A task whose output folder is a disk of its own node: its files are not where the
    driver looks (or not whole). One line names them, and nothing is committed."""
    [listed], _ = list_captures([str(SAMPLES / "pulsar_shared_two_consumers.pcap")])
    task = pa.RecordBatch.from_pylist([{**asdict(listed), "share": 0, "shares": 1}])
    out = tmp_path / "out"
    told = next(writing.write_parts(str(out))(decode_tasks(DecodeOptions())(iter([task]))))
    told = told.to_pylist()[0]
    frames = next(f for f in told["files"] if "/frames/" in f)
    if loss == "missing":
        Path(frames).unlink()
    else:
        pq.write_table(pq.read_table(frames).slice(1), frames)
    with pytest.raises(writing.DatasetError) as refused:
        writing.commit(str(out), [(told["files"], told["rows"], told["shares"])])
    message = str(refused.value)
    assert "\n" not in message and "1 of the" in message
    assert f"frames/{Path(frames).name}" in message and "every node sees" in message
    assert list(out.rglob("part-driver*")) == []  # the commit stopped before writing


@pytest.mark.parametrize(
    ("hadoop", "pyarrow"),
    [
        ("file:/data/out", "file:/data/out"),
        ("/data/out", "file:///data/out"),
        ("s3a://bucket/out", "s3://bucket/out"),
        ("hdfs://namenode:8020/out", "hdfs://namenode:8020/out"),
    ],
)
def test_the_output_folder_is_named_to_pyarrow_as_hadoop_names_it(hadoop, pyarrow):
    assert writing.pyarrow_uri(hadoop) == pyarrow


@pytest.mark.slow
def test_separate_executor_processes_decode_through_spark_submit(sample_dataset, tmp_path):
    """local-cluster runs executors as processes of their own, as a cluster's are: pwcap
    must be importable there (PYSPARK_PYTHON names the interpreter that has it)."""
    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    assert spark_submit is not None
    out = tmp_path / "out"
    job = [str(ROOT / "jobs" / "decode.py"), str(SAMPLES), "-o", str(out)]
    job += [f"--tls-keylog={keylog}" for keylog in sample_keylog_paths()]
    done = subprocess.run(
        [spark_submit, "--master", "local-cluster[2,1,1024]", *job],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert_same_dataset(sample_dataset, out)


@pytest.mark.parametrize(
    "capture",
    [
        "pulsar_shared_two_consumers.pcap",
        "cut.pcap",
        "overlay_vxlan_two_tenants.pcap",
        "overlay_vxlan_span_doubled.pcap",
        "overlay_vxlan_fragmented.pcap",
    ],
)
def test_a_capture_split_in_shares_over_tasks_gives_the_rows_of_one_task(spark, tmp_path, capture):
    """Each of three tasks reads the whole capture and keeps its share of the
    connections (in an overlay, by inner flow and tunnel id: two tenants with the same
    endpoints, copies of each packet, outer fragments); a cut capture says so once, with
    its real end."""
    raw = (SAMPLES / "pulsar_shared_two_consumers.pcap").read_bytes()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cut.pcap").write_bytes(raw[: len(raw) * 2 // 3 + 7])
    path = SAMPLES / capture if capture != "cut.pcap" else tmp_path / "in" / "cut.pcap"
    decode_captures([path], tmp_path / "expected")
    listed, _ = list_captures([str(path)])
    split_above = -(-listed[0].size // 3)
    write_dataset(spark, listed, DecodeOptions(), str(tmp_path / "out"), split_above=split_above)
    assert_same_dataset(tmp_path / "expected", tmp_path / "out")


# -- listing: rotated series, names of their own -------------------------------------------------


@pytest.mark.parametrize("by", ["path", "uri"])
def test_rotated_files_are_one_capture_read_in_time_order(tmp_path, by):
    written = ["trace.pcap2", "trace.pcap0", "trace.pcap1"]  # a -W ring that wrapped: 2 is oldest
    split_pcap(ORIGINAL, [tmp_path / name for name in written])
    [capture], _ = list_captures([str(tmp_path) if by == "path" else f"file://{tmp_path}"])
    assert capture.name == "trace.pcap"
    assert [Path(path).name for path in capture.paths] == written
    assert capture.size == sum((tmp_path / name).stat().st_size for name in written)


def test_files_named_by_time_are_one_series_by_uri_when_asked(tmp_path):
    names = ["trace-10:10.pcap", "trace-10:00.pcap", "trace-10:05.pcap"]
    split_pcap(ORIGINAL, [tmp_path / name for name in names])
    apart, _ = list_captures([f"file://{tmp_path}"])
    assert len(apart) == 3
    [series], _ = list_captures([f"file://{tmp_path}"], series=True)
    assert [Path(path).name for path in series.paths] == names  # in the order they were written
    assert series.name == "trace-10:10.pcap"


def test_a_series_cannot_span_filesystems(tmp_path):
    split_pcap(ORIGINAL, [tmp_path / "a.pcap", tmp_path / "b.pcap"])
    with pytest.raises(InputError, match="one filesystem"):
        list_captures([str(tmp_path / "a.pcap"), f"file://{tmp_path}/b.pcap"], series=True)


def test_captures_of_the_same_name_by_uri_are_named_apart(tmp_path):
    """Two brokers' trace.pcap: the name scopes the connection ids, so it must differ."""
    for host in ("host1", "host2"):
        (tmp_path / host).mkdir()
        shutil.copy(ORIGINAL, tmp_path / host / "trace.pcap")
    listed, _ = list_captures([f"file://{tmp_path}/host1/trace.pcap", f"file://{tmp_path}/host2"])
    assert sorted(c.name for c in listed) == ["host1/trace.pcap", "host2/trace.pcap"]
    local, _ = list_captures([str(tmp_path / "host1" / "trace.pcap"), f"file://{tmp_path}/host2"])
    assert sorted(c.name for c in local) == ["host1/trace.pcap", "host2/trace.pcap"]


def test_connection_ids_are_unique_across_captures_decoded_by_tasks(spark, tmp_path):
    """The same connections captured at two brokers: two captures, two sets of ids."""
    for host in ("host1", "host2"):
        (tmp_path / host).mkdir()
        shutil.copy(ORIGINAL, tmp_path / host / "trace.pcap")
    listed, _ = list_captures([f"file://{tmp_path}/host1/", f"file://{tmp_path}/host2/"])
    write_dataset(spark, listed, DecodeOptions(), str(tmp_path / "out"))
    ids = pq.read_table(tmp_path / "out" / "connections", columns=["capture", "conn_id"])
    connections = ids.to_pylist()
    names = {"host1/trace.pcap", "host2/trace.pcap"}
    assert {row["capture"] for row in connections} == names
    assert len({row["conn_id"] for row in connections}) == len(connections) == 2
    for table in TABLES:  # every row says which capture it came from
        captures = pq.read_table(tmp_path / "out" / table, columns=["capture"])[0].to_pylist()
        assert set(captures) <= names, table


# -- the options that change what is decoded --------------------------------------------------


def without_handshakes(source: Path, path: Path) -> Path:
    """``source`` as tcpdump started after its connections opened would have it: no SYN,
    so only a known server port (or a guess) tells the client from the broker."""
    capture = read_pcap(source)
    kept = [r for r in capture.records if not ((segment := tcp_segment(r)) and segment.syn)]
    write_pcap(path, Capture(capture.linktype, capture.snaplen, kept))
    return path


@pytest.mark.parametrize(
    ("capture", "late", "options"),
    [
        ("pulsar_partitioned_port16650.pcap", True, ["--pulsar-port", "16650"]),
        ("pulsar_chunked.pcap", False, ["--max-frame-size", "4K"]),
        ("pulsar_plain.pcap", False, ["--payloads"]),
        ("tls12_chacha20.pcap", False, ["--tls-keylog", str(SAMPLES / "tls12_chacha20.keylog")]),
    ],
)
def test_pwcap_decodes_options_decode_on_spark_as_pwcap_decode_does(
    spark, tmp_path, capture, late, options
):
    """A capture on a port nobody registered, started after the handshakes, decodes by
    the port hint; the frame limit and payloads likewise: the tasks get what ``pwcap
    decode`` gets from the same flags, and the flags change the dataset (they reached
    the tasks)."""
    path = without_handshakes(SAMPLES / capture, tmp_path / capture) if late else SAMPLES / capture
    assert cli.main(["decode", str(path), "-o", str(tmp_path / "expected"), "-q", *options]) == 0
    assert cli.main(["decode", str(path), "-o", str(tmp_path / "without"), "-q"]) == 0
    assert main([f"file://{path}", "-o", str(tmp_path / "out"), *options]) == 0
    assert_same_dataset(tmp_path / "expected", tmp_path / "out")
    assert any(rows(tmp_path / "without", t) != rows(tmp_path / "out", t) for t in TABLES)


@pytest.mark.parametrize(
    ("option", "says"),
    [(["--pulsar-port", "70000"], "not a port"), (["--max-frame-size", "0"], "must be positive")],
)
def test_a_bad_decode_option_is_refused_as_pwcap_decode_refuses_it(tmp_path, capsys, option, says):
    for run in (main, lambda argv: cli.main(["decode", *argv])):
        with pytest.raises(SystemExit) as refused:
            run([str(ORIGINAL), "-o", str(tmp_path / "out"), *option])
        assert refused.value.code == 2
        assert says in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# -- the dataset, written whole ------------------------------------------------------------------


def test_the_job_writes_a_dataset_and_never_replaces_one_unasked(spark, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(ORIGINAL), "-o", str(out)]) == 0
    decode_captures([ORIGINAL], tmp_path / "expected")
    assert_same_dataset(tmp_path / "expected", out)
    before = sorted(p.name for p in (out / "frames").iterdir())
    for given in (str(out), f"file://{out}"):  # refused before Spark, and by Hadoop's filesystem
        with pytest.raises(SystemExit) as refused:
            main([str(ORIGINAL), "-o", given])
        assert refused.value.code == 1
        assert "already exists (use --overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "frames").iterdir()) == before
    assert main([str(ORIGINAL), "-o", f"file://{out}", "--overwrite"]) == 0
    assert_same_dataset(tmp_path / "expected", out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expected", "out"]


def test_overwrite_replaces_a_dataset_only(spark, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("not a dataset")
    with pytest.raises(SystemExit):
        main([str(ORIGINAL), "-o", f"file://{mine}", "--overwrite"])
    assert "does not look like a pwcap dataset" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_a_failed_write_leaves_no_dataset_and_keeps_the_earlier_one(spark, tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert main([str(ORIGINAL), "-o", str(out)]) == 0
    earlier = {t: sorted(p.name for p in (out / t).iterdir()) for t in ("frames", "anomalies")}

    def write_then_fail(spark, captures, options, folder):
        write_dataset(spark, captures, options, folder)
        raise OSError("disk full")

    monkeypatch.setattr(driver, "write_dataset", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        main([str(ORIGINAL), "-o", str(tmp_path / "new")])
    with pytest.raises(OSError, match="disk full"):
        main([str(ORIGINAL), "-o", str(out), "--overwrite"])
    monkeypatch.undo()
    rename = writing.Output._rename

    def fail_to_put_in_place(self, source, target):
        if source.getName().startswith(".out.tmp-"):
            raise OSError("rename refused")
        rename(self, source, target)

    monkeypatch.setattr(writing.Output, "_rename", fail_to_put_in_place)
    with pytest.raises(OSError, match="rename refused"):
        main([str(ORIGINAL), "-o", str(out), "--overwrite"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left
    assert {t: sorted(p.name for p in (out / t).iterdir()) for t in earlier} == earlier


@pytest.mark.slow
def test_the_script_runs_on_its_own_local_spark_and_reads_a_series(tmp_path):
    """``python jobs/decode.py`` starts its own Spark (local[*]); -G files given with
    --series are one capture, with the rows of the unsplit one."""
    folder = tmp_path / "by_time"
    folder.mkdir()
    split_pcap(ORIGINAL, [folder / name for name in ("trace.pcap", "trace-10:05.pcap")])
    (tmp_path / "unsplit").mkdir()
    shutil.copy(ORIGINAL, tmp_path / "unsplit" / "trace.pcap")
    decode_captures([tmp_path / "unsplit"], tmp_path / "expected")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    script = [str(ROOT / "jobs" / "decode.py"), str(folder), "--series"]
    done = subprocess.run(
        [sys.executable, *script, "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert_same_dataset(tmp_path / "expected", tmp_path / "out")


UNREACHABLE = "hdfs://127.0.0.1:9/data"  # HDFS, where this machine has no Hadoop client
HDFS_NEEDS = "set JAVA_HOME to a JDK, HADOOP_HOME to a Hadoop installation"


@pytest.mark.parametrize(
    ("inputs", "output", "says"),
    [
        ("{capture}", "file://{existing}", "already exists (use --overwrite to replace it)"),
        ("{capture}", UNREACHABLE, f"{UNREACHABLE}: cannot reach it (Unable to load libjvm"),
        (UNREACHABLE, "{new}", f"{UNREACHABLE}: cannot reach it (Unable to load libjvm"),
    ],
)
def test_a_uri_input_or_output_is_checked_before_spark_starts(tmp_path, inputs, output, says):
    """Before Java is even looked for: without one, the URI is still what is named, in
    one short line (pyarrow's own message lists the 90 places it looked for a JVM)."""
    (tmp_path / "existing").mkdir()
    named = {"capture": SAMPLES / "pulsar_plain.pcap", "existing": tmp_path / "existing"}
    named["new"] = tmp_path / "new"
    job = [str(ROOT / "jobs" / "decode.py"), inputs.format(**named), "-o", output.format(**named)]
    done = subprocess.run(
        [sys.executable, *job],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAVA_HOME": str(tmp_path / "no-java")},
    )
    assert done.returncode == 1
    assert done.stderr.startswith("decode: error: ") and says in done.stderr
    assert done.stderr.count("\n") == 1 and len(done.stderr) < 400, done.stderr
    assert HDFS_NEEDS in done.stderr or UNREACHABLE not in done.stderr
    assert not (tmp_path / "new").exists()
