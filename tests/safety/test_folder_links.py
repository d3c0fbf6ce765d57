"""A symbolic link in a folder the config names (the lifecycle scripts, a local chart) that leads out of the folder
is refused with one line naming the key and the link, unless hyperpod.allow_paths_outside_project is set.

Before, the CDK copied the link's target into the asset: a file from anywhere on the machine ended in cdk.out, and
a deploy would have put it in the lifecycle bucket every node reads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from aws_cdk import App, Stack

from infra.config import ChartConfig, LifecycleOptions, parse_config
from infra.constructs.helm_release import ChartSource
from infra.constructs.hyperpod.dependencies_chart import chart_source
from infra.constructs.hyperpod.lifecycle import LifecycleScripts
from infra.errors import ConfigError
from infra.hyperpod_on_eks import HyperPodOnEks
from tests.conftest import ROOT, default_config_data, mutate, new_app

SECRET = "TOPSECRET-credentials-outside-the-project"


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    """A scripts folder with the product's on_create.sh, next to a file that is not part of it."""
    folder = tmp_path / "scripts"
    folder.mkdir()
    shutil.copy2(ROOT / "lifecycle_scripts" / "on_create.sh", folder / "on_create.sh")
    (tmp_path / "credentials").write_text(SECRET)
    return folder


def _cdk_out_holds(outdir: Path, text: str) -> bool:
    return any(text.encode() in path.read_bytes() for path in outdir.rglob("*") if path.is_file())


def _lifecycle(stack: Stack, scripts: Path, **props: object) -> LifecycleScripts:
    return LifecycleScripts(stack, "Lifecycle", hyperpod_cluster_name="c", scripts_dir=scripts,
                            on_create="on_create.sh", options=LifecycleOptions(), **props)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", ["absolute", "relative"])
def test_a_link_out_of_the_scripts_folder_is_refused_before_anything_is_copied(tmp_path, scripts, target):
    link = scripts / "creds"
    link.symlink_to(tmp_path / "credentials" if target == "absolute" else Path("..") / "credentials")
    app = App(outdir=str(tmp_path / "cdk.out"))
    with pytest.raises(ConfigError) as caught:
        _lifecycle(Stack(app, "S"), scripts)
        app.synth()  # today's code gets here and copies the target into the asset
    message = str(caught.value)
    assert message.startswith(f"Invalid configuration: hyperpod.lifecycle_scripts_dir: a symbolic link to "
                              f"{(tmp_path / 'credentials').resolve()}, outside {scripts.resolve()}"), message
    assert message.endswith(f"(got '{scripts.resolve() / link.name}').") and "\n" not in message, message
    assert "allow_paths_outside_project: true" in message
    assert not (tmp_path / "cdk.out").exists() or not _cdk_out_holds(tmp_path / "cdk.out", SECRET)


def test_allow_paths_outside_project_lets_the_target_in_as_before(tmp_path, scripts):
    """The switch that allows paths outside the project allows links out of the folder too: one rule. This is what
    every synth did before, the target's content in cdk.out (one small stack synthesized for it)."""
    (scripts / "creds").symlink_to(tmp_path / "credentials")
    outdir = tmp_path / "cdk.out"
    app = App(outdir=str(outdir))
    _lifecycle(Stack(app, "S"), scripts, allow_paths_outside_project=True)
    app.synth()
    assert _cdk_out_holds(outdir, SECRET)


def test_links_that_stay_inside_pass_and_a_folder_link_out_is_reported_not_entered(tmp_path, scripts):
    from infra.config import links_leaving  # here, so that the other tests run (and fail) on the code before it

    (scripts / "sub").mkdir()
    (scripts / "sub" / "helper.sh").write_text("#!/bin/bash\n")
    (scripts / "helper.sh").symlink_to(Path("sub") / "helper.sh")
    (scripts / "same").symlink_to(scripts / "sub")
    assert links_leaving(scripts) == []
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "deep").symlink_to(tmp_path / "credentials")
    (scripts / "sub" / "etc").symlink_to(outside)
    (scripts / "loop").symlink_to(scripts / "loop")
    assert links_leaving(scripts) == [(scripts.resolve() / "loop", str(scripts / "loop")),
                                      (scripts.resolve() / "sub" / "etc", str(outside.resolve()))]


def test_a_link_out_of_a_local_chart_is_refused_naming_the_key(tmp_path):
    chart = tmp_path / "chart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (tmp_path / "credentials").write_text(SECRET)
    (chart / "templates").symlink_to(tmp_path)
    config = ChartConfig(source="local", local_path=str(chart))
    with pytest.raises(ConfigError, match=r"^Invalid configuration: hyperpod\.dependencies_chart\.local_path: a "
                                          r"symbolic link to .*\(got '.*/chart/templates'\)\.$"):
        chart_source(Stack(App(), "S"), config)
    chart_source(Stack(App(), "S"), config, allow_paths_outside_project=True)
    # Every local chart goes through ChartSource.local: the product's own charts hold no such link.
    with pytest.raises(ConfigError, match=r"^Invalid configuration: chart: a symbolic link"):
        ChartSource.local(Stack(App(), "S"), "C", chart)


def test_the_config_switch_reaches_the_scripts_folder(tmp_path, scripts):
    """compose passes hyperpod.allow_paths_outside_project to LifecycleScripts: refused with the default config."""
    (scripts / "creds").symlink_to(tmp_path / "credentials")
    stack = Stack(new_app(), "Consumer")
    with pytest.raises(ConfigError, match=r"hyperpod\.lifecycle_scripts_dir: a symbolic link"):
        HyperPodOnEks(stack, "HyperPod", config=parse_config(default_config_data()), lifecycle_scripts_dir=scripts)
    assert os.path.islink(scripts / "creds")


@pytest.mark.parametrize(("key", "changes"), [
    ("hyperpod.lifecycle_scripts_dir", {"hyperpod": {"lifecycle_scripts_dir": "scripts"}}),
    ("hyperpod.dependencies_chart.local_path",
     {"hyperpod": {"dependencies_chart": {"source": "local", "local_path": "scripts/chart"}}}),
])
def test_a_named_folder_reached_through_a_link_out_of_the_project_is_refused(tmp_path, monkeypatch, key, changes):
    """The same rule one level up: the folder itself (or a folder on its way) is a link out of the project."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    (elsewhere / "chart").mkdir(parents=True)
    (elsewhere / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (project / "scripts").symlink_to(elsewhere)
    monkeypatch.chdir(project)
    with pytest.raises(ConfigError) as caught:
        parse_config(mutate(changes, default_config_data()), "c.yaml")
    message = str(caught.value)
    assert message.startswith(f"Invalid configuration in c.yaml: {key}: a symbolic link on the way leads outside the "
                              f"project, to {elsewhere.resolve()}"), message
    assert "allow_paths_outside_project: true" in message and "\n" not in message
    allowed = mutate({"hyperpod": {"allow_paths_outside_project": True}}, mutate(changes, default_config_data()))
    parse_config(allowed, "c.yaml")
