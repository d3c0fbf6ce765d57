"""Every deploy-time Lambda function of the app inside the VPC: AWS Control Tower's CT.LAMBDA.PR.3, which
``compliance: control_tower`` turns on (infra/guards/control_tower.py).

The rule (cdklabs-cdk-validator-cfnguard 0.0.62 rules/control-tower/cfn-guard/lambda/ct-lambda-pr-3.guard) wants
``VpcConfig.SubnetIds`` and ``VpcConfig.SecurityGroupIds`` each a non-empty list whose every entry is a
non-empty string or a ``Ref``/``Fn::GetAtt`` of a subnet (security group) *in the same template*
(``check_local_references``). A subnet of another stack reaches a template as ``Fn::ImportValue``, which fails it.
So a function outside the network's stack names its subnets by SSM dynamic references (plain strings in the
template, ``{{resolve:ssm:...}}``) to parameters the network writes (``HyperPodNetwork.deploy_time_subnet_ids``);
subnet IDs given as literals (a VPC adopted by ID) and subnets of the function's own stack are used as they are.
A template holds at most 60 dynamic references ("You can include up to 60 dynamic references in a stack
template", awsdocs/aws-cloudformation-user-guide@056fba84:doc_source/dynamic-references.md): functions use the
first ``DEPLOY_TIME_SUBNETS`` control-plane subnets, and :func:`place_functions_in_vpc` refuses a stack that
would need more references.

The functions are the app's own and those aws-cdk-lib builds for its constructs: the Provider framework's, the
scripts upload (BucketDeployment), AwsCustomResource's, CfnJson's and the S3 auto-delete provider. Some of those
are stack singletons whose logical ID aws-cdk-lib derives from the VPC they are given (BucketDeployment's), and
a custom resource cannot change its ServiceToken ("Modifying service token is not allowed", the CloudFormation
error aws/aws-pdk#501 describes), so each function is placed after it is built, by setting its ``VpcConfig``:
logical IDs and service tokens stay, and turning the switch on updates the functions in place.

A function given no VPC gets the stack's ``DeployTimeFunctions`` security group (HTTPS out, nothing in) and its
role the Lambda VPC attachment actions in a policy of their own (``_vpc_access_policy``); a function already in
the VPC (the chart installer's) keeps its group and role, and only its subnets are renamed. The functions reach
AWS's APIs and the custom resource response URL through the VPC's NAT gateways or endpoints; with
``s3_endpoint_policy: this_account`` the S3 endpoint admits the response PUT (HyperPodNetwork), and refuses what
the functions would read from a bucket of another account. DNS goes to the VPC's resolver, which security groups
do not filter; an adopted VPC whose DHCP options name DNS servers of its own needs port 53 to them as well.

Deleting a function, CloudFormation waits for Lambda to delete its network interfaces when the deploying role may
call ``ec2:DescribeNetworkInterfaces`` (CloudFormation's AWS::Lambda::Function VpcConfig page); the function's
policy is deleted after it. Unverified here (no AWS account): that CloudFormation and a Control Tower hook
resolve the SSM references in ``SubnetIds`` as they do in other properties, and that Lambda has deleted a
function's network interfaces before the cleanup phase of the update that turns the switch off deletes its policy
(Lambda may take up to 20 minutes, awslabs/aws-support-tools@1746c22d:Lambda/FindEniMappings).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnResource, Names, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IConstruct

from infra.constructs.common import acknowledge
from infra.errors import ConfigError

# The actions the Lambda service uses to attach a function to a VPC: AWSLambdaVPCAccessExecutionRole's (v3, less
# its CloudWatch Logs actions, which each function's role has for its own log group;
# https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AWSLambdaVPCAccessExecutionRole.html). The ENI
# does not exist before the call, so they take no resource ARN; the managed policy grants them on '*' too.
LAMBDA_VPC_ACCESS_ACTIONS = ["ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
                             "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses",
                             "ec2:UnassignPrivateIpAddresses"]
LAMBDA_VPC_ACCESS_REASON = ("Only the Lambda VPC attachment actions (ec2 ENI create/describe/delete/assign, "
                            "describe subnets) use '*': the ENI does not exist before the call, as in "
                            "AWSLambdaVPCAccessExecutionRole.")
# How many control-plane subnets a deploy-time function runs in: two AZs, and room for 30 functions in a template
# under CloudFormation's 60 dynamic references.
DEPLOY_TIME_SUBNETS = 2
MAX_DYNAMIC_REFERENCES = 60


def lambda_vpc_access_statement() -> iam.PolicyStatement:
    return iam.PolicyStatement(sid="LambdaVpcAccess", actions=LAMBDA_VPC_ACCESS_ACTIONS, resources=["*"])


def _is_function(node: IConstruct) -> bool:
    if isinstance(node, lambda_.CfnFunction):
        return True
    # aws-cdk-lib's CustomResourceProvider (CfnJson's, the S3 auto-delete provider) is a plain CfnResource.
    return type(node) is CfnResource and node.cfn_resource_type == "AWS::Lambda::Function"


def functions_under(reached: Sequence[IConstruct]) -> list[CfnResource]:
    """The Lambda functions under ``reached``, each once, in tree order."""
    found: list[CfnResource] = []
    for construct in reached:
        for node in construct.node.find_all():
            if _is_function(node) and not any(node is seen for seen in found):
                found.append(node)  # type: ignore[arg-type]
    return found


def place_functions_in_vpc(scope: Construct, reached: Sequence[IConstruct], *, vpc: ec2.IVpc,
                           subnet_ids: Sequence[str]) -> ec2.SecurityGroup | None:
    """Put every Lambda function under ``reached`` into ``subnet_ids`` of ``vpc``, as the module says; returns
    the security group made for the functions that had none (None when every function had one)."""
    functions = functions_under(reached)
    # aws-cdk-lib hands an SSM reference over as a token that resolves to the '{{resolve:ssm:...}}' string.
    resolved = [Stack.of(scope).resolve(subnet_id) for subnet_id in subnet_ids]
    dynamic = sum(1 for subnet_id in resolved if isinstance(subnet_id, str) and subnet_id.startswith("{{resolve:"))
    if dynamic and len(functions) * dynamic > MAX_DYNAMIC_REFERENCES:
        raise ConfigError("compliance", "control_tower",
                          f"{Stack.of(scope).stack_name} has {len(functions)} Lambda functions; in {dynamic} subnets "
                          f"of another stack they need {len(functions) * dynamic} SSM dynamic references, over "
                          f"CloudFormation's {MAX_DYNAMIC_REFERENCES} per template")
    security_group: ec2.SecurityGroup | None = None
    policies: dict[str, iam.CfnPolicy] = {}  # one per role, however many of its functions are placed
    for function in functions:
        function.add_property_override("VpcConfig.SubnetIds", list(subnet_ids))
        if isinstance(function, lambda_.CfnFunction) and function.vpc_config is not None:
            continue  # already in the VPC with a group and role of its own (HelmInstaller)
        if security_group is None:
            security_group = ec2.SecurityGroup(scope, "DeployTimeFunctions", vpc=vpc, allow_all_outbound=False,
                                               description="Deploy-time Lambda functions: HTTPS to AWS APIs")
            security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "AWS APIs, CloudFormation")
        function.add_property_override("VpcConfig.SecurityGroupIds", [security_group.security_group_id])
        # Created before the function; deleted after it, and, when the switch is turned off, in the update's
        # cleanup phase, after the function has left the VPC.
        function.node.add_dependency(_vpc_access_policy(scope, function, policies))
    return security_group


def _vpc_access_policy(scope: Construct, function: CfnResource,
                       policies: dict[str, iam.CfnPolicy]) -> iam.CfnPolicy:
    """The policy of its own that lets the function's role attach it to the VPC (one per role), built in
    ``scope``'s ``DeployTimeFunctionsVpcAccess``.

    Not a statement in the role's default policy: turning the switch off would then take the ENI actions away in
    the update phase, before the function leaves the VPC (the function depends on its policy), and Lambda could
    not delete its network interfaces (Client.UnauthorizedOperation on DeleteNetworkInterface, aws/aws-cdk#34400),
    which then keep the security group from being deleted. A policy resource the template drops is deleted in the
    cleanup phase instead, after every update. Not under the function's construct either: a construct's
    dependencies reach its children, so the policy would also wait for whatever the function waits for (the
    Grafana functions wait for other custom resources); built apart, it waits for its role alone."""
    owner = function.node.scope
    if isinstance(owner, lambda_.Function) and owner.role is not None:
        role: IConstruct = owner.role
        role_name = owner.role.role_name
    else:
        cfn_role = owner.node.try_find_child("Role") if isinstance(owner, Construct) else None
        if not (isinstance(owner, Construct) and isinstance(cfn_role, CfnResource)
                and cfn_role.cfn_resource_type == "AWS::IAM::Role"):
            raise ConfigError("compliance", "control_tower",
                              f"cannot find the role of Lambda function {function.node.path} to let it into the VPC")
        role, role_name = cfn_role, cfn_role.ref
    policy = policies.get(role.node.path)
    if policy is None:
        found = scope.node.try_find_child("DeployTimeFunctionsVpcAccess")
        container = found if isinstance(found, Construct) else Construct(scope, "DeployTimeFunctionsVpcAccess")
        policy = iam.CfnPolicy(container, Names.unique_id(role), policy_name="LambdaVpcAccess", roles=[role_name],
                               policy_document=iam.PolicyDocument(statements=[lambda_vpc_access_statement()]))
        acknowledge(policy, "AwsSolutions-IAM5[Resource::*]", LAMBDA_VPC_ACCESS_REASON)
        policies[role.node.path] = policy
    return policy
