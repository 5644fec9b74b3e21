"""Command modules that belong to no single package (``features``,
``report``). Each exposes ``add_parser(subparsers)`` and ``run(args)``,
and :data:`agl_fast.cli.COMMANDS` names it. A command that drives one
package lives in that package's ``cli`` module instead (``curate`` in
:mod:`agl_fast.pipeline.cli`, ``evaluate`` in :mod:`agl_fast.evaluate.cli`).
"""
