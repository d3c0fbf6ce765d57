"""What every deploy-time handler shares: one ``Deadline`` for the time an invocation has, and one way of turning
any exception into the one-line reason CloudFormation shows (``errors``)."""
