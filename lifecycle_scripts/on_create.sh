#!/usr/bin/env bash
# OnCreate lifecycle script for SageMaker HyperPod nodes orchestrated by Amazon EKS.
#
# HyperPod runs this script as root once, when a node is created, on the Amazon Linux 2023 or
# Amazon Linux 2 EKS AMI. It:
#   1. reads lifecycle_config.env (written by the CDK stack) from the script's own directory,
#   2. waits for the secondary EBS volume HyperPod mounts at /opt/sagemaker,
#   3. moves containerd and kubelet data onto that volume with bind mounts and /etc/fstab entries,
#   4. optionally installs the FSx for Lustre client.
#
# Everything the script prints goes, timestamped, to /var/log/provision/provisioning.log and to
# the console; HyperPod forwards the console to CloudWatch Logs, stream
# LifeCycleConfig/<instance-group>/<instance-id>.
#
# The script is idempotent: running it again on a node it already configured changes nothing.
#
# Testing: every absolute path is prefixed with ${LIFECYCLE_ROOT:-}, so the script can run against
# a temporary directory standing in for /; system commands are looked up on PATH, so they can be
# replaced by stubs. See tests/lifecycle/test_on_create.py.

set -euo pipefail
# errtrace: let the ERR trap fire inside functions too, where most of the work happens.
set -o errtrace

readonly SCRIPT_NAME="on_create.sh"

