"""The Python code blocks of README.md and docs/*.md run, so the docs cannot rot.

Every fenced block opened with a python fence runs unless the line just above it is an
HTML comment ``<!-- not-run: REASON -->`` (invisible when rendered). The blocks of one file
run in order, in one fresh interpreter and one namespace, as a reader would paste them
into a session: a later block may use what an earlier one defined. A block with a
top-level ``await`` (or ``async with``) runs as a coroutine on its own event loop, as in
a notebook. Each file runs as ``python tests/project/test_docs.py FILE``, in a temporary folder.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import subprocess
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")

# Blocks skipped here rather than marked in their page (its owners are editing it):
# (file, how the block's first line starts) -> reason. Each must still match a block
# (tested below); a `<!-- not-run: ... -->` marker in the page should replace it.
EXEMPT: dict[tuple[str, str], str] = {}


def exemption(rel: str, first_line: str) -> str | None:
    for (page, start), reason in EXEMPT.items():
        if page == rel and first_line.startswith(start):
            return reason
    return None


class Block(NamedTuple):
    path: Path
    line: int  # 1-based line of the first line of code
    code: str
    skip: str | None  # the reason it does not run, or None


def blocks(path: Path) -> list[Block]:
    """The python blocks of a Markdown file, with their skip reasons."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, lang, start = len(opening["indent"]), opening["lang"], i + 1
        i += 1
        while i < len(lines) and not re.match(r"^ *```\s*$", lines[i]):
            i += 1
        body = "\n".join(line[indent:] for line in lines[start:i]) + "\n"
        i += 1
        if lang != "python":
            continue
        previous = next((lines[j] for j in range(start - 2, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(previous)
        skip = marker["reason"] if marker else None
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        first = body.splitlines()[0] if body.strip() else ""
        skip = skip or exemption(rel, first)
        found.append(Block(path, start + 1, body, skip))
    return found


def run_file(path: Path) -> None:
    """Run the file's blocks in order in one namespace (called in a fresh interpreter)."""
    main = types.ModuleType("__main__")  # blocks define classes in __main__, as a script does
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    for block in blocks(path):
        if block.skip is not None:
            continue
        where = f"{path.relative_to(ROOT)}:{block.line}"
        source = "\n" * (block.line - 1) + block.code  # tracebacks show the page's lines
        try:
            code = compile(source, where, "exec", flags=flags)
            if code.co_flags & inspect.CO_COROUTINE:
                asyncio.run(eval(code, main.__dict__))
            else:
                exec(code, main.__dict__)
        except BaseException:
            traceback.print_exc()
            print(f"\nthe block at {where} failed", file=sys.stderr)
            sys.exit(1)


RUNNABLE = [p for p in DOCS if any(b.skip is None for b in blocks(p))]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("doc", RUNNABLE, ids=[p.relative_to(ROOT).as_posix() for p in RUNNABLE])
def test_page_blocks_run(doc: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ACTORRT_NVML_BACKEND", "CUDA_VISIBLE_DEVICES")}
    # Tune's automatic TensorBoard logger imports tensorboardX and torch: seconds per page
    # on a small machine, for files no page looks at.
    env["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(
            [sys.executable, __file__, str(doc)],
            capture_output=True, text=True, timeout=150, cwd=cwd, env=env,
        )
    assert done.returncode == 0, f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_most_blocks_run() -> None:
    every = [b for p in DOCS for b in blocks(p)]
    skipped = [b for b in every if b.skip is not None]
    assert len(every) >= 20
    assert len(skipped) * 3 <= len(every), [(b.path.name, b.line, b.skip) for b in skipped]


def test_skips_say_why_and_exemptions_still_apply() -> None:
    for path in DOCS:
        for block in blocks(path):
            assert block.skip is None or len(block.skip) >= 10, (path, block.line)
    for page, start in EXEMPT:
        firsts = [b.code.splitlines()[0] for b in blocks(ROOT / page)]
        assert sum(f.startswith(start) for f in firsts) == 1, (page, start, firsts)


def test_the_parser_sees_markers_and_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- not-run: needs a GPU cluster -->\n"
        "```python\nraise SystemExit(1)\n```\n\n```sh\nls\n```\n\n"
        "- a list item:\n  ```python\n  y = x + 1\n  ```\n",
        encoding="utf-8",
    )
    assert [(b.line, b.code, b.skip) for b in blocks(page)] == [
        (4, "x = 1\n", None),
        (9, "raise SystemExit(1)\n", "needs a GPU cluster"),
        (18, "y = x + 1\n", None),
    ]


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_resolve() -> None:
    broken = []
    for page in DOCS:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_index_lists_every_page_and_example() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    linked = set(LINK.findall(index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md") if p.name != "index.md"}
    examples = {f"../examples/{p.name}" for p in (ROOT / "examples").glob("*.py")
                if not p.name.startswith("_")}
    assert pages <= linked, pages - linked
    assert examples <= linked, examples - linked


def test_api_md_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_api.py"), "--check"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


if __name__ == "__main__":
    run_file(Path(sys.argv[1]).resolve())
