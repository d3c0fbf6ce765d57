#!/usr/bin/env bash
# OnCreate lifecycle script for SageMaker HyperPod nodes orchestrated by Amazon EKS.
#
# HyperPod runs this script as root once, when a node is created, on the Amazon Linux 2023 or
# Amazon Linux 2 EKS AMI. It:
#   1. reads lifecycle_config.env (written by the CDK stack) from the script's own directory,
#   2. waits for the secondary EBS volume HyperPod mounts at /opt/sagemaker,
#   3. removes the bind mounts, /etc/fstab lines and systemd drop-ins earlier versions of this
#      script used to move containerd and kubelet data (they could keep a rebooted node down),
#   4. points containerd's data root at the volume through containerd's own configuration, as
#      AWS's HyperPod EKS lifecycle samples do, restarting containerd only when that changed,
#   5. optionally installs the FSx for Lustre client.
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

# Paths as the node sees them. They are written verbatim into config files and systemd units, and
# prefixed with $ROOT only where this script touches the file system itself.
readonly VOLUME="/opt/sagemaker"
# containerd's data root on the volume: the path AWS's HyperPod EKS lifecycle samples use.
readonly DATA_ROOT="${VOLUME}/containerd/data-root"
# Amazon Linux 2: the EKS AMI's template, which its bootstrap copies to the live file.
readonly AL2_TEMPLATE="/etc/eks/containerd/containerd-config.toml"
readonly LIVE_CONFIG="/etc/containerd/config.toml"
# Amazon Linux 2023: containerd's own config file on the volume, and the drop-in that uses it.
readonly AL2023_CONFIG="${VOLUME}/containerd/config.toml"
readonly AL2023_DROPIN="/etc/systemd/system/containerd.service.d/90-hyperpod-containerd-config.conf"
readonly AL2023_EXEC_START="ExecStart=/usr/bin/containerd --config ${AL2023_CONFIG}"
# First line of every file this script writes.
readonly MARKER="# Managed by the HyperPod on_create.sh lifecycle script"
# What earlier versions wrote: the first line of their drop-ins and the options of their fstab lines.
readonly LEGACY_MARKER="# Written by the HyperPod on_create.sh lifecycle script"
readonly LEGACY_FSTAB_OPTIONS="bind,nofail,x-systemd.requires-mounts-for=${VOLUME} 0 0"
readonly KNOWN_KEYS="CONTAINERD_ON_OPT_SAGEMAKER KUBELET_ON_OPT_SAGEMAKER ENABLE_FSX_LUSTRE_CLIENT SECONDARY_VOLUME_WAIT_SECONDS"
# The longest single sleep while waiting for the volume.
readonly POLL_SECONDS=5

CURRENT_STEP="starting"
# Subshell depth of main(), so the ERR trap can tell a failing $(...) from main itself.
MAIN_SUBSHELL=0
OS_FLAVOR="unknown"
# Set when /etc/fstab or a systemd drop-in changed, so systemd must re-read its configuration.
SYSTEMD_RELOAD_NEEDED=false
# The change plan for containerd: node paths and their new text, in the order they are written.
PLAN_FILES=()
PLAN_TEXTS=()
# True when containerd already runs on ${DATA_ROOT}, so its data must not be copied again.
CONTAINERD_ON_VOLUME=false
TOML_TEXT=""

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
    KUBELET_ON_OPT_SAGEMAKER=false
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
            # Carry on: only containerd's configuration and the Lustre client install need to
            # know the distribution, and they fail on their own when they are asked for.
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

# --- files ---------------------------------------------------------------------------------------

# True when the file exists and holds exactly the given text (plus its final newline).
has_content() {
    local file="$1" content="$2"
    [[ -f ${file} && "$(<"${file}")" == "${content}" ]]
}

# Replace a file in one rename, so a failure never leaves it half written. An existing file keeps
# its mode and owner: the temporary copy starts as a copy of it.
write_file() {
    local file="$1" content="$2"
    local tmp="${file}.on_create.tmp"
    mkdir -p "$(dirname "${file}")"
    if [[ -e ${file} ]]; then
        cp -p "${file}" "${tmp}"
    fi
    printf '%s\n' "${content}" >"${tmp}"
    mv -f "${tmp}" "${file}"
}

# --- containerd's TOML configuration -------------------------------------------------------------
# Only the top-level table matters here: every line before the first [table] header. A `root`
# key inside a table (some runtime plugins have one) is a different setting and is never touched.