root="${LIFECYCLE_ROOT:-}"
if [[ -n ${root} && ${root} != /* ]]; then
    echo "${SCRIPT_NAME}: LIFECYCLE_ROOT must be an absolute path, got '${root}'" >&2
    exit 2
fi
# Strip a trailing slash so "$ROOT/etc" never becomes "//etc".
readonly ROOT="${root%/}"
unset root

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly CONFIG_NAME="lifecycle_config.env"
readonly CONFIG_FILE="${SCRIPT_DIR}/${CONFIG_NAME}"

readonly LOG_DIR="${ROOT}/var/log/provision"
readonly LOG_FILE="${LOG_DIR}/provisioning.log"

# Paths as the node sees them. They are written verbatim into /etc/fstab and systemd units, and
# prefixed with $ROOT only where this script touches the file system itself.
readonly VOLUME="/opt/sagemaker"
readonly KNOWN_KEYS="CONTAINERD_ON_OPT_SAGEMAKER KUBELET_ON_OPT_SAGEMAKER ENABLE_FSX_LUSTRE_CLIENT SECONDARY_VOLUME_WAIT_SECONDS"
# The longest single sleep while waiting for the volume.
readonly POLL_SECONDS=5

CURRENT_STEP="starting"
# Subshell depth of main(), so the ERR trap can tell a failing $(...) from main itself.
MAIN_SUBSHELL=0
OS_FLAVOR="unknown"
# Units that were running before we stopped them; only these are started again.
WAS_ACTIVE=""
# Set when /etc/fstab or a systemd drop-in changed, so systemd must re-read its configuration.
SYSTEMD_CONFIG_CHANGED=false

log() {
    printf '%s\n' "$*"
}

step() {
    CURRENT_STEP="$1"
    log "==> ${CURRENT_STEP}"
}

die() {
    printf '%s failed during step "%s": %s\n' "${SCRIPT_NAME}" "${CURRENT_STEP}" "$*" >&2
    exit 1
}

# ERR trap: name the line, the command and the step, so a failed node explains itself in
# CloudWatch instead of just exiting non-zero.
on_error() {
    local status="$1" line="$2" command="$3"
    # With errtrace the trap also fires inside a failing $(...); let the enclosing shell report
    # the failure once, with the full command.
    if ((BASH_SUBSHELL > MAIN_SUBSHELL)); then
        exit "${status}"
    fi
    trap - ERR
    printf '%s failed at line %s: %s\n' "${SCRIPT_NAME}" "${line}" "${command}" >&2
    printf '%s failed during step "%s" (exit status %s)\n' \
        "${SCRIPT_NAME}" "${CURRENT_STEP}" "${status}" >&2
    exit "${status}"
}

# Prefix every line with a timestamp and write it both to the console and to the log file.
# Pure bash, so logging depends on no tool beyond the shell itself.
timestamp_lines() {
    local line stamp
    exec 3>>"${LOG_FILE}"
    while IFS= read -r line || [[ -n ${line} ]]; do
        printf -v stamp '%(%Y-%m-%dT%H:%M:%S%z)T' -1
        printf '%s %s\n' "${stamp}" "${line}"
        printf '%s %s\n' "${stamp}" "${line}" >&3
    done
    exec 3>&-
}

require_bool() {
    local key="$1" value="$2" where="$3"
    case "${value}" in
        true | false) ;;
        *) die "${where}: ${key} must be true or false, got '${value}'" ;;
    esac
}

# The config file is data, not code: it is parsed line by line and never sourced, so a stray
# $(...) or ; in it cannot run anything as root.
read_config() {
    step "Reading ${CONFIG_NAME}"

    # Defaults. Deliberately not taken from the environment: the file is the only input.
    CONTAINERD_ON_OPT_SAGEMAKER=true
    KUBELET_ON_OPT_SAGEMAKER=true
    ENABLE_FSX_LUSTRE_CLIENT=false
    SECONDARY_VOLUME_WAIT_SECONDS=300

    if [[ ! -e ${CONFIG_FILE} ]]; then
        log "No ${CONFIG_NAME} next to the script (${SCRIPT_DIR}); using the defaults"
    else
        log "Reading ${CONFIG_FILE}"
        local line key value where number=0
        local -r blank_or_comment='^[[:space:]]*(#.*)?$'
        local -r assignment='^([A-Z_][A-Z0-9_]*)=([A-Za-z0-9_./:-]*)$'
        while IFS= read -r line || [[ -n ${line} ]]; do
            number=$((number + 1))
            where="${CONFIG_NAME} line ${number}"
            if [[ ${line} == *$'\r' ]]; then
                die "${where} ends with a carriage return (CRLF line ending); use LF line endings"
            fi
            if [[ ${line} =~ ${blank_or_comment} ]]; then
                continue
            fi
            if [[ ! ${line} =~ ${assignment} ]]; then
                die "${where} is not a KEY=VALUE line (value characters allowed: A-Z a-z 0-9 _ . / : -): '${line}'"
            fi
            key="${BASH_REMATCH[1]}"
            value="${BASH_REMATCH[2]}"
            case "${key}" in
                CONTAINERD_ON_OPT_SAGEMAKER | KUBELET_ON_OPT_SAGEMAKER | ENABLE_FSX_LUSTRE_CLIENT)
                    require_bool "${key}" "${value}" "${where}"
                    ;;
                SECONDARY_VOLUME_WAIT_SECONDS)
                    if [[ ! ${value} =~ ^[0-9]{1,5}$ ]]; then
                        die "${where}: ${key} must be a whole number of seconds (0-99999), got '${value}'"
                    fi
                    # Force base 10: a leading zero would otherwise read as octal.
                    value="$((10#${value}))"
                    ;;
                *)
                    die "${where}: unknown key '${key}' (known keys: ${KNOWN_KEYS})"
                    ;;
            esac
            # Safe: the key was checked against the fixed list above.
            printf -v "${key}" '%s' "${value}"
        done <"${CONFIG_FILE}"
    fi

    log "CONTAINERD_ON_OPT_SAGEMAKER=${CONTAINERD_ON_OPT_SAGEMAKER}"
    log "KUBELET_ON_OPT_SAGEMAKER=${KUBELET_ON_OPT_SAGEMAKER}"
    log "ENABLE_FSX_LUSTRE_CLIENT=${ENABLE_FSX_LUSTRE_CLIENT}"
    log "SECONDARY_VOLUME_WAIT_SECONDS=${SECONDARY_VOLUME_WAIT_SECONDS}"
}

# os-release is parsed rather than sourced for the same reason as the config file.
detect_os() {
    step "Detecting the operating system"
    local os_release="${ROOT}/etc/os-release" line id="" version=""
    if [[ -r ${os_release} ]]; then
        while IFS= read -r line || [[ -n ${line} ]]; do
            case "${line}" in
                ID=*) id="${line#ID=}" ;;
                VERSION_ID=*) version="${line#VERSION_ID=}" ;;
                *) ;;
            esac
        done <"${os_release}"
    fi
    id="${id//[\"\']/}"
    version="${version//[\"\']/}"

    case "${id}:${version}" in
        amzn:2023*)
            OS_FLAVOR="al2023"
            log "Detected Amazon Linux 2023 (ID=${id} VERSION_ID=${version})"
            ;;
        amzn:2)
            OS_FLAVOR="al2"
            log "Detected Amazon Linux 2 (ID=${id} VERSION_ID=${version})"
            ;;
        *)
            # Moving the data does not depend on the distribution, so carry on; only the
            # Lustre client install needs to know the package manager.
            OS_FLAVOR="unknown"
            log "WARNING: unsupported OS (ID=${id:-?} VERSION_ID=${version:-?}); expected Amazon Linux 2023 or 2"
            ;;
    esac
}

# HyperPod attaches and mounts the instance group's secondary EBS volume asynchronously; it may
# not be there yet when this script starts.
wait_for_volume() {
    local max="${SECONDARY_VOLUME_WAIT_SECONDS}"
    step "Waiting up to ${max}s for the secondary EBS volume at ${VOLUME}"
    local waited=0 nap
    until mountpoint -q "${ROOT}${VOLUME}"; do
        if ((waited >= max)); then
            die "the secondary EBS volume never appeared: ${VOLUME} is not a mount point after ${max}s"
        fi
        nap=$((max - waited < POLL_SECONDS ? max - waited : POLL_SECONDS))
        log "${VOLUME} is not mounted yet (waited ${waited}s of ${max}s)"
        sleep "${nap}"
        waited=$((waited + nap))
    done
    log "${VOLUME} is mounted"
}

unit_exists() {
    systemctl cat --no-pager "$1.service" >/dev/null 2>&1
}

# kubelet talks to containerd, so it stops first and starts last.
stop_services() {
    local unit
    for unit in kubelet containerd; do
        if ! unit_exists "${unit}"; then
            log "${unit}.service is not installed; nothing to stop"
            continue
        fi
        if systemctl is-active --quiet "${unit}.service"; then
            WAS_ACTIVE="${WAS_ACTIVE} ${unit}"
        fi
        log "Stopping ${unit}.service"
        systemctl stop "${unit}.service"
    done
}

# Only restart what was running: on a fresh node the EKS bootstrap may not have configured and
# started kubelet yet, and starting it early would race that bootstrap.
start_services() {
    local unit
    for unit in containerd kubelet; do
        if [[ " ${WAS_ACTIVE} " == *" ${unit} "* ]]; then
            log "Starting ${unit}.service"
            systemctl start "${unit}.service"
        else
            log "${unit}.service was not running before; leaving it for the node bootstrap to start"
        fi
    done
}

# Copy /var/lib/<name> onto the volume and bind-mount it back, so every path the services and
# the AMI know keeps working while the bytes live on the large volume instead of the root disk.
move_to_volume() {
    local name="$1"
    local src="${ROOT}/var/lib/${name}" dst="${ROOT}${VOLUME}/${name}"

    if [[ -L ${src} ]]; then
        die "/var/lib/${name} is a symbolic link; expected a directory to bind-mount over"
    fi
    mkdir -p "${src}" "${dst}"
    # cp -a keeps owners, modes, hard links and extended attributes (overlay snapshots rely on
    # them), and coreutils is on every AMI, unlike rsync.
    log "Copying /var/lib/${name} to ${VOLUME}/${name}"
    cp -a "${src}/." "${dst}/"
    log "Bind-mounting ${VOLUME}/${name} on /var/lib/${name}"
    mount --bind "${dst}" "${src}"
}

# Returns 0 when /etc/fstab already bind-mounts ${VOLUME}/<name> on /var/lib/<name>, 1 when it
# has no entry for /var/lib/<name>, and fails when something else is mounted there: two entries
# for one mount point would leave the boot-time result to chance.
fstab_has_entry() {
    local name="$1"
    local fstab="${ROOT}/etc/fstab"
    local want_spec="${VOLUME}/${name}" want_target="/var/lib/${name}"
    local spec target rest

    if [[ ! -e ${fstab} ]]; then
        return 1
    fi
    while read -r spec target rest || [[ -n ${spec} ]]; do
        if [[ -z ${spec} || ${spec} == \#* || ${target:-} != "${want_target}" ]]; then
            continue
        fi
        if [[ ${spec} == "${want_spec}" ]]; then
            return 0
        fi
        die "/etc/fstab already mounts '${spec}' on ${want_target} (${rest}); refusing to add a second entry"
    done <"${fstab}"
    return 1
}

# Make the bind mount survive reboots. nofail keeps a boot without the volume reachable (SSM,
# health agent) instead of dropping into emergency mode; the unit drop-in below then keeps the
# service from starting on the empty root-disk directory.
ensure_fstab_entry() {
    local name="$1"
    local fstab="${ROOT}/etc/fstab"
    local entry="${VOLUME}/${name} /var/lib/${name} none bind,nofail,x-systemd.requires-mounts-for=${VOLUME} 0 0"
    local last_char=""

    if fstab_has_entry "${name}"; then
        log "/etc/fstab already bind-mounts ${VOLUME}/${name} on /var/lib/${name}"
        return 0
    fi
    mkdir -p "${ROOT}/etc"
    # Never glue our entry onto a last line that lacks its newline.
    if [[ -s ${fstab} ]]; then
        last_char="$(tail -c 1 "${fstab}")"
    fi
    if [[ -n ${last_char} ]]; then
        printf '\n' >>"${fstab}"
    fi
    log "Adding to /etc/fstab: ${entry}"
    printf '%s\n' "${entry}" >>"${fstab}"
    SYSTEMD_CONFIG_CHANGED=true
}

# RequiresMountsFor makes the service wait for the bind mount at boot, and refuse to start if it
# failed, rather than run on an empty directory on the root disk.
ensure_unit_dropin() {
    local name="$1"
    local dir="${ROOT}/etc/systemd/system/${name}.service.d"
    local file="${dir}/10-opt-sagemaker.conf"
    local content
    content="# Written by the HyperPod on_create.sh lifecycle script: ${name} data lives on ${VOLUME}.
[Unit]
RequiresMountsFor=/var/lib/${name}"

    if [[ -f ${file} && "$(<"${file}")" == "${content}" ]]; then
        log "systemd drop-in for ${name}.service already in place"
        return 0
    fi
    mkdir -p "${dir}"
    printf '%s\n' "${content}" >"${file}"
    log "Wrote systemd drop-in ${file#"${ROOT}"}"
    SYSTEMD_CONFIG_CHANGED=true
}

relocate_data() {
    step "Planning the move of containerd and kubelet data to ${VOLUME}"
    local names="" pending="" name
    if [[ ${CONTAINERD_ON_OPT_SAGEMAKER} == true ]]; then
        names="${names} containerd"
    fi
    if [[ ${KUBELET_ON_OPT_SAGEMAKER} == true ]]; then
        names="${names} kubelet"
    fi
    if [[ -z ${names} ]]; then
        log "CONTAINERD_ON_OPT_SAGEMAKER and KUBELET_ON_OPT_SAGEMAKER are false; nothing to move"
        return 0
    fi

    # A bind mount already in place means an earlier run finished this directory: do not stop
    # the services or copy again. A conflicting fstab entry stops us before anything changes.
    for name in ${names}; do
        fstab_has_entry "${name}" || true
        if mountpoint -q "${ROOT}/var/lib/${name}"; then
            log "/var/lib/${name} is already a mount point; leaving it as it is"
        else
            pending="${pending} ${name}"
        fi
    done

    if [[ -n ${pending} ]]; then
        # The data must not change while it is being copied.
        step "Stopping kubelet and containerd"
        stop_services
        for name in ${pending}; do
            step "Moving /var/lib/${name} to ${VOLUME}/${name}"
            move_to_volume "${name}"
        done
    fi

    step "Persisting the bind mounts across reboots"
    for name in ${names}; do
        ensure_fstab_entry "${name}"
        ensure_unit_dropin "${name}"
    done
    if [[ ${SYSTEMD_CONFIG_CHANGED} == true ]]; then
        log "Reloading systemd"
        systemctl daemon-reload
    fi

    if [[ -n ${pending} ]]; then
        step "Starting the services that were running"
        start_services
    fi
}

install_lustre_client() {
    if [[ ${ENABLE_FSX_LUSTRE_CLIENT} != true ]]; then
        log "ENABLE_FSX_LUSTRE_CLIENT=false; not installing the FSx for Lustre client"
        return 0
    fi
    step "Installing the FSx for Lustre client"
    # Both package managers treat an installed package as a no-op, which keeps reruns harmless.
    case "${OS_FLAVOR}" in
        al2023) dnf install -y lustre-client ;;
        al2) amazon-linux-extras install -y lustre ;;
        *) die "no Lustre client installer known for this OS (Amazon Linux 2023 and 2 are supported)" ;;
    esac
    log "FSx for Lustre client installed"
}

main() {
    MAIN_SUBSHELL="${BASH_SUBSHELL}"
    trap 'on_error "$?" "${LINENO}" "${BASH_COMMAND}"' ERR

    log "${SCRIPT_NAME} starting (script directory ${SCRIPT_DIR}, log ${LOG_FILE#"${ROOT}"})"
    read_config
    detect_os
    wait_for_volume
    relocate_data
    install_lustre_client
    step "Done"
    log "${SCRIPT_NAME} finished successfully in ${SECONDS}s"
}

mkdir -p "${LOG_DIR}"
# main runs in the pipeline's subshell with errexit and the ERR trap; pipefail hands its exit
# status to this shell, which then exits with it. The pipeline ends only when every line has
# been written, so nothing is lost when a failing node is torn down.
main "$@" 2>&1 | timestamp_lines
