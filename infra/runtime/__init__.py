"""Code that runs at deploy time in Lambda, behind the custom resources: the chart installer and the Grafana
content provisioner, sharing one deadline and one way of turning a failure into a CloudFormation reason."""
