"""MkDocs hook: turn the LaTeX of the pages into MathML when the site is built.

``pymdownx.arithmatex`` (generic mode) wraps every ``$...$`` / ``$$...$$`` of the Markdown in
``<span class="arithmatex">\\(...\\)</span>`` or ``<div class="arithmatex">\\[...\\]</div>``
and keeps Markdown out of it. This hook replaces each such element by the MathML that
``latex2mathml`` produces, so the built site shows mathematics with no script and no network
(browsers render MathML Core natively). A formula latex2mathml cannot read fails the build.
"""

from __future__ import annotations

import html
import re
from typing import Any

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

_INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
_BLOCK = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.S)


def _mathml(latex: str, display: str, page: Any) -> str:
    source = html.unescape(latex).strip()
    try:
        return convert(source, display=display)
    except Exception as exc:  # latex2mathml raises several exception types
        raise PluginError(f"{page.file.src_path}: cannot convert ${source}$ to MathML: "
                          f"{type(exc).__name__}: {exc}") from exc


def on_page_content(content: str, page: Any, **_: Any) -> str:
    content = _BLOCK.sub(
        lambda m: f'<div class="math-block">{_mathml(m.group(1), "block", page)}</div>', content)
    return _INLINE.sub(lambda m: _mathml(m.group(1), "inline", page), content)
