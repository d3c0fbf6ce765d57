"""The hpctl commands, one module per family; `hpctl.cli` builds the parser from their `register` functions.

Every family module has `register(sub)`, which adds its commands to the subparsers of `hpctl` and sets
each one's `handler(args, target, clients) -> exit code` (and `need_config`/`need_cluster` when they differ
from the defaults). The options several commands share are in `options` and `selection`, what commands say
on stderr and ask on the terminal in `terminal`.
"""
