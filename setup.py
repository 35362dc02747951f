"""Map the repository's top-level folders onto import names under ``pwcap``.

The folders keep short names (``capture/``, ``decode/``, ``tables/``, ``jobs/``);
installed, they live only under ``pwcap`` so nothing generic lands in site-packages.
"""

from setuptools import find_packages, setup

ROOTS = {
    "pwcap": "pwcap",
    "pwcap.capture": "capture",
    "pwcap.decode": "decode",
    "pwcap.jobs": "jobs",
    "pwcap.tables": "tables",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for name, folder in ROOTS.items():
    packages.append(name)
    package_dir[name] = folder
    packages.extend(f"{name}.{sub}" for sub in find_packages(folder))

setup(packages=packages, package_dir=package_dir)
