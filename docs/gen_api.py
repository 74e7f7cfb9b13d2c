"""Write docs/api.md from the docstrings of the public API.

    python docs/gen_api.py           # rewrite docs/api.md
    python docs/gen_api.py --check   # exit 1 if docs/api.md is not what this would write

The public API is what ``__all__`` lists in ``actorrt``, ``actorrt.util``, ``actorrt.tune``, ``actorrt.train``
and ``actorrt.train.torch``. For each name: its signature, its docstring, and for a class
its public methods and properties (those defined in actorrt, not inherited from Python).
Google-style sections (``Args:``, ``Returns:``, ``Raises:``, ``Attributes:``) become lists;
reStructuredText literals (``x``) and roles (:class:`X`) become Markdown code; a ``::``
paragraph's indented block becomes a ``text`` code block (the docs' tests run only
``python`` blocks, and these are fragments). The output depends only on the source, so a
test regenerates it and compares.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

MODULES = ["actorrt", "actorrt.util", "actorrt.tune", "actorrt.train", "actorrt.train.torch"]
OUT = Path(__file__).resolve().parent / "api.md"
SECTIONS = {"Args", "Arguments", "Attributes", "Raises", "Returns", "Yields", "Example",
            "Examples", "Note", "Notes"}
LISTED = {"Args", "Arguments", "Attributes", "Raises"}
# Classes whose members users call are a few among many the package's own layers use
# (the runtime's hooks for its roles, worker processes and the broker): only these are listed.
SHOWN = {
    "actorrt.Runtime": {
        "loop", "shutdown", "cluster_resources", "available_resources", "pending_requests",
        "get_actor", "live_actors", "relayed",
    },
}

# Members whose names are public because other modules of the package call them, not
# because users should: the option plumbing. Users reach the same features through the
# documented functions.
HIDDEN = {
    "actorrt.ActorOptions": {"merged", "own_resources", "portable", "runs_in_process",
                             "needs_grant"},
    "actorrt.AskHandle": {"result_blocking", "target_id"},
    "actorrt.BundleRef": {"target"},
    "actorrt.PlacementGroup": {"target"},
}


class _Raw:
    """An annotation shown as written (annotations are strings under PEP 563)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _annotation(value: Any) -> Any:
    if value is inspect.Parameter.empty:
        return value
    return _Raw(value if isinstance(value, str) else inspect.formatannotation(value))


def signature(obj: Any, name: str) -> str | None:
    """``name(params) -> result``, with annotations as written; ``None`` if there is none."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = [p.replace(annotation=_annotation(p.annotation)) for p in sig.parameters.values()]
    if isinstance(obj, type):  # a class: its constructor returns the instance
        sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    else:
        sig = sig.replace(parameters=params,
                          return_annotation=_annotation(sig.return_annotation))
    text = f"{name}{sig}"
    return re.sub(r" at 0x[0-9a-f]+", "", text)  # default values' reprs stay the same


def inline(text: str) -> str:
    """reStructuredText inline markup to Markdown."""
    text = re.sub(r":(?:class|meth|func|attr|mod|exc|data|obj):`~?([^`]+)`", r"`\1`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text)


def render_docstring(doc: str) -> list[str]:
    """A Google-style docstring as Markdown lines."""
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        header = re.fullmatch(r"(\w+):\s*", line)
        if header and header[1] in SECTIONS:
            section = header[1]
            i += 1
            body: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                body.append(lines[i])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            out += _section(section, body)
            continue
        if line.rstrip().endswith("::"):
            lead = line.rstrip()[:-2].rstrip()
            if lead:
                out.append(inline(lead + ":"))
            i += 1
            i, block = _indented(lines, i)
            out += ["", "```text", *block, "```", ""]
            continue
        out.append(inline(line))
        i += 1
    return out


def _indented(lines: list[str], i: int) -> tuple[int, list[str]]:
    """The indented block starting at ``lines[i]`` (after blank lines), dedented."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    block: list[str] = []
    while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
        block.append(lines[i])
        i += 1
    while block and not block[-1].strip():
        block.pop()
    width = min((len(b) - len(b.lstrip()) for b in block if b.strip()), default=0)
    return i, [b[width:] for b in block]


