#!/usr/bin/env bash
# OnCreate lifecycle script for SageMaker HyperPod nodes orchestrated by Amazon EKS, run as root once
# per node: reads lifecycle_config.env beside it, waits for the secondary EBS volume at /opt/sagemaker,
# puts containerd's data root on it and, when asked, installs the FSx for Lustre client. Output goes,
# timestamped, to /var/log/provision/provisioning.log and the console. Details: README.md here.
#
# containerd is set up as AWS's sample does it (awslabs/awsome-distributed-training@0edaf1526bc47185ce5f827100416f99bd7b69e1:
# 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create_main.sh), reading
# nothing nodeadm (AL2023) or the EKS bootstrap (AL2) writes, so it can run before they configure
# containerd. Adapted: the runtime is nvidia only where /usr/bin/nvidia-container-runtime exists
# (nodeadm's rule); a running containerd is stopped for the copy; reruns change nothing. Each
# deviation from the sample is written down, with the sample's lines, where it is made.
# kubelet stays on the root disk, unlike in the sample (a symbolic link to the volume): CSI node
# plugins, FSx for Lustre's among them, mount volumes under /var/lib/kubelet with mount propagation,
# which a symlinked kubelet directory has broken (bottlerocket-os/bottlerocket#2218).
# Tests set LIFECYCLE_ROOT, which prefixes every path the script touches, and put stubs on PATH.

set -euo pipefail
set -o errtrace # the ERR trap also fires inside functions

readonly ROOT="${LIFECYCLE_ROOT:-}"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly LOG_FILE="${ROOT}/var/log/provision/provisioning.log"
# Paths on the node, written as they are into files and prefixed with ${ROOT} where touched.
readonly VOLUME="/opt/sagemaker"
readonly DATA_ROOT="${VOLUME}/containerd/data-root"
readonly CONTAINERD_CONFIG="${VOLUME}/containerd/config.toml"
readonly OVERRIDE="/etc/systemd/system/containerd.service.d/override.conf"
readonly AL2_TEMPLATE="/etc/eks/containerd/containerd-config.toml"
readonly NVIDIA_RUNTIME="/usr/bin/nvidia-container-runtime"
readonly KNOWN_KEYS="CONTAINERD_ON_OPT_SAGEMAKER ENABLE_FSX_LUSTRE_CLIENT SECONDARY_VOLUME_WAIT_SECONDS"
STEP="starting" OS="unknown"

log() { printf '%s\n' "$*"; }
step() { STEP="$1"; log "==> $1"; }
die() { printf 'on_create.sh failed during step "%s": %s\n' "${STEP}" "$*" >&2; exit 1; }
on_error() {
    # main runs in the pipeline's subshell (level 1); a deeper level is a $(...) whose caller reports.
    if ((BASH_SUBSHELL > 1)); then exit "$1"; fi
    trap - ERR
    printf 'on_create.sh failed at line %s: %s\n' "$2" "$3" >&2
    printf 'on_create.sh failed during step "%s" (exit status %s)\n' "${STEP}" "$1" >&2
    exit "$1"
}

# lifecycle_config.env holds KEY=VALUE lines written by the stack. It is parsed, never sourced,
# and every key and value is checked, so a typo fails the node instead of being ignored.
read_config() {
    step "Reading lifecycle_config.env"
    CONTAINERD_ON_OPT_SAGEMAKER=true ENABLE_FSX_LUSTRE_CLIENT=false SECONDARY_VOLUME_WAIT_SECONDS=300
    local file="${SCRIPT_DIR}/lifecycle_config.env" key value valid what at n=0
    if [[ ! -e ${file} ]]; then
        log "No lifecycle_config.env next to the script; using the defaults"
        file=/dev/null
    fi
    while IFS='=' read -r key value || [[ -n ${key} ]]; do
        n=$((n + 1)) && at="lifecycle_config.env line ${n}"
        case "${key}" in
            '' | '#'*) continue ;;
            CONTAINERD_ON_OPT_SAGEMAKER | ENABLE_FSX_LUSTRE_CLIENT) valid='^(true|false)$' what="true or false" ;;
            SECONDARY_VOLUME_WAIT_SECONDS) valid='^[0-9]{1,5}$' what="a whole number of seconds (0-99999)" ;;
            *) die "${at}: unknown key '${key}' (known keys: ${KNOWN_KEYS})" ;;
        esac
        [[ ${value} =~ ${valid} ]] || die "${at}: ${key} must be ${what}, got '${value//$'\r'/\\r}'"
        printf -v "${key}" '%s' "${value}" # safe: the key is one of the names above
    done <"${file}"
    SECONDARY_VOLUME_WAIT_SECONDS="$((10#${SECONDARY_VOLUME_WAIT_SECONDS}))" # a leading zero is not octal
    log "CONTAINERD_ON_OPT_SAGEMAKER=${CONTAINERD_ON_OPT_SAGEMAKER} ENABLE_FSX_LUSTRE_CLIENT=${ENABLE_FSX_LUSTRE_CLIENT}" \
        "SECONDARY_VOLUME_WAIT_SECONDS=${SECONDARY_VOLUME_WAIT_SECONDS}"
}

