"""Draw a dataflow from the command line: ``python -m timelypy.visualize module:attribute``.

``module:attribute`` names, by import string, either a
:class:`timelypy.flow.Dataflow` (drawn with
:func:`~timelypy.visualize.flow_graph`) or a function ``build(scope)`` that
builds a runtime dataflow (drawn with
:func:`~timelypy.visualize.runtime_graph`: built on one worker, not run).
The attribute may be a dotted path (``module:holder.flow``).  Options:

* ``--format mermaid`` (the default) or ``--format dot``
  (``TIMELYPY_VISUALIZE_FORMAT``);
* ``--output FILE`` writes the text to ``FILE`` instead of standard output;
* ``--traceback`` (or ``TIMELYPY_TRACEBACK=1``) prints the whole traceback
  of a failure.

Exit status: 0 when the picture was written; 1 when importing the module or
building the dataflow raised (one line names the error); 2 for a usage
error, a module that cannot be imported, a missing attribute, or an
attribute that is neither a ``Dataflow`` nor a ``build(scope)`` function
(the message names the problem).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from timelypy.errors import ConfigError
from timelypy.flow.dataflow import Dataflow
from timelypy.visualize.graph import Graph, flow_graph
from timelypy.visualize.render import to_dot, to_mermaid
from timelypy.visualize.runtime import runtime_graph

__all__ = ["main", "load_target"]

#: The renderer of each ``--format``.
FORMATS: dict[str, Callable[[Graph], str]] = {"mermaid": to_mermaid, "dot": to_dot}


def load_target(target: str) -> Dataflow | Callable[[Any], Any]:
    """Import ``module:attribute``; return the ``Dataflow`` or ``build(scope)`` function it names.

    Raises :class:`~timelypy.errors.ConfigError` naming what is wrong; an
    exception the module raises while it is imported (other than failing to
    find a module) propagates.

    >>> load_target("timelypy.visualize.graph")
    Traceback (most recent call last):
    ...
    timelypy.errors.ConfigError: 'timelypy.visualize.graph' is not MODULE:ATTRIBUTE ...
    >>> load_target("timelypy.visualize.graph:Graph")
    Traceback (most recent call last):
    ...
    timelypy.errors.ConfigError: 'timelypy.visualize.graph:Graph' is a class ...
    """
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        raise ConfigError(
            f"{target!r} is not MODULE:ATTRIBUTE: name a module and, after a colon, a "
            "Dataflow or a build(scope) function in it (e.g. examples.visualize_flow:flow)"
        )
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as `python -m` has it
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module_name!r} (from {target!r}): {exc}") from exc
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ConfigError(
                f"module {module_name!r} has no attribute {attribute!r} (from {target!r})"
            ) from None
    if isinstance(value, Dataflow):
        return value
    expected = "a timelypy.flow.Dataflow or a function build(scope)"
    if isinstance(value, type):
        raise ConfigError(f"{target!r} is a class ({value.__name__}), not {expected}")
    if not callable(value):
        raise ConfigError(f"{target!r} is {value!r} ({type(value).__name__}), not {expected}")
    build: Callable[[Any], Any] = value
    try:
        signature = inspect.signature(build)
    except (TypeError, ValueError):
        return build  # no signature to check (some built-ins); calling it will tell
    try:
        signature.bind(object())
    except TypeError as exc:
        raise ConfigError(
            f"{target!r} cannot be called as build(scope) ({exc}); name {expected}"
        ) from None
    return build


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m timelypy.visualize",
        description=(
            "Print a picture of a timelypy.flow Dataflow, or of the runtime dataflow a "
            "build(scope) function builds (built on one worker, not run), as Mermaid or "
            "Graphviz DOT text."
        ),
    )
    parser.add_argument(
        "target", metavar="MODULE:ATTRIBUTE", help="a Dataflow or a build(scope) function"
    )
    parser.add_argument(
        "--format",
        choices=sorted(FORMATS),
        default=os.environ.get("TIMELYPY_VISUALIZE_FORMAT") or "mermaid",
        help="default: mermaid (TIMELYPY_VISUALIZE_FORMAT)",
    )
    parser.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument(
        "--traceback",
        action="store_true",
        default=bool(os.environ.get("TIMELYPY_TRACEBACK")),
        help="print the whole traceback of a failure (TIMELYPY_TRACEBACK=1)",
    )
    return parser


def _failed(args: argparse.Namespace, what: str, exc: Exception) -> int:
    """Report a failure of the user's code in one line (or its traceback); return 1."""
    if args.traceback:
        traceback.print_exc()
    else:
        print(
            f"timelypy.visualize: {what} {args.target} failed: {type(exc).__name__}: {exc}\n"
            "  (--traceback or TIMELYPY_TRACEBACK=1 for the whole traceback)",
            file=sys.stderr,
        )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit:  # argparse printed the usage error (or --help)
        return exit.code if isinstance(exit.code, int) else 2
    try:
        value = load_target(args.target)
    except ConfigError as exc:
        print(f"timelypy.visualize: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        return _failed(args, "importing", exc)
    try:
        if isinstance(value, Dataflow):
            graph = flow_graph(value, name=args.target.partition(":")[2])
        else:
            graph = runtime_graph(value)
    except Exception as exc:
        return _failed(args, "building", exc)
    text = FORMATS[args.format](graph) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        print(f"timelypy.visualize: cannot write {args.output!r}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
