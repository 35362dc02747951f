"""Map the repository's top-level folders onto import names under ``pwcap``, and compile
the hot path with Cython.

The folders keep short names (``capture/``, ``decode/``, ``tables/``, ``jobs/``, ``cli/``,
``report/``); installed, they live only under ``pwcap`` so nothing generic lands in
site-packages.

The modules in :data:`COMPILED` are plain Python that Cython also compiles into
extension modules beside them (pure-Python mode: one source for both paths). Each
extension is optional: without a C compiler the install still succeeds and pwcap runs
interpreted; ``pwcap --version`` says which engine runs.
"""

import os
import shutil
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOTS = {
    "pwcap": "pwcap",
    "pwcap.capture": "capture",
    "pwcap.cli": "cli",
    "pwcap.decode": "decode",
    "pwcap.jobs": "jobs",
    "pwcap.report": "report",
    "pwcap.tables": "tables",
}

# The per-packet and per-frame path, in the order a byte meets it.
COMPILED = [
    "capture/records.py",
    "capture/reader.py",
    "capture/packets.py",
    "capture/tcpflow.py",
    "capture/layers/cursor.py",
    "capture/layers/link.py",
    "capture/layers/ethernet.py",
    "capture/layers/mpls.py",
    "capture/layers/ipv4.py",
    "capture/layers/ipv6.py",
    "capture/layers/fragments.py",
    "capture/layers/udp.py",
    "capture/layers/vxlan.py",
    "capture/layers/geneve.py",
    "capture/layers/gre.py",
    "capture/layers/erspan.py",
    "capture/duplicates.py",
    "capture/reassembly.py",
    "decode/api.py",
    "decode/dispatch.py",
    "decode/driver.py",
    "decode/wire.py",
    "decode/digest.py",
    "decode/framing.py",
    "decode/conversation.py",
    "decode/tls/handshake.py",
    "decode/tls/keylog.py",
    "decode/tls/protection.py",
    "decode/tls/schedule.py",
    "decode/tls/stream.py",
    "decode/pulsar/framing.py",
    "decode/pulsar/commands.py",
    "decode/pulsar/info.py",
    "decode/pulsar/decoder.py",
    "decode/pulsar/state.py",
    "decode/pulsar/holdback.py",
    "decode/pulsar/metadata.py",
    "decode/pulsar/payload.py",
    "decode/pulsar/messages.py",
    "decode/pulsar/batch.py",
    "decode/pulsar/chunks.py",
    "decode/pulsar/compression.py",
    "decode/pulsar/hot.py",
    "decode/kafka07/framing.py",
    "decode/kafka07/decoder.py",
    "decode/kafka07/messages.py",
    "tables/arrow_copy.py",
    "tables/slots.py",
    "tables/texts.py",
    "tables/nested.py",
    "tables/tally.py",
    "tables/columns.py",
    "tables/dataset.py",
]
# The C libraries a compiled module links with, beyond Python's: OpenSSL's libcrypto (its
# headers: Debian's libssl-dev), which hashlib runs on too.
LIBRARIES = {
    "decode/digest.py": ["crypto"],
    "decode/tls/protection.py": ["crypto"],
    "decode/tls/schedule.py": ["crypto"],
}
# Cython's defaults stay on (bounds checks, negative-index wrapping): the bytes are
# untrusted. Annotations document; they do not restrict what a caller may pass.
DIRECTIVES = {"language_level": 3, "annotation_typing": False}

packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    packages.append(name)
    package_dir[name] = folder
    packages.extend(f"{name}.{sub}" for sub in find_packages(folder))


def _module_name(path: str) -> str:
    folder, *rest = Path(path).with_suffix("").parts
    package = next(name for name, root in ROOTS.items() if root == folder)
    return ".".join([package, *rest])


def _declarations(include: Path) -> str:
    """An include folder in which ``pwcap/capture``, ``pwcap/decode``... are links to the
    folders themselves, so a compiled module's ``cimport`` of ``pwcap.decode.wire`` finds
    ``decode/wire.pxd`` where it is (the folders have short names; their installed ones
    are under ``pwcap``). Nothing is copied, so no declaration can be out of date."""
    top = include / "pwcap"
    top.mkdir(parents=True, exist_ok=True)
    (top / "__init__.pxd").touch()  # a package to Cython
    for package, folder in ROOTS.items():
        if package == "pwcap":
            continue
        link = top / package.split(".")[-1]
        target = os.path.relpath(Path(folder).resolve(), top)
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():  # the copies an older build made
            shutil.rmtree(link)
        link.symlink_to(target, target_is_directory=True)
    return str(include)


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # no Cython at build time: the interpreted path only
        return []
    extensions = [
        Extension(_module_name(path), [path], libraries=LIBRARIES.get(path, []), optional=True)
        for path in COMPILED
        if Path(path).exists()
    ]
    return cythonize(
        extensions,
        compiler_directives=DIRECTIVES,
        build_dir="build/cython",
        include_path=[_declarations(Path("build/cython-include"))],
        quiet=True,
        nthreads=os.cpu_count() or 1,  # Cython writes the C of several modules at once
    )


class BuildOnEveryCore(build_ext):
    """Compile the extensions in parallel: the C that Cython writes is large."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1


# `make` compiles the extensions in place itself (`setup.py build_ext --inplace`: it says
# what it is doing, and keeps its build in build/ for the next `make build` to reuse); its
# editable install then builds none (it would again, unseen, in a throwaway folder).
BUILD_EXTENSIONS = os.environ.get("PWCAP_BUILD_EXT") != "0"

setup(
    packages=packages,
    package_dir=package_dir,
    # The C declarations travel with the sources they declare (an sdist builds from them).
    package_data={
        "pwcap.jobs": ["log4j2.properties"],
        "pwcap.capture": ["*.pxd"],
        "pwcap.capture.layers": ["*.pxd"],
        "pwcap.decode": ["*.pxd"],
        "pwcap.decode.pulsar": ["*.pxd"],
        "pwcap.decode.tls": ["*.pxd"],
        "pwcap.tables": ["*.pxd"],
    },
    ext_modules=_extensions() if BUILD_EXTENSIONS else [],
    cmdclass={"build_ext": BuildOnEveryCore},
)
