"""A SWE-bench row's environment, from the official harness's install specification, made
with `python -m venv` and pip instead of conda.

The harness's specification (`tasks.swebench_specs`: swebench 4.1.0's
`MAP_REPO_VERSION_TO_SPECS[repo][version]`, the last release that shipped it) builds a
conda env from `python`, `packages` (a requirements file of the repository, a conda
environment.yml, or a list of conda packages) and `pip_packages`, then runs `pre_install`
and `install` in the repository (4.1.0's `make_env_script_list_py` and
`make_repo_script_list_py`). Here the same specification becomes a sandbox definition with
a `python:` section (`sandboxes.pyenv`), which either backend builds:

- `python`: the spec's version (not the host's: unittest's test ids differ across versions),
  a CPython from pyenv;
- setup: pip, setuptools and wheel as a fresh `conda create` would bring them (capped at
  releases that still take old `setup.py` files), then the requirements file read from the
  clone at `environment_setup_commit` (at `base_commit` when the clone lacks that commit;
  `-r` includes followed, `-e .` left out, as the harness does), or the conda package list
  as pip requirements (`name=1.2` meaning `1.2.*`), or a conda `environment.yml` of the
  repository translated to pip (`environment_requirements`: renamed packages, C libraries
  that wheels bundle dropped, conda-only ones left out and named) and installed with the
  pins in one resolver run, then `pip_packages`;
- install: the spec's `install` command in the workspace, with setuptools-scm told the
  version `git describe` gives in the clone (a one-commit workspace has no tags);
- `pre_install` steps that only edit repository files (`sed -i ... tox.ini`) are applied
  to the workspace itself (as the harness commits them); steps that only download a file
  and unpack it into the repository (matplotlib's qhull) run in the install step, taking the
  repository cache's `downloads/` copy of the file where there is one (`fetch_script`), as
  the files a repository's own build downloads are unpacked where it looks first
  (`PREFETCH`); the others (apt-get, locale-gen) and the system part of `eval_commands` are
  `system` steps: root in a docker image, where the harness's base image packages are
  installed first; the local backend takes them as met only where the host already has what
  they make (e.g. the en_US.UTF-8 locale, or the apt packages), else refuses the row;
- `export` lines of `eval_commands` become the sandbox's environment variables.

What cannot be met this way raises `EnvironmentUnmet` with the part that fails: no
specification for the repo/version, a requirements or environment file missing from the
clone. A Python version pyenv lacks, and steps that fail
when run, are found when the environment is built (`sandboxes.pyenv.EnvironmentBuildError`).

Over 450 lines on purpose: one translation, whole: the harness's specification of a row
into a sandbox definition. Its shell steps (edits, fetches, system steps), its packages
(requirements files, conda's environment files as pip's, the drift pins) and the files its
build downloads are read from the same row, spec and clone, and the recorded recipes
(tests/fixtures/verified_env_recipes.json) check them together.
"""

from __future__ import annotations

import platform
import posixpath
import re
import shlex
from pathlib import Path

from tasks.repos import describe, file_at, has_commit
from tasks.spec import TaskError
from tasks.swebench_specs import clean_requirements, gym_environment_paths, repo_version_specs, requirements_paths

# The harness's base image's packages (swebench 4.1.0 harness/dockerfiles/python.py), for docker
# images of rows with system steps (locale-gen needs `locales`).
SWEBENCH_BASE_PACKAGES = ("wget", "git", "build-essential", "libffi-dev", "libtiff-dev", "jq", "curl", "locales",
                          "locales-all", "tzdata")  # fmt: skip
