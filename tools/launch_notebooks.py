"""Make the launch notebooks: each chapter as a plain Jupyter notebook for Colab, Binder and download.

A chapter is written in MyST Markdown (``book/<part>/<slug>.md``). Jupyter Book renders its roles and
directives; a plain notebook front end (Colab renders only CommonMark, and JupyterLab without
extensions) would show them raw: ``{glue:text}``, ``{cite}``, ``{literalinclude}`` paths, admonition
fences and visible solutions. This tool writes, next to each chapter, ``<slug>.ipynb``: the same cells
with the MyST rendered to plain Markdown.

* Equations get their chapter numbers as ``\\tag{n}``; ``{eq}``, ``{prf:ref}`` and ``{ref}`` become
  "(n)", "Theorem n", "Exercise n".
* ``{cite}`` becomes "(Author et al., year)"; ``{bibliography}`` the list of the chapter's references.
* ``{literalinclude}`` becomes the code itself (the ``:pyobject:`` or ``:lines:`` it names).
* Admonitions, theorems and exercises become block quotes; a solution becomes a ``<details>`` block
  (code-cell solutions keep their code cells under a "Solution" line).
* Glued numbers: a Markdown cell that quotes measured numbers and comes *after* the cell that computes
  them becomes a small code cell that renders the same text with the numbers filled in
  (:func:`iclr_lab.core.book.show_markdown`). Numbers quoted *before* they are computed (the box at the
  top) appear as ``[name]`` with a note, and glued charts are shown right after they are computed.
* The install cell points at the repository named in ``_config.yml`` and installs the ``widgets`` extra.
* The scale: the install cell sets ``SCALE`` from the environment variable ``ICLR_LAB_SCALE``
  (``book`` when unset) and every ``scale="book"`` of the chapter's code becomes ``scale=SCALE``.
  A reader who wants a quick run of the whole notebook (seconds; no claim is judged) starts Jupyter
  with ``ICLR_LAB_SCALE=smoke``; the launch tests do, since they check the environment, not the
  claims (the book build has asserted those).

Usage: ``python tools/launch_notebooks.py`` writes every chapter's notebook; ``--check`` exits 1 if any
is out of date (``tests/book/test_launch_notebooks.py`` runs the same check). Unknown MyST syntax is
an error, so a new directive gets a rendering rule before it reaches a reader.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

ROLE = re.compile(r"\{(?P<name>[a-z][a-z0-9:-]*)\}`(?P<body>[^`]*)`")
GLUE_ROLE = re.compile(r"\{glue(?::text|:md)?\}`[^`]*`")
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[^}]+)\}\s*(?P<arg>.*)$")
LABEL_TARGET = re.compile(r"^\(([^)]+)\)=\s*$")
ADMONITIONS = {"note": "Note", "tip": "Tip", "important": "Important", "warning": "Warning",
               "caution": "Caution", "attention": "Attention", "hint": "Hint", "seealso": "See also",
               "danger": "Danger", "error": "Error"}
PROOF_KINDS = {"theorem": "Theorem", "lemma": "Lemma", "proposition": "Proposition",
               "corollary": "Corollary", "definition": "Definition", "remark": "Remark",
               "example": "Example", "assumption": "Assumption", "conjecture": "Conjecture",
               "algorithm": "Algorithm", "proof": "Proof", "axiom": "Axiom",
               "criterion": "Criterion", "property": "Property", "observation": "Observation"}


def config() -> dict:
    """``_config.yml``, the one place that names the repository."""
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def repository_url() -> str:
    return str(config()["repository"]["url"]).rstrip("/")


def book_url() -> str:
    """Where GitHub Pages publishes the book (``https://<owner>.github.io/<repo>``)."""
    owner, repo = repository_url().split("github.com/")[1].split("/")[:2]
    return f"https://{owner}.github.io/{repo}"


def install_line() -> str:
    return f'%pip install --quiet "iclr-lab[widgets] @ git+{repository_url()}"'


#: Appended to the install cell: the scale the notebook's experiments run at.
SCALE_LINES = (
    "\n\n# The experiments run at book scale (what the book shows: up to a minute or two on one CPU\n"
    "# thread). For a quick run of the whole notebook (seconds; no claim is judged at that size),\n"
    "# start Jupyter with the environment variable ICLR_LAB_SCALE=smoke.\n"
    "import os\n\n"
    "SCALE = os.environ.get(\"ICLR_LAB_SCALE\", \"book\")")


# ---------------------------------------------------------------------------------------------
# citations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    key: str
    authors: tuple[str, ...]  # last names
    year: str
    text: str  # the full entry, formatted

    def cite(self) -> str:
        names = self.authors
        who = names[0] if len(names) == 1 else (
            f"{names[0]} and {names[1]}" if len(names) == 2 else f"{names[0]} et al.")
        return f"{who}, {self.year}"


def _plain(text: str) -> str:
    """BibTeX's LaTeX (``D\\'efossez``, ``{GPT}``) as plain Unicode text."""
    import codecs

    import latexcodec  # noqa: F401  (registers the "ulatex" codec; installed with pybtex)

    # a URL is shown as a link, not decoded as LaTeX (its "_" and "%" are not markup)
    parts = re.split(r"\\url\{([^}]*)\}", text)
    return "".join(f"<{part}>" if k % 2 else
                   codecs.decode(part, "ulatex").replace("{", "").replace("}", "")
                   for k, part in enumerate(parts))


def load_references(path: Path) -> dict[str, Reference]:
    from pybtex.database import parse_file

    refs = {}
    for key, entry in parse_file(str(path)).entries.items():
        people = entry.persons.get("author", [])
        # the "von" part (van der Vaart, de Finetti) belongs to the name a citation shows
        last = tuple(_plain(" ".join(p.prelast_names + p.last_names)) for p in people)
        full = _plain(", ".join(" ".join(p.first_names + p.middle_names + p.prelast_names + p.last_names
                                         + p.lineage_names) for p in people))
        f = entry.fields
        venue = _plain(f.get("booktitle") or f.get("journal") or f.get("howpublished")
                       or f.get("publisher") or f.get("note", ""))
        title = _plain(f.get("title", ""))
        url = f.get("url", "")
        text = f"{full}. *{title}*. " + ", ".join(x for x in (venue, f.get("year", "")) if x) + "."
        if url and url not in text:
            text += f" <{url}>"
        refs[key] = Reference(key, last, f.get("year", "n.d."), text)
    return refs


# ---------------------------------------------------------------------------------------------
# one chapter
# ---------------------------------------------------------------------------------------------


@dataclass
class Chapter:
    """What one chapter's roles refer to: numbers of labelled things, citations, glue positions."""

    path: Path
    refs: dict[str, Reference]
    numbers: dict[str, str] = field(default_factory=dict)  # label -> "(3)", "Theorem 1", ...
    cited: list[str] = field(default_factory=list)
    early_glue: list[str] = field(default_factory=list)  # glued objects shown before computed
    early_text: list[str] = field(default_factory=list)  # paragraphs quoting numbers before computed
    counters: dict[str, int] = field(default_factory=dict)

    def number(self, kind: str, label: str | None) -> int:
        self.counters[kind] = self.counters.get(kind, 0) + 1
        n = self.counters[kind]
        if label:
            self.numbers[label] = f"({n})" if kind == "equation" else f"{kind} {n}"
        return n


def _directives(lines: list[str]) -> list[tuple[str, str, dict[str, str], list[str]] | str]:
    """Split Markdown into plain lines and top-level directives ``(name, arg, options, body)``."""
    out: list[tuple[str, str, dict[str, str], list[str]] | str] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence = m.group("fence")
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        depth = 0
        body = []
        while j < len(lines):
            inner = FENCE.match(lines[j])
            if inner and inner.group("fence")[0] == fence[0] and len(inner.group("fence")) == len(fence):
                depth += 1
            elif close.match(lines[j]):
                if depth == 0:
                    break
                depth -= 1
            body.append(lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"unclosed directive {{{m.group('name')}}}")
        options = {}
        while body and body[0].startswith(":") and not body[0].startswith(":::"):
            key, _, value = body.pop(0)[1:].partition(":")
            options[key.strip()] = value.strip()
        while body and not body[0].strip():
            body.pop(0)
        out.append((m.group("name").strip(), m.group("arg").strip(), options, body))
        i = j + 1
    return out


def scan(chapter: Chapter, cells: list) -> None:
    """First pass: number every labelled equation, theorem and exercise in document order."""

    def walk(lines: list[str]) -> None:
        for item in _directives(lines):
            if isinstance(item, str):
                continue
            name, arg, options, body = item
            if name == "math":
                chapter.number("equation", options.get("label"))
            elif name.startswith("prf:") and name[4:] in PROOF_KINDS:
                if "nonumber" in options:  # unnumbered: a reference reads "Theorem", as in the book
                    if options.get("label"):
                        chapter.numbers[options["label"]] = PROOF_KINDS[name[4:]]
                else:
                    chapter.number(PROOF_KINDS[name[4:]], options.get("label"))
            elif name == "exercise":
                chapter.number("Exercise", options.get("label"))
            walk(body)

    for cell in cells:
        if cell.cell_type == "markdown":
            walk(cell.source.splitlines())


class Renderer:
    def __init__(self, chapter: Chapter) -> None:
        self.ch = chapter

    # roles ------------------------------------------------------------------------------------

    def roles(self, text: str) -> str:
        def role(m: re.Match[str]) -> str:
            name, body = m.group("name"), m.group("body")
            explicit = re.match(r"^(.*?)\s*<([^>]+)>$", body, flags=re.S)
            if name in ("cite", "cite:p", "cite:t", "cite:ps", "cite:ts"):
                keys = [k.strip() for k in body.split(",")]
                missing = [k for k in keys if k not in self.ch.refs]
                if missing:
                    raise ValueError(f"citation keys {missing} are not in references.bib")
                self.ch.cited += [k for k in keys if k not in self.ch.cited]
                if name.startswith("cite:t"):
                    return "; ".join(f"{self.ch.refs[k].cite().rsplit(', ', 1)[0]} "
                                     f"({self.ch.refs[k].year})" for k in keys)
                return "(" + "; ".join(self.ch.refs[k].cite() for k in keys) + ")"
            if name in ("eq", "prf:ref", "ref", "numref", "doc"):
                if explicit:
                    return explicit.group(1)
                if name == "doc":
                    return body
                if body not in self.ch.numbers:
                    if name == "ref":
                        return body
                    raise ValueError(f"{{{name}}}`{body}`: no such label in this chapter")
                return self.ch.numbers[body]
            if name == "math":
                return f"${body}$"
            if name.startswith("glue"):
                return m.group(0)  # handled by the caller
            if name in ("code", "samp", "kbd", "file", "command"):
                return f"`{body}`"
            if name in ("sub", "sup"):
                return f"<{name}>{body}</{name}>"
            raise ValueError(f"no plain-Markdown rendering for the role {{{name}}}")

        return ROLE.sub(role, text)

    # blocks -----------------------------------------------------------------------------------

    def block(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        for item in _directives(lines):
            if isinstance(item, str):
                if LABEL_TARGET.match(item):
                    continue
                out.append(self.roles(item))
                continue
            out += self.directive(*item)
        return out

    def directive(self, name: str, arg: str, options: dict[str, str], body: list[str]) -> list[str]:
        ch = self.ch
        if name == "math":
            label = options.get("label")
            tag = ch.numbers[label].strip("()") if label else None
            inner = "\n".join(body).strip().splitlines()
            inner[-1] += f" \\tag{{{tag}}}" if tag else ""
            return ["$$", *inner, "$$"]
        if name == "literalinclude":
            return ["```" + options.get("language", ""), *self.include(arg, options), "```"]
        if name in ("code", "code-block", "sourcecode"):
            return ["```" + arg, *body, "```"]
        if name == "admonition" or name in ADMONITIONS:
            title = arg if name == "admonition" else ADMONITIONS[name]
            return _quote([f"**{self.roles(title)}**", "", *self.block(body)])
        if name.startswith("prf:") and name[4:] in PROOF_KINDS:
            kind = PROOF_KINDS[name[4:]]
            label = options.get("label")
            head = ch.numbers.get(label, kind) if label else kind
            title = f" ({self.roles(arg)})" if arg else ""
            rendered = self.block(body)
            return _quote([f"**{head}{title}.** " + (rendered[0] if rendered else ""), *rendered[1:]])
        if name == "exercise":
            label = options.get("label")
            head = ch.numbers.get(label, "Exercise") if label else "Exercise"
            title = f" ({self.roles(arg)})" if arg else ""
            rendered = self.block(body)
            return _quote([f"**{head}{title}.** " + (rendered[0] if rendered else ""), *rendered[1:]])
        if name == "solution":
            target = ch.numbers.get(arg, "the exercise")
            return ["<details>", f"<summary><b>Solution to {target}</b> (click to open)</summary>", "",
                    *self.block(body), "", "</details>"]
        if name == "solution-start":
            return [f"**Solution to {ch.numbers.get(arg, 'the exercise')}.** The code cells below "
                    "are the solution; try the exercise before running them."]
        if name == "solution-end":
            return ["*(End of the solution.)*"]
        if name == "bibliography":
            return ["**References**", "", *[f"* {ch.refs[k].text}" for k in ch.cited]]
        if name in ("glue:", "glue", "glue:figure", "glue:any"):
            return [f"{{glue-object}}{arg}"]  # replaced once the cell's position is known
        if name in ("figure", "image"):
            alt = options.get("alt", "")
            return [f"![{alt}]({arg})", *self.block(body)]
        if name == "dropdown":
            return ["<details>", f"<summary><b>{self.roles(arg)}</b></summary>", "", *self.block(body),
                    "", "</details>"]
        raise ValueError(f"no plain-Markdown rendering for the directive {{{name}}}")

    def include(self, arg: str, options: dict[str, str]) -> list[str]:
        path = (self.ch.path.parent / arg).resolve()
        source = path.read_text()
        lines = source.splitlines()
        if "pyobject" in options:
            node = _find(ast.parse(source), options["pyobject"].split("."))
            start = min([node.lineno, *[d.lineno for d in getattr(node, "decorator_list", [])]])
            lines = lines[start - 1:node.end_lineno]
        if "lines" in options:
            keep: list[str] = []
            for part in options["lines"].split(","):
                lo, _, hi = part.partition("-")
                keep += lines[int(lo) - 1:int(hi or lo)]
            lines = keep
        if "dedent" in options:
            n = int(options["dedent"] or min(len(x) - len(x.lstrip()) for x in lines if x.strip()))
            lines = [x[n:] for x in lines]
        return lines


def _find(tree: ast.AST, names: list[str]) -> ast.AST:
    node: ast.AST = tree
    for name in names:
        for child in ast.iter_child_nodes(node):
            named = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if named and child.name == name:
                node = child
                break
        else:
            raise ValueError(f"literalinclude: no object {'.'.join(names)!r}")
    return node


def _quote(lines: list[str]) -> list[str]:
    return [f"> {line}" if line.strip() else ">" for line in lines]


# ---------------------------------------------------------------------------------------------
# the notebook
# ---------------------------------------------------------------------------------------------


def _is_glue_call(cell) -> bool:
    return cell.cell_type == "code" and "glue_report(" in cell.source


def render(md: Path) -> nbformat.NotebookNode:
    """The launch notebook of the chapter ``md`` (no outputs)."""
    nb = jupytext.read(md)
    refs = load_references(ROOT / "book" / "references.bib")
    chapter = Chapter(md, refs)
    scan(chapter, nb.cells)
    renderer = Renderer(chapter)
    glue_at = next((i for i, c in enumerate(nb.cells) if _is_glue_call(c)), None)
    rel = md.relative_to(ROOT).with_suffix("")
    cells = [nbformat.v4.new_markdown_cell(
        f"*This notebook is the chapter `{rel}.md` of the iclr_lab book, with its MyST markup "
        f"rendered for plain Jupyter and Colab. Read it typeset, with every output, at "
        f"<{book_url()}/{rel}.html>. Run the cells from the top: the first one installs `iclr_lab` "
        f"on Colab.*")]
    early_note_added = False
    first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    for i, cell in enumerate(nb.cells):
        tags = list(cell.metadata.get("tags", []))
        if cell.cell_type == "code":
            source = cell.source
            if i == first_code and 'find_spec("iclr_lab")' in source:
                source = re.sub(r"^\s*%pip install .*$", "    " + install_line(), source, flags=re.M)
                source += SCALE_LINES
            source = source.replace('scale="book"', "scale=SCALE")
            new = nbformat.v4.new_code_cell(source)
            if tags:
                new.metadata["tags"] = tags
            if "hide-input" in tags:
                new.metadata["jupyter"] = {"source_hidden": True}
            cells.append(new)
            if glue_at is not None and i == glue_at and chapter.early_text:
                cells.append(nbformat.v4.new_markdown_cell(
                    "The numbers quoted in [brackets] earlier in the notebook, now measured:"))
                cells += _live_markdown("\n\n".join(chapter.early_text))
            if glue_at is not None and i == glue_at and chapter.early_glue:
                names = ", ".join(f"`{k}`" for k in chapter.early_glue)
                cells.append(nbformat.v4.new_markdown_cell(
                    f"The book shows these results earlier on the page, where the text discusses "
                    f"them ({names}); here they appear once they are computed."))
                cells.append(nbformat.v4.new_code_cell(
                    "from iclr_lab.core.book import glued\n\n"
                    + "\n".join(f'display(glued("{k}"))' for k in chapter.early_glue)))
            continue
        text = "\n".join(renderer.block(cell.source.splitlines()))
        has_glue = bool(GLUE_ROLE.search(text)) or "{glue-object}" in text
        after = glue_at is not None and i > glue_at
        if has_glue and after:
            cells += _live_markdown(text)
            continue
        if has_glue:
            # the same paragraphs, to show again once measured (glued charts are displayed apart)
            chapter.early_text += [re.sub(r"^[> ]*\{glue-object\}\S+\n?", "", b, flags=re.M)
                                   for b in _blocks(text) if GLUE_ROLE.search(b)]
            for key in re.findall(r"\{glue-object\}(\S+)", text):
                if key not in chapter.early_glue:
                    chapter.early_glue.append(key)
            text = re.sub(r"\{glue-object\}(\S+)",
                          # a glued object may be a chart, a table or a widget: name it, not its kind
                          lambda m: ("*(The scorecard appears once the Reproduce section has run.)*"
                                     if m.group(1) == "scorecard" else
                                     f"*(`{m.group(1)}` is shown once the Reproduce section has run.)*"),
                          text)
            keys = [_glue_key(g) for g in GLUE_ROLE.findall(text)]
            text = GLUE_ROLE.sub(lambda m: f"[{_glue_key(m.group(0))}]", text)
            if not early_note_added and keys:
                text = _add_bracket_note(text, keys[0])
                early_note_added = True
        cells.append(nbformat.v4.new_markdown_cell(text))
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                    "language_info": {"name": "python"},
                    "colab": {"provenance": [], "toc_visible": True}}
    for k, cell in enumerate(out.cells):
        cell.id = f"{md.stem}-{k}"
    return out


def _add_bracket_note(text: str, key: str) -> str:
    """Explain the ``[name]`` placeholders right after the block that first uses them."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if f"[{key}]" in line)
    quoted = lines[first].startswith(">")
    end = first
    while end + 1 < len(lines) and (lines[end + 1].startswith(">") if quoted else lines[end + 1].strip()):
        end += 1
    note = ("*Numbers in [brackets] are measured by `reproduce()` in the Reproduce section below; "
            "the book fills them in.*")
    insert = [">", f"> {note}"] if quoted else ["", note]
    return "\n".join(lines[:end + 1] + insert + lines[end + 1:])


def _glue_key(role: str) -> str:
    return role.split("`")[1].split(":")[0]


def _blocks(text: str) -> list[str]:
    """``text`` split at blank lines that are not inside a code fence or a ``$$`` math block."""
    blocks: list[list[str]] = [[]]
    fence = math = False
    for line in text.splitlines():
        stripped = line.strip().lstrip("> ").strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
        elif stripped == "$$" and not fence:
            math = not math
        if not line.strip() and not fence and not math:
            blocks.append([])
        else:
            blocks[-1].append(line)
    return ["\n".join(b) for b in blocks if b]


def _live_markdown(text: str) -> list:
    """Markdown whose paragraphs quote measured numbers: each such paragraph becomes a small code cell
    that renders it with the numbers filled in; the other paragraphs stay Markdown (readable before
    the notebook runs, and in Colab's table of contents). Glued objects become displays."""
    cells: list = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            cells.append(nbformat.v4.new_markdown_cell("\n\n".join(pending)))
            pending.clear()

    for block in _blocks(text):
        glued_object = re.fullmatch(r"\{glue-object\}(\S+)", block.strip())
        if glued_object:
            flush()
            cells.append(nbformat.v4.new_code_cell(
                f'from iclr_lab.core.book import glued\n\nglued("{glued_object.group(1)}")'))
        elif GLUE_ROLE.search(block):
            flush()
            if '"""' in block:
                raise ValueError('a glued Markdown paragraph may not contain """')
            cell = nbformat.v4.new_code_cell(
                "# @title Text with the numbers measured above\n"
                "from iclr_lab.core.book import show_markdown\n\n"
                f'show_markdown(r"""{block.strip()}""")')
            cell.metadata["cellView"] = "form"
            cell.metadata["jupyter"] = {"source_hidden": True}
            cells.append(cell)
        else:
            pending.append(block)
    flush()
    return cells


def chapter_sources() -> list[Path]:
    """Every chapter of the registry that exists as a MyST file."""
    sys.path.insert(0, str(ROOT))
    from iclr_lab.core.registry import chapters

    return [ROOT / c.chapter_path for c in chapters(available_only=True) if (ROOT / c.chapter_path).exists()]


def dumps(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb, version=4) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a launch notebook is out of date")
    ap.add_argument("paths", nargs="*", type=Path, help="chapters (default: every chapter)")
    args = ap.parse_args()
    stale = []
    for md in [p.resolve() for p in args.paths] or chapter_sources():
        text = dumps(render(md))
        target = md.with_suffix(".ipynb")
        if args.check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target.relative_to(ROOT)))
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        sys.exit("out of date (run `python tools/launch_notebooks.py`): " + ", ".join(stale))


if __name__ == "__main__":
    main()
