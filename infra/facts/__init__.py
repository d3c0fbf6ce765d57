"""Facts about AWS that the rest of the library reads, each with its source: the instance catalog, AWS's lists
(regions, instance types), resource names AWS fixes, CloudFormation intrinsics, the IP plan."""