# What `conda create python=X` brings, capped where newer releases dropped what old
# `setup.py` files and legacy installs use.
# pip first, on its own: the pip a venv of an old Python brings cannot tell which releases
# of the others still support that Python.
BOOTSTRAP = 'python -m pip install --upgrade "pip<24.1"\npython -m pip install --upgrade "setuptools<70" wheel'
RELEASE_DRIFT: dict[str, tuple[tuple[str | None, tuple[str, ...]], ...]] = {
    "sphinx-doc/sphinx": (
        # Pygments 2.19 (2025) renders code blocks differently; the harness's images (2024)
        # had 2.18, and sphinx's tests compare its HTML byte for byte.
        # docutils 0.22 (2025) dropped `docutils.utils.roman`, which sphinx's LaTeX writer
        # imports; rows whose base commit leaves docutils unbounded (4.0's sphinx-doc__sphinx-8638)
        # got 0.21 in the harness's images (2024).
        (None, ("pygments<2.19", "docutils<0.22")),
        # Sphinx 3.x asks only for docutils>=0.12, yet its rows' PASS_TO_PASS tests expect
        # docutils 0.17's HTML (PEP and RFC links, `:kbd:`); 0.22 also dropped the
        # `docutils.utils.roman` that 3.x imports. Sphinx 4 and later bound docutils themselves.
        ("4.0", ("docutils<0.18",)),
    ),
    "astropy/astropy": (
        # Astropy before 4.1 builds with astropy-helpers, a git submodule that a one-commit
        # checkout does not have; its setup.py then downloads it from pypi.python.org, which
        # redirects to pypi.org where the harness built its images but is unreachable where
        # only pypi.org is. Installed first, the release of the row's series is found, not
        # fetched. SWE-bench's "3.1" rows are astropy 4.0.dev (setup.cfg), whose setup.py
        # imports `astropy_helpers.setup_helpers.setup`, which helpers 3.1 lack: with them,
        # setup.py fails, imports astropy, whose import rebuilds the extensions by running
        # setup.py again, without end (650 processes, 18 GB, measured). 4.0.1 is also the
        # release their `ah_bootstrap` (no upper bound) downloaded for the harness.
        ("==1.3", ("astropy-helpers==1.3.*",)),
        ("==3.1", ("astropy-helpers==4.0.*",)),
    ),
    "pydata/xarray": (
        # xxhash 4 (2025) refuses str ("Strings must be encoded before hashing"), which iris
        # 3.x hashes in `iris.common.metadata` (xarray's TestIrisConversion, a PASS_TO_PASS of
        # pydata__xarray-3305); the harness's images (2024) had xxhash 3.
        # sparse 0.16 (2025) no longer infers `COO`'s shape from its coordinates
        # (pydata__xarray-6938's test_from_sparse: "`shape` was not provided"); the images
        # had 0.15.
        (None, ("xxhash<4", "sparse<0.16")),
    ),
    "matplotlib/matplotlib": (
        # setuptools-scm 10 (2025) warns that matplotlib's `release-branch-semver` scheme was
        # renamed; matplotlib asks for its version at import in a git checkout, and its tests
        # make warnings errors (21568: every test failed). The harness's images had 8.x.
        # pytest 9 (2025) warns of generators passed to `parametrize` (PytestRemovedIn10Warning),
        # which matplotlib's warnings-as-errors turn into a collection error: 23299's
        # test_rcparams.py collected nothing. Every matplotlib spec asks for an unpinned
        # pytest; the harness's images (2024) had 8.x.
        # python-dateutil 3 (2025) breaks pandas' time zones (1.5 and 2.0 alike: `get_dst_info`
        # raises AttributeError on `dateutil.tz.gettz(...)` zones; 21568's
        # test_date2num_dst_pandas); the harness's images (2024) had 2.9.
        (None, ("setuptools-scm<10", "pytest<9", "python-dateutil<3")),
    ),
    "scikit-learn/scikit-learn": (
        # Its specs install pandas with an unpinned python-dateutil: as for matplotlib.
        (None, ("python-dateutil<3",)),
        # 0.20-0.22 (Python 3.6) ask conda for an unpinned cython, which for Python 3.6 ends
        # at 0.29; pip gives Cython 3, which cannot compile their .pyx files
        # (`sklearn/neighbors/ball_tree.pyx`: every row's build failed, 2026-12-06).
        # Their pytest (conda's, for Python 3.6) was 6.x: pytest 7 names a complex parameter
        # by its value, and scikit-learn__scikit-learn-14983's required
        # `test_shufflesplit_errors[None-train_size3]` is `[None-1j]` there (not found).
        ("0.23", ("cython<3", "pytest<7")),
    ),
    "pylint-dev/pylint": (
        # pylint-dev__pylint-4661's fix imports appdirs (it adds it to setup.cfg, which the
        # installed environment never reads again). The harness's 2.10 image had it: the
        # row's official verdict passes `test_pylint_home`. Nothing in 2.10's requirements
        # (read at its environment_setup_commit) brings it today: the black 21.8b0 they pin
        # depends on platformdirs.
        ("==2.10", ("appdirs",)),
    ),
}
"""Packages whose releases since the harness built its images break a repository's tests,
or that the images had where this machine cannot fetch them: (below this version, `==` this
version, or None for every version; the pins), installed after the
specification's own packages, so the repository's `install` step still moves a pin that
its own requirements exclude."""


