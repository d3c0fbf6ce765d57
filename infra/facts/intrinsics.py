"""CloudFormation values with intrinsic functions, read as text: the one rendering nag finding names and rules use."""

from __future__ import annotations

import json
from typing import Any

# What an intrinsic this module does not know (Fn::If, Fn::Select, ...) renders as.
UNKNOWN = "<?>"


def render(value: Any) -> str:
    """``value`` as a string with placeholders: ``{"Ref": "B"}`` -> ``<B>``, ``Fn::GetAtt`` -> ``<B.Arn>``,
    ``Fn::Join`` joined, ``Fn::Sub`` its template, ``Fn::ImportValue`` -> ``<import:name>``; numbers and booleans
    as JSON. These are the forms cdk-nag prints in finding IDs, e.g. ``Resource::<BucketAB12.Arn>/prefix/*``.

    Anything else, or a malformed argument, renders as ``UNKNOWN`` rather than raising: the HyperPod rules read
    whole templates and must judge any value; a caller that needs an exact text checks for ``UNKNOWN``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref" and isinstance(argument, str):
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            parts = argument if isinstance(argument, list) else str(argument).split(".", 1)
            return f"<{'.'.join(str(part) for part in parts)}>"
        if function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
            separator, parts = argument
            return str(separator).join(render(part) for part in (parts if isinstance(parts, list) else [parts]))
        if function == "Fn::Sub":
            return render(argument[0] if isinstance(argument, list) and argument else argument)
        if function == "Fn::ImportValue":
            return f"<import:{render(argument)}>"
    return UNKNOWN