detect_os() {
    step "Detecting the operating system"
    local key value id="" version="" file="${ROOT}/etc/os-release"
    if [[ ! -r ${file} ]]; then file=/dev/null; fi
    while IFS='=' read -r key value || [[ -n ${key} ]]; do
        if [[ ${key} == ID ]]; then id="${value//[\"\']/}"; fi
        if [[ ${key} == VERSION_ID ]]; then version="${value//[\"\']/}"; fi
    done <"${file}"
    case "${id}:${version}" in amzn:2023*) OS="al2023" ;; amzn:2) OS="al2" ;; *) OS="unknown" ;; esac
    log "ID=${id:-?} VERSION_ID=${version:-?}: ${OS}"
}

# HyperPod mounts the secondary volume on its own schedule; it may not be there yet.
# Deviation, decided against the sample (on_create_main.sh:18-27 waits 12 x 5 s = 60 s, then :135-136
# skips the containerd move and continues): here the wait is longer (300 s by default) and a volume
# that never appears fails the node. Every instance group this stack writes has the secondary volume
# (InstanceStorageConfigs EbsVolumeConfig, infra/constructs/hyperpod/cluster.py), so a missing mount is
# a fault; continuing would leave images on the root disk of one node unlike the others, unnoticed. A
# longer wait only spares a slow mount that the sample would also have survived by skipping.
wait_for_volume() {
    local max="${SECONDARY_VOLUME_WAIT_SECONDS}" waited=0 nap
    step "Waiting up to ${max}s for the secondary EBS volume at ${VOLUME}"
    until mountpoint -q "${ROOT}${VOLUME}"; do
        ((waited < max)) || die "the secondary EBS volume never appeared: ${VOLUME} is not a mount point after ${max}s"
        nap=$((max - waited < 5 ? max - waited : 5))
        log "${VOLUME} is not mounted yet (waited ${waited}s of ${max}s)"
        sleep "${nap}"
        waited=$((waited + nap))
    done
}

# True when the file holds exactly this text.
holds() { [[ -f $1 && "$(<"$1")" == "$2" ]]; }

# Replace a file in one rename, so a failure never leaves it half written.
write_file() {
    mkdir -p "${1%/*}"
    printf '%s\n' "$2" >"$1.tmp"
    mv -f "$1.tmp" "$1"
}

# The sample's configuration, root on the volume, runtime chosen as nodeadm chooses it
# (awslabs/amazon-eks-ami@81fec2e895854f599974fe4d3d72f61c0a9aaffa:nodeadm/internal/containerd/runtime_config*.go).
containerd_config() {
    local runtime="runc" binary="/usr/sbin/runc"
    if [[ -e ${ROOT}${NVIDIA_RUNTIME} ]]; then runtime="nvidia" binary="${NVIDIA_RUNTIME}"; fi
    cat <<EOF
version = 2
root = "${DATA_ROOT}"
state = "/run/containerd"

[grpc]
address = "/run/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri".containerd]
default_runtime_name = "${runtime}"
discard_unpacked_layers = true

[plugins."io.containerd.grpc.v1.cri"]
sandbox_image = "localhost/kubernetes/pause"
enable_cdi = true

[plugins."io.containerd.grpc.v1.cri".registry]
config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.${runtime}]
runtime_type = "io.containerd.runc.v2"
base_runtime_spec = "/etc/containerd/base-runtime-spec.json"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.${runtime}.options]
BinaryName = "${binary}"
SystemdCgroup = true

[plugins."io.containerd.grpc.v1.cri".cni]
bin_dir = "/opt/cni/bin"
conf_dir = "/etc/cni/net.d"
EOF
}