def _version_number(version: object) -> tuple[int, ...]:
    """A SWE-bench version (`"3.5"`, `3.10`) as numbers, so `3.10` sorts after `3.9`."""
    return tuple(int(part) for part in re.findall(r"\d+", str(version)))


def _applies(rule: str | None, version: object) -> bool:
    """Whether a SWE-bench `version` meets `rule`: None (every version), `==X`, `>=X`, or a
    bare `X` (below X)."""
    if rule is None:
        return True
    number, bound = _version_number(version), _version_number(rule)
    if rule.startswith("=="):
        return number == bound
    if rule.startswith(">="):
        return number >= bound
    return number < bound


def drift_pins(repo: str, version: object) -> list[str]:
    """The `RELEASE_DRIFT` pins of `repo` at `version` (a SWE-bench version, `"3.5"`)."""
    return [pin for rule, packages in RELEASE_DRIFT.get(repo, ()) if _applies(rule, version) for pin in packages]


DATED: dict[str, tuple[str, ...]] = {
    # astropy compares its leap-second tables with today's date, and its tests make the
    # stale warning an error. The 4.3 and 5.0 rows carry a Leap_Second.dat that expired on
    # 2022-12-28 (pyerfa's own table is older); without the network nothing fresher is
    # read, so 13033's test_fold and 13398's test_cirs_to_altaz fail today. A clock set to
    # 2024-06-01 fails the same way, so the harness's runs must have fetched a fresh table.
    # At the row's own date (13033 at 2022-03-31: measured) they pass.
    "astropy/astropy": ("==4.3", "==5.0"),
}
"""Repositories (and versions, rules as in `RELEASE_DRIFT`) whose tests read data that
expires: their sandboxes run with the clock at the row's `created_at` date (libfaketime,
Debian's `faketime`, a system step; the monotonic clock stays real)."""
FAKETIME_LIBRARY = "/usr/lib/{arch}-linux-gnu/faketime/libfaketime.so.1"


def clock_variables(row: dict) -> dict[str, str]:
    """The environment that sets a `DATED` row's clock to its `created_at` day, else {}."""
    rules = DATED.get(row.get("repo", ""), ())
    day = str(row.get("created_at") or "")[:10]
    if not any(_applies(rule, row.get("version", "")) for rule in rules) or not re.fullmatch(r"\d{4}-\d\d-\d\d", day):
        return {}
    return {  # Debian's multiarch folder is Linux's machine name (x86_64, aarch64)
        "LD_PRELOAD": FAKETIME_LIBRARY.format(arch=platform.machine()),
        "FAKETIME": f"@{day} 00:00:00",
        "DONT_FAKE_MONOTONIC": "1",
    }


DOWNLOADS_IN_SANDBOX = "/opt/downloads"
"""Where an environment build sees the downloads folder's files (`PythonEnv.files`)."""
PREFETCH: dict[str, tuple[tuple[str | None, str, str], ...]] = {
    # matplotlib 3.3-3.7's setup.py downloads FreeType 2.6.1 from SourceForge or Savannah
    # (its image tests are drawn with that release) unless build/freetype-2.6.1 is there.
    # Before 3.2 (Verified's 3.0 and 3.1 rows), `setup.py develop` also downloads jQuery UI
    # 1.12.1 from jqueryui.com for the WebAgg backend, and fails without it.
    "matplotlib/matplotlib": (
        (">=3.3", "freetype-2.6.1.tar.gz", "build"),
        ("3.2", "jquery-ui-1.12.1.tar.gz", "lib/matplotlib/backends/web_backend"),
    ),
}
"""Files a repository's own build downloads from hosts other than PyPI, by version: (rule as
in `RELEASE_DRIFT`, the file's name, the workspace folder the build looks in first). Where
the downloads folder has the file, the install step unpacks it there first; else the build
downloads it as upstream's does."""


