"""What to do about a package that is not installed, said as it applies where the bot runs.

requirements.txt installs every provider and extra the docs name, so a package is missing only in an older or
hand-made environment, or for a provider Parley does not ship (Bedrock, Cohere, ...). On Railway the fix is a
change to the repository, since its build installs requirements.txt and nothing else; elsewhere it is `pip`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# Set in every Railway deployment: https://docs.railway.com/reference/variables#railway-provided-variables
RAILWAY_VARIABLE = "RAILWAY_PROJECT_ID"
# pydantic-ai's own ImportErrors name the optional group that installs what is missing.
_LIBRARY_HINT = re.compile(r'pip install "([^"]+)"')


def missing_package_fix(error: ImportError, environ: Mapping[str, str] = os.environ) -> str:
    """How to install what `error` says is missing: a `pip install`, or on Railway the change to requirements.txt."""
    requirement = missing_requirement(error)
    if requirement is None:
        return f"install what is missing ({error})"
    if environ.get(RAILWAY_VARIABLE):
        return (
            f'add "{requirement}" to pyproject.toml\'s dependencies, run .ci/compile-requirements and deploy the new'
            " requirements.txt (a Railway build installs that file only)"
        )
    return f'pip install "{requirement}"'


def missing_requirement(error: ImportError) -> str | None:
    """What to install: pydantic-ai's optional group when its message names one, else the module not found.

    pydantic-ai re-raises a bare ImportError whose own `name` is None; the module not found is its cause's.
    """
    hint = _LIBRARY_HINT.search(str(error))
    if hint:
        return hint.group(1)
    cause = error.__cause__ if isinstance(error.__cause__, ImportError) else error
    return cause.name.partition(".")[0] if cause.name else None
