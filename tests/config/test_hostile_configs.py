"""Hostile and mistaken configs, each refused by app.py before anything is synthesized: exit 2, one line on stderr
naming the key, no traceback, and no credential of the input in the message.

Each case is a change to config/default.yaml written as YAML text (so the file reader sees what a user writes);
a case's raw text replaces the placeholder where the YAML form itself is the mistake.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.config import AppConfig, parse_config
from infra.config.fields import APP_TAGS, MAX_TAGS_PER_RESOURCE
from infra.errors import ConfigError, redact
from infra.facts.aws_lists import partition_of, sagemaker_regions
from tests.conftest import default_config_data, mutate
from tests.stacks.test_replacement_guard import _run_app

RAW = "@@RAW@@"  # replaced in the YAML text by a case's raw form
ACCOUNT = "111122223333"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # the shape only, not a real token
AWS_KEY_ID = "AKIA" + "ABCDEFGHIJKLMNOP"
GROUP = "hyperpod.instance_groups.0"


def _group(**changes: Any) -> dict[str, Any]:
    groups = default_config_data()["hyperpod"]["instance_groups"]
    groups[0].update(changes)
    return {"hyperpod": {"instance_groups": groups}}


def _namespace_admin(arn: str, namespaces: list[str]) -> dict[str, Any]:
    return {"eks": {"namespace_admins": [{"principal_arn": arn, "namespaces": namespaces}]}}


def _subnets(count: int) -> dict[str, Any]:
    return {"network": {"hyperpod_subnets": [{"az_id": f"usw2-az{i + 1}", "cidr": f"100.{64 + i}.0.0/16"}
                                             for i in range(count)]}}


# (case id, changes to the default config, raw YAML for RAW or None, the key the one line must name, a secret the
# line must not show or None)
CASES: list[tuple[str, dict[str, Any], str | None, str, str | None]] = [
    # Patterns are ASCII: Unicode digits and letters match \d and \w in both regular expression engines.
    ("arabic-indic digits in the account", {"account": "\u0661" * 12}, None, "account", None),
    ("fullwidth digits in a principal's account",
     {"eks": {"admin_principal_arns": ["arn:aws:iam::\uff11\uff11\uff11\uff11\uff12\uff12\uff12\uff12\uff13\uff13"
                                       "\uff13\uff13:role/Admin"]}}, None, "eks.admin_principal_arns.0", None),
    ("a non-ASCII letter in a role name",
     {"eks": {"admin_principal_arns": [f"arn:aws:iam::{ACCOUNT}:role/\u00c4dmin"]}}, None,
     "eks.admin_principal_arns.0", None),
    ("a Unicode digit in an add-on version",
     {"addons": {"task_governance": {"enabled": True, "addon_version": "v1.\u0663.0-eksbuild.1"}}}, None,
     "addons.task_governance.addon_version", None),
    ("a fullwidth letter in the chart's GitHub owner",
     {"hyperpod": {"dependencies_chart": {"git_repository": "https://github.com/\uff41ws/sagemaker-hyperpod-cli"}}},
     None, "hyperpod.dependencies_chart.git_repository", None),
    # YAML 1.1 forms that YAML 1.2 reads otherwise.
    ("a leading-zero integer (octal in YAML 1.1)", _group(ebs_volume_gb=RAW), "0500", f"{GROUP}.ebs_volume_gb", None),
    ("a base-60 integer", _group(instance_count=RAW), "1:30", f"{GROUP}.instance_count", None),
    ("an integer with underscores", _group(ebs_volume_gb=RAW), "1_000", f"{GROUP}.ebs_volume_gb", None),
    ("yes as a boolean", {"destroy_data_on_delete": RAW}, "yes", "destroy_data_on_delete", None),
    ("off as a boolean", {"termination_protection": RAW}, "off", "termination_protection", None),
    # EKS access entries: no STS sessions, no admin of the system or add-on namespaces.
    ("an STS session as cluster admin",
     {"eks": {"admin_principal_arns": [f"arn:aws:sts::{ACCOUNT}:assumed-role/Admin/alice"]}}, None,
     "eks.admin_principal_arns.0", None),
    ("an STS session as namespace admin",
     _namespace_admin(f"arn:aws:sts::{ACCOUNT}:assumed-role/Dev/bob", ["training"]), None,
     "eks.namespace_admins.0.principal_arn", None),
    ("namespace admin of kube-system",
     _namespace_admin(f"arn:aws:iam::{ACCOUNT}:role/Dev", ["training", "kube-system"]), None,
     "eks.namespace_admins.0.namespaces.1", None),
    ("namespace admin of an add-on's namespace",
     _namespace_admin(f"arn:aws:iam::{ACCOUNT}:role/Dev", ["hyperpod-observability"]), None,
     "eks.namespace_admins.0.namespaces.0", None),
    # The lifecycle script key names a file inside the scripts folder.
    ("an absolute on_create_script", {"hyperpod": {"on_create_script": "/etc/passwd"}}, None,
     "hyperpod.on_create_script", None),
    ("an on_create_script above the folder", {"hyperpod": {"on_create_script": "../scripts/on_create.sh"}}, None,
     "hyperpod.on_create_script", None),
    ("an on_create_script in the home folder", {"hyperpod": {"on_create_script": "~/on_create.sh"}}, None,
     "hyperpod.on_create_script", None),
    # ARNs of the cluster's own region and partition.
    ("a training plan of another region",
     _group(training_plan_arn=f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/plan-1"), None,
     f"{GROUP}.training_plan_arn", None),
    ("a training plan of another partition",
     _group(training_plan_arn=f"arn:aws-cn:sagemaker:us-west-2:{ACCOUNT}:training-plan/plan-1"), None,
     f"{GROUP}.training_plan_arn", None),
    ("a permissions boundary of another partition",
     {"permissions_boundary_arn": f"arn:aws-us-gov:iam::{ACCOUNT}:policy/Boundary"}, None,
     "permissions_boundary_arn", None),
    ("a bucket of another partition",
     {"addons": {"s3_csi": {"enabled": True, "bucket_arns": ["arn:aws-cn:s3:::datasets"]}}}, None,
     "addons.s3_csi.bucket_arns.0", None),
    # Secrets: refused, and never echoed.
    ("a password in the chart's values",
     {"hyperpod": {"dependencies_chart": {"values": {"grafana": {"adminPassword": "hunter2-hunter2"}}}}}, None,
     "hyperpod.dependencies_chart.values.grafana.adminPassword", "hunter2-hunter2"),
    ("a GitHub token in the chart's values",
     {"hyperpod": {"dependencies_chart": {"values": {"image": {"pullSecretData": GITHUB_TOKEN}}}}}, None,
     "hyperpod.dependencies_chart.values.image.pullSecretData", GITHUB_TOKEN),
    ("credentials in the chart's URL",
     {"hyperpod": {"dependencies_chart": {
         "git_repository": f"https://x-access-token:{GITHUB_TOKEN}@github.com/aws/sagemaker-hyperpod-cli"}}}, None,
     "hyperpod.dependencies_chart.git_repository", GITHUB_TOKEN),
    ("an AWS access key ID in a tag", {"tags": {"owner": AWS_KEY_ID}}, None, "tags.owner", AWS_KEY_ID),
    # Every list at its AWS limit, less what the app adds itself.
    ("more tags than a resource takes beside the app's",
     {"tags": {f"t{i}": "v" for i in range(MAX_TAGS_PER_RESOURCE - APP_TAGS + 1)}}, None, "tags", None),
    ("seventeen HyperPod subnets", _subnets(17), None, "network.hyperpod_subnets", None),
    ("forty-one public access CIDRs",
     {"eks": {"endpoint": "public_and_private", "public_access_cidrs": [f"198.51.{i}.0/24" for i in range(41)]}},
     None, "eks.public_access_cidrs", None),
    ("fifty-one node labels", _group(labels={f"l{i}": "v" for i in range(51)}), None, f"{GROUP}.labels", None),
    ("a rolling-update batch larger than any group",
     _group(rolling_update={"batch": {"type": "count", "value": 10_000}}), None,
     f"{GROUP}.rolling_update.batch.value", None),
    ("true as a backup retention",
     {"storage": {"fsx_lustre": {"enabled": True, "automatic_backup_retention_days": True}}}, None,
     "storage.fsx_lustre.automatic_backup_retention_days", None),
]


def _write(tmp_path: Path, changes: dict[str, Any], raw: str | None) -> Path:
    text = yaml.safe_dump(mutate(changes), sort_keys=False, allow_unicode=True)
    if raw is not None:
        assert f"'{RAW}'" in text
        text = text.replace(f"'{RAW}'", raw)
    path = tmp_path / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("changes", "raw", "key", "secret"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_app_refuses_the_hostile_config_in_one_line(tmp_path, monkeypatch, capsys, changes, raw, key, secret):
    code, stderr, _ = _run_app(monkeypatch, capsys, _write(tmp_path, changes, raw), tmp_path / "locks",
                               tmp_path / "out")
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("error: Invalid configuration in ") and f": {key}: " in lines[0], lines[0]
    if secret is not None:
        assert secret not in stderr


SECRET_CASES = [c for c in CASES if c[4] is not None]


@pytest.mark.parametrize(("changes", "raw", "key", "secret"), [c[1:] for c in SECRET_CASES],
                         ids=[c[0] for c in SECRET_CASES])
def test_hpctl_refuses_the_config_without_showing_the_secret(tmp_path, capsys, changes, raw, key, secret):
    from hpctl import cli

    code = cli.main(["plan", "--config", str(_write(tmp_path, changes, raw)), "--checkpoint-gib", "10"])
    stderr = capsys.readouterr().err
    assert code == 2 and len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert f": {key}: " in stderr and secret not in stderr


def test_there_are_at_least_twenty_hostile_configs():
    assert len(CASES) >= 20 and len({c[0] for c in CASES}) == len(CASES)


# --- what is accepted --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arn", ["arn:aws:iam::aws:policy/PowerUserAccess",
                                 "arn:aws:iam::aws:policy/job-function/SystemAdministrator",
                                 f"arn:aws:iam::{ACCOUNT}:policy/org/Boundary"])
def test_managed_and_customer_policies_are_permissions_boundaries(arn):
    config = parse_config(mutate({"permissions_boundary_arn": arn, "hyperpod": {"permissions_boundary_arn": arn}}))
    assert config.permissions_boundary_arn == arn and config.hyperpod.permissions_boundary_arn == arn


def test_yaml_forms_both_versions_read_alike_load_and_the_others_do_not(tmp_path):
    from infra.config import load_config

    def loaded(ebs: str) -> Any:
        text = yaml.safe_dump(mutate(_group(ebs_volume_gb=RAW, labels={"zip": "@@ZIP@@"})), sort_keys=False)
        path = tmp_path / "forms.yaml"
        path.write_text(text.replace(f"'{RAW}'", ebs).replace("'@@ZIP@@'", "'0500'")
                        .replace("destroy_data_on_delete: false", "destroy_data_on_delete: False"))
        return load_config(path)

    config = loaded("500")
    group = config.hyperpod.instance_groups[0]
    assert group.ebs_volume_gb == 500 and group.labels["zip"] == "0500" and config.destroy_data_on_delete is False
    with pytest.raises(ConfigError, match="ebs_volume_gb: YAML 1.1 and YAML 1.2 read this differently"):
        loaded("0500")


def test_namespace_admin_of_default_and_team_namespaces_only():
    arn = f"arn:aws:iam::{ACCOUNT}:role/Dev"
    assert parse_config(mutate(_namespace_admin(arn, ["default", "training"]))).eks.namespace_admins
    with pytest.raises(ConfigError, match="namespaces.0: admin of a system"):
        parse_config(mutate(_namespace_admin(arn, ["kueue-system"])))


def test_a_script_key_may_name_a_subfolder_but_not_leave_the_folder():
    assert parse_config(mutate({"hyperpod": {"on_create_script": "sub/on_create.sh"}})).hyperpod.on_create_script
    for key in ("sub//on_create.sh", "./on_create.sh", "sub\\on_create.sh"):
        with pytest.raises(ConfigError, match="hyperpod.on_create_script: must be a relative path"):
            parse_config(mutate({"hyperpod": {"on_create_script": key}}))


def test_a_chart_takes_the_name_of_an_existing_secret_but_no_secret():
    values = {"grafana": {"existingSecret": "grafana-admin", "admin": {"passwordKey": "password"}}}
    config = parse_config(mutate({"hyperpod": {"dependencies_chart": {"values": values}}}))
    assert config.hyperpod.dependencies_chart.values == values
    with pytest.raises(ConfigError, match="values.grafana.clientSecret: holds a secret") as raised:
        parse_config(mutate({"hyperpod": {"dependencies_chart": {"values": {"grafana": {"clientSecret": "s3cr3t!"}}}}}))
    assert "s3cr3t!" not in str(raised.value)


# --- one redaction for every message -----------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    f"https://user:{GITHUB_TOKEN}@github.com/o/r", f"https://{GITHUB_TOKEN}@github.com/o/r", GITHUB_TOKEN,
    AWS_KEY_ID, "glpat-" + "a" * 20, "xoxb-" + "1" * 12, "Authorization: Bearer abcdefgh12345678",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
])
def test_redact_hides_each_credential_shape(text):
    shown = redact(f"before {text} after")
    assert shown.startswith("before ") and shown.endswith(" after") and "***" in shown
    for secret in (GITHUB_TOKEN, AWS_KEY_ID, "abcdefgh12345678", "MIIEabc", "a" * 20, "1" * 12):
        assert secret not in shown


def test_redact_leaves_ordinary_text_alone():
    text = "hyperpod.dependencies_chart.revision: a00b22d17ea928a6e39a43bd2efdafe01b1005ea https://github.com/o/r"
    assert redact(text) == text


def test_a_config_error_built_in_code_hides_the_credential_it_quotes():
    """HyperPodOnEks consumers pass dicts, which skip the file reader: the rendering redacts all the same."""
    url = f"oci://robot:{GITHUB_TOKEN}@registry.example/charts/hp"
    with pytest.raises(ConfigError) as raised:
        parse_config(mutate({"hyperpod": {"dependencies_chart": {"source": "oci", "oci_uri": url,
                                                                 "version": "1.0.0"}}}))
    assert "hyperpod.dependencies_chart.oci_uri" in str(raised.value) and GITHUB_TOKEN not in str(raised.value)
    assert GITHUB_TOKEN not in str(ConfigError("k", url, f"bad {url}"))


def test_hpctl_redacts_what_it_prints(capsys):
    from hpctl.commands.terminal import err

    err(f"cannot reach https://x:{GITHUB_TOKEN}@github.com")
    assert GITHUB_TOKEN not in capsys.readouterr().err


# --- facts the rules read -----------------------------------------------------------------------------------------


def _patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        return found + [p for value in node.values() for p in _patterns(value)]
    if isinstance(node, list):
        return [p for value in node for p in _patterns(value)]
    return []


def test_no_pattern_uses_a_unicode_class():
    patterns = _patterns(AppConfig.model_json_schema())
    assert len(patterns) > 20
    assert [p for p in patterns if re.search(r"\\[dwsDWS]", p)] == []
    # The Python regular expressions of the config modules too (comments aside).
    root = Path(__file__).resolve().parents[2]
    for path in [*sorted((root / "infra" / "config").glob("*.py")), root / "infra" / "facts" / "aws_lists.py"]:
        code = "\n".join(line.split("#")[0] for line in path.read_text(encoding="utf-8").splitlines())
        assert not re.search(r"r[\"'][^\"'\n]*\\[dwDW]", code), path


def test_partitions_match_botocore():
    import botocore.session

    session = botocore.session.get_session()
    for partition in session.get_available_partitions():
        for region in session.get_available_regions("sagemaker", partition_name=partition):
            assert partition_of(region) == partition, region
    assert sagemaker_regions()


def test_the_app_adds_at_most_app_tags_to_any_resource(default_synth, all_features_synth):
    from tests.conftest import _tag_property

    for synth in (default_synth, all_features_synth):
        mine = set(synth.config.tags)
        for template in synth.templates.values():
            for resource in template["Resources"].values():
                prop = _tag_property(resource["Type"])
                tags = resource.get("Properties", {}).get(prop) if prop else None
                keys = list(tags) if isinstance(tags, dict) else [t.get("Key") for t in tags or []]
                added = [k for k in keys if k not in mine]
                assert len(added) <= APP_TAGS, (resource["Type"], json.dumps(added))


def test_no_framework_function_logs_the_events_it_gets(default_synth, all_features_synth):
    """aws-cdk-lib's provider framework logs each event with its resource properties (chart values included) at
    INFO; its functions must record FATAL only, and the waiter state machine no execution history."""
    framework = 0
    for synth in (default_synth, all_features_synth):
        for template in synth.templates.values():
            for resource in template["Resources"].values():
                props = resource.get("Properties", {})
                if resource["Type"] == "AWS::StepFunctions::StateMachine":
                    assert "LoggingConfiguration" not in props
                description = props.get("Description")
                if resource["Type"] == "AWS::Lambda::Function" and isinstance(description, str) and \
                        description.startswith("AWS CDK resource provider framework"):
                    framework += 1
                    assert props["LoggingConfig"]["ApplicationLogLevel"] == "FATAL", description
                    assert props["LoggingConfig"]["LogFormat"] == "JSON", description
    assert framework > 0