REQUIREMENTS_FILE = "/tmp/swebench-requirements.txt"
HEREDOC = "EOF_59812759871"  # the harness's own delimiter
LOCALE_CHECK = "locale -a | grep -qiE '^en_US\\.utf-?8$'"


class EnvironmentUnmet(TaskError):
    """A row's environment cannot be made with pip here; the message says which part."""


def specs_of(row: dict) -> dict | None:
    return repo_version_specs(row["repo"], row.get("version", ""))


# -- classifying the harness's shell steps --------------------------------------------------
def _parts(step: str) -> list[str]:
    return [p.strip() for p in re.split(r"&&|\|\||;", step) if p.strip()]


def is_repository_edit(step: str) -> bool:
    """A step that only edits files of the repository: sed/grep on relative paths."""
    for part in _parts(step):
        try:
            words = shlex.split(part)
        except ValueError:
            return False
        if not words or words[0] not in ("sed", "grep") or "$" in part:
            return False
        if any(w.startswith("/") or ".." in w.split("/") for w in words[1:] if not w.startswith("-")):
            return False
    return True


def _host_check(step: str) -> str | None:
    """A shell test that passes where the host already has what a system step makes, or
    None when there is none (the step cannot be taken as met)."""
    checks = []
    for part in _parts(step):
        words = part.split()
        while words and re.match(r"^\w+=\S*$", words[0]):  # `DEBIAN_FRONTEND=noninteractive apt-get ...`
            words = words[1:]
        if words[:1] in (["apt-get"], ["apt"]):
            if "install" in words:
                packages = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
                checks.append(f"dpkg -s {' '.join(packages)} >/dev/null 2>&1")
            elif "update" not in words and "upgrade" not in words:  # those leave what is needed as it is
                return None
        elif "locale-gen" in part or "/etc/locale.gen" in part:
            checks.append(LOCALE_CHECK)
        else:
            return None
    return " && ".join(dict.fromkeys(checks)) or "true"


_FETCH_PARTS = (
    r'^\w+=("[^"]*"|\S*)$',  # QHULL_TAR="/tmp/qhull-2020-src-8.0.2.tgz"
    r"^wget -O \S+ \S+$",
    r"^mkdir -p \S+$",
    r"^tar -x\w*f \S+ -C \S+$",
)
FETCH_FUNCTION = (
    '_fetch() { if [ -f "DL/${1##*/}" ]; then cp "DL/${1##*/}" "$2"; else wget -O "$2" "$1"; fi; }'
).replace("DL", DOWNLOADS_IN_SANDBOX)
"""`_fetch URL FILE`: the downloads folder's copy of the URL's file, else the URL itself."""


def is_workspace_fetch(step: str) -> bool:
    """A step that only downloads a file into /tmp and unpacks it into the repository
    (matplotlib's qhull: variables, `wget -O`, `mkdir -p`, `tar -x ... -C`): no root needed."""
    return all(any(re.match(pattern, part) for pattern in _FETCH_PARTS) for part in _parts(step))


def fetch_script(steps: list[str]) -> tuple[str, list[str]]:
    """(the fetch steps as install-step lines run in the workspace: the harness's /testbed is
    the workspace, and `wget -O FILE URL` takes the downloads folder's copy of the URL's file
    when it has one; the URLs' file names)."""
    names = []
    lines = [FETCH_FUNCTION]
    for step in steps:
        for part in _parts(step):
            wget = re.match(r"^wget -O (\S+) (\S+)$", part)
            if wget:
                lines.append(f"_fetch {wget[2]} {wget[1]}")
            else:
                lines.append(part.replace("/testbed", "$PWD"))
            url = re.match(r'^\w+="?(\w+://[^"]+)"?$', part)
            if url:
                names.append(url[1].rsplit("/", 1)[-1])
    return "\n".join(lines), names


