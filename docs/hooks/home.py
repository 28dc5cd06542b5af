"""An mkdocs hook: the site opens on Getting started, which keeps its own file name in docs/."""

from __future__ import annotations

from typing import Any

HOME = "getting-started.md"


def on_files(files: Any, config: Any) -> Any:
    """Build HOME as the site's index.html: mkdocs makes only index.md the home, whatever the nav's order."""
    home = files.get_file_from_path(HOME)
    home.dest_uri = "index.html"
    home.url = "./" if config["use_directory_urls"] else "index.html"
    return files