def _section(section: str, body: list[str]) -> list[str]:
    width = min((len(b) - len(b.lstrip()) for b in body if b.strip()), default=0)
    body = [b[width:] for b in body]
    if section not in LISTED:
        if section.startswith("Example"):
            return [f"**{section}:**", "", "```text", *body, "```", ""]  # a fragment
        return [f"**{section}:** " + inline(" ".join(b.strip() for b in body if b.strip())), ""]
    items: list[str] = []
    for b in body:
        if b and not b.startswith(" "):
            items.append(b.strip())
        elif b.strip() and items:
            items[-1] += " " + b.strip()
    out = [f"**{section}:**", ""]
    for item in items:
        key, sep, rest = item.partition(":")
        if sep and re.fullmatch(r"[\w.*]+(?:, [\w.*]+)*(?: \([^)]*\))?", key.strip()):
            out.append(f"- `{key.strip()}`: {inline(rest.strip())}")
        else:
            out.append(f"- {inline(item)}")
    return [*out, ""]


def members(cls: type, qualified: str) -> list[tuple[str, Any]]:
    """Public methods and properties a class defines in actorrt, in source order."""
    field_names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) \
        else set()
    seen: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if not getattr(klass, "__module__", "").startswith("actorrt"):
            continue
        for key, value in vars(klass).items():
            if key.startswith("_") or key in field_names or key in HIDDEN.get(qualified, ()):
                continue
            if qualified in SHOWN and key not in SHOWN[qualified]:
                continue
            if isinstance(value, property | staticmethod | classmethod) or inspect.isfunction(
                value
            ):
                seen[key] = value
    return list(seen.items())


def describe_member(owner: str, key: str, value: Any) -> list[str]:
    if isinstance(value, property):
        head = f"`{owner}.{key}` (property)"
        doc = inspect.getdoc(value.fget) if value.fget else None
    else:
        func = value.__func__ if isinstance(value, staticmethod | classmethod) else value
        prefix = "async " if inspect.iscoroutinefunction(func) else ""
        sig = signature(func, key)
        if sig and _takes_self(func):
            sig = re.sub(r"\((?:self|cls)(?:, |(?=\)))", "(", sig, count=1)
        head = f"`{prefix}{owner}.{sig or key}`"
        doc = inspect.getdoc(func)
    return [f"- {head}" + (f": {inline(_first_paragraph(doc))}" if doc else "")]


def _takes_self(func: Any) -> bool:
    params = list(inspect.signature(func).parameters)
    return bool(params) and params[0] in ("self", "cls")


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.split("\n\n")[0].split())


def describe(module: str, name: str, obj: Any) -> list[str]:
    qualified = f"{module}.{name}"
    out = [f"### `{qualified}`", ""]
    if inspect.ismodule(obj):
        out += [f"Submodule. {inline(_first_paragraph(inspect.getdoc(obj) or ''))}", ""]
        return out
    kind = "exception" if isinstance(obj, type) and issubclass(obj, BaseException) else (
        "class" if isinstance(obj, type) else "function")
    sig = None if kind == "exception" else signature(obj, qualified)
    if kind == "exception":
        bases = ", ".join(b.__name__ for b in obj.__bases__)
        out += [f"*exception* `{qualified}({bases})`", ""]
    elif sig:
        prefix = "async " if inspect.iscoroutinefunction(obj) else ""
        out += [f"*{kind}* `{prefix}{sig}`", ""]
    doc = inspect.getdoc(obj)
    if doc and not (kind != "function" and doc == inspect.getdoc(type)):
        out += [*render_docstring(doc), ""]
    if isinstance(obj, type) and kind == "class":
        listed = [describe_member(name, k, v) for k, v in members(obj, qualified)]
        if listed:
            out += ["**Members:**", ""] + [line for item in listed for line in item] + [""]
    return out


def generate() -> str:
    out = [
        "# API reference",
        "",
        "<!-- Generated by docs/gen_api.py from the docstrings; do not edit by hand. -->",
        "",
        "Everything `__all__` exports from `actorrt`, `actorrt.tune`, `actorrt.train` and",
        "`actorrt.train.torch`, with signatures and docstrings. The guides are in",
        "[index.md](index.md).",
        "",
    ]
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        names = list(module.__all__)
        out += [f"- [`{module_name}`](#{module_name.replace('.', '')}): {len(names)} names"]
    out.append("")
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        out += [f"## {module_name}", ""]
        summary = _first_paragraph(inspect.getdoc(module) or "")
        if summary:
            out += [inline(summary), ""]
        for name in sorted(module.__all__, key=lambda n: (not n[0].isupper(), n.lower())):
            out += describe(module_name, name, getattr(module, name))
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