# -- packages ---------------------------------------------------------------------------------
# Where the harness reads a repository's conda environment file (swebench 4.1.0
# `MAP_REPO_TO_ENV_YML_PATHS`), in order of preference.
ENV_YML_PATHS = {
    "matplotlib/matplotlib": ["environment.yml"],
    "pydata/xarray": ["ci/requirements/environment.yml", "environment.yml"],
}
# Conda packages whose pip name differs, or that pip has nothing for: "" is conda's own
# tooling or a C library that the pip wheels of the packages that need it bundle (hdf5,
# proj, geos, ...); None is a package with no pip release (its tests skip, as the
# repository's tests do for any missing optional dependency). Anything else keeps its name.
CONDA_TO_PIP: dict[str, str | None] = {
    "python": "",
    "pip": "",
    "hdf5": "",
    "libnetcdf": "",
    "proj": "",
    "geos": "",
    "ghostscript": "",
    "cxx-compiler": "",
    "c-compiler": "",
    "compilers": "",
    "ccache": "",
    "pkg-config": "",
    "matplotlib-base": "matplotlib",
    "dask-core": "dask",
    "iris": "scitools-iris",
    "pytables": "tables",
    "pyqt": "PyQt5",
    "pygobject": None,  # needs GTK's development files to build
    "wxpython": None,  # no manylinux wheels
    "cdms2": None,  # conda-forge only
    "gtk4": None,  # the GTK library (matplotlib's GTK4 backend tests skip without it)
    "gtk3": None,  # the same for GTK 3 (matplotlib 3.5's environment.yml)
    "pynio": None,  # conda-forge only
    "graphviz": "",  # the program (sphinx rows install it with apt)
    "tk": "",
}


# Compiled packages that conda-forge built for Pythons that PyPI's wheels of the same release
# do not cover (numpy 1.19.2 and scipy 1.5.2 for Python 3.9: scikit-learn 1.3's list; their
# sources no longer build with today's Cython). Pinned exactly in a conda package list, they
# take the latest patch release of that minor series instead (numpy 1.19.5, scipy 1.5.4).
PATCH_RELEASE_OK = ("numpy", "scipy")


def _pip_requirement(spec: str) -> str:
    """A conda package spec as a pip requirement (`name=1.2` is conda's `1.2.*`; an exact
    pin of a `PATCH_RELEASE_OK` package admits that series' later patch releases)."""
    match = re.match(r"^([A-Za-z0-9_.\-]+)=([0-9][^=<>!,]*)$", spec)
    if match:
        version = match[2].rstrip("*").rstrip(".")
        return f"{match[1]}=={version}.*"
    exact = re.match(r"^([A-Za-z0-9_.\-]+)==(\d+)\.(\d+)\.(\d+)$", spec)
    if exact and exact[1].lower() in PATCH_RELEASE_OK:
        return f"{exact[1]}>={exact[2]}.{exact[3]}.{exact[4]},=={exact[2]}.{exact[3]}.*"
    return spec


def _setup_file(row: dict, clone, paths: list[str], what: str, where: str) -> tuple[str, str, str]:
    """(text, path, commit) of the first of `paths` in the clone at the row's
    `environment_setup_commit` (at `base_commit` when the clone lacks it), as the harness
    reads its requirements and environment files; else `EnvironmentUnmet` naming `what`."""
    setup_commit = row.get("environment_setup_commit") or row["base_commit"]
    commit = setup_commit if has_commit(clone, setup_commit) else row["base_commit"]
    for path in paths:
        text = file_at(clone, commit, path)
        if text is not None:
            return text, path, commit
    raise EnvironmentUnmet(f"{where}: packages: none of the {what} {paths} is in {clone} at {commit}")


