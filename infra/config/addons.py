"""The `addons` section: EKS add-ons installed on the cluster once the HyperPod nodes run."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from infra.config.base import StrictModel, refusal

# The EKS add-ons each key installs (the one list of their names: the constructs in infra/addons.py and hpctl
# preflight read it). Names: AWS's Terraform modules, awslabs/awsome-distributed-training@
# 0edaf1526bc47185ce5f827100416f99bd7b69e1:1.architectures/7.sagemaker-hyperpod-eks/terraform-modules/hyperpod-eks-tf/
# modules/hyperpod_training_operator/main.tf and modules/hyperpod_cluster/cert_manager.tf (cert-manager, "required
# for HPTO"); https://docs.aws.amazon.com/eks/latest/userguide/mountpoint-for-s3-add-on.html for the S3 driver.
TRAINING_OPERATOR_ADDON = "amazon-sagemaker-hyperpod-training-operator"
CERT_MANAGER_ADDON = "cert-manager"
S3_CSI_ADDON = "aws-mountpoint-s3-csi-driver"

# A general purpose bucket's ARN: Mountpoint's IAM example grants s3:ListBucket on exactly this form
# (awslabs/mountpoint-s3@58817cab2fc3020a422d8aa14049a86b296f4498:doc/CONFIGURATION.md, "IAM permissions").
# Directory buckets (s3express) take other actions and are not offered here.
S3_BUCKET_ARN = r"^arn:aws[a-z-]*:s3:::[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


class TrainingOperatorConfig(StrictModel):
    """The HyperPod training operator (EKS add-on amazon-sagemaker-hyperpod-training-operator) and cert-manager."""

    enabled: bool = False


class S3CsiConfig(StrictModel):
    """The Mountpoint for Amazon S3 CSI driver (EKS add-on aws-mountpoint-s3-csi-driver), reaching these buckets."""

    enabled: bool = False
    bucket_arns: list[Annotated[str, Field(max_length=2048)]] = []

    @field_validator("bucket_arns")
    @classmethod
    def _arns(cls, value: list[str]) -> list[str]:
        for i, arn in enumerate(value):
            if not re.match(S3_BUCKET_ARN, arn):
                raise refusal(str(i), arn, "not the ARN of a general purpose S3 bucket (arn:aws:s3:::bucket-name, "
                                           "no object path)")
            if arn in value[:i]:
                raise refusal(str(i), arn, "listed twice")
        return value

    @model_validator(mode="after")
    def _buckets(self) -> S3CsiConfig:
        if self.enabled and not self.bucket_arns:
            raise refusal("bucket_arns", None, "list the buckets the driver may mount (its role reaches only them)")
        return self


class AddonsConfig(StrictModel):
    training_operator: TrainingOperatorConfig = TrainingOperatorConfig()
    # task_governance: the HyperPod task governance add-on (added in its own change).
    s3_csi: S3CsiConfig = S3CsiConfig()

    def eks_addons(self) -> list[str]:
        """The EKS add-ons this section installs, in install order."""
        names = []
        if self.training_operator.enabled:
            names += [CERT_MANAGER_ADDON, TRAINING_OPERATOR_ADDON]
        if self.s3_csi.enabled:
            names.append(S3_CSI_ADDON)
        return names
