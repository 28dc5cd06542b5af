"""Tests for what a package not installed, or a model string pydantic-ai does not know, tells the deployer."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from ops.packages import RAILWAY_VARIABLE, missing_package_fix
from ops.preflight import model_problem
from tools import ToolConfigError, load_mcp_servers, web_search_function

ON_RAILWAY = {RAILWAY_VARIABLE: "a1b2c3"}


def library_import_error(message: str, missing_module: str) -> ImportError:
    """An ImportError as pydantic-ai raises one: its own message, the module not found as its cause."""
    try:
        try:
            raise ModuleNotFoundError(f"No module named '{missing_module}'", name=missing_module)
        except ModuleNotFoundError as cause:
            raise ImportError(message) from cause
    except ImportError as error:
        return error


GROQ_MISSING = library_import_error(
    "Please install the `groq` package to use the Groq provider, you can use the `groq` optional group — `pip install"
    ' "pydantic-ai-slim[groq]"`',
    "groq",
)


def test_locally_the_fix_is_the_librarys_own_pip_install() -> None:
    """Outside Railway the fix is pydantic-ai's own hint: the optional group that installs the package."""
    assert missing_package_fix(GROQ_MISSING, environ={}) == 'pip install "pydantic-ai-slim[groq]"'


def test_on_railway_the_fix_is_a_change_to_requirements_txt_not_pip() -> None:
    """On Railway, whose build installs requirements.txt only, the fix names the file to change, never `pip`."""
    fix = missing_package_fix(GROQ_MISSING, environ=ON_RAILWAY)
    assert "pip install" not in fix
    assert fix.startswith('add "pydantic-ai-slim[groq]" to pyproject.toml\'s dependencies, run .ci/compile-')


def test_without_the_librarys_hint_the_missing_module_is_named_never_none() -> None:
    """An ImportError whose own name is None (a re-raise) names its cause's module: no "(None is missing)"."""
    error = library_import_error("Please install something", "ddgs.ddgs")
    assert missing_package_fix(error, environ={}) == 'pip install "ddgs"'
    assert "None" not in missing_package_fix(ImportError("nothing known"), environ={})


def test_a_missing_web_search_package_is_one_line_naming_the_setting_and_the_fix(make_settings, monkeypatch) -> None:
    """WEB_SEARCH=duckduckgo without its package: one line naming the setting and pydantic-ai's optional group."""
    monkeypatch.delenv(RAILWAY_VARIABLE, raising=False)
    monkeypatch.setitem(sys.modules, "ddgs", None)
    monkeypatch.setitem(sys.modules, "ddgs.ddgs", None)
    monkeypatch.setitem(sys.modules, "duckduckgo_search", None)
    monkeypatch.delitem(sys.modules, "pydantic_ai.common_tools.duckduckgo", raising=False)
    with pytest.raises(ToolConfigError) as raised:
        web_search_function(make_settings(web_search="duckduckgo"))
    assert str(raised.value) == (
        'WEB_SEARCH=duckduckgo needs a package that is not installed: pip install "pydantic-ai-slim[duckduckgo]"'
    )


def test_a_missing_mcp_client_on_railway_names_the_requirements_change(monkeypatch, tmp_path) -> None:
    """MCP_SERVERS without the MCP client, on Railway: one line naming the setting, the file and what to change."""
    monkeypatch.setenv(RAILWAY_VARIABLE, "a1b2c3")
    monkeypatch.setitem(sys.modules, "fastmcp", None)
    monkeypatch.setitem(sys.modules, "fastmcp.client", None)
    monkeypatch.delitem(sys.modules, "pydantic_ai.mcp", raising=False)
    with pytest.raises(ToolConfigError) as raised:
        load_mcp_servers(str(tmp_path / "servers.json"), 30)
    assert str(raised.value).startswith(
        f"MCP_SERVERS ({tmp_path / 'servers.json'}) needs a package that is not installed:"
        ' add "pydantic-ai-slim[mcp]" to pyproject.toml\'s dependencies'
    )


@pytest.mark.parametrize(
    "model", ["google:gemini-2.5-flash", "groq:llama-3.3-70b-versatile", "mistral:mistral-small-latest"]
)
def test_the_documented_providers_are_installed(make_settings, monkeypatch, model: str) -> None:
    """Google, Groq and Mistral models build with their key set: their packages are runtime dependencies."""
    for variable in ("GOOGLE_API_KEY", "GROQ_API_KEY", "MISTRAL_API_KEY"):
        monkeypatch.setenv(variable, "test-key")
    assert model_problem(make_settings(), "LLM_MODEL", model) is None


@pytest.mark.skipif(importlib.util.find_spec("cohere") is not None, reason="needs the cohere package missing")
def test_a_provider_parley_does_not_ship_names_its_package(make_settings, monkeypatch) -> None:
    """A provider whose package requirements.txt lacks is one line with pydantic-ai's optional group."""
    monkeypatch.delenv(RAILWAY_VARIABLE, raising=False)
    monkeypatch.setenv("CO_API_KEY", "test-key")
    assert model_problem(make_settings(), "LLM_MODEL", "cohere:command-r") == (
        "LLM_MODEL=cohere:command-r needs a provider package that is not installed:"
        ' pip install "pydantic-ai-slim[cohere]"'
    )


def test_an_unknown_model_string_passes_on_the_librarys_suggestion(make_settings) -> None:
    """`google-gla:…` (an older provider name) is refused with pydantic-ai's own "did you mean" kept."""
    problem = model_problem(make_settings(), "LLM_MODEL", "google-gla:gemini-2.5-flash")
    assert problem is not None
    assert problem.startswith("LLM_MODEL is invalid: 'google-gla:gemini-2.5-flash' is not a pydantic-ai model string")
    assert "; pydantic-ai asks: did you mean 'google" in problem