def requirements(row: dict, clone, where: str) -> tuple[str, str]:
    """(the requirements the harness would install, the commit read) from the clone."""
    text, path, commit = _setup_file(row, clone, requirements_paths(row["repo"]), "requirements files", where)
    directory = "/".join(path.split("/")[:-1])
    excluded = ("-e .", "#", ".[test")
    included, own = [], []
    for line in text.split("\n"):
        if line.strip().startswith("-r"):
            name = line.strip()[len("-r") :].strip()
            # `-r ../testing/all.txt` (matplotlib's dev requirements): git reads no `..`; the
            # harness's HTTP client resolved it as a URL path.
            extra = file_at(clone, commit, posixpath.normpath(f"{directory}/{name}" if directory else name))
            included += [x for x in (extra or "").split("\n") if not x.strip().startswith(excluded)]
        elif not line.strip().startswith(excluded):
            own.append(line)
    return clean_requirements("\n".join([*included, "\n".join(own)])), commit


def _project(requirement: str) -> str:
    """The project a pip requirement names (`numpy>=1.2` -> `numpy`), lower-cased."""
    return re.split(r"[=<>!\[ ~;]", requirement, maxsplit=1)[0].lower()


def environment_requirements(row: dict, clone, where: str) -> tuple[list[str], list[str]]:
    """(pip requirements, conda packages left out) for a row whose harness specification
    builds a conda environment from the repository's `environment.yml`: its conda
    dependencies translated by `CONDA_TO_PIP` (channels dropped, `name=1.2` read as conda
    reads it), then its `pip:` list, read at `environment_setup_commit` as `requirements`
    reads a requirements file. The harness's `pip_packages` pins are installed with them in
    one pip run, so the resolver picks versions of the rest that agree with the pins, as
    the harness's images (built with the pins over a fresh environment) do."""
    import yaml  # lazy: the task loader already depends on it

    paths = ENV_YML_PATHS.get(row["repo"]) or gym_environment_paths(row["repo"]) or ["environment.yml"]
    text, path, commit = _setup_file(row, clone, paths, "conda environment files", where)
    try:
        dependencies = (yaml.safe_load(text) or {}).get("dependencies") or []
    except (yaml.YAMLError, AttributeError) as exc:
        raise EnvironmentUnmet(
            f"{where}: packages: {path} at {commit} is not a conda environment file: {exc}"
        ) from None
    wanted, left_out = [], []
    for item in dependencies:
        if isinstance(item, dict):
            wanted += [str(p) for p in item.get("pip") or [] if not str(p).startswith(("-e", "."))]
            continue
        spec = str(item).split("::")[-1].strip()
        name = re.split(r"[=<>!\s]", spec, maxsplit=1)[0]
        pip_name = CONDA_TO_PIP.get(name.lower(), name)
        if pip_name is None:
            left_out.append(name)
        elif pip_name:
            wanted.append(_pip_requirement(pip_name + spec[len(name) :]))
    return wanted, left_out


def _pretend_version(row: dict, clone) -> str:
    """The version setuptools-scm would give at the base commit in the clone (its default
    scheme: the next patch release, `.devN`, `+g<commit>`), from `git describe`; without a
    tag, the row's version as `X.Y.0.dev0`."""
    found = describe(clone, row["base_commit"])
    if found:
        tag, distance, node = found
        release = re.match(r"^v?(\d+(?:\.\d+)*)$", tag)
        if release:
            if distance == 0:
                return release[1]
            numbers = [int(n) for n in release[1].split(".")]
            numbers[-1] += 1
            return f"{'.'.join(map(str, numbers))}.dev{distance}+g{node}"
    return f"{row.get('version')}.0.dev0"


# -- the definition ---------------------------------------------------------------------------
def check_specification(row: dict, where: str) -> dict:
    """The row's specification, when pip can meet it at all (what needs no clone to tell);
    else `EnvironmentUnmet` naming the part."""
    specs = specs_of(row)
    if not specs:
        raise EnvironmentUnmet(f"{where}: specification: the harness has none for {row['repo']} {row.get('version')!r}")
    return specs