configure_al2023() {
    local config override was_running=false
    config="$(containerd_config)"
    override="[Service]
Environment=\"CONTAINERD_CONFIG=${CONTAINERD_CONFIG}\"
ExecStart=
ExecStart=/usr/bin/containerd --config \$CONTAINERD_CONFIG"
    if holds "${ROOT}${CONTAINERD_CONFIG}" "${config}" && holds "${ROOT}${OVERRIDE}" "${override}"; then
        log "containerd already starts with ${CONTAINERD_CONFIG}; nothing to change"
        return 0
    fi
    # Deviation, decided against the sample (on_create_main.sh:110-112 writes the override, reloads
    # systemd and copies /var/lib/containerd without stopping containerd): a running containerd is
    # stopped before the copy and started after, so the copy is never of a live data root (its
    # metadata database mid-write) and the new root applies now, not at some later restart with
    # whatever the copy missed. Running containers survive: their shims keep running and the state
    # directory (/run/containerd) does not move. When containerd is not running (the order the
    # sample expects), nothing is stopped or started, as in the sample.
    if systemctl is-active --quiet containerd.service; then
        was_running=true && step "Stopping containerd"
        systemctl stop containerd.service
    fi
    # The override lives on the root disk: without it, this root disk never used the data root and
    # one found on the volume was left by an earlier root disk. It is replaced, as the sample does.
    if ! holds "${ROOT}${OVERRIDE}" "${override}"; then
        step "Copying /var/lib/containerd to ${DATA_ROOT}"
        if [[ -e ${ROOT}${DATA_ROOT} ]]; then log "Removing the ${DATA_ROOT} of an earlier root disk"; fi
        rm -rf "${ROOT}${DATA_ROOT}"
        mkdir -p "${ROOT}${VOLUME}/containerd"
        cp -a "${ROOT}/var/lib/containerd" "${ROOT}${DATA_ROOT}"
    fi
    step "Writing ${CONTAINERD_CONFIG} and ${OVERRIDE}"
    write_file "${ROOT}${CONTAINERD_CONFIG}" "${config}"
    write_file "${ROOT}${OVERRIDE}" "${override}" # last: it points containerd at the rest
    systemctl daemon-reload
    if [[ ${was_running} == true ]]; then
        step "Starting containerd"
        systemctl start containerd.service
    fi
}

configure_al2() {
    local template="${ROOT}${AL2_TEMPLATE}" wanted="root = \"${DATA_ROOT}\""
    [[ -f ${template} ]] || die "${AL2_TEMPLATE} not found: this is not the Amazon Linux 2 EKS AMI"
    if [[ $'\n'"$(<"${template}")"$'\n' != *$'\n'"${wanted}"$'\n'* ]]; then
        step "Setting root in ${AL2_TEMPLATE}"
        sed -i -e "/^[# ]*root\s*=/c\\${wanted}" "${template}" # the sample's own edit
        [[ $'\n'"$(<"${template}")"$'\n' == *$'\n'"${wanted}"$'\n'* ]] || die "${AL2_TEMPLATE} has no root line"
    fi
}

# True when the lnet and lustre kernel modules load (modprobe is a no-op for a loaded module).
lustre_modules_load() { modprobe lnet && modprobe lustre; }

# The FSx for Lustre client. Changed to follow the sample (on_create_main.sh:223-239 loads lnet and
# lustre and installs no package, so it expects the AMI to ship them): the modules are loaded first,
# and a package manager runs only when they do not load. It used to run every time, and a package
# manager asked for an installed package still reads its repositories (dnf loads their metadata
# first; not tried on a node here), which HyperPod's private subnets may not reach. Kept from before:
# a client that still does not load fails the node, since the stack asks for it only when pods will
# mount FSx for Lustre (the sample only logs a warning). Not taken from the sample: its EFA client
# setup (:144-221, a zip downloaded from docs.aws.amazon.com at boot) and `lctl network up`
# (:241-248, run only when lctl exists, its failure ignored, so the sample does not rely on it).
lustre_client() {
    step "Loading the FSx for Lustre client modules"
    if lustre_modules_load; then
        log "lnet and lustre are loaded: the client is on the AMI; nothing to install"
        return 0
    fi
    step "Installing the FSx for Lustre client"
    case "${OS}" in
        al2023) dnf install -y lustre-client ;;
        al2) amazon-linux-extras install -y lustre ;;
        *) die "no Lustre client installer known for this OS, and the lnet and lustre modules do not load" ;;
    esac
    step "Loading the FSx for Lustre client modules"
    lustre_modules_load || die "the Lustre client is installed but the lnet and lustre modules do not load"
}

main() {
    trap 'on_error "$?" "${LINENO}" "${BASH_COMMAND}"' ERR
    log "on_create.sh starting (script directory ${SCRIPT_DIR})"
    read_config
    detect_os
    if [[ ${CONTAINERD_ON_OPT_SAGEMAKER} == true ]]; then
        wait_for_volume
        case "${OS}" in
            al2023) configure_al2023 ;;
            al2) configure_al2 ;;
            *) die "no containerd configuration known for this OS; set CONTAINERD_ON_OPT_SAGEMAKER=false to skip" ;;
        esac
    fi
    if [[ ${ENABLE_FSX_LUSTRE_CLIENT} == true ]]; then
        lustre_client
    fi
    step "Done"
    log "on_create.sh finished successfully in ${SECONDS}s"
}

# Timestamp every line and write it to the console and the log file, in pure bash.
timestamp_lines() {
    local line stamp
    exec 3>>"${LOG_FILE}"
    while IFS= read -r line || [[ -n ${line} ]]; do
        printf -v stamp '%(%Y-%m-%dT%H:%M:%S%z)T' -1
        printf '%s %s\n' "${stamp}" "${line}"
        printf '%s %s\n' "${stamp}" "${line}" >&3
    done
}

mkdir -p "${LOG_FILE%/*}"
# pipefail hands main's exit status to this shell; the pipeline ends only when every line is written.
main "$@" 2>&1 | timestamp_lines
