"""The hpctl commands, one module per family; `hpctl.cli` builds the parser from their `register` functions.

Every family module has `register(sub)`, which declares its commands with `options.add_command`, each with
its `handler(args, target, clients) -> exit code`. The options several commands share are in `options` and
`selection`, what commands say on stderr and ask on the terminal in `terminal`.
"""
