"""Griffe extension: graphemb's docstrings are NumPy style with a few reStructuredText
habits that Markdown does not know. Before mkdocstrings renders them:

* a Sphinx role (``:class:`~graphemb.nn.GraphSAGE```, ``:func:`save```, ``:data:`X```)
  becomes inline code of the name as Sphinx would show it (``GraphSAGE``, ``save``, ``X``);
* a section titled ``Example`` (underlined) is read as NumPy's ``Examples``;
* a paragraph ending in ``::`` (a literal block follows) ends in ``:``, as Sphinx shows it.

Nothing in the package changes; the docstrings stay readable with ``help()``.
"""

from __future__ import annotations

import re

from griffe import Extension, Object

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|const):`(~?)([^`]+)`")
_EXAMPLE = re.compile(r"^(\s*)Example\n(\s*)-------\s*$", re.MULTILINE)
_LITERAL = re.compile(r"(\S)::$", re.MULTILINE)


def _role(match: re.Match) -> str:
    short, target = match.group(1), match.group(2)
    if "<" in target and target.endswith(">"):  # :func:`title <target>`
        return f"`{target.split('<')[0].strip()}`"
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def markdown_docstring(text: str) -> str:
    """``text`` in Markdown (see the module docstring)."""
    text = _LITERAL.sub(r"\1:", _ROLE.sub(_role, text))
    return _EXAMPLE.sub(lambda m: f"{m.group(1)}Examples\n{m.group(2)}--------", text)


class MarkdownDocstrings(Extension):
    """Applies :func:`markdown_docstring` to every docstring griffe reads."""

    def on_instance(self, *, obj: Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