def row_environment(row: dict, clone, where: str, downloads: Path | None = None) -> tuple[dict, tuple[str, ...]]:
    """(the row's sandbox definition, with its `python:` section; the repository edits to
    make in its workspace). `downloads`: a folder of files builds would fetch from hosts other
    than PyPI, by file name (`PREFETCH`, the fetch steps' URLs). Raises `EnvironmentUnmet`
    naming the part that cannot be met."""
    specs = check_specification(row, where)
    packages = specs.get("packages", "")
    setup = [BOOTSTRAP]
    if packages == "requirements.txt":
        text, _ = requirements(row, clone, where)
        setup.append(
            f"cat > {REQUIREMENTS_FILE} <<'{HEREDOC}'\n{text}\n{HEREDOC}\npython -m pip install -r {REQUIREMENTS_FILE}"
        )
    elif packages == "environment.yml":
        wanted, left_out = environment_requirements(row, clone, where)
        pins = [str(p) for p in specs.get("pip_packages", [])]
        pinned = {_project(p) for p in pins}
        wanted = [w for w in wanted if _project(w) not in pinned]
        note = f"# conda-only, left out: {' '.join(left_out)}\n" if left_out else ""
        setup.append(note + "python -m pip install " + " ".join(shlex.quote(p) for p in [*wanted, *pins]))
    elif packages:
        specs_list = [_pip_requirement(p) for p in shlex.split(packages)]
        setup.append("python -m pip install " + " ".join(shlex.quote(p) for p in specs_list))
    if specs.get("pip_packages"):
        setup.append("python -m pip install " + " ".join(shlex.quote(p) for p in specs["pip_packages"]))
    if drift := drift_pins(row["repo"], row.get("version", "")):
        # An sdist among them builds with the environment's own setuptools, of its era:
        # today's has no `pkg_resources`, which astropy-helpers 4.0's setup.py imports.
        setup.append("python -m pip install --no-build-isolation " + " ".join(shlex.quote(p) for p in drift))

    edits = tuple(s for s in specs.get("pre_install", []) if is_repository_edit(s))
    system = [s for s in specs.get("pre_install", []) if not is_repository_edit(s)]
    # Fetch steps need no root: the install step runs them, unless a step left as a system
    # step reads a variable they set.
    fetches = [s for s in system if is_workspace_fetch(s)]
    assigned = {m[1] for s in fetches for part in _parts(s) if (m := re.match(r"^(\w+)=", part))}
    rest = [s for s in system if s not in fetches]
    if not any(re.search(rf"\$\{{?{name}\b", s) for s in rest for name in assigned):
        system = rest
    else:
        fetches = []
    variables = {"TZ": "Etc/UTC"}  # as the harness's base image sets it
    for command in specs.get("eval_commands", []):
        export = re.match(r"^export (\w+)=(.*)$", command.strip())
        if export:
            variables[export[1]] = " ".join(shlex.split(export[2]))
        else:
            system.append(command)
    if clock := clock_variables(row):
        variables.update(clock)
        system.append("apt-get update && apt-get install -y faketime")
    checks = [_host_check(s) for s in system]
    system_check = "" if None in checks else " && ".join(dict.fromkeys(c for c in checks if c and c != "true"))

    name = re.sub(r"[^A-Za-z0-9]", "_", row["repo"].split("/")[-1]).upper()
    install_lines = [f"export SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{name}={shlex.quote(_pretend_version(row, clone))}"]

    def downloaded(name: str) -> bool:
        return downloads is not None and (downloads / name).is_file()

    wanted_files = []
    if fetches:
        script, names = fetch_script(fetches)
        install_lines.append(script)
        wanted_files += [name for name in names if downloaded(name)]
    for rule, file, folder in PREFETCH.get(row["repo"], ()):
        if _applies(rule, row.get("version", "")) and downloaded(file):
            install_lines.append(f"mkdir -p {folder} && tar -xzf {DOWNLOADS_IN_SANDBOX}/{file} -C {folder}")
            wanted_files.append(file)
    files = [
        {"source": str(downloads / name), "target": f"{DOWNLOADS_IN_SANDBOX}/{name}"}
        for name in dict.fromkeys(wanted_files)
    ]
    if specs.get("install"):
        install_lines.append(specs["install"])
    python = {
        "version": str(specs["python"]),
        "setup": setup,
        "install": ["\n".join(install_lines)] if len(install_lines) > 1 else [],
    }
    if files:
        python["files"] = files
    if system:
        python.update(system=system, packages=list(SWEBENCH_BASE_PACKAGES), system_check=system_check)
    definition = {"python": python, "env": variables, "limits": {"memory_bytes": "8G"}}
    return definition, edits
