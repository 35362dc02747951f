"""Build the real broker's and the clients' programs: two Maven projects and a Go module.

Maven keeps its artifacts under ~/.m2 and Go its modules under its module cache, so only the
first build on a machine downloads anything. A build is skipped when its output is newer
than every file it is built from, and a client's program is built only when a chosen
scenario runs it (the Python scenarios need none).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BROKER_POM = HERE / "broker" / "pom.xml"
JAVA_POM = HERE / "java" / "pom.xml"
GO_MODULE = HERE / "go"


@dataclass(frozen=True)
class Programs:
    broker_classpath: str  # runs org.apache.pulsar.PulsarStandaloneStarter
    java_classpath: str | None  # runs pwcap.realbroker.Scenarios (when built)
    go_binary: Path | None  # runs the Go scenarios (when built)


def _stale(output: Path, sources: list[Path]) -> bool:
    if not output.exists():
        return True
    built = output.stat().st_mtime
    return any(source.stat().st_mtime > built for source in sources)


def _files(root: Path, pattern: str) -> list[Path]:
    return sorted(root.rglob(pattern))


def _maven(pom: Path, goals: list[str]) -> None:
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), *goals], check=True)


def _classpath(pom: Path, sources: list[Path], goals: list[str]) -> str:
    listing = pom.parent / "target" / "classpath.txt"
    if _stale(listing, [pom, *sources]):
        _maven(pom, [*goals, "dependency:build-classpath", f"-Dmdep.outputFile={listing}"])
    return listing.read_text().strip()


def _java() -> str:
    java = _classpath(JAVA_POM, _files(JAVA_POM.parent / "src", "*.java"), ["compile"])
    return f"{JAVA_POM.parent / 'target' / 'classes'}:{java}"


def _go() -> Path:
    binary = GO_MODULE / "target" / "scenarios"
    if _stale(binary, [*_files(GO_MODULE, "*.go"), GO_MODULE / "go.mod", GO_MODULE / "go.sum"]):
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=GO_MODULE, check=True)
    return binary


def build(clients: set[str]) -> Programs:
    """The broker, and the programs of ``clients`` ("java", "go"; others need none)."""
    broker = _classpath(BROKER_POM, [], [])
    java = _java() if "java" in clients else None
    go = _go() if "go" in clients else None
    return Programs(broker, java, go)