# Print the top-level root of a containerd config file, without quotes; nothing when it has none.
toml_root() {
    local file="$1" line
    while IFS= read -r line || [[ -n ${line} ]]; do
        if [[ ${line} =~ ^[[:space:]]*\[ ]]; then
            break
        fi
        if [[ ${line} =~ ^[[:space:]]*root[[:space:]]*=[[:space:]]*[\"\']?([^\"\']*)[\"\']?[[:space:]]*$ ]]; then
            printf '%s\n' "${BASH_REMATCH[1]}"
            return 0
        fi
    done <"${file}"
}

# Set TOML_TEXT to the file's text with its top-level root set to ${DATA_ROOT}: the root line is
# rewritten in place, or added after the version line (at the top when there is none).
set_toml_root() {
    local file="$1" line in_top=true found=false
    local -a lines=()
    while IFS= read -r line || [[ -n ${line} ]]; do
        if [[ ${line} =~ ^[[:space:]]*\[ ]]; then
            in_top=false
        fi
        if [[ ${in_top} == true && ${line} =~ ^[[:space:]]*root[[:space:]]*= ]]; then
            line="root = \"${DATA_ROOT}\""
            found=true
        fi
        lines+=("${line}")
    done <"${file}"

    if [[ ${found} == false ]]; then
        local -a with_root=()
        local i inserted=false
        for i in "${!lines[@]}"; do
            with_root+=("${lines[i]}")
            if [[ ${inserted} == false && ${lines[i]} =~ ^[[:space:]]*version[[:space:]]*= ]]; then
                with_root+=("root = \"${DATA_ROOT}\"")
                inserted=true
            fi
        done
        if [[ ${inserted} == false ]]; then
            with_root=("root = \"${DATA_ROOT}\"" "${lines[@]}")
        fi
        lines=("${with_root[@]}")
    fi
    TOML_TEXT="$(printf '%s\n' "${lines[@]}")"
}

# --- migration from the bind mounts of earlier versions ------------------------------------------

# Earlier versions of this script bind-mounted /opt/sagemaker/<name> on /var/lib/<name> through
# /etc/fstab and made the services require the mount. At a reboot that ordering only holds when
# /opt/sagemaker is itself mounted from /etc/fstab, which HyperPod does not promise: the services
# could stay down for good. Remove exactly what those versions wrote, nothing else. Their fstab
# lines carried no comment, so they are recognised by their exact text; their drop-ins by the
# marker on their first line.
remove_legacy_bind_mounts() {
    step "Removing the bind-mount setup of earlier versions of this script"
    local fstab="${ROOT}/etc/fstab" line name found=false
    local -a kept=()
    local -A legacy_lines=()
    for name in containerd kubelet; do
        legacy_lines["${VOLUME}/${name} /var/lib/${name} none ${LEGACY_FSTAB_OPTIONS}"]="${name}"
    done

    if [[ -f ${fstab} ]]; then
        local removed=0
        while IFS= read -r line || [[ -n ${line} ]]; do
            if [[ -n ${legacy_lines["${line}"]+set} ]]; then
                log "Removing from /etc/fstab: ${line}"
                removed=$((removed + 1))
            else
                kept+=("${line}")
            fi
        done <"${fstab}"
        if ((removed > 0)); then
            if ((${#kept[@]} > 0)); then
                write_file "${fstab}" "$(printf '%s\n' "${kept[@]}")"
            else
                write_file "${fstab}" ""
            fi
            SYSTEMD_RELOAD_NEEDED=true
            found=true
        fi
    fi

    local dropin first
    for name in containerd kubelet; do
        dropin="${ROOT}/etc/systemd/system/${name}.service.d/10-opt-sagemaker.conf"
        [[ -f ${dropin} ]] || continue
        first=""
        IFS= read -r first <"${dropin}" || true
        if [[ ${first} == "${LEGACY_MARKER}"* ]]; then
            log "Removing systemd drop-in ${dropin#"${ROOT}"} (RequiresMountsFor=/var/lib/${name})"
            rm -f "${dropin}"
            SYSTEMD_RELOAD_NEEDED=true
            found=true
        else
            log "Keeping ${dropin#"${ROOT}"}: it was not written by this script"
        fi
    done

    for name in containerd kubelet; do
        if [[ -e ${ROOT}/var/lib/${name} && ${ROOT}/var/lib/${name} -ef ${ROOT}${VOLUME}/${name} ]]; then
            log "/var/lib/${name} is still bind-mounted from ${VOLUME}/${name}; the mount goes away at the next reboot"
            found=true
        fi
    done

    if [[ ${found} == false ]]; then
        log "Nothing from an earlier version found"
    fi
}

reload_systemd_if_needed() {
    if [[ ${SYSTEMD_RELOAD_NEEDED} == true ]]; then
        log "Reloading systemd"
        systemctl daemon-reload
        SYSTEMD_RELOAD_NEEDED=false
    fi
}

# --- containerd's data root ----------------------------------------------------------------------

# Add a file to the change plan when its wanted text differs from what it holds.
plan_file() {
    local file="$1" content="$2" why="$3"
    if has_content "${ROOT}${file}" "${content}"; then
        log "${file} is already up to date"
        return 0
    fi
    PLAN_FILES+=("${file}")
    PLAN_TEXTS+=("${content}")
    log "${file} needs a change: ${why}"
}

# Amazon Linux 2: the EKS AMI's bootstrap copies /etc/eks/containerd/containerd-config.toml to
# /etc/containerd/config.toml (when they differ) and restarts containerd. Set root in the template,
# so that copy carries it, and in the live file when there is one, so a restart now uses it.
plan_al2() {
    local template="${AL2_TEMPLATE}" live="${LIVE_CONFIG}" file current
    if [[ ! -f ${ROOT}${template} ]]; then
        die "${template} not found: this does not look like the Amazon Linux 2 EKS AMI"
    fi
    if [[ -f ${ROOT}${live} && "$(toml_root "${ROOT}${live}")" == "${DATA_ROOT}" ]]; then
        CONTAINERD_ON_VOLUME=true
    fi
    for file in "${template}" "${live}"; do
        [[ -f ${ROOT}${file} ]] || continue
        current="$(toml_root "${ROOT}${file}")"
        set_toml_root "${ROOT}${file}"
        plan_file "${file}" "${TOML_TEXT}" "root \"${current:-<unset>}\" -> \"${DATA_ROOT}\""
    done
}

# Amazon Linux 2023: nodeadm writes /etc/containerd/config.toml at every boot, so an edit there
# would not last. As AWS's HyperPod samples do, containerd gets a config file of its own on the
# volume and a systemd drop-in that starts it with --config. The file is a copy of the one nodeadm
# generated (runtimes, sandbox image, cgroup driver) with root on the volume.
plan_al2023() {
    local base="${LIVE_CONFIG}" current=""
    if [[ ! -f ${ROOT}${base} ]]; then
        die "${base} not found: nodeadm has not configured containerd on this node yet, so there is no configuration to base ${AL2023_CONFIG} on"
    fi
    if [[ -f ${ROOT}${AL2023_DROPIN} && -f ${ROOT}${AL2023_CONFIG} ]] &&
        [[ "$(<"${ROOT}${AL2023_DROPIN}")" == *"${AL2023_EXEC_START}"* ]] &&
        [[ "$(toml_root "${ROOT}${AL2023_CONFIG}")" == "${DATA_ROOT}" ]]; then
        CONTAINERD_ON_VOLUME=true
    fi
    # The root containerd uses now: from its own file once it has one, else from nodeadm's.
    if [[ -f ${ROOT}${AL2023_CONFIG} ]]; then
        current="$(toml_root "${ROOT}${AL2023_CONFIG}")"
    else
        current="$(toml_root "${ROOT}${base}")"
    fi
    set_toml_root "${ROOT}${base}"
    plan_file "${AL2023_CONFIG}" \
        "${MARKER}: a copy of ${base} with root on ${VOLUME}.
${TOML_TEXT}" "copy of ${base}, root \"${current:-<unset>}\" -> \"${DATA_ROOT}\""

    local dropin
    dropin="${MARKER}: containerd reads ${AL2023_CONFIG}.
# While ${VOLUME} is not mounted yet the file is missing and containerd exits; it is restarted
# every 5 s, without a start limit, until the volume is there.
[Unit]
StartLimitIntervalSec=0

[Service]
ExecStart=
${AL2023_EXEC_START}
Restart=always
RestartSec=5"
    local before=${#PLAN_FILES[@]}
    plan_file "${AL2023_DROPIN}" "${dropin}" "start containerd with --config ${AL2023_CONFIG}"
    if ((${#PLAN_FILES[@]} > before)); then
        SYSTEMD_RELOAD_NEEDED=true
    fi
}

# Fill ${DATA_ROOT} from /var/lib/containerd while containerd is stopped, so the images the AMI
# ships (among them the sandbox image) are there when containerd starts on the new root.
populate_data_root() {
    local src="${ROOT}/var/lib/containerd" dst="${ROOT}${DATA_ROOT}" dir="${ROOT}${VOLUME}/containerd"
    mkdir -p "${dir}"
    if [[ -e ${src} && ${src} -ef ${dir} ]]; then
        # An earlier version bind-mounted ${VOLUME}/containerd on /var/lib/containerd: the live
        # data is already on the volume. Move it into data-root (a rename on one file system);
        # copying would copy the directory into itself.
        log "/var/lib/containerd is ${VOLUME}/containerd (bind mount of an earlier version); moving its content into ${DATA_ROOT}"
        mkdir -p "${dst}"
        local entry
        for entry in "${dir}"/* "${dir}"/.[!.]* "${dir}"/..?*; do
            [[ -e ${entry} || -L ${entry} ]] || continue
            case "${entry##*/}" in
                data-root | config.toml | *.on_create.tmp) continue ;;
                *) ;;
            esac
            mv "${entry}" "${dst}/"
        done
        return 0
    fi
    if [[ -e ${dst} ]]; then
        # This root disk never used it, so it is left from an earlier root disk (the volume can
        # outlive one); its metadata may not match this AMI's containerd.
        log "Removing ${DATA_ROOT} left on the volume by an earlier root disk"
        rm -rf "${dst}"
    fi
    mkdir -p "${dst}"
    if [[ -d ${src} ]]; then
        log "Copying /var/lib/containerd to ${DATA_ROOT}"
        # cp -a keeps owners, modes, hard links and extended attributes (overlay snapshots rely
        # on them), and coreutils is on every AMI, unlike rsync.
        cp -a "${src}/." "${dst}/"
    else
        log "/var/lib/containerd does not exist; containerd starts with an empty data root"
    fi
}

configure_containerd() {
    if [[ ${KUBELET_ON_OPT_SAGEMAKER} == true ]]; then
        log "KUBELET_ON_OPT_SAGEMAKER=true has no effect: kubelet's data stays in /var/lib/kubelet"
    fi
    if [[ ${CONTAINERD_ON_OPT_SAGEMAKER} != true ]]; then
        log "CONTAINERD_ON_OPT_SAGEMAKER=false; leaving containerd's configuration as it is"
        return 0
    fi

    step "Planning containerd's data root on ${DATA_ROOT}"
    PLAN_FILES=()
    PLAN_TEXTS=()
    CONTAINERD_ON_VOLUME=false
    case "${OS_FLAVOR}" in
        al2) plan_al2 ;;
        al2023) plan_al2023 ;;
        *) die "no containerd configuration known for this OS (Amazon Linux 2023 and 2 are supported); set CONTAINERD_ON_OPT_SAGEMAKER=false to skip" ;;
    esac
    if ((${#PLAN_FILES[@]} == 0)); then
        log "containerd already keeps its data in ${DATA_ROOT}; nothing to change"
        return 0
    fi

    local was_running=false i
    if systemctl is-active --quiet containerd.service; then
        was_running=true
        step "Stopping containerd"
        systemctl stop containerd.service
    else
        log "containerd.service is not running"
    fi

    if [[ ${CONTAINERD_ON_VOLUME} == true ]]; then
        log "containerd already uses ${DATA_ROOT}; its data stays as it is"
    else
        step "Copying containerd's data to ${DATA_ROOT}"
        populate_data_root
    fi

    # The file containerd is pointed at comes last, so a failure leaves it on its old root.
    step "Writing containerd's configuration"
    for i in "${!PLAN_FILES[@]}"; do
        write_file "${ROOT}${PLAN_FILES[i]}" "${PLAN_TEXTS[i]}"
        log "Wrote ${PLAN_FILES[i]}"
    done
    reload_systemd_if_needed

    if [[ ${was_running} == true ]]; then
        step "Restarting containerd"
        systemctl start containerd.service
        log "containerd.service started with its data root on ${DATA_ROOT}"
    else
        log "containerd.service was not running before; leaving it for the node bootstrap to start"
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
    remove_legacy_bind_mounts
    configure_containerd
    reload_systemd_if_needed
    install_lustre_client
    step "Done"
    log "${SCRIPT_NAME} finished successfully in ${SECONDS}s"
}

mkdir -p "${LOG_DIR}"
# main runs in the pipeline's subshell with errexit and the ERR trap; pipefail hands its exit
# status to this shell, which then exits with it. The pipeline ends only when every line has
# been written, so nothing is lost when a failing node is torn down.
main "$@" 2>&1 | timestamp_lines
