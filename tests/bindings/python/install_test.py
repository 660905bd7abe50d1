#!/usr/bin/env python3
"""pip install . into a virtual environment, pip wheel ., and the installed package used from outside the source tree.

Usage: install_test.py SOURCE_ROOT BUILD_ROOT MPIRUN RUN_JOB INSTALLED_PROGRAM

In a temporary directory: a virtual environment over this interpreter (--system-site-packages: numpy, torch and
meson-python from Debian), `pip install --no-build-isolation --no-index .` of the source tree into it, then
`pip wheel` of it, whose contents are checked (the package with its libraries and stubs, nothing else). Then, from
that directory, with neither PYTHONPATH nor LD_LIBRARY_PATH, a 2-rank job of INSTALLED_PROGRAM under the environment's
python (run_job.py) imports the installed lockstep and lockstep.torch and checks an allreduce with numpy and torch.

Both pip commands share one meson build directory, so the wheel costs no second compilation. It is a sibling of
BUILD_ROOT: the same distance from the sources as the build tree, so that the compiler's command lines are the build
tree's and ccache, where it is set up, serves the objects the build tree compiled. Everything the test creates is
removed at the end, whatever the outcome.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

# The files of the package's wheel, apart from the extension (its name has the interpreter's ABI tag) and .dist-info.
PACKAGE_FILES = {
    "lockstep/__init__.py",
    "lockstep/__init__.pyi",
    "lockstep/_lockstep.pyi",
    "lockstep/torch.py",
    "lockstep/torch.pyi",
    "lockstep/torch_checked.py",
    "lockstep/torch_checked.pyi",
    "lockstep/py.typed",
    "lockstep/liblockstep.so.0",
    "lockstep/liblockstep_c.so.1",
}
PIP_LIMIT_SECONDS = 1500


def run(command, cwd, env, limit=PIP_LIMIT_SECONDS):
    started = time.monotonic()
    print("$ " + " ".join(command), flush=True)
    result = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=limit
    )
    print(result.stdout[-6000:], flush=True)
    print(f"({time.monotonic() - started:.0f} s, exit {result.returncode})", flush=True)
    if result.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(command)} exited {result.returncode}")
    return result.stdout


def check_wheel(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    extensions = {n for n in names if n.startswith("lockstep/_lockstep.") and n.endswith(".so")}
    others = {n for n in names - PACKAGE_FILES - extensions if ".dist-info/" not in n}
    problems = []
    if len(extensions) != 1:
        problems.append(f"one extension module lockstep/_lockstep.*.so (found {sorted(extensions)})")
    if PACKAGE_FILES - names:
        problems.append(f"the files {sorted(PACKAGE_FILES - names)}")
    if others:
        problems.append(f"nothing but the package (found {sorted(others)})")
    if problems:
        raise SystemExit(f"FAIL: the wheel {os.path.basename(wheel)} should hold " + "; ".join(problems))
    print(f"wheel {os.path.basename(wheel)}: {len(names)} files, as expected", flush=True)


def main() -> int:
    try:
        import mesonpy  # noqa: F401 (only whether it is there)
    except ImportError:
        print("FAIL: meson-python is missing: install python3-mesonpy (tools/install-deps.sh does)")
        return 1
    source_root, build_root, mpirun, run_job, program = sys.argv[1:6]
    source_root = os.path.realpath(source_root)
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="lockstep-install-test-")
    package_build = tempfile.mkdtemp(
        prefix=os.path.basename(os.path.realpath(build_root)) + "-python-package-",
        dir=os.path.dirname(os.path.realpath(build_root)),
    )
    # meson-python writes its native file into the source tree; remove it only if it was not there before.
    native_file = os.path.join(source_root, ".mesonpy-native-file.ini")
    had_native_file = os.path.exists(native_file)
    try:
        venv = os.path.join(work, "venv")
        run([sys.executable, "-m", "venv", "--system-site-packages", venv], work, os.environ)
        python = os.path.join(venv, "bin", "python3")
        # Neither the build tree's package nor its libraries may be what the installed one finds.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "PIP_INDEX_URL")}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        pip = [python, "-m", "pip"]
        common = ["--no-build-isolation", "--no-index", "--no-cache-dir", f"--config-settings=builddir={package_build}"]
        run(pip + ["install"] + common + [source_root], work, env)
        wheels = os.path.join(work, "wheels")
        run(pip + ["wheel", "--no-deps", "--wheel-dir", wheels] + common + [source_root], work, env)
        check_wheel(os.path.join(wheels, os.listdir(wheels)[0]))

        # The job runs in a directory of its own, outside the source tree, on a copy of the program.
        job_dir = os.path.join(work, "job")
        os.mkdir(job_dir)
        shutil.copy(program, job_dir)
        command = [python, run_job, mpirun, "2", os.path.join(job_dir, os.path.basename(program))]
        print("$ " + " ".join(command), flush=True)
        status = subprocess.run(command, cwd=job_dir, env=env).returncode
        print(f"install_test: {time.monotonic() - started:.0f} s in all", flush=True)
        return status
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(package_build, ignore_errors=True)
        if not had_native_file and os.path.exists(native_file):
            os.remove(native_file)


if __name__ == "__main__":
    sys.exit(main())
