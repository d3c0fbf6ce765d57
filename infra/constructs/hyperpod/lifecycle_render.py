"""lifecycle_config.env, the settings file the stack writes next to on_create.sh; no CDK import, like the config."""

from __future__ import annotations

from infra.config import LifecycleOptions


def render_lifecycle_env(options: LifecycleOptions) -> str:
    """The file's text: one KEY=value line per setting, booleans as true/false (on_create.sh refuses others)."""
    values = {
        "CONTAINERD_ON_OPT_SAGEMAKER": options.containerd_on_opt_sagemaker,
        "ENABLE_FSX_LUSTRE_CLIENT": options.fsx_lustre_client,
        "SECONDARY_VOLUME_WAIT_SECONDS": options.secondary_volume_wait_seconds,
    }
    lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()]
    return "# Written by the HyperPod stack; read by on_create.sh.\n" + "\n".join(lines) + "\n"
