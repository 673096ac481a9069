"""The package, plus the course data the lab reads at run time (data/ ships inside it as servelab/data).

pyproject.toml holds everything else; setuptools' pyproject tables cannot map a folder outside src/
into the package while still finding the packages under src/.
"""

from setuptools import find_namespace_packages, find_packages, setup

# Every folder under data/ is listed, so setuptools ships its files without warning that it is not a package.
DATA = ["servelab.data"] + [f"servelab.data.{name}" for name in find_namespace_packages("data")]

setup(packages=find_packages("src") + DATA, package_dir={"": "src", "servelab.data": "data"})
